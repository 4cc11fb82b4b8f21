"""run_schedule: every source at its own cadence for a duration, on an injected clock."""

from __future__ import annotations

import threading

from rltui import model
from rltui.model import Reading
from rltui.sources.base import Source, guarded_poll
from rltui.sources.bundle import SourceSpec, run_schedule


class FakeClock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FakeStop:
    """A stop event whose ``wait`` moves the fake clock on instead of sleeping."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self._set = False
        self.waits: list[float] = []

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None and timeout >= 0
        self.waits.append(timeout)
        # A schedule that never lets time pass would spin forever on a fake clock.
        assert len(self.waits) < 10_000, "run_schedule is spinning without time passing"
        if not self._set:
            self.clock.t += timeout
        return self._set


class FakeSource:
    def __init__(self, name: str, clock: FakeClock, fail: bool = False,
                 on_poll=None) -> None:
        self.name = name
        self.clock = clock
        self.fail = fail
        self.on_poll = on_poll
        self.polled_at: list[float] = []
        self.closed = False

    def poll(self) -> Reading:
        self.polled_at.append(self.clock())
        if self.on_poll is not None:
            self.on_poll(self)
        if self.fail:
            raise RuntimeError("device fell off the bus")
        return Reading(self.name, self.clock(), model.OK)

    def close(self) -> None:
        self.closed = True


def rel(source, start=1000.0):
    return [t - start for t in source.polled_at]


def schedule(*sources_and_intervals, duration, clock, stop=None):
    specs = [SourceSpec(s, i) for s, i in sources_and_intervals]
    got: list[Reading] = []
    stop = stop or FakeStop(clock)
    run_schedule(specs, duration, got.append, stop=stop, clock=clock)
    return got


def test_fake_source_is_a_source():
    assert isinstance(FakeSource("x", FakeClock()), Source)


def test_duration_zero_polls_each_source_once():
    clock = FakeClock()
    a, b = FakeSource("gpus", clock), FakeSource("procs", clock)
    got = schedule((a, 1.0), (b, 0.5), duration=0.0, clock=clock)
    assert [r.source for r in got] == ["gpus", "procs"]
    assert rel(a) == [0.0] and rel(b) == [0.0]
    assert clock.t == 1000.0  # it did not wait


def test_each_source_keeps_its_own_cadence():
    clock = FakeClock()
    a, b = FakeSource("gpus", clock), FakeSource("procs", clock)
    got = schedule((a, 1.0), (b, 0.5), duration=3.0, clock=clock)
    assert rel(a) == [0.0, 1.0, 2.0, 3.0]
    assert rel(b) == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert len(got) == len(a.polled_at) + len(b.polled_at)
    assert [r.timestamp for r in got] == sorted(r.timestamp for r in got)
    assert clock.t == 1003.0  # stopped at the end of the duration


def test_a_slow_cadence_is_not_polled_between_its_ticks():
    clock = FakeClock()
    slow, fast = FakeSource("slow", clock), FakeSource("fast", clock)
    schedule((slow, 2.0), (fast, 0.25), duration=4.0, clock=clock)
    assert rel(slow) == [0.0, 2.0, 4.0]
    assert len(fast.polled_at) == 17


def test_the_wait_never_overshoots_the_duration():
    clock = FakeClock()
    a = FakeSource("a", clock)
    stop = FakeStop(clock)
    schedule((a, 10.0), duration=1.5, clock=clock, stop=stop)
    assert stop.waits == [1.5]
    assert clock.t == 1001.5


def test_interval_has_a_floor():
    clock = FakeClock()
    a = FakeSource("a", clock)
    schedule((a, 0.0), duration=0.5, clock=clock)
    gaps = [b - a_ for a_, b in zip(a.polled_at, a.polled_at[1:])]
    assert gaps and min(gaps) >= 0.05 - 1e-9
    assert len(a.polled_at) <= 11


def test_stops_when_the_stop_event_is_set_from_a_poll():
    clock = FakeClock()
    stop = FakeStop(clock)

    def stop_after_three(src):
        if len(src.polled_at) == 3:
            stop.set()

    a = FakeSource("a", clock, on_poll=stop_after_three)
    schedule((a, 1.0), duration=3600.0, clock=clock, stop=stop)
    assert rel(a) == [0.0, 1.0, 2.0]
    assert clock.t == 1002.0


def test_stops_when_the_stop_event_is_set_by_the_consumer():
    clock = FakeClock()
    stop = FakeStop(clock)
    a = FakeSource("a", clock)
    got: list[Reading] = []

    def on_reading(r):
        got.append(r)
        if len(got) == 2:
            stop.set()

    run_schedule([SourceSpec(a, 0.5)], 3600.0, on_reading, stop=stop, clock=clock)
    assert len(got) == 2


def test_a_stop_set_before_the_start_polls_nothing():
    clock = FakeClock()
    stop = FakeStop(clock)
    stop.set()
    a = FakeSource("a", clock)
    assert schedule((a, 1.0), duration=10.0, clock=clock, stop=stop) == []


def test_a_real_event_set_by_the_consumer_returns_without_waiting():
    clock = FakeClock()
    stop = threading.Event()
    a = FakeSource("a", clock)
    got: list[Reading] = []

    def on_reading(r):
        got.append(r)
        stop.set()

    # Set stop ends the loop before any wait; were it ignored, this would block (fake clock).
    run_schedule([SourceSpec(a, 2.0)], 2.0, on_reading, stop=stop, clock=clock)
    assert len(got) == 1


def test_a_source_that_raises_becomes_an_error_reading_and_the_others_go_on():
    clock = FakeClock()
    bad, good = FakeSource("stacks", clock, fail=True), FakeSource("gpus", clock)
    got = schedule((bad, 1.0), (good, 1.0), duration=2.0, clock=clock)
    errors = [r for r in got if r.source == "stacks"]
    assert len(errors) == 3 and len(bad.polled_at) == 3
    assert all(r.status == model.ERROR and r.payload is None for r in errors)
    assert errors[0].message == "RuntimeError: device fell off the bus"
    assert "bug in rltui" in errors[0].remedy
    assert [r.status for r in got if r.source == "gpus"] == [model.OK] * 3


def test_guarded_poll_stamps_errors_with_its_clock():
    clock = FakeClock(42.0)
    r = guarded_poll(FakeSource("x", clock, fail=True), clock=clock)
    assert (r.source, r.timestamp, r.status) == ("x", 42.0, model.ERROR)


def test_guarded_poll_passes_a_good_reading_through():
    clock = FakeClock(7.0)
    assert guarded_poll(FakeSource("x", clock)) == Reading("x", 7.0, model.OK)


def test_guarded_poll_without_a_name():
    class Nameless:
        def poll(self):
            raise ValueError("no")

    r = guarded_poll(Nameless(), clock=lambda: 1.0)
    assert (r.source, r.status, r.message) == ("?", model.ERROR, "ValueError: no")


def test_a_short_run_still_polls_every_source_again_at_the_end():
    clock = FakeClock()
    a, b = FakeSource("gpus", clock), FakeSource("procs", clock)
    schedule((a, 5.0), (b, 0.5), duration=1.0, clock=clock)
    assert rel(b) == [0.0, 0.5, 1.0]
    assert rel(a) == [0.0, 1.0]
