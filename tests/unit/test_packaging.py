"""What the project's own files promise about installing it: one version, the license, the
Python versions, a unit suite that installs without torch, ray or transformers, and CI running
exactly the README's test command."""

import pathlib
import re

from tests.compat import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def group(name: str) -> list[str]:
    """A dependency group with its included groups resolved (PEP 735)."""
    out: list[str] = []
    for item in PROJECT["dependency-groups"][name]:
        out += group(item["include-group"]) if isinstance(item, dict) else [item]
    return out


def names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements}


def test_the_version_is_written_once(capsys):
    import rltui
    from rltui import cli

    assert "version" not in PROJECT["project"]
    assert PROJECT["project"]["dynamic"] == ["version"]
    assert PROJECT["tool"]["hatch"]["version"]["path"] == "rltui/__init__.py"
    try:
        cli.main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"rltui {rltui.__version__}"


def test_the_license_file_is_the_one_pyproject_names():
    assert PROJECT["project"]["license"] == "Apache-2.0"
    assert PROJECT["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_python_versions_agree():
    assert PROJECT["project"]["requires-python"] == ">=3.10"
    listed = [c.rsplit(" :: ", 1)[1] for c in PROJECT["project"]["classifiers"]
              if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert listed == ["3.10", "3.11", "3.12", "3.13"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Python 3.10 to 3.13" in readme


def test_the_unit_suite_installs_without_the_heavy_packages():
    unit = names(group("unit"))
    assert not unit & {"torch", "ray", "transformers", "openai"}
    assert {"pytest", "hypothesis", "ruff"} <= unit
    assert names(group("integration")) >= {"torch", "ray", "transformers"}
    test = names(group("test"))
    for name in ("unit", "ui", "integration", "bench"):
        assert names(group(name)) <= test


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Run the tests", 1)[1]
    command = re.search(r"```sh\n(.*?)```", section, re.S).group(1).strip()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci
    assert "--group test" in command and "pytest" in command
