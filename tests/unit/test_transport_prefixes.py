"""Any transport prefix around any dump line or log line reads the same as the bare line.

What carries a line to the engineer (Ray's log monitor, torchrun --tee, docker compose, a CI
runner's or kubectl's time stamps, srun --label, pdsh, OpenMPI's --tag-output, a log viewer's
line numbers, an issue thread's quoting) must not change what rltui reads from it.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltui.parsing.noise import strip_noise
from rltui.parsing.pyspy import parse_text
from rltui.parsing.transport import peel

ROOT = Path(__file__).resolve().parents[2]
STACKS = ROOT / "fixtures" / "stacks"
REAL = ROOT / "fixtures" / "real" / "stacks"
LOGS = ROOT / "fixtures" / "logs"

# Bare py-spy and faulthandler dumps: every line of each gets the same carrier.
DUMPS = [p.read_text() for p in (
    STACKS / "stall" / "rank0.txt", STACKS / "cleanup-deadlock" / "rank1.txt",
    STACKS / "threads" / "threads.txt", STACKS / "loop" / "stall-all-ranks.txt",
    REAL / "pytorch-pytorch-pytorch-54531-abort-condensed.txt",
    REAL / "vllm-vllm-project-vllm-50835-enginecore.txt",
)]
LOG_LINES = sorted({line for p in sorted(LOGS.glob("*.log"))
                    for line in p.read_text(errors="replace").splitlines()[:60]})


def _stamp(n: int) -> str:
    return f"2024-05-{1 + n % 28:02d}T12:{n % 60:02d}:00.{n:09d}Z "


# (prefix for line i, the rank it names or None). Each keeps the line's own indentation.
CARRIERS = {
    "ray": (lambda i: "(WorkerDict pid=2314) ", None),
    "ray-ip": (lambda i: "(TaskRunner pid=77, ip=10.0.0.2) ", None),
    "torchrun": (lambda i: "[rank5]:", 5),
    "torchrun-space": (lambda i: "[rank12]: ", 12),
    "torchrun-role": (lambda i: "[default7]:", None),
    "compose": (lambda i: "trainer-1  | ", None),
    "kubectl": (_stamp, None),
    "ci-bracket": (lambda i: f"[2024-05-01T12:00:{i % 60:02d}.123Z] ", None),
    "mpi": (lambda i: "[1,3]<stdout>:", 3),
    "lineno": (lambda i: f"[{i + 1:04d}] ", None),
    "quote": (lambda i: "> ", None),
    "srun": (lambda i: "3: ", 3),
    "pdsh": (lambda i: "gpu-node-07: ", None),
    "stamp+ray": (lambda i: _stamp(i) + "(WorkerDict pid=9) ", None),
    "compose+torchrun": (lambda i: "svc_1    | [rank2]:", 2),
}
STACK_CARRIERS = sorted(CARRIERS)
# Carriers that strip_noise takes off a log line (srun and pdsh prefixes are ambiguous in a log:
# "3: " and "node: " are also what programs print, so only the stack reader takes them, where
# the rest of the line proves it).
LOG_CARRIERS = sorted(set(CARRIERS) - {"srun", "pdsh", "quote"})


def _shape(dumps):
    return [(tuple((t.thread_id, t.name, t.status,
                           tuple((f.name, f.filename, f.line) for f in t.frames))
                          for t in d.threads)) for d in dumps]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dump=st.sampled_from(DUMPS), carrier=st.sampled_from(STACK_CARRIERS),
       repeated=st.sets(st.integers(0, 400), max_size=5))
def test_a_carried_dump_reads_as_the_bare_dump(dump, carrier, repeated):
    prefix, rank = CARRIERS[carrier]
    lines = dump.splitlines()
    carried = "\n".join(
        prefix(i) + line + (" [repeated 3x across cluster]"
                            if i in repeated and line.strip() and carrier.startswith("ray")
                            else "")
        for i, line in enumerate(lines)) + "\n"
    bare = parse_text(dump)
    got = parse_text(carried)
    assert _shape(got) == _shape(bare)
    # Ray's prefix names the writer's pid: it stands in where the dump itself names none
    ray_pid = {"ray": 2314, "ray-ip": 77, "stamp+ray": 9}.get(carrier, 0)
    assert [d.pid for d in got] == [d.pid or ray_pid for d in bare]
    if rank is not None:
        assert {d.rank for d in got} == {rank}


@settings(max_examples=300, deadline=None)
@given(line=st.sampled_from(LOG_LINES), carrier=st.sampled_from(LOG_CARRIERS),
       i=st.integers(0, 10_000))
def test_a_carried_log_line_reads_as_the_bare_line(line, carrier, i):
    prefix, rank = CARRIERS[carrier]
    bare = strip_noise(line)
    got = strip_noise(prefix(i) + line)
    assert got.text.lstrip() == bare.text.lstrip()
    indent = len(bare.text) - len(bare.text.lstrip(" "))
    if indent % 2 == 0:
        # Tracebacks indent by 2 and 4: exact. An odd indent after torchrun's "[rankN]:" is
        # ambiguous (torch >= 2.4 puts one space after the colon, older ones none), so only
        # the text is compared there.
        assert got.text == bare.text
    if rank is not None and bare.rank is None:
        assert got.rank == rank


def test_ambiguous_prefixes_stay_unless_the_rest_is_a_stack_line():
    # "3: " and "node01: " are text a program prints; taken off only before a dump's own line
    assert peel("3: loss went up").text == "3: loss went up"
    assert peel("node01: ready", lambda rest: rest.startswith("Thread ")).text == "node01: ready"
    got = peel('3: Thread 12 (idle): "MainThread"', lambda rest: rest.startswith("Thread "))
    assert got.text.startswith("Thread 12") and got.rank == 3


def test_a_huge_line_is_peeled_on_its_head_only():
    line = "(WorkerDict pid=1) " + "x" * 10_000_000
    got = peel(line)
    assert got.pid == 1 and len(got.text) == 10_000_000
