"""The job picker (``j``): every job on the node, worst first, and "all jobs"; the choice
narrows every pane to that job (the monitor's focus). Escape keeps the current choice."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from rltui.monitor import JobView
from rltui.rankset import compact
from rltui.ui.themes import Palette

ALL = "*"  # the option id of "all jobs"


def job_label(view: JobView, palette: Palette) -> Text:
    """``ppo-7  CRITICAL  ranks 0-7 of 8  torchrun 4121  MASTER 127.0.0.1:29500``."""
    job = view.job
    assert job is not None
    verdict = view.diagnosis.verdict
    colour = {"critical": palette.bad, "warning": palette.warn}.get(verdict, palette.ok)
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(f"{job.id:24} ", style="bold")
    out.append(f"{verdict.upper():8}", style=f"bold {colour}")
    ranks = compact(job.ranks) if job.ranks else "-"
    world = "?" if job.world_size is None else str(job.world_size)
    out.append(f"  ranks {ranks} of {world}")
    if job.launcher_pid is not None:
        out.append(f"  {job.launcher or 'launcher'} {job.launcher_pid}", style=palette.dim)
    out.append(f"  {job.tie}", style=palette.dim)
    return out


class JobPicker(ModalScreen[str | None]):
    """Returns the chosen job id, ``ALL``, or None (escape)."""

    BINDINGS = [Binding("escape,j", "dismiss_none", "Close", id="rltui.jobs.close")]
    DEFAULT_CSS = """
    JobPicker { align: center middle; }
    JobPicker > Vertical { width: 90%; max-width: 110; height: auto; max-height: 80%;
                           border: round $accent; background: $surface; padding: 0 1; }
    JobPicker OptionList { height: auto; max-height: 20; border: none; }
    """

    def __init__(self, jobs: tuple[JobView, ...], focus: str | None, palette: Palette) -> None:
        super().__init__()
        self.views = [v for v in jobs if v.job is not None]
        self.focus_id = focus
        self.palette = palette

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"{len(self.views)} jobs on this node, worst first "
                         "(enter: show it alone; escape: keep)")
            options = [Option(Text("All jobs", style="bold"), id=ALL)]
            options += [Option(job_label(v, self.palette), id=v.job.id) for v in self.views
                        if v.job is not None]
            yield OptionList(*options, id="job-options")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        ids = [ALL] + [v.job.id for v in self.views if v.job is not None]
        options.highlighted = ids.index(self.focus_id) if self.focus_id in ids else 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)
