"""The live stack rule: the snapshot's latest py-spy rounds -> the hang report and its symptom.

``rltui.diagnosis.stacks.classify`` reads the stacks; this module feeds it what the rest of the
snapshot knows: ranks that exited (departed, or missing from WORLD_SIZE) count as missing from
the dump, and the logs say whether the steps still advance. A job whose steps advanced after
the first sampled round is not hung, however alike its stacks look (a job that spends most of
its time in one all_reduce is at that all_reduce in most dumps).

The report is memoised on the identity of the rounds it reads (``HangMemo``, one per watched
job, owned by the monitor): the UI evaluates every second, the stacks change every N seconds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rltui import units
from rltui.diagnosis import flightrec
from rltui.diagnosis import logs as log_rules
from rltui.diagnosis.evidence import prepend
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import DepartedRank, NodeSnapshot, ProcessDump, StackPoll, Symptom, replace

if TYPE_CHECKING:
    from rltui.diagnosis.stacks import StackReport


def steps_state(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                th: Thresholds) -> bool | None:
    """True: the steps are stalled (the steps-stalled rule fires); False: some log reported a
    step after the first sampled round started; None: the logs cannot tell."""
    if not snap.stacks:
        return None
    if log_rules.steps_stalled(snap, history, th):
        return True
    first = snap.stacks[0].started
    if any(log.last_step_time is not None and log.last_step_arrival is not None
           and log.last_step_arrival >= first for log in snap.logs):
        return False
    return None


def samples(rounds: Sequence[StackPoll], gap: float) -> list[StackPoll]:
    """The rounds that count as samples, oldest first: the latest, and each earlier one only
    when it started at least ``gap`` seconds before the next one kept."""
    kept: list[StackPoll] = []
    for poll in reversed(rounds):
        if not kept or kept[-1].started - poll.started >= gap:
            kept.append(poll)
    return kept[::-1]


def departed_pids(departed: Sequence[DepartedRank]) -> dict[int, float]:
    """pid -> when it was first seen gone, for the departed processes that had a pid."""
    return {d.pid: d.gone_since for d in departed if d.pid}


def still_here(poll: StackPoll, gone: Mapping[int, float]) -> list[ProcessDump]:
    """The round's dumps without those of processes that exited since: a process that exited
    after its last dump is missing now, not waiting where it was. A dump taken after its pid
    was seen gone is of a new process that reused the pid, and stays. Saved dumps are what the
    user gave, kept whole."""
    if poll.trigger == "saved":
        return list(poll.dumps)
    return [d for d in poll.dumps if d.pid not in gone or poll.started >= gone[d.pid]]


def absent_ranks(snap: NodeSnapshot) -> set[int]:
    """Ranks known to be gone, from every source at hand, not only the stacks:

    * departed ranks: seen alive, then gone, and on a job that lives on this node alone the
      ranks below WORLD_SIZE that never ran (the snapshot fold adds those);
    * torchrun's failure summary (``child-failed``) naming a rank;
    * beside saved dumps that carry ranks: a rank that has a log and no dump.
    """
    gone = {d.rank for d in snap.departed if d.rank is not None}
    dumped = {d.rank for d in (snap.stacks[-1].dumps if snap.stacks else ())
              if d.rank is not None}
    saved = bool(snap.stacks) and snap.stacks[-1].trigger == "saved"
    for log in snap.logs:
        for e in log.events:
            if e.kind == "child-failed":
                r = e.field("rank")
                if isinstance(r, int) and r not in dumped:
                    gone.add(r)
        if saved and dumped and log.rank is not None and log.rank not in dumped:
            # A log and no dump beside the others' dumps: it had exited (its log's last
            # event, a crash or the completion banner, says how, in the log rules' symptoms).
            gone.add(log.rank)
    return gone


class HangMemo:
    """The hang report of the latest rounds, memoised on their identity: the UI evaluates
    every second, the stacks change every N seconds. One per job being watched (the monitor
    owns them): the rounds of two jobs would push each other out of one memo."""

    def __init__(self) -> None:
        self._memo: tuple[tuple, StackReport, tuple] | None = None
        self._state: tuple[NodeSnapshot, bool | None] | None = None
        self._onsets: dict[tuple, float] = {}  # (symptom id, ranks) -> when that hang began

    def report(self, snap: NodeSnapshot, history: Sequence[NodeSnapshot] = (),
               th: Thresholds | None = None) -> StackReport | None:
        """The hang report of the snapshot's stack rounds, read beside the ranks' Flight
        Recorder dumps when there are any; None when there are neither."""
        if not snap.stacks and (snap.flight_recorder is None or not snap.flight_recorder.dumps):
            return None
        from rltui.diagnosis.stacks import classify  # loaded once there are stacks to read
        if not snap.stacks:  # the Flight Recorder's dumps alone
            key = ("fr-only", id(snap.flight_recorder))
            if self._memo is not None and self._memo[0] == key:
                return self._memo[1]
            report = flightrec.read_beside(classify([]), snap)
            self._memo = (key, report, (snap.flight_recorder,))
            return report
        th = th or Thresholds()
        missing = tuple(sorted(absent_ranks(snap)))
        # The rule and Monitor.stacks ask about the same snapshot: read the logs once.
        if self._state is not None and self._state[0] is snap:
            stalled = self._state[1]
        else:
            stalled = steps_state(snap, history, th)
            self._state = (snap, stalled)
        gone = departed_pids(snap.departed)
        key = (tuple(id(p) for p in snap.stacks), missing, stalled,
               tuple(sorted(gone.items())), th.stack_sample_gap_s, id(snap.flight_recorder))
        if self._memo is not None and self._memo[0] == key:
            return self._memo[1]
        rounds = [still_here(p, gone) for p in samples(snap.stacks, th.stack_sample_gap_s)]
        report = classify(rounds, missing_ranks=missing, steps_stalled=stalled)
        report = flightrec.read_beside(report, snap)
        # The memo holds the rounds themselves too, so none of the ids in the key can be
        # reused by a new object while it stands.
        self._memo = (key, report, (snap.stacks, snap.flight_recorder))
        return report

    def symptoms(self, snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                 th: Thresholds) -> list[Symptom]:
        """The rule: a hang named from the stacks (hang-* symptom ids), stamped with its onset:
        the last step any log reported before it, else the first round that showed it. The
        onset is remembered while the same hang holds, so its age grows steadily instead of
        restarting as old rounds make way for new ones."""
        report = self.report(snap, history, th)
        if report is None:
            self._onsets = {}
            return []
        out, onsets = [], {}
        from rltui.diagnosis.stacks import symptoms as stack_symptoms
        for s in stack_symptoms(report):
            key = (s.id, s.ranks)
            onset = self._onsets.get(key)
            if onset is None:
                onset = snap.stacks[0].started if snap.stacks else \
                    flightrec.onset(report.flight_recorder, snap.timestamp)
                steps = [log.last_step_time for log in snap.logs
                         if log.last_step_time is not None and log.last_step_time <= onset]
                if steps:
                    onset = max(steps)
            onsets[key] = onset
            clock = units.clock(onset)
            out.append(prepend(replace(s, since=onset), [f"since {clock}"]))
        self._onsets = onsets
        return out


def stack_report(snap: NodeSnapshot, history: Sequence[NodeSnapshot] = (),
                 th: Thresholds | None = None) -> StackReport | None:
    """The hang report of the snapshot's stack rounds, unmemoised (one-off callers)."""
    return HangMemo().report(snap, history, th)


def stack_hang(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
               th: Thresholds) -> list[Symptom]:
    """The rule without a memo (``diagnose`` passes the monitor's own when it has one)."""
    return HangMemo().symptoms(snap, history, th)
