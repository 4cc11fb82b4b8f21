"""A command on this node loads nothing of the multi-node side or the checks (a layering fact,
not a timing): rltui.remote, rltui.cluster and rltui.agent are for ``--hosts``/``--ray`` and
``rltui agent``, rltui.checks for the two checks. Each case runs the real command in a fresh
interpreter and lists what it imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
MULTI_NODE = ("rltui.remote", "rltui.cluster", "rltui.agent", "rltui.checks")
SCENARIO = ROOT / "fixtures" / "scenarios" / "demo-oom"
LOG = ROOT / "fixtures" / "logs" / "event-child-failed-python.log"

# On this node the job is told by a name no process has: every process is scanned as usual, and
# a test never runs py-spy on whatever else runs on the machine.
NO_SUCH_JOB = ["--match", "^rltui-test-no-such-job$"]
CASES = {
    "diagnose on this node": ["diagnose", "--duration", "0", *NO_SUCH_JOB],
    "diagnose --json on this node": ["diagnose", "--duration", "0", "--json", *NO_SUCH_JOB],
    "diagnose --replay (an OOM: the triage runs)": ["diagnose", "--replay", str(SCENARIO)],
    "diagnose of a saved log": ["diagnose", "--log", str(LOG), "--duration", "0"],
    "jobs": ["jobs", "--duration", "0", *NO_SUCH_JOB],
}


def _imported_by(argv: list[str]) -> list[str]:
    code = (
        "import contextlib, io, json, sys\n"
        "from rltui import cli\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):\n"
        f"    code = cli.main({argv!r})\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.startswith('rltui.'))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=60)
    code, modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert code in (0, 1, 4), f"{argv}: exit {code}"  # ran: fine, found something, no job
    return modules


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_a_local_command_imports_nothing_of_the_multi_node_side(argv):
    modules = _imported_by(argv)
    assert "rltui.cli.diagnose" in modules  # the command really ran through the CLI
    wrong = [m for m in modules if m.startswith(tuple(p + "." for p in MULTI_NODE))
             or m in MULTI_NODE]
    assert wrong == [], f"rltui {' '.join(argv)} imported {wrong}"


def test_the_multi_node_side_is_still_imported_where_it_is_used():
    """The case above is not vacuous: the host flags do load rltui.remote and rltui.cluster
    (a usage error after the launches are made: no ssh is started)."""
    code = (
        "import contextlib, io, json, sys\n"
        "from rltui import cli\n"
        "from rltui.cli import hosts\n"
        "args = cli.build_parser().parse_args(['diagnose', '--hosts', 'node[1-2]'])\n"
        "hosts.launches(args)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('rltui.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT, timeout=60)
    modules = json.loads(out.stdout.strip().splitlines()[-1])
    assert "rltui.remote.hostlist" in modules and "rltui.remote.transports" in modules


def test_sub_commands_from_other_packages_still_get_their_flags():
    """agent, rollout-check and workflow-check add their flags only when chosen (so that
    diagnose does not import them); chosen, they parse as before."""
    from rltui import cli
    args = cli.build_parser().parse_args(["agent", "--host", "n7", "--no-stacks"])
    assert (args.command, args.host, args.no_stacks) == ("agent", "n7", True)
    args = cli.build_parser().parse_args(["workflow-check", "m:C", "--prompt", "hi"])
    assert (args.command, args.workflow, args.prompt) == ("workflow-check", "m:C", "hi")
    args = cli.build_parser().parse_args(["rollout-check", "--dataset", "d.jsonl",
                                          "--reference", "http://a", "--server", "http://b"])
    assert (args.command, args.dataset, args.server) == ("rollout-check", "d.jsonl", "http://b")
    with pytest.raises(SystemExit):  # an unknown flag of the agent is still refused
        cli.build_parser().parse_args(["agent", "--no-such-flag"])
