"""A Flight Recorder dump on a stall, for gloo jobs: what torch's NCCL watchdog does on a timeout.

With ``TORCH_FR_BUFFER_SIZE`` set, torch records every collective a rank enqueues in its Flight
Recorder (a ring buffer of entries with the group, the sequence number, the op, sizes, dtypes,
the Python frames, and whether it completed). On NCCL the watchdog thread writes that buffer to
``TORCH_FR_DUMP_TEMP_FILE`` + rank when a collective times out; gloo has no watchdog and no dump
of its own, so a job here calls :func:`start` after ``_rank.init()`` and :func:`progress` as its
training loop advances. A daemon thread watches the counter and, after ``TORCHJOB_FR_AFTER``
seconds (default 3) without progress, writes
``torch._C._distributed_c10d._dump_fr_trace()`` (the same pickle the NCCL watchdog writes) to
``$TORCH_FR_DUMP_TEMP_FILE<rank>`` (default prefix ``/tmp/nccl_trace_rank_``; the tests always
point it into their own folder), atomically (a temporary name in the same folder, then
``os.replace``), once, and prints ``frdump RANK PATH`` on stdout.

The thread can dump while the main thread is blocked: a gloo collective (and a parked rank's
``Event.wait``) releases the GIL.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time

from torch._C._distributed_c10d import _dump_fr_trace

DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"  # torch's own default for TORCH_FR_DUMP_TEMP_FILE

_count = 0


def progress() -> None:
    """The training loop advanced (one step, or one collective)."""
    global _count
    _count += 1


def dump_path(rank: int) -> str:
    return os.environ.get("TORCH_FR_DUMP_TEMP_FILE", DEFAULT_PREFIX) + str(rank)


def write_dump(rank: int) -> str:
    """Write this rank's Flight Recorder buffer to its dump path, atomically; returns the path."""
    path = dump_path(rank)
    folder = os.path.dirname(path) or "."
    data = _dump_fr_trace()
    fd, tmp = tempfile.mkstemp(prefix=".frdump-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def _watch(rank: int, after: float) -> None:
    seen, since = _count, time.monotonic()
    while True:
        time.sleep(0.1)
        if _count != seen:
            seen, since = _count, time.monotonic()
        elif time.monotonic() - since >= after:
            print(f"frdump {rank} {write_dump(rank)}", flush=True)
            return


def start(rank: int) -> threading.Thread:
    """Start the watcher thread (after the group is joined)."""
    after = float(os.environ.get("TORCHJOB_FR_AFTER", "3"))
    thread = threading.Thread(target=_watch, args=(rank, after), name="flightrec-watchdog",
                              daemon=True)
    thread.start()
    return thread
