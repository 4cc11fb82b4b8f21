"""Line-by-line grouping of Python tracebacks, bounded in memory whatever their length.

A ``Block`` is one multi-line event under construction; ``offer`` decides whether the next line
of the same writer belongs to it. The shapes handled (CPython's traceback printer):

    Traceback (most recent call last):          <- opens the block (FRAMES)
      File "x.py", line 3, in f                 <- indented lines are frames and code
        g()
    ValueError: bad                             <- exception line (AFTER_EXC)
    <blank>                                     <- maybe a chain follows (AFTER_BLANK)
    During handling of the above exception, another exception occurred:   (CHAIN)
    <blank>
    Traceback (most recent call last):          <- back to FRAMES, same block

Also: torch's multi-line CUDA/NCCL messages after the exception line, Ray's remote traceback
inside ``RayTaskError(...)`` (indented frames right after the exception line), exception groups
(``| ValueError: x``), and torchrun's ChildFailedError report (CHILD, read by distfail).
"""

from __future__ import annotations

from collections import deque

from rltui.parsing import distfail, oom
from rltui.parsing.lazyre import LazyPattern

MAX_STORED_LINE = 2048  # chars of one line kept in an event's text
HEAD_LINES = 120  # a long traceback keeps its first lines (where it came from) ...
TAIL_LINES = 60  # ... and its last ones (what was raised), and counts the rest
MAX_TEXT = 64 * 1024  # chars of one event's text
MAX_BLOCK_LINES = 20000  # a "traceback" that never ends is closed as cut
MAX_CONTINUATION = 40  # lines of a multi-line exception message after the exception line

FRAMES, AFTER_EXC, AFTER_BLANK, CHAIN, CHILD = range(5)
OPEN_STATES = (FRAMES, CHAIN, CHILD)  # closing in these means the event was cut off

# What offer() says about a line.
TAKE = 0  # the line belongs to the block, which stays open
DONE = 1  # the line belongs to the block and completes it
CLOSE = 2  # the line does not belong; the block is complete
CUT = 3  # the line does not belong; the block was cut off (truncated)

TRACEBACK_MARK = "Traceback (most recent call last)"
_EXC = LazyPattern(r"([A-Za-z_][\w.]*)(\([\w.]*\))?(?::(?: ?(.*))?)?$")
_EXC_SUFFIXES = ("Error", "Exception", "Interrupt", "Exit", "Warning", "Iteration", "Failed",
                 "Failure", "Timeout", "Abort", "Cancelled", "Fault", "Killed", "Group")
_FRAME = LazyPattern(r'\s*File "([^"]*)", line (\d{1,18})(?:, in (.*))?')
_CHAIN_MARKS = ("During handling of the above exception", "The above exception was the direct cause")
# Multi-line exception messages that torch and NCCL print after the exception line.
_CONTINUATIONS = ("CUDA kernel errors might be", "For debugging consider passing", "Compile with `TORCH_USE",
                  "Exception raised from", "frame #", "Last error:", "ncclUnhandled", "ncclSystem",
                  "ncclInternal", "ncclInvalid", "ncclRemote", "Cuda failure", "Device-side assertion",
                  *oom.CONTINUATION_PREFIXES)
CHILD_LINE = LazyPattern(r"\s*[\w.]*ChildFailedError:")


def exception_line(body: str) -> tuple[str, str] | None:
    """("torch.OutOfMemoryError", "CUDA out of ...") when ``body`` reads like an exception line.

    The class name must look like one (dotted, an exception-ish suffix, or CamelCase), so a log
    line such as "INFO: ..." or "Loading: ..." arriving in a traceback's place is not taken.
    """
    m = _EXC.match(body)
    if not m:
        return None
    name = m.group(1)
    last = name.rsplit(".", 1)[-1]
    if not last[:1].isupper() or not any(c.islower() for c in last):
        return None
    if "." not in name and not last.endswith(_EXC_SUFFIXES) and sum(c.isupper() for c in last) < 2:
        return None
    return name + (m.group(2) or ""), (m.group(3) or "").strip()


class Block:
    """A multi-line event under construction."""

    __slots__ = ("arrival", "blanks", "chain", "cont", "dropped", "end", "excs", "first_text",
                 "frames", "has_exc", "head", "head_chars", "key", "last_frame", "last_seen",
                 "lead", "lines", "rank", "report", "start", "state", "tail")

    def __init__(self, key: object, line_no: int, arrival: float, rank: int | None,
                 first_text: str, count: int, state: int = FRAMES) -> None:
        self.key = key
        self.state = state
        self.start = self.end = line_no
        self.arrival = arrival
        self.rank = rank
        self.first_text = first_text[:200]
        self.head: list[str] = []
        self.head_chars = 0
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.dropped = 0
        self.lines = 0
        self.blanks = 0  # blank lines seen but not yet known to belong to the event
        self.excs: list[tuple[str, str, str]] = []  # (type, message, line): first ones and latest
        self.frames = 0
        self.last_frame: str | None = None
        self.chain = 1
        self.has_exc = False  # the current traceback of the chain has its exception line
        self.cont = 0
        self.report = distfail.ChildReport() if state == CHILD else None
        self.last_seen = count
        self.lead = ""  # a log prefix repeated on every line of the traceback (vLLM, OpenRLHF)

    def add(self, line: str, line_no: int) -> None:
        for _ in range(self.blanks):
            self._store("")
        self.blanks = 0
        self._store(line[:MAX_STORED_LINE])
        self.end = line_no

    def _store(self, line: str) -> None:
        self.lines += 1
        if len(self.head) < HEAD_LINES and self.head_chars < MAX_TEXT // 2:
            self.head.append(line)
            self.head_chars += len(line) + 1
            return
        if len(self.tail) == self.tail.maxlen:
            self.dropped += 1
        self.tail.append(line)

    def exception(self, exc: tuple[str, str], line: str) -> None:
        entry = (exc[0], exc[1][:500], line[:4096])  # an OOM message is ~600 chars
        if len(self.excs) < 8:
            self.excs.append(entry)
        else:
            self.excs[-1] = entry  # keep the first ones (the cause) and the latest (the result)
        self.has_exc = True
        self.cont = 0

    def frame(self, line: str) -> None:
        self.frames += 1
        m = _FRAME.match(line)
        if m:
            where = f"{m.group(1)[-200:]}:{m.group(2)}"
            self.last_frame = f"{where} in {m.group(3).strip()[:100]}" if m.group(3) else where

    def text(self) -> str:
        lines = list(self.head)
        if self.dropped:
            lines.append(f"... {self.dropped} lines not kept ...")
        lines.extend(self.tail)
        text = "\n".join(lines)
        if len(text) > MAX_TEXT:
            half = MAX_TEXT // 2 - 40
            text = text[:half] + "\n... cut ...\n" + text[-half:]
        return text

    def size(self) -> int:
        """Characters held (text and exception lines), for the memory bound."""
        return (self.head_chars + sum(len(x) + 1 for x in self.tail)
                + sum(len(e[2]) for e in self.excs))


def offer(block: Block, body: str, line_no: int) -> int:
    """Offer the next line of the block's writer; TAKE, DONE, CLOSE or CUT (see above)."""
    if block.lines >= MAX_BLOCK_LINES:
        return CUT
    state = block.state
    indented = body[:1] in (" ", "\t")
    if state == CHILD:
        assert block.report is not None
        if not block.report.feed(body):
            return CLOSE if block.report.done else CUT
        block.add(body, line_no)
        return DONE if block.report.done else TAKE
    if state == FRAMES:
        if indented or not body:
            stripped = body.lstrip()
            if stripped.startswith("File "):
                block.frame(body)
            elif stripped.startswith("| "):  # a member of an exception group
                exc = exception_line(stripped[2:])
                if exc:
                    block.exception(exc, body)
            block.add(body, line_no)
            return TAKE
        exc = None if TRACEBACK_MARK in body else exception_line(body)
        if exc is None:  # a new traceback, or an unrelated line: this one stops here
            return CLOSE if block.has_exc else CUT
        block.exception(exc, body)
        block.add(body, line_no)
        if CHILD_LINE.match(body):
            block.state, block.report = CHILD, distfail.ChildReport()
        else:
            block.state = AFTER_EXC
        return TAKE
    if state == CHAIN:
        if not body.strip():
            block.add(body, line_no)
            return TAKE
        if TRACEBACK_MARK in body:
            block.state, block.chain, block.has_exc = FRAMES, block.chain + 1, False
            block.add(body, line_no)
            return TAKE
        return CUT  # the chain marker promised another traceback
    # AFTER_EXC or AFTER_BLANK: the exception is printed; the event may go on.
    if not body.strip():
        if block.blanks >= 2:
            return CLOSE
        block.blanks += 1  # kept only if the event goes on after it
        block.state = AFTER_BLANK
        return TAKE
    if body.startswith(_CHAIN_MARKS):
        block.add(body, line_no)
        block.state = CHAIN
        return TAKE
    if indented and state == AFTER_EXC and body.lstrip().startswith("File "):
        # Ray prints the remote traceback inside RayTaskError's message.
        block.state, block.has_exc = FRAMES, False
        block.frame(body)
        block.add(body, line_no)
        return TAKE
    if block.cont < MAX_CONTINUATION and (
            body.lstrip().startswith(_CONTINUATIONS) or (indented and state == AFTER_EXC)):
        block.cont += 1
        block.add(body, line_no)
        block.state = AFTER_EXC
        return TAKE
    return CLOSE


def summary(block: Block, truncated: bool) -> str:
    """"ValueError: bad at x.py:3 in f" — the exception, where it was raised, how it ended."""
    where = ""
    if block.last_frame:
        file_line, _, func = block.last_frame.partition(" in ")
        where = f" at {file_line.rsplit('/', 1)[-1]}" + (f" in {func}" if func else "")
    if not block.excs:
        return f"traceback cut off after {block.frames} frames{where}"
    exc_type, message, _ = block.excs[-1]
    text = (f"{exc_type}: {message}" if message else exc_type)[:200] + where
    if block.chain > 1 and block.excs[0][0] != exc_type:
        text += f" (while handling {block.excs[0][0]})"
    return text + (" (cut off)" if truncated else "")
