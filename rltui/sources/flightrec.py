"""The ranks' Flight Recorder dumps: files and torch's debug server (docs/flight-recorder.md).

Where they come from, in the order users have them:

* files the user names (``--flight-recorder PATH_OR_GLOB``, repeatable; a folder means its files);
* the files the ranks' environment points at: ``TORCH_FR_DUMP_TEMP_FILE`` (older
  ``TORCH_NCCL_DEBUG_INFO_TEMP_FILE``, default ``/tmp/nccl_trace_rank_``) followed by the rank,
  written by the NCCL watchdog on a timeout or by the job on request. Only a file written since
  the rank started counts (the default path outlives jobs: yesterday's dump is not today's);
* torch's debug server (``--torch-debug URL``): its front end's ``/fr_trace_json`` page.

A file is read again only when it changed (device, inode, size, modification time), and through
``safeopen`` (a planted symlink is refused). A dump is untrusted: ``rltui.parsing.flightrec``
reads it without executing anything.
"""

from __future__ import annotations

import glob
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rltui.model import OK, UNAVAILABLE, FrDump, FrPoll, ProcInfo, Reading
from rltui.parsing.flightrec import (dump_paths_from_env, from_page, rank_from_name, read_dump,
                                    read_parts)
from rltui.sources import safeopen

MAX_DUMP_BYTES = 512 << 20  # 2,000 records with C++ stacks stay far below
MAX_FILES = 1 << 14
PART_BYTES = 48 << 10  # of a large dump's head and end read first (64 records fit easily)
NAME = "flight_recorder"


class FlightRecorderSource:
    """Polls the dumps; ``procs`` gives the job's processes (their environment names the
    files), ``urls`` torch's debug server front ends."""

    name = NAME

    def __init__(self, given: Sequence[str] = (), procs: Callable[[], Sequence[ProcInfo]]
                 | None = None, urls: Sequence[str] = (), *,
                 clock: Callable[[], float] = time.time, timeout: float = 30.0) -> None:
        self.given = tuple(given)
        self.procs = procs
        self.urls = tuple(urls)
        self.clock = clock
        self.timeout = timeout
        self._cache: dict[str, tuple[tuple, list[FrDump]]] = {}

    def poll(self) -> Reading:
        now = self.clock()
        dumps: list[FrDump] = []
        problems: list[str] = []
        looked: list[str] = []
        seen: set[str] = set()
        for pattern in self.given:
            looked.append(pattern)
            paths = _expand(pattern)
            if not paths:
                problems.append(f"{pattern}: no file (yet)")
            for path in paths[:MAX_FILES]:
                if path not in seen:
                    seen.add(path)
                    dumps += self._read(path, problems)
        enabled = None
        for p in (self.procs() if self.procs else ()):
            prefix, on = dump_paths_from_env(p.debug_env)
            if on is not None:
                enabled = on if enabled is None else (enabled or on)
            if p.rank is None:
                continue
            path = f"{prefix}{p.rank}"
            if path in seen:
                continue
            seen.add(path)
            if prefix not in looked:
                looked.append(prefix)
            got = self._read(path, problems, quiet=True, since=p.create_time, pid=p.pid)
            dumps += got
        for url in self.urls:
            looked.append(url)
            dumps += self._fetch(url, problems, now)
        status = OK if dumps or not (self.given or self.urls) else UNAVAILABLE
        message = "" if status == OK else (problems[0] if problems else "no dump yet")
        return Reading(source=NAME, timestamp=now, status=status, message=message,
                       payload=FrPoll(dumps=tuple(dumps), problems=tuple(problems[:64]),
                                      enabled=enabled, looked=tuple(looked)))

    def _read(self, path: str, problems: list[str], *, quiet: bool = False,
              since: float | None = None, pid: int | None = None) -> list[FrDump]:
        try:
            real, st = safeopen.check(path)
        except FileNotFoundError:
            if not quiet:
                problems.append(f"{path}: no such file")
            return []
        except OSError as exc:
            problems.append(f"{path}: {getattr(exc, 'strerror', None) or exc}")
            return []
        if since is not None and st.st_mtime < since - 1:
            return []  # an earlier job's dump at the same path
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        hit = self._cache.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        if st.st_size > MAX_DUMP_BYTES:
            problems.append(f"{path}: larger than {MAX_DUMP_BYTES >> 20} MiB, not read")
            return []
        try:
            found = _read_file(path, st.st_size, st.st_mtime)
        except OSError as exc:
            problems.append(f"{path}: unreadable: {getattr(exc, 'strerror', None) or exc}")
            return []
        if pid is not None:
            from dataclasses import replace
            found = [replace(d, pid=pid) for d in found]
        self._cache[path] = (key, found)
        if len(self._cache) > 2 * MAX_FILES:
            self._cache.clear()
        return found

    def _fetch(self, url: str, problems: list[str], now: float) -> list[FrDump]:
        page = url.rstrip("/") + "/fr_trace_json"
        try:
            text = fetch_text(page, self.timeout)
        except OSError as exc:
            problems.append(f"{page}: {exc}")
            return []
        try:
            return from_page(text, page, written=now)
        except ValueError as exc:
            problems.append(f"{page}: {exc}")
            return []

    def close(self) -> None:
        self._cache.clear()


def _read_file(path: str, size: int, written: float) -> list[FrDump]:
    """A dump file: a large pickle from its first and last bytes when they suffice (what the
    diagnosis reads is there), else the whole file."""
    rank = rank_from_name(path)
    if size > 2 * PART_BYTES:
        fd, _ = safeopen.open_fd(path)
        with os.fdopen(fd, "rb") as fh:
            head = fh.read(PART_BYTES)
            fh.seek(-PART_BYTES, os.SEEK_END)
            end = fh.read(PART_BYTES)
        dump = read_parts(head, end, path, rank=rank, written=written)
        if dump is not None:
            return [dump]
    data = safeopen.read_bytes(path, MAX_DUMP_BYTES + 1)
    return read_dump(data, path, rank=rank, written=written)


def _expand(pattern: str) -> list[str]:
    path = os.path.expanduser(pattern)
    if os.path.isdir(path):
        try:
            # not hidden files: a dump being written under a temporary name
            return sorted(str(p) for p in Path(path).iterdir()
                          if p.is_file() and not p.name.startswith("."))
        except OSError:
            return []
    if glob.has_magic(path):
        return sorted(glob.glob(path))
    return [path] if os.path.exists(path) else []


def fetch_text(url: str, timeout: float, limit: int = MAX_DUMP_BYTES) -> str:
    """GET a page of torch's debug server (http only: it is a plain HTTP server on the job's
    own network); OSError with one line on any failure."""
    import urllib.error
    import urllib.request
    if not url.startswith(("http://", "https://")):
        raise OSError("not an http:// address")
    req = urllib.request.Request(url, headers={"User-Agent": "rltui"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - user's URL
            data = resp.read(limit + 1)
    except urllib.error.HTTPError as exc:
        raise OSError(f"HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise OSError(f"cannot reach it: {exc.reason}") from None
    except (TimeoutError, ValueError) as exc:
        raise OSError(f"cannot read it: {exc or type(exc).__name__}") from None
    if len(data) > limit:
        raise OSError(f"larger than {limit >> 20} MiB")
    return data.decode("utf-8", "replace")
