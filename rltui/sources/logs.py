"""The "logs" source: every log file of the job, followed and parsed a little each poll.

Files come from two places: ``--log`` globs (expanded again every poll, so files that appear
later are picked up; a glob matching nothing is listed in ``LogPoll.unmatched``) and
``discover()``, which names the job processes' stdout/stderr files with their rank and pid.
Both are merged by real path, so stdout and stderr sharing a file, or a glob and a process
naming the same file, give one file. Each file has a ``FileTail`` (bytes to lines, rotation,
huge files) and its own ``StepReader`` and ``EventReader`` (recreated when the file is reset).

Every new line is cleaned (``strip_noise``) and fed to both readers; only the last
``max_lines_per_file`` lines of a poll become ``LogLine`` values for the screen.

The first look at a file (its history: the whole file, or the last ``history_bytes`` of a
huge one) can be tens of thousands of lines. When it is longer than ``BULK_LINES``, steps come
from ``StepReader.scan`` over the raw block (it only cleans and parses lines holding a step
marker, which makes it several times faster than line-by-line feeding) and events from the last
``HISTORY_EVENT_LINES`` lines only: old tracebacks deep in the history matter less than showing
the file quickly, and the recent ones (what the user is triaging) are kept.

A multi-line event (a traceback) completes when a line that cannot belong to it arrives. A
crashed rank writes nothing after its traceback, so the readers of a file that stayed quiet for
``IDLE_FLUSH_S`` are flushed once: quiet by the file's modification time (a dead rank's log
read for the first time gives its last traceback at once) or by the polls that found nothing.
"""

from __future__ import annotations

import glob
import os
import re
import time
from collections.abc import Callable, Sequence
from functools import partial

from rltui.model import (
    DENIED,
    ERROR,
    OK,
    UNAVAILABLE,
    LogLine,
    LogPoll,
    LogUpdate,
    Reading,
    replace,
)
from rltui.parsing.elastic_error import MAX_TEXT as MAX_ERROR_FILE
from rltui.parsing.elastic_error import error_file_event
from rltui.parsing.events import EventReader
from rltui.parsing.noise import level_of, strip_noise
from rltui.parsing.steps import StepReader
from rltui.sources import safeopen
from rltui.sources.base import reading
from rltui.sources.tail import FINGERPRINT_BYTES, FileTail, Generation, TailRead

BULK_LINES = 4096  # a history read longer than this is scanned for steps, not fed line by line
HISTORY_EVENT_LINES = 20_000  # events are looked for in this many last lines of a history
IDLE_FLUSH_S = 2.0  # a file quiet this long gets its pending multi-line events closed
VET_AGAIN_S = 5.0  # a log path's links are resolved again after this long (s)
MAX_FILES = 512  # files followed at once; beyond it, files that are gone are forgotten
MAX_LISTED_FAILURES = 3
MAX_PREFIX_RANKS = 4096  # distinct [rankN]: prefixes counted per file
PREFIX_MAJORITY = 0.9  # share of a file's prefixed lines one rank needs to be the file's rank

# "rank3.log", "rank_3.log", "worker-rank-3.txt", "node0.rank12.out": a rank word and its
# number. "local_rank3" is a local rank, not the global one, and "prank3" is another word.
_RANK_IN_NAME = re.compile(r"(?<![a-z])(?<!local_)(?<!local-)rank[-_]?(\d{1,7})(?!\d)",
                           re.IGNORECASE)

# (path, rank, pid) or (path, rank, pid, how it was found, the job's tie): rltui.sources.deadlogs
Discover = Callable[[], Sequence[tuple]]
Target = tuple  # (rank, pid, found, tie)


def rank_from_name(path: str) -> int | None:
    """The rank a log's file name states, if it states one."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    return int(m.group(1)) if m else None


# torchrun's --log-dir layout: <dir>/<run>/attempt_<n>/<local rank>/{stdout,stderr}.log|error.json
_TORCHRUN_LAYOUT = re.compile(r"/attempt_\d+/(\d{1,5})/(?:stdout\.log|stderr\.log|error\.json)$")


def rank_from_layout(path: str) -> int | None:
    """The local rank torchrun's log folder puts a file under: the rank itself on a
    single-node job (a caller that knows the node's first rank does better)."""
    m = _TORCHRUN_LAYOUT.search(path.replace("\\", "/"))
    return int(m.group(1)) if m else None


class _File:
    """One followed file: its tail, its parsers, and what is known about who writes it."""

    def __init__(self, path: str, tail: FileTail, source: LogSource) -> None:
        self.path = path
        self.tail = tail
        self.name_rank = rank_from_name(path)
        self.layout_rank = rank_from_layout(path)
        self.found_rank: int | None = None
        self.pid: int | None = None
        self.found = ""  # how it was found (deadlogs), "" for stdout/stderr and --log
        self.tie = ""
        # torchelastic's error.json: read whole (it is rewritten, not appended to)
        self.error_file = os.path.basename(path) == "error.json"
        self.error_seen: tuple | None = None
        self.prefix_ranks: dict[int, int] = {}
        self.last_line_at: float | None = None
        self.shift = 0  # lines before a huge file's window, once counted
        self._source = source
        self.new_readers()

    def new_readers(self) -> None:
        self.steps = StepReader(self._source.step_format, self._source.custom_parsers)
        self.events = EventReader(self._source.completion_patterns)
        self.prefix_ranks.clear()
        self.shift = 0
        self.flushed = True  # nothing fed since the readers were last flushed

    @property
    def rank(self) -> int | None:
        if self.name_rank is not None:
            return self.name_rank
        if self.prefix_ranks:
            # Only a clear majority: a launcher's combined output carries every rank's prefix,
            # and naming one of them would pin the whole job's log on that rank.
            best = max(self.prefix_ranks, key=self.prefix_ranks.__getitem__)
            if self.prefix_ranks[best] >= PREFIX_MAJORITY * sum(self.prefix_ranks.values()):
                return best
        return self.found_rank if self.found_rank is not None else self.layout_rank


class LogSource:
    name = "logs"

    def __init__(self, globs: Sequence[str] = (), discover: Discover | None = None,
                 step_format: str = "auto", custom_parsers: Sequence = (),
                 completion_patterns: Sequence[str] = (), max_lines_per_file: int = 2000,
                 clock: Callable[[], float] = time.time, **tail_options: int) -> None:
        self.globs = tuple(globs)
        self.discover = discover
        self.step_format = step_format
        self.custom_parsers = tuple(custom_parsers)
        self.completion_patterns = tuple(completion_patterns)
        self.max_lines = max(0, max_lines_per_file)
        self.clock = clock
        self.tail_options = tail_options  # FileTail limits (tests use small ones)
        # Bad formats and patterns fail here, at start-up, not in the first poll.
        StepReader(step_format, self.custom_parsers)
        EventReader(self.completion_patterns)
        self._files: dict[str, _File] = {}  # by real path, in the order first seen
        self._refused: dict[str, str] = {}  # log paths not followed (by their own name): why
        self._vet: dict[str, tuple[float, tuple[str, Target]]] = {}  # path -> (when, _vetted)

    # -- finding files -----------------------------------------------------------------------

    def paths(self) -> list[str]:
        """The job's log files now, by real path (the --log globs first, then discovered),
        what is not a regular file and refused links left out: what the agent's ``tail``
        request may read."""
        return [p for p, t in self._targets()[0].items()
                if os.path.isfile(p) and not t[2].startswith(REFUSED)]

    def _vetted(self, path: str) -> tuple[str, Target]:
        """``_vetted(path)``, done again only every VET_AGAIN_S seconds per path: resolving
        eight logs' links each second was a tenth of the monitor's CPU. Within that time a
        retargeted link still reads the file it led to when vetted, never an unvetted one."""
        now = time.monotonic()
        hit = self._vet.get(path)
        if hit is not None and 0 <= now - hit[0] < VET_AGAIN_S:
            return hit[1]
        if len(self._vet) > 4 * MAX_FILES:
            self._vet.clear()
        vetted = _vetted(path)
        self._vet[path] = (now, vetted)
        return vetted

    def _targets(self) -> tuple[dict[str, Target], list[str], str]:
        """{real path: (rank, pid, found, tie) from discovery}, unmatched globs, a note on
        discovery."""
        found: dict[str, Target] = {}
        unmatched: list[str] = []
        for pattern in self.globs:
            paths = _expand(pattern)
            if not paths:
                unmatched.append(pattern)
            for path in paths:
                found.setdefault(*self._vetted(path))
        note = ""
        if self.discover is not None:
            try:
                discovered = list(self.discover())
            except Exception as exc:  # noqa: BLE001 - a caller's callback; globs still work
                discovered, note = [], f"log discovery failed: {type(exc).__name__}: {exc}"
            for item in discovered:
                path, rank, pid = item[:3]
                how, tie = (item[3], item[4]) if len(item) >= 5 else ("", "")
                if not path:
                    continue
                real, target = self._vetted(path)
                if target[2].startswith(REFUSED):
                    found.setdefault(real, target)
                    continue
                old_rank, old_pid, old_how, old_tie = found.get(real, (None, None, "", ""))
                # a process writing it says more than where it was found
                how = "" if (pid is not None or old_pid is not None) else (old_how or how)
                found[real] = (old_rank if rank is None else rank,
                               old_pid if pid is None else pid, how, old_tie or tie)
        return found, unmatched, note

    def _track(self, targets: dict[str, Target]) -> None:
        self._refused = {p: t[2][len(REFUSED):] for p, t in targets.items()
                         if t[2].startswith(REFUSED)}
        for path, (rank, pid, how, tie) in targets.items():
            if path in self._refused:
                continue
            entry = self._files.get(path)
            if entry is None:
                entry = self._files[path] = _File(path, FileTail(path, **self.tail_options), self)
                entry.tail.known = partial(self._generation_of, entry)
            if rank is not None:
                entry.found_rank = rank
            if pid is not None:
                entry.pid = pid
            entry.found = how if entry.pid is None else ""
            entry.tie = tie or entry.tie
        if len(self._files) > MAX_FILES:  # forget files that are gone and no longer named
            for path in [p for p in self._files if p not in targets and not os.path.exists(p)]:
                self._files.pop(path).tail.close()
                if len(self._files) <= MAX_FILES:
                    break

    def _generation_of(self, entry: _File, fd: int, info: os.stat_result,
                       ) -> tuple[str, Generation | None] | None:
        """Whether the file ``entry`` is about to open is a generation another followed file
        had (a glob such as ``train.log*`` matches the rotated names too): the same inode (a
        rename), or, under a rotated name of it, a copy of it (copytruncate: the same first
        bytes). One the other file still reads is not read here; one it has finished is read on
        from where it stopped (lines written to it after that: a writer that reopens its log
        late, or what copytruncate copied after the last read), never from its start."""
        ident = (info.st_dev, info.st_ino)
        head: bytes | None = None
        best: tuple[str, Generation] | None = None  # read furthest: renamed on, read further
        for other in self._files.values():
            if other is entry:
                continue
            live = other.tail.generation
            rotated = _rotated_name(entry.path, other.path)
            for generation in ([live] if live else []) + other.tail.past:
                same, first, offset, _, _ = generation
                if generation is live and same == ident:
                    return other.path, None  # still read there
                if (same != ident and not rotated) or not first:
                    continue
                if head is None:
                    head = os.pread(fd, FINGERPRINT_BYTES, 0)
                if head[:len(first)] != first:
                    continue  # another file (an inode number used again, say)
                if generation is live:
                    return other.path, None  # a copy of what is still read there
                if best is None or offset > best[1][2]:
                    best = (other.path, generation)
        if best is None:
            return None
        path, (_, _, offset, last, _) = best
        if info.st_size < offset:
            return path, None  # a copy not complete yet
        if os.pread(fd, len(last), offset - len(last)) != last:
            return None  # rewritten since: a file of its own
        return best

    # -- polling -----------------------------------------------------------------------------

    def poll(self) -> Reading:
        try:
            targets, unmatched, note = self._targets()
            self._track(targets)
        except Exception as exc:  # noqa: BLE001 - a source never raises from poll()
            return reading(self.name, ERROR, LogPoll(), message=f"cannot list log files: {exc}",
                           clock=self.clock)
        now = self.clock()
        updates = tuple(self._update(entry, now) for entry in self._files.values())
        updates += tuple(self._refusal(path, why) for path, why in self._refused.items())
        payload = LogPoll(files=updates, unmatched=tuple(unmatched))
        failed = [u for u in updates if u.status != OK]
        if not updates:
            what = (f"no file matches {', '.join(unmatched)}" if unmatched
                    else "no log files found (the job's output is not a regular file)")
            return reading(self.name, UNAVAILABLE, payload, message=_join(what, note),
                           remedy="Give the log files with --log GLOB.", clock=self.clock)
        listed = "; ".join(f"{os.path.basename(u.path)}: {u.message or u.status}"
                           for u in failed[:MAX_LISTED_FAILURES])
        if len(failed) > MAX_LISTED_FAILURES:
            listed += f"; {len(failed) - MAX_LISTED_FAILURES} more"
        message = f"{len(failed)} of {len(updates)} logs unreadable: {listed}" if failed else ""
        status = OK
        if len(failed) == len(updates):
            statuses = {u.status for u in failed}
            status = statuses.pop() if len(statuses) == 1 else ERROR
        return reading(self.name, status, payload, message=_join(message, note), clock=self.clock)

    @staticmethod
    def _refusal(path: str, why: str) -> LogUpdate:
        """A log path that names a file rltui will not read for it: said, every poll."""
        status = DENIED if "symlink" in why else ERROR
        return LogUpdate(path=path, status=status, rank=rank_from_name(path), message=why)

    def _update(self, entry: _File, now: float) -> LogUpdate:
        try:
            if entry.error_file:
                return self._error_file(entry, now)
            return self._parse(entry, entry.tail.read(), now)
        except Exception as exc:  # noqa: BLE001 - one file's parser bug must not hide the rest
            return LogUpdate(path=entry.path, status=ERROR, rank=entry.rank, pid=entry.pid,
                             message=f"cannot parse: {type(exc).__name__}: {exc}")

    def _parse(self, entry: _File, read: TailRead, now: float) -> LogUpdate:
        if read.reset:
            entry.new_readers()
        if read.line_shift:
            entry.shift += read.line_shift
        lines = read.lines
        steps: list = []
        events: list = []
        shown: list[LogLine] = []
        if lines:
            entry.last_line_at = now
            entry.flushed = False
            # Lines that were already in the file when it was first opened were written no
            # later than its modification time: that, not now, is their arrival, so a log read
            # after the job stopped (or copied from another node) shows how long ago it moved.
            at = min(now, read.mtime) if read.history and read.mtime is not None else now
            if read.history and len(lines) > BULK_LINES:
                self._bulk(entry, lines, at, steps, events, shown)
            else:
                self._feed(entry, lines, at, steps, events, shown)
        if read.ended or (not entry.flushed and self._quiet(entry, read, now)):
            steps.extend(entry.steps.flush())
            events.extend(entry.events.flush())
            entry.flushed = True
        if entry.shift:  # the readers count from the window; hand out absolute numbers
            steps = [replace(s, line_no=s.line_no + entry.shift) for s in steps]
            events = [replace(e, line_no=e.line_no + entry.shift,
                              end_line=e.end_line + entry.shift) for e in events]
        return LogUpdate(
            path=entry.path, status=read.status, rank=entry.rank, format=entry.steps.format,
            size=read.size, lines=tuple(shown), steps=tuple(steps), events=tuple(events),
            message=read.message, reset=read.reset, pid=entry.pid,
            line_base_known=read.line_base_known, line_shift=read.line_shift,
            found=entry.found, tie=entry.tie, truncated=read.truncated)

    def _error_file(self, entry: _File, now: float) -> LogUpdate:
        """torchelastic's error.json: what the child raised, its exit signal and time, read
        whole each time it changes (one child-failed event, form error-file)."""
        def update(status: str, message: str = "", events: tuple = ()) -> LogUpdate:
            return LogUpdate(path=entry.path, status=status, rank=entry.rank, pid=entry.pid,
                             events=events, message=message, found=entry.found, tie=entry.tie)
        try:
            info = os.stat(entry.path)
        except FileNotFoundError:
            return update(UNAVAILABLE, "no such file (yet)")
        except OSError as exc:
            return update(ERROR, f"cannot read: {exc.strerror or exc}")
        seen = (info.st_size, info.st_mtime_ns, info.st_ino)
        if seen == entry.error_seen:
            return update(OK)
        entry.error_seen = seen
        if info.st_size > MAX_ERROR_FILE:
            return update(OK, f"not an error file: {info.st_size} bytes")
        try:
            text = safeopen.read_bytes(entry.path, MAX_ERROR_FILE).decode("utf-8", "replace")
        except OSError as exc:
            return update(ERROR, f"cannot read: {exc.strerror or exc}")
        event = error_file_event(text, arrival=min(now, info.st_mtime))
        if event is None:
            return update(OK, "not torchelastic's error file format")
        return update(OK, events=(event,))

    @staticmethod
    def _quiet(entry: _File, read: TailRead, now: float) -> bool:
        """Nothing written for IDLE_FLUSH_S: by the file's own time (so a dead rank's last
        traceback comes with the first read of its log), or by what the polls saw."""
        if entry.last_line_at is None:
            return False
        if read.mtime is not None and now - read.mtime >= IDLE_FLUSH_S:
            return True
        return not read.lines and now - entry.last_line_at >= IDLE_FLUSH_S

    def _feed(self, entry: _File, lines, now: float, steps: list, events: list,
              shown: list[LogLine]) -> None:
        """The live path: every line cleaned and fed to both readers."""
        cleaned = [strip_noise(text) for _, text, _ in lines]
        self._events(entry, lines, cleaned, now, events, entry.steps.feed, steps)
        self._show(lines, cleaned, shown)

    def _bulk(self, entry: _File, lines, now: float, steps: list, events: list,
              shown: list[LogLine]) -> None:
        """A long history: steps scanned from the raw block, events from its last lines."""
        steps.extend(entry.steps.scan("\n".join(text for _, text, _ in lines),
                                      lines[0][0] - entry.shift, now))
        lines = lines[-HISTORY_EVENT_LINES:]
        cleaned = [strip_noise(text) for _, text, _ in lines]
        self._events(entry, lines, cleaned, now, events)
        self._show(lines, cleaned, shown)

    @staticmethod
    def _events(entry: _File, lines, cleaned, now: float, events: list,
                feed_steps=None, steps: list | None = None) -> None:
        """Feed cleaned lines to the event reader (and the step reader when given); the
        readers count from a huge file's window, hence ``- shift``. Hot: kept lean."""
        feed_events = entry.events.feed
        ranks = entry.prefix_ranks
        shift = entry.shift
        for (line_no, _, _), clean in zip(lines, cleaned):
            text, rank = clean.text, clean.rank
            if rank is not None:
                count = ranks.get(rank)
                if count is not None:
                    ranks[rank] = count + 1
                elif len(ranks) < MAX_PREFIX_RANKS:  # garbage must not grow it without end
                    ranks[rank] = 1
            if feed_steps is not None:
                found = feed_steps(text, line_no - shift, now)
                if found:
                    steps.extend(found)
            found = feed_events(text, line_no - shift, now, (rank, clean.actor))
            if found:
                events.extend(found)

    def _show(self, lines, cleaned, shown: list[LogLine]) -> None:
        """LogLines for the last ``max_lines`` lines only: the pane shows no more."""
        if not self.max_lines:
            return
        k = max(0, len(lines) - self.max_lines)
        shown.extend(LogLine(line_no, clean.text, level_of(clean.text), clean.rank, cut)
                     for (line_no, _, cut), clean in zip(lines[k:], cleaned[k:]))

    def close(self) -> None:
        for entry in self._files.values():
            entry.tail.close()


def _expand(pattern: str) -> list[str]:
    """Files a --log pattern names now. A literal path counts only once it exists; directories
    a glob matches are left out (a literal directory is kept, to say it is one)."""
    pattern = os.path.expanduser(pattern)
    if not any(c in pattern for c in "*?["):
        return [pattern] if os.path.lexists(pattern) else []
    return sorted(p for p in glob.glob(pattern, recursive=True) if not os.path.isdir(p))


REFUSED = "refused:"  # in a Target's "found": the path is not followed, and why


def _vetted(path: str) -> tuple[str, Target]:
    """(real path, target) for a log path; a path through a symbolic link whose owner could not
    read the file it leads to (or into /proc, /sys, at a FIFO or device) is kept under its own
    name, refused, so the file behind it is never read and the refusal is shown."""
    real = os.path.realpath(path)
    if real != os.path.abspath(path):  # a link on the way
        try:
            safeopen.check(path)
        except safeopen.Refused as exc:
            return os.path.abspath(path), (None, None, REFUSED + exc.strerror, "")
        except OSError:
            pass  # missing or unreadable: the tail says so
    return real, (None, None, "", "")


def _rotated_name(name: str, of: str) -> bool:
    """``train.log.1``, ``train.log-20250101``, ``train.log_old`` are rotated names of
    ``train.log``."""
    name, of = os.path.basename(name), os.path.basename(of)
    return len(name) > len(of) and name.startswith(of) and name[len(of)] in ".-_"


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)
