"""When the live driver leaves out a periodic py-spy round: only while every log with steps has
logged one since the last round and no symptom shows, and never for more than
STEPPING_ROUND_EVERY intervals. The driver runs against a stand-in app (clock, latest view,
worker starts recorded): the decision is what is tested, not Textual's timers."""

from __future__ import annotations

from types import SimpleNamespace

from rltui.model import Diagnosis, LogFileState, Symptom
from rltui.sources.bundle import Bundle, SourceSpec
from rltui.ui.drivers.live import STEPPING_ROUND_EVERY, LiveDriver

INTERVAL = 10.0


class Stacks:
    name = "stacks"

    def poll(self):  # never called: the stand-in app records worker starts instead
        raise AssertionError


def make():
    stacks = Stacks()
    spec = SourceSpec(stacks, INTERVAL)
    bundle = Bundle(mode="live", job="test", stacks=stacks, specs=[spec])
    started: list[str] = []
    app = SimpleNamespace(now=1000.0, latest=None,
                          run_worker=lambda *a, name, **k: started.append(name))
    app.clock = lambda: app.now
    driver = LiveDriver(app, bundle)
    return driver, app, spec, started


def view(step_arrivals, symptoms=()):
    logs = tuple(LogFileState(path=f"/r{i}.log", last_step_arrival=t)
                 for i, t in enumerate(step_arrivals))
    return SimpleNamespace(snapshot=SimpleNamespace(logs=logs),
                           diagnosis=Diagnosis(timestamp=0.0, verdict="healthy",
                                               symptoms=tuple(symptoms)))


def due(driver, app, spec, started, at):
    app.now = at
    driver._in_flight.clear()  # the previous round has ended
    before = len(started)
    driver._poll_due(spec)
    return len(started) > before


def test_rounds_wait_while_every_rank_steps_on_and_nothing_is_wrong():
    driver, app, spec, started = make()
    assert due(driver, app, spec, started, 1000.0)  # no view yet: the round runs
    app.latest = view([1005.0, 1006.0])  # both ranks stepped since the round
    assert not due(driver, app, spec, started, 1010.0)
    assert not due(driver, app, spec, started, 1020.0)
    # however steady the job, the stacks are never older than STEPPING_ROUND_EVERY intervals
    assert due(driver, app, spec, started, 1000.0 + INTERVAL * STEPPING_ROUND_EVERY)
    assert driver.rounds_waited == 2


def test_quiet_steps_or_a_symptom_bring_the_configured_interval_back():
    driver, app, spec, started = make()
    assert due(driver, app, spec, started, 1000.0)
    app.latest = view([1005.0, 990.0])  # rank 1 has logged no step since the round
    assert due(driver, app, spec, started, 1010.0)
    app.latest = view([1015.0, 1016.0], symptoms=[Symptom(
        id="gpu-idle", severity="warning", title="GPU 3 idle")])
    assert due(driver, app, spec, started, 1020.0)
    app.latest = view([])  # no step in any log: nothing tells the job moves on
    assert due(driver, app, spec, started, 1030.0)
    assert driver.rounds_waited == 0
