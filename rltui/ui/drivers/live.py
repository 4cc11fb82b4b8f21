"""The live (and demo) driver: the bundle's sources polled on threads at their cadence.

A timer per source starts a thread worker at the source's cadence; the worker calls
``guarded_poll`` and posts ``ReadingArrived`` (never a second poll of a source while one is in
flight). On the main thread the reading goes to the recorder, if any, and is folded into the
monitor. The UI timer evaluates the state at wall-clock time.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from rltui.model import Reading
from rltui.sources.base import Source, guarded_poll
from rltui.sources.bundle import Bundle, SourceSpec
from rltui.ui.drivers import Driver
from rltui.ui.messages import ReadingArrived

if TYPE_CHECKING:
    from textual.worker import Worker

    from rltui.ui.app import RltuiApp

POLL_GROUP = "poll"
STACKS_ON_DEMAND = "stacks on demand"  # worker name of a `d` dump (beside the periodic one)
MIN_INTERVAL = 0.05  # s; a zero interval in a config must not spin the event loop
# While every log with steps has logged one since the last stack round and nothing is wrong,
# a periodic round would find the training loop again: it waits until this many intervals
# have passed. Steps going quiet, any symptom, a suspected hang (its confirming round) and `d`
# bring rounds back at once.
STEPPING_ROUND_EVERY = 3


class LiveDriver(Driver):
    actions = frozenset({"refresh", "dump_stacks", "choose_job"})

    def __init__(self, app: RltuiApp, bundle: Bundle) -> None:
        super().__init__(app)
        self.bundle = bundle
        self.mode = bundle.mode
        self._in_flight: set[str] = set()
        self._confirm_after: str | None = None  # a confirming round waiting on this poll's end
        self._refreshing: set[str] = set()
        self._confirming: object = None  # the stack round a confirming round was asked after
        self.confirm_rounds = 0  # confirming rounds asked for (a suspected hang each)
        self._round_at: float | None = None  # clock time the last stack round started
        self.rounds_waited = 0  # periodic rounds left out while the job stepped on

    def intervals(self) -> dict[str, float]:
        return self.bundle.intervals()

    def start(self) -> None:
        for spec in self.bundle.specs:
            self.app.set_interval(max(spec.interval, MIN_INTERVAL), partial(self._poll_due, spec),
                                  name=f"poll {spec.source.name}")
        self.refresh()  # first poll of every source now, shown when all are in

    # -- polling ------------------------------------------------------------------------------
    def _poll_due(self, spec: SourceSpec) -> None:
        if self.paused:
            return
        if spec.source is self.bundle.stacks and self._round_can_wait(spec.interval):
            self.rounds_waited += 1
            return
        self._start_poll(spec)

    def _round_can_wait(self, interval: float) -> bool:
        """Whether a periodic stack round can be left out: every log that reports steps has
        logged one since the last round started, no symptom is shown, and that round is less
        than STEPPING_ROUND_EVERY intervals old."""
        view, last = self.app.latest, self._round_at
        if view is None or last is None:
            return False
        if self.app.clock() - last >= interval * STEPPING_ROUND_EVERY:
            return False
        if view.diagnosis.symptoms:
            return False
        stepped = [f.last_step_arrival for f in view.snapshot.logs
                   if f.last_step_arrival is not None]
        return bool(stepped) and min(stepped) > last

    def _start_poll(self, spec: SourceSpec) -> bool:
        name = spec.source.name
        if name in self._in_flight:
            return False  # a slow source is never polled twice at once
        self._in_flight.add(name)
        if spec.source is self.bundle.stacks:
            self._round_at = self.app.clock()
        self.app.run_worker(partial(self._poll_in_thread, spec.source), name=name,
                            group=POLL_GROUP, description=f"poll {name}", exit_on_error=False,
                            start=True, exclusive=False, thread=True)
        return True

    def _poll_in_thread(self, source: Source) -> Reading:
        # Worker thread: poll and post, nothing else (widgets belong to the main thread).
        reading = guarded_poll(source)
        self.app.post_message(ReadingArrived(reading))
        return reading

    def arrived(self, reading: Reading) -> None:
        if self.bundle.recorder is not None:
            self.bundle.recorder.write(reading)
        self.app.monitor.ingest(reading)
        self.app.ingested += 1
        self._refresh_done(reading.source)

    def _refresh_done(self, name: str) -> None:
        if name in self._refreshing:
            self._refreshing.discard(name)
            if not self._refreshing:
                self.app.evaluate_now(self.app.clock())

    def worker_ended(self, worker: Worker, failed: bool) -> None:
        if worker.group != POLL_GROUP:
            return
        self._in_flight.discard(worker.name)
        if self._confirm_after == worker.name:
            self._confirm_after = None
            spec = next(s for s in self.bundle.specs if s.source.name == worker.name)
            self._start_poll(spec)
        if failed:
            self._refresh_done(worker.name)

    def refresh(self) -> None:
        self._refreshing = {spec.source.name for spec in self.bundle.specs}
        for spec in self.bundle.specs:
            self._start_poll(spec)  # one already in flight counts: its reading is as fresh
        if not self._refreshing:
            self.app.evaluate_now(self.app.clock())

    # -- evaluation -----------------------------------------------------------------------------
    def tick(self) -> None:
        if not self.paused:
            self.app.evaluate_now(self.app.clock())

    def evaluated(self, now: float) -> None:
        """A suspected hang gets its confirming stack round a sample gap after the first one,
        before the next periodic round (rltui diagnose does the same): the verdict confirms
        itself within seconds instead of a whole py-spy interval. Once per round."""
        spec = next((s for s in self.bundle.specs if s.source is self.bundle.stacks), None)
        if spec is None or self.paused:
            return
        monitor = self.app.monitor
        rounds = monitor.tracker.snapshot_rounds()
        if not rounds or rounds[-1] is self._confirming:
            return
        gap = self.app.settings.thresholds.stack_sample_gap_s
        if spec.interval <= gap * 1.5 or not monitor.suggests_hang():
            return  # the periodic round comes soon enough
        self._confirming = rounds[-1]
        # a second sample a gap after the first; a third (a busy-loop suspicion) 1.5 gaps
        # after the second, an offset no step period aliases with both
        offset = gap * 1.5 if monitor.stacks is not None and monitor.stacks.samples >= 2 \
            else gap
        delay = rounds[-1].started + offset - now
        poll = partial(self._confirm, spec)
        if delay > 0:
            self.app.set_timer(delay, poll, name="confirming stack round")
        else:  # already due (a slow evaluation); a zero-delay Textual timer divides by zero
            self.app.call_later(poll)
        self.confirm_rounds += 1

    def _confirm(self, spec: SourceSpec) -> None:
        # the round that raised the suspicion may not have ended yet (its worker's end comes
        # after its reading): the confirming one then starts when it does
        if not self._start_poll(spec):
            self._confirm_after = spec.source.name

    # -- d: every rank's stack now ----------------------------------------------------------------
    def dump(self) -> None:
        """On-demand py-spy round: a blocking dump for a consistent cut (see docs/stacks.md)."""
        app, source = self.app, self.bundle.stacks
        if source is None:
            app.notify("No stack source in this mode.", severity="warning")
            return
        if STACKS_ON_DEMAND in self._in_flight:
            app.notify("A dump is already running.", severity="information")
            return
        count = len(app.latest.snapshot.live_procs) if app.latest else 0
        app.notify(f"Dumping {count} process(es) with py-spy...", timeout=3)
        self._in_flight.add(STACKS_ON_DEMAND)
        self._round_at = app.clock()
        self._refreshing.add(source.name)  # evaluate as soon as the round is in
        app.run_worker(partial(self._dump_in_thread, source), name=STACKS_ON_DEMAND,
                       group=POLL_GROUP, description="py-spy dump", exit_on_error=False,
                       start=True, exclusive=False, thread=True)

    def _dump_in_thread(self, source) -> Reading:
        app = self.app
        reading = guarded_poll(source, app.clock, poll=source.dump_now)
        app.post_message(ReadingArrived(reading))
        if reading.status != "ok":
            app.call_from_thread(app.notify, f"{reading.message} {reading.remedy}".strip(),
                                 title="py-spy", severity="error", timeout=15)
        return reading
