"""``rltui serve``'s command line: the app's command each session runs (read-only unless
--allow-actions, the app's options passed on), the checks made before serving, the lines
printed at start; and that no other command loads textual-serve. The server itself, its token
and a real browser: tests/integration/test_serve.py and test_serve_browser.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rltui.cli import EXIT_USAGE, build_parser, main
from rltui.cli.serve import app_argv, banner

ROOT = Path(__file__).parents[2]
SCENARIO = ROOT / "fixtures" / "scenarios" / "demo-oom"


def served(*argv: str) -> list[str]:
    return app_argv(build_parser().parse_args(["serve", *argv]))


def test_a_session_is_read_only_unless_actions_are_allowed():
    assert served("--replay", "rec") == ["--read-only", "replay", "rec", "--speed=1"]
    assert served("--replay", "rec", "--allow-actions") == ["replay", "rec", "--speed=1"]
    assert served() == ["--read-only"]  # this node's job, as `rltui`
    assert served("--demo", "nccl-hang", "--ranks", "8") == [
        "--read-only", "demo", "--scenario=nccl-hang", "--ranks=8"]


def test_the_apps_options_are_passed_on_whatever_their_place():
    argv = ["--job", "5", "serve", "--pid", "7", "--log", "/l/*.log", "--match=-x",
            "--config", "c.yaml", "--ssh-option=-p2222", "--hosts", "n[1-2]", "--port", "9"]
    assert app_argv(build_parser().parse_args(argv)) == [
        "--config=c.yaml", "--match=-x", "--pid=7", "--job=5", "--log=/l/*.log",
        "--hosts=n[1-2]", "--ssh-option=-p2222", "--read-only"]
    # and the app's parser reads them back as they were given
    back = build_parser().parse_args(app_argv(build_parser().parse_args(argv)))
    assert (back.pid, back.job, back.match, back.ssh_option, back.read_only) == (
        [7], "5", "-x", ["-p2222"], True)


def test_every_option_serve_takes_from_the_app_is_passed_on():
    """serve takes the app's options after its own name too (the same add_* helpers), and
    each reaches the sessions: APP_OPTIONS names every one of them."""
    import argparse

    from rltui.cli.common import (
        add_config_option,
        add_host_options,
        add_oom_options,
        add_source_options,
    )
    from rltui.cli.serve import APP_OPTIONS
    app = argparse.ArgumentParser(add_help=False)
    for add in (add_config_option, add_source_options, add_host_options, add_oom_options):
        add(app)
    assert {a.dest: a.option_strings[0] for a in app._actions} == APP_OPTIONS
    argv = served("--job-config", "/jobs/ppo.yaml", "--model-config", "/models/q")
    assert argv == ["--job-config=/jobs/ppo.yaml", "--model-config=/models/q", "--read-only"]


def test_the_read_only_flag_is_the_apps_and_hidden():
    assert build_parser().parse_args(["--read-only", "replay", "x"]).read_only
    assert not build_parser().parse_args(["replay", "x"]).read_only
    assert "--read-only" not in build_parser().format_help()


@pytest.mark.parametrize("argv, message", [
    (["--replay", str(SCENARIO), "--demo", "healthy"], "one or the other"),
    (["--speed", "2"], "only with --replay"),
    (["--demo", "no-such"], "no such scenario"),
    (["--replay", str(ROOT / "no-such-folder")], "no-such-folder"),
    (["--replay", str(SCENARIO), "--hosts", "n1"], "--hosts: not an option of replay"),
    (["--port", "70000"], "not a port"),
    (["--config", str(ROOT / "no-such.yaml")], "not found"),
], ids=["replay-and-demo", "speed-alone", "scenario", "recording", "hosts-on-replay", "port",
        "config"])
def test_a_mistake_is_said_before_serving(argv, message, capsys):
    assert main(["serve", *argv]) == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_the_banner_leads_with_the_url_and_its_token(monkeypatch):
    monkeypatch.setattr("socket.gethostname", lambda: "gpu-node-07")
    text = banner("127.0.0.1", 8123, "TOKEN", "rltui --read-only", allow_actions=False)
    first, *rest = text.splitlines()
    assert first == "rltui serve: open http://127.0.0.1:8123/TOKEN/"
    assert "  from your machine: ssh -L 8123:127.0.0.1:8123 gpu-node-07, then open the URL " \
           "above" in rest
    assert any(r.startswith("  read-only:") for r in rest)
    everywhere = banner("0.0.0.0", 8123, "TOKEN", "rltui", allow_actions=True)
    assert everywhere.startswith("rltui serve: open http://gpu-node-07:8123/TOKEN/\n")
    assert "ssh -L" not in everywhere and "actions allowed" in everywhere
    assert banner("::1", 1, "T", "rltui", False).startswith("rltui serve: open http://[::1]:1/T/")


def test_no_other_command_loads_textual_serve():
    """serve is registered by name only: `rltui --help`, the app's parser and a local
    diagnose import neither rltui.cli.serve nor textual-serve (nor aiohttp)."""
    code = (
        "import contextlib, io, json, sys\n"
        "from rltui import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    cli.main(['diagnose', '--replay', {str(SCENARIO)!r}])\n"
        "    try:\n"
        "        cli.main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps(['serve' in out.getvalue(), sorted(m for m in sys.modules if m in\n"
        "    ('rltui.cli.serve', 'rltui.cli.serve_http', 'textual_serve', 'aiohttp'))]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT, timeout=60)
    listed, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert listed  # the command is there in the help
    assert loaded == []
