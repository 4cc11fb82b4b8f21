"""The architecture's import rules (docs/architecture.md): the layers, the pure layers, no
cycles. The rules are import-linter contracts in pyproject.toml ([tool.importlinter], also run
by CI as `lint-imports`); what a static import graph cannot see is checked here at run time."""

import ast
import json
import pathlib
import subprocess
import sys

import pytest

from tests.compat import tomllib
from tests.importcheck import forbidden_loaded

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"


def read_pyproject() -> dict:
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def test_import_contracts_are_kept():
    """Every contract in pyproject.toml: the layers (each module imports only from the layers
    below it, so nothing below the command line imports it), the pure layers, the checks
    without Textual, and no import cycles."""
    pytest.importorskip("importlinter", reason="import-linter needs Python >= 3.11")
    code = ("import sys\nfrom importlinter.cli import lint_imports\n"
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, "
            "no_logo=True))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def _forbidden_contracts():
    contracts = read_pyproject()["tool"]["importlinter"]["contracts"]
    return [c for c in contracts if c["type"] == "forbidden"
            and not c.get("allow_indirect_imports")]


@pytest.mark.parametrize("contract", _forbidden_contracts(), ids=lambda c: c["id"])
def test_forbidden_modules_stay_out_at_run_time(contract):
    """What import-linter cannot see: a module of the standard library that loads a forbidden
    one itself, or an import by name at run time. Every module a forbidden contract names
    (packages with all their modules) is imported in one fresh interpreter, which must not
    hold a forbidden module afterwards."""
    loaded = forbidden_loaded(contract["source_modules"], contract["forbidden_modules"],
                              walk=True, cwd=str(ROOT))
    assert loaded == [], contract["name"]


def test_cli_help_does_not_import_textual_or_psutil():
    """`rltui --help` must stay fast: the heavy packages load only for the command that needs them."""
    code = (
        "import sys, json\n"
        "from rltui import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps([m for m in ('textual', 'psutil', 'pynvml', 'yaml', 'torch', "
        "'transformers', 'httpx', 'httpx2', 'openai') if m in sys.modules]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_app_never_asks_which_mode_it_is_in():
    """Live, replay and across nodes are drivers behind one protocol (rltui/ui/drivers/): the
    app, its screens, widgets and commands never reach for the player, the feed, the cluster
    monitor or the bundle's sources to decide what to do."""
    root = ROOT / "rltui" / "ui"
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


def test_the_layers_name_every_top_level_module():
    """A new package or module of rltui takes its place in the layers (the contract is
    exhaustive) and in the architecture's layout."""
    contracts = read_pyproject()["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")
    assert layers["exhaustive"] is True
    named = {part.strip() for layer in layers["layers"]
             for part in layer.replace(":", "|").split("|")}
    present = {p.stem for p in (ROOT / "rltui").iterdir()
               if (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))
               or (p / "__init__.py").is_file()}
    assert present - named == set()
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [name for name in sorted(present)
               if f"{name}.py" not in architecture and f"{name}/" not in architecture]
    assert missing == []
