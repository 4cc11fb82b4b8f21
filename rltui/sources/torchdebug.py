"""The stacks torch's debug server serves (``torch.distributed.debug.start_debug_server``).

Its front end on rank 0 gathers every rank's Python stacks on request: ``/stacks`` (each rank's
``faulthandler``-style dump, taken by the rank itself) and ``/pyspy_dump`` (py-spy run by each
rank, when the ranks have it). Each page holds one ``<h2>Rank N: address</h2>`` and one
``<pre>`` per rank (not HTML-escaped). A fetch is one stack round, as a py-spy round is: the
rounds of the same ranks compare across samples (moving or stuck) the same way.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Sequence

from rltui.model import ERROR, OK, UNAVAILABLE, ProcessDump, Reading, StackPoll, replace
from rltui.parsing.stacktext import read as read_stacks
from rltui.sources.flightrec import fetch_text

_SECTION = re.compile(r"<h2>\s*Rank\s+(\d{1,7})\s*:\s*([^<]{0,300})</h2>(.*?)(?=<h2>|\Z)",
                      re.S | re.I)
_PRE = re.compile(r"<pre>", re.I)
_PRE_END = re.compile(r"</pre>", re.I)
PAGES = ("/stacks", "/pyspy_dump")
MAX_SECTIONS = 1 << 14  # ranks read from one page
MAX_PROBLEMS = 64


class _Pre:
    """The first ``<pre>...</pre>`` of a section, found in linear time (a lazy regex over a
    page of unclosed ``<pre>`` tags is quadratic)."""

    def __init__(self, body: str, start: int, end: int) -> None:
        self._body, self._start, self._end = body, start, end

    def start(self) -> int:
        return self._start

    def group(self, _: int) -> str:
        return self._body[self._start + 5:self._end]


def _pre(body: str) -> _Pre | None:
    m = _PRE.search(body)
    if m is None:
        return None
    e = _PRE_END.search(body, m.end())
    if e is None:
        return None
    return _Pre(body, m.start(), e.start())


def stacks_from_page(text: str, source: str) -> tuple[list[ProcessDump], list[str]]:
    """Each rank's dumps from a ``/stacks`` or ``/pyspy_dump`` page, and what could not be
    read, as sentences."""
    dumps: list[ProcessDump] = []
    problems: list[str] = []
    for k, m in enumerate(_SECTION.finditer(text)):
        if k >= MAX_SECTIONS:
            problems.append(f"more than {MAX_SECTIONS} ranks in one page: the rest not read")
            break
        rank, where, body = int(m.group(1)), m.group(2).strip()[:120], m.group(3)
        pre = _pre(body)
        if pre is None or "Failed to fetch" in body[:pre.start()]:
            problems.append(f"rank {rank} ({where}): the debug server could not fetch its "
                            "stacks")
            continue
        raw = pre.group(1)
        if "&lt;" in raw or "&gt;" in raw or "&amp;" in raw:
            raw = html.unescape(raw)
        found, _ = read_stacks(raw, f"{source} rank {rank}")
        if not found:
            problems.append(f"rank {rank} ({where}): no stack in its section")
            continue
        # one process per rank: its threads may have been read as several dumps
        threads = tuple(t for d in found for t in d.threads)
        first = found[0]
        dumps.append(replace(first, rank=rank, threads=threads,
                             pid=first.pid or -(rank + 1), source=source,
                             role=first.role or "torch debug server"))
    if not dumps and not problems:
        problems.append("no 'Rank N' section: not a page of torch's debug server")
    if len(problems) > MAX_PROBLEMS:
        problems[MAX_PROBLEMS:] = [f"and {len(problems) - MAX_PROBLEMS} more ranks unread"]
    return dumps, problems


class DebugServerStacks:
    """A "stacks" source over torch's debug server front ends (one round per poll)."""

    name = "stacks"

    def __init__(self, urls: Sequence[str], *, clock: Callable[[], float] = time.time,
                 timeout: float = 60.0) -> None:
        self.urls = tuple(urls)
        self.clock = clock
        self.timeout = timeout

    def poll(self) -> Reading:
        return self._round("periodic")

    def dump_now(self) -> Reading:
        return self._round("on-demand")

    def _round(self, trigger: str) -> Reading:
        started = self.clock()
        dumps: list[ProcessDump] = []
        problems: list[str] = []
        for url in self.urls:
            got: list[ProcessDump] = []
            for page in PAGES:
                where = url.rstrip("/") + page
                try:
                    got, why = stacks_from_page(fetch_text(where, self.timeout), where)
                except OSError as exc:
                    got, why = [], [f"{where}: {exc}"]
                problems += why
                if got:
                    break
            dumps += got
        finished = self.clock()
        poll = StackPoll(dumps=tuple(dumps), started=started, finished=finished,
                         trigger=trigger, nonblocking=True,
                         command=f"torch debug server {' '.join(self.urls)}")
        if dumps:
            return Reading(source=self.name, timestamp=finished, status=OK, payload=poll,
                           message="; ".join(problems[:2]))
        return Reading(source=self.name, timestamp=finished,
                       status=ERROR if problems else UNAVAILABLE, payload=None,
                       message="; ".join(problems[:2]) or "no stacks",
                       remedy="check that the job started torch's debug server and that its "
                              "port is reachable from here")

    def close(self) -> None:
        pass
