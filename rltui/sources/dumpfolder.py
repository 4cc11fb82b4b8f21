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

import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from rltui.model import OK, ProcessDump, Reading, StackPoll
from rltui.parsing.pyspy import read_folder_entries
from rltui.sources import safeopen

MAX_DUMP_BYTES = 64 << 20  # a saved dump is kilobytes; anything this big is not one


class NotAFolder(ValueError):
    """The path is neither a readable folder nor a readable file (the message says which)."""


def _read_files(folder: Path) -> tuple[list[tuple[str, str]], list[str]]:
    files, problems = [], []
    if folder.is_file():
        entries = [folder]
    else:
        try:
            entries = sorted(folder.iterdir())
        except OSError as exc:
            raise NotAFolder(f"{folder}: cannot list: {exc.strerror or exc}") from None
    for entry in entries:
        try:
            if entry.is_dir():
                continue
            data = safeopen.read_bytes(entry, MAX_DUMP_BYTES + 1)  # a FIFO or planted link: said
            if len(data) > MAX_DUMP_BYTES:
                problems.append(f"{entry.name}: larger than {MAX_DUMP_BYTES >> 20} MiB, skipped")
                continue
            files.append((entry.name, data.decode("utf-8", errors="replace")))
        except OSError as exc:
            problems.append(f"{entry.name}: unreadable: {exc.strerror or exc}")
    return files, problems


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
    files, problems = _read_files(path)
    if path.is_file() and problems:
        raise NotAFolder(problems[0])
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
