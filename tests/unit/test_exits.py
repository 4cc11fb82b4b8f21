"""How and when a departed rank left (rltui.diagnosis.exits), and what rank-exited says of it."""

from __future__ import annotations

from datetime import datetime

from rltui.diagnosis import ranks
from rltui.diagnosis.exits import exit_of
from rltui.diagnosis.logs import stall_limit
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import (
    DepartedRank,
    LogEvent,
    LogFileState,
    NodeSnapshot,
    ProcInfo,
    SourceState,
    StepRecord,
)

NOW = 1_800_000_000.0


def snap(*logs: LogFileState, departed=(), procs=()) -> NodeSnapshot:
    return NodeSnapshot(timestamp=NOW, logs=logs, departed=tuple(departed), procs=tuple(procs),
                        sources=(SourceState("procs", "ok"),))


def traceback_event(t: float | None, arrival: float) -> LogEvent:
    return LogEvent(kind="traceback", line_no=10, end_line=20, arrival=arrival, time=t,
                    summary="RuntimeError: CUDA error: illegal memory access at trainer.py:130 "
                            "in step")


def test_torchrun_summary_gives_the_code_and_time():
    failed = datetime(2026, 12, 1, 3, 12, 7).timestamp()
    summary = LogEvent(kind="child-failed", line_no=1, end_line=9, arrival=NOW,
                       summary="rank 2 failed", fields=(("rank", 2), ("exitcode", 1),
                                                        ("failure_time", "2026-12-01_03:12:07")))
    d = DepartedRank(pid=0, rank=2, last_seen=0.0, gone_since=NOW,
                     reason="missing from WORLD_SIZE")
    ex = exit_of(snap(LogFileState(path="launcher.log", events=(summary,)),
                      LogFileState(path="rank2.log", rank=2,
                                   events=(traceback_event(None, NOW - 50),))), d)
    assert (ex.code, ex.at, ex.at_from) == (1, failed, "torchrun's summary")
    assert ex.error.startswith("RuntimeError: CUDA error") and ex.how == "exit code 1"


def test_without_a_witness_the_log_and_then_rltui_tell_the_time():
    d = DepartedRank(pid=7, rank=1, last_seen=NOW - 30, gone_since=NOW - 29)
    ex = exit_of(snap(LogFileState(path="r1.log", pid=7, rank=1,
                                   events=(traceback_event(NOW - 31, NOW - 31),))), d)
    assert ex.at == NOW - 31 and ex.at_from == "its log's time stamp" and ex.crashed
    quiet = exit_of(snap(), d)
    assert quiet.at == NOW - 30 and quiet.at_from == "last seen alive by rltui"
    assert not quiet.crashed and quiet.how == ""


def test_rank_exited_says_crashed_only_with_an_error_and_ages_from_the_evidence():
    alive = ProcInfo(pid=5, rank=0)
    d = DepartedRank(pid=0, rank=1, last_seen=0.0, gone_since=NOW,
                     reason="missing from WORLD_SIZE")
    log = LogFileState(path="/l/rank1.log", rank=1, found="beside rank 0's log rank0.log",
                       events=(traceback_event(None, NOW - 90),))
    (s,) = ranks.rank_exited(snap(log, departed=[d], procs=[alive]), (), Thresholds())
    assert s.title == ("rank 1 crashed (RuntimeError at trainer.py:130 in step) while 1 other "
                       "process(es) remain")
    assert s.since == NOW - 90
    assert any("90 s ago" in e for e in s.evidence), s.evidence
    assert any("found beside rank 0's log" in e for e in s.evidence)
    (plain,) = ranks.rank_exited(snap(departed=[d], procs=[alive]), (), Thresholds())
    assert plain.title == "rank 1 exited while 1 other process(es) remain"


def test_a_history_read_at_once_takes_the_step_time_from_the_log():
    steps = tuple(StepRecord(step=i, line_no=i, arrival=NOW, metrics=(("step_time", 40.0),))
                  for i in range(6))
    limit, median = stall_limit(LogFileState(path="x", recent_steps=steps), Thresholds())
    assert median == 40.0 and limit == 200.0  # 5 x 40 s, above the 60 s floor
