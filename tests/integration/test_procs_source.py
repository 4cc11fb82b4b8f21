"""ProcSource against real processes: children started here with rank environments.

Other jobs may run on the same machine (the demo job of other tests), so the assertions look at
the processes started here rather than at the whole list. Every child signals readiness by
writing a line to a pipe, and every wait is on a condition with a deadline.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rltui.model import DENIED, ERROR, OK
from rltui.serialize import to_data
from rltui.sources.procs import (
    DEFAULT_HOW,
    ENV_DENIED,
    ENV_GONE,
    FDS_DENIED,
    ProcSource,
    env_gpu,
    parse_int,
    ray_class,
    role_of,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PY = os.path.realpath(sys.executable)  # the interpreter itself: `exec -a` must not hit a shim
DEADLINE_S = 15.0

# A rank stand-in: says it is ready on the fd in argv[1], then waits for stdin to close.
READY = "import os, sys\nfd = int(sys.argv[1])\nos.write(fd, b'ready\\n')\nos.close(fd)\n"
IDLE = READY + "sys.stdin.read()\n"
BUSY = READY + "while True:\n    pass\n"  # burns CPU until killed
# Starts a child of its own with the same environment, reports its pid, then waits.
PARENT = (
    "import os, subprocess, sys\nfd = int(sys.argv[1])\n"
    "kid = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],"
    " stdin=subprocess.PIPE)\n"
    "os.write(fd, f'{kid.pid}\\n'.encode())\nos.close(fd)\nsys.stdin.read()\n"
    "kid.kill()\nkid.wait()\n"
)
# Says ready, then on a line from stdin starts a child (rank 1) and reports the child's pid.
LATER = (
    "import os, subprocess, sys\nfd = int(sys.argv[1])\nos.write(fd, b'ready\\n')\n"
    "sys.stdin.readline()\n"
    "kid = subprocess.Popen([sys.executable, '-c', 'import sys; print(flush=True); "
    "sys.stdin.read()'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,"
    " env=dict(os.environ, RANK='1', LOCAL_RANK='1'))\n"
    "kid.stdout.readline()\n"  # it runs: its exec is over (Popen returns before argv is laid out)
    "os.write(fd, f'{kid.pid}\\n'.encode())\nos.close(fd)\nsys.stdin.read()\n"
    "kid.kill()\nkid.wait()\n"
)


def rank_env(rank: int | None = None, local_rank: int | None = None, **extra: str) -> dict:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if rank is not None:
        env |= {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    if local_rank is not None:
        env["LOCAL_RANK"] = str(local_rank)
    return env | extra


class Spawner:
    """Starts children and reads their ready lines; ``cleanup`` ends each one it started."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.extra: list[psutil.Process] = []  # grandchildren, ended by pid + create time

    def start(self, env: dict, code: str = IDLE, args: tuple[str, ...] = (),
              argv0: str | None = None, stdout: str | int | None = "file",
              script: Path | None = None, shell: str | None = None
              ) -> tuple[subprocess.Popen, Ready]:
        r, w = os.pipe()
        program = [PY, str(script)] if script else [PY, "-c", code]
        cmd = [*program, str(w), *args]
        if argv0:  # bash `exec -a` sets argv[0], as Ray's process titles do
            cmd = ["bash", "-c", 'exec -a "$0" "$@"', argv0, *cmd]
        if shell:  # a bash script; FD stands for the ready pipe, $0 is the Python code
            cmd = ["bash", "-c", shell.replace("FD", str(w)), code]
        out = stdout
        if stdout == "file":
            out = open(self.tmp / f"out-{len(self.procs)}.log", "wb")  # noqa: SIM115
        try:
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=out,
                                    stderr=subprocess.DEVNULL, pass_fds=(w,))
        finally:
            os.close(w)
            if stdout == "file":
                out.close()
        self.procs.append(proc)
        return proc, Ready(r)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdin:
                proc.stdin.close()
        for kid in self.extra:
            try:
                if kid.is_running():
                    kid.kill()
            except psutil.NoSuchProcess:
                pass


class Ready:
    """The read end of a child's ready pipe: ``line()`` waits for its next line."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buf = fd, b""

    def line(self) -> str:
        deadline = time.monotonic() + DEADLINE_S
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise AssertionError("child did not report ready in time")
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise AssertionError("child exited before it was ready")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def spawn(tmp_path):
    spawner = Spawner(tmp_path)
    opened: list[Ready] = []

    def start(*args, **kwargs):
        proc, ready = spawner.start(*args, **kwargs)
        opened.append(ready)
        proc.ready_line = ready.line()
        proc.ready = ready
        return proc

    start.spawner = spawner
    start.opened = opened
    yield start
    spawner.cleanup()
    for ready in opened:
        ready.close()


def by_pid(reading, pid):
    return next((p for p in reading.payload.procs if p.pid == pid), None)


def wait_for(condition, what: str):
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# -- discovery -----------------------------------------------------------------------------------

def test_default_finds_ranks_with_their_environment_and_log(spawn, tmp_path):
    r0 = spawn(rank_env(0, 0))
    r1 = spawn(rank_env(1, 1), stdout=subprocess.PIPE)
    reading = ProcSource().poll()
    assert reading.status == OK and reading.source == "procs"
    assert reading.payload.how == DEFAULT_HOW
    p0, p1 = by_pid(reading, r0.pid), by_pid(reading, r1.pid)
    assert (p0.rank, p0.local_rank, p0.world_size, p0.local_world_size) == (0, 0, 2, 2)
    assert (p1.rank, p1.local_rank) == (1, 1)
    assert p0.ppid == os.getpid() and p0.role == "python" and p0.state in ("sleeping", "running")
    assert p0.create_time == pytest.approx(psutil.Process(r0.pid).create_time())
    assert p0.rss > 0 and p0.num_threads >= 1
    assert p0.stdout_path == str(tmp_path / "out-0.log")
    assert p0.stderr_path is None  # /dev/null
    assert p1.stdout_path is None  # a pipe
    assert not p0.partial


def test_processes_without_rank_env_or_not_python_are_ignored(spawn):
    plain = spawn(rank_env())
    not_python = spawn(rank_env(0, 0), shell="echo ready >&FD; exec FD>&-; read x")
    pids = {p.pid for p in ProcSource().poll().payload.procs}
    assert plain.pid not in pids and not_python.pid not in pids


def test_ray_worker_titles_are_found_without_rank_env(spawn):
    gen = spawn(rank_env(), argv0="ray::WorkerDict.actor_rollout_generate_sequences")
    runner = spawn(rank_env(), argv0="ray::TaskRunner.run")
    reading = ProcSource().poll()
    worker = by_pid(reading, gen.pid)
    assert worker.role == "WorkerDict" and worker.rank is None
    assert worker.cmdline[0] == "ray::WorkerDict.actor_rollout_generate_sequences"
    assert by_pid(reading, runner.pid).role == "TaskRunner"


def test_torchrun_launcher_is_found_by_its_command_line(spawn, tmp_path):
    launcher = tmp_path / "torchrun"
    launcher.write_text(IDLE)
    proc = spawn(rank_env(), script=launcher)
    info = by_pid(ProcSource().poll(), proc.pid)
    assert info is not None and info.role == "torchrun" and info.rank is None


def test_children_that_inherit_their_parents_rank_are_folded_into_it(spawn):
    parent = spawn(rank_env(0, 0), code=PARENT)
    kid = int(parent.ready_line)
    spawn.spawner.extra.append(psutil.Process(kid))
    pids = {p.pid for p in ProcSource().poll().payload.procs}
    assert parent.pid in pids and kid not in pids
    named = ProcSource(pids=[parent.pid], include_children=True).poll()
    assert {p.pid for p in named.payload.procs} == {parent.pid, kid}  # asked for: shown


def test_a_process_that_becomes_a_rank_by_exec_is_found_on_recheck(spawn):
    proc = spawn(rank_env(0, 0), shell=f'echo shell >&FD; read x; exec {PY} -c "$0" FD')
    assert proc.ready_line == "shell"
    source = ProcSource(recheck_s=0)
    assert by_pid(source.poll(), proc.pid) is None  # bash, not Python
    proc.stdin.write(b"go\n")
    proc.stdin.flush()
    assert proc.ready.line() == "ready"
    info = by_pid(source.poll(), proc.pid)
    assert info is not None and info.rank == 0


# -- GPU mapping ---------------------------------------------------------------------------------

@pytest.mark.parametrize("visible, local_rank, gpu", [
    ("3,5", 1, 5),
    (None, 1, 1),
    ("GPU-0b7c1a2e-aaaa-bbbb-cccc-000000000001,GPU-0b7c1a2e-aaaa-bbbb-cccc-000000000002", 1,
     None),
])
def test_gpu_from_environment(spawn, visible, local_rank, gpu):
    extra = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    proc = spawn(rank_env(local_rank, local_rank, **extra))
    info = by_pid(ProcSource().poll(), proc.pid)
    assert info.gpu_index == gpu
    assert info.gpu_from == ("env" if gpu is not None else "")


def test_nvml_map_wins_over_environment_and_its_failure_falls_back(spawn):
    proc = spawn(rank_env(0, 0))
    info = by_pid(ProcSource(gpu_map=lambda: {proc.pid: 7}).poll(), proc.pid)
    assert (info.gpu_index, info.gpu_from) == (7, "nvml")

    def broken():
        raise RuntimeError("NVML went away")

    info = by_pid(ProcSource(gpu_map=broken).poll(), proc.pid)
    assert (info.gpu_index, info.gpu_from) == (0, "env")


# -- secrets -------------------------------------------------------------------------------------

def test_secrets_never_leave_the_source(spawn):
    key, token, inline = ("sk-proj-AAAAbbbbCCCCdddd1111", "hf_ZZZZyyyyXXXXwwww2222vvvv",
                          "s3cr3t-inline-value")
    env = rank_env(0, 0, OPENAI_API_KEY=key, NCCL_DEBUG="INFO",
                   TORCH_DISTRIBUTED_DEBUG="DETAIL", NCCL_SOCKET_IFNAME="eth0")
    proc = spawn(env, args=("--api-key", key, f"--hf_token={token}",
                            f"WANDB_API_KEY={inline}", "--lr", "1e-6"))
    reading = ProcSource().poll()
    info = by_pid(reading, proc.pid)
    assert info.cmdline[-6:] == ("--api-key", "***", "--hf_token=***", "WANDB_API_KEY=***",
                                 "--lr", "1e-6")
    assert info.debug_env == (("NCCL_DEBUG", "INFO"), ("NCCL_SOCKET_IFNAME", "eth0"),
                              ("TORCH_DISTRIBUTED_DEBUG", "DETAIL"))
    dumped = json.dumps(to_data(reading))
    for secret in (key, token, inline):
        assert secret not in dumped and secret not in repr(reading)


# -- --match and --pid ---------------------------------------------------------------------------

def test_match_selects_by_command_line_and_never_lists_itself(spawn):
    marker = f"job-marker-{os.getpid()}"
    wanted = spawn(rank_env(), args=(marker,))
    other = spawn(rank_env(0, 0))
    reading = ProcSource(match=rf"{marker}|pytest").poll()
    pids = {p.pid for p in reading.payload.procs}
    assert wanted.pid in pids and other.pid not in pids and os.getpid() not in pids
    assert reading.payload.how == rf"--match {marker}|pytest"


def test_match_that_finds_nothing_says_so():
    reading = ProcSource(match=r"no-such-process-\d{40}").poll()
    assert reading.status == OK and reading.payload.procs == ()
    assert "no process matches" in reading.message and reading.remedy


def test_pid_list_with_and_without_children(spawn):
    parent = spawn(rank_env(), code=PARENT)
    kid = int(parent.ready_line)
    spawn.spawner.extra.append(psutil.Process(kid))
    alone = ProcSource(pids=[parent.pid]).poll()
    assert [p.pid for p in alone.payload.procs] == [parent.pid]
    assert alone.payload.how == f"--pid {parent.pid}"
    family = ProcSource(pids=lambda: [parent.pid], include_children=True).poll()
    assert {p.pid for p in family.payload.procs} == {parent.pid, kid}
    assert family.payload.how == f"--pid {parent.pid} and children"
    assert by_pid(family, kid).ppid == parent.pid


def test_between_full_scans_the_job_and_its_new_children_are_followed(spawn):
    """The live monitor lists the node only every full_scan_s; in between it follows the job's
    processes and finds their new children from the parent, while a new process elsewhere waits
    for the next full scan."""
    now = [0.0]
    source = ProcSource(full_scan_s=60.0, monotonic=lambda: now[0])
    parent = spawn(rank_env(0, 0), code=LATER)
    named = ProcSource(pids=[parent.pid], include_children=True, full_scan_s=60.0,
                       monotonic=lambda: now[0])
    assert by_pid(source.poll(), parent.pid) is not None  # the first poll is a full scan
    assert [p.pid for p in named.poll().payload.procs] == [parent.pid]
    stranger = spawn(rank_env(1, 1))  # a new rank that is no child of the job's processes
    parent.stdin.write(b"go\n")
    parent.stdin.flush()
    kid = int(parent.ready.line())
    spawn.spawner.extra.append(psutil.Process(kid))
    now[0] = 1.0
    followed = {p.pid for p in source.poll().payload.procs}
    assert {parent.pid, kid} <= followed and stranger.pid not in followed
    assert {p.pid for p in named.poll().payload.procs} == {parent.pid, kid}
    now[0] = 61.0
    assert stranger.pid in {p.pid for p in source.poll().payload.procs}


def test_own_pid_is_never_listed():
    reading = ProcSource(pids=[os.getpid()]).poll()
    assert reading.payload.procs == () and "none of the given PIDs" in reading.message


def test_failing_pid_list_is_an_error_reading():
    def gone():
        raise OSError("demo job stopped")

    reading = ProcSource(pids=gone).poll()
    assert reading.status == ERROR and "demo job stopped" in reading.message


# -- lifecycle -----------------------------------------------------------------------------------

def test_process_that_exits_between_polls_is_simply_gone(spawn):
    proc = spawn(rank_env(0, 0))
    source = ProcSource()
    assert by_pid(source.poll(), proc.pid) is not None
    proc.stdin.close()
    proc.wait()
    reading = source.poll()
    assert reading.status == OK and by_pid(reading, proc.pid) is None
    pid_source = ProcSource(pids=[proc.pid])
    reading = pid_source.poll()
    assert reading.status == OK and reading.payload.procs == ()
    assert "none of the given PIDs" in reading.message and reading.remedy


def test_zombie_is_reported_with_its_rank_until_reaped(spawn, tmp_path):
    proc = spawn(rank_env(1, 1))
    source = ProcSource()
    assert by_pid(source.poll(), proc.pid).state != "zombie"
    proc.stdin.close()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    info = by_pid(source.poll(), proc.pid)
    assert info.state == "zombie" and info.is_zombie and info.rank == 1
    assert info.stdout_path == str(tmp_path / "out-0.log")  # where to read how it ended
    first_sight = by_pid(ProcSource(pids=[proc.pid]).poll(), proc.pid)
    assert first_sight.state == "zombie" and first_sight.partial
    assert ENV_GONE in first_sight.partial_reason
    proc.wait()
    assert by_pid(source.poll(), proc.pid) is None


def test_cpu_percent_is_none_first_then_measured(spawn):
    proc = spawn(rank_env(0, 0), code=BUSY)
    source = ProcSource()
    assert by_pid(source.poll(), proc.pid).cpu_percent is None
    start = psutil.Process(proc.pid).cpu_times().user
    wait_for(lambda: psutil.Process(proc.pid).cpu_times().user >= start + 0.1, "CPU time")
    cpu = by_pid(source.poll(), proc.pid).cpu_percent
    assert isinstance(cpu, float) and cpu > 0


def test_deleted_log_file_gives_no_path(spawn, tmp_path):
    proc = spawn(rank_env(0, 0))
    (tmp_path / "out-0.log").unlink()
    assert by_pid(ProcSource().poll(), proc.pid).stdout_path is None


# -- permissions: a real unprivileged scanner looking at a root process --------------------------

NOBODY = 65534
# Imports first: the interpreter's own files may not be readable by the unprivileged user.
SCANNER = """
import json, os, sys
from rltui.sources.procs import ProcSource
os.setgroups([]); os.setgid(NOBODY); os.setuid(NOBODY)
pid = int(sys.argv[1])
named = ProcSource(pids=[pid]).poll()
found = ProcSource().poll()
p = named.payload.procs[0]
print(json.dumps({"status": named.status, "rank": p.rank, "cmdline": p.cmdline,
                  "partial": p.partial, "reason": p.partial_reason, "state": p.state,
                  "default_status": found.status, "denied": found.payload.denied,
                  "default_pids": [q.pid for q in found.payload.procs]}))
""".replace("NOBODY", str(NOBODY))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to an unprivileged user")
def test_unreadable_environment_is_partial_and_counted_as_denied(spawn, tmp_path):
    proc = spawn(rank_env(0, 0), args=("--marker",))
    code = tmp_path / "scan.py"
    code.write_text(SCANNER)  # read by the interpreter before it drops to the unprivileged user
    out = subprocess.run([sys.executable, str(code), str(proc.pid)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
                         cwd="/", timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["status"] == OK and seen["rank"] is None and seen["partial"]
    assert ENV_DENIED in seen["reason"] and FDS_DENIED in seen["reason"]
    assert seen["cmdline"][-1] == "--marker" and seen["state"]
    assert proc.pid not in seen["default_pids"] and seen["denied"] >= 1
    if not seen["default_pids"]:
        assert seen["default_status"] == DENIED


# -- pure rules ----------------------------------------------------------------------------------

@pytest.mark.parametrize("env, gpu", [
    ({"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "3,5"}, 5),
    ({"LOCAL_RANK": "2"}, 2),
    ({}, None),
    ({"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": ""}, None),
    ({"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"}, None),
    ({"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "MIG-1234"}, None),
    ({"LOCAL_RANK": "3", "CUDA_VISIBLE_DEVICES": "6"}, 6),  # one device: that one
    ({"LOCAL_RANK": "4", "CUDA_VISIBLE_DEVICES": "0,1"}, None),  # out of range
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, None),
    ({"LOCAL_RANK": "x", "CUDA_VISIBLE_DEVICES": "0,1"}, None),
    ({"LOCAL_RANK": "1", "CUDA_VISIBLE_DEVICES": " 2, 3 "}, 3),
    ({"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "-1"}, None),
])
def test_env_gpu_rules(env, gpu):
    assert env_gpu(env) == gpu


@pytest.mark.parametrize("value, parsed", [
    ("3", 3), (" 7 ", 7), ("0", 0), ("-1", None), ("", None), ("two", None), (None, None)])
def test_parse_int(value, parsed):
    assert parse_int(value) == parsed


@pytest.mark.parametrize("cmdline, role", [
    (["ray::WorkerDict.actor_rollout_generate_sequences"], "WorkerDict"),
    (["ray::TaskRunner.run()"], "TaskRunner"),
    (["ray::IDLE"], "IDLE"),
    (["VLLM::EngineCore"], "vllm"),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
    (["/usr/bin/python3", "-m", "sglang.launch_server"], "sglang"),
    (["/venv/bin/vllm", "serve", "m"], "vllm"),
    (["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node=8", "train.py"],
     "torchrun"),
    (["python", "-m", "torch.distributed.run", "train.py"], "torchrun"),
    (["python3", "-u", "-m", "verl.trainer.main_ppo", "actor_rollout_ref.rollout.name=vllm"],
     "main_ppo"),
    (["/usr/bin/python3.11", "-X", "faulthandler", "/src/train_ppo.py", "--lr", "1"],
     "train_ppo"),
    (["python", "-c", "print(1)"], "python"),
    ([], "fallback"),
])
def test_role_of(cmdline, role):
    assert role_of(cmdline, "fallback") == role


def test_ray_class_without_method():
    assert ray_class("ray::WorkerDict") == "WorkerDict" and ray_class("ray::") == "ray"
