"""What a log view holds: lines in arrival order, the rows its filters let through, the search.

Kept apart from the widget (and free of Textual) so the bookkeeping is cheap and testable: the
widget draws only the rows on screen, and everything here is incremental. New lines are
appended (never a rebuild per tick); a filter or query change rebuilds once, on the key press.

Positions are absolute entry numbers (``base`` + list index) so the filtered rows, the search
matches and the cursor survive old entries being dropped from the front.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rltui.logbook import TaggedLine
from rltui.redact import scrub_text
from rltui.scrub import printable
from rltui.ui.widgets.log_facts import path_tag

ERROR = 1
WARNING = 2
CUT = 4
MARKER = 8  # "... N lines skipped": not a line of any file
IN_EVENT = 16  # inside a traceback, OOM or NCCL message that a parser reported

MAX_ENTRIES = 20_000  # as many as the LogBook keeps
# At most this many new lines per update; beyond it the middle of the batch is skipped with a
# marker. A 1 s update of 16 ranks writing 100 lines/s fits whole; a burst (a replay jump, a
# rank dumping its environment) costs the UI thread a bounded few milliseconds.
MAX_BATCH = 2_000



@dataclass(slots=True)
class Entry:
    text: str
    path: str
    rank: int | None
    line_no: int
    flags: int
    prev: int  # absolute position of the previous entry from the same file; -1 if none
    tag: str  # ``r3``, or the file's name when no rank is known

    @property
    def errorish(self) -> bool:
        return bool(self.flags & (ERROR | IN_EVENT))


def clean(text: str) -> str:
    """A log line as the screen shows it: tabs expanded, other control characters written as
    their escapes (``\\x1b``: a line's escape sequences must not reach the terminal)."""
    if "\t" in text:
        text = text.expandtabs(4)
    return printable(text)


class LogBuffer:
    def __init__(self, max_entries: int = MAX_ENTRIES, max_batch: int | None = MAX_BATCH) -> None:
        self.max_entries = max_entries
        self.max_batch = max_batch
        self.entries: list[Entry] = []
        self.base = 0  # absolute position of entries[0]
        self.shown: list[int] = []  # absolute positions passing the filters, ascending
        self.matches: list[int] = []  # absolute positions in ``shown`` matching the query
        self.rank_filter: int | None = None
        self.errors_only = False
        self.query = ""
        self.ranks: set[int] = set()
        self.widest = 0  # longest text seen, in characters (the horizontal scroll range)
        self.skipped = 0  # lines left out by the batch cap, in all
        self.tag_width = 0
        self._last_of_path: dict[str, int] = {}
        self._tags: dict[int | str, str] = {}

    # -- reading ----------------------------------------------------------------------------
    @property
    def end(self) -> int:
        """One past the newest absolute position."""
        return self.base + len(self.entries)

    def at(self, pos: int) -> Entry | None:
        i = pos - self.base
        return self.entries[i] if 0 <= i < len(self.entries) else None

    def row(self, row: int) -> tuple[int, Entry]:
        pos = self.shown[row]
        return pos, self.entries[pos - self.base]

    def row_of(self, pos: int) -> int | None:
        """The row showing ``pos``, or None when the filters hide it."""
        i = bisect_left(self.shown, pos)
        return i if i < len(self.shown) and self.shown[i] == pos else None

    def nearest_row(self, pos: int) -> int:
        """The row of ``pos`` or of the first shown entry after it (for keeping a place)."""
        return min(bisect_left(self.shown, pos), max(0, len(self.shown) - 1))

    # -- adding -------------------------------------------------------------------------------
    def add(self, lines: Sequence[TaggedLine], rank_of: Mapping[str, int] | None = None
            ) -> tuple[int, int]:
        """Append new lines; returns (rows added, rows dropped from the front)."""
        if not lines:
            return 0, 0
        rank_of = rank_of or {}
        before = len(self.shown)
        cap = self.max_batch
        if cap is not None and len(lines) > cap:
            half = cap // 2
            head, middle, tail = lines[:half], lines[half:len(lines) - half], lines[-half:]
            self._extend(head, rank_of)
            errors = sum(1 for t in middle if t.line.level == "error")
            self.skipped += len(middle)
            self._marker(len(middle), errors)
            self._extend(tail, rank_of)
        else:
            self._extend(lines, rank_of)
        dropped = self._trim()
        return len(self.shown) - before + dropped, dropped

    def _extend(self, lines: Iterable[TaggedLine], rank_of: Mapping[str, int]) -> None:
        # The per-line path of every update: locals and inline checks, no helper calls for the
        # common line (printable, no filter, no search).
        entries, shown, last, tags = self.entries, self.shown, self._last_of_path, self._tags
        query, fold = self.query, self.query.islower()
        filtered = self.rank_filter is not None or self.errors_only
        pos = self.base + len(entries)
        widest = self.widest
        for t in lines:
            line = t.line
            path = t.path
            rank = t.rank if t.rank is not None else rank_of.get(path)
            level = line.level
            flags = ERROR if level == "error" else WARNING if level == "warning" else 0
            if line.cut:
                flags |= CUT
            text = scrub_text(line.text)  # a key the job echoes stays off screenshots
            if not text.isprintable():
                text = clean(text)
            tag = tags.get(rank if rank is not None else path)
            if tag is None:
                tag = self._tag(rank, path)
            entry = Entry(text, path, rank, line.line_no, flags, last.get(path, -1), tag)
            entries.append(entry)
            last[path] = pos
            if len(text) > widest:
                widest = len(text)
            if not filtered or self._passes(entry):
                shown.append(pos)
                if query and query in (text.lower() if fold else text):
                    self.matches.append(pos)
            pos += 1
        self.widest = widest

    def _tag(self, rank: int | None, path: str) -> str:
        tag = self._tags[rank if rank is not None else path] = (
            f"r{rank}" if rank is not None else path_tag(path))
        if rank is not None:
            self.ranks.add(rank)
        self.tag_width = max(self.tag_width, len(tag))
        return tag

    def _marker(self, count: int, errors: int) -> None:
        text = f"... {count} lines skipped (the logs grew faster than the screen shows them"
        text += f"; {errors} error line(s) among them" if errors else ""
        text += "; o opens a rank's full log)"
        pos = self.end
        self.entries.append(Entry(text, "", None, 0, MARKER, -1, ""))
        self.shown.append(pos)

    def _trim(self) -> int:
        """Drop the oldest entries in chunks (a list shift per line would be quadratic)."""
        excess = len(self.entries) - self.max_entries
        if excess <= 0 or excess < self.max_entries // 10:
            return 0
        self.base += excess
        del self.entries[:excess]
        cut = bisect_left(self.shown, self.base)
        del self.shown[:cut]
        del self.matches[:bisect_left(self.matches, self.base)]
        return cut

    # -- parsers' events: lines inside a traceback or OOM count as errors -----------------------
    def mark_event(self, path: str, first: int, last: int) -> bool:
        """Flag the lines ``first``..``last`` of ``path`` as inside an event; True if any
        changed. Walks the file's own chain backwards, so a burst of other ranks costs
        nothing."""
        pos = self._last_of_path.get(path, -1)
        changed = False
        while pos >= self.base:
            entry = self.entries[pos - self.base]
            if entry.line_no < first:
                break
            if entry.line_no <= last and not entry.flags & IN_EVENT:
                entry.flags |= IN_EVENT
                changed = True
            pos = entry.prev
        if changed and self.errors_only:
            self._rebuild()
        return changed

    # -- filters and search -------------------------------------------------------------------
    def _passes(self, e: Entry) -> bool:
        if e.flags & MARKER:
            return True
        if self.rank_filter is not None and e.rank != self.rank_filter:
            return False
        return not self.errors_only or e.errorish

    def set_filter(self, *, rank: int | None | str = "keep", errors_only: bool | None = None
                   ) -> None:
        if rank != "keep":
            self.rank_filter = rank  # type: ignore[assignment]
        if errors_only is not None:
            self.errors_only = errors_only
        self._rebuild()

    def _rebuild(self) -> None:
        base, passes = self.base, self._passes
        self.shown = [base + i for i, e in enumerate(self.entries) if passes(e)]
        self._find()

    def set_query(self, query: str) -> None:
        self.query = query
        self._find()

    def _find(self) -> None:
        query = self.query
        if not query:
            self.matches = []
            return
        fold = query.islower()  # smart case: an upper-case letter makes it exact
        entries, base = self.entries, self.base
        self.matches = [p for p in self.shown if not entries[p - base].flags & MARKER
                        and query in (entries[p - base].text.lower() if fold
                                      else entries[p - base].text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the query occurs in ``text`` (for highlighting one drawn line)."""
        query = self.query
        if not query:
            return []
        hay = text.lower() if query.islower() else text
        out, start = [], hay.find(query)
        while start >= 0:
            out.append((start, start + len(query)))
            start = hay.find(query, start + len(query))
        return out

    # -- moving ---------------------------------------------------------------------------------
    def next_match(self, pos: int, direction: int) -> int | None:
        """The match after (1) or before (-1) ``pos``."""
        m = self.matches
        if direction > 0:
            i = bisect_right(m, pos)
            return m[i] if i < len(m) else None
        i = bisect_left(m, pos) - 1
        return m[i] if i >= 0 else None

    def is_error_start(self, entry: Entry) -> bool:
        """An error line whose file's previous line is not one: the start of a traceback or of
        a run of error lines, so a 40-line traceback is one stop, not forty."""
        if not entry.errorish or entry.flags & MARKER:
            return False
        prev = self.at(entry.prev) if entry.prev >= 0 else None
        return prev is None or not prev.errorish

    def next_error(self, pos: int, direction: int) -> int | None:
        """The next error start among the shown rows after (1) or before (-1) ``pos``."""
        shown, entries, base = self.shown, self.entries, self.base
        if direction > 0:
            rows = range(bisect_right(shown, pos), len(shown))
        else:
            rows = range(bisect_left(shown, pos) - 1, -1, -1)
        for r in rows:
            if self.is_error_start(entries[shown[r] - base]):
                return shown[r]
        return None
