"""The live stack rule: snapshot rounds -> hang report and symptom (rltui.diagnosis.hangs)."""

from __future__ import annotations

from rltui import model
from rltui.diagnosis import diagnose, hangs
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import (
    DepartedRank,
    Frame,
    LogFileState,
    NodeSnapshot,
    ProcessDump,
    StackPoll,
    ThreadStack,
)

DIST = "torch/distributed/distributed_c10d.py"


def waiting(rank: int, op: str = "all_reduce", caller_line: int = 40) -> ProcessDump:
    frames = (Frame(op, DIST, 2500), Frame("train_step", "train.py", caller_line),
              Frame("main", "train.py", 90))
    return ProcessDump(pid=100 + rank, rank=rank, threads=(
        ThreadStack(1, "MainThread", "idle", frames),))


def round_at(t: float, *dumps: ProcessDump) -> StackPoll:
    return StackPoll(dumps=tuple(dumps), started=t, finished=t + 0.2)


def snap(*rounds: StackPoll, now: float = 100.0, **kw) -> NodeSnapshot:
    return NodeSnapshot(timestamp=now, stacks=tuple(rounds), **kw)


def test_no_rounds_no_report_and_no_symptom():
    assert hangs.stack_report(snap()) is None
    assert hangs.stack_hang(snap(), (), Thresholds()) == []


def test_same_collective_in_every_rank_is_pattern_c_and_a_symptom():
    s = snap(round_at(90.0, *(waiting(r) for r in range(4))))
    report = hangs.stack_report(s)
    assert report.pattern == "C"
    found = hangs.stack_hang(s, (), Thresholds())
    assert [x.id for x in found] == ["hang-same-collective"]
    assert found[0].since == 90.0
    assert "hang-same-collective" in [x.id for x in diagnose(s).symptoms]


def test_a_departed_rank_counts_as_missing_from_the_dump():
    gone = DepartedRank(pid=103, rank=3, last_seen=80.0, gone_since=81.0)
    s = snap(round_at(90.0, *(waiting(r) for r in range(3))), departed=(gone,))
    report = hangs.stack_report(s)
    assert report.missing_ranks == (3,)
    assert report.pattern == "A"
    assert 3 in report.suspect_ranks


def test_rounds_closer_than_the_gap_count_as_one_sample():
    a, b, c = round_at(80.0), round_at(83.0), round_at(90.0)
    assert hangs.samples([a, b, c], 5.0) == [b, c]  # 83 -> 90 is 7 s; 80 -> 83 only 3
    assert hangs.samples([a, b, c], 8.0) == [a, c]
    assert hangs.samples([a, b, c], 1.0) == [a, b, c]
    assert hangs.samples([c], 5.0) == [c]


def test_two_rounds_far_apart_confirm_a_stuck_hang():
    dumps = [waiting(r) for r in range(2)]
    s = snap(round_at(70.0, *dumps), round_at(90.0, *dumps))
    report = hangs.stack_report(s)
    assert report.samples == 2 and report.confirmed
    assert hangs.stack_hang(s, (), Thresholds())[0].severity == "critical"


def test_two_rounds_one_second_apart_are_not_a_confirmation():
    dumps = [waiting(r) for r in range(2)]
    s = snap(round_at(89.0, *dumps), round_at(90.0, *dumps))
    report = hangs.stack_report(s)
    assert report.samples == 1 and not report.confirmed


def test_steps_that_advanced_after_the_first_round_rule_out_a_hang():
    dumps = [waiting(r) for r in range(2)]
    log = LogFileState(path="r0.log", rank=0, steps_seen=5, last_step=5, last_step_time=95.0,
                       last_step_arrival=95.0)
    s = snap(round_at(70.0, *dumps), round_at(90.0, *dumps), logs=(log,))
    assert hangs.steps_state(s, (), Thresholds()) is False
    report = hangs.stack_report(s)
    assert not report.hang
    assert hangs.stack_hang(s, (), Thresholds()) == []


def test_the_report_is_memoised_on_the_rounds():
    memo = hangs.HangMemo()
    r = round_at(90.0, *(waiting(x) for x in range(2)))
    first = memo.report(snap(r, now=100.0))
    assert memo.report(snap(r, now=101.0)) is first
    other = memo.report(snap(round_at(90.0, *(waiting(x) for x in range(2)))))
    assert other is not first
    # another watcher (another job) has its own memo: it classifies its rounds itself
    assert hangs.HangMemo().report(snap(r, now=101.0)) is not first


def test_a_failed_round_is_a_note_not_a_symptom():
    state = model.SourceState("stacks", model.DENIED, 1.0, None, "ptrace denied", "run as root")
    d = diagnose(NodeSnapshot(timestamp=2.0, sources=(state,)))
    assert not any(s.id.startswith("hang-") for s in d.symptoms)
    assert any(n.startswith("stacks: denied") for n in d.notes)


def test_a_rank_that_exited_after_its_dump_counts_as_missing_not_waiting():
    gone = DepartedRank(pid=101, rank=1, last_seen=95.0, gone_since=96.0)
    s = snap(round_at(90.0, waiting(0), waiting(1), waiting(2)), departed=(gone,))
    report = hangs.stack_report(s)
    assert report.missing_ranks == (1,) and report.pattern == "A"
    assert 1 in report.suspect_ranks


def test_a_pid_reused_after_its_rank_exited_is_a_new_process_and_stays():
    """Rank 1 (pid 101) exited at 96 s; a new process got pid 101 and was dumped at 98 s as
    rank 5. Its dump is not the dead rank's and must not be dropped with it."""
    gone = DepartedRank(pid=101, rank=1, last_seen=95.0, gone_since=96.0)
    reused = ProcessDump(pid=101, rank=5, threads=waiting(5).threads)
    s = snap(round_at(90.0, waiting(0), waiting(1)), round_at(98.0, waiting(0), reused),
             departed=(gone,))
    rounds = [hangs.still_here(p, hangs.departed_pids(s.departed)) for p in s.stacks]
    assert [[d.rank for d in r] for r in rounds] == [[0], [0, 5]]
    assert 5 in {m for c in hangs.stack_report(s).classes for m in c.members}


def test_the_memo_follows_the_sample_gap_threshold():
    dumps = [waiting(r) for r in range(2)]
    s = snap(round_at(87.0, *dumps), round_at(90.0, *dumps))
    assert hangs.stack_report(s, (), Thresholds(stack_sample_gap_s=5.0)).samples == 1
    assert hangs.stack_report(s, (), Thresholds(stack_sample_gap_s=2.0)).samples == 2


def test_a_hangs_age_counts_from_its_onset_as_rounds_rotate():
    """Rounds every 10 s, three kept: the oldest kept round moves on every time, the hang's
    since stays at the first round that showed it (no 22 s, 25 s, 28 s, 21 s sawtooth)."""
    memo = hangs.HangMemo()
    kept: list[StackPoll] = []
    sinces = []
    for i in range(6):
        kept = (kept + [round_at(10.0 * i, *(waiting(r) for r in range(3)))])[-3:]
        (s,) = memo.symptoms(snap(*kept, now=10.0 * i + 1), (), Thresholds())
        sinces.append(s.since)
    assert sinces == [0.0] * 6
    assert s.evidence[0].startswith("since ")


def test_a_hangs_onset_is_the_last_step_before_it_when_a_log_has_one():
    memo = hangs.HangMemo()
    log = LogFileState(path="r0.log", rank=0, steps_seen=5, last_step=5, last_step_time=70.0,
                       last_step_arrival=70.0)
    rounds = (round_at(90.0, *(waiting(r) for r in range(3))),
              round_at(96.0, *(waiting(r) for r in range(3))))
    (s,) = memo.symptoms(snap(*rounds, now=100.0, logs=(log,)), (), Thresholds())
    assert s.since == 70.0
