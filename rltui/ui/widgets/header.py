"""The header: node, job, mode, verdict, and per-source status with the age of its last reading.

Ages are measured against the snapshot's own time (scenario time in replay), never the wall
clock, so a replayed header is the same on every run. A source that failed is painted bad, one
whose last reading is older than ``stale_after_intervals`` of its poll intervals is painted warn.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from rltui.cluster.view import LOST
from rltui.model import OK, SourceState
from rltui.scrub import printable
from rltui.ui.messages import View
from rltui.units import age

NO_JOB = "no-job-found"  # rltui.diagnosis.ranks.nothing_found


def source_label(state: SourceState, now: float, interval: float | None,
                 stale_after: float) -> tuple[str, str]:
    """(text, kind) for one source; kind is ok | stale | failed | waiting."""
    if state.last_reading is None:
        return f"{state.name} waiting", "waiting"
    since = now - state.last_reading
    if state.status != OK:
        return f"{state.name} {state.status} {age(since)}", "failed"
    if interval and since > stale_after * interval:
        return f"{state.name} stale {age(since)}", "stale"
    return f"{state.name} ok {age(since)}", "ok"


class HeaderBar(Static):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("rltui", id=id, markup=False)
        self._last: tuple | None = None

    def show(self, view: View) -> None:
        text = self._text(view)
        key = (text.plain, tuple(text.spans))
        if key != self._last:
            self._last = key
            self.update(text, layout=False)  # a fixed two-line bar: no layout pass

    def _text(self, view: View) -> Text:
        snap, pal = view.snapshot, view.palette
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(" rltui ", style="bold reverse")
        verdict = view.diagnosis.verdict
        n = len(view.diagnosis.symptoms)
        colour = {"critical": pal.bad, "warning": pal.warn}.get(verdict, pal.ok)
        if any(s.id == NO_JOB for s in view.diagnosis.symptoms):
            # nothing watched is not healthy, nor a warning about a job: say what it is
            out.append(" no training job found", style=f"bold {pal.warn}")
        else:
            out.append(f" {verdict.upper()}", style=f"bold {colour}")
            if n:
                out.append(f" ({n})", style=colour)
        if view.cluster is not None:
            out.append(self._node_counts(view))
        else:
            out.append("  node ", style=pal.dim)
            out.append(printable(snap.host or "?"), style="bold")
        out.append("  ")
        out.append(self._mode(view))
        if view.cluster is None:
            out.append(self._jobs(view))  # last: cut first on a narrow terminal
        out.append("\n")
        th = view.thresholds
        first = True
        fr = snap.flight_recorder
        for state in snap.sources:
            if state.name == "flight_recorder" and state.status == "ok" and not (
                    fr is not None and fr.dumps):
                continue  # looked for the ranks' dumps, none written: nothing to say
            label, kind = source_label(state, snap.timestamp, view.intervals.get(state.name),
                                       th.stale_after_intervals)
            style = {"failed": f"bold {pal.bad}", "stale": pal.warn, "waiting": pal.dim}.get(
                kind, pal.ok)
            out.append("   " if not first else " ")
            out.append(label, style=style)
            first = False
        if first:
            out.append(" waiting for the first readings", style=pal.dim)
        if snap.job:
            out.append("   job ", style=pal.dim)
            out.append(printable(snap.job))
        return out

    @staticmethod
    def _jobs(view: View) -> Text:
        """``  2 jobs: ppo-7 (8) CRITICAL, eval-9 (4) ok`` (worst first), or the job shown
        alone: ``  job eval-9 (1 of 2, j: all)``."""
        pal, out = view.palette, Text()
        jobs = [v for v in view.jobs if v.job is not None]
        if len(jobs) < 2:
            return out
        if view.focus is not None:
            out.append("  job ", style=pal.dim)
            out.append(view.snapshot.jobs[0].id if view.snapshot.jobs else view.focus,
                       style="bold")
            out.append(f" (1 of {len(jobs)}, j: all)", style=pal.dim)
            return out
        out.append(f"  {len(jobs)} jobs: ", style=pal.dim)
        for i, v in enumerate(jobs):
            assert v.job is not None
            if i:
                out.append(", ", style=pal.dim)
            out.append(v.job.id, style="bold")
            live = sum(1 for p in v.snapshot.procs if p.rank is not None and not p.is_zombie)
            # the job's departed ranks count, those missing from its WORLD_SIZE too
            ranks = live + sum(1 for d in v.snapshot.departed if d.rank is not None)
            out.append(f" ({ranks}) " if live >= ranks else f" ({live}/{ranks} live) ")
            verdict = v.diagnosis.verdict
            colour = {"critical": pal.bad, "warning": pal.warn}.get(verdict, pal.ok)
            out.append(verdict.upper() if verdict != "healthy" else "ok",
                       style=f"bold {colour}")
        return out

    @staticmethod
    def _node_counts(view: View) -> Text:
        """``nodes 62/64 reporting (2 lost)``: the count that matters first; the names are in
        the nodes pane (64 of them would not fit here)."""
        assert view.cluster is not None
        pal, nodes = view.palette, view.cluster.nodes
        out = Text()
        live = sum(1 for n in nodes if n.status.reporting)
        out.append("  nodes ", style=pal.dim)
        out.append(f"{live}/{len(nodes)} reporting",
                   style="bold" if live == len(nodes) else f"bold {pal.warn}")
        lost = sum(1 for n in nodes if n.status.state == LOST)
        if lost:
            out.append(f" ({lost} lost)", style=f"bold {pal.bad}")
        return out

    @staticmethod
    def _mode(view: View) -> Text:
        pal = view.palette
        out = Text()
        r = view.replay
        if r is not None:
            out.append("replay ", style="bold")
            out.append(f"{r.position:.1f}/{r.duration:.1f}s x{r.speed:g}")
            if r.paused:
                out.append(" PAUSED", style=f"bold {pal.warn}")
            elif r.finished:
                out.append(" end", style=pal.dim)
            return out
        out.append(view.mode, style="bold")
        if view.paused:
            out.append(" PAUSED", style=f"bold {pal.warn}")
        return out
