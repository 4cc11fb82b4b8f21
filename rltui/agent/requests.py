"""What the agent answers to ``tail`` and ``dump`` requests (``stop`` is the loop's).

Each answer is ``(ok, message, data)`` for a ``reply``. A tail reads only the job's log files
(the ``--log`` globs, the config's log paths and the ranks' stdout/stderr files that the process
source found): a request names what to read, not where to look, so a reader cannot use the
agent to read any other file of the user's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from rltui import __version__
from rltui.agent.lastlines import last_lines
from rltui.agent.protocol import DEFAULT_TAIL_LINES, MAX_TAIL_BYTES, OPS, Request
from rltui.model import OK, Reading, StackPoll
from rltui.redact import scrub_text

Answer = tuple[bool, str, Any]


def tail(request: Request, files: Sequence[str]) -> Answer:
    """The last ``request.lines`` lines of each of ``files`` (or of ``request.path``, which must
    be one of them), within MAX_TAIL_BYTES in all, secrets scrubbed."""
    count = request.lines or DEFAULT_TAIL_LINES
    if request.path is not None:
        wanted = os.path.realpath(os.path.expanduser(request.path))
        if wanted not in files:
            return False, (f"{request.path}: not one of the job's log files (the agent tails "
                           f"the files it follows; start it with --log {request.path})"), None
        files = [wanted]
    if not files:
        return False, ("no log files to tail: the job's output is not a regular file and no "
                       "--log was given"), None
    budget = MAX_TAIL_BYTES // len(files)  # shared fairly: one huge log must not crowd out all
    entries, failed = [], 0
    for path in files:
        try:
            lines, cut, size = last_lines(path, count, budget)
        except OSError as exc:
            failed += 1
            entries.append({"path": path, "lines": [], "cut": False, "size": None,
                            "error": exc.strerror or str(exc)})
            continue
        entries.append({"path": path, "lines": [scrub_text(line) for line in lines],
                        "cut": cut, "size": size})
    ok = failed < len(files)
    message = (f"{len(files) - failed} of {len(files)} log files" if failed
               else f"{len(files)} log file{'s' if len(files) != 1 else ''}")
    if not ok and len(files) == 1:
        message = f"{files[0]}: {entries[0]['error']}"
    return ok, message, {"files": entries}


def dump(reading: Reading) -> Answer:
    """The reply that follows an on-demand stack round (sent as a reading just before)."""
    payload = reading.payload if isinstance(reading.payload, StackPoll) else None
    dumps = payload.dumps if payload is not None else ()
    dumped = sum(1 for d in dumps if d.status == OK)
    data = {"status": reading.status, "processes": len(dumps), "dumped": dumped}
    if reading.status != OK:
        text = reading.message or f"stack dump {reading.status}"
        return False, f"{text} (remedy: {reading.remedy})" if reading.remedy else text, data
    return True, reading.message or f"{dumped} of {len(dumps)} processes dumped", data


def unknown_op(request: Request) -> Answer:
    return False, (f"unknown op {request.op!r:.40}: this agent (rltui {__version__}) knows "
                   f"{', '.join(OPS)}; upgrade rltui on this node"), None
