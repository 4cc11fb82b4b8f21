"""Bad command lines get one line on stderr and a documented exit code (rltui.cli.common:
2 usage or input error, 1 nothing found where something was asked for, 4 no job), never a
traceback and never a hang. Each runs the real CLI in a subprocess; the permission cases run
as an unprivileged user (root reads any file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534
TIMEOUT = 60  # a hang fails here (`--duration nan` never returned)


@pytest.fixture(scope="module")
def files():
    # mkdtemp under the system temp folder: traversable by the unprivileged user, unlike
    # pytest's tmp_path (mode 0700 under root's folder)
    root = Path(tempfile.mkdtemp(prefix="rltui-badcli-"))
    root.chmod(0o755)
    locked = root / "locked"
    locked.mkdir(mode=0o700)
    (locked / "a.log").write_text("torch.OutOfMemoryError: CUDA out of memory.\n")
    secret = root / "secret.log"
    secret.write_text("torch.OutOfMemoryError: CUDA out of memory.\n")
    secret.chmod(0o600)
    (root / "big.yaml").write_text("# padding\n" * 200_000)  # 2 MB
    (root / "deep.yaml").write_text("a: " + "[" * 20_000 + "\n")
    (root / "digits.yaml").write_text("history: " + "1" * 5000 + "\n")
    deep = root / "scenario_deep"
    deep.mkdir()
    (deep / "scenario.json").write_text("[" * 100_000)
    stamp = root / "scenario_time"
    stamp.mkdir()
    (stamp / "scenario.json").write_text(json.dumps({"schema_version": 1}))
    (stamp / "readings.jsonl").write_text(json.dumps(
        {"source": "gpus", "timestamp": 1e300, "status": "ok"}) + "\n")
    yield root
    shutil.rmtree(root, ignore_errors=True)


# (arguments, exit code); {d} is the fixtures folder
AS_ANYONE = [
    ("diagnose --duration nan", 2), ("diagnose --duration inf", 2), ("diagnose --duration 1e300", 2),
    ("oom --duration nan", 2), ("jobs --duration nan", 2), ("record {d}/rec --duration nan", 2),
    ("agent --duration nan", 2), ("agent --heartbeat nan", 2),
    ("diagnose --now 1e300", 2), ("diagnose --now nan", 2), ("diagnose --now -5", 2),
    ("diagnose --now " + "1" * 5000, 2), ("diagnose --now 99999-01-01", 2),
    ("replay {d}/scenario_time --speed nan", 2), ("replay {d}/scenario_time --speed inf", 2),
    ("diagnose --replay {d}/scenario_deep", 2), ("diagnose --replay {d}/nonexistent", 2),
    ("diagnose --config {d}/big.yaml --quick", 2), ("diagnose --config {d}/deep.yaml --quick", 2),
    ("diagnose --config {d}/digits.yaml --quick", 2),
    ("diagnose --pid " + "9" * 30 + " --quick", 2), ("diagnose --pid 0 --quick", 2),
    ("diagnose --pid 4194000 --quick", 4),
    ("record /proc/rec --duration 1", 2), ("record /dev/null/x --duration 1", 2),
    ("record /proc --duration 1", 2),
    ("diagnose --connect-timeout 99999999999 --hosts a", 2),
    ("diagnose --report /proc/x --quick --log {d}/digits.yaml", 2),
    ("diagnose --match ( --quick", 2),
]
AS_NOBODY = [
    ("oom --log {d}/secret.log", 2), ("oom --log {d}/locked/a.log", 2),
    ("oom --log {d}/locked/*.log", 2), ("stacks {d}/secret.log", 2),
    ("diagnose --stacks {d}/locked", 2),
    ("diagnose --quick --log {d}/locked/a.log", 0), ("diagnose --quick --log {d}/locked/*.log", 0),
]

# Run as nobody: the interpreter and rltui's modules load first (this Python's own folder may
# be closed to that user), then the user changes, then the command runs.
DROP = """
import importlib, os, pkgutil, sys
import rltui
for m in pkgutil.walk_packages(rltui.__path__, "rltui."):
    if m.name.endswith("__main__") or m.name.startswith(("rltui.ui", "rltui.checks")):
        continue
    try:
        importlib.import_module(m.name)
    except Exception:
        pass
import encodings.idna, glob, json, shlex, yaml
os.setgroups([]); os.setgid(NOBODY); os.setuid(NOBODY)
from rltui.cli import main
raise SystemExit(main(sys.argv[1:]))
""".replace("NOBODY", str(NOBODY))


def _run(argv: list[str], as_nobody: bool, folder: Path) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", ""), "HOME": str(folder),
           "XDG_CONFIG_HOME": str(folder / "no-config")}
    head = [sys.executable, "-c", DROP] if as_nobody else [sys.executable, "-m", "rltui"]
    return subprocess.run(head + argv, capture_output=True, text=True, env=env, cwd="/",
                          stdin=subprocess.DEVNULL, timeout=TIMEOUT, check=False)


def _check(out: subprocess.CompletedProcess, code: int) -> None:
    lines = out.stderr.splitlines()
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert out.returncode == code, (out.returncode, out.stderr[-500:])
    assert len(lines) == 1, out.stderr[-1000:]
    assert lines[0].startswith("rltui"), lines[0]  # "rltui: error:", "rltui oom:", "rltui: warning:"


@pytest.mark.parametrize("args, code", AS_ANYONE, ids=[a[:50] for a, _ in AS_ANYONE])
def test_a_bad_command_line_gets_one_line(files, args, code):
    _check(_run(args.format(d=files).split(" "), False, files), code)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                    reason="needs root to drop to an unprivileged user")
@pytest.mark.parametrize("args, code", AS_NOBODY, ids=[a[:50] for a, _ in AS_NOBODY])
def test_what_the_user_may_not_read_is_said(files, args, code):
    out = _run(args.format(d=files).split(" "), True, files)
    _check(out, code)
    assert "permission denied" in out.stderr.lower() or "cannot" in out.stderr.lower()
