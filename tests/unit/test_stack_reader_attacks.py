"""Attacks on the stack readers: bad input must neither crash nor stall them, and pasted dumps
must be read as what they are.

The texts here are written for these tests in the documented forms (py-spy text,
faulthandler, transport prefixes, separators); they are inputs, not samples of real output,
except where a file of ``fixtures/real/stacks`` is named.

Each test names the input, and its docstring or assertion what must happen.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltui.parsing import noise, stacktext, transport
from rltui.parsing.noise import strip_noise
from rltui.parsing.pyspy import parse_any, read_folder_entries
from rltui.parsing.transport import peel

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "real" / "stacks"
MB = 1 << 20


# CPU time of this process, not wall time: a bound on the work done, whatever else the
# machine runs meanwhile (a wall-clock bound failed while another suite ran beside it)
def _timed(fn, *args):
    t0 = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t0


def _best(fn, arg, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - t0)
    return best


def _read(text, source="x.txt"):
    dumps, problems = parse_any(text, source)
    assert isinstance(dumps, list) and isinstance(problems, list)
    return dumps, problems


def _shape(dumps):
    return [(d.pid, d.rank, [(t.name, [f.name for f in t.frames]) for t in d.threads])
            for d in dumps]


# -- 1. bad input: no exception, no stall ----------------------------------------------------------

GARBAGE = {
    "binary": bytes(range(256)).decode("latin-1") * 4096,
    "nul": "\x00" * MB,
    "nul-lines": "\x00\n" * (MB // 2),
    "ten-mb-line": "a" * (10 * MB),
    "ten-mb-indented-line": "    " + "f" * (10 * MB) + " (a.py:1)",
    "open-parens": "(" * MB,
    "open-brackets": "[" * MB,
    "digits": "7" * MB,
    "spaces": " " * MB,
    "thread-repeated": "Thread " * (MB // 7),
    "nested-parens": "(" * (MB // 2) + ")" * (MB // 2),
    "nested-parens-frame": "Thread 1 (idle)\n    f" + "(" * MB + " (a.py:1)" + ")" * MB + "\n",
    "paren-pairs-frame": "Thread 1 (idle)\n    f " + "()" * (MB // 2) + " (a.py:1)\n",
    "prefix-only-lines": "[rank1]:(WorkerDict pid=1) \n" * 40000,
    "prefix-chain-line": "[rank1]:(W pid=1) 2024-01-01T00:00:00Z svc-1  | " * 20000,
    "escape-runs": "\x1b]" * (MB // 2) + "\x1b[" * (MB // 2) + "\x1bP" * (MB // 2),
    "ray-30-digit-pid": "(WorkerDict pid=" + "9" * 30 + ") Thread 0x1 (idle)\n    f (a.py:1)\n",
    "ray-1mb-actor": "(" + "A" * MB + " pid=3) Thread 0x1 (idle)\n",
    "huge-torchrun-rank": "[rank99999999999]: Thread 0x1 (idle)\n[rank99999999999]:     f (a.py:1)\n",
    "huge-process-pid": "Process 99999999999999999999: python\nThread 1 (idle)\n    f (a.py:1)\n",
    "huge-thread-hex": "Thread 0x" + "f" * 100 + " (idle)\n    f (a.py:1)\n",
    "huge-thread-dec": "Thread " + "9" * 5000 + " (idle)\n    f (a.py:1)\n",
    "huge-fh-line": 'Thread 0x1 (most recent call first):\n  File "x", line 9999999999999999999999 '
                    "in f\n",
    "huge-pyspy-line": "Thread 1 (idle)\n    f (a.py:" + "9" * 5000 + ")\n",
    "huge-debug-rank": "=== Rank " + "9" * 5000 + ": h:1 ===\nThread 1 (idle)\n    f (a.py:1)\n",
    "huge-sglang-pid": "Pyspy dump for PID " + "9" * 5000 + ":\nThread 1 (idle)\n    f (a.py:1)\n",
    "huge-ray-stack": "Stack dump for root " + "9" * 5000 + " x\nThread 1 (idle)\n    f (a.py:1)\n",
    "million-frame-lines": "Thread 1 (idle)\n" + "    f (a.py:1)\n" * 1_000_000,
    "million-empty-lines": "\n" * 1_000_000,
    "deep-json": "[" * MB,
    "json-objects": '[{"frames": [' * 50000,
    "bom-json": "\ufeff[" + "{}," * 100000,
    "unicode-separators": "Thread 1 (idle)\u2028    f (a.py:1)\x85\x0c\x1c" * 20000,
}


@pytest.mark.parametrize("name", sorted(GARBAGE))
def test_parse_any_never_raises_and_stays_near_linear(name):
    text = GARBAGE[name]
    (dumps, problems), took = _timed(parse_any, text, "rank0.txt")
    assert isinstance(dumps, list) and isinstance(problems, list)
    if not dumps:
        assert problems, "an input with no dump must say why"
    # two seconds a MB; a text of short lines costs a few microseconds a line instead
    budget = 1.5 + 2.0 * len(text) / MB + 3e-6 * text.count("\n")
    assert took < budget, f"{took:.2f}s for {len(text) / MB:.1f} MB"


def test_a_huge_condensed_count_is_capped():
    text = '99999 processes are in:\nThread 1 (idle): "MainThread"\n    f (a.py:1)\n'
    dumps, _ = _read(text)
    assert len(dumps) == stacktext.MAX_DUMPS
    assert len({d.pid for d in dumps}) == len(dumps)


def test_folder_reader_never_raises_on_garbage():
    files = [(f"rank{i}.txt", GARBAGE[n]) for i, n in enumerate(
        ["binary", "nul", "open-parens", "huge-process-pid", "huge-fh-line", "deep-json"])]
    dumps, problems = read_folder_entries(files)
    assert isinstance(dumps, list) and problems


_FRAGMENTS = [
    "Process 12: python x.py", "Python v3.11.2 (/usr/bin/python)",
    'Thread 12 (idle): "MainThread"', "Thread 0x7F01 (active+gil)", "Thread (idle)",
    "    f (a.py:1)", "\tg (b.py:2)", "    h (<frozen runpy>:88)", "    0x7f (libc.so.6)",
    "    {lambda(c10d::Work*)#1}::_FUN (libtorch_python.so)",
    '  File "a.py", line 3 in f', '  File "a.py", line 3, in f',
    "Current thread 0x00007f01 (most recent call first):",
    "Thread 0x00007f02 [worker] (most recent call first):",
    "Stack (most recent call first):", "Fatal Python error: Aborted", "Timeout (0:05:00)!",
    "=== Rank 3: h:1 ===", "--- Rank 2:  ---", "Stack dump for root 12 0 0 0 0 ? S 0 0:00 python x",
    "[2025-01-01 12:00:00 DP1 TP3] Pyspy dump for PID 12:", "== pid 7 ==", "rank 3:",
    "6 processes are in:", "ranks 0-3 are in:", "4 in:", "Error: timeout", "", " ", "\t",
    "<no Python frame>", "...", "        Arguments:", "            x: 1", "Locals:",
    "Traceback (most recent call last):", "[rank1]:", "[rank1]: ", "[default0]:",
    "(WorkerDict pid=3) ", "(A(rank=2) pid=4, ip=1.2.3.4) ", "(raylet) ", "svc-1  | ",
    "2024-01-01T00:00:00.123Z ", "[2024-01-01T00:00:00Z] ", "3: ", "  12: ", "node1: ",
    "[1,2]<stdout>:", "[0042] ", "> ", "\x1b[31m", "\x1b]0;t\x07", "\x1b", "\x9b1m",
    " [repeated 3x across cluster]", "\r", "\x00", "(", ")", "[", "]", ":", '"', "\ufeff",
    "[{", '{"', "\u2028", "\x85", "9" * 40, "0x" + "f" * 40,
]
_LINE = st.lists(st.sampled_from(_FRAGMENTS) | st.text(max_size=6), max_size=5).map("".join)
_TEXT = st.lists(_LINE, max_size=50).map("\n".join) | st.text(max_size=400)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_TEXT, newline=st.booleans())
def test_parse_any_is_total_on_dump_like_noise(text, newline):
    text += "\n" if newline else ""
    dumps, problems = _read(text, "rank3.txt")
    for d in dumps:
        assert isinstance(d.pid, int)
        assert d.rank is None or isinstance(d.rank, int)
        for t in d.threads:
            assert isinstance(t.frames, tuple)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(line=_LINE | st.text(max_size=200))
def test_line_cleaners_are_total(line):
    c = strip_noise(line)
    assert isinstance(c.text, str)
    p = peel(line)
    assert isinstance(p.text, str)
    q = peel(line, lambda rest: True)
    assert isinstance(q.text, str)
    assert noise.level_of(c.text) in ("error", "warning", "")


# -- 1b. linear time on one long line ----------------------------------------------------------------

_LONG_LINE_UNITS = ["a", "(", "[", "7", " ", "Thread ", "(a", "a ", "a: ", "3: ", "\x1b]", "\x1bP",
                    "\x1b[0", "\x1b", "\x9b0", "(a pid=1,", "[rank1]:", "\r[", "\r(", "a  | ",
                    "> ", "[1] ", "(A(", " [repeated 3x across cluster]"]
_CLEANERS = {
    "strip_noise": strip_noise,
    "peel": peel,
    "peel-accept": lambda s: peel(s, stacktext._stack_line),
}


@pytest.mark.parametrize("unit", _LONG_LINE_UNITS)
@pytest.mark.parametrize("cleaner", sorted(_CLEANERS))
def test_line_cleaners_are_linear(cleaner, unit):
    fn = _CLEANERS[cleaner]
    one = (unit * (MB // len(unit) + 1))[:MB]
    ten = (unit * (10 * MB // len(unit) + 1))[:10 * MB]
    t1 = _best(fn, one)
    t10 = _best(fn, ten, repeat=1)
    # linear is ~10x; allow noise, but not the ~100x of a quadratic scan
    assert t10 < 30 * t1 + 0.05, f"{cleaner} on {unit!r}: 1 MB {t1:.4f}s, 10 MB {t10:.4f}s"


# -- 3. regex safety -------------------------------------------------------------------------------

_REGEX_MODULES = (transport, stacktext, noise)
_REGEXES = sorted({f"{m.__name__}.{n}": p for m in _REGEX_MODULES for n, p in vars(m).items()
                   if isinstance(p, re.Pattern)}.items())
_REGEX_UNITS = ["(", ")", "[", " ", "a", "1", "pid=", ",", "\x1b", "\x1b]", "\x1bP", "|", ":",
                '"', "0x", "rank", "Thread ", 'File "', '", line 1', " in ", "=== Rank 1: ",
                "-", "\t", "in:", "(a ", "a(", "2024-01-01T00:00:00"]


def test_the_modules_hold_regexes_to_check():
    assert len(_REGEXES) >= 20


def _methods(name: str, rx: re.Pattern):
    """How the code uses a pattern: every one is matched at a line's head; the ANSI patterns
    scan the whole line (``sub``); a few are searched (bounded or not)."""
    yield "match", rx.match
    if "ANSI" in name:
        yield "sub", lambda s: rx.sub("", s)
    if name.rsplit(".", 1)[-1] in _SEARCHED:
        yield "search", rx.search


# Searched over a whole (up to 64 KiB) line or a whole actor name. REPEATED is searched only in
# a line's last 64 characters (its leading ``\s*`` makes an unbounded search quadratic).
_SEARCHED = {"_SGLANG", "_COUNT", "_RAY_RANK", "_SEP_RANK", "_SEP_PID", "_LOCAL_RANK",
             "_ERROR", "_WARNING"}


@pytest.mark.parametrize("name", [n for n, _ in _REGEXES])
def test_every_regex_is_linear_on_adversarial_runs(name):
    rx = dict(_REGEXES)[name]
    slow = []
    for meth, fn in _methods(name, rx):
        for unit in _REGEX_UNITS:
            for pre in ("", "(", "["):
                small = pre + unit * (10_000 // len(unit))
                big = pre + unit * (100_000 // len(unit))
                t1 = _best(fn, small, repeat=2)
                if t1 < 0.0005:
                    continue
                t10 = _best(fn, big, repeat=1)
                if t10 > 30 * t1 + 0.02:
                    slow.append((meth, pre + unit, round(t1, 4), round(t10, 4)))
    assert not slow, f"{name}: {slow}"


def test_the_repeat_suffix_is_only_searched_in_the_tail():
    line = " " * (4 * MB) + "x [repeated 3x across cluster]"
    for fn in (strip_noise, peel):
        _, took = _timed(fn, line)
        assert took < 0.5
    assert strip_noise(line).repeated == 3


# -- 2. readings that must hold (behaviour the docs promise) -----------------------------------------

PS_100 = """Process 100: python train.py
Python v3.11.4 (/usr/bin/python3)

Thread 100 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2050)
    train (train.py:10)
    <module> (train.py:20)
"""
PS_TWO_THREADS = """Process 4242: python train.py
Python v3.11.4 (/usr/bin/python3)

Thread 4242 (idle): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2050)
    train (train.py:10)
    <module> (train.py:20)
Thread 4250 (idle): "Thread-1"
    wait (threading.py:320)
"""
FATAL = """Fatal Python error: Segmentation fault

Thread 0x00007f0000000001 (most recent call first):
  File "train.py", line 10 in train
  File "train.py", line 20 in <module>
"""


def _second(ps: str) -> str:
    return ps.replace("100", "200").replace("all_reduce", "barrier")


@pytest.mark.parametrize("prefix", [
    lambda r: f"[rank{r}]:", lambda r: f"[rank{r}]: ", lambda r: f"(WorkerDict pid={7 + r}) ",
    lambda r: f"{r}: ", lambda r: f"trainer-{r}  | ", lambda r: f"[1,{r}]<stdout>:",
    lambda r: f"node0{r}: ",
], ids=["torchrun", "torchrun-space", "ray", "srun", "compose", "mpi", "pdsh"])
def test_interleaved_writers_are_read_apart(prefix):
    a, b = PS_100.splitlines(), _second(PS_100).splitlines()
    text = "".join(f"{prefix(0)}{x}\n{prefix(1)}{y}\n" for x, y in zip(a, b))
    dumps, _ = _read(text)
    assert [(d.pid, [f.name for f in d.threads[0].frames][0]) for d in dumps] == [
        (100, "all_reduce"), (200, "barrier")]


def test_ranks_from_prefixes():
    a, b = PS_100.splitlines(), _second(PS_100).splitlines()
    dumps, _ = _read("".join(f"[rank3]:{x}\n[rank5]:{y}\n" for x, y in zip(a, b)))
    assert [(d.pid, d.rank) for d in dumps] == [(100, 3), (200, 5)]


def test_separators_name_the_next_dump():
    text = ("----- rank 3 (pid 100) -----\n" + PS_100 + "== rank 4 ==\n" + _second(PS_100))
    dumps, _ = _read(text)
    assert [(d.pid, d.rank) for d in dumps] == [(100, 3), (200, 4)]


def test_debug_server_sections_give_ranks():
    text = ("=== Rank 0: host:1 ===\n" + PS_100 + "=== Rank 1: host:2 ===\n" + _second(PS_100))
    dumps, _ = _read(text)
    assert [(d.pid, d.rank) for d in dumps] == [(100, 0), (200, 1)]


def test_a_second_dump_of_the_same_thread_ids_is_another_process():
    text = FATAL + "\n" + FATAL.replace("Segmentation fault", "Aborted")
    dumps, _ = _read(text)
    assert len(dumps) == 2 and all(d.status == "crashed" for d in dumps)
    assert len({d.pid for d in dumps}) == 2


def test_a_hard_wrapped_frame_is_joined():
    text = ('Thread 100 (idle): "MainThread"\n'
            "    all_reduce (/opt/env/site-packages/torch/distributed/distri\n"
            "buted_c10d.py:2050)\n"
            "    <module> (train.py:20)\n")
    (d,), _ = _read(text)
    f = d.threads[0].frames[0]
    assert (f.name, f.filename, f.line) == (
        "all_reduce", "/opt/env/site-packages/torch/distributed/distributed_c10d.py", 2050)


def test_locals_are_not_frames():
    text = ('Thread 100 (idle): "MainThread"\n'
            "    all_reduce (torch/distributed/distributed_c10d.py:2050)\n"
            "        Arguments:\n"
            "            tensor: <Tensor at 0x7f>\n"
            "        Locals:\n"
            "            work (a.py:1)\n"
            "    <module> (train.py:20)\n")
    (d,), _ = _read(text)
    assert [f.name for f in d.threads[0].frames] == ["all_reduce", "<module>"]


def test_a_rank_log_line_just_before_a_crash_names_its_rank():
    text = "[rank3]:[E ProcessGroupNCCL.cpp:1] Watchdog caught collective timeout\n" + FATAL
    (d,), _ = _read(text)
    assert (d.rank, d.status) == (3, "crashed")


def test_a_timestamped_or_ray_carried_fatal_error_is_a_crash():
    for prefix in ("2024-05-01T12:00:00.000Z ", "(WorkerDict pid=5) ", "[rank2]:"):
        (d,), _ = _read("".join(f"{prefix}{line}\n" for line in FATAL.splitlines()))
        assert d.status == "crashed", prefix


def test_a_traceback_after_a_dump_is_not_read_into_it():
    tb = ('Traceback (most recent call last):\n  File "train.py", line 20, in <module>\n'
          "    main()\n")
    (d,), _ = _read(PS_100 + tb)
    assert [f.name for f in d.threads[0].frames] == ["all_reduce", "train", "<module>"]


# -- 2. wrong readings (bugs) ----------------------------------------------------------------------

def test_srun_labelled_fatal_error_marks_the_dump_crashed_real_fixture():
    text = (REAL / "pytorch-pytorch-pytorch-135486-srun-segfault.txt").read_text()
    (d,), _ = _read(text)
    assert d.status == "crashed"
    assert "Segmentation fault" in d.message


@pytest.mark.parametrize("prefix", ["3: ", "node01: "])
def test_ambiguously_labelled_fatal_error_marks_the_dump_crashed(prefix):
    (d,), _ = _read("".join(f"{prefix}{line}\n" for line in FATAL.splitlines()))
    assert d.status == "crashed"


def test_a_log_traceback_before_a_dump_is_not_a_process():
    tb = ('Traceback (most recent call last):\n'
          '  File "train.py", line 20, in <module>\n'
          "    main()\n"
          '  File "train.py", line 10, in main\n'
          '    raise RuntimeError("x")\n'
          "RuntimeError: x\n")
    dumps, _ = _read(tb + PS_100)
    assert _shape(dumps) == [(100, None, [("MainThread", ["all_reduce", "train", "<module>"])])]


def test_a_rank_log_line_does_not_name_an_unrelated_pyspy_dump():
    text = "[rank1]: step 5 loss 0.5\n" + PS_100
    (d,), _ = _read(text)
    assert d.rank is None


@pytest.mark.parametrize("log", ["rank 3: loss 0.5", "worker pid 77 exited"])
def test_a_log_line_inside_a_dump_does_not_split_the_process(log):
    text = PS_TWO_THREADS.replace("Thread 4250", f"{log}\nThread 4250")
    dumps, _ = _read(text)
    assert len(dumps) == 1
    assert [t.name for t in dumps[0].threads] == ["MainThread", "Thread-1"]
    assert dumps[0].pid == 4242


def test_a_rank_log_line_before_a_dump_is_not_a_separator():
    (d,), _ = _read("rank 3: loss 0.5\n" + PS_TWO_THREADS)
    assert d.rank is None


def test_a_pid_log_line_does_not_override_the_main_thread_id():
    headerless = PS_TWO_THREADS.split("\n", 3)[3]
    (d,), _ = _read("pid 42 started\n" + headerless)
    assert d.pid == 4242


def test_a_rank_range_count_stands_for_every_rank_in_it():
    text = ('ranks 0-3 are in:\nThread 1 (idle): "MainThread"\n'
            "    all_reduce (torch/distributed/distributed_c10d.py:2050)\n")
    dumps, _ = _read(text)
    assert len(dumps) == 4


def test_condensed_counts_cannot_amplify_a_small_text():
    block = '99999 processes are in:\nThread 1 (idle): "MainThread"\n    f (a.py:1)\n'
    # CPU time of this process (other work on the machine must not make it fail). The bound
    # is no speed target (benchmarks measure speed): 10 x 99,999 copies, unbounded, would take
    # minutes; capped at MAX_DUMPS they take about 2 s here, and a loaded CI machine more.
    start = time.process_time()
    dumps, _ = _read(block * 10)
    took = time.process_time() - start
    assert took < 15.0, f"{took:.1f}s for {len(block) * 10} bytes"
    assert len(dumps) <= stacktext.MAX_DUMPS


def test_dropping_dumps_over_the_cap_is_reported():
    n = stacktext.MAX_DUMPS + 100
    dumps, problems = _read("Process 1: x\nThread 1 (idle)\n    f (a.py:1)\n" * n)
    assert len(dumps) == stacktext.MAX_DUMPS
    assert f"{n} dumps; only the first {stacktext.MAX_DUMPS} were read" in " ".join(problems)


def test_a_process_header_followed_by_a_long_log_is_linear():
    def text(n):
        return ("Process 1: python x.py\n" + ("x" * 60 + "\n") * n
                + 'Thread 1 (idle): "MainThread"\n    f (a.py:1)\n')
    small, big = text(20_000), text(80_000)
    _, t1 = _timed(_read, small)
    _, t4 = _timed(_read, big)
    assert t4 < 8 * t1 + 0.2, f"x4 input: {t1:.2f}s -> {t4:.2f}s"


def test_labelled_blank_lines_are_blank():
    text = "".join(f"0: {line}\n" for line in PS_100.splitlines())
    _, problems = _read(text)
    assert not any("not understood" in p for p in problems)
