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

from rltui.model import ERROR, OK, UNAVAILABLE, FrDump, FrPoll, ProcInfo, Reading, replace
from rltui.parsing.flightrec import (
    MAX_WHOLE_BYTES,
    dump_paths_from_env,
    from_page,
    rank_from_name,
    read_dump,
    read_parts,
)
from rltui.sources import safeopen

MAX_DUMP_BYTES = 512 << 20  # a larger file is not opened (its two ends would do, but no dump
# of torch's is that large)
MAX_PAGE_BYTES = MAX_WHOLE_BYTES  # a page of the debug server read at most
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
        why = _owner_ok(st, pid)
        if why:
            problems.append(f"{path}: {why}")
            return []
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
            problems.append(f"{page}: {str(exc)[:300]}")
            return []
        except Exception as exc:  # noqa: BLE001 - a hostile page: one line, the rest read
            problems.append(f"{page}: not the debug server's page ({type(exc).__name__})")
            return []

    def close(self) -> None:
        self._cache.clear()


def _read_file(path: str, size: int, written: float) -> list[FrDump]:
    """A dump file: a large pickle from its first and last bytes when they suffice (what the
    diagnosis reads is there), else the whole file, up to MAX_WHOLE_BYTES (a larger one that
    its two ends do not answer is one line saying so)."""
    rank = rank_from_name(path)
    fd, st = safeopen.open_fd(path)
    with os.fdopen(fd, "rb") as fh:
        size = st.st_size  # the open file's, not the earlier stat's: it may have changed
        if size > 2 * PART_BYTES:
            head = fh.read(PART_BYTES)
            fh.seek(max(size - PART_BYTES, 0))
            end = fh.read(PART_BYTES)
            dump = read_parts(head, end, path, rank=rank, written=written)
            if dump is not None:
                return [dump]
            if size > MAX_WHOLE_BYTES:
                return [FrDump(rank=rank, source=path, status=ERROR, written=written,
                               message=f"{size >> 20} MiB: its first and newest records do "
                                       "not suffice, and rltui reads at most "
                                       f"{MAX_WHOLE_BYTES >> 20} MiB whole")]
            fh.seek(0)
        data = fh.read(MAX_WHOLE_BYTES + 1)  # a file still growing: what is there
    return read_dump(data, path, rank=rank, written=written)


def _owner_ok(st: os.stat_result, pid: int | None) -> str:
    """"" when the file at a rank's dump path was written by the rank's user (or root); else
    why not: the default path is under /tmp, where anyone may plant a file before torch."""
    if pid is None:
        return ""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return ""  # no /proc (or the rank is gone): the path's folder is the user's choice
    if st.st_uid in (uid, 0):
        return ""
    return (f"owned by {safeopen.user_name(st.st_uid)}, not by the rank's user "
            f"{safeopen.user_name(uid)}: not read (another user's file at the dump path)")


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


def fetch_text(url: str, timeout: float, limit: int = MAX_PAGE_BYTES) -> str:
    """GET a page of torch's debug server (http or https: a plain HTTP server on the job's own
    network); OSError with one line on any failure. ``timeout`` bounds the whole exchange
    (connecting, headers, body), not each read: a server that sends a byte a second is cut
    off. No redirect is followed (the page is the server's own), no proxy is used, the body
    is read up to ``limit`` bytes."""
    import http.client
    import threading
    import urllib.parse
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise OSError(f"not an address: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OSError("not an http:// address")
    if not (timeout > 0 and timeout < 1e6):
        timeout = 30.0
    deadline = time.monotonic() + timeout
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, port, timeout=timeout)
    fired = threading.Event()
    timer = threading.Timer(timeout, _cut, (conn, fired))
    timer.daemon = True
    timer.start()
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("GET", path, headers={"User-Agent": "rltui", "Accept-Encoding": "identity"})
        resp = conn.getresponse()
        if 300 <= resp.status < 400:
            where = (resp.getheader("Location") or "")[:200]
            raise OSError(f"HTTP {resp.status}: redirected to {where!r}, not followed")
        if resp.status != 200:
            raise OSError(f"HTTP {resp.status} {str(resp.reason)[:80]}")
        chunks, got = [], 0
        while got <= limit:
            chunk = resp.read1(1 << 16) if hasattr(resp, "read1") else resp.read(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if time.monotonic() > deadline:
                raise TimeoutError
        if fired.is_set() or time.monotonic() > deadline:
            raise TimeoutError  # cut at the deadline: what came is not the whole page
        if got > limit:
            raise OSError(f"larger than {limit >> 20} MiB, not read")
    except TimeoutError:
        raise OSError(f"no complete answer within {timeout:g} s") from None
    except ValueError as exc:  # a host or path http.client refuses (control characters...)
        raise OSError(f"not an address rltui can ask ({type(exc).__name__})") from None
    except http.client.HTTPException as exc:
        if fired.is_set() or time.monotonic() >= deadline:
            raise OSError(f"no complete answer within {timeout:g} s") from None
        raise OSError(f"cannot read it: {type(exc).__name__}") from None
    except OSError as exc:
        if fired.is_set() or time.monotonic() >= deadline:
            raise OSError(f"no complete answer within {timeout:g} s") from None
        if isinstance(exc, ConnectionError) or exc.errno is not None:
            raise OSError(f"cannot reach it: {exc.strerror or type(exc).__name__}") from None
        raise
    finally:
        timer.cancel()
        conn.close()
    return b"".join(chunks).decode("utf-8", "replace")


def _cut(conn, fired) -> None:
    """At the deadline: shut the socket so the read blocked in it returns."""
    import socket
    fired.set()
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
