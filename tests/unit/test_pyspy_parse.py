"""py-spy dump parsing, on real dumps of the demo job saved in fixtures/stacks (see its README)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.diagnosis.stacktree import choose_thread
from rltui.model import ERROR, Frame, ProcessDump, ThreadStack
from rltui.parsing.pyspy import (
    CUT,
    ELIDED,
    KEEP_INNER,
    KEEP_OUTER,
    DumpParseError,
    frame_key,
    parse_any,
    parse_json,
    parse_text,
    rank_from_filename,
    read_folder_entries,
)

STACKS = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"


def folder(name: str) -> list[tuple[str, str]]:
    return [(p.name, p.read_text()) for p in sorted((STACKS / name).iterdir())]


def main_names(dump: ProcessDump) -> list[str]:
    thread = next(t for t in dump.threads if t.name == "MainThread")
    return [f.name.rsplit(".", 1)[-1] for f in thread.frames]


# scenario folder -> MainThread's innermost frames per rank (bare function names)
SCENARIOS = {
    "stall": {r: ["all_reduce", "_sync_gradients", "train_step", "train", "main"]
              for r in range(3)},
    "cleanup-deadlock": {
        0: ["recv_object_list", "_shape_inference", "step", "_run_train", "train", "main"],
        1: ["recv_object_list", "_shape_inference", "step", "_run_train", "train", "main"],
        2: ["destroy_process_group", "destroy", "close", "__exit__", "main"]},
    "collective-mismatch": {0: ["all_reduce", "forward", "train_step", "train", "main"],
                            1: ["all_reduce", "backward", "train_step", "train", "main"]},
    "rank-exit": {r: ["all_reduce", "_sync_gradients", "train_step", "train", "main"]
                  for r in range(2)},
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_folders(scenario):
    dumps, problems = read_folder_entries(folder(scenario))
    assert problems == []
    expected = SCENARIOS[scenario]
    assert [d.rank for d in dumps] == sorted(expected)
    for d in dumps:
        assert d.status == "ok" and d.pid > 0 and d.source
        names = main_names(d)
        assert names[:len(expected[d.rank])] == expected[d.rank]
        assert names[-2:] == ["_run_code", "_run_module_as_main"]
        main = choose_thread(d.threads)
        assert main is not None and main.name == "MainThread" and main.status == "idle"
        assert not main.active
        # both formats give the same short file names and lines
        assert main.frames[0].filename == "rltui/demo/dist.py" and main.frames[0].line > 0
        assert not any(f.native for f in main.frames)


def test_text_and_json_of_the_same_rank_agree():
    text = parse_text((STACKS / "stall/rank0.txt").read_text(), "rank0.txt")
    js = parse_json((STACKS / "options/stall-rank0-native.json").read_text(), "x.json")
    assert text[0].pid == js[0].pid
    assert text[0].python_version == "3.11.7" and js[0].python_version == ""
    assert text[0].command == "/usr/bin/python3.11 -m rltui.demo.rank"
    py_js = [frame_key(f, True) for f in js[0].threads[0].frames if not f.native]
    assert [frame_key(f, True) for f in text[0].threads[0].frames] == py_js


def test_method_frames_keep_the_class():
    d = parse_text((STACKS / "stall/rank0.txt").read_text())[0]
    assert d.threads[0].frames[1].name == "Trainer._sync_gradients"


@pytest.mark.parametrize("name", ["stall-rank0-native.txt", "stall-rank0-native.json"])
def test_native_frames(name):
    dumps, problems = parse_any((STACKS / "options" / name).read_text(), name)
    assert problems == []
    frames = dumps[0].threads[0].frames
    assert (frames[0].name, frames[0].filename, frames[0].line, frames[0].native) == \
        ("recv", "libc.so.6", 0, True)
    assert frames[1].native and frames[1].filename == "socketmodule.c" and frames[1].line == 921
    assert frames[-1].native and frames[-1].line == 0  # an address with no symbol
    assert choose_thread(dumps[0].threads).name == "MainThread"
    assert "_run_code" in [f.name for f in frames] and not frames[-2].native


def test_locals_blocks_are_skipped():
    plain = parse_text((STACKS / "stall/rank0.txt").read_text())[0]
    with_locals, problems = parse_any((STACKS / "options/stall-rank0-locals.txt").read_text(), "l")
    assert problems == []
    assert [frame_key(f, True) for f in with_locals[0].threads[0].frames] == \
        [frame_key(f, True) for f in plain.threads[0].frames]


@pytest.mark.parametrize("name", ["threads.txt", "threads.json"])
def test_threads_idle_nameless_and_deep(name):
    dumps, problems = parse_any((STACKS / "threads" / name).read_text(), name)
    assert problems == [] and len(dumps) == 1
    by_name = {t.name: t for t in dumps[0].threads}
    assert set(by_name) == {"MainThread", "heartbeat", "deep", ""}  # "" = py-spy knew no name
    assert all(t.status == "idle" for t in dumps[0].threads)
    assert [f.name for f in by_name[""].frames] == ["raw_thread"]
    deep = by_name["deep"].frames  # 1500 recursive frames, bounded
    assert len(deep) == KEEP_INNER + 1 + KEEP_OUTER
    assert deep[KEEP_INNER].name == ELIDED and deep[KEEP_INNER].filename.endswith(" frames")
    assert deep[-1].name == "Thread._bootstrap"
    assert deep[2].name == "recurse"
    # nobody waits in a collective; Event.wait in threading.py does not count
    assert choose_thread(dumps[0].threads).name == "MainThread"


def test_thread_id_decimal_and_hex():
    text = ('Process 7: python x.py\nPython v3.10.4 (/usr/bin/python3.10)\n\n'
            'Thread 0x7F4A2B3C4700 (active+gil): "MainThread"\n    run (x.py:3)\n'
            'Thread 12399 (active)\n    helper (x.py)\n')
    d = parse_text(text)[0]
    assert [(t.thread_id, t.status, t.name) for t in d.threads] == \
        [(0x7F4A2B3C4700, "active+gil", "MainThread"), (12399, "active", "")]
    assert d.threads[0].active and d.threads[1].frames[0] == Frame("helper", "x.py", 0)


def test_multiline_command():
    d = parse_text((STACKS / "mixed-python/rank1.txt").read_text())[0]
    assert d.python_version == "3.12.1" and d.command.count("\n") == 3
    assert [f.name for f in d.threads[0].frames] == \
        ["Condition.wait", "Event.wait", "wait_forever", "<module>"]


def test_concatenated_loop_output():
    dumps, problems = read_folder_entries(folder("loop"))
    assert problems == []
    assert len(dumps) == 6 and all(d.rank is None for d in dumps)
    assert [d.pid for d in dumps] == sorted(d.pid for d in dumps)  # no rank: ordered by pid
    by_pid = {d.pid: main_names(d)[0] for d in dumps}
    assert sorted(by_pid.values()) == ["all_reduce"] * 3 + ["destroy_process_group"] + \
        ["recv_object_list"] * 2


def test_concatenated_json_values():
    one = (STACKS / "stall/rank1.json").read_text()
    dumps = parse_json(one + "\n" + one.replace('"pid": 9050', '"pid": 9051'))
    assert [d.pid for d in dumps] == [9050, 9051]


@pytest.mark.parametrize("name, reason", [
    ("empty.txt", "empty file"),
    ("garbage.txt", "not a stack dump"),
    ("pyspy-error.txt", "py-spy failed instead of dumping: Failed to get process"),
    ("not-a-dump.json", "not a py-spy --json dump"),
    ("truncated.json", "cut short"),
])
def test_bad_files_give_a_reason_and_no_dump(name, reason):
    text = (STACKS / "bad" / name).read_text()
    dumps, problems = parse_any(text, name)
    assert dumps == [] and len(problems) == 1
    assert problems[0].startswith(name + ": ") and reason in problems[0]
    parser = parse_json if name.endswith(".json") and text else parse_text
    with pytest.raises(DumpParseError, match=reason):
        parser(text, name)


def test_truncated_text_keeps_the_frames_before_the_cut():
    dumps, problems = parse_any((STACKS / "bad/truncated.txt").read_text(), "truncated.txt")
    # The frames beyond the cut are unknown: a marker, not the last whole frame, ends the stack.
    assert [f.name for f in dumps[0].threads[0].frames] == \
        ["recv_object_list", "PipelineSchedule._shape_inference", "PipelineSchedule.step", CUT]
    assert problems == [("truncated.txt: the file ends mid-line (cut short?); its last line was "
                         "skipped")]


FH_HEAD = ('Current thread 0x00007f1c2a4b3740 (most recent call first):\n'
           '  File "/opt/job/ckpt.py", line 88 in save\n')


@pytest.mark.parametrize("text, frames", [
    # faulthandler, cut inside a frame line, before and after its function's name
    (FH_HEAD + '  File "/opt/job/train.py", li', ["save", CUT]),
    (FH_HEAD + '  File "/opt/job/train.py", line 50 in train_st', ["save", CUT]),
    # py-spy, a frame line cut before its file
    ('Thread 7 (idle): "MainThread"\n    save (ckpt.py:88)\n    train_step (tr',
     ["save", CUT]),
    # cut in the next thread's header: the thread before it is whole
    ('Thread 7 (idle): "MainThread"\n    save (ckpt.py:88)\n    <module> (train.py:9)\n'
     'Thread 8 (id', ["save", "<module>"]),
])
def test_a_stack_cut_in_its_frames_ends_in_a_cut_marker(text, frames):
    dumps, problems = parse_any(text, "cut.txt")
    assert [f.name for f in dumps[0].threads[0].frames] == frames
    assert any("ends mid-line" in p for p in problems)


def test_truncated_json_recovers_whole_threads():
    text = (STACKS / "threads/threads.json").read_text()
    cut = text[: text.index('"thread_name":"heartbeat"') + 40]
    dumps, problems = parse_any(cut, "t.json")
    assert [t.name for t in dumps[0].threads] == ["deep", ""]
    assert "2 complete thread(s) recovered" in problems[0]


def test_header_without_threads_is_a_partial_dump():
    header = "Process 5: python\nPython v3.11.2 (p)\n"
    dumps, problems = read_folder_entries([("rank4.txt", header)])
    assert dumps[0].rank == 4 and dumps[0].status == ERROR and dumps[0].threads == ()
    assert choose_thread(dumps[0].threads) is None
    assert problems == ["rank4.txt: pid 5: the dump holds no threads (cut short?)"]


def test_folder_with_bad_files_keeps_the_good_ones():
    entries = folder("bad") + folder("stall")
    dumps, problems = read_folder_entries(entries)
    assert [d.rank for d in dumps[:3]] == [0, 1, 2]
    assert {d.source for d in dumps} == {"rank0.txt", "rank1.json", "rank2.txt", "truncated.txt"}
    for name in ("empty.txt", "garbage.txt", "pyspy-error.txt", "not-a-dump.json",
                 "truncated.json", "truncated.txt"):
        assert any(p.startswith(name + ":") for p in problems), name


def test_duplicate_ranks_are_kept_and_reported():
    entries = folder("stall") + [("dump-rank-1.txt", (STACKS / "loop/stall-all-ranks.txt")
                                  .read_text().split("Process ")[1].join(["Process ", ""]))]
    dumps, problems = read_folder_entries(entries)
    assert [d.rank for d in dumps] == [0, 1, 1, 2]
    assert any(p.startswith("rank 1 appears 2 times (") and "the last one is compared" in p for p in problems)


def test_mixed_python_versions_are_reported():
    dumps, problems = read_folder_entries(folder("mixed-python"))
    assert [d.rank for d in dumps] == [0, 1]
    assert problems == [("dumps come from different Python versions (3.11.7, 3.12.1); frame "
                         "names may differ between them (3.11+ prints Class.method)")]


def test_no_files_and_no_dumps():
    assert read_folder_entries([]) == ([], ["no py-spy dumps found in 0 file(s)"])
    dumps, problems = read_folder_entries([("a.txt", ""), ("b.txt", "hello")])
    assert dumps == [] and problems[-1] == "no py-spy dumps found in 2 file(s)"


def test_several_dumps_in_a_ranked_file_do_not_take_its_rank():
    text = (STACKS / "loop/stall-all-ranks.txt").read_text()
    dumps, problems = read_folder_entries([("rank5.txt", text)])
    assert [d.rank for d in dumps] == [None] * 3
    assert problems == ["rank5.txt: holds 3 dumps, so the rank in its name is not used"]


def test_very_deep_text_stack_is_bounded():
    frames = "".join(f"    recurse (r.py:{i % 7 + 1})\n" for i in range(100_000))
    text = f'Process 1: p\nPython v3.11.0 (p)\n\nThread 1 (idle): "MainThread"\n{frames}'
    (d,) = parse_text(text)
    f = d.threads[0].frames
    assert len(f) == KEEP_INNER + 1 + KEEP_OUTER
    assert f[KEEP_INNER] == Frame(ELIDED, f"{100_000 - KEEP_INNER - KEEP_OUTER} frames", 0)


@pytest.mark.parametrize("name, rank", [
    ("rank3.txt", 3), ("rank_3.json", 3), ("dump-rank-3.txt", 3), ("RANK03", 3),
    ("Rank12.json", 12), ("run/rank7/dump.txt", None), ("dir/rank-0.txt", 0),
    ("frank3.txt", None), ("crank2.json", None), ("ranks.txt", None), ("dump.txt", None),
    ("worker_rank4_host1.txt", 4), ("rank.txt", None),
])
def test_rank_from_filename(name, rank):
    assert rank_from_filename(name) == rank


@pytest.mark.parametrize("filename, trimmed", [
    ("/usr/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py",
     "torch/distributed/distributed_c10d.py"),
    ("/opt/venv/lib/python3.10/dist-packages/ray/_private/worker.py", "ray/_private/worker.py"),
    ("torch/distributed/distributed_c10d.py", "torch/distributed/distributed_c10d.py"),
    ("C:\\py\\Lib\\site-packages\\torch\\x.py", "torch/x.py"),
    ("<frozen runpy>", "<frozen runpy>"),
])
def test_frame_key_trims_package_dirs(filename, trimmed):
    f = Frame("all_reduce", filename, 12)
    assert frame_key(f) == ("all_reduce", trimmed)
    assert frame_key(f, with_line=True) == ("all_reduce", trimmed, 12)
    assert frame_key(f) == frame_key(Frame("all_reduce", "/elsewhere/site-packages/" + trimmed, 9))


def _thread(name, *frames):
    return ThreadStack(1, name, "idle", tuple(Frame(n, fn, 1) for n, fn in frames))


@pytest.mark.parametrize("threads, expected", [
    # a collective in a helper thread beats an idle MainThread
    ([_thread("MainThread", ("Event.wait", "threading.py")),
      _thread("pg-watchdog", ("Work.wait", "torch/distributed/distributed_c10d.py"))],
     "pg-watchdog"),
    # MainThread wins when several threads wait in collectives
    ([_thread("t1", ("barrier", "torch/distributed/distributed_c10d.py")),
      _thread("MainThread", ("all_gather_into_tensor", "torch/distributed/c10d.py"))],
     "MainThread"),
    ([_thread("a", ("Condition.wait", "threading.py")),
      _thread("b", ("get", "ray/_private/worker.py"), ("run", "driver.py"))], "b"),
    ([_thread("a", ("recv", "socket.py")), _thread("b", ("loop", "x.py"))], "a"),  # first thread
    ([_thread("x", ("loop", "x.py")), _thread("MainThread", ("sleep", "x.py"))], "MainThread"),
    # stdlib waits with communication-like names are not collectives
    ([_thread("MainThread", ("step", "train.py")), _thread("loader", ("Queue.get", "queue.py")),
      _thread("pin", ("recv", "multiprocessing/connection.py"))], "MainThread"),
    # "common/" is not "comm/", "xarray/" is not "ray/"
    ([_thread("MainThread", ("loop", "x.py")), _thread("c", ("get", "app/common/cache.py")),
      _thread("d", ("wait", "xarray/core/computation.py"))], "MainThread"),
    ([_thread("MainThread", ("loop", "x.py")), _thread("c", ("wait", "deepspeed/comm/torch.py"))],
     "c"),
])
def test_thread_of_interest(threads, expected):
    """The merge's thread choice: the thread inside a collective (MainThread first), else
    MainThread, else the first thread with frames."""
    assert choose_thread(ProcessDump(1, threads=tuple(threads)).threads).name == expected



@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_any_never_raises_on_arbitrary_text(text):
    dumps, problems = parse_any(text, "x")
    assert dumps or problems


PIECES = st.sampled_from([
    "Process 12: python -m x\n", "Process x: y\n", "Python v3.11.2 (/usr/bin/python3)\n",
    'Thread 0x1F (idle): "MainThread"\n', "Thread 5 (active+gil)\n", "Thread 5 (weird):\n",
    "    all_reduce (torch/distributed/distributed_c10d.py:2121)\n", "    f (x)\n",
    "    g (a:b:c:)\n", "        Locals:\n", "            x: 1\n", "\n", "Error: boom\n",
    "[", "]", "{", "}", '{"frames": [{"name": 1}]}', '[{"pid": "a", "frames": [null]}]', ",",
    '[{"pid": 3, "thread_id": 1, "frames": [{"name": "f", "filename": "a.py", "line": -1}]}]',
    "\x00", "    h (y.py:",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30))
def test_parse_any_never_raises_on_dump_like_text(pieces):
    text = "".join(pieces)
    dumps, problems = parse_any(text, "x")
    assert dumps or problems
    for d in dumps:
        choose_thread(d.threads)
        for t in d.threads:
            assert all(isinstance(f.line, int) and f.line >= 0 for f in t.frames)
    read_folder_entries([("rank1.txt", text), ("rank1.json", text)])


def test_deeply_nested_json_is_a_problem_not_a_crash():
    dumps, problems = parse_any("[" * 100_000, "deep.json")
    assert dumps == [] and problems and problems[0].startswith("deep.json: ")


@pytest.mark.parametrize("line, frame", [
    ("    all_reduce (torch/distributed/distributed_c10d.py:3252)",
     ("all_reduce", "torch/distributed/distributed_c10d.py", 3252)),
    ("    _run_code (<frozen runpy>:88)", ("_run_code", "<frozen runpy>", 88)),
    ("    recv (libc.so.6)", ("recv", "libc.so.6", 0)),
    # --native C++ names hold parentheses of their own; the file is the last group
    ("    c10d::Work::wait(std::chrono::duration<long>) (libtorch_cpu.so)",
     ("c10d::Work::wait(std::chrono::duration<long>)", "libtorch_cpu.so", 0)),
    ("    {lambda(c10d::Work*)#1}::_FUN (libtorch_python.so)",
     ("{lambda(c10d::Work*)#1}::_FUN", "libtorch_python.so", 0)),
    ("    (anonymous namespace)::run (libx.so:12)", ("(anonymous namespace)::run", "libx.so", 12)),
    # ...and so may the file
    ("    f (C:\\Program Files (x86)\\x.py:3)", ("f", "C:\\Program Files (x86)\\x.py", 3)),
    ("    g (a:b:c:)", ("g", "a:b:c:", 0)),
])
def test_text_frame_lines(line, frame):
    text = f'Process 1: p\nPython v3.11.0 (p)\n\nThread 1 (idle): "MainThread"\n{line}\n'
    (d,) = parse_text(text)
    (f,) = d.threads[0].frames
    assert (f.name, f.filename, f.line) == frame


def test_native_text_and_json_parse_alike():
    """Real --native dumps of two gloo ranks waiting in all_reduce: text and JSON give the
    same frames, addresses py-spy could not name aside (they differ per process)."""
    (text,) = parse_text((STACKS / "torch-gloo/native/rank0.txt").read_text())
    (js,) = parse_json((STACKS / "torch-gloo/native/rank1.json").read_text())
    a, b = (d.threads[0].frames for d in (text, js))
    assert len(a) == len(b) == 14
    for x, y in zip(a, b, strict=True):
        assert x.native == y.native
        if not x.name.startswith("0x"):
            assert (x.name, x.filename, x.line) == (y.name, y.filename, y.line)
    assert a[4].name.endswith("::{lambda(pybind11::detail::function_call&)#1}::_FUN")


def test_parsed_names_are_shared_strings():
    """Names repeat across ranks and samples; the parser keeps one string per distinct name."""
    text = (STACKS / "stall/rank0.txt").read_text()
    a, b = parse_text(text)[0], parse_text(text)[0]
    for x, y in zip(a.threads[0].frames, b.threads[0].frames, strict=True):
        assert x.name is y.name and x.filename is y.filename


def test_zero_processes():
    for text in ("[]", "[]\n[]\n"):
        dumps, problems = parse_any(text, "z.json")
        assert dumps == [] and problems == ["z.json: a py-spy --json dump with no threads in it"]
    assert parse_json("[]", "z.json", pid=7)[0].status == ERROR  # known pid, no threads


def test_very_deep_json_stack_is_bounded():
    frame = {"name": "recurse", "filename": "r.py", "short_filename": "r.py", "line": 3}
    data = [{"pid": 4, "thread_id": 1, "thread_name": "MainThread", "active": False,
             "owns_gil": False, "frames": [frame] * 50_000}]
    (d,) = parse_json(json.dumps(data))
    frames = d.threads[0].frames
    assert len(frames) == KEEP_INNER + 1 + KEEP_OUTER and frames[KEEP_INNER].name == ELIDED


# -- a folder's files share one conversion of each distinct stack ----------------------------------

def _thread(pid: int, frames: list[dict]) -> str:
    return json.dumps([{"pid": pid, "thread_id": pid, "os_thread_id": pid,
                        "thread_name": "MainThread", "active": False, "owns_gil": False,
                        "frames": frames}])


def _raw(name: str, line, filename: str = "train.py", **more) -> dict:
    return {"name": name, "filename": "/x/" + filename, "short_filename": filename,
            "line": line, "module": None, "locals": None, **more}


def test_ranks_with_one_stack_share_one_frames_tuple():
    stack = [_raw("all_reduce", 2501, "torch/distributed/distributed_c10d.py"),
             _raw("main", 3)]
    dumps, problems = read_folder_entries([(f"rank{r}.json", _thread(100 + r, stack))
                                           for r in range(4)])
    assert problems == [] and [d.rank for d in dumps] == [0, 1, 2, 3]
    tuples = [d.threads[0].frames for d in dumps]
    assert all(t is tuples[0] for t in tuples)
    assert [(f.name, f.filename, f.line) for f in tuples[0]] == [
        ("all_reduce", "torch/distributed/distributed_c10d.py", 2501), ("main", "train.py", 3)]


@pytest.mark.parametrize("odd, line", [(True, 1), (3.0, 3), ("3", 3), (-3, 3), (None, 3),
                                       ([3], 3)])
def test_an_odd_line_is_no_line_even_where_an_equal_value_was_seen(odd, line):
    # true == 1 and 3.0 == 3 in Python: the shared conversion must not take one for the other
    files = [("rank0.json", _thread(100, [_raw("main", line), _raw("go", line)])),
             ("rank1.json", _thread(101, [_raw("main", odd), _raw("go", odd)]))]
    dumps, _ = read_folder_entries(files)
    assert [f.line for f in dumps[0].threads[0].frames] == [line, line]
    alone = parse_json(files[1][1])[0].threads[0].frames
    assert [f.line for f in dumps[1].threads[0].frames] == [f.line for f in alone] == [0, 0]


def test_frames_with_missing_keys_or_odd_values_read_as_they_do_alone():
    odd = [[{"name": "f", "filename": "a.py", "line": 1}],  # no short_filename, no module
           [{"name": "f", "filename": "a.py", "line": 1, "short_filename": None,
             "module": ["not", "hashable"]}],
           [{"name": 5, "filename": "a.py", "line": 1}, "not a frame", _raw("main", 2)],
           [_raw("f", 1, locals={"x": [1]})]]
    files = [(f"rank{r}.json", _thread(100 + r, frames)) for r, frames in enumerate(odd * 2)]
    shared, _ = read_folder_entries(files)
    alone = [d for name, text in files for d in parse_any(text, name)[0]]
    assert [d.threads for d in shared] == [d.threads for d in alone]
    assert [[f.name for f in d.threads[0].frames] for d in shared[:4]] == [
        ["f"], ["f"], ["main"], ["f"]]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS) + ["options", "mixed-python", "loop"])
def test_a_folder_reads_as_its_files_do_one_by_one(scenario):
    entries = folder(scenario)
    together, _ = read_folder_entries(entries)
    apart = sorted((d for e in entries for d in read_folder_entries([e])[0]),
                   key=lambda d: (d.rank is None, d.rank or 0, d.pid))
    assert together == apart


def test_decoded_json_still_reads():
    data = json.loads(_thread(7, [_raw("main", 3)]))
    [dump] = parse_json(data)
    assert dump.pid == 7 and dump.threads[0].thread_id == 7
    assert dump.threads[0].frames[0].line == 3


@pytest.mark.parametrize("depth", [KEEP_INNER + KEEP_OUTER + 1, 5000])
def test_deep_stacks_in_a_folder_are_bounded_as_alone(depth):
    stack = [_raw(f"f{i}", i + 1) for i in range(depth)]
    files = [(f"rank{r}.json", _thread(100 + r, stack)) for r in range(2)]
    dumps, _ = read_folder_entries(files)
    alone = parse_json(files[0][1])[0].threads[0].frames
    for d in dumps:
        frames = d.threads[0].frames
        assert frames == alone and len(frames) == KEEP_INNER + KEEP_OUTER + 1
        assert frames[KEEP_INNER].name == ELIDED


def test_a_number_too_long_for_a_line_loses_that_field_not_the_file():
    """py-spy never writes a 5,000-digit line number; int() refuses one (over 4,300 digits), and
    once the whole file was lost to it. It reads as no number; the thread is kept."""
    huge = "1" + "0" * 5000
    text = ('[{"pid": 7, "thread_id": 1, "thread_name": "MainThread", "owns_gil": false, '
            '"active": true, "frames": [{"name": "f", "filename": "a.py", "module": null, '
            f'"short_filename": "a.py", "line": {huge}, "locals": null}}]}}]')
    dumps = parse_json(text, "rank0.json")
    assert [d.pid for d in dumps] == [7] and dumps[0].threads[0].frames[0].name == "f"


def test_a_huge_name_in_a_json_frame_is_cut_and_not_kept_in_the_folder_cache():
    """A 1 MB function name (no py-spy writes one) is cut to MAX_FIELD in the frame, and its
    raw stack is not kept as a cache key: a folder of such files keeps no more per file."""
    from rltui.parsing.pyspy import MAX_FIELD, StackCache
    name = "x" * (1 << 20)
    text = json.dumps([{"pid": 7, "thread_id": 1, "thread_name": "MainThread",
                        "owns_gil": False, "active": True,
                        "frames": [{"name": name, "filename": "a.py", "module": None,
                                    "short_filename": "a.py", "line": 3, "locals": None}]}])
    cache = StackCache()
    dumps, problems = parse_any(text, "rank0.json", cache)
    assert problems == []
    frame = dumps[0].threads[0].frames[0]
    assert len(frame.name) == MAX_FIELD and frame.name.endswith("\u2026")
    assert cache.stacks == {} and cache.kept == 0


# -- py-spy's own output and everything else read alike -------------------------------------------

PYSPY_JSON = sorted(p for p in STACKS.rglob("*.json")
                    if p.parent.name != "bad" and '"frames"' in p.read_text())


@pytest.mark.parametrize("path", PYSPY_JSON, ids=lambda p: str(p.relative_to(STACKS)))
def test_py_spy_output_reads_the_same_as_already_decoded_json(path):
    """py-spy's own --json text takes a schema-checked decoder; the same document decoded
    elsewhere (``parse_json`` of a list) takes the general reader. Both give the same dumps."""
    text = path.read_text()
    assert parse_json(text, source=path.name) == parse_json(json.loads(text), source=path.name)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)
FRAME = st.fixed_dictionaries(
    {"name": st.sampled_from(["f", "g", "Trainer.step"]),
     "filename": st.sampled_from(["/x/a.py", "b.py"]),
     "line": st.integers(-3, 2**31)},
    optional={"module": st.none() | st.text(max_size=3), "short_filename": st.none() | st.just("a.py"),
              "locals": JSON_VALUES})
THREAD = st.fixed_dictionaries(
    {"frames": st.lists(FRAME, max_size=4)},
    optional={"pid": st.integers(0, 2**40) | st.none(), "thread_id": st.integers(0, 2**63 - 1),
              "os_thread_id": st.integers(0, 2**31) | st.none(),
              "thread_name": st.none() | st.text(max_size=4), "active": st.booleans(),
              "owns_gil": st.booleans()})


@given(st.lists(THREAD, min_size=1, max_size=4))
@settings(max_examples=200, deadline=None)
def test_any_well_formed_document_reads_the_same_both_ways(threads):
    assert parse_json(json.dumps(threads), "f") == parse_json(threads, "f")


@given(st.lists(THREAD | JSON_VALUES, min_size=1, max_size=3).map(json.dumps))
@settings(max_examples=200, deadline=None)
def test_a_document_off_the_schema_never_raises_from_the_folder_reader(text):
    """Values of other types, integers past 64 bits, objects among the threads: the schema
    refuses them and the general reader says what it skipped."""
    dumps, problems = parse_any(text, "f")
    assert dumps or problems
