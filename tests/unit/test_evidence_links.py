"""Evidence links: what each evidence line of a symptom names (rltui.diagnosis.evidence), built
by the rules beside the text. Each case runs a real rule on its inputs (the saved py-spy dumps
of fixtures/stacks for the hang rule) and checks that the link agrees with its line's text."""

from __future__ import annotations

import re

from rltui import model
from rltui.diagnosis import hangs
from rltui.diagnosis.evidence import (
    FRAME,
    LOG_LINE,
    RANK,
    STACK_CLASS,
    Evidence,
    at_frame,
    at_ranks,
    describe,
    link_of,
    prepend,
)
from rltui.diagnosis.logs import cuda_oom, nccl_timeout, steps_stalled, zero_step_completion
from rltui.diagnosis.ranks import rank_exited
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import (
    DepartedRank,
    EvidenceLink,
    Frame,
    LogEvent,
    LogFileState,
    NodeSnapshot,
    ProcInfo,
    SourceState,
    StackPoll,
    StepRecord,
    Symptom,
)
from rltui.rankset import label
from rltui.serialize import to_data
from tests.fakes.scenarios import saved_dumps

TH = Thresholds()
T0 = 1_700_000_000.0


def event(kind, line_no, end_line=None, summary="boom", **fields):
    return LogEvent(kind=kind, line_no=line_no, end_line=end_line or line_no, arrival=T0,
                    summary=summary, fields=tuple(fields.items()))


def snap(now, logs=(), procs=(), departed=(), stacks=()):
    return NodeSnapshot(timestamp=now, logs=tuple(logs), procs=tuple(procs),
                        departed=tuple(departed), stacks=tuple(stacks),
                        sources=(SourceState("procs", model.OK, now, now),))


def agrees(s: Symptom) -> None:
    """Every link points at a line of the evidence and says what that line says."""
    assert len({k.evidence for k in s.evidence_links}) == len(s.evidence_links)
    for k in s.evidence_links:
        text = s.evidence[k.evidence]
        if k.kind == LOG_LINE:
            assert re.search(re.escape(k.path) + rf":\+?{k.line}\b", text), (k, text)
        elif k.kind == RANK:
            assert label(k.ranks) in text or f"rank {k.ranks[0]}" in text, (k, text)
        elif k.kind == STACK_CLASS:
            assert text.startswith(label(r for r in k.ranks if r >= 0)), (k, text)
        elif k.kind == FRAME:
            assert f"{k.path.rsplit('/', 1)[-1]}:{k.line}" in text, (k, text)
        else:
            raise AssertionError(k)


def test_a_traceback_and_the_rank_it_killed():
    rank3 = LogFileState(path="/logs/rank3.log", rank=3, events=(
        event("traceback", 29, 34, "RuntimeError: NCCL communicator was aborted"),))
    s = snap(T0 + 100, logs=[rank3], departed=[
        DepartedRank(pid=103, rank=3, last_seen=T0, gone_since=T0 + 1)],
        procs=[ProcInfo(pid=100 + r, rank=r) for r in range(3)])
    [found] = rank_exited(s, [s], TH)
    agrees(found)
    kinds = [(k.kind, k.ranks or (k.path, k.line)) for k in found.evidence_links]
    assert kinds == [(RANK, (3,)), (LOG_LINE, ("/logs/rank3.log", 29))]
    assert found.evidence[1].startswith("rank 3's last error: /logs/rank3.log:29-34: ")


def test_torchrun_s_child_failed_report_and_the_rank_s_own_error():
    launcher = LogFileState(path="/logs/torchrun.log", events=(
        event("child-failed", 80, 92, "rank 1 (local_rank 1) exited with exitcode 1", rank=1),))
    rank1 = LogFileState(path="/logs/rank1.log", rank=1, events=(
        event("traceback", 40, 48, "ValueError: bad batch"),))
    s = NodeSnapshot(timestamp=T0 + 100, logs=(launcher, rank1))
    [found] = rank_exited(s, [s], TH)
    agrees(found)
    assert [(k.path, k.line) for k in found.evidence_links] == [("/logs/torchrun.log", 80),
                                                                ("/logs/rank1.log", 40)]


def test_oom_nccl_and_zero_step_lines_open_their_log_lines():
    oom = LogFileState(path="/logs/rank2.log", rank=2, events=(
        event("cuda-oom", 22, requested=2**31, gpu=2),))
    [found] = cuda_oom(snap(T0, logs=[oom]), [], TH)
    agrees(found)
    assert found.evidence_links == (EvidenceLink(0, LOG_LINE, path="/logs/rank2.log", line=22),)

    nccl = LogFileState(path="/logs/rank0.log", rank=0, events=(
        event("nccl-timeout", 310, rank=0, op="ALLREDUCE", seq=41, pg=0, timeout_ms=600_000),))
    [found] = nccl_timeout(snap(T0, logs=[nccl]), [], TH)
    agrees(found)
    assert [k.line for k in found.evidence_links] == [310]
    assert link_of(found, len(found.evidence) - 1) is None  # "every timeout is at ..."

    # Uncounted lines before the history window: the text says +N, the link holds N.
    banner = LogFileState(path="/logs/driver.log", line_base_known=False, events=(
        event("completion", 7, summary="Training finished"),))
    s = snap(T0, logs=[banner], procs=[ProcInfo(pid=100, rank=0)])
    [found] = zero_step_completion(s, [s], TH)
    agrees(found)
    assert found.evidence[0].startswith("/logs/driver.log:+7: ")
    assert found.evidence_links[0].line == 7


def test_a_stalled_log_opens_at_its_last_step():
    steps = tuple(StepRecord(step=i, line_no=10 * i, arrival=T0 + 30 * i + 0.5,
                             time=T0 + 30 * i) for i in range(1, 6))
    f = LogFileState(path="/logs/train.log", rank=0, steps_seen=5, last_step=5,
                     last_step_time=steps[-1].time, recent_steps=steps)
    s = snap(T0 + 150 + 400, logs=[f], procs=[ProcInfo(pid=100, rank=0)])
    [found] = steps_stalled(s, [s], TH)
    assert found.evidence_links == (EvidenceLink(0, LOG_LINE, path="/logs/train.log", line=50),)
    assert found.evidence[0].startswith("/logs/train.log: last step 5 at ")


def test_the_hang_rule_links_classes_and_the_divergence_frame():
    """The real dumps of fixtures/stacks/cleanup-deadlock: ranks 0-1 in recv_object_list, rank
    2 in destroy_process_group reached from Trainer.__exit__."""
    dumps = saved_dumps("cleanup-deadlock")
    rounds = tuple(StackPoll(dumps=dumps, started=T0 + t, finished=T0 + t + 0.5)
                   for t in (10, 20))
    s = NodeSnapshot(timestamp=T0 + 30, stacks=rounds)
    [found] = hangs.stack_hang(s, (), TH)
    agrees(found)
    assert found.evidence[0].startswith("since ")  # prepended: the links moved down with it
    report = hangs.stack_report(s)
    by_kind = {k.kind: k for k in found.evidence_links}
    classes = [k for k in found.evidence_links if k.kind == STACK_CLASS]
    assert [(k.stack_class, k.ranks) for k in classes] == [
        (i, tuple(c.members)) for i, c in enumerate(report.classes)]
    assert [k.evidence for k in classes] == [1, 2]
    frame = by_kind[FRAME]
    assert (frame.path, frame.line, frame.name) == (report.divergence.filename,
                                                    report.divergence.line,
                                                    report.divergence.name)
    assert found.evidence[frame.evidence].startswith("ranks diverge below ")


def test_missing_ranks_link_to_their_rows():
    dumps = [d for d in saved_dumps("cleanup-deadlock") if d.rank != 2]
    s = NodeSnapshot(timestamp=T0 + 30, departed=(
        DepartedRank(pid=9, rank=2, last_seen=T0, gone_since=T0 + 1),),
        stacks=(StackPoll(dumps=tuple(dumps), started=T0 + 10, finished=T0 + 11),))
    [found] = hangs.stack_hang(s, (), TH)
    agrees(found)
    missing = [k for k in found.evidence_links if k.kind == RANK]
    assert [k.ranks for k in missing] == [(2,)]
    assert "missing from the dump" in found.evidence[missing[0].evidence]


def test_the_builder_prepend_and_describe():
    ev = Evidence()
    ev.add("no link")
    ev.add("rank 3 (pid 7): exited", at_ranks([None, 3]))
    ev.add("busy loop at poll (loop.py:12)", at_frame(Frame("poll", "/src/loop.py", 12)))
    assert at_ranks([None]) is None and at_frame(Frame("f", "x.py", 0)) is None
    s = Symptom(id="x", severity="info", title="t", **ev.fields())
    assert [k.evidence for k in s.evidence_links] == [1, 2]
    moved = prepend(s, ["since 10:00:00"])
    assert moved.evidence[0] == "since 10:00:00"
    assert [k.evidence for k in moved.evidence_links] == [2, 3]
    assert link_of(moved, 2).ranks == (3,) and link_of(moved, 1) is None
    assert describe(link_of(moved, 3)) == "the source at loop.py:12"
    assert describe(link_of(moved, 2)) == "rank 3's row"


def test_json_keeps_evidence_as_strings_and_adds_the_links():
    ev = Evidence()
    ev.add("/logs/a.log:4: boom", EvidenceLink(-1, LOG_LINE, path="/logs/a.log", line=4))
    data = to_data(Symptom(id="x", severity="info", title="t", **ev.fields()))
    assert data["evidence"] == ["/logs/a.log:4: boom"]
    assert data["evidence_links"] == [{"evidence": 0, "kind": "log-line", "path": "/logs/a.log",
                                       "line": 4, "ranks": [], "stack_class": None,
                                       "name": ""}]
