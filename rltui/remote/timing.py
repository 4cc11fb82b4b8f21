"""Reconnect backoff and clock-skew estimation for agent streams. Pure: no I/O, no clock.

Skew: an agent stamps every message with its own wall clock (``t``); rltui notes when the line
arrived by its clock. ``received - t`` is the clock offset plus the one-way delay (ssh, srun,
the pipe), and the delay is never negative, so the smallest value over recent samples is the
best estimate of the offset: a sample delayed by a busy node or a slow link only adds. Only
hello and heartbeat lines are sampled; they are small and written the moment they are stamped,
whereas a reading's ``t`` may precede a long serialisation.
"""

from __future__ import annotations

import random
from collections import deque


class Backoff:
    """Delays before reconnect attempts: initial x factor^n (1, 2, 4 ... s), capped, each
    shortened by a random fraction up to ``jitter`` so that 128 nodes lost together (a switch
    reboot) do not all reconnect in the same second."""

    def __init__(self, initial: float = 1.0, factor: float = 2.0, cap: float = 60.0,
                 jitter: float = 0.5, rng: random.Random | None = None) -> None:
        if not (initial > 0 and factor >= 1 and cap >= initial and 0 <= jitter < 1):
            raise ValueError("backoff needs initial > 0, factor >= 1, cap >= initial, "
                             "0 <= jitter < 1")
        self.initial = initial
        self.factor = factor
        self.cap = cap
        self.jitter = jitter
        self._rng = rng or random.Random()

    def base(self, attempt: int) -> float:
        """The delay before jitter for the ``attempt``-th retry (0-based)."""
        # the exponent is bounded so that a node down for days does not overflow a float
        return min(self.cap, self.initial * self.factor ** min(attempt, 64))

    def delay(self, attempt: int) -> float:
        """A delay in [base x (1 - jitter), base]."""
        return self.base(attempt) * (1.0 - self.jitter * self._rng.random())


class SkewEstimator:
    """``received - sent`` samples -> the offset of this clock over the agent's (seconds;
    positive when this machine's clock is ahead). ``None`` until the first sample."""

    def __init__(self, window: int = 32) -> None:
        # a window, not all samples forever: clocks are stepped (NTP) and drift
        self._samples: deque[float] = deque(maxlen=window)

    def add(self, received: float, sent: float) -> None:
        self._samples.append(received - sent)

    @property
    def value(self) -> float | None:
        return min(self._samples) if self._samples else None

    def to_local(self, agent_time: float) -> float:
        """An agent timestamp on this machine's clock (unchanged while there is no sample)."""
        skew = self.value
        return agent_time if skew is None else agent_time + skew
