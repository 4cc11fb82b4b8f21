"""Ctrl-C in a real process: during a reference load that does not end, the check prints its
report and the process exits with 130 (the load is left in a daemon thread, not joined at exit);
a second Ctrl-C quits at once, with what was printed flushed and no noise from Python's own
shutdown."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.engine_server import EngineServer
from tests.integration.ctrl_c import ctrl_c, reaped

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

# rltui's CLI with a reference load that never ends: a real slow load (a big model) cannot be
# made deterministic here; this one blocks until the process goes, and says when it started.
BLOCKED_LOAD = """
import sys, threading
from rltui.checks.rollout import reference_hf

def load(self):
    print("reference load started", file=sys.stderr, flush=True)
    threading.Event().wait()

reference_hf.HFReference.load = load
from rltui.cli import main
sys.exit(main(sys.argv[1:]))
"""

# run_interruptibly with a check that ignores its cancel event; stdout is a pipe (block
# buffered), so the line printed first is lost unless the quit flushes it.
STUCK_CHECK = """
import sys, threading
from rltui.checks.console import run_interruptibly

def run(spec, *, progress=None, cancel=None):
    print("check started", file=sys.stderr, flush=True)
    threading.Event().wait()

sys.stdout.write("printed before the quit\\n")
run_interruptibly(run, None, "stuck")
print("not reached")
"""


def start(tmp_path: Path, script: str, *args: str) -> subprocess.Popen:
    path = tmp_path / "entry.py"
    path.write_text(script, encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("OPENAI_API_KEY", None)
    return subprocess.Popen([sys.executable, str(path), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(process: subprocess.Popen, text: str) -> list[str]:
    seen = []
    for line in process.stderr:
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"the process ended before saying {text!r}: {''.join(seen)}")


def test_ctrl_c_during_a_reference_load_that_never_ends_exits_130(tiny_model, tmp_path):
    from tests.fakes.tinylm import sample_dataset

    dataset = sample_dataset(tmp_path / "d.jsonl", n=4)
    with EngineServer(tiny_model, fast=True) as server:
        process = start(tmp_path, BLOCKED_LOAD, "rollout-check", "--dataset", str(dataset),
                        "--reference", str(tiny_model), "--server", server.v1, "--json")
        with reaped(process):
            before = wait_for_line(process, "reference load started")
            # without the daemon thread, Python would join the load at exit: no end at all
            out, err = ctrl_c(process)
    err = "".join(before) + err
    assert process.returncode == 130, err
    doc = json.loads(out)
    assert doc["partial"] is True and doc["cancelled"] is True and doc["per_sample"] == []
    assert "interrupted" in err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_a_second_ctrl_c_quits_at_once_with_the_output_flushed(tmp_path):
    process = start(tmp_path, STUCK_CHECK)
    with reaped(process):
        wait_for_line(process, "check started")
        process.send_signal(signal.SIGINT)
        wait_for_line(process, "Ctrl-C again to quit at once")
        out, err = ctrl_c(process)
    assert process.returncode == 130, err
    assert out == "printed before the quit\n"
    assert "Traceback" not in err and "Exception ignored" not in err
