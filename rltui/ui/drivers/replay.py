"""The replay driver: a recording played at scenario time, the one place replayed readings are
folded.

The UI timer advances the player by the wall time that passed and evaluates at scenario time,
so ages and symptoms are the same on every run. Readings of one instant are folded together,
with a snapshot at each earlier reading time, as the headless replay does (the rules read
earlier snapshots through the history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rltui.model import Reading
from rltui.sources.replay import Player
from rltui.ui.drivers import REPLAY_ACTIONS, Driver
from rltui.ui.messages import ReplayState

if TYPE_CHECKING:
    from rltui.ui.app import RltuiApp


class ReplayDriver(Driver):
    mode = "replay"
    actions = REPLAY_ACTIONS | {"choose_job"}  # nothing new to poll or dump in a recording
    no_stacks_hint = "No stacks in this recording."

    def __init__(self, app: RltuiApp, player: Player) -> None:
        super().__init__(app)
        self.player = player
        self._last_tick = 0.0

    def intervals(self) -> dict[str, float]:
        return self.player.scenario.intervals()

    def start(self) -> None:
        self._last_tick = self.app.monotonic()
        self._play(self.player.step(0.0))  # the readings of the first instant

    def tick(self) -> None:
        now = self.app.monotonic()
        elapsed, self._last_tick = now - self._last_tick, now
        readings = self.player.advance(elapsed)
        if readings or self.player.now != self.app.evaluated_at:
            self._play(readings)

    def _play(self, readings: Sequence[Reading]) -> None:
        monitor, player = self.app.monitor, self.player
        i = 0
        while i < len(readings):
            stamp = readings[i].timestamp
            while i < len(readings) and readings[i].timestamp == stamp:
                monitor.ingest(readings[i])
                self.app.ingested += 1
                i += 1
            if stamp < player.now:
                monitor.observe(stamp)
        self.app.evaluate_now(player.now)

    def refresh(self) -> None:
        self.app.evaluate_now(self.player.now)

    def replay_state(self) -> ReplayState:
        p = self.player
        return ReplayState(position=p.position, duration=p.duration, speed=p.speed,
                           paused=p.paused, finished=p.finished)

    @property
    def paused(self) -> bool:
        return self.player.paused

    def toggle_pause(self) -> None:
        self.player.paused = not self.player.paused
        self._last_tick = self.app.monotonic()  # resuming must not jump by the paused time

    def step(self) -> None:
        self._play(self.player.step(1.0))

    def to_end(self) -> None:
        self._play(self.player.to_end())

    def faster(self) -> None:
        self.player.faster()

    def slower(self) -> None:
        self.player.slower()
