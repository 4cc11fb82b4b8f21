"""The launcher given to --pid exits and its children live on (re-parented to init or a
subreaper): they are still the job. rltui follows the children it once selected, so they stay
live, and the diagnosis never says the training ended."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from rltui.sources.procs import ProcSource

pytestmark = pytest.mark.integration

DEADLINE_S = 20.0
RANKS = 4

# Starts RANKS ranks (a torchrun-like environment), prints their pids, exits on a line on stdin
# without waiting for them.
LAUNCHER = f"""
import os, subprocess, sys
kids = []
for rank in range({RANKS}):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="{RANKS}",
               LOCAL_WORLD_SIZE="{RANKS}", MASTER_ADDR="127.0.0.1", MASTER_PORT="29555")
    kids.append(subprocess.Popen([sys.executable, "-c",
                                  "import time\\nwhile True: time.sleep(1)"],
                                 env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
print(" ".join(str(k.pid) for k in kids), flush=True)
sys.stdin.readline()
os._exit(0)
"""


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def launcher():
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    kids = [int(p) for p in proc.stdout.readline().split()]
    assert len(kids) == RANKS
    watched = [psutil.Process(k) for k in kids]
    wait_for(lambda: all("RANK" in k.environ() for k in watched), "the ranks to start")

    def exit_launcher() -> None:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.wait(timeout=DEADLINE_S) == 0
        wait_for(lambda: all(k.ppid() != proc.pid for k in watched), "the re-parenting")

    proc.kids, proc.exit_launcher = kids, exit_launcher
    yield proc
    for k in watched:
        try:
            k.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(watched, timeout=DEADLINE_S)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_children_stay_selected_and_live_after_the_launcher_exits(launcher):
    source = ProcSource(pids=[launcher.pid], include_children=True)
    before = source.poll()
    assert {p.pid for p in before.payload.procs} == {launcher.pid, *launcher.kids}
    launcher.exit_launcher()
    after = source.poll()
    procs = {p.pid: p for p in after.payload.procs}
    assert set(procs) == set(launcher.kids)  # the launcher is gone, its ranks are not
    assert all(not procs[k].is_zombie for k in launcher.kids)
    assert sorted(procs[k].rank for k in launcher.kids) == list(range(RANKS))


def test_a_followed_child_that_exits_is_dropped_and_its_pid_never_adopted(launcher):
    source = ProcSource(pids=[launcher.pid], include_children=True)
    source.poll()
    launcher.exit_launcher()
    gone = psutil.Process(launcher.kids[0])
    gone.kill()
    wait_for(lambda: not gone.is_running() or gone.status() == psutil.STATUS_ZOMBIE,
             "the rank to die")
    wait_for(lambda: launcher.kids[0] not in {p.pid for p in source.poll().payload.procs
                                                if not p.is_zombie},
             "the dead rank to leave the live list")
    assert {p.pid for p in source.poll().payload.procs if not p.is_zombie} >= set(
        launcher.kids[1:])


def test_the_diagnosis_sees_live_ranks_and_no_end_after_the_launcher_exits(launcher):
    """What `rltui diagnose --pid LAUNCHER` and the screen fold, polled before and after the
    launcher exits: no departed rank, no 'training ended after 0 steps'."""
    from rltui.monitor import Monitor

    source = ProcSource(pids=[launcher.pid], include_children=True)
    monitor = Monitor(host="node", job=f"--pid {launcher.pid}")
    monitor.ingest(source.poll())
    monitor.observe(time.time())
    launcher.exit_launcher()
    monitor.ingest(source.poll())
    monitor.observe(time.time())
    snap, diagnosis = monitor.evaluate(time.time())
    assert {p.pid for p in snap.live_procs} == set(launcher.kids)
    assert not any(d.pid in launcher.kids for d in snap.departed)
    assert "zero-step-completion" not in {s.id for s in diagnosis.symptoms}, diagnosis.symptoms
