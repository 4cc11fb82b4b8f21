"""Pure fold of log readings: per-file state for diagnosis and a bounded merged tail for the pane.

Steps and events are kept per file, bounded; lines are kept in one merged, bounded deque in
arrival order, each tagged with a sequence number so the log pane can fetch only what is new.
"""

from __future__ import annotations

from collections import deque

import msgspec

from rltui.model import OK, LogEvent, LogFileState, LogLine, LogPoll, LogUpdate, StepRecord, replace

RECENT_STEPS = 64
MAX_EVENTS = 200
MAX_LINES = 20_000


class TaggedLine(msgspec.Struct, frozen=True):
    """A line of the merged view: which file and rank it came from, in arrival order."""

    seq: int
    path: str
    rank: int | None
    line: LogLine


class _File(msgspec.Struct):
    path: str
    status: str = OK
    message: str = ""
    rank: int | None = None
    pid: int | None = None
    format: str = "unknown"
    lines_seen: int = 0
    lines_before: int = 0  # lines of the generations before this one (rotated, truncated)
    truncations: int = 0
    steps_seen: int = 0
    last_step: StepRecord | None = None
    total_steps: int | None = None
    recent: deque[StepRecord] = msgspec.field(default_factory=lambda: deque(maxlen=RECENT_STEPS))
    events: deque[LogEvent] = msgspec.field(default_factory=lambda: deque(maxlen=MAX_EVENTS))
    last_line_arrival: float | None = None
    line_base_known: bool = True
    found: str = ""
    tie: str = ""

    def state(self) -> LogFileState:
        last = self.last_step
        return LogFileState(
            path=self.path, status=self.status, message=self.message, rank=self.rank,
            pid=self.pid, format=self.format, lines_seen=self.lines_seen,
            truncations=self.truncations,
            steps_seen=self.steps_seen,
            last_step=last.step if last else None,
            last_step_time=last.when if last else None,
            last_step_arrival=last.arrival if last else None,
            total_steps=self.total_steps, recent_steps=tuple(self.recent),
            events=tuple(self.events), last_line_arrival=self.last_line_arrival,
            line_base_known=self.line_base_known, found=self.found, tie=self.tie)


class LogBook:
    def __init__(self, max_lines: int = MAX_LINES) -> None:
        self._files: dict[str, _File] = {}
        self._lines: deque[TaggedLine] = deque(maxlen=max_lines)
        self.seq = 0
        self.unmatched: tuple[str, ...] = ()

    def apply(self, poll: LogPoll, timestamp: float | None = None) -> None:
        """``timestamp``: when the reading was taken (the arrival of lines that carry none)."""
        self.unmatched = poll.unmatched
        for update in poll.files:
            self._apply(update, timestamp)

    def _apply(self, u: LogUpdate, timestamp: float | None = None) -> None:
        f = self._files.get(u.path)
        if f is None:
            f = self._files[u.path] = _File(u.path)
        f.status, f.message = u.status, u.message
        if u.rank is not None:
            f.rank = u.rank
        if u.pid is not None:
            f.pid = u.pid
        if u.found:
            f.found = u.found
        if u.tie:
            f.tie = u.tie
        if u.format != "unknown":
            f.format = u.format
        if u.line_shift:
            self._shift(f, u.line_shift)
        f.line_base_known = u.line_base_known
        if u.truncated:
            f.truncations += 1
        if u.reset:
            f.lines_before = f.lines_seen  # line numbers start over; the count goes on
        if u.lines:
            f.lines_seen = max(f.lines_seen, f.lines_before + u.lines[-1].line_no)
            for line in u.lines:
                self.seq += 1
                self._lines.append(TaggedLine(self.seq, u.path,
                                              line.rank if line.rank is not None else f.rank,
                                              line))
        for step in u.steps:
            f.steps_seen += 1
            f.recent.append(step)
            # The last step is the last one in file order, never the one with the latest
            # stamp: clocks step back, and a log stamped with the time of day only wraps
            # at midnight (a torchtitan log said 110 while its last line was step 120).
            f.last_step = step
            if step.total is not None:
                f.total_steps = step.total
        f.events.extend(u.events)
        arrivals = [s.arrival for s in u.steps] + [e.arrival for e in u.events]
        if u.lines and timestamp is not None:
            arrivals.append(timestamp)
        if arrivals:
            latest = max(arrivals)
            if f.last_line_arrival is None or latest > f.last_line_arrival:
                f.last_line_arrival = latest

    def _shift(self, f: _File, shift: int) -> None:
        """The lines before a history window were counted: make earlier numbers absolute."""
        f.recent = deque((replace(s, line_no=s.line_no + shift) for s in f.recent),
                         maxlen=RECENT_STEPS)
        f.events = deque((replace(e, line_no=e.line_no + shift, end_line=e.end_line + shift)
                          for e in f.events), maxlen=MAX_EVENTS)
        if f.last_step is not None:
            f.last_step = replace(f.last_step, line_no=f.last_step.line_no + shift)
        f.lines_seen += shift
        self._lines = deque(
            (replace(t, line=replace(t.line, line_no=t.line.line_no + shift))
             if t.path == f.path else t for t in self._lines), maxlen=self._lines.maxlen)

    def states(self) -> tuple[LogFileState, ...]:
        return tuple(self._files[p].state() for p in sorted(self._files))

    def lines_since(self, seq: int) -> list[TaggedLine]:
        """Lines newer than ``seq`` (all that are still kept when ``seq`` is too old)."""
        if not self._lines or self._lines[-1].seq <= seq:
            return []
        first = self._lines[0].seq
        start = max(0, seq - first + 1)
        return list(self._lines)[start:]

    def lines(self) -> list[TaggedLine]:
        return list(self._lines)

    def tails(self, n: int) -> dict[str, list[str]]:
        """The last ``n`` kept lines of every file, by path (for the incident report)."""
        out: dict[str, list[str]] = {p: [] for p in sorted(self._files)}
        for t in reversed(self._lines):
            kept = out.get(t.path)
            if kept is not None and len(kept) < n:
                kept.append(t.line.text)
        return {p: kept[::-1] for p, kept in out.items()}
