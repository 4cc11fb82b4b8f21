"""The timeline (rltui.diagnosis.timeline): per rank, its steps, when it last advanced and when
it stopped, who stopped first first; its JSON in the diagnose document and its chart in the
incident report."""

from __future__ import annotations

import json

from rltui import incident
from rltui.diagnosis import diagnose
from rltui.diagnosis.hangs import stack_report
from rltui.diagnosis.timeline import MAX_RANKS, build, timeline_json
from rltui.diagnosis.timelinechart import chart, summary
from rltui.model import (
    DepartedRank,
    LogEvent,
    LogFileState,
    NodeSnapshot,
    ProcInfo,
    SourceState,
    StackPoll,
    StepRecord,
    replace,
)
from rltui.report import to_json
from tests.fakes.scenarios import saved_dumps

T0 = 1_700_000_000.0
STEP = 4.0  # seconds a step takes
PROCS = SourceState("procs", "ok", T0, T0)


def _log(rank: int, last: int, last_at: float, first: int = 1,
         events: tuple[LogEvent, ...] = ()) -> LogFileState:
    """A rank's log as the log book holds it: its steps 1..last, ``STEP`` s apart, the last at
    ``last_at``."""
    steps = tuple(StepRecord(s, line_no=10 + s, arrival=last_at - (last - s) * STEP + 0.3,
                             time=last_at - (last - s) * STEP) for s in range(first, last + 1))
    return LogFileState(path=f"/jobs/run/rank{rank}.log", rank=rank, pid=4100 + rank,
                        format="verl", steps_seen=len(steps), last_step=last,
                        last_step_time=last_at, last_step_arrival=last_at + 0.3,
                        recent_steps=steps[-64:], events=events)


def _proc(rank: int) -> ProcInfo:
    return ProcInfo(pid=4100 + rank, rank=rank, world_size=4, state="sleeping",
                    stdout_path=f"/jobs/run/rank{rank}.log")


def _snap(now: float, logs, procs=None, departed=(), stacks=()) -> NodeSnapshot:
    procs = tuple(_proc(r) for r in range(4)) if procs is None else procs
    return NodeSnapshot(timestamp=now, host="node-1", job="train", procs=procs,
                        departed=departed, logs=tuple(logs), stacks=tuple(stacks),
                        sources=(PROCS,))


def test_a_stall_where_rank_3_stopped_first():
    # rank 3 stopped stepping at step 10; the others finished step 12 and wait for it. Five
    # minutes on every log is past the steps-stalled limit.
    logs = [_log(0, 12, T0 + 48), _log(1, 12, T0 + 48.5), _log(2, 12, T0 + 47.9),
            _log(3, 10, T0 + 40)]
    tl = build(_snap(T0 + 340, logs))
    assert [r.rank for r in tl.ranks] == [3, 2, 0, 1]
    first = tl.first_to_stop
    assert first is not None and first.rank == 3
    assert (first.state, first.stopped_by, first.stopped_at) == ("stopped", "log", T0 + 40)
    assert first.last_step == 10 and first.first_step == (1, T0 + 4)
    assert all(r.state == "stopped" and r.stopped_at == r.last_advance_at for r in tl.ranks)
    assert (tl.start, tl.end) == (T0 + 47.9 - 11 * STEP, T0 + 340)  # rank 2's first step


def test_a_rank_that_exited_goes_first_and_the_others_still_advance():
    # rank 3 crashed 20 s ago (its log's traceback has a time); 0-2 step on, 4 s ago.
    crash = LogEvent("traceback", 90, 96, T0 + 61, "RuntimeError: NCCL communicator was aborted",
                     time=T0 + 60.5)
    logs = [_log(r, 20, T0 + 76) for r in range(3)] + [_log(3, 15, T0 + 59, events=(crash,))]
    gone = DepartedRank(pid=4103, rank=3, last_seen=T0 + 61, gone_since=T0 + 62,
                        info=_proc(3))
    tl = build(_snap(T0 + 80, logs, procs=tuple(_proc(r) for r in range(3)),
                     departed=(gone,)))
    assert [r.rank for r in tl.ranks] == [3, 0, 1, 2]
    r3 = tl.ranks[0]
    assert (r3.state, r3.stopped_by, r3.stopped_at) == ("exited", "exit", T0 + 59)
    assert r3.left_at == T0 + 60.5  # the traceback's own time stamp
    for r in tl.ranks[1:]:
        assert (r.state, r.stopped_at, r.stopped_by) == ("advancing", None, None)
        assert r.last_advance_at == T0 + 76
    data = timeline_json(tl)
    assert data["first_to_stop"] == {"rank": 3, "job": None, "stopped_at": T0 + 59,
                                     "stopped_by": "exit", "together": []}


def test_a_rank_that_left_before_its_peers_stopped_wins_the_tie():
    # the same second on every log: the one that left is named first
    logs = [_log(r, 9, T0 + 40) for r in range(4)]
    gone = DepartedRank(pid=4102, rank=2, last_seen=T0 + 41, gone_since=T0 + 42, info=_proc(2))
    procs = tuple(_proc(r) for r in (0, 1, 3))
    tl = build(_snap(T0 + 200, logs, procs=procs, departed=(gone,)))
    assert [r.rank for r in tl.ranks] == [2, 0, 1, 3]
    # the others logged their last step with it and none since: they stopped when it left
    left = tl.ranks[0].left_at
    assert left is not None and all(r.stopped_at == left for r in tl.ranks[1:])
    assert timeline_json(tl)["first_to_stop"]["together"] == []


def test_a_peer_killed_long_after_a_hang_changes_nothing():
    """Rank 3 stopped stepping at T0+40, the others at T0+48; rank 0 was killed ten minutes
    later (a watchdog): the hang came first, the kill is no cause of it."""
    logs = [_log(0, 12, T0 + 48), _log(1, 12, T0 + 48), _log(2, 12, T0 + 48),
            _log(3, 10, T0 + 40)]
    gone = DepartedRank(pid=4100, rank=0, last_seen=T0 + 648, gone_since=T0 + 649,
                        info=_proc(0))
    tl = build(_snap(T0 + 700, logs, procs=tuple(_proc(r) for r in (1, 2, 3)),
                     departed=(gone,)))
    assert tl.ranks[0].rank == 3 and tl.ranks[0].stopped_at == T0 + 40
    assert {r.rank: r.stopped_at for r in tl.ranks[1:] if r.rank in (1, 2)} == \
        {1: T0 + 48, 2: T0 + 48}


def test_a_healthy_job_where_nobody_stopped():
    logs = [_log(r, 30, T0 + 118 + r * 0.2) for r in range(4)]
    tl = build(_snap(T0 + 120, logs))
    assert tl.first_to_stop is None
    assert [r.rank for r in tl.ranks] == [0, 1, 2, 3]
    assert {r.state for r in tl.ranks} == {"advancing"}
    assert timeline_json(tl)["first_to_stop"] is None
    assert summary(timeline_json(tl)) == "No rank has stopped advancing."


def test_ranks_nothing_tells_about_are_unknown_and_said_so():
    tl = build(_snap(T0 + 120, []))
    assert [(r.rank, r.state, r.stopped_at) for r in tl.ranks] == [
        (r, "unknown", None) for r in range(4)]
    assert summary(timeline_json(tl)).startswith("Nothing tells when the ranks advance")


def test_a_finished_run_is_not_a_stop():
    done = LogEvent("completion", 200, 200, T0 + 41, "training finished", time=T0 + 41)
    logs = [_log(0, 10, T0 + 40, events=(done,))]
    tl = build(_snap(T0 + 400, logs, procs=(_proc(0),)))
    assert (tl.ranks[0].state, tl.ranks[0].stopped_at) == ("finished", None)


def _deadlock_rounds(started=(10.0, 20.0, 30.0)) -> tuple[StackPoll, ...]:
    """Three py-spy rounds of the real cleanup-deadlock dumps (fixtures/stacks), the same each
    time: every rank stuck."""
    dumps = saved_dumps("cleanup-deadlock")
    return tuple(StackPoll(dumps=dumps, started=T0 + t, finished=T0 + t + 0.5,
                           command="py-spy dump --pid {pid} --json --nonblocking")
                 for t in started)


def test_stacks_say_when_ranks_without_logs_stopped():
    rounds = _deadlock_rounds()
    procs = tuple(ProcInfo(pid=d.pid, rank=d.rank) for d in rounds[0].dumps)
    snap = _snap(T0 + 40, [], procs=procs, stacks=rounds)
    report = stack_report(snap)
    assert report is not None and report.hang
    tl = build(snap, report)
    assert {(r.state, r.stopped_by, r.stuck_since) for r in tl.ranks} == {
        ("stopped", "stacks", T0 + 10)}
    assert [r.rank for r in tl.ranks] == [0, 1, 2]
    # A rank's log that stopped stepping earlier says when it stopped: it goes first.
    snap = replace(snap, logs=(replace(_log(2, 5, T0 - 100), pid=None),))
    tl = build(snap, stack_report(snap))
    assert [r.rank for r in tl.ranks][0] == 2
    assert (tl.ranks[0].stopped_at, tl.ranks[0].stopped_by) == (T0 - 100, "stacks")


def test_a_step_under_the_stall_limit_outweighs_a_stuck_stack():
    # a job that spends most of its time in one all_reduce is there in every dump
    rounds = _deadlock_rounds()
    procs = tuple(ProcInfo(pid=d.pid, rank=d.rank) for d in rounds[0].dumps)
    logs = [replace(_log(r, 8, T0 + 35), pid=None) for r in range(3)]
    snap = _snap(T0 + 40, logs, procs=procs, stacks=rounds)
    tl = build(snap, stack_report(snap))
    assert {r.state for r in tl.ranks} == {"advancing"}


def test_a_4096_rank_job_is_kept_whole_and_bounded_past_it():
    n = MAX_RANKS + 100
    procs = tuple(ProcInfo(pid=10_000 + r, rank=r) for r in range(n))
    logs = [replace(_log(r, 3, T0 + 10 + (r % 7)), pid=10_000 + r) for r in range(n)]
    tl = build(_snap(T0 + 600, logs, procs=procs))
    assert len(tl.ranks) == MAX_RANKS and tl.more == 100
    assert tl.ranks[0].stopped_at == T0 + 10
    lines = chart(timeline_json(tl), width=40, rows=32, more_where="incident.json")
    assert f"... and {n - 32} more ranks (incident.json)" in lines


def test_the_chart_marks_steps_the_stop_and_the_wait():
    logs = [_log(0, 12, T0 + 48), _log(3, 10, T0 + 40)]
    data = timeline_json(build(_snap(T0 + 200, logs, procs=(_proc(0), _proc(3)))))
    lines = chart(data, width=24)
    rows = [line for line in lines if "|" in line and line.split()[0].isdigit()]
    assert [row.split()[0] for row in rows] == ["3", "0"]
    bar3, bar0 = (row[row.index("|") + 1:-1] for row in rows)
    assert len(bar3) == len(bar0) == 24
    assert bar3.startswith("#") and bar3.index("X") < bar0.index("X")
    assert set(bar3[bar3.index("X") + 1:]) == {"."}
    assert lines[-1].startswith("# step logged")


def test_the_diagnose_document_holds_the_timeline():
    logs = [_log(r, 12, T0 + 48) for r in range(3)] + [_log(3, 10, T0 + 40)]
    snap = _snap(T0 + 340, logs)
    doc = to_json(snap, diagnose(snap), "replay")
    tl = json.loads(json.dumps(doc))["timeline"]
    assert set(tl) == {"start", "end", "first_to_stop", "ranks", "more"}
    assert tl["first_to_stop"]["rank"] == 3 and tl["more"] == 0
    row = tl["ranks"][0]
    assert set(row) == {"rank", "job", "state", "stopped_at", "stopped_by", "last_advance_at",
                        "first_step", "first_step_at", "last_step", "last_step_at",
                        "steps_seen", "left_at", "stuck_since", "steps"}
    assert (row["rank"], row["first_step"], row["last_step"]) == (3, 1, 10)
    assert row["steps"][-1] == [10, T0 + 40]


def test_the_incident_report_has_a_timeline_section():
    logs = [_log(r, 12, T0 + 48) for r in range(40)] + [_log(40, 10, T0 + 40)]
    procs = tuple(_proc(r) for r in range(41))
    snap = _snap(T0 + 340, logs, procs=procs)
    doc = incident.build(incident.ReportInputs(snapshot=snap, diagnosis=diagnose(snap),
                                               log_tails={}))
    assert doc["timeline"]["first_to_stop"]["rank"] == 40
    md = incident.to_markdown(doc)
    section = md[md.index("## Timeline"):md.index("## Stacks")]
    assert "Rank 40 stopped first, at " in section and "its log reported no new step" in section
    rows = [line for line in section.splitlines() if "|" in line and line.split()[0].isdigit()]
    assert len(rows) == incident.TIMELINE_ROWS and rows[0].split()[0] == "40"
    assert "... and 9 more ranks (incident.json holds every rank)" in section


def test_ranks_that_logged_nothing_since_a_peer_left_wait_for_it():
    """Rank 3 crashed at T0+60.5; ranks 0-2 last stepped at T0+59 (steps every 4 s). Under the
    steps-stalled limit, yet 12 s (three of their steps) after the crash they are waiting for
    it, stopped when it left and listed after it; 8 s after, they may still be mid-step."""
    crash = LogEvent("traceback", 90, 96, T0 + 61, "RuntimeError: CUDA error", time=T0 + 60.5)
    logs = [_log(r, 15, T0 + 59) for r in range(3)] + [_log(3, 15, T0 + 59, events=(crash,))]
    gone = DepartedRank(pid=4103, rank=3, last_seen=T0 + 61, gone_since=T0 + 62,
                        info=_proc(3))
    live = tuple(_proc(r) for r in range(3))
    early = build(_snap(T0 + 68.5, logs, procs=live, departed=(gone,)))
    assert [r.state for r in early.ranks] == ["exited", "advancing", "advancing", "advancing"]
    tl = build(_snap(T0 + 72.5, logs, procs=live, departed=(gone,)))
    assert [r.rank for r in tl.ranks] == [3, 0, 1, 2]
    for r in tl.ranks[1:]:
        assert (r.state, r.stopped_by, r.stopped_at) == ("stopped", "log", T0 + 60.5)
    assert timeline_json(tl)["first_to_stop"]["rank"] == 3


def test_two_jobs_a_missing_rank_and_its_log_belong_to_the_job_it_is_missing_from():
    """Job "crash" (ranks 0-2, WORLD_SIZE 3) lost rank 2 before anyone looked: it has no process
    and no pid, only its log rank2.log; job "demo" (ranks 0-3) steps on. Rank 2 of "crash" is the
    one that left, with its log's last step, first; its peers stopped when it left."""
    from rltui.model import Job

    def crash_proc(rank: int) -> ProcInfo:
        return ProcInfo(pid=4100 + rank, rank=rank, world_size=3, state="sleeping",
                        stdout_path=f"/jobs/crash/rank{rank}.log")

    def demo_proc(rank: int) -> ProcInfo:
        return ProcInfo(pid=5100 + rank, rank=rank, world_size=4, state="sleeping",
                        stdout_path=f"/jobs/demo/rank{rank}.log")

    crash_logs = [replace(_log(r, 1, T0 + 10), path=f"/jobs/crash/rank{r}.log",
                          pid=None if r == 2 else 4100 + r) for r in range(3)]
    demo_logs = [replace(_log(r, 40, T0 + 99), path=f"/jobs/demo/rank{r}.log", pid=5100 + r)
                 for r in range(4)]
    missing = DepartedRank(pid=0, rank=2, last_seen=T0 + 10.5, gone_since=T0 + 10.5,
                           reason="missing from WORLD_SIZE")
    procs = (crash_proc(0), crash_proc(1), *(demo_proc(r) for r in range(4)))
    jobs = (Job(id="crash", name="crash", members=(("", 4100), ("", 4101)), ranks=(0, 1, 2),
                world_size=3),
            Job(id="demo", name="demo", members=tuple(("", 5100 + r) for r in range(4)),
                ranks=(0, 1, 2, 3), world_size=4))
    snap = replace(_snap(T0 + 100, crash_logs + demo_logs, procs=procs, departed=(missing,)),
                   jobs=jobs)
    tl = build(snap)
    first = tl.first_to_stop
    assert (first.rank, first.job, first.state, first.last_step) == (2, "crash", "exited", 1)
    assert [(r.rank, r.job) for r in tl.ranks[:3]] == [(2, "crash"), (0, "crash"), (1, "crash")]
    assert not any(r.job is None for r in tl.ranks)
