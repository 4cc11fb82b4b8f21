"""The linters CI runs, as tests: ruff with pyproject's [tool.ruff] rules, and vermin (the
package needs nothing newer than Python 3.10). The import contracts are test_layering's."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
VERMIN = ["-t=3.10-", "--no-tips", "--violations", "--eval-annotations", "rltui"]


def test_ruff_finds_nothing():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                          "--output-format", "concise", "."],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_package_needs_nothing_newer_than_python_3_10():
    """What vermin reads of the syntax and the standard library; a regular expression's
    syntax it does not read (the unit suite run on 3.10 in CI does)."""
    out = subprocess.run([sys.executable, "-c", "import sys\nfrom vermin import main\n"
                          "sys.exit(main())", *VERMIN],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
