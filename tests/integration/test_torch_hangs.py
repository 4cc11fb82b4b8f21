"""Real hangs, real dumps: torch.distributed jobs (gloo on CPU) that really deadlock, and the demo
job's scenarios, dumped with the real py-spy, parsed and classified.

Each job in ``torchjobs/`` starts one process per rank with torchrun's variables (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT on a free port) and a one-hour group timeout, so a hung rank
stays hung while the test looks. A rank prints ``ready RANK WHAT`` just before it blocks; the test
waits for that line, then polls py-spy until the expected frame is on the rank's stack (both with
a deadline, never a fixed sleep). Every rank runs in its own session and is killed with its
process group in the fixture's finalizer, pass or fail; a rank also dies with the test process
(parent-death signal) and after ``LIFETIME`` seconds in any case.
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rltui.diagnosis.stacks import (
    BUSY_LOOP,
    CLEANUP_DEADLOCK,
    COLLECTIVE_MISMATCH,
    HANG,
    PROGRESSING,
    SAME_COLLECTIVE,
    UNCLEAR,
    WORKING,
    classify,
    report_json,
    symptoms,
)
from rltui.model import ProcessDump
from rltui.parsing.pyspy import read_folder_entries

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JOBS = Path(__file__).resolve().parent / "torchjobs"
PYSPY = (shutil.which("py-spy", path=str(Path(sys.executable).parent))
         or shutil.which("py-spy"))
DEADLINE = 60.0  # several torch start-ups at once on a loaded machine take a while
LIFETIME = 300  # seconds a rank may live, whatever happens to the test
ALL_REDUCE = "all_reduce"


def _torch_available() -> bool:
    # Not imported here: the jobs import it, the test process need not pay for it.
    return importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module", autouse=True)
def pyspy_can_attach():
    """Skip (not fail) where py-spy is missing or may not ptrace (containers without
    SYS_PTRACE): the rest of the suite covers parsing and classification."""
    if PYSPY is None:
        pytest.skip("py-spy is not installed")
    # py-spy on a process that has not loaded its interpreter yet fails with "Failed to find
    # python version" (CI once skipped a whole module so): attach only once it says it runs
    child = subprocess.Popen([sys.executable, "-c", "print('up', flush=True); input()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()
        out = subprocess.run([PYSPY, "dump", "--pid", str(child.pid)], capture_output=True,
                             text=True, timeout=30)
    finally:
        child.kill()
        child.wait()
    if out.returncode != 0:
        pytest.skip(f"py-spy cannot attach here: {out.stderr.strip()[:200]}")


needs_torch = pytest.mark.skipif(not _torch_available(), reason="torch is not installed")


# -- jobs ------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TorchJob:
    """One torchjobs script, one process per rank; stdout lines are collected by a thread."""

    def __init__(self, script: str, world: int, args: tuple[str, ...], log_dir: Path) -> None:
        self.script, self.world, self.args, self.log_dir = script, world, args, log_dir
        self.procs: list[subprocess.Popen] = []
        self.lines: queue.Queue[tuple[int, str]] = queue.Queue()
        self.seen: list[tuple[int, str]] = []
        self._readers: list[threading.Thread] = []

    def start(self) -> TorchJob:
        port = str(free_port())
        for rank in range(self.world):
            log = open(self.log_dir / f"{Path(self.script).stem}-rank{rank}.log", "w")  # noqa: SIM115
            try:
                proc = self.spawn(rank, [sys.executable, str(JOBS / self.script), *self.args],
                                  env=self.rank_env(rank, port), stdout=subprocess.PIPE,
                                  stderr=log, text=True, start_new_session=True)
            finally:
                log.close()
            self.procs.append(proc)
            reader = threading.Thread(target=self._read, args=(rank, proc), daemon=True)
            reader.start()
            self._readers.append(reader)
        return self

    def rank_env(self, rank: int, port: str) -> dict[str, str]:
        """What torchrun would give the rank on one node (a multi-node job overrides it)."""
        return dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank),
                    WORLD_SIZE=str(self.world), MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=port, TORCHJOB_PARENT=str(os.getpid()),
                    TORCHJOB_LIFETIME=str(LIFETIME), OMP_NUM_THREADS="1",
                    PYTHONWARNINGS="ignore", PYTHONUNBUFFERED="1")

    def spawn(self, rank: int, argv: list[str], **popen) -> subprocess.Popen:
        """Start one rank here (a multi-node job starts it inside its host)."""
        return subprocess.Popen(argv, **popen)

    def _read(self, rank: int, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.lines.put((rank, line.strip()))

    def pid(self, rank: int) -> int:
        return self.procs[rank].pid

    def wait_lines(self, wanted: dict[int, str], after: int = 0) -> dict[int, int]:
        """Wait until each rank in ``wanted`` printed a line starting with its prefix (beyond
        the first ``after`` lines seen); returns rank -> index of that line."""
        found: dict[int, int] = {}
        for i, (rank, line) in enumerate(self.seen[after:], after):
            if rank in wanted and rank not in found and line.startswith(wanted[rank]):
                found[rank] = i
        deadline = time.monotonic() + DEADLINE
        while len(found) < len(wanted):
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"{self.script}: no line {wanted} from ranks "
                            f"{sorted(set(wanted) - set(found))} within {DEADLINE:.0f} s; "
                            f"lines: {self.seen[-10:]}; logs: {self.log_tail()}")
            try:
                rank, line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [r for r in wanted if r not in found and self.procs[r].poll() is not None]
                if dead:
                    pytest.fail(f"{self.script}: ranks {dead} exited before their line "
                                f"{wanted}; logs: {self.log_tail()}")
                continue
            self.seen.append((rank, line))
            if rank in wanted and rank not in found and line.startswith(wanted[rank]):
                found[rank] = len(self.seen) - 1
        return found

    def ready(self, what: dict[int, str]) -> None:
        self.wait_lines({r: f"ready {r} {w}" for r, w in what.items()})

    def log_tail(self) -> str:
        out = []
        for p in sorted(self.log_dir.glob(f"{Path(self.script).stem}-rank*.log")):
            text = p.read_text(errors="replace").strip().splitlines()[-3:]
            out.append(f"{p.name}: {' | '.join(text)}")
        return "; ".join(out)

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the rank and anything it forked
            except (ProcessLookupError, PermissionError):
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        for reader in self._readers:
            reader.join(timeout=5)


@pytest.fixture
def torch_job(request, tmp_path):
    """``torch_job(script, world, *args)`` starts a job; the finalizer kills every rank."""
    def start(script: str, world: int, *args: str) -> TorchJob:
        job = TorchJob(script, world, args, tmp_path)
        request.addfinalizer(job.stop)  # before start: a half-started job is killed too
        return job.start()
    return start


# -- py-spy ----------------------------------------------------------------------------------------

def pyspy(pid: int, *options: str) -> str:
    out = subprocess.run([PYSPY, "dump", "--pid", str(pid), *options], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, f"py-spy dump --pid {pid} {' '.join(options)}: {out.stderr}"
    return out.stdout


def main_names(pid: int) -> list[str]:
    """Bare function names of the MainThread, innermost first ([] if it has none yet)."""
    for thread in json.loads(pyspy(pid, "--json")):
        if thread.get("thread_name") == "MainThread":
            return [f["name"].rsplit(".", 1)[-1] for f in thread["frames"]]
    return []


def wait_for_frame(pid: int, name: str, within: int = 1) -> None:
    """Poll py-spy until ``name`` is among the ``within`` innermost frames of the MainThread.
    A rank that has not loaded its interpreter yet makes py-spy fail ("Failed to find python
    version"): that is "not yet", as an empty stack is (CI once failed on it)."""
    deadline = time.monotonic() + DEADLINE
    names: list[str] = []
    last = ""
    while time.monotonic() < deadline:
        try:
            names = main_names(pid)
        except AssertionError as exc:  # py-spy failed on this try
            last = str(exc).splitlines()[0]
            names = []
        if name in names[:within]:
            return
        time.sleep(0.05)
    pytest.fail(f"pid {pid}: {name} never showed on the MainThread; last: {names or last}")


def dump(pids: dict[int, int], fmt: str = "json", *options: str) -> list[ProcessDump]:
    """One sample: every rank dumped with py-spy, read as ``rltui stacks DIR`` reads files
    (the rank comes from the file name). ``fmt``: json, txt, or mixed (odd ranks as text)."""
    entries = []
    for r, pid in pids.items():
        ext = fmt if fmt != "mixed" else ("txt" if r % 2 else "json")
        extra = ("--json",) if ext == "json" else ()
        entries.append((f"rank{r}.{ext}", pyspy(pid, *extra, *options)))
    dumps, problems = read_folder_entries(entries)
    assert problems == [], problems
    assert sorted(d.rank for d in dumps) == sorted(pids)
    return dumps


def two_samples(pids: dict[int, int], *options: str) -> list[list[ProcessDump]]:
    """Two samples, one JSON and one text: both formats must group alike."""
    return [dump(pids, "json", *options), dump(pids, "txt", *options)]


def by_ranks(report):
    return {c.ranks: c for c in report.classes}


def check_symptom(report, symptom_id: str, ranks: tuple[int, ...]) -> None:
    (s,) = symptoms(report)
    assert s.id == symptom_id and s.ranks == ranks
    assert s.severity == "critical"  # two samples, stacks unchanged
    json.dumps(report_json(report))


# -- the torch jobs --------------------------------------------------------------------------------

@needs_torch
def test_pattern_a_cleanup_in_exit_while_others_wait_in_all_reduce(torch_job):
    job = torch_job("cleanup_deadlock.py", 3)
    job.ready({0: ALL_REDUCE, 1: ALL_REDUCE, 2: "cleanup"})
    for r in (0, 1):
        wait_for_frame(job.pid(r), ALL_REDUCE)
    wait_for_frame(job.pid(2), "barrier")
    samples = two_samples({r: job.pid(r) for r in range(3)})

    report = classify(samples)
    assert (report.verdict, report.pattern, report.symptom_id) == (HANG, "A", CLEANUP_DEADLOCK)
    assert report.suspect_ranks == (2,) and report.confirmed
    loop, cleanup = by_ranks(report)[(0, 1)], by_ranks(report)[(2,)]
    assert cleanup.teardown and cleanup.op.name == "barrier"
    assert cleanup.call_site.name == "Trainer.close"
    assert not loop.teardown and loop.op.name == ALL_REDUCE
    # torch wraps every collective in a decorator closure: the call site is the user's frame
    assert loop.call_site.name == "Trainer.sync_gradients"
    assert "Trainer.sync_gradients" in report.explanation
    assert "c10d_logger" not in report.explanation
    check_symptom(report, CLEANUP_DEADLOCK, (2,))
    assert classify(samples, world_size=3).pattern == "A"
    one = classify(samples[-1])
    assert one.pattern == "A" and not one.confirmed


@needs_torch
def test_pattern_a_cleanup_in_a_finally_of_main(torch_job):
    job = torch_job("cleanup_deadlock.py", 2, "finally")
    job.ready({0: ALL_REDUCE, 1: "cleanup"})
    wait_for_frame(job.pid(0), ALL_REDUCE)
    wait_for_frame(job.pid(1), "barrier")
    samples = two_samples({r: job.pid(r) for r in range(2)})

    report = classify(samples)
    assert (report.pattern, report.symptom_id, report.suspect_ranks) == \
        ("A", CLEANUP_DEADLOCK, (1,))
    cleanup = by_ranks(report)[(1,)]
    assert cleanup.teardown and cleanup.call_site.name == "main"
    check_symptom(report, CLEANUP_DEADLOCK, (1,))


@needs_torch
def test_pattern_b_different_collectives(torch_job):
    job = torch_job("collective_mismatch.py", 3)
    job.ready({0: ALL_REDUCE, 1: ALL_REDUCE, 2: "all_gather"})
    for r in (0, 1):
        wait_for_frame(job.pid(r), ALL_REDUCE)
    wait_for_frame(job.pid(2), "all_gather")
    samples = two_samples({r: job.pid(r) for r in range(3)})

    report = classify(samples, world_size=3)
    assert (report.pattern, report.symptom_id, report.suspect_ranks) == \
        ("B", COLLECTIVE_MISMATCH, (2,))
    assert report.missing_ranks == ()
    classes = by_ranks(report)
    assert classes[(0, 1)].op.name == ALL_REDUCE and classes[(2,)].op.name == "all_gather"
    assert classes[(2,)].call_site.name == "Trainer.log_metrics"
    assert report.divergence.name == "Trainer.train_step"
    assert {b.name for b in report.branches} == {"Trainer.sync_gradients",
                                                 "Trainer.log_metrics"}
    check_symptom(report, COLLECTIVE_MISMATCH, (2,))


@needs_torch
def test_pattern_b_same_collective_from_different_call_sites(torch_job):
    job = torch_job("collective_mismatch.py", 2, "sites")
    job.ready({0: "recv", 1: "recv"})
    for r in (0, 1):
        wait_for_frame(job.pid(r), "recv")
    samples = two_samples({r: job.pid(r) for r in range(2)})

    report = classify(samples)
    assert (report.pattern, report.symptom_id) == ("B", COLLECTIVE_MISMATCH)
    assert report.suspect_ranks == ()  # one against one: no odd one out
    classes = by_ranks(report)
    assert classes[(0,)].op.name == classes[(1,)].op.name == "recv"
    assert classes[(0,)].call_site.name == "PipelineStage.recv_activations"
    assert classes[(1,)].call_site.name == "PipelineStage.recv_gradients"
    assert "recv_activations" in report.explanation and "recv_gradients" in report.explanation


@needs_torch
def test_pattern_c_every_dumped_rank_in_the_same_all_reduce(torch_job):
    """Rank 3 joins the group and never calls the collective, like a stalled peer on another
    node: the ranks dumped here all wait at the same line."""
    job = torch_job("same_collective.py", 4)
    job.ready({0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE, 3: "stalled peer"})
    for r in range(3):
        wait_for_frame(job.pid(r), ALL_REDUCE)
    here = {r: job.pid(r) for r in range(3)}
    samples = two_samples(here)

    for report in (classify(samples), classify(samples, expected_ranks=here)):
        assert (report.verdict, report.pattern, report.symptom_id) == \
            (HANG, "C", SAME_COLLECTIVE)
        assert report.suspect_ranks == () and report.missing_ranks == ()
        (c,) = report.classes
        assert c.ranks == (0, 1, 2) and c.state == "stuck"
        assert c.call_site.name == "Trainer.sync_gradients"
        check_symptom(report, SAME_COLLECTIVE, (0, 1, 2))

    # --native (text and JSON in one sample): C frames below all_reduce, among them C++ names
    # with parentheses, and addresses py-spy found no symbol for, which differ per process;
    # the ranks still form one class.
    native = dump(here, "mixed", "--native")
    frames = [f for d in native for f in d.threads[0].frames]
    assert any(f.native and f.name.startswith("0x") for f in frames)
    assert not any("(" in f.filename for f in frames)  # C++ names kept whole in text dumps
    report = classify(native)
    assert report.pattern == "C" and len(report.classes) == 1
    assert report.classes[0].op.name == ALL_REDUCE
    assert report.classes[0].call_site.name == "Trainer.sync_gradients"

    # Dumped too, the peer that never came is the odd one out of a mismatch.
    wait_for_frame(job.pid(3), "park", within=3)
    everyone = classify(dump({r: job.pid(r) for r in range(4)}))
    assert (everyone.pattern, everyone.suspect_ranks) == ("B", (3,))


@needs_torch
def test_a_rank_that_died_while_the_others_wait(torch_job):
    job = torch_job("rank_exit.py", 3)
    job.ready({0: ALL_REDUCE, 1: ALL_REDUCE})
    assert job.procs[2].wait(timeout=DEADLINE) == 1
    for r in (0, 1):
        wait_for_frame(job.pid(r), ALL_REDUCE)
    samples = two_samples({r: job.pid(r) for r in range(2)})

    report = classify(samples, world_size=3)
    assert (report.pattern, report.symptom_id) == ("A", CLEANUP_DEADLOCK)
    assert report.suspect_ranks == (2,) and report.missing_ranks == (2,)
    assert "exited" in report.title and "network" not in report.explanation
    (s,) = symptoms(report)
    assert s.ranks == (2,) and any("traceback" in e for e in s.evidence)
    # Without the world size nothing says a rank is gone: the same collective everywhere.
    assert classify(samples).pattern == "C"


@needs_torch
def test_healthy_loop_is_not_a_hang(torch_job):
    """Two samples some time apart, taken in different phases of the step (each rank says
    which phase it enters): the stacks move, so the job is progressing."""
    job = torch_job("healthy.py", 2)
    pids = {r: job.pid(r) for r in range(2)}
    rollout = job.wait_lines({r: f"phase {r} rollout" for r in pids})
    first = dump(pids)
    update = job.wait_lines({r: f"phase {r} update" for r in pids}, after=max(rollout.values()))
    second = dump(pids)
    stacks = [[next(t for t in d.threads if t.name == "MainThread").frames[0].name for d in s]
              for s in (first, second)]
    assert stacks[0] != stacks[1], f"the stacks did not change: {stacks} ({update})"

    report = classify([first, second])
    assert report.verdict == PROGRESSING and report.symptom_id is None
    assert report.pattern is None and symptoms(report) == []
    # One sample is no hang either: ranks on CPU are working, ranks idle in a sleep unclear
    # (which of the two depends on where the dump catches the step).
    for alone in (classify(first), classify(second)):
        assert alone.verdict in (UNCLEAR, WORKING) and symptoms(alone) == []


@needs_torch
def test_busy_loop_names_the_loop(torch_job):
    job = torch_job("busy_loop.py", 2)
    job.ready({0: "poll", 1: "poll"})
    pids = {r: job.pid(r) for r in range(2)}
    for pid in pids.values():
        wait_for_frame(pid, "wait_for_rewards", within=2)
    samples = [dump(pids), dump(pids, "txt"), dump(pids)]
    job.stop()  # two ranks spinning on two cores: stop them as soon as the dumps are taken

    report = classify(samples)
    assert (report.verdict, report.symptom_id, report.pattern) == (HANG, BUSY_LOOP, None)
    assert report.loop_frame.name == "RewardClient.wait_for_rewards"
    assert report.suspect_ranks == (0, 1)
    assert all(c.state == "stuck" and c.active for c in report.classes)
    (s,) = symptoms(report)
    assert any("busy loop at RewardClient.wait_for_rewards" in e for e in s.evidence)
    # One sample of ranks on CPU outside any collective: working, not a hang.
    assert classify(samples[0]).verdict == WORKING


# -- the demo job ----------------------------------------------------------------------------------

DEMO = {
    # scenario: (ranks, live ranks -> innermost frames expected, pattern, suspects, world_size)
    "stall": (3, {r: ALL_REDUCE for r in range(3)}, "C", (), None),
    "cleanup-deadlock": (3, {0: "recv_object_list", 1: "recv_object_list",
                             2: "destroy_process_group"}, "A", (2,), None),
    "collective-mismatch": (2, {0: ALL_REDUCE, 1: ALL_REDUCE}, "B", (), None),
    "rank-exit": (3, {0: ALL_REDUCE, 1: ALL_REDUCE}, "A", (2,), 3),
}


@pytest.mark.parametrize("scenario", list(DEMO))
def test_demo_scenarios_on_real_dumps(scenario, tmp_path):
    from rltui.demo import DemoJob

    ranks, frames, pattern, suspects, world = DEMO[scenario]
    job = DemoJob(scenario, ranks=ranks, run_dir=tmp_path, fail_step=2,
                  step_seconds=0.2).start()
    try:
        pids = {r: job.rank_pids()[r] for r in frames}
        for r, name in frames.items():
            wait_for_frame(pids[r], name)
        samples = two_samples(pids)
    finally:
        job.stop()
    report = classify(samples, world_size=world)
    assert report.verdict == HANG and report.pattern == pattern
    assert report.symptom_id == {"A": CLEANUP_DEADLOCK, "B": COLLECTIVE_MISMATCH,
                                 "C": SAME_COLLECTIVE}[pattern]
    assert report.suspect_ranks == suspects and report.confirmed


# -- the default diagnose confirms what its first sample suggests ---------------------------------

def _default_diagnose(pids: list[int]) -> tuple[int, dict, str]:
    argv = [sys.executable, "-m", "rltui", "diagnose", "--json"]
    for pid in pids:
        argv += ["--pid", str(pid)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return out.returncode, json.loads(out.stdout), out.stderr


@needs_torch
def test_default_diagnose_confirms_a_live_hang_with_a_second_sample(torch_job):
    """No --duration: the first sample suggests a hang, a second one a gap later confirms it,
    and the verdict is critical (the pattern's symptom), with the samples in the JSON."""
    job = torch_job("collective_mismatch.py", 3)
    job.ready({0: ALL_REDUCE, 1: ALL_REDUCE, 2: "all_gather"})
    wait_for_frame(job.pid(2), "all_gather")
    code, doc, stderr = _default_diagnose([job.pid(r) for r in range(3)])
    assert code == 1, stderr
    assert "confirming with a second one" in stderr
    assert doc["samples"] == 2 and doc["samples_apart_s"] >= 4.5
    hang = next(s for s in doc["symptoms"] if s["id"] == COLLECTIVE_MISMATCH)
    assert hang["severity"] == "critical"
    assert doc["stacks"]["confirmed"] is True and doc["stacks"]["pattern"] == "B"


@needs_torch
def test_default_diagnose_quick_keeps_one_sample(torch_job):
    job = torch_job("collective_mismatch.py", 3)
    job.ready({0: ALL_REDUCE, 1: ALL_REDUCE, 2: "all_gather"})
    wait_for_frame(job.pid(2), "all_gather")
    argv = [sys.executable, "-m", "rltui", "diagnose", "--json", "--quick",
            *[a for r in range(3) for a in ("--pid", str(job.pid(r)))]]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    doc = json.loads(out.stdout)
    assert "confirming" not in out.stderr and "samples" not in doc
    hang = next(s for s in doc["symptoms"] if s["id"] == COLLECTIVE_MISMATCH)
    assert hang["severity"] == "warning"


@needs_torch
def test_default_diagnose_sees_a_busy_loop_in_two_samples(torch_job):
    """One sample of ranks on CPU is "working"; the confirming samples name the busy loop, a
    warning while nothing says the steps stalled (a long step looks the same)."""
    job = torch_job("busy_loop.py", 2)
    job.ready({0: "poll", 1: "poll"})
    for r in range(2):
        wait_for_frame(job.pid(r), "wait_for_rewards", within=2)
    code, doc, stderr = _default_diagnose([job.pid(r) for r in range(2)])
    job.stop()
    assert doc["samples"] == 3, stderr
    busy = next(s for s in doc["symptoms"] if s["id"] == BUSY_LOOP)
    assert busy["severity"] == "warning" and code == 0
    assert "third sample" in stderr


@needs_torch
def test_default_diagnose_on_a_healthy_job_is_healthy(torch_job):
    job = torch_job("healthy.py", 2)
    job.wait_lines({r: f"phase {r} rollout" for r in range(2)})
    code, doc, stderr = _default_diagnose([job.pid(r) for r in range(2)])
    assert code == 0, stderr
    assert not any(s["severity"] == "critical" for s in doc["symptoms"]), doc["symptoms"]
