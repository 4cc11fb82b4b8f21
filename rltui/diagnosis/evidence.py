"""A symptom's evidence lines with what each names: a log line, a stack class, a rank, a frame.

The rules write their evidence through ``Evidence``: the text as before, and beside a line
that names something the app can open, an ``EvidenceLink`` (rltui.model) saying what, built
from the values the text was made of. The app opens a line's target with enter; nothing reads
the words back, so the text stays free to change.
"""

from __future__ import annotations

from collections.abc import Iterable

from rltui.model import EvidenceLink, Frame, LogEvent, LogFileState, Symptom, replace

LOG_LINE = "log-line"
STACK_CLASS = "stack-class"
RANK = "rank"
FRAME = "frame"
KINDS = (LOG_LINE, STACK_CLASS, RANK, FRAME)


def at_log(path: str, line: int) -> EvidenceLink:
    """A line of a log file (the evidence quotes it, or a step it reported)."""
    return EvidenceLink(-1, LOG_LINE, path=path, line=line)


def at_event(log: LogFileState, event: LogEvent) -> EvidenceLink:
    """The first line of a parser's event (a traceback, an OOM, an NCCL timeout)."""
    return at_log(log.path, event.line_no)


def at_ranks(ranks: Iterable[int | None]) -> EvidenceLink | None:
    """A rank (or several: the first is the one the app selects); None without a rank."""
    known = tuple(r for r in ranks if r is not None and r >= 0)
    return EvidenceLink(-1, RANK, ranks=known) if known else None


def at_class(index: int, members: Iterable[int]) -> EvidenceLink:
    """Class ``index`` of the stack report (``#1`` is 0), with its members (ranks, or
    ``-1 - pid`` for processes without one) to find it again in a newer report."""
    return EvidenceLink(-1, STACK_CLASS, stack_class=index, ranks=tuple(members))


def at_frame(frame: Frame | None) -> EvidenceLink | None:
    """A frame's source line (none for a frame without a file or line)."""
    if frame is None or not frame.filename or not frame.line:
        return None
    return EvidenceLink(-1, FRAME, path=frame.filename, line=frame.line, name=frame.name)


class Evidence:
    """Evidence lines and their links, as a rule builds them."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.links: list[EvidenceLink] = []

    def add(self, text: str, link: EvidenceLink | None = None) -> None:
        if link is not None:
            self.links.append(replace(link, evidence=len(self.lines)))
        self.lines.append(text)

    def extend(self, texts: Iterable[str]) -> None:
        self.lines.extend(texts)

    def fields(self) -> dict:
        """``Symptom(..., **ev.fields())``: the lines and their links."""
        return {"evidence": tuple(self.lines), "evidence_links": tuple(self.links)}


def prepend(symptom: Symptom, lines: Iterable[str]) -> Symptom:
    """The symptom with ``lines`` before its evidence, its links moved down with their lines."""
    lines = tuple(lines)
    n = len(lines)
    return replace(symptom, evidence=lines + symptom.evidence,
                   evidence_links=tuple(replace(k, evidence=k.evidence + n)
                                        for k in symptom.evidence_links))


def link_of(symptom: Symptom, index: int) -> EvidenceLink | None:
    """The link of evidence line ``index``, if it names anything."""
    return next((k for k in symptom.evidence_links if k.evidence == index), None)


def describe(link: EvidenceLink) -> str:
    """What enter opens, in a few words (the pane's hint for the line under the cursor)."""
    if link.kind == LOG_LINE:
        return f"the log at line {link.line}"
    if link.kind == STACK_CLASS:
        return f"stack class #{(link.stack_class or 0) + 1} in the compare screen"
    if link.kind == RANK:
        return f"rank {link.ranks[0]}'s row" if link.ranks else "the rank's row"
    if link.kind == FRAME:
        return f"the source at {link.path.rsplit('/', 1)[-1]}:{link.line}"
    return ""
