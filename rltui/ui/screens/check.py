"""A check on request (rollout consistency, agent workflow): a form, run and cancel, live
progress and the results, worst first.

One screen class serves both checks; what differs comes from the check's ``CheckForm``. The app
installs one screen per check, so a run goes on while the user is back on the monitor and its
results are there when the screen is opened again. The check runs in a thread worker (it does
HTTP or drives a child process); progress arrives through ``call_from_thread`` and only the main
thread touches widgets. Cancel sets the check's event: the check stops soon after and returns
the results it has, which are shown and can be exported like a finished run.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, Label, ProgressBar, Static
from textual.worker import Worker, WorkerState

from rltui.checks.forms import CheckForm
from rltui.checks.progress import Progress
from rltui.redact import scrub_text
from rltui.ui.screens.text import TextScreen


class CheckScreen(Screen):
    DEFAULT_CSS = """
    CheckScreen #check-title { height: 1; background: $primary-background; padding: 0 1; }
    CheckScreen #check-intro { height: auto; max-height: 2; padding: 0 1; color: $text-muted; }
    CheckScreen #check-form { grid-size: 2; grid-columns: 18 1fr; grid-rows: 1;
                              grid-gutter: 0 1; height: auto; max-height: 45%; padding: 0 1;
                              overflow-y: auto; }
    CheckScreen #check-form Label { width: 100%; text-align: right; }
    CheckScreen #check-buttons { height: 1; padding: 0 1; margin-top: 1; }
    CheckScreen #check-buttons Button { margin-right: 2; }
    CheckScreen #check-progress-row { height: 1; padding: 0 1; display: none; }
    CheckScreen #check-progress-row.-shown { display: block; }
    CheckScreen #check-status { height: auto; max-height: 8; padding: 0 1; }
    CheckScreen #check-results { height: 1fr; min-height: 3; }
    /* once a run starts, the results get the room: the intro goes, the form scrolls */
    CheckScreen.-has-results #check-intro { display: none; }
    CheckScreen.-has-results #check-form { max-height: 25%; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="rltui.check.close",
                tooltip="back to the monitor; a running check goes on"),
        Binding("ctrl+r,f5", "run", "Run", id="rltui.check.run",
                tooltip="start the check with the values in the form"),
        Binding("ctrl+g,f6", "cancel", "Cancel", id="rltui.check.cancel",
                tooltip="stop the running check; the results so far are kept"),
        Binding("ctrl+o,f7", "export", "Export", id="rltui.check.export",
                tooltip="write the results as markdown and JSON into the current folder"),
    ]

    def __init__(self, form: CheckForm, export_dir: Path | None = None) -> None:
        super().__init__(id=f"check-{form.kind}")
        self.form = form
        self.export_dir = export_dir or Path.cwd()
        self.report: Any = None  # the last finished (or cancelled) run's report
        self.running = False
        self.finished = threading.Event()  # set when a run ends; tests wait on it
        self._cancel: threading.Event | None = None
        self._started = 0.0

    def compose(self) -> ComposeResult:
        yield Static(self.form.title, id="check-title", markup=False)
        yield Static(self.form.intro, id="check-intro", markup=False)
        with Grid(id="check-form"):
            for field in self.form.fields:
                yield Label(field.label, markup=False)
                yield Input(value=field.default, placeholder=field.placeholder,
                            password=field.secret, compact=True, id=f"field-{field.name}",
                            tooltip=field.help or None)
        with Horizontal(id="check-buttons"):
            yield Button("Run", id="check-run", compact=True, variant="primary")
            yield Button("Cancel", id="check-cancel", compact=True, disabled=True)
            yield Button("Export", id="check-export", compact=True, disabled=True)
        with Horizontal(id="check-progress-row"):
            yield ProgressBar(id="check-progress", show_eta=False)
        yield Static("Fill in the form and press Run (ctrl+r).", id="check-status",
                     markup=False)
        with Vertical(id="check-results-box"):
            yield DataTable(id="check-results", cursor_type="row", zebra_stripes=True)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one("#check-results", DataTable)
        table.add_columns(*self.form.columns)
        first = self.query(Input).first()
        if first is not None:
            first.focus()

    # -- the form -----------------------------------------------------------------------------
    def values(self) -> dict[str, str]:
        return {field.name: self.query_one(f"#field-{field.name}", Input).value
                for field in self.form.fields}

    def set_values(self, **values: str) -> None:
        for name, value in values.items():
            self.query_one(f"#field-{name}", Input).value = value

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on a result: the sample or finding in full (both outputs, a traceback)."""
        event.stop()
        if self.report is None or self.running or self.form.detail is None:
            return
        title, text = self.form.detail(self.report, event.cursor_row)
        self.app.push_screen(TextScreen(title or self.form.title, text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_run()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        action = {"check-run": self.action_run, "check-cancel": self.action_cancel,
                  "check-export": self.action_export}.get(event.button.id or "")
        if action is not None:
            action()

    # -- running ------------------------------------------------------------------------------
    def action_run(self) -> None:
        if self.running:
            self.notify("A check is running; cancel it first (ctrl+g).", severity="warning")
            return
        try:
            spec = self.form.build_spec(self.values())
        except ValueError as exc:
            self._status(f"Not started: {exc}")
            return
        self.running = True
        self.finished.clear()
        self._cancel = threading.Event()
        self._started = time.monotonic()
        table = self.query_one("#check-results", DataTable)
        table.clear()
        bar = self.query_one("#check-progress", ProgressBar)
        bar.update(total=None, progress=0)
        self.query_one("#check-progress-row").add_class("-shown")
        self.add_class("-has-results")
        self._buttons()
        self._status("Starting...")
        self.run_worker(self._run_in_thread(spec, self._cancel), name=f"{self.form.kind} check",
                        group=f"check-{self.form.kind}", description=self.form.title,
                        exit_on_error=False, exclusive=True, thread=True)

    def _run_in_thread(self, spec: Any, cancel: threading.Event):
        def work() -> Any:
            def progress(update: Progress) -> None:
                self.app.call_from_thread(self._progressed, update)
            return self.form.run(spec, progress=progress, cancel=cancel)
        return work

    def _progressed(self, update: Progress) -> None:
        if update.total:  # a phase without a count (loading, done) keeps the bar as it is
            self.query_one("#check-progress", ProgressBar).update(total=update.total,
                                                                  progress=update.done)
        elapsed = time.monotonic() - self._started
        text = f"{update.phase}: {update.done}/{update.total}  {elapsed:.0f} s"
        if update.message:
            text += f"  {update.message}"
        self._status(text)
        row = self.form.item_row(update.item) if update.item is not None else None
        if row is not None:
            self.query_one("#check-results", DataTable).add_row(*row)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != f"check-{self.form.kind}":
            return
        if event.state == WorkerState.SUCCESS:
            self._done(event.worker.result, None)
        elif event.state == WorkerState.ERROR:
            self._done(None, event.worker.error)
        elif event.state == WorkerState.CANCELLED:
            self._done(None, None)

    def _done(self, report: Any, error: BaseException | None) -> None:
        self.running = False
        bar = self.query_one("#check-progress", ProgressBar)
        could_not_run = (report is not None and self.form.could_not_run is not None
                         and self.form.could_not_run(report))
        if bar.total is None or could_not_run or error is not None:
            # Nothing was counted, or the check never ran: a bar, full or spinning, would say
            # that something ran to an end. The status says what happened instead.
            self.query_one("#check-progress-row").remove_class("-shown")
        if report is not None:
            self.report = report
            table = self.query_one("#check-results", DataTable)
            table.clear()
            for row in self.form.rows(report):
                table.add_row(*row)
            self._status(self.form.summary(report))
            if table.row_count and isinstance(self.focused, (Input, Button, type(None))):
                table.focus()  # the results are what the user came for: enter opens one
        elif error is not None:
            # A check returns a report even when the server dies; an exception here is a bug in
            # the check, shown rather than hidden so it can be reported. The last run's report
            # goes too: exporting it now would pass old results off as this run's.
            self.report = None
            self.query_one("#check-results", DataTable).clear()
            self._status(scrub_text(f"The check failed: {type(error).__name__}: {error}"))
        else:
            self._status("Cancelled before any result.")
        self._buttons()
        self.finished.set()

    def action_cancel(self) -> None:
        if self.cancel_run():
            self._status("Cancelling: waiting for requests in flight; results so far are "
                         "kept.")

    def cancel_run(self) -> bool:
        """Set the running check's cancel event; False when nothing runs."""
        if self.running and self._cancel is not None:
            self._cancel.set()
            return True
        return False

    def action_export(self) -> None:
        if self.report is None:
            self.notify("Nothing to export yet: run the check first.", severity="information")
            return
        try:
            files = self.form.export(self.report, self.export_dir)
        except OSError as exc:
            self.notify(f"Export failed: {exc}", severity="error")
            return
        self.notify("Wrote " + ", ".join(str(f) for f in files), timeout=8)

    def action_close(self) -> None:
        self.app.pop_screen()

    # -- helpers ------------------------------------------------------------------------------
    def _status(self, text: str) -> None:
        self.query_one("#check-status", Static).update(text)

    def _buttons(self) -> None:
        self.query_one("#check-run", Button).disabled = self.running
        self.query_one("#check-cancel", Button).disabled = not self.running
        self.query_one("#check-export", Button).disabled = self.running or self.report is None
