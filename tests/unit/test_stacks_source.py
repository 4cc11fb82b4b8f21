"""StackSource against fake py-spy executables: small Python scripts written into tmp_path.

Every fake logs its command line to ``calls.log`` and then does what the test asked: print a
dump, refuse, hang, print garbage, or wait for a ``release`` file the test creates. Waits are on
conditions with a deadline, never on a fixed sleep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from rltui.config import PySpy
from rltui.model import DENIED, ERROR, OK, TIMEOUT, UNAVAILABLE, ProcInfo, replace
from rltui.sources import stacks
from rltui.sources.stacks import (
    CLOSING,
    EXITED,
    INSTALL_REMEDY,
    PTRACE_REMEDY,
    STOPPED,
    TIMEOUT_REMEDY,
    StackSource,
)

DEADLINE_S = 15.0
ME, PARENT = os.getpid(), os.getppid()  # live pids that a fake never touches
NO_PID = 2**22 + 7  # above the kernel's pid limit: never a process

HEADER = """\
#!{python}
import json, os, sys, time
DIR = {dir!r}
pid = int(sys.argv[sys.argv.index("--pid") + 1])
with open(os.path.join(DIR, "calls.log"), "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "me": os.getpid()}}) + "\\n")

def dump(name="wait_here"):
    frame = {{"name": name, "filename": "/job/train.py", "module": None,
              "short_filename": "train.py", "line": 7, "locals": None}}
    print(json.dumps([{{"pid": pid, "thread_id": 1, "thread_name": "MainThread",
                        "os_thread_id": pid, "active": False, "owns_gil": False,
                        "frames": [frame]}}]))

def wait_for_file(name):
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(DIR, name)) and time.monotonic() < deadline:
        time.sleep(0.005)

"""

DENIAL = "Permission Denied: Try running again with elevated permissions by going 'sudo env'"


def fake(tmp_path: Path, body: str, name: str = "py-spy") -> str:
    path = tmp_path / name
    path.write_text(HEADER.format(python=sys.executable, dir=str(tmp_path)) + body)
    path.chmod(0o755)
    return str(path)


def calls(tmp_path: Path) -> list[dict]:
    log = tmp_path / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def procs(*pids: int) -> list[ProcInfo]:
    return [ProcInfo(pid=pid, rank=rank) for rank, pid in enumerate(pids)]


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


@pytest.fixture
def make():
    """A StackSource closed after the test."""
    made: list[StackSource] = []

    def build(targets, **settings) -> StackSource:
        source = StackSource(targets if callable(targets) else lambda: targets,
                             PySpy(**settings))
        made.append(source)
        return source

    yield build
    for source in made:
        source.close()


def by_pid(reading, pid):
    return next(d for d in reading.payload.dumps if d.pid == pid)


# -- py-spy missing, no targets --------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["missing", "not executable", "not on PATH"])
def test_missing_py_spy_is_one_unavailable_state(make, tmp_path, kind):
    path = {"missing": str(tmp_path / "py-spy"), "not on PATH": "no-such-py-spy-here"}.get(kind)
    if kind == "not executable":
        path = str(tmp_path / "py-spy")
        Path(path).write_text("#!/bin/sh\n")
    reading = make(procs(ME, PARENT), path=path).poll()
    assert reading.status == UNAVAILABLE and reading.source == "stacks"
    assert "py-spy is not installed" in reading.message
    assert reading.remedy == INSTALL_REMEDY == "pip install py-spy (or set pyspy.path in the config)"
    assert reading.payload is None  # no per-rank errors


def test_no_targets_is_ok_and_runs_nothing(make, tmp_path):
    reading = make([], path=fake(tmp_path, "dump()\n")).poll()
    assert reading.status == OK and reading.message == "no job processes to dump"
    assert reading.payload.dumps == () and reading.payload.trigger == "periodic"
    assert calls(tmp_path) == []


def test_failing_target_list_is_an_error_state(make, tmp_path):
    def broken():
        raise RuntimeError("procs source gone")

    reading = make(broken, path=fake(tmp_path, "dump()\n")).poll()
    assert reading.status == ERROR and "procs source gone" in reading.message


# -- a good round, the command line ----------------------------------------------------------------

def test_round_parses_every_dump_with_its_rank(make, tmp_path):
    source = make(procs(ME, PARENT, ME), path=fake(tmp_path, "dump()\n"))  # ME twice: 1 dump
    reading = source.poll()
    assert reading.status == OK and reading.message == "" and reading.remedy == ""
    poll = reading.payload
    assert [(d.pid, d.rank, d.status, d.source) for d in poll.dumps] == [
        (ME, 0, OK, "live"), (PARENT, 1, OK, "live")]
    for d in poll.dumps:
        assert [f.name for f in d.threads[0].frames] == ["wait_here"]
        assert d.threads[0].name == "MainThread" and d.duration > 0
        assert poll.started <= d.timestamp <= poll.finished <= reading.timestamp
    assert len(calls(tmp_path)) == 2


@pytest.mark.parametrize("call, nonblocking, native, flags", [
    ("poll", True, False, ["--nonblocking"]),
    ("dump_now", True, False, []),
    ("poll", False, False, []),
    ("dump_now", True, True, ["--native"]),
    ("poll", False, True, ["--native"]),
    # py-spy cannot read native frames without pausing: periodic rounds stay nonblocking
    ("poll", True, True, ["--nonblocking"]),
])
def test_command_line_flags(make, tmp_path, call, nonblocking, native, flags):
    exe = fake(tmp_path, "dump()\n")
    source = make(procs(ME), path=exe, nonblocking=nonblocking, native=native)
    poll = getattr(source, call)().payload
    [seen] = calls(tmp_path)
    assert seen["argv"] == ["dump", "--pid", str(ME), "--json", *flags]
    assert poll.command == " ".join([exe, "dump", "--pid", "{pid}", "--json", *flags])
    assert poll.trigger == ("periodic" if call == "poll" else "on-demand")
    assert (poll.nonblocking, poll.native) == ("--nonblocking" in flags, "--native" in flags)


def test_default_command_is_named_as_configured(make, tmp_path, monkeypatch):
    fake(tmp_path, "dump()\n")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    poll = make(procs(ME)).poll().payload
    assert poll.command == "py-spy dump --pid {pid} --json --nonblocking"


def test_a_bare_name_is_also_looked_for_beside_python(make, tmp_path, monkeypatch):
    fake(tmp_path, "dump()\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert make(procs(ME)).poll().status == OK
    assert calls(tmp_path)[0]["argv"][:3] == ["dump", "--pid", str(ME)]
    assert make(procs(ME), path="other-name").poll().status == UNAVAILABLE


# -- ptrace refused --------------------------------------------------------------------------------

@pytest.mark.parametrize("said", [
    DENIAL,
    "Error: Operation not permitted (os error 1)",
    "Error: failed to ptrace attach to the process",
    ("Error: Failed to get process executable name.\n\nCaused by:\n    0: Permission denied "
     "(os error 13)"),
])
def test_denied_for_every_process_is_one_denied_state(make, tmp_path, said):
    exe = fake(tmp_path, f"sys.stderr.write({said!r} + '\\n')\nsys.exit(1)\n")
    reading = make(procs(ME, PARENT), path=exe).poll()
    assert reading.status == DENIED and reading.payload is None
    assert "ptrace refused for all 2 job process(es)" in reading.message
    assert reading.remedy == PTRACE_REMEDY
    for fix in ("root", "sudo", "sysctl kernel.yama.ptrace_scope=0", "--cap-add SYS_PTRACE",
                "securityContext", "capabilities", "SYS_PTRACE"):
        assert fix in reading.remedy


def test_some_denied_is_ok_with_denied_dumps(make, tmp_path):
    exe = fake(tmp_path, f"if pid == {PARENT}:\n    sys.stderr.write({DENIAL!r})\n"
                         f"    sys.exit(1)\ndump()\n")
    reading = make(procs(ME, PARENT), path=exe).poll()
    assert reading.status == OK and reading.remedy == PTRACE_REMEDY
    assert reading.message == "dumped 1 of 2 processes; 1 denied"
    assert by_pid(reading, ME).status == OK
    denied = by_pid(reading, PARENT)
    assert denied.status == DENIED and denied.rank == 1 and "Permission Denied" in denied.message
    assert denied.threads == ()


# -- processes that end during their dump ---------------------------------------------------------

GONE = ("sys.stderr.write('Error: Failed to get process executable name. Check that the process "
        "is running.\\n\\nCaused by:\\n    0: No such file or directory (os error 2)\\n')\n"
        "sys.exit(1)\n")


def test_vanished_and_zombie_and_reused_pids_are_exited_not_failures(make, tmp_path):
    zombie = subprocess.Popen(["true"])
    try:
        wait_for(lambda: psutil.Process(zombie.pid).status() == psutil.STATUS_ZOMBIE, "a zombie")
        reused = ProcInfo(pid=PARENT, rank=3, create_time=1.0)  # the pid names another process
        targets = [*procs(NO_PID, zombie.pid), reused]
        reading = make(targets, path=fake(tmp_path, GONE)).poll()
    finally:
        zombie.wait()
    assert reading.status == OK and reading.payload is not None
    assert [(d.status, d.rank) for d in reading.payload.dumps] == [
        (EXITED, 0), (EXITED, 1), (EXITED, 3)]
    assert reading.payload.dumps[0].message == "the process exited during its dump"


def test_a_zombie_target_is_exited_without_running_py_spy(make, tmp_path):
    reading = make([ProcInfo(pid=ME, rank=0, state="zombie")], path=fake(tmp_path, GONE)).poll()
    assert reading.status == OK and reading.payload.dumps[0].status == EXITED
    assert calls(tmp_path) == []


def test_the_same_failure_on_a_live_process_is_an_error(make, tmp_path):
    reading = make(procs(ME), path=fake(tmp_path, GONE)).poll()
    assert reading.status == ERROR and reading.payload is None
    assert "Failed to get process executable name" in reading.message
    assert "No such file or directory" in reading.message


# -- timeouts, garbage -----------------------------------------------------------------------------

HANG = "if pid == {pid}:\n    time.sleep(120)\ndump()\n"


def test_timeout_kills_py_spy_and_marks_the_dump(make, tmp_path):
    exe = fake(tmp_path, HANG.format(pid=PARENT))
    reading = make(procs(ME, PARENT), path=exe, timeout=0.5).poll()
    assert reading.status == OK and reading.remedy == TIMEOUT_REMEDY
    assert reading.message == "dumped 1 of 2 processes; 1 timed out"
    hung = by_pid(reading, PARENT)
    assert hung.status == TIMEOUT and "longer than 0.5 s" in hung.message
    assert hung.duration >= 0.5
    spies = {c["me"] for c in calls(tmp_path)}
    assert not any(psutil.pid_exists(p) for p in spies)  # killed and reaped


def test_every_dump_timing_out_is_a_timeout_state(make, tmp_path):
    exe = fake(tmp_path, HANG.format(pid="pid"))
    reading = make(procs(ME), path=exe, timeout=0.2).poll()
    assert reading.status == TIMEOUT and reading.payload is None
    assert reading.remedy == TIMEOUT_REMEDY and "1 timed out" in reading.message


@pytest.mark.parametrize("body, said", [
    ("print('hello, this is not json')\n", "not a py-spy --json dump"),
    ("print('{\"a\": 1}')\n", "not a py-spy --json dump"),
    ("pass\n", "py-spy exited without printing a dump"),
    ("print('[]')\n", "the dump holds no threads"),
    (("sys.stderr.write('Error: Failed to find python version\\n\\nStack backtrace:\\n"
      "   0: remoteprocess::ptrace::attach\\n')\nsys.exit(1)\n"),
     "py-spy failed: Failed to find python version"),
    ("sys.stderr.write('x' * 2_000_000)\nsys.exit(3)\n", "py-spy failed: xxx"),
    ("sys.exit(4)\n", "py-spy exited with 4"),
])
def test_garbage_or_failure_is_an_error_dump(make, tmp_path, body, said):
    exe = fake(tmp_path, f"if pid == {PARENT}:\n" + "".join(
        f"    {line}\n" for line in body.splitlines()) + "    sys.exit(0)\ndump()\n")
    reading = make(procs(ME, PARENT), path=exe).poll()
    assert reading.status == OK and reading.message == "dumped 1 of 2 processes; 1 failed"
    bad = by_pid(reading, PARENT)
    assert bad.status == ERROR and said in bad.message and bad.threads == ()
    assert len(bad.message) <= stacks.MAX_MESSAGE
    assert "by hand" in reading.remedy


def test_stdout_is_read_up_to_a_bound(make, tmp_path, monkeypatch):
    monkeypatch.setattr(stacks, "MAX_OUTPUT", 10_000)
    exe = fake(tmp_path, "sys.stdout.write('[' + ' ' * 50_000 + ']')\n")
    reading = make(procs(ME), path=exe).poll()
    assert reading.status == ERROR and "py-spy printed more than" in reading.message


# -- concurrency -----------------------------------------------------------------------------------

# Each fake marks itself running, waits to be released by the test, then unmarks itself.
GATED = """\
mark = os.path.join(DIR, "running", str(pid))
open(mark, "w").close()
wait_for_file(f"release-{pid}")
os.unlink(mark)
dump()
"""


def running(tmp_path: Path) -> set[int]:
    return {int(p.name) for p in (tmp_path / "running").iterdir()}


def test_never_more_than_max_concurrent_py_spy_at_once(make, tmp_path):
    (tmp_path / "running").mkdir()
    pids = [1_000_001 + i for i in range(5)]  # the fakes never look at them
    source = make(procs(*pids), path=fake(tmp_path, GATED), max_concurrent=2)
    result = []
    poller = threading.Thread(target=lambda: result.append(source.poll()))
    poller.start()
    released: list[int] = []
    while len(released) < len(pids):
        expected = min(len(pids), len(released) + 2)
        unreleased = expected - len(released)
        wait_for(lambda n=expected: len(calls(tmp_path)) >= n, f"{expected} py-spy started")
        wait_for(lambda n=unreleased: len(running(tmp_path) - set(released)) >= n,
                 "the started ones to mark themselves")
        now, started = running(tmp_path), len(calls(tmp_path))  # released ones may still run
        assert len(now) <= 2 and started <= len(released) + 2, \
            f"{len(now)} py-spy running at once, {started} started, {len(released)} released"
        pid = min(now - set(released))
        (tmp_path / f"release-{pid}").touch()
        released.append(pid)
    poller.join(DEADLINE_S)
    assert result and result[0].status == OK
    assert [d.status for d in result[0].payload.dumps] == [OK] * 5
    assert len(calls(tmp_path)) == 5


def frames_of(thread: threading.Thread) -> list[str]:
    frame, names = sys._current_frames().get(thread.ident), []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return names


def joined_a_round(thread: threading.Thread) -> bool:
    """The thread waits for another round to finish, without running one of its own."""
    names = frames_of(thread)
    return "_run" in names and "_round" not in names and names[0] == "wait"


def test_a_poll_during_a_round_returns_that_round(make, tmp_path):
    exe = fake(tmp_path, "wait_for_file('release')\ndump()\n")
    source = make(procs(ME), path=exe)
    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.update(first=source.dump_now()))
    first.start()
    wait_for(lambda: len(calls(tmp_path)) == 1, "the first round's py-spy")
    second = threading.Thread(target=lambda: results.update(second=source.poll()))
    second.start()
    wait_for(lambda: joined_a_round(second), "the poll to join the round in flight")
    (tmp_path / "release").touch()
    first.join(DEADLINE_S)
    second.join(DEADLINE_S)
    assert results["second"] is results["first"]
    assert results["first"].payload.trigger == "on-demand"
    assert len(calls(tmp_path)) == 1


def test_dump_now_during_a_periodic_round_waits_and_runs_its_own(make, tmp_path):
    exe = fake(tmp_path, "wait_for_file('release')\ndump()\n")
    source = make(procs(ME), path=exe)
    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.update(first=source.poll()))
    first.start()
    wait_for(lambda: len(calls(tmp_path)) == 1, "the periodic round's py-spy")
    second = threading.Thread(target=lambda: results.update(second=source.dump_now()))
    second.start()
    wait_for(lambda: joined_a_round(second), "dump_now to wait for the round in flight")
    assert len(calls(tmp_path)) == 1  # no second round while the first runs
    (tmp_path / "release").touch()
    first.join(DEADLINE_S)
    second.join(DEADLINE_S)
    assert results["first"].payload.trigger == "periodic"
    assert results["second"].payload.trigger == "on-demand"
    assert [c["argv"][-1] for c in calls(tmp_path)] == ["--nonblocking", "--json"]


# -- close -----------------------------------------------------------------------------------------

def test_close_kills_running_py_spy_and_is_idempotent(make, tmp_path):
    exe = fake(tmp_path, "wait_for_file('never')\ndump()\n")
    source = make(procs(ME, PARENT, NO_PID), path=exe, max_concurrent=2, timeout=60)
    result = []
    poller = threading.Thread(target=lambda: result.append(source.poll()))
    poller.start()
    wait_for(lambda: len(calls(tmp_path)) == 2, "two py-spy running")
    spies = [psutil.Process(c["me"]) for c in calls(tmp_path)]
    source.close()
    poller.join(DEADLINE_S)
    assert not poller.is_alive()
    assert not any(p.is_running() for p in spies)
    dumps = result[0].payload.dumps if result[0].payload else ()
    assert result[0].status == ERROR and CLOSING in result[0].message and not dumps
    assert len(calls(tmp_path)) == 2  # the queued third never started
    source.close()
    after = source.poll()
    assert after.status == UNAVAILABLE and after.message == STOPPED


def test_close_without_a_round_never_raises(make):
    source = make(procs(ME), path="py-spy")
    source.close()
    source.close()


def test_rank_and_timestamps_come_from_the_target_and_clock(tmp_path):
    ticks = iter(range(100, 200))
    source = StackSource(lambda: [ProcInfo(pid=ME, rank=7)],
                         replace(PySpy(), path=fake(tmp_path, "dump()\n")),
                         clock=lambda: float(next(ticks)))
    try:
        reading = source.dump_now()
    finally:
        source.close()
    poll = reading.payload
    [d] = poll.dumps
    assert d.rank == 7 and poll.started == 100.0 and d.timestamp == 101.0
    assert poll.finished == 102.0 and reading.timestamp == 103.0


# -- a stop left behind by a py-spy killed mid-attach --------------------------------------------

STOP_THEN_HANG = "os.kill(pid, 19)\nwhile True:\n    time.sleep(1)\n"  # SIGSTOP, then never end
# A py-spy that attaches with PTRACE_ATTACH (which queues a SIGSTOP to the target) and is killed
# before it collects that stop: the kernel delivers the stop once the tracer is gone.
ATTACH_THEN_HANG = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
    sys.exit(f"ptrace: errno {ctypes.get_errno()}")
while True:
    time.sleep(1)
"""


@pytest.fixture
def sleeper():
    child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
    yield child.pid
    child.kill()
    child.wait()


def test_a_blocking_dump_killed_after_stopping_the_job_resumes_it(make, tmp_path, sleeper):
    exe = fake(tmp_path, ATTACH_THEN_HANG)
    reading = make(procs(sleeper), path=exe, timeout=0.5).dump_now()
    assert reading.status == TIMEOUT
    assert "stopped, by whom unknown" not in reading.message
    wait_for(lambda: psutil.Process(sleeper).status() != psutil.STATUS_STOPPED, "the resume")


def test_a_stop_sent_by_another_process_during_the_dump_is_left_and_said(make, tmp_path,
                                                                         sleeper):
    """A process (here the fake py-spy itself, with kill(2)) that stops the job during the dump
    is someone else: the job stays stopped and the reading says so."""
    reading = make(procs(sleeper), path=fake(tmp_path, STOP_THEN_HANG), timeout=0.5).dump_now()
    assert reading.status == TIMEOUT
    assert f"pid {sleeper} is stopped, by whom unknown: rltui left it stopped" in reading.message
    assert psutil.Process(sleeper).status() == psutil.STATUS_STOPPED
    os.kill(sleeper, 18)


def test_a_job_stopped_before_the_dump_is_left_as_it_was(make, tmp_path, sleeper):
    os.kill(sleeper, 19)
    wait_for(lambda: psutil.Process(sleeper).status() == psutil.STATUS_STOPPED, "the stop")
    make(procs(sleeper), path=fake(tmp_path, STOP_THEN_HANG), timeout=0.3).dump_now()
    assert psutil.Process(sleeper).status() == psutil.STATUS_STOPPED  # someone else's stop
    os.kill(sleeper, 18)


def test_a_nonblocking_dump_never_signals_the_job(make, tmp_path, sleeper):
    make(procs(sleeper), path=fake(tmp_path, STOP_THEN_HANG), timeout=0.3).poll()
    assert psutil.Process(sleeper).status() == psutil.STATUS_STOPPED  # nothing resumed it
    os.kill(sleeper, 18)
