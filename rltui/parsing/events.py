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

from rltui.model import LogEvent, replace
from rltui.parsing import distfail, noise, oom
from rltui.parsing import tracebacks as tb
from rltui.parsing.lazyre import LazyPattern

CUSTOM_SCAN = 4096  # chars of a line a user's completion pattern sees (docs/configuration.md)
MAX_LINE = 16384  # chars of one line looked at; a 1 MB garbage line costs no more than this
MAX_SOURCES = 32  # writers with a pending multi-line event at once
QUIET_LINES = 200  # lines of other writers after which a writer's pending event is closed
NCCL_WINDOW = 64  # lines within which the watchdog's PG-status line joins its timeout line
NCCL_REPEAT_LINES = 500  # the same (rank, seq) timeout again within this many lines is a repeat
RAY_LINES = 40  # lines kept of one Ray OOM report outside a traceback (the table has about 12)
WRAP_LINES = 4  # continuation lines joined to a message that a terminal or a paste hard-wrapped
WRAP_CHARS = 8192  # and at most this many chars of it

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
# Ray prints "(Actor pid=N[, ip=...]) " before each line; torchrun "[rankN]:" or "[defaultN]:".
_PREFIX = re.compile(r"(\((?:[\w.:-]+ )?pid=\d{1,18}(?:, ip=[^)]*)?\) )?(\[(?:rank|default)(\d{1,18})\]:)?")
_RAY_REPEAT = re.compile(r"[ \t]{0,64}\[repeated \d{1,18}x across cluster\]\s*$")
_AREAL_ELAPSED = LazyPattern(r"Training completes! Total time elapsed (\d{1,18}(?:\.\d{1,12})?)")
_TIME_ISO = LazyPattern(r"(\d{4})-(\d\d)-(\d\d)[ T_](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,18}))?")
_TIME_AREAL = LazyPattern(r"(\d{4})(\d\d)(\d\d)-(\d\d):(\d\d):(\d\d)(?:\.(\d{1,18}))?")
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


class _Wrap:
    """A one-line message cut by a hard wrap, waiting for the rest of its text."""

    __slots__ = ("arrival", "body", "end", "parts", "rank", "start", "text")

    def __init__(self, text: str, body: str, line_no: int, arrival: float, rank: int | None) -> None:
        self.text, self.body = text, body
        self.start = self.end = line_no
        self.arrival = arrival
        self.rank = rank
        self.parts = 1

    def join(self, text: str, body: str, line_no: int) -> None:
        # No separator: a wrap at a fixed column cuts words ("colle" / "ctive"); one at a space
        # keeps the space on the first line ("timeout: " / "WorkNCCL(").
        self.text = (self.text + text)[:WRAP_CHARS]
        self.body = (self.body + body)[:WRAP_CHARS]
        self.end = line_no
        self.parts += 1


def _wrap_open(body: str) -> bool:
    """A message known to be one line whose end is missing: the rest is on the next line(s)."""
    if "Watchdog caught" in body or "watchdog thread terminated" in body:
        return "before timing out" not in body
    if "(either an error or timeout) detected" in body:
        return "last completed" not in body
    if "killed due to memory pressure (OOM)" in body:  # Ray's summary ends "-ip <addr>`"
        return not body.rstrip().endswith("`")
    return False


def _wrap_continues(body: str) -> bool:
    """A line that can be the rest of a hard-wrapped message (not a new prefixed log line)."""
    if not body.strip() or body[:1] in (" ", "\t", "[", "("):
        return False
    return not (_wrap_open(body) or "Traceback" in body)


def _quotes_source(body: str) -> bool:
    """A traceback's source line that quotes an error text: `raise ValueError("No available ...`."""
    at = body.find("raise ")
    return at >= 0 and (body.find('("', at) >= 0 or body.find("('", at) >= 0)


def _ray_exception(exc_type: str) -> bool:
    """An exception class that can carry Ray's OOM-killer report."""
    return "ray." in exc_type or "RayTaskError" in exc_type or exc_type.endswith(
        ("OutOfMemoryError", "ActorDiedError", "WorkerCrashedError"))


# Fields of a child-failed event read from the agent's line alone (no report).
_AGENT_ONLY = {"name": None, "rank": None, "local_rank": None, "exitcode": None, "pid": None,
               "signal": None, "host": None, "failure_time": None, "error_file": None, "error": None,
               "other_ranks": "", "failures": 1, "possible_host_oom": False}


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
        self._companions: dict[tuple, int] = {}  # (rank, seq) -> line count its PG-status line joined
        self._ray: dict[tuple, _RayReport] = {}  # writer -> Ray OOM report outside a traceback
        self._wraps: dict[tuple, _Wrap] = {}  # writer -> hard-wrapped message awaiting its rest
        self._hb: dict[tuple, _Watch] = {}  # (rank, pg) -> heartbeat-monitor line awaiting "stuck"
        self._agent: dict[tuple, _Watch] = {}  # writer -> elastic agent "failed" line awaiting its report
        self._alloc_seen: dict[object, int] = {}  # gpu -> line count of its last allocator warning
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
        if self._blocks or self._watch or self._ray or self._hb or self._agent:
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
        key = (source, prefix)
        if self._wraps and self._wrapped(key, text, body, line_no, out):
            return out
        if _wrap_open(body):
            if len(self._wraps) >= MAX_SOURCES:
                self._release(self._wraps.pop(next(iter(self._wraps))), out)
            self._wraps[key] = _Wrap(text, body, line_no, arrival, self._rank(prefix_rank, source))
            return out
        # The common case: no pending event and nothing that starts one. Substring tests run at
        # C speed; keep this chain short and free of regexes and calls.
        if not (self._custom or "Traceback" in body or "Training" in body or "emory" in body
                or "atchdog" in body or "ChildFailedError" in body or "NCCL work:" in body
                or "eartbeat" in body or "(exitcode:" in body or "RayTaskError(" in body):
            return out
        self._idle(text, body, line_no, arrival, key, self._rank(prefix_rank, source), out)
        return out

    @staticmethod
    def _rank(prefix_rank: int | None, source: object) -> int | None:
        if prefix_rank is not None:
            return prefix_rank
        first = source[0] if isinstance(source, tuple) and source else source
        return first if isinstance(first, int) and not isinstance(first, bool) else None

    # -- hard-wrapped messages -------------------------------------------------------------------------
    def _wrapped(self, key: tuple, text: str, body: str, line_no: int, out: list[LogEvent]) -> bool:
        """Offer a line to its writer's held message; True when the line was joined to it."""
        held = self._wraps.pop(key, None)
        if held is None:
            # The rest of a wrapped line carries no prefix ("(raylet) ..." wraps to "node (ID: ..."),
            # so it arrives as another writer; with one message held it can only be its rest.
            if len(self._wraps) != 1 or key[0] not in (None, (None, None)) or key[1] \
                    or not _wrap_continues(body):
                return False
            key = next(iter(self._wraps))
            held = self._wraps.pop(key)
        if held.parts <= WRAP_LINES and _wrap_continues(body):
            held.join(text, body, line_no)
            if _wrap_open(held.body) and held.parts <= WRAP_LINES:
                self._wraps[key] = held
            else:
                self._release(held, out, key)
            return True
        self._release(held, out, key)
        return False

    def _release(self, held: _Wrap, out: list[LogEvent], key: tuple | None = None) -> None:
        """Read a held message as one line, its events spanning the lines it was joined from."""
        first = len(out)
        self._idle(held.text, held.body, held.start, held.arrival, key if key is not None else (None, ""),
                   held.rank, out)
        for i in range(first, len(out)):
            if out[i].end_line == held.start:
                out[i] = replace(out[i], end_line=held.end)
        for pending in (*self._watch.values(), *self._ray.values()):
            if pending.end == held.start:
                pending.end = held.end

    def flush(self) -> list[LogEvent]:
        """Close every pending event (end of input, or the file went quiet)."""
        out: list[LogEvent] = []
        for key in list(self._wraps):
            self._release(self._wraps.pop(key), out, key)
        out += [self._finish(b, truncated=b.state in tb.OPEN_STATES)
                for b in sorted(self._blocks.values(), key=lambda b: b.start)]
        self._blocks.clear()
        out += [self._hb_event(w) for w in sorted(self._hb.values(), key=lambda w: w.start)]
        self._hb.clear()
        out += [self._agent_event(a) for a in sorted(self._agent.values(), key=lambda a: a.start)]
        self._agent.clear()
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
        held = (*self._watch.values(), *self._ray.values(), *self._hb.values(), *self._agent.values())
        return (sum(b.size() for b in self._blocks.values())
                + sum(sum(len(x) for x in w.lines) for w in held)
                + sum(len(w.body) + len(w.text) for w in self._wraps.values()))

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
        for key in [k for k, w in self._hb.items() if self._count - w.count > NCCL_WINDOW]:
            out.append(self._hb_event(self._hb.pop(key)))
        # An agent line waits while its writer's traceback (torchrun's own) is still open.
        for key in [k for k, a in self._agent.items()
                    if k not in self._blocks and self._count - a.count > NCCL_WINDOW]:
            out.append(self._agent_event(self._agent.pop(key)))
        if len(self._alloc_seen) > 64:
            self._alloc_seen.clear()
        if len(self._companions) > 256:
            self._companions = {k: c for k, c in self._companions.items()
                                if self._count - c < NCCL_REPEAT_LINES}
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
                    if kind == "engine-oom" and oom.has_continuation(line):
                        # SGLang prints the pool's numbers on the lines after its exception line.
                        extra = oom.parse_engine_oom(block.text()) or extra
                        summary = oom.engine_oom_summary(dict(extra))
                    fields += extra
                    break
            if kind == "traceback" and block.excs and _ray_exception(block.excs[-1][0]):
                ray = oom.parse_ray_oom(block.text())
                if ray:
                    kind, summary = "ray-oom", oom.ray_oom_summary(dict(ray))
                    fields += ray
            task = next((line for t, _, line in reversed(block.excs) if oom.RAY_TASK_OOM in t), None)
            found_task = oom.parse_ray_task_oom(task) if kind == "traceback" and task else None
            if found_task and not truncated:
                kind, summary = "cuda-oom", oom.cuda_oom_summary(dict(found_task))
                fields += found_task
            elif found_task:
                # Cut inside the remote traceback: the worker's CUDA message may still follow in
                # the full log, so the kind stays traceback; the task names the likely CUDA OOM.
                fields += [(k, v) for k, v in found_task if k in ("ray_task", "task_pid", "node_ip")]
                fields.append(("likely_cuda_oom", True))
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
        event = LogEvent(kind=kind, line_no=block.start, end_line=block.end, arrival=block.arrival,
                         summary=summary[:300], text=block.text(), time=when, fields=tuple(fields))
        agent = self._agent.get(block.key)
        if agent is not None and (kind == "child-failed" or (
                kind == "traceback" and not block.excs and "torch/distributed/" in (block.last_frame or ""))):
            del self._agent[block.key]
            return self._merge_agent(agent, event)
        return event

    # -- torchrun's elastic agent ------------------------------------------------------------------------
    @staticmethod
    def _merge_agent(agent: _Watch, event: LogEvent) -> LogEvent:
        """The agent's "failed (exitcode ...)" line and the report (or torchrun's traceback, cut
        before its ChildFailedError) that follows it are one failure: one child-failed event."""
        fields = dict(event.fields)
        if event.kind != "child-failed":
            fields = {**_AGENT_ONLY, **fields}
        for name, value in agent.fields:
            if fields.get(name) is None:
                fields[name] = value
        fields["possible_host_oom"] = bool(fields.get("possible_host_oom")) or (
            dict(agent.fields)["possible_host_oom"] and not fields.get("error"))
        # The event keeps the report's line range (what diagnosis counts from); the agent's line
        # is named by agent_line_no.
        fields["agent_line"] = True
        fields["agent_line_no"] = agent.start
        summary = distfail.child_summary(fields) + (" (cut off)" if fields.get("truncated") else "")
        return replace(event, kind="child-failed", summary=summary[:300],
                                   time=event.time if event.time is not None else agent.time,
                                   fields=tuple(fields.items()))

    @staticmethod
    def _agent_event(agent: _Watch) -> LogEvent:
        fields = {**_AGENT_ONLY, **dict(agent.fields), "agent_line": True, "agent_line_no": agent.start}
        return LogEvent(kind="child-failed", line_no=agent.start, end_line=agent.end,
                        arrival=agent.arrival, summary=distfail.child_summary(fields)[:300],
                        text="\n".join(agent.lines), time=agent.time, fields=tuple(fields.items()))

    # -- NCCL heartbeat monitor ----------------------------------------------------------------------------
    def _heartbeat(self, text: str, body: str, line_no: int, arrival: float, rank: int | None,
                   out: list[LogEvent]) -> bool:
        """"Heartbeat monitor timed out!" waits for its "watchdog got stuck" line (same rank, PG)."""
        fields = distfail.parse_heartbeat(body)
        if fields is None:
            return False
        found = dict(fields)
        if found["rank"] is None and rank is not None:
            found["rank"] = rank
        key = (found["rank"], found["pg"])
        pending = self._hb.pop(key, None)
        if found["form"] == "monitor-timeout":
            if pending is not None:  # printed again: keep the first
                self._hb[key] = pending
                return True
            self._hb[key] = _Watch(list(found.items()), line_no, arrival, body, _line_time(text), self._count)
            return True
        if pending is None:
            pending = _Watch(list(found.items()), line_no, arrival, body, _line_time(text), self._count)
        else:
            before = dict(pending.fields)
            if found["work_items"] is None:
                found["work_items"] = before["work_items"]
            pending.fields = list(found.items())
            pending.lines.append(body[:tb.MAX_STORED_LINE])
            pending.end = line_no
        out.append(self._hb_event(pending))
        return True

    @staticmethod
    def _hb_event(watch: _Watch) -> LogEvent:
        fields = dict(watch.fields)
        return LogEvent(kind="nccl-heartbeat", line_no=watch.start, end_line=watch.end,
                        arrival=watch.arrival, summary=distfail.heartbeat_summary(fields)[:300],
                        text="\n".join(watch.lines), time=watch.time, fields=tuple(watch.fields))

    @staticmethod
    def _classify(line: str) -> tuple[str, list, str] | None:
        """The specific kind an exception line stands for, with its fields and summary."""
        if oom.ALLOC_WARNING in line:
            warning = oom.parse_alloc_warning(line)
            if warning:
                return "cuda-oom", warning, oom.cuda_oom_summary(dict(warning))
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
        if body[:1].isalpha() and ("RayTaskError(" in body or oom.has_continuation(body)):
            # An exception line without its "Traceback" header (cut from a paste, or SGLang's
            # message printed alone) whose event goes on below it: Ray's remote traceback, or
            # SGLang's pool numbers.
            exc = tb.exception_line(body.strip())
            if exc:
                block = self._open(key, body, line_no, arrival, rank, tb.AFTER_EXC, out)
                block.exception(exc, body)
                return
        if "(exitcode:" in body:
            agent = distfail.parse_agent_failure(body)
            if agent is not None:
                if key in self._agent:
                    out.append(self._agent_event(self._agent.pop(key)))
                self._agent[key] = _Watch(agent, line_no, arrival, body, _line_time(text), self._count)
                return
        if ("eartbeat" in body or "got stuck" in body) and distfail.is_heartbeat(body) and \
                self._heartbeat(text, body, line_no, arrival, rank, out):
            return
        if "Training" in body:
            event = self._banner(text, body, line_no, arrival)
            if event is not None:
                out.append(event)
                return
        if "emory" in body and ("out of memory" in body or oom.ALLOC_WARNING in body
                                or any(m in body for m in oom.ENGINE_MARKERS)) and not _quotes_source(body):
            found = self._classify(body)
            if found and found[0] == "cuda-oom":
                parsed = dict(found[1])
                # A line that only mentions OOM ("to avoid CUDA out of memory ...") is not one.
                if parsed.get("format") == "unknown" and parsed.get("exception") is None:
                    found = None
            if found and dict(found[1]).get("format") == "alloc-warning":
                # vLLM can print it thousands of times: one event per GPU per NCCL_REPEAT_LINES lines.
                gpu = dict(found[1]).get("gpu")
                if self._count - self._alloc_seen.get(gpu, -NCCL_REPEAT_LINES) < NCCL_REPEAT_LINES:
                    return
                self._alloc_seen[gpu] = self._count
            if found and found[0] != "nccl-timeout":
                out.append(self._single(found[0], found[1], found[2], text, body, line_no, arrival))
                return
        if ("atchdog" in body or "Timeout at NCCL work:" in body) and \
                self._nccl(text, body, line_no, arrival, rank, out):
            return
        for pattern, regex in self._custom:
            m = regex.search(body[:CUSTOM_SCAN])  # a user's regex: bounded as in steps.py
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
                if parsed.get("terminated"):
                    pending.fields = [(k, True if k == "terminated" else v) for k, v in pending.fields]
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
        if match is None and self._count - self._companions.get(
                (c["rank"], c["seq"]), -NCCL_REPEAT_LINES) < NCCL_REPEAT_LINES:
            return True  # a second PG-status line of a timeout already reported (2.5 prints two)
        if match is None:  # a PG-status line alone: a failure the watchdog saw, maybe not a timeout
            fields = [(k, c[k]) for k in ("rank", "pg", "seq", "last_enqueued", "last_completed")]
            fields.append(("timed_out", None))
            summary = distfail.watchdog_summary(c).replace("timeout", "failure", 1)
            out.append(self._single("nccl-timeout", fields, summary, text, body, line_no, arrival))
            return True
        watch = self._watch.pop(match)
        self._emitted_watch[match] = self._count
        self._companions[match] = self._count
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
