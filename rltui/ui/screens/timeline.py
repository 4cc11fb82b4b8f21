"""The timeline screen: per rank, its steps over time and the moment it stopped advancing,
who stopped first first; the same chart as the incident report's Timeline section
(rltui.diagnosis.timelinechart), drawn from the view on screen when it opened."""

from __future__ import annotations

from textual.widgets import Static

from rltui import units
from rltui.diagnosis.timeline import of_snapshot
from rltui.diagnosis.timelinechart import chart, job_width, labels_width, summary
from rltui.scrub import outgoing_text, printable
from rltui.ui.messages import View
from rltui.ui.screens.text import TextScreen

ROWS = 512  # ranks drawn; a 4,096-rank job's others are counted under the chart
CHROME = 9  # the screen's padding and scrollbar around the chart, and a margin
MIN_BAR, MAX_BAR = 12, 120


def timeline_text(view: View, columns: int) -> str:
    tl = of_snapshot(view.snapshot, view.stacks, view.thresholds, view.stacks_job)
    # the labels' width depends on the ranks (a job column with several jobs); where the bar
    # would be narrower than MIN_BAR the job ids are cut to make room (80 columns, two jobs)
    room = columns - CHROME
    short = MIN_BAR - (room - labels_width(tl))
    job_max = job_width(tl) - short if short > 0 and job_width(tl) else None
    width = max(MIN_BAR, min(MAX_BAR, room - labels_width(tl, job_max)))
    lines = [summary(tl), ""] + chart(
        tl, width, ROWS, more_where="rltui diagnose --json lists every rank", job_max=job_max)
    return "\n".join(lines)


def _title(view: View) -> str:
    return (f"Timeline: who stopped first, as of {units.clock(view.snapshot.timestamp)}"
            + (f" · {view.snapshot.job}" if view.snapshot.job else ""))


class TimelineScreen(TextScreen):
    def __init__(self, view: View, columns: int) -> None:
        super().__init__(_title(view), timeline_text(view, columns), id="timeline")

    def show(self, view: View, columns: int) -> None:
        """Draw the timeline of a newer view (the key again, on this screen)."""
        self.title_text = printable(_title(view))
        self.text = outgoing_text(timeline_text(view, columns))
        self.query_one(".text-title", Static).update(self.title_text)
        self.query_one(".text-body", Static).update(self.text)
