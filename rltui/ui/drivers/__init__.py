"""Where the app's readings come from: one driver per mode, behind one small protocol.

The app (rltui/ui/app.py) shows views, runs the keys and the screens; it never asks which mode it
is in. A driver starts the readings (``start``), answers the UI timer (``tick``), the ``r`` key
(``refresh``) and the ``d`` key (``dump``), evaluates into a ``View`` (``evaluate``), pauses, and
says which of the mode-dependent actions apply (``actions``).

- ``LiveDriver`` (live and demo, rltui/ui/drivers/live.py): the bundle's sources polled on
  threads at their cadence, the recorder fed, a confirming py-spy round on a suspected hang.
- ``ReplayDriver`` (rltui/ui/drivers/replay.py): a recording played at scenario time; the one
  place replayed readings are folded.
- ``NodesDriver`` (rltui/ui/drivers/nodes.py): every node's readings from a feed, merged.

``driver_for(bundle, app)`` picks one from what the bundle holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rltui.logbook import LogBook
from rltui.model import Reading
from rltui.ui.messages import ReplayState, View

if TYPE_CHECKING:
    from textual.worker import Worker

    from rltui.sources.bundle import Bundle
    from rltui.ui.app import RltuiApp

# Actions that some modes have and others do not; every other action applies in every mode.
MODE_ACTIONS = frozenset({"step", "faster", "slower", "to_end", "refresh", "dump_stacks",
                          "choose_job"})
REPLAY_ACTIONS = frozenset({"step", "faster", "slower", "to_end"})
# What a read-only app (``rltui serve`` without --allow-actions: a teammate in a browser) leaves
# out: the keys that act on the job or the machine. A dump stops every rank for py-spy, a report
# writes files, the checks send requests to servers and run the user's code; the theme is still
# changed for the session but not saved (RltuiApp.set_theme).
READ_ONLY_OFF = frozenset({"dump_stacks", "incident_report", "rollout_check", "workflow_check"})


class Driver:
    """The protocol, with what most modes do by default. ``app`` is the app the driver feeds:
    it evaluates through ``app.evaluate_now`` and reaches the event loop through the app's
    workers, timers and messages (a driver has no loop of its own)."""

    mode: str = "live"
    actions: frozenset[str] = frozenset()  # which of MODE_ACTIONS apply
    nodes_pane = False  # the main screen shows the nodes table
    reads_local_files = True  # frames' source lines and config files are on this machine
    oom_refusal: str | None = None  # why the OOM triage cannot run here, if it cannot
    no_stacks_hint = "No stacks yet: press d to dump every rank now."

    def __init__(self, app: RltuiApp) -> None:
        self.app = app

    @property
    def logbook(self) -> LogBook:
        return self.app.monitor.tracker.logbook

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """The app is mounted: start the readings and show the first view."""

    # -- readings ---------------------------------------------------------------------------
    def arrived(self, reading: Reading) -> None:
        """A poll worker's reading, on the main thread."""

    def worker_ended(self, worker: Worker, failed: bool) -> None:
        """One of the app's workers ended (success, error or cancel)."""

    # -- evaluation -------------------------------------------------------------------------
    def tick(self) -> None:
        """The UI timer."""

    def evaluate(self, now: float) -> View:
        snapshot, diagnosis = self.app.monitor.evaluate(now)
        return self.app.view_of(snapshot, diagnosis)

    def evaluated(self, now: float) -> None:
        """After a view is on screen (the live driver's confirming round)."""

    def refresh(self) -> None:
        """The r key: read now and show it."""
        self.app.evaluate_now(self.app.clock())

    def intervals(self) -> dict[str, float]:
        return {}

    def replay_state(self) -> ReplayState | None:
        return None

    # -- pause ------------------------------------------------------------------------------
    _paused = False

    @property
    def paused(self) -> bool:
        return self._paused

    def toggle_pause(self) -> None:
        self._paused = not self._paused

    # -- stacks and reports -----------------------------------------------------------------
    def dump(self) -> None:
        """The d key: every rank's stack now."""
        self.app.notify("No stack source in this mode.", severity="warning")

    def stack_commands(self, view: View) -> list[str]:
        """The py-spy commands behind the view's stacks, for the incident report."""
        from rltui import incident
        return incident.stack_commands(view.snapshot)

    # -- replay keys (only the replay driver has them in ``actions``) -----------------------
    def step(self) -> None: ...
    def to_end(self) -> None: ...
    def faster(self) -> None: ...
    def slower(self) -> None: ...


def driver_for(bundle: Bundle, app: RltuiApp) -> Driver:
    if bundle.player is not None:
        from rltui.ui.drivers.replay import ReplayDriver
        return ReplayDriver(app, bundle.player)
    if bundle.feed is not None:
        from rltui.ui.drivers.nodes import NodesDriver
        return NodesDriver(app, bundle.feed, bundle.job)
    from rltui.ui.drivers.live import LiveDriver
    return LiveDriver(app, bundle)

