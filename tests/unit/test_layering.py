"""The pure layers never import the UI or the outside world (architecture rule)."""

import json
import subprocess
import sys

import pytest

PURE_MODULES = [
    "rltui.model",
    "rltui.serialize",
    "rltui.snapshot",
    "rltui.monitor",
    "rltui.report",
    "rltui.rankset",
    "rltui.units",
    "rltui.redact",
    "rltui.scrub",
    "rltui.parsing.procinfo",
    "rltui.parsing",
    "rltui.diagnosis",
    "rltui.diagnosis.gpu",
    "rltui.diagnosis.ranks",
    "rltui.diagnosis.logs",
    "rltui.logbook",
    "rltui.parsing.events",
    "rltui.parsing.oom",
    "rltui.parsing.tracebacks",
    "rltui.parsing.distfail",
    "rltui.parsing.noise",
    "rltui.parsing.steps",
    "rltui.parsing.frameworks",
    "rltui.parsing.pyspy",
    "rltui.diagnosis.stacks",
    "rltui.diagnosis.stacktree",
    "rltui.diagnosis.hangs",
    "rltui.diagnosis.stackview",
    "rltui.incident",
    "rltui.diagnosis.oom",
    "rltui.diagnosis.oom.types",
    "rltui.diagnosis.oom.estimate",
    "rltui.diagnosis.oom.needs",
    "rltui.diagnosis.oom.suggest",
    "rltui.diagnosis.oom.report",
    "rltui.diagnosis.oom.frameworks",
    "rltui.diagnosis.oom.phase",
    "rltui.diagnosis.oom.numbers",
    "rltui.parsing.jobconfig",
    # the checks' pure halves: comparison, answers, reports, rewards, findings (reading the
    # dataset, the spec's environment, the forms' file checks and exports are I/O: not here)
    "rltui.checks.forms",
    "rltui.checks.params",
    "rltui.checks.rollout.params",
    "rltui.checks.workflow.params",
    "rltui.checks.progress",
    "rltui.checks.rollout.answers",
    "rltui.checks.rollout.compare",
    "rltui.checks.rollout.report",
    "rltui.checks.rollout.render",
    "rltui.checks.rollout.responses",
    "rltui.checks.rollout.verify",
    "rltui.checks.rollout.spec",
    "rltui.checks.workflow.rewards",
    "rltui.checks.workflow.analysis",
    "rltui.checks.workflow.results",
    "rltui.checks.workflow.findings",
    "rltui.checks.workflow.report",
    "rltui.checks.workflow.taskgroups",
    # multi-node: the wire protocol, host lists, transport command lines, stream states
    "rltui.agent.protocol",
    "rltui.remote.hostlist",
    "rltui.remote.transports",
    "rltui.remote.timing",
    "rltui.remote.status",
    "rltui.cluster",
    "rltui.cluster.view",
    "rltui.cluster.skew",
    "rltui.cluster.ranks",
    "rltui.cluster.merge",
    "rltui.cluster.stackmerge",
    "rltui.cluster.diagnose",
    "rltui.cluster.monitor",
]
FORBIDDEN = ["textual", "rich", "pynvml", "psutil", "subprocess"]


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_imports_nothing_forbidden(module):
    code = (
        "import sys, json, importlib\n"
        f"importlib.import_module({module!r})\n"
        f"print(json.dumps([m for m in {FORBIDDEN!r} if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [], f"{module} pulls in {out.stdout.strip()}"


def test_cli_help_does_not_import_textual_or_psutil():
    """`rltui --help` must stay fast: the heavy packages load only for the command that needs them."""
    code = (
        "import sys, json\n"
        "from rltui import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps([m for m in ('textual', 'psutil', 'pynvml', 'yaml', 'torch', "
        "'transformers', 'httpx', 'httpx2', 'openai') if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_checks_never_import_textual():
    """The checks run in the app and headless alike; every module of rltui.checks loads
    without Textual (the screen is the only Textual side)."""
    import pkgutil
    import rltui.checks
    names = [m.name for m in pkgutil.walk_packages(rltui.checks.__path__, "rltui.checks.")
             if not m.name.endswith(".worker")]
    code = ("import sys, json, importlib\n"
            f"for name in {names!r}: importlib.import_module(name)\n"
            "print(json.dumps([m for m in ('textual', 'rich') if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_agent_and_remote_never_import_the_command_line():
    """The command line uses agent/ and remote/, never the other way round: no cycle between
    the CLI and the packages it drives (each command module lives in rltui.cli)."""
    import ast
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2] / "rltui"
    offenders = []
    for package in ("agent", "remote", "cluster", "sources", "diagnosis", "parsing"):
        for path in (root / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                if any(n == "rltui.cli" or n.startswith("rltui.cli.") for n in names):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}")
                if isinstance(node, ast.ImportFrom) and node.module == "rltui" and any(
                        a.name == "cli" for a in node.names):
                    offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []


def test_the_app_never_asks_which_mode_it_is_in():
    """Live, replay and across nodes are drivers behind one protocol (rltui/ui/drivers/): the
    app, its screens, widgets and commands never reach for the player, the feed, the cluster
    monitor or the bundle's sources to decide what to do."""
    import ast
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2] / "rltui" / "ui"
    mode_parts = {"player", "feed", "cluster_monitor", "recorder", "specs", "stacks_source"}
    offenders = []
    for path in root.rglob("*.py"):
        if "drivers" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            # bundle.player, self.bundle.feed, app.bundle.specs ...
            if isinstance(node, ast.Attribute) and node.attr in mode_parts | {"stacks"} and \
                    isinstance(node.value, ast.Attribute) and node.value.attr == "bundle":
                offenders.append(f"{path.relative_to(root)}:{node.lineno} bundle.{node.attr}")
            if isinstance(node, ast.Attribute) and node.attr in mode_parts and \
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "app"):
                offenders.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
    assert offenders == []
