"""Stack dumps as text, as people find and paste them -> ProcessDump values. Pure.

Read here, in any mix within one text:

* ``py-spy dump`` (0.2 to 0.4): with or without the ``Process N:`` / ``Python v...`` header,
  thread ids in hex or decimal, threads with no name or no frames, any status markers, frames
  indented by spaces or (old py-spy) a tab, ``--native`` frames, ``--locals`` blocks;
* Python's faulthandler (``Thread 0x... (most recent call first):`` then ``  File "f", line N
  in func``): a fatal error, ``dump_traceback_later``, ``register(SIGUSR1)``;
* PyTorch's debug server (``=== Rank N: host:port ===`` sections), ``ray stack`` (``Stack
  dump for <ps line>``), SGLang's watchdog (``Pyspy dump for PID N:`` inside its log), and a
  shell loop's separators (``== pid N ==``, ``rank 3:``, ``echo`` lines);
* every line carrying a transport prefix (``rltui.parsing.transport``): interleaved writers
  (two Ray workers, eight torchrun ranks) are told apart by their prefix and read separately;
* lines a terminal hard-wrapped, and padding a copy added.

The rank of a dump comes from what the text gives: a prefix (``[rank3]:``, srun's task number,
OpenMPI's tag), a section or separator (``=== Rank 3``, ``rank 3:``), the process title
(``sglang::scheduler_DP1_TP3``, ``--local_rank=3``). The file name is the folder reader's
(``pyspy.read_folder_entries``). Problems are sentences naming the source and the line.
"""

from __future__ import annotations

import re
import sys

import msgspec

from rltui.model import ANONYMOUS_PID, CRASHED, ERROR, Frame, ProcessDump, ThreadStack, replace
from rltui.parsing import stackframes as sf
from rltui.parsing import stackhints as hints
from rltui.parsing.transport import Peeled, peel

MAX_LINES = 2_000_000  # lines of one text looked at; a dump of 1024 ranks is ~200k
MAX_DUMPS = hints.MAX_COUNT
MAX_CHANNELS = 4096  # distinct writers in one text
MAX_LINE = 64 * 1024  # a longer line is no stack line; only its head is looked at
_HINT_REACH = 4  # lines within which a separator's rank or pid applies to the next dump
_COMMAND_LINES = 16  # continuation lines of a "Process N: <command>" header
_COMMAND_CHARS = 4096

_PROCESS = re.compile(r"Process (\d{1,10}):(?: (.*))?$")
_PYTHON = re.compile(r"Python v(\S{1,40})(?: \((.*)\))?$")
# The id is missing where a person edited the header ("Thread (idle) \"MainThread\"").
_THREAD = re.compile(
    r'Thread (?:(0x[0-9A-Fa-f]{1,16}|\d{1,20}) )?\(([^()"]{0,40})\)(?::? "(.*)")?:?$')
_FH_THREAD = re.compile(
    r"(Current thread|Thread) (0x[0-9A-Fa-f]{1,16})(?: \[([^\]]{0,200})\])? "
    r"\(most recent call first\):$")
_FH_STACK = "Stack (most recent call first):"
# No comma before "in": that is a traceback's line ("File "x", line 3, in f"), outermost first.
_FH_FRAME = re.compile(r'File "(.*)", line (\d{1,9}) in (.*)$')

_intern = sys.intern
_MISS = object()
_FRAME_CACHE = 1 << 16  # distinct frame lines remembered per text (or folder)


def _status(raw: str) -> str:
    raw = raw.strip().lower().replace(" ", "")
    if raw in ("idle", "active", "active+gil", "idle+gil"):
        return raw
    if raw == "gil":
        return "active+gil"
    if raw == "active,gil":
        return "active+gil"
    return "unknown"


def _stack_line(rest: str) -> bool:
    """Whether a line, its prefixes taken off, is one of a stack dump's own lines (decides
    whether an ambiguous prefix such as srun's ``3: `` was one)."""
    s = rest.lstrip()
    if not s:
        return not rest  # "0: " alone: srun labels the dump's blank lines too
    if s.startswith(("Process ", "Python v", "Thread ", "Current thread ", "File \"",
                     _FH_STACK, "Pyspy dump for PID", "Stack dump for ", "Fatal Python error",
                     "Timeout (", "=== Rank ", "--- Rank ")):
        return True
    if rest[:1] in (" ", "\t"):
        return _frame(rest) is not None
    # a shell loop's separator ("== rank 3 (pid 12) ==") under srun's or pdsh's prefix
    return hints.is_separator(s)


def _frame(line: str) -> tuple[str, str, int] | None:
    """A py-spy frame line at any indentation (spaces or a tab), or None."""
    s = line.lstrip(" \t")
    indent = len(line) - len(s)
    if not indent or not s or s[-1:] != ")":
        return None
    return sf.split_frame("    " + s.rstrip())


class _Hint(msgspec.Struct):
    rank: int | None = None
    pid: int | None = None
    title: str = ""
    line: int = 0
    section: bool = False  # a debug-server section: applies to everything until the next one


class _Dump(msgspec.Struct):
    pid: int | None
    command: str = ""
    python: str = ""
    rank: int | None = None
    role: str = ""
    faulthandler: bool = False
    threads: list[ThreadStack] = msgspec.field(default_factory=list)
    tids: set[int] = msgspec.field(default_factory=set)
    sink: sf.FrameSink | None = None
    thread: tuple[int, str, str] | None = None
    expect_cmd: bool = False
    first_line: int = 0
    frame_indent: int = 0  # of this dump's first frame; deeper lines are --locals
    count: int = 1  # processes this dump stands for ("6 processes are in:")
    anonymous: bool = False  # a copy standing for one of those processes: no pid to infer
    fatal: str = ""  # "Fatal Python error: Aborted": the dump was printed as the process died

    def close_thread(self) -> None:
        if self.thread is not None and self.sink is not None and \
                len(self.threads) < sf.MAX_THREADS:
            tid, status, name = self.thread
            frames = self.sink.frames()
            if self.faulthandler and not name and frames and frames[-1].name == "<module>":
                name = "MainThread"  # faulthandler names no thread; the script's runs main
            self.threads.append(ThreadStack(tid, name, status, frames))
        self.thread, self.sink = None, None

    def open_thread(self, tid: int, status: str, name: str) -> None:
        self.close_thread()
        self.expect_cmd = False
        self.tids.add(tid)
        self.thread = (tid, status, name)
        self.sink = sf.FrameSink()

    def empty_thread(self) -> bool:
        return self.sink is not None and not self.sink.inner and not self.sink.outer


class _Channel(msgspec.Struct):
    """One writer's lines: its dump in progress, the dumps sharing its next frame block (a
    condensed paste), and the hint of its last separator."""

    key: tuple
    cur: _Dump | None = None
    shared: list[_Dump] = msgspec.field(default_factory=list)
    hint: _Hint | None = None
    count: tuple[int, int] | None = None  # (processes, line) of a "6 processes are in:" line
    fatal: tuple[str, int] | None = None  # (text, line) of a "Fatal Python error: ..." line
    pending: str = ""  # a line that may be the first half of a hard-wrapped frame
    pending_at: int = 0


class _Reader:
    def __init__(self, source: str, frames: dict[str, Frame | None] | None = None) -> None:
        self.source = source
        self.dumps: list[tuple[int, int, _Dump]] = []
        self.problems: list[str] = []
        self.unknown: list[tuple[int, str]] = []
        self.channels: dict[tuple, _Channel] = {}
        self.bare: _Channel | None = None  # the channel of lines that carry no prefix
        self.recent_rank: tuple[int, int] | None = None  # (rank, line) of a prefixed log line
        # frame line -> frame; shared by a folder's files (``pyspy.StackCache``)
        self.frames: dict[str, Frame | None] = frames if frames is not None else {}

    # -- dumps ---------------------------------------------------------------------------------

    def _keep(self, d: _Dump) -> None:
        d.close_thread()
        if d.faulthandler and d.threads and \
                not any(t.name == "MainThread" for t in d.threads):
            # faulthandler walks the interpreter's threads newest first, so the main thread,
            # the oldest, is the last one listed (named above when its stack reaches <module>);
            # a dump of one thread is most often the main thread's own
            last = d.threads[-1]
            if any(not f.native for f in last.frames):
                d.threads[-1] = ThreadStack(last.thread_id, "MainThread", last.status,
                                            last.frames)
        self.dumps.append((d.first_line, len(self.dumps), d))

    def finish(self, ch: _Channel) -> None:
        group = ch.shared + ([ch.cur] if ch.cur is not None else [])
        for d in group:
            self._keep(d)
        if group:
            extra = max(d.count for d in group) - len(group)
            last = group[-1]
            for _ in range(max(0, min(extra, MAX_DUMPS - len(self.dumps)))):
                copy = _Dump(pid=None, command=last.command, python=last.python,
                             role=last.role, faulthandler=last.faulthandler,
                             threads=list(last.threads), first_line=last.first_line,
                             anonymous=True)
                self.dumps.append((copy.first_line, len(self.dumps), copy))
        ch.shared, ch.cur = [], None

    def start(self, ch: _Channel, at: int, peeled: Peeled, pid: int | None = None,
              command: str = "", faulthandler: bool = False) -> _Dump:
        self.finish(ch)
        return self._new(ch, at, peeled, pid, command, faulthandler)

    def _new(self, ch: _Channel, at: int, peeled: Peeled, pid: int | None = None,
             command: str = "", faulthandler: bool = False) -> _Dump:
        d = _Dump(pid=pid, command=command, faulthandler=faulthandler, first_line=at)
        hint = ch.hint
        if hint is not None and (hint.section or at - hint.line <= _HINT_REACH) and \
                (hint.pid is None or pid is None or hint.pid == pid):
            d.rank = hint.rank
            d.pid = d.pid if d.pid is not None else hint.pid
            d.command = d.command or hint.title
            if not hint.section:
                ch.hint = None
        if ch.count is not None:
            if at - ch.count[1] <= _HINT_REACH:
                d.count = ch.count[0]
            ch.count = None
        if ch.fatal is not None:
            if faulthandler and at - ch.fatal[1] <= _HINT_REACH:
                d.fatal = ch.fatal[0]
            ch.fatal = None
        if d.pid is None and peeled.pid is not None:
            d.pid = peeled.pid
        d.role = peeled.actor or ""
        if peeled.rank is not None:
            d.rank = peeled.rank
        elif d.rank is None and faulthandler and self.recent_rank is not None and \
                at - self.recent_rank[1] <= 2 * _HINT_REACH:
            d.rank = self.recent_rank[0]  # "[rank1]:[E...] ... Fatal Python error" then frames
            self.recent_rank = None
        ch.cur = d
        return d

    # -- lines ---------------------------------------------------------------------------------

    def channel(self, peeled: Peeled) -> _Channel:
        key = peeled.channel
        if not key and self.bare is not None:
            return self.bare
        ch = self.channels.get(key)
        if ch is None:
            if len(self.channels) >= MAX_CHANNELS:
                key = ("overflow",)
                ch = self.channels.get(key)
            if ch is None:
                ch = self.channels[key] = _Channel(key)
        if not key:
            self.bare = ch
        return ch

    def feed(self, at: int, raw: str, last_cut: bool) -> None:
        peeled = peel(raw[:MAX_LINE], _stack_line)
        ch = self.channel(peeled)
        line = peeled.text
        if ch.pending and self._join(ch, line):
            return
        if not self._line(ch, at, line, peeled, last_cut):
            if line.strip():
                self.unknown.append((at, line))
            if peeled.rank is not None:
                self.recent_rank = (peeled.rank, at)

    def _join(self, ch: _Channel, line: str) -> bool:
        """A frame a terminal wrapped: the pending half and this line make one frame."""
        first, ch.pending = ch.pending, ""
        cur = ch.cur
        s = line.strip()
        if cur is not None and cur.sink is not None and s and not _stack_line(line):
            for glue in ("", " "):
                frame = _frame(first.rstrip() + glue + s)
                if frame is not None:
                    self._add(ch, frame)
                    return True
        self.unknown.append((ch.pending_at, first.strip()))
        return False

    def _add(self, ch: _Channel, frame: tuple[str, str, int] | Frame) -> None:
        if isinstance(frame, tuple):
            name, filename, num = frame
            filename = _intern(filename)
            frame = Frame(_intern(name), filename, num, native=sf.is_native(filename))
        ch.cur.sink.add(frame)
        for d in ch.shared:
            d.sink.add(frame)

    def _cut(self, ch: _Channel) -> None:
        """The text ends inside this thread's frames: its outermost frames are lost, so the
        thread ends in a marker saying so rather than in whatever frame came last (a
        ``shutdown`` called from the loop would read as a script already left)."""
        self._add(ch, Frame(sf.CUT, "", 0))

    def _py_spy_frame(self, s: str) -> Frame | None:
        """The frame of a stripped py-spy frame line, one object per distinct line: ranks
        running the same code print the same lines, and parsing each once keeps a dump of
        thousands of ranks near the cost of reading it."""
        f = self.frames.get(s, _MISS)
        if f is _MISS:
            parts = sf.split_frame("    " + s)
            if parts is None:
                f = None
            else:
                name, filename, num = parts
                filename = _intern(filename)
                f = Frame(_intern(name), filename, num, native=sf.is_native(filename))
            if len(self.frames) < _FRAME_CACHE:
                self.frames[s] = f
        return f

    def _line(self, ch: _Channel, at: int, line: str, peeled: Peeled, last_cut: bool) -> bool:
        s = line.strip()
        cur = ch.cur
        if not s:
            return True
        # Frames first: the common line of any dump.
        if cur is not None and cur.sink is not None:
            if cur.faulthandler:
                m = _FH_FRAME.match(s)
                if m:
                    if last_cut:
                        self._cut(ch)
                    else:
                        self._add(ch, (m.group(3).strip(), m.group(1), int(m.group(2))))
                    return True
                if s in ("<no Python frame>", "..."):
                    return True
                if last_cut and line[:1] in " \t":
                    self._cut(ch)  # an indented frame line cut before its function's name
                    return True
            else:
                indent = len(line) - len(line.lstrip(" \t"))
                if indent and cur.frame_indent and indent > cur.frame_indent + 2:
                    return True  # --locals blocks sit deeper than the frames
                if indent:
                    frame = self._py_spy_frame(s) if s[-1] == ")" else None
                else:
                    frame = _bare_frame(s)
                if frame is not None:
                    if last_cut:
                        self._cut(ch)
                    else:
                        cur.frame_indent = cur.frame_indent or indent
                        self._add(ch, frame)
                    return True
                if s in ("Arguments:", "Locals:"):
                    return True
                if indent:
                    if last_cut:
                        self._cut(ch)  # reported as a cut-off file
                        return True
                    if not s.startswith(("Thread ", "Process ")):
                        ch.pending, ch.pending_at = line, at  # maybe wrapped: joined later
                        return True
        if s.startswith("Process "):
            m = _PROCESS.match(s)
            if m:
                d = self.start(ch, at, peeled, pid=int(m.group(1)), command=m.group(2) or "")
                d.expect_cmd = True
                return True
        if s.startswith("Python v") and cur is not None and cur.sink is None:
            m = _PYTHON.match(s)
            if m:
                cur.python, cur.expect_cmd = m.group(1), False
                return True
        if s.startswith(("Thread ", "Current thread ")):
            if self._thread(ch, at, s, peeled):
                return True
        if s == _FH_STACK:
            cur = self.start(ch, at, peeled, faulthandler=True)
            cur.open_thread(0, "unknown", "")
            return True
        if cur is not None and cur.sink is None and cur.expect_cmd:
            # a command line spanning lines (python -c "..."); a few lines at most, or a stray
            # "Process N:" in a log would swallow the rest of it
            if cur.command.count("\n") < _COMMAND_LINES and len(cur.command) < _COMMAND_CHARS:
                cur.command += "\n" + line
                return True
            cur.expect_cmd = False
        if self._marker(ch, at, s, peeled):
            return True
        # Frames with no thread line at all (a stack copied from a dashboard or a terminal):
        # one process, one thread, nothing known of either.
        if cur is None or cur.sink is None:
            m = _FH_FRAME.match(s)
            if m:
                cur = self.start(ch, at, peeled, faulthandler=True)
                cur.open_thread(0, "unknown", "")
                self._add(ch, (m.group(3).strip(), m.group(1), int(m.group(2))))
                return True
            indented = _frame(line)
            frame = indented or _bare_frame(s)
            if frame is not None and (_looks_python(frame) if indented is None
                                      else _filey(frame[1])):
                cur = self.start(ch, at, peeled)
                cur.open_thread(0, "unknown", "")
                self._add(ch, frame)
                return True
        return False

    def _thread(self, ch: _Channel, at: int, s: str, peeled: Peeled) -> bool:
        cur = ch.cur
        m = _FH_THREAD.match(s)
        if m:
            tid = int(m.group(2), 16)
            if cur is None or not cur.faulthandler or tid in cur.tids:
                cur = self.start(ch, at, peeled, faulthandler=True)
            cur.open_thread(tid, "unknown", (m.group(3) or "").strip())
            return True
        m = _THREAD.match(s)
        if not m:
            return False
        tid = m.group(1) or "0"
        num = int(tid, 16) if tid.startswith("0x") else int(tid)
        name = m.group(3) or ""
        if (cur is not None and not cur.faulthandler and name == "MainThread"
                and cur.thread is not None and cur.thread[2] == "MainThread"
                and cur.empty_thread()):
            # Two main threads with no frame between: one process each, sharing the stack
            # that follows (a person condensed equal stacks).
            ch.shared.append(cur)
            count, ch.count = ch.count, None
            cur = self._new(ch, at, peeled)
            ch.count = count
        elif (cur is None or cur.faulthandler or (num and num in cur.tids)
              or (name == "MainThread" and (any(t.name == "MainThread" for t in cur.threads)
                                            or (cur.thread is not None
                                                and cur.thread[2] == "MainThread")))):
            cur = self.start(ch, at, peeled)
        cur.open_thread(num, _status(m.group(2)), name)
        return True

    def _marker(self, ch: _Channel, at: int, s: str, peeled: Peeled) -> bool:
        """Lines between dumps that say which process comes next (``stackhints``)."""
        if s.startswith("Error:") and ch.hint is not None and ch.hint.section:
            # the debug server's "Error: 500" for a rank it could not reach
            self.problems.append(f"{self.source}: line {at}: rank {ch.hint.rank}: {s[:120]}")
            return True
        mk = hints.marker(s, peeled.words)
        if mk is None:
            return False
        if mk.kind == "next" and ch.cur is not None and not (ch.cur.threads or ch.cur.thread):
            pass  # a separator between a header and its threads: keep the dump open
        else:
            self.finish(ch)
        if mk.kind == "count":
            ch.count = (mk.count, at)
        elif mk.kind == "start":
            if mk.fatal:
                ch.fatal = (mk.fatal, at)
        else:
            ch.hint = _Hint(rank=mk.rank, pid=mk.pid, title=mk.title, line=at,
                            section=mk.kind == "section")
        return True

    # -- result --------------------------------------------------------------------------------

    def result(self) -> list[ProcessDump]:
        for ch in self.channels.values():
            if ch.pending:
                self.unknown.append((ch.pending_at, ch.pending.strip()))
                ch.pending = ""
            self.finish(ch)
        self.dumps.sort(key=lambda x: (x[0], x[1]))
        if len(self.dumps) > MAX_DUMPS:
            self.problems.append(f"{self.source}: {len(self.dumps)} dumps; only the first "
                                 f"{MAX_DUMPS} were read")
        kept = [d for _, _, d in self.dumps[:MAX_DUMPS]]
        built = [self._build(d) for d in kept]
        # Dumps that name no pid are told apart by a number of their own (ANONYMOUS_PID + n),
        # or two of them would count as one process dumped twice.
        nameless = [i for i, d in enumerate(built) if not d.pid]
        if len(nameless) > 1 or any(kept[i].anonymous for i in nameless):
            for n, i in enumerate(nameless):
                built[i] = replace(built[i], pid=ANONYMOUS_PID + n)
        return built

    def _build(self, d: _Dump) -> ProcessDump:
        status, msg = "ok", ""
        if not d.threads:
            status, msg = ERROR, "the dump holds no threads (cut short?)"
        elif d.fatal:
            status, msg = CRASHED, d.fatal
        rank, role = d.rank, d.role
        pid = d.pid
        if pid is None and not d.faulthandler and not d.anonymous:
            # py-spy 0.3+ prints OS thread ids in decimal, and a main thread's id is its pid
            pid = next((t.thread_id for t in d.threads if t.name == "MainThread"
                        and 0 < t.thread_id < 1 << 31), None)
        title_rank, title_role = hints.title_info(d.command)
        if rank is None:
            rank = title_rank
        role = role or title_role
        return ProcessDump(pid=pid or 0, rank=rank, threads=tuple(d.threads),
                           python_version=d.python, command=d.command, source=self.source,
                           status=status, message=msg, role=role)


def _bare_frame(s: str) -> tuple[str, str, int] | None:
    """A frame line whose indentation a copy lost: accepted only as ``name (file.py:N)``."""
    if s[-1:] != ")" or ".py" not in s:
        return None
    frame = sf.split_frame("    " + s)
    return frame if frame is not None and frame[2] > 0 else None


def _filey(name: str) -> bool:
    """A frame's file as py-spy prints it (``x.py``, ``libc.so.6``, ``<string>``), not the
    parenthesised end of some other line (``(os error 2)``, ``(unknown)``)."""
    return (name.startswith("<") or "." in name) and " " not in name.strip()


def _looks_python(frame: tuple[str, str, int]) -> bool:
    return frame[1].endswith((".py", ".pyx")) and frame[2] > 0 and " " not in frame[0]


def read(text: str, source: str = "", frames: dict[str, Frame | None] | None = None
         ) -> tuple[list[ProcessDump], list[str]]:
    """Every dump in ``text`` (file order of their first line) and the problems met.
    ``frames``: the frame lines already read (by other files of one folder), shared while it
    has room; a text met once it is full keeps its own, as a text read alone does."""
    reader = _Reader(source, frames if frames is not None and len(frames) < _FRAME_CACHE
                     else None)
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        reader.problems.append(f"{source}: only the first {MAX_LINES} lines were read")
        lines = lines[:MAX_LINES]
    cut = bool(text) and not text.endswith(("\n", "\r"))
    n = len(lines)
    for i, raw in enumerate(lines):
        reader.feed(i + 1, raw, cut and i == n - 1)
    dumps = reader.result()
    problems = reader.problems
    if cut and dumps:
        problems.append(f"{source}: the file ends mid-line (cut short?); its last line was "
                        "skipped")
    if reader.unknown and dumps:
        at, first = reader.unknown[0]
        problems.append(f"{source}: {len(reader.unknown)} line(s) not understood, the first "
                        f"at line {at}: {first.strip()[:80]!r}")
    return dumps, problems


def no_dump_reason(text: str, source: str) -> str:
    """Why a text holds no dump, naming the line where reading stopped."""
    stripped = text.strip()
    if not stripped:
        return f"{source}: empty file, no py-spy dump in it"
    lines = stripped.splitlines()
    first = peel(lines[0]).text.strip()[:100]
    if first.startswith("Error:"):
        # py-spy's own failure message saved instead of a dump; timeouts say so
        return f"{source}: py-spy failed instead of dumping: {first[6:].strip()}"
    if "\x00" in text[:4096]:
        return f"{source}: binary data, not a stack dump"
    return (f"{source}: not py-spy output nor any stack dump rltui reads (no 'Thread' or "
            f"'Process N:' line in {len(lines)} line(s); line 1: {first!r})")
