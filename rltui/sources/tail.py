"""Follow one log file by byte offset: new complete lines per ``read()``, across rotations.

The file is opened once and kept open (a read is one ``stat`` of the path plus one ``pread``);
the path is stat'ed each time to notice that it names another file now. Bytes are split on
``\\n`` and decoded as UTF-8 with replacement, so no input can raise. What ``read()`` does:

- a partial last line is held (at most ``max_line_bytes``) until its newline arrives, or until
  the file ends for us (rotated away, deleted), when it is delivered as it is;
- a line longer than ``max_line_bytes`` is cut there (``cut`` True) and the rest of it is
  skipped as it streams past, never held;
- rename rotation (the path names another inode): the old open file is read to its end first,
  then the new one from its start with ``reset``; copytruncate (same inode, and smaller than
  our offset, or its first ``FINGERPRINT_BYTES`` or the ``CHECK_BYTES`` just before our offset
  are not what we read there: truncated and written past our offset again between two reads):
  start again at 0 with ``reset``, counted in ``truncations``. One byte is not enough: with
  fixed-length lines the byte before the offset is a newline in every generation, while the
  first line and the last line read carry step numbers that differ. Two truncations between
  two reads are one to us. The end of a file and the start of the next come in separate reads,
  so the lines of one read always belong to one file;
- a file larger than ``history_bytes`` is opened from its end: the window starts at the first
  line start in the last ``history_bytes``; lines before it are counted over later reads (at most
  ``count_budget_bytes`` each, counting ``\\n`` bytes) and until then line numbers count from
  the window (``line_base_known`` False); the read that finishes the count says ``line_shift``;
- one read returns at most ``max_read_bytes`` of new data (the history window excepted), so a
  file that grows in bursts cannot stall the other files polled in the same pass.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from itertools import repeat

import msgspec

from rltui.model import DENIED, ERROR, OK, UNAVAILABLE
from rltui.sources import safeopen

# (line_no, text, cut): plain tuples, because a busy poll makes thousands of them.
TailLine = tuple[int, str, bool]

COUNT_CHUNK = 1 << 20  # bytes per pread while counting the lines before the window (cache-sized)
BINARY_PROBE = 64 << 10  # NUL bytes in this much of a file's first chunk: it looks binary
FINGERPRINT_BYTES = 256  # a file's first bytes, compared on each change to notice a rewrite
CHECK_BYTES = 64  # the bytes just before the offset, compared the same way

MISSING = "no such file; waiting for it to appear"
DELETED = "deleted; waiting for it to appear again"
RENAMED = "renamed away; reading the old file until a new one appears"
ROTATED = "rotated: a new file has its name; reading that from its start"
TRUNCATED = "truncated; reading it again from the start"
LOOKS_BINARY = "looks binary (NUL bytes); shown with replacement characters"
GENERATION_OF = "a rotated generation of {}, read as that file; not read again"
COPY_OF = "a rotated generation of {}: reading what was written to it after its last read there"

# A file's generation as read: (st_dev, st_ino), its first bytes, the offset read to, the bytes
# just before that offset, the number of the last line read.
Generation = tuple[tuple[int, int], bytes, int, bytes, int]
# Asked before a tail opens a file: is it (fd, fstat) another tail's generation? Then the name of
# that tail's file, and the generation to go on from (a copy) or None (not to be read at all).
Known = Callable[[int, os.stat_result], "tuple[str, Generation | None] | None"]


class TailRead(msgspec.Struct, frozen=True):
    """What one ``read()`` found. ``lines`` are consecutive complete lines, oldest first.

    ``reset``: this read starts a new file (rotation, truncation, recreation); its line numbers
    start over. ``history``: the lines are the first look at a file that already had content
    (the whole file, or its last ``history_bytes``). ``line_shift`` is non-zero once, in the
    read that finishes counting the lines before the window: add it to every line number of the
    earlier reads of this file; this read's own line numbers are already absolute. ``ended``:
    the file these lines came from is finished (rotated away, truncated, deleted); parsers
    holding a multi-line event should let it go. A reset never comes in the same read.
    """

    status: str
    message: str = ""
    lines: list[TailLine] = msgspec.field(default_factory=list)
    reset: bool = False
    size: int | None = None
    line_base_known: bool = True
    line_shift: int = 0
    history: bool = False
    ended: bool = False
    mtime: float | None = None  # the file's modification time, when known
    truncated: bool = False  # this read ends a file that was truncated in place (one event)


def _utf8_cut(data: bytes, limit: int) -> bytes:
    """``data[:limit]`` without splitting a UTF-8 sequence (a cut line ends cleanly)."""
    end = limit
    for _ in range(3):
        if end > 0 and (data[end] & 0xC0) == 0x80:
            end -= 1
    if (data[end] & 0xC0) == 0x80:  # not UTF-8 anyway: cut where the limit says
        end = limit
    return data[:end]


def _decode(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n")  # CRLF endings; a lone \r (tqdm) is the parser's
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")  # a NUL would upset terminals downstream
    return text


class _Rewritten(Exception):
    """The bytes before our offset changed: the file was truncated and written again."""


class FileTail:
    def __init__(self, path: str, max_line_bytes: int = 1 << 20, history_bytes: int = 4 << 20,
                 count_budget_bytes: int = 256 << 20, max_read_bytes: int = 8 << 20,
                 known: Known | None = None) -> None:
        self.path = path
        self.known = known
        self.max_line = max(1, max_line_bytes)
        self.history_bytes = max(0, history_bytes)
        self.count_budget = max(COUNT_CHUNK, count_budget_bytes)
        self.max_read = max(1, max_read_bytes)
        self._fd: int | None = None
        self._id: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._generations = 0  # files opened so far: the second one onwards is a reset
        self._gone = ""  # why the path's file went away, while nothing is there
        self._mtime: float | None = None  # of the file read, when stat'ed this read
        self.truncations = 0  # truncations in place noticed so far
        self.past: list[Generation] = []  # generations ended, the newest last (at most 16)
        self._reset_generation()

    def _reset_generation(self) -> None:
        self._offset = 0  # next byte to read
        self._pending = b""  # start of a line whose newline has not arrived
        self._skipping = False  # inside a cut line: drop bytes up to the next newline
        self._line_no = 0  # number of the last line handed out (or skipped at a window start)
        self._count_pos = 0  # lines before the window: bytes [0, _count_pos) counted ...
        self._count_end = 0  # ... of [0, _count_end)
        self._counted = 0
        self._binary = False
        self._last = b""  # the bytes just before _offset (at most CHECK_BYTES), once read
        self._head = b""  # the file's first bytes (at most FINGERPRINT_BYTES) below _offset
        self._checked_ns = -1  # the modification time at the last check of _head and _last
        self._fresh = True  # no data read yet from this file (the binary probe looks at it)

    @property
    def generation(self) -> Generation | None:
        """The open file as read so far: what a rotated name of it is recognised by."""
        if self._fd is None or self._id is None:
            return None
        return (self._id, self._head, self._offset, self._last, self._line_no)

    @property
    def line_base_known(self) -> bool:
        return self._count_pos >= self._count_end

    # -- reading ---------------------------------------------------------------------------

    def read(self) -> TailRead:
        try:
            return self._read()
        except OSError as exc:
            # An I/O error (a flaky network file system): nothing was consumed, so the next
            # read tries the same bytes again rather than starting over and repeating lines.
            return TailRead(ERROR, f"read failed: {exc.strerror or exc}; trying again")

    def _read(self) -> TailRead:
        st, status, message = self._stat_path()
        if self._fd is not None:
            if st is not None and (st.st_dev, st.st_ino) == self._id:
                if st.st_size >= self._offset:
                    self._mtime = st.st_mtime
                    try:
                        return self._follow(st.st_size, mtime_ns=st.st_mtime_ns)
                    except _Rewritten:  # truncated and written again past our offset
                        pass
                # copytruncate: the same file, shorter. Its old content is gone; end it here.
                self.truncations += 1
                return self._end([], TRUNCATED, truncated=True)
            # The path names another file now, or nothing. The old one may still be written
            # (a logger that renames first and reopens later): read it to its end first.
            out: list[TailLine] = []
            self._mtime = None
            try:
                more = self._pull(out, self.max_read, os.fstat(self._fd).st_size)
                more = more or os.fstat(self._fd).st_size > self._offset  # written meanwhile
            except _Rewritten:
                more = False  # the old file was rewritten: nothing more of it to trust
            if more:
                return self._result(out, self._offset)
            deleted = os.fstat(self._fd).st_nlink == 0
            if st is None and status == UNAVAILABLE and not deleted:
                return self._result(out, self._offset, RENAMED)  # its partial line may end yet
            self._gone = DELETED if deleted and st is None else ""
            return self._end(out, self._gone or (ROTATED if st is not None else message))
        if st is None:
            if status == UNAVAILABLE and self._gone:
                message = self._gone
            return TailRead(status, message)
        return self._open(st, reset=self._generations > 0)

    def _end(self, out: list[TailLine], message: str, truncated: bool = False) -> TailRead:
        """The open file is finished for us: hand out its held partial line and close it.

        The next read starts the path's new file (``reset``). Keeping the end in a read of its
        own means every line of one read belongs to one file.
        """
        self._finish_partial(out)
        read = self._result(out, self._offset, message)
        if self.generation is not None:
            self.past = [*self.past[-15:], self.generation]
        self.close()
        return TailRead(read.status, read.message, read.lines, size=read.size,
                        line_base_known=read.line_base_known, ended=True, truncated=truncated)

    def _stat_path(self) -> tuple[os.stat_result | None, str, str]:
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return None, UNAVAILABLE, MISSING
        except PermissionError:
            return None, DENIED, "permission denied: cannot reach the file (directory access)"
        except OSError as exc:
            return None, ERROR, f"cannot stat: {exc.strerror or exc}"
        if stat.S_ISDIR(st.st_mode):
            return None, ERROR, "is a directory (give a file or a glob such as DIR/*.log)"
        if not stat.S_ISREG(st.st_mode):
            return None, ERROR, f"not a regular file ({safeopen.kind(st)})"
        return st, OK, ""

    def _open(self, st: os.stat_result, reset: bool) -> TailRead:
        self.close()
        try:
            fd, info = safeopen.open_fd(self.path)
        except safeopen.Refused as exc:
            return TailRead(DENIED if "symlink" in exc.strerror else ERROR, exc.strerror)
        except PermissionError:
            owner = f"mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}"
            return TailRead(DENIED, f"permission denied ({owner}); run as that user or make "
                                    "the file readable")
        except FileNotFoundError:
            return TailRead(UNAVAILABLE, MISSING)
        except OSError as exc:
            return TailRead(ERROR, f"cannot open: {exc.strerror or exc}")
        # ``info`` is the file really opened, which may be newer than ``st``
        try:
            known = self.known(fd, info) if self.known is not None else None
        except OSError:
            known = None
        if known is not None and known[1] is None:
            os.close(fd)  # another tail reads it, under the name it had
            return TailRead(OK, GENERATION_OF.format(known[0]))
        self._fd, self._id, self._mtime = fd, (info.st_dev, info.st_ino), info.st_mtime
        self._generations += 1
        self._gone = ""
        self._reset_generation()
        if known is not None:  # a copy of a generation another tail read part of: go on there
            _, self._head, self._offset, self._last, self._line_no = known[1]
            self._fresh = False
            try:
                read = self._follow(info.st_size)
                return TailRead(read.status, COPY_OF.format(known[0]), read.lines, reset,
                                read.size, mtime=read.mtime)
            except _Rewritten:  # changed since it was recognised: a file of its own after all
                self._reset_generation()
        if info.st_size > self.history_bytes:
            self._seek_window(info.st_size)
            self._head = os.pread(fd, min(FINGERPRINT_BYTES, self._offset), 0)
        # The whole window in one read; counting the lines before it starts with the next one.
        read = self._follow(info.st_size, budget=max(self.max_read, self.history_bytes + 1),
                            count=False)
        return TailRead(read.status, read.message, read.lines, reset, read.size,
                        read.line_base_known, read.line_shift, history=bool(read.lines),
                        mtime=read.mtime)

    def _seek_window(self, size: int) -> None:
        """Start at the first line that begins inside the last ``history_bytes`` of the file.

        Line 1 of the window is the line holding byte ``_count_end``; the lines before it are
        the newlines in ``[0, _count_end)``, counted over the next reads.
        """
        start = size - self.history_bytes
        probe = os.pread(self._fd, min(self.history_bytes, self.max_line, 1 << 16) + 1, start - 1)
        newline = probe.find(b"\n")
        if newline >= 0:
            self._offset = self._count_end = start + newline  # just after that newline
        else:
            # Deep inside a very long line: it is line 1 of the window, skipped, never shown.
            self._offset = self._count_end = start
            self._skipping = True
            self._line_no = 1

    def _follow(self, size: int, budget: int | None = None, count: bool = True,
                mtime_ns: int = -1) -> TailRead:
        out: list[TailLine] = []
        if size > self._offset or mtime_ns != self._checked_ns:
            # written to since the last check: is it still what we read? (When it grew, the
            # bytes before the offset are compared by the read itself.)
            self._verify(last=size <= self._offset)
            self._checked_ns = mtime_ns
        shift = self._count_some() if count else 0
        self._pull(out, budget or self.max_read, size)
        return self._result(out, size, line_shift=shift)

    def _result(self, out: list[TailLine], size: int | None, message: str = "",
                line_shift: int = 0) -> TailRead:
        if self._binary:
            message = f"{message}; {LOOKS_BINARY}" if message else LOOKS_BINARY
        return TailRead(OK, message, out, size=max(size or 0, self._offset),
                        line_base_known=self.line_base_known, line_shift=line_shift,
                        mtime=self._mtime)

    def _count_some(self) -> int:
        """Count newlines before the window, up to the budget; the shift once it is done."""
        if self._count_pos >= self._count_end:
            return 0
        budget = self.count_budget
        while budget > 0 and self._count_pos < self._count_end:
            want = min(COUNT_CHUNK, budget, self._count_end - self._count_pos)
            chunk = os.pread(self._fd, want, self._count_pos)
            if not chunk:  # shorter than it was: a truncation, found by the next stat
                return 0
            self._counted += chunk.count(b"\n")
            self._count_pos += len(chunk)
            budget -= len(chunk)
        if self._count_pos < self._count_end:
            return 0
        self._line_no += self._counted
        return self._counted

    def _verify(self, last: bool = True) -> None:
        """Raise ``_Rewritten`` when the file's first bytes are not the ones read there (a
        truncation then writes past our offset, even with lines of one fixed length); take in
        the first bytes read since."""
        if self._offset == 0:
            return
        head = os.pread(self._fd, FINGERPRINT_BYTES, 0)
        if head[:len(self._head)] != self._head:
            raise _Rewritten
        if last and self._last and os.pread(self._fd, len(self._last),
                                   self._offset - len(self._last)) != self._last:
            raise _Rewritten
        self._head = head[:min(FINGERPRINT_BYTES, self._offset)]

    def _pull(self, out: list[TailLine], budget: int, size: int) -> bool:
        """Read the file's new bytes (as far as ``size``, at most ``budget``) into lines; True
        when more is waiting. Asking for exactly what is there matters: pread allocates its
        whole request up front, and an 8 MiB buffer per idle file per poll is not free."""
        want = min(budget, size - self._offset)
        if want <= 0:
            return False
        # The bytes before the offset come along: if they are not the ones we last read there,
        # the file was truncated and rewritten past our offset between two reads.
        lead = len(self._last)
        data = os.pread(self._fd, want + lead, self._offset - lead)
        if lead:
            if data[:lead] != self._last:
                raise _Rewritten
            data = data[lead:]
        if not data:
            return False
        self._last = (self._last + data)[-CHECK_BYTES:]
        if self._fresh and b"\x00" in data[:BINARY_PROBE]:
            self._binary = True
        self._fresh = False
        if len(self._head) < FINGERPRINT_BYTES and self._offset == len(self._head):
            self._head = (self._head + data)[:FINGERPRINT_BYTES]
        self._offset += len(data)
        self._split(data, out)
        return self._offset < size

    def _split(self, data: bytes, out: list[TailLine]) -> None:
        if self._skipping:
            newline = data.find(b"\n")
            if newline < 0:
                return
            data = data[newline + 1:]
            self._skipping = False
        if self._pending:
            newline = data.find(b"\n")
            head = self._pending + (data if newline < 0 else data[:newline])
            self._pending = b""
            if newline < 0:
                self._hold(head, out)
                return
            self._emit_one(head, out)
            data = data[newline + 1:]
        last = data.rfind(b"\n")
        if last >= 0:
            # The common case: no line over the limit, so the whole block is decoded and split
            # at once (a newline byte is never part of a UTF-8 sequence: the splits agree).
            parts = None if last <= self.max_line else data[:last].split(b"\n")
            if parts is None or max(map(len, parts)) <= self.max_line:
                texts = _decode(data[:last + 1]).split("\n")
                texts.pop()  # after the final newline
                first = self._line_no + 1
                self._line_no += len(texts)
                out.extend(zip(range(first, first + len(texts)), texts, repeat(False)))
            else:
                for part in parts:
                    self._emit_one(part, out)
        self._hold(data[last + 1:], out)

    def _hold(self, partial: bytes, out: list[TailLine]) -> None:
        """Keep a partial line, or hand out its first ``max_line`` bytes and skip the rest."""
        if len(partial) > self.max_line:
            self._emit_one(partial, out)
            self._skipping = True
        else:
            self._pending = partial

    def _emit_one(self, line: bytes, out: list[TailLine]) -> None:
        cut = len(line) > self.max_line
        if cut:
            line = _utf8_cut(line, self.max_line)
        text = _decode(line)
        if not cut and text.endswith("\r"):
            text = text[:-1]
        self._line_no += 1
        out.append((self._line_no, text, cut))

    def _finish_partial(self, out: list[TailLine]) -> None:
        """The file ends for us: a held partial line is as complete as it will get."""
        if self._pending:
            self._emit_one(self._pending, out)
            self._pending = b""

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
