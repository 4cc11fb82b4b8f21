"""PyTorch Flight Recorder dumps: every format the reader accepts, the refusals, the analysis and
how it decides the pattern beside the stacks (fixtures/flight_recorder/README.md)."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from rltui.diagnosis import flightrec as fr
from rltui.diagnosis.stacks import (
    COLLECTIVE_MISMATCH,
    HANG,
    PROGRESSING,
    SAME_COLLECTIVE,
    StackReport,
    classify,
    symptoms,
)
from rltui.model import OK, Frame, FrPoll, ProcessDump, ThreadStack
from rltui.parsing import flightrec as reader

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "flight_recorder"
PAGES = ROOT / "tests" / "data" / "torch_debug"


def dumps_of(folder: str, **kw) -> list:
    out = []
    for path in sorted((FIXTURES / folder).iterdir()):
        out += reader.read_dump(path.read_bytes(), str(path), written=path.stat().st_mtime, **kw)
    return out


def analysis(folder: str, **kw) -> fr.FrAnalysis:
    fa = fr.analyse(FrPoll(dumps=tuple(dumps_of(folder))), **kw)
    assert fa is not None
    return fa


def kinds(fa: fr.FrAnalysis) -> list[str]:
    return [f.kind for f in fa.findings]


# -- reading ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("folder,ranks,version", [
    ("gloo-2.10-cross_group", 4, "2.10"), ("gloo-2.10-frozen", 4, "2.10"),
    ("gloo-2.10-skipped", 4, "2.10"), ("gloo-2.10-p2p", 2, "2.10"),
    ("gloo-2.10-long", 2, "2.10"), ("nccl-2.2-mismatch", 4, "2.2"),
    ("nccl-2.4-p2p", 2, "2.4"), ("nccl-list-broadcast", 2, ""),
])
def test_every_format_version_reads(folder, ranks, version):
    got = dumps_of(folder)
    assert [d.status for d in got] == [OK] * ranks, [d.message for d in got]
    assert sorted(d.rank for d in got) == list(range(ranks))  # from the file name's suffix
    assert {d.version for d in got} == {version}
    assert all(d.total > 0 and d.entries for d in got)


def test_a_large_pickle_is_read_as_its_head_and_newest_records(monkeypatch):
    """The 2,000-record dump is loaded spliced (far fewer bytes than the file) and reads exactly
    as the whole pickle does."""
    path = FIXTURES / "gloo-2.10-long" / "nccl_trace_rank_0"
    data = path.read_bytes()
    loaded: list[int] = []
    real = reader._unpickle
    monkeypatch.setattr(reader, "_unpickle", lambda b, **k: (loaded.append(len(b)), real(b, **k))[1])
    fast = reader.read_dump(data, str(path))[0]
    assert loaded and max(loaded) < len(data) // 10
    whole = reader.read_dump(data, str(path), tail=10**6)[0]
    assert fast.total == whole.total == 2000
    assert fast.entries == whole.entries and fast.states == whole.states
    pending = [e for e in fast.entries if not e.done]
    assert [(e.op, e.seq, e.group) for e in pending] == [("all_reduce", 1101, "0")]


def test_a_splice_that_does_not_check_out_reads_the_whole_pickle():
    """Records re-numbered in the middle (not consecutive in the newest window): the splice is
    refused and the whole pickle read."""
    data = (FIXTURES / "gloo-2.10-long" / "nccl_trace_rank_0").read_bytes()
    doc = pickle.loads(data)
    assert reader._spliced(data, reader.TAIL) is not None
    # a pickle Python wrote (dicts memoised: no fixed record opening) is read whole, correctly
    doc["entries"][-10]["record_id"] += 7
    again = pickle.dumps(doc, protocol=2)
    assert reader._spliced(again, reader.TAIL) is None
    assert reader.read_dump(again, "x_0")[0].total == 2000


def test_the_json_dump_and_the_debug_servers_page():
    page = (PAGES / "fr_trace_json.html").read_bytes()
    got = reader.read_dump(page, "http://node0:25999/fr_trace_json")
    assert [d.rank for d in got] == [0, 1, 2, 3]
    assert all(d.status == OK and d.version == "2.10" for d in got)
    # pg_status's counters are strings in the JSON
    assert {(s.group, s.last_enqueued) for s in got[0].states} == {("0", 4), ("1", 3)}
    one = json.dumps({"version": "2.10", "pg_status": {"0": {"last_completed_collective": "3"}},
                      "entries": []}).encode()
    d = reader.read_dump(one, "nccl_trace_rank_5.json")[0]
    assert (d.rank, d.states[0].last_completed) == (5, 3)


def test_a_hostile_pickle_is_refused_never_run(monkeypatch):
    called = []
    monkeypatch.setattr(os, "system", lambda *a: called.append(a) or 0)
    got = {d.rank: d for d in dumps_of("hostile")}
    assert not called
    assert got[0].status == "error" and "system" in got[0].message and "refused" in got[0].message
    assert got[1].status == "error" and "refused" in got[1].message
    assert got[2].status == "error" and "truncated" in got[2].message
    assert got[3].status == "error" and "not a Flight Recorder dump" in got[3].message
    fa = fr.analyse(FrPoll(dumps=tuple(got.values())))
    assert fa is not None and not fa.groups and len(fa.problems) == 4


@pytest.mark.parametrize("data", [b"", b"\x80", b"\x80\x02}q\x00.", b"{}", b"[1, 2]",
                                  b"<html><h2>Rank x</h2></html>", b"\x00" * 64,
                                  b'{"entries": "no"}', b'[{"entries": [{"frames": 7}]}]'])
def test_garbage_is_a_message_not_a_crash(data):
    for d in reader.read_dump(data, "nccl_trace_rank_1"):
        assert d.status in ("ok", "error")
        if d.status == "error":
            assert d.message


# -- analysis --------------------------------------------------------------------------------------

def test_cross_group_order_names_both_groups_and_orders():
    fa = analysis("gloo-2.10-cross_group")
    assert kinds(fa) == [fr.CROSS_GROUP] and fa.pattern == "B"
    text = fa.findings[0].text
    assert "ranks 0-1 wait in all_reduce #4 of default_pg" in text
    assert "ranks 2-3 wait in all_reduce #4 of group 1" in text
    assert "opposite orders" in text and "reduce_in" in text
    assert fa.wait_of(0).startswith("all_reduce #4 of default_pg")
    assert fa.wait_of(3).startswith("all_reduce #4 of group 1")
    default = next(v for v in fa.groups if v.desc == "default_pg")
    assert [m.rank for m in default.members if m.behind] == [2, 3]


def test_a_frozen_rank_is_named_and_the_rest_is_pattern_c():
    fa = analysis("gloo-2.10-frozen")
    assert kinds(fa) == [fr.BEHIND, fr.SAME] and fa.pattern == "C"
    assert fa.suspects == (3,)
    assert "rank 3 never entered all_reduce #4 of default_pg" in fa.findings[0].text


def test_a_mismatch_names_both_call_sites():
    fa = analysis("nccl-2.2-mismatch")
    assert kinds(fa) == [fr.MISMATCH] and fa.pattern == "B" and fa.suspects == (3,)
    text = fa.findings[0].text
    assert "all_reduce" in text and "all_gather" in text
    assert "sync_gradients (train.py:42)" in text and "log_metrics (train.py:57)" in text


def test_sends_that_no_one_receives():
    fa = analysis("nccl-2.4-p2p")
    assert kinds(fa) == [fr.P2P_UNMATCHED] and fa.pattern == "B"


def test_a_rank_without_a_dump_is_missing():
    dumps = [d for d in dumps_of("gloo-2.10-frozen") if d.rank != 3]
    fa = fr.analyse(FrPoll(dumps=tuple(dumps)), expected_ranks=range(4))
    assert fr.MISSING in kinds(fa) and 3 in fa.suspects
    assert fa.pattern == "C"


def test_gloo_records_no_send_recv_so_the_stacks_tell():
    fa = fr.analyse(FrPoll(dumps=tuple(dumps_of("gloo-2.10-p2p"))),
                    stack_ops={0: "recv", 1: "recv"})
    assert kinds(fa) == [fr.P2P_UNMATCHED] and fa.pattern == "B"
    assert "does not record send/recv" in fa.findings[0].text
    assert fr.analyse(FrPoll(dumps=tuple(dumps_of("gloo-2.10-p2p")))).findings == ()


# -- beside the stacks -----------------------------------------------------------------------------

def waiting(rank: int, op: str = "all_reduce", line: int = 51) -> ProcessDump:
    frames = (Frame(op, "torch/distributed/distributed_c10d.py", 3252),
              Frame("wrapper", "torch/distributed/c10d_logger.py", 83),
              Frame("reduce_in", "train.py", 37), Frame("train_step", "train.py", line),
              Frame("<module>", "train.py", 90))
    return ProcessDump(pid=100 + rank, rank=rank,
                       threads=(ThreadStack(1, "MainThread", "idle", frames),))


def test_identical_stacks_read_c_and_the_recorder_turns_them_into_b():
    stacks = classify([[waiting(r) for r in range(4)]] * 2)
    assert stacks.pattern == "C"
    out = fr.apply(stacks, analysis("gloo-2.10-cross_group"))
    assert (out.verdict, out.pattern, out.symptom_id) == (HANG, "B", COLLECTIVE_MISMATCH)
    assert out.flight_recorder.stack_pattern == "C"
    assert "the Flight Recorder decides" in out.explanation
    sym = symptoms(out)[0]
    assert any("Flight Recorder: ranks 0-1 pending in all_reduce #4 of default_pg" in e
               for e in sym.evidence)
    assert any("one order" in s for s in sym.next_steps)
    doc = fr.analysis_json(out.flight_recorder)
    assert doc["pattern"] == "B" and doc["findings"][0]["kind"] == fr.CROSS_GROUP
    rank0 = doc["groups"][0]["per_rank"][0]
    assert rank0["pending"]["seq"] == 4 and rank0["pending"]["op"] == "all_reduce"
    assert rank0["last_completed"]["seq"] == 3


def test_a_laggard_does_not_turn_the_stacks_b_into_c():
    dumps = [waiting(r) for r in range(3)]
    dumps.append(ProcessDump(pid=103, rank=3, threads=(ThreadStack(1, "MainThread", "idle", (
        Frame("wait", "threading.py", 320), Frame("wait_for_batch", "train.py", 80),
        Frame("<module>", "train.py", 90))),)))
    stacks = classify([dumps] * 2)
    assert stacks.pattern == "B"
    out = fr.apply(stacks, analysis("gloo-2.10-skipped"))
    assert out.pattern == "B" and 3 in out.suspect_ranks
    assert "rank 3 never entered all_reduce #4" in out.explanation


def test_moving_stacks_are_not_overruled_by_an_old_dump():
    a = [waiting(r, line=51) for r in range(4)]
    b = [waiting(r, line=52) for r in range(4)]
    stacks = classify([a, b])
    assert stacks.verdict == PROGRESSING
    out = fr.apply(stacks, analysis("gloo-2.10-cross_group"))
    assert out.verdict == PROGRESSING and out.pattern is None
    assert any("earlier stall" in n for n in out.notes)


def test_pattern_c_without_a_recorder_says_how_to_turn_it_on():
    from rltui.model import NodeSnapshot, ProcInfo, replace
    stacks = classify([[waiting(r) for r in range(4)]] * 2)
    snap = NodeSnapshot(timestamp=0.0, procs=(ProcInfo(pid=1, rank=0, debug_env=(
        ("NCCL_DEBUG", "INFO"),)),))
    out = fr.read_beside(stacks, snap)
    assert out.pattern == "C" and fr.TURN_ON in symptoms(out)[0].next_steps
    on = replace(snap, procs=(ProcInfo(pid=1, rank=0, debug_env=(
        ("TORCH_FR_BUFFER_SIZE", "2000"),)),))
    assert fr.TURN_ON not in symptoms(fr.read_beside(stacks, on))[0].next_steps


def test_dumps_alone_make_a_report():
    from rltui.diagnosis.hangs import stack_report
    from rltui.model import NodeSnapshot
    snap = NodeSnapshot(timestamp=2e9, flight_recorder=FrPoll(
        dumps=tuple(dumps_of("nccl-2.2-mismatch"))))
    rep = stack_report(snap)
    assert isinstance(rep, StackReport)
    assert (rep.verdict, rep.pattern) == (HANG, "B")
    assert "No stacks to compare" not in rep.explanation


def test_same_collective_everywhere_is_c_confirmed():
    stacks = classify([[waiting(r) for r in range(2)]])
    out = fr.apply(stacks, analysis("nccl-list-broadcast"))
    assert (out.pattern, out.symptom_id) == ("C", SAME_COLLECTIVE)


def test_a_reference_to_a_skipped_record_keeps_more_of_the_head(monkeypatch):
    """Rank 0's dump refers, in its newest records, to frames first written in its second
    record: keeping only the first record fails to load, and the splice keeps more of the head
    instead of giving up; the result is the whole pickle's."""
    data = (FIXTURES / "gloo-2.10-long" / "nccl_trace_rank_0").read_bytes()
    tries: list[int] = []
    real = reader._unpickle
    monkeypatch.setattr(reader, "_unpickle", lambda b, **k: (tries.append(len(b)), real(b, **k))[1])
    monkeypatch.setattr(reader, "HEAD_RECORDS", (1, 8))
    doc = reader._spliced(data, reader.TAIL)
    assert doc is not None and doc["__head__"] == 8 and len(tries) == 2
    whole = pickle.loads(data)
    assert doc["entries"][8:] == whole["entries"][-reader.TAIL:]


def test_a_large_file_is_read_from_its_two_ends(tmp_path):
    from rltui.sources.flightrec import FlightRecorderSource
    src = FIXTURES / "gloo-2.10-long" / "nccl_trace_rank_0"
    (tmp_path / "nccl_trace_rank_0").write_bytes(src.read_bytes())
    source = FlightRecorderSource([str(tmp_path / "nccl_trace_rank_*")])
    first = source.poll().payload.dumps[0]
    assert first.total == 2000 and first == reader.read_dump(src.read_bytes(), str(
        tmp_path / "nccl_trace_rank_0"), written=first.written)[0]
    assert source.poll().payload.dumps[0] is first  # unchanged: not read again


def test_the_ranks_environment_names_the_dumps_and_an_old_one_is_not_theirs(tmp_path):
    """TORCH_FR_DUMP_TEMP_FILE + rank is read for each rank; a file older than the rank's start
    (yesterday's job at the default path) is left out; a dump being written under a hidden
    temporary name is not read; a planted link to the kernel's files is refused."""
    import time as _time

    from rltui.model import ProcInfo
    from rltui.sources.flightrec import FlightRecorderSource
    src = FIXTURES / "gloo-2.10-frozen"
    for r in range(4):
        (tmp_path / f"fr_{r}").write_bytes((src / f"nccl_trace_rank_{r}").read_bytes())
    old = _time.time() - 86400
    os.utime(tmp_path / "fr_3", (old, old))
    env = (("TORCH_FR_BUFFER_SIZE", "2000"), ("TORCH_FR_DUMP_TEMP_FILE", str(tmp_path / "fr_")))
    procs = [ProcInfo(pid=50 + r, rank=r, debug_env=env, create_time=_time.time() - 60)
             for r in range(4)]
    poll = FlightRecorderSource(procs=lambda: procs).poll().payload
    assert poll.enabled is True
    assert sorted((d.rank, d.pid) for d in poll.dumps) == [(0, 50), (1, 51), (2, 52)]
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / ".frdump-x").write_bytes(b"\x80\x02")
    (tmp_path / "dir" / "nccl_trace_rank_0").write_bytes((src / "nccl_trace_rank_0").read_bytes())
    os.symlink("/proc/self/environ", tmp_path / "dir" / "nccl_trace_rank_1")
    poll = FlightRecorderSource([str(tmp_path / "dir")]).poll().payload
    assert [d.rank for d in poll.dumps] == [0]
    assert any("nccl_trace_rank_1" in p and "kernel" in p for p in poll.problems), poll.problems


def test_the_debug_servers_stack_pages_are_stack_rounds(tmp_path):
    """/stacks (faulthandler text per rank) and /pyspy_dump read as one dump per rank; the
    dump_dir's stacks file (the same sections under '=== Rank N: ... ===') reads as saved
    stacks."""
    import html
    import re

    from rltui.sources.dumpfolder import read_dump_folder
    from rltui.sources.torchdebug import stacks_from_page
    # faulthandler names the bare function, py-spy the qualified one
    for page, frame in (("stacks.html", "reduce_in"), ("pyspy_dump.html", "Trainer.reduce_in")):
        dumps, problems = stacks_from_page((PAGES / page).read_text(), page)
        assert [d.rank for d in dumps] == [0, 1, 2, 3] and not problems
        names = [f.name for d in dumps for t in d.threads for f in t.frames]
        assert frame in names, names
    text = (PAGES / "stacks.html").read_text()
    parts = re.findall(r"<h2>Rank (\d+): ([^<]*)</h2>.*?<pre>(.*?)</pre>", text, re.S)
    saved = tmp_path / "stacks_20261202_063000.txt"
    saved.write_text("\n".join(f"=== Rank {r}: {a} ===\n{html.unescape(t)}" for r, a, t in parts))
    dumps, problems = read_dump_folder(str(saved))
    assert [d.rank for d in dumps] == [0, 1, 2, 3] and not problems
    assert classify([dumps]).pattern == "C"


def test_pattern_c_with_a_recorder_on_but_no_dump_says_when_one_comes():
    from rltui.model import NodeSnapshot, ProcInfo
    stacks = classify([[waiting(r) for r in range(4)]] * 2)
    snap = NodeSnapshot(timestamp=0.0, procs=(ProcInfo(pid=1, rank=0, debug_env=(
        ("TORCH_FR_BUFFER_SIZE", "2000"),)),), flight_recorder=FrPoll(enabled=True))
    steps = symptoms(fr.read_beside(stacks, snap))[0].next_steps
    assert fr.NO_DUMP_YET in steps and fr.TURN_ON not in steps


def test_a_recording_keeps_the_dumps_read():
    """A recording (rltui record) holds the Flight Recorder readings; replayed, the same dumps."""
    from rltui.model import Reading
    from rltui.serialize import reading_from_data, reading_to_data
    poll = FrPoll(dumps=tuple(dumps_of("gloo-2.10-cross_group")), enabled=True,
                  looked=("/shared/fr/trace_rank_",))
    reading = Reading(source="flight_recorder", timestamp=1.0, status=OK, payload=poll)
    again = reading_from_data(json.loads(json.dumps(reading_to_data(reading))))
    assert again == reading


def test_in_nested_groups_the_suspect_is_where_the_waits_lead():
    """8 ranks, tensor-parallel pairs inside two data-parallel groups (NCCL, pg_config with
    ranks). Rank 5 stops; rank 4 waits for it in their pair's all_reduce, and ranks 0,2,6 wait
    for rank 4 in the data-parallel all_reduce; ranks 1,3,7 wait for rank 5. Rank 4 is held, not
    the cause: the suspect is rank 5 alone, and it is no cross-group deadlock."""
    cfg = {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(8)))},
           "1": {"name": "1", "desc": "dp_a", "ranks": "[0, 2, 4, 6]"},
           "2": {"name": "2", "desc": "dp_b", "ranks": "[1, 3, 5, 7]"},
           "3": {"name": "3", "desc": "tp_45", "ranks": "[4, 5]"}}

    def rec(rid, group, desc, seq, done):
        return {"record_id": rid, "process_group": (group, desc), "collective_seq_id": seq,
                "p2p_seq_id": 0, "op_id": seq, "profiling_name": "nccl:all_reduce",
                "time_created_ns": 1_790_000_000_000_000_000 + rid, "input_sizes": [[8]],
                "input_dtypes": ["Float"], "output_sizes": [[8]], "output_dtypes": ["Float"],
                "state": "completed" if done else "started", "retired": done, "is_p2p": False,
                "frames": []}

    dumps = []
    for r in range(8):
        dp, desc = ("1", "dp_a") if r % 2 == 0 else ("2", "dp_b")
        es = [rec(0, dp, desc, 1, True)]
        if r in (4, 5):
            es.append(rec(1, "3", "tp_45", 1, True))
        if r == 4:
            es.append(rec(2, "3", "tp_45", 2, False))
        elif r != 5:
            es.append(rec(2, dp, desc, 2, False))
        data = pickle.dumps({"version": "2.4", "pg_config": cfg, "entries": es}, protocol=2)
        dumps += reader.read_dump(data, f"nccl_trace_rank_{r}", written=1.8e9)
    fa = fr.analyse(FrPoll(dumps=tuple(dumps)))
    assert fr.CROSS_GROUP not in kinds(fa)
    assert fa.suspects == (5,), [(f.kind, f.ranks, f.suspects) for f in fa.findings]
    assert any("held there in turn" in f.text for f in fa.findings)
