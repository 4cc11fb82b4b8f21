"""Turn log lines into LogEvents: tracebacks, OOMs, NCCL timeouts, torchrun failures, end banners.

``EventReader`` is fed one cleaned line at a time (per file, stateful) and returns the events
that line completed. Most lines are not events: a line whose writer has no pending multi-line
event costs a few substring checks and no regex. See docs/log-events.md for kinds and fields.

One failure is one event. When an OOM, an engine memory error, Ray's OOM killer, an NCCL timeout
or a torchrun ChildFailedError is the exception line of a Python traceback, the event has the
specific kind (cuda-oom, engine-oom, ray-oom, nccl-timeout, child-failed) and carries the whole
traceback as its text and its traceback fields (exc_type, last_frame, ...); there is no second
"traceback" event. Ray's OOM report goes on after the exception line (the node's memory, the top
memory users); those lines join the event, and the same report printed outside a traceback (the
driver's warning, the raylet's lines) is one ray-oom event too.

Several writers can share a file (torchrun's ``[rankN]:``, Ray's ``(Actor pid=N)``). Pending
multi-line events are kept per writer: the ``source`` given to feed() (what the cleaner stripped)
together with any such prefix still on the line.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from rltui.model import LogEvent
from rltui.parsing import distfail, noise, oom
from rltui.parsing import tracebacks as tb

MAX_LINE = 16384  # chars of one line looked at; a 1 MB garbage line costs no more than this
MAX_SOURCES = 32  # writers with a pending multi-line event at once
QUIET_LINES = 200  # lines of other writers after which a writer's pending event is closed
NCCL_WINDOW = 64  # lines within which the watchdog's PG-status line joins its timeout line
NCCL_REPEAT_LINES = 500  # the same (rank, seq) timeout again within this many lines is a repeat
RAY_LINES = 40  # lines kept of one Ray OOM report outside a traceback (the table has about 12)

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Ray prints "(Actor pid=N[, ip=...]) " before each line; torchrun "[rankN]:" or "[defaultN]:".
_PREFIX = re.compile(r"(\((?:[\w.:-]+ )?pid=\d+(?:, ip=[^)]*)?\) )?(\[(?:rank|default)(\d+)\]:)?")
_RAY_REPEAT = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
_AREAL_ELAPSED = re.compile(r"Training completes! Total time elapsed (\d+(?:\.\d+)?)")
_TIME_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
_TIME_AREAL = re.compile(r"(\d{4})(\d\d)(\d\d)-(\d\d):(\d\d):(\d\d)(?:\.(\d+))?")
_FAILED = "Training failed with exception:"


def _line_time(text: str) -> float | None:
    """The line's own timestamp when it has a full date (AReaL, torchtitan, ISO); local time.

    Timestamps without a year (glog's "E0521 18:37:16", OpenRLHF's "08-13 19:25:45") give None
    rather than a guessed year.
    """
    head = text[:80]
    m = _TIME_AREAL.search(head) or _TIME_ISO.search(head)
    return _mktime(tuple(int(g) for g in m.groups()[:6]), m.group(7)) if m else None


def _mktime(parts: tuple[int, ...], frac: str | None = None) -> float | None:
    try:
        base = time.mktime((*parts, 0, 0, -1))  # type: ignore[arg-type]
    except (ValueError, OverflowError):
        return None
    return base + (float("0." + frac) if frac else 0.0)


class _Watch:
    """An NCCL watchdog timeout waiting for its PG-status line."""

    __slots__ = ("arrival", "count", "end", "fields", "lines", "start", "time")

    def __init__(self, fields: list, line_no: int, arrival: float, text: str, when: float | None,
                 count: int) -> None:
        self.fields = fields
        self.start = self.end = line_no
        self.arrival = arrival
        self.lines = [text[:tb.MAX_STORED_LINE]]
        self.time = when
        self.count = count


class _RayReport:
    """A Ray OOM-killer report printed outside a traceback, waiting for its detail lines."""

    __slots__ = ("arrival", "blanks", "count", "detail", "end", "lines", "start", "table", "time")

    def __init__(self, line_no: int, arrival: float, text: str, when: float | None, count: int) -> None:
        self.start = self.end = line_no
        self.arrival = arrival
        self.lines = [text[:tb.MAX_STORED_LINE]]
        self.time = when
        self.count = count
        self.blanks = 0
        self.detail = "Memory on the node" in text
        self.table = oom.is_ray_table_line(text)

    def add(self, text: str, line_no: int, count: int) -> None:
        if len(self.lines) < RAY_LINES:
            self.lines.extend([""] * self.blanks)
            self.lines.append(text[:tb.MAX_STORED_LINE])
        self.blanks = 0
        self.end = line_no
        self.count = count
        self.detail = self.detail or "Memory on the node" in text
        self.table = oom.is_ray_table_line(text)


def _ray_exception(exc_type: str) -> bool:
    """An exception class that can carry Ray's OOM-killer report."""
    return "ray." in exc_type or "RayTaskError" in exc_type or exc_type.endswith(
        ("OutOfMemoryError", "ActorDiedError", "WorkerCrashedError"))


class EventReader:
    """Stateful event parser for one log file. Pure: no I/O.

    ``completion_patterns`` are extra regexes for a job's own end banner (kind completion,
    framework custom); a pattern that does not compile raises ValueError naming it.
    """

    def __init__(self, completion_patterns: Sequence[str] = ()) -> None:
        self._custom: list[tuple[str, re.Pattern[str]]] = []
        for pattern in completion_patterns:
            try:
                self._custom.append((pattern, re.compile(pattern)))
            except re.error as err:
                raise ValueError(f"completion pattern {pattern!r} is not a valid regex: {err}") from None
        self._blocks: dict[tuple, tb.Block] = {}
        self._watch: dict[tuple, _Watch] = {}
        self._emitted_watch: dict[tuple, int] = {}  # (rank, seq) -> line count, to drop repeats
        self._ray: dict[tuple, _RayReport] = {}  # writer -> Ray OOM report outside a traceback
        self._count = 0  # lines fed: windows must not depend on line numbers (they can reset)
        self._next_check = 0

    # -- public --------------------------------------------------------------------------------------
    def feed(self, text: str, line_no: int, arrival: float, source: object = None) -> list[LogEvent]:
        """Read one line; return the events it completed (often none).

        ``source`` (hashable) tells interleaved writers apart once the cleaner has stripped their
        prefixes, e.g. ``(cleaned.rank, cleaned.actor)``; an int, or a tuple starting with an int,
        is also taken as the writer's rank. Events come in the order they complete; a multi-line
        event completes when a line of its writer that cannot belong to it arrives, when its
        writer stays quiet for QUIET_LINES lines of others, or on flush().
        """
        self._count += 1
        out: list[LogEvent] = []
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE]
        if "\r" in text or "\n" in text:
            text = text.rstrip("\r\n")
            if "\r" in text:  # a tqdm redraw: the terminal shows the last non-blank segment
                text = next((p for p in reversed(text.split("\r")) if p.strip()), "")
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        prefix, prefix_rank, body = "", None, text
        if text[:1] in ("(", "["):  # tolerate prefixes the cleaner did not strip
            m = _PREFIX.match(text)
            if m and m.end():
                prefix = m.group(0)
                body = noise.prefix_rest(text, m.end()) if m.group(2) else text[m.end():]
                prefix_rank = int(m.group(3)) if m.group(3) else None
                if "across cluster]" in body:
                    body = _RAY_REPEAT.sub("", body)
        if self._blocks or self._watch or self._ray:
            if self._count >= self._next_check:
                self._expire(out)
            block = self._blocks.get((source, prefix))
            if block is not None:
                block.last_seen = self._count
                own = body
                if block.lead and body.startswith(block.lead):
                    own = body[len(block.lead):]  # the writer's log prefix, repeated on every line
                if self._ray_detail(block, own):  # Ray's OOM report goes on after its exception
                    block.cont += 1
                    block.add(own, line_no)
                    block.state = tb.AFTER_EXC
                    return out
                verdict = tb.offer(block, own, line_no)
                if verdict in (tb.TAKE, tb.DONE):
                    if verdict == tb.DONE:
                        out.append(self._close(block, truncated=False))
                    return out
                out.append(self._close(block, truncated=verdict == tb.CUT))
            report = self._ray.get((source, prefix))
            if report is not None:
                if self._ray_takes(report, body, line_no):
                    return out
                out.append(self._ray_event(self._ray.pop((source, prefix))))
        # The common case: no pending event and nothing that starts one. Substring tests run at
        # C speed; keep this chain short and free of regexes and calls.
        if not (self._custom or "Traceback" in body or "Training" in body or "emory" in body
                or "atchdog" in body or "ChildFailedError" in body or "NCCL work:" in body):
            return out
        rank = prefix_rank
        if rank is None:
            first = source[0] if isinstance(source, tuple) and source else source
            if isinstance(first, int) and not isinstance(first, bool):
                rank = first
        self._idle(text, body, line_no, arrival, (source, prefix), rank, out)
        return out

    def flush(self) -> list[LogEvent]:
        """Close every pending event (end of input, or the file went quiet)."""
        out = [self._finish(b, truncated=b.state in tb.OPEN_STATES)
               for b in sorted(self._blocks.values(), key=lambda b: b.start)]
        self._blocks.clear()
        for key in sorted(self._watch, key=lambda k: self._watch[k].start):
            out.append(self._watch_event(self._watch[key]))
            self._emitted_watch[key] = self._count
        self._watch.clear()
        out += [self._ray_event(r) for r in sorted(self._ray.values(), key=lambda r: r.start)]
        self._ray.clear()
        return out

    @property
    def pending_chars(self) -> int:
        """Characters held for unfinished events (for tests and self-monitoring)."""
        return (sum(b.size() for b in self._blocks.values())
                + sum(sum(len(x) for x in w.lines) for w in self._watch.values())
                + sum(sum(len(x) for x in r.lines) for r in self._ray.values()))

    # -- multi-line events ---------------------------------------------------------------------------
    def _open(self, key: tuple, body: str, line_no: int, arrival: float, rank: int | None,
              state: int, out: list[LogEvent]) -> tb.Block:
        if len(self._blocks) >= MAX_SOURCES:
            oldest = min(self._blocks.values(), key=lambda b: b.last_seen)
            out.append(self._close(oldest, truncated=oldest.state in tb.OPEN_STATES))
        block = tb.Block(key, line_no, arrival, rank, body, self._count, state)
        block.add(body, line_no)
        self._blocks[key] = block
        return block

    def _close(self, block: tb.Block, truncated: bool) -> LogEvent:
        self._blocks.pop(block.key, None)
        return self._finish(block, truncated)

    def _expire(self, out: list[LogEvent]) -> None:
        """Close events of writers that went quiet while others kept writing."""
        self._next_check = self._count + 16
        for block in [b for b in self._blocks.values() if self._count - b.last_seen > QUIET_LINES]:
            out.append(self._close(block, truncated=block.state in tb.OPEN_STATES))
        for key in [k for k, w in self._watch.items() if self._count - w.count > NCCL_WINDOW]:
            out.append(self._watch_event(self._watch.pop(key)))
            self._emitted_watch[key] = self._count
        for key in [k for k, r in self._ray.items() if self._count - r.count > NCCL_WINDOW]:
            out.append(self._ray_event(self._ray.pop(key)))
        if len(self._emitted_watch) > 256:
            self._emitted_watch = {k: c for k, c in self._emitted_watch.items()
                                   if self._count - c < NCCL_REPEAT_LINES}

    def _finish(self, block: tb.Block, truncated: bool) -> LogEvent:
        fields: list = []
        kind, summary, when = "traceback", "", None
        if block.report is not None:
            kind = "child-failed"
            report = dict(block.report.fields())
            fields += [(k, v) for k, v in report.items() if k != "complete"]
            summary = distfail.child_summary(report)
            parts = distfail.child_time(report.get("failure_time"))
            when = _mktime(parts) if parts else None
        else:
            when = _line_time(block.first_text)
            for _, _, line in block.excs:
                found = self._classify(line)
                if found:
                    kind, extra, summary = found
                    fields += extra
                    break
            if kind == "traceback" and block.excs and _ray_exception(block.excs[-1][0]):
                ray = oom.parse_ray_oom(block.text())
                if ray:
                    kind, summary = "ray-oom", oom.ray_oom_summary(dict(ray))
                    fields += ray
        if block.excs:
            fields += [("exc_type", block.excs[-1][0]), ("exc_message", block.excs[-1][1])]
        fields += [("last_frame", block.last_frame), ("frames", block.frames)]
        if block.chain > 1 and block.excs:
            first = block.excs[0]
            fields += [("chained", block.chain), ("cause_type", first[0]), ("cause_message", first[1])]
        if block.rank is not None:
            fields.append(("log_rank", block.rank))
        if truncated:
            fields.append(("truncated", True))
        if not summary:
            summary = tb.summary(block, truncated)
        elif truncated:
            summary += " (cut off)"
        return LogEvent(kind=kind, line_no=block.start, end_line=block.end, arrival=block.arrival,
                        summary=summary[:300], text=block.text(), time=when, fields=tuple(fields))

    @staticmethod
    def _classify(line: str) -> tuple[str, list, str] | None:
        """The specific kind an exception line stands for, with its fields and summary."""
        if "out of memory" in line:
            cuda = oom.parse_cuda_oom(line)
            if cuda:
                return "cuda-oom", cuda, oom.cuda_oom_summary(dict(cuda))
        if "emory" in line:
            engine = oom.parse_engine_oom(line)
            if engine:
                return "engine-oom", engine, oom.engine_oom_summary(dict(engine))
        if distfail.WATCHDOG_MARK in line:
            watch = distfail.parse_watchdog(line)
            if watch:
                return "nccl-timeout", watch + [("timed_out", True)], distfail.watchdog_summary(dict(watch))
        return None

    # -- one-line events -----------------------------------------------------------------------------
    def _idle(self, text: str, body: str, line_no: int, arrival: float, key: tuple,
              rank: int | None, out: list[LogEvent]) -> None:
        """A line whose writer has no pending event: cheap substring checks before any regex."""
        at = body.find(tb.TRACEBACK_MARK)
        if at >= 0:
            block = self._open(key, body, line_no, arrival, rank, tb.FRAMES, out)
            if body[:at].strip():
                block.lead = body[:at]
            return
        if distfail.CHILD_MARK in body and tb.CHILD_LINE.match(body):
            # The report without its traceback header (the header was cut, or never printed).
            block = self._open(key, body, line_no, arrival, rank, tb.CHILD, out)
            exc = tb.exception_line(body.strip())
            if exc:
                block.exception(exc, body)
            return
        if "emory" in body and oom.is_ray_oom_start(body):
            self._ray_open(key, text, body, line_no, arrival, out)
            return
        if "Training" in body:
            event = self._banner(text, body, line_no, arrival)
            if event is not None:
                out.append(event)
                return
        if "emory" in body and ("out of memory" in body or any(m in body for m in oom.ENGINE_MARKERS)):
            found = self._classify(body)
            if found and found[0] == "cuda-oom":
                parsed = dict(found[1])
                # A line that only mentions OOM ("to avoid CUDA out of memory ...") is not one.
                if parsed.get("format") == "unknown" and parsed.get("exception") is None:
                    found = None
            if found and found[0] != "nccl-timeout":
                out.append(self._single(found[0], found[1], found[2], text, body, line_no, arrival))
                return
        if ("atchdog" in body or "Timeout at NCCL work:" in body) and \
                self._nccl(text, body, line_no, arrival, rank, out):
            return
        for pattern, regex in self._custom:
            m = regex.search(body)
            if m:
                groups = [(k, v[:200]) for k, v in m.groupdict().items() if v is not None][:8]
                fields = [("framework", "custom"), ("pattern", pattern), *groups]
                out.append(self._single("completion", fields, f"training finished: {body.strip()[:200]}",
                                        text, body, line_no, arrival))
                return

    # -- Ray's OOM killer -------------------------------------------------------------------------------
    @staticmethod
    def _ray_detail(block: tb.Block, own: str) -> bool:
        """A line of Ray's OOM report after the exception line that carries it."""
        if block.state not in (tb.AFTER_EXC, tb.AFTER_BLANK) or not block.excs \
                or block.cont >= tb.MAX_CONTINUATION or not own.strip():
            return False
        if not _ray_exception(block.excs[-1][0]):
            return False
        last = block.tail[-1] if block.tail else (block.head[-1] if block.head else "")
        return oom.is_ray_detail(own, after_table=oom.is_ray_table_line(last))

    def _ray_open(self, key: tuple, text: str, body: str, line_no: int, arrival: float,
                  out: list[LogEvent]) -> None:
        if len(self._ray) >= MAX_SOURCES:
            oldest = min(self._ray, key=lambda k: self._ray[k].count)
            out.append(self._ray_event(self._ray.pop(oldest)))
        self._ray[key] = _RayReport(line_no, arrival, body, _line_time(text), self._count)

    def _ray_takes(self, report: _RayReport, body: str, line_no: int) -> bool:
        """Whether the writer's next line belongs to its pending Ray OOM report."""
        if not oom.ray_line_body(body):  # blank, or Ray's bare "(raylet)" line
            if report.blanks >= 2:
                return False
            report.blanks += 1
            return True
        if report.detail and oom.is_ray_new_report(body):
            return False  # a second kill: its own event
        if oom.is_ray_detail(body, after_table=report.table):
            report.add(body, line_no, self._count)
            return True
        return False

    @staticmethod
    def _ray_event(report: _RayReport) -> LogEvent:
        text = "\n".join(report.lines)
        fields = oom.parse_ray_oom(text) or [("form", "detail")]
        return LogEvent(kind="ray-oom", line_no=report.start, end_line=report.end,
                        arrival=report.arrival, summary=oom.ray_oom_summary(dict(fields))[:300],
                        text=text, time=report.time, fields=tuple(fields))

    @staticmethod
    def _single(kind: str, fields: list, summary: str, text: str, body: str, line_no: int,
                arrival: float) -> LogEvent:
        return LogEvent(kind=kind, line_no=line_no, end_line=line_no, arrival=arrival,
                        summary=summary[:300], text=body[:tb.MAX_STORED_LINE], time=_line_time(text),
                        fields=tuple(fields))

    def _banner(self, text: str, body: str, line_no: int, arrival: float) -> LogEvent | None:
        """End-of-training banners (kind completion) and AReaL's failure line (kind failure)."""
        if "Training completes!" in body:  # AReaL StatsLogger.close(), rank 0, even after 0 steps
            m = _AREAL_ELAPSED.search(body)
            elapsed = float(m.group(1)) if m else None
            summary = "AReaL training completes" + (f" after {elapsed:.0f} s" if elapsed is not None else "")
            return self._single("completion", [("framework", "areal"), ("elapsed", elapsed)],
                                summary, text, body, line_no, arrival)
        if "Training completed. Do not forget to share your model" in body:
            return self._single("completion", [("framework", "hf")], "HF Trainer training completed",
                                text, body, line_no, arrival)
        if body.rstrip().endswith("Training completed"):
            return self._single("completion", [("framework", "torchtitan")],
                                "torchtitan training completed", text, body, line_no, arrival)
        at = body.find(_FAILED)
        if at >= 0:  # AReaL RLTrainer.__exit__; the traceback follows on the next lines
            message = body[at + len(_FAILED):].strip()[:500]
            framework = "areal" if ("RLTrainer" in body or "(AReaL)" in body) else None
            return self._single("failure", [("framework", framework), ("exc_message", message)],
                                f"training failed: {message[:200]}", text, body, line_no, arrival)
        return None

    def _nccl(self, text: str, body: str, line_no: int, arrival: float, rank: int | None,
              out: list[LogEvent]) -> bool:
        """Watchdog timeout lines wait (NCCL_WINDOW lines) for their PG-status companion."""
        if distfail.WATCHDOG_MARK in body:
            fields = distfail.parse_watchdog(body)
            if fields is None:
                return False
            if rank is not None and dict(fields)["rank"] is None:
                fields = [("rank", rank) if k == "rank" else (k, v) for k, v in fields]
            parsed = dict(fields)
            key = (parsed["rank"], parsed["seq"])
            pending = self._watch.get(key)
            if pending is not None:  # the same timeout again (the C++ "what():" repeat)
                if len(pending.lines) < 8:
                    pending.lines.append(body[:tb.MAX_STORED_LINE])
                pending.end = line_no
                return True
            if self._count - self._emitted_watch.get(key, -NCCL_REPEAT_LINES) < NCCL_REPEAT_LINES:
                return True  # already reported
            self._watch[key] = _Watch(fields, line_no, arrival, body, _line_time(text), self._count)
            if len(self._watch) > 256:
                first = min(self._watch, key=lambda k: self._watch[k].count)
                out.append(self._watch_event(self._watch.pop(first)))
            return True
        if not distfail.is_companion(body):
            return False
        comp = distfail.parse_companion(body)
        if comp is None:
            return False
        c = dict(comp)
        if c["rank"] is None:
            c["rank"] = rank
        match = next((k for k in self._watch if k[1] == c["seq"] and (
            k[0] == c["rank"] or k[0] is None or c["rank"] is None)), None)
        if match is None:  # a PG-status line alone: a failure the watchdog saw, maybe not a timeout
            fields = [(k, c[k]) for k in ("rank", "pg", "seq", "last_enqueued", "last_completed")]
            fields.append(("timed_out", None))
            summary = distfail.watchdog_summary(c).replace("timeout", "failure", 1)
            out.append(self._single("nccl-timeout", fields, summary, text, body, line_no, arrival))
            return True
        watch = self._watch.pop(match)
        self._emitted_watch[match] = self._count
        watch.lines.append(body[:tb.MAX_STORED_LINE])
        watch.end = line_no
        if dict(watch.fields).get("pg") is None and c["pg"] is not None:
            watch.fields = [(k, c["pg"] if k == "pg" else v) for k, v in watch.fields]
        watch.fields += [("last_enqueued", c["last_enqueued"]), ("last_completed", c["last_completed"])]
        out.append(self._watch_event(watch))
        return True

    @staticmethod
    def _watch_event(watch: _Watch) -> LogEvent:
        fields = [*watch.fields, ("timed_out", True)]
        return LogEvent(kind="nccl-timeout", line_no=watch.start, end_line=watch.end,
                        arrival=watch.arrival, summary=distfail.watchdog_summary(dict(fields))[:300],
                        text="\n".join(watch.lines), time=watch.time, fields=tuple(fields))
