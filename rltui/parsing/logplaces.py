"""Where a job's logs are when the process that wrote one is gone. Pure: paths in, candidate
paths out; the caller (rltui.sources.deadlogs) checks which exist.

Arriving after a rank died, its stdout can no longer be read from /proc: the log must be found
from what the living processes of its job say about where logs go.

* torchrun's log folder (``--log-dir``, with ``--redirects``/``--tee``): every worker's files
  are ``<log_dir>/<run_id>[_<suffix>]/attempt_<n>/<local_rank>/{stdout,stderr}.log`` and its
  ``error.json`` (the ``TORCHELASTIC_ERROR_FILE`` of each worker names its own). A surviving
  worker's error-file path gives the attempt folder, and so every local rank's files.
* Logs named by rank (``logs/rank3.log``, ``run-rank_3.out``): a surviving rank's file, with its
  rank number swapped for the dead rank's.
* Ray's session logs: ``<temp>/session_*/logs/worker-<id>-<job>-<pid>.{out,err}``: the other
  workers of a living worker's Ray job (rltui.sources.deadlogs reads the folder).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

# .../attempt_<n>/<local rank>/error.json
_ATTEMPT = re.compile(r"^(?P<attempt>.*/attempt_\d+)/(?P<local>\d{1,5})/error\.json$")
_RANK_WORD = re.compile(r"(?<![a-z])(?<!local_)(?<!local-)(rank[-_]?)(\d{1,7})(?!\d)", re.I)
TORCHRUN_FILES = ("stderr.log", "stdout.log", "error.json")
MAX_RANKS = 1024  # candidates made per job: a WORLD_SIZE beyond this is not spelled out


def torchrun_attempt(error_file: str) -> tuple[str, int] | None:
    """(attempt folder, local rank) of a worker's TORCHELASTIC_ERROR_FILE, when it has
    torchrun's layout."""
    m = _ATTEMPT.match(error_file.replace("\\", "/"))
    if not m:
        return None
    return m.group("attempt"), int(m.group("local"))


def torchrun_files(attempt: str, local_ranks: Iterable[int]) -> list[tuple[str, int]]:
    """Every local rank's files in an attempt folder: (path, local rank)."""
    return [(f"{attempt}/{k}/{name}", k) for k in local_ranks for name in TORCHRUN_FILES]


def log_dir_option(cmdline: Sequence[str]) -> str | None:
    """torchrun's ``--log-dir``/``--log_dir`` (``-l`` is not torchrun's), as given."""
    args = list(cmdline)
    for i, arg in enumerate(args):
        for flag in ("--log-dir", "--log_dir"):
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def rank_swapped(path: str, rank: int, others: Iterable[int]) -> list[tuple[str, int]]:
    """``logs/rank0.log`` -> ``logs/rank3.log`` for each other rank: (path, rank). Only the
    file name's rank word changes; a path whose name states no rank, or another rank than
    ``rank``, gives nothing."""
    folder, name = os.path.split(path)
    found = [m for m in _RANK_WORD.finditer(name) if int(m.group(2)) == rank]
    if len(found) != 1:
        return []
    m = found[0]
    width = len(m.group(2))
    out = []
    for other in others:
        if other == rank:
            continue
        digits = str(other).zfill(width) if m.group(2).startswith("0") and width > 1 \
            else str(other)
        out.append((os.path.join(folder, name[:m.start(2)] + digits + name[m.end(2):]), other))
    return out
