"""Saved stack dumps from a folder or one file (``diagnose --stacks PATH``, ``rltui stacks
PATH``).

One file per process, py-spy text or ``--json`` in any mix, or one file holding several dumps
one after another (a shell loop over ``py-spy dump``, a log with dumps inside, faulthandler
output; ``rltui.parsing.stacktext``). The rank of a dump comes from the text (a ``[rankN]:``
prefix, a separator, a process title); else from a ``rank<N>`` token in its file name; else,
when the process still runs here, from its RANK environment variable; else the dump is shown by
pid (and sorted by pid).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from rltui.model import OK, ProcessDump, Reading, StackPoll, replace
from rltui.parsing.pyspy import read_folder_entries
from rltui.sources import safeopen

MAX_DUMP_BYTES = 64 << 20  # a saved dump is kilobytes; anything this big is not one


class NotAFolder(ValueError):
    """The path is neither a readable folder nor a readable file (the message says which)."""


def _names(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as listing:
            return sorted(entry.name for entry in listing)
    except OSError as exc:
        raise NotAFolder(f"{folder}: cannot list: {exc.strerror or exc}") from None


class _Plain:
    """Reads a folder's plain files through one descriptor of the folder, when ``safeopen``
    would pass every one of them anyway: the folder's path holds no link another user owns, and
    it is no part of /proc or /sys. A file opened with ``O_NOFOLLOW`` below it is then safe
    when ``fstat`` says it is a regular file off the kernel's devices; anything else (a link, a
    FIFO) goes to ``safeopen``, whose refusal says why. Saves ``safeopen``'s ``lstat`` of every
    component of every file's path (and its two opens a file)."""

    def __init__(self, folder: Path) -> None:
        self.fd = -1
        self.devices: set[int] = set()
        try:
            real, links = safeopen.resolve(os.fspath(folder))
            me = os.geteuid()
            if any(st.st_uid not in (0, me) for _, st in links) or any(
                    real == top or real.startswith(top + "/") for top in safeopen.KERNEL_TREES):
                return
            for top in safeopen.KERNEL_TREES:
                try:
                    self.devices.add(os.stat(top).st_dev)
                except OSError:
                    pass
            checked = os.stat(real)
            fd = os.open(real, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            st = os.fstat(fd)
            # the very folder resolved (not one swapped in since), off the kernel's devices
            if (st.st_dev, st.st_ino) == (checked.st_dev, checked.st_ino) and \
                    st.st_dev not in self.devices:
                self.fd, fd = fd, -1
        except OSError:
            pass
        finally:
            if fd >= 0:
                os.close(fd)

    def read(self, name: str, limit: int) -> bytes | None:
        """The file's first ``limit`` bytes, or None where ``safeopen`` must decide."""
        if self.fd < 0:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=self.fd)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_dev in self.devices:
                return None
            chunks, size = [], 0
            while size < limit:
                chunk = os.read(fd, min(limit - size, max(st.st_size + 1 - size, 1 << 16)))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _each_file(folder: Path, names: list[str] | None, problems: list[str]
               ) -> Iterator[tuple[str, str]]:
    """(name, text) of each file, read as it is asked for: one file in memory at a time.
    ``names``: the folder's entries; None when ``folder`` is the one file to read."""
    plain = _Plain(folder) if names is not None else None
    try:
        for name in names if names is not None else [folder.name]:
            try:
                data = plain.read(name, MAX_DUMP_BYTES + 1) if plain is not None else None
                if data is None:
                    entry = folder / name if names is not None else folder
                    if entry.is_dir():
                        continue
                    # a FIFO or planted link: said
                    data = safeopen.read_bytes(entry, MAX_DUMP_BYTES + 1)
                if len(data) > MAX_DUMP_BYTES:
                    problems.append(f"{name}: larger than {MAX_DUMP_BYTES >> 20} MiB, skipped")
                    continue
                text = data.decode("utf-8", errors="replace")
            except OSError as exc:
                problems.append(f"{name}: unreadable: {exc.strerror or exc}")
                continue
            del data
            yield name, text
    finally:
        if plain is not None:
            plain.close()


def _read_files(folder: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """Every file of ``folder`` (or ``folder`` itself, a file) read at once, and the problems."""
    problems: list[str] = []
    names = None if folder.is_file() else _names(folder)
    return list(_each_file(folder, names, problems)), problems


def live_rank(pid: int) -> int | None:
    """RANK of a process that still runs here, or None (gone, not ours to read, no RANK)."""
    try:
        import psutil
        value = psutil.Process(pid).environ().get("RANK")
    except Exception:  # noqa: BLE001 - any failure just means "unknown"
        return None
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def read_dump_folder(folder: str, rank_of_pid: Callable[[int], int | None] = live_rank
                     ) -> tuple[list[ProcessDump], list[str]]:
    """The dumps in ``folder`` (a folder of dumps, or one file holding them) ordered by rank
    then pid, and the problems met, as sentences.

    Raises ``NotAFolder`` when ``folder`` is neither, or a file that cannot be read; everything
    else is a problem.
    """
    path = Path(folder)
    if not path.is_dir() and not path.is_file():
        raise NotAFolder(f"{folder}: no such folder or file" if not path.exists()
                         else f"{folder}: neither a folder nor a regular file")
    problems: list[str] = []
    if path.is_file():
        files: Iterable[tuple[str, str]] = list(_each_file(path, None, problems))
        if problems:
            raise NotAFolder(problems[0])
    else:
        # read, parsed and folded one file at a time: 65,536 dumps never sit in memory at once
        files = _each_file(path, _names(path), problems)
    dumps, parse_problems = read_folder_entries(files)
    named = {d.rank for d in dumps if d.rank is not None}
    found = []
    for d in dumps:
        if d.rank is None and d.pid:
            rank = rank_of_pid(d.pid)
            if rank is not None and rank not in named:
                d = replace(d, rank=rank)
        found.append(d)
    found.sort(key=lambda d: (d.rank is None, d.rank if d.rank is not None else 0, d.pid))
    return found, problems + parse_problems


def folder_reading(folder: str, dumps: list[ProcessDump],
                   clock: Callable[[], float] = time.time) -> Reading:
    """The dumps of a folder as one round of the stacks source, stamped now."""
    now = clock()
    return Reading(source="stacks", timestamp=now, status=OK,
                   payload=StackPoll(dumps=tuple(dumps), started=now, finished=now,
                                     trigger="saved", nonblocking=True,
                                     command=f"saved dumps in {folder}"))
