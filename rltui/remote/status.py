"""What a view needs to know about one agent stream: its state and why. Pure value types, so
panes and reports can show streams without importing the process side (rltui.remote.stream).
"""

from __future__ import annotations

from dataclasses import dataclass

from rltui.agent.protocol import Hello

CONNECTING = "connecting"  # started, nothing valid received yet
LIVE = "live"
SLOW = "slow"  # live, but silent for longer than slow_after heartbeats
LOST = "lost"  # the process ended, the pipe closed, or a storm of bad lines; see reason
CLOSED = "closed"  # closed on purpose
STATES = (CONNECTING, LIVE, SLOW, LOST, CLOSED)


@dataclass(frozen=True, slots=True)
class Problem:
    """A line rejected or a note: ``kind`` is a ProtocolError kind, "unknown" (a newer
    message type, ignored), "agent" (the agent's own error line), "reply", "callback",
    "limit" (a reading over the limits of one reading, cut) or "clock" (the node's clock over
    a day off: the stream is lost)."""

    at: float  # this machine's wall clock
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class StreamStatus:
    host: str
    state: str
    since: float  # wall clock of the last state change
    last_seen: float | None  # wall clock of the last valid message
    reason: str  # why lost (or closed), with the remedy; "" otherwise
    skew: float | None  # this clock minus the agent's, seconds
    problems: tuple[Problem, ...]  # the most recent ones
    attempts: int  # processes started so far
    retry_at: float | None  # when lost: the next attempt's wall clock, None if none is coming
    hello: Hello | None
    pid: int | None  # the local process (ssh, srun or the agent)
    stderr: str  # the last line the process wrote on stderr, scrubbed

    def age(self, now: float) -> float | None:
        """Seconds since the last valid message, by this machine's clock."""
        return None if self.last_seen is None else max(0.0, now - self.last_seen)
