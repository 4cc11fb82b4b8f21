"""What leaves the node: readings with secrets scrubbed, as lines that a reader will accept.

Pure. Every string of a reading (log lines and events written by the job, py-spy's thread
names, command lines, the messages of any reading) passes ``rltui.scrub`` here before it
crosses the wire (an ``OPENAI_API_KEY=sk-...`` echoed into a rank's log stays on its node).

A reading over ``MAX_LINE`` would be refused whole by the reader. The first read of a job's
logs can be that big (every file's history window at once), so a logs reading is split into
one reading per file, and a file's update still too big loses its oldest lines (then steps,
then events) until it fits, with a note. Any other source's oversized reading is replaced by an
``error`` reading that says so.
"""

from __future__ import annotations

from collections.abc import Callable

from rltui import units
from rltui.agent.protocol import MAX_LINE, TOO_LONG, ProtocolError, ReadingMessage, encode, line_of
from rltui.model import ERROR, LogPoll, LogUpdate, Reading, replace
from rltui.scrub import scrub

TRIMMED = "older lines not sent: the update was over the 8 MiB line limit"


def scrub_reading(reading: Reading) -> Reading:
    """``reading`` with secret-looking values hidden in every string it holds."""
    return scrub(reading)


def _line(host: str, t: float, reading: Reading) -> bytes | None:
    try:
        return encode(ReadingMessage(host, t, reading))
    except ProtocolError as exc:
        if exc.kind == TOO_LONG:
            return None
        raise


def _shrink(update: LogUpdate, fits: Callable[[LogUpdate], bytes | None]) -> bytes | None:
    """Halve the oldest lines away, then steps, then events, until the update fits."""
    for name in ("lines", "steps", "events"):
        while getattr(update, name):
            items = getattr(update, name)
            update = replace(update, message=TRIMMED, **{name: items[len(items) // 2:]
                                                         if len(items) > 1 else ()})
            line = fits(update)
            if line is not None:
                return line
    return None


def reading_lines(host: str, t: float, reading: Reading) -> list[bytes]:
    """The lines that carry ``reading`` (scrubbed): one, unless it had to be split."""
    reading = scrub_reading(reading)
    line = _line(host, t, reading)
    if line is not None:
        return [line]
    payload = reading.payload
    if isinstance(payload, LogPoll) and payload.files:
        out = []
        for i, update in enumerate(payload.files):
            def fits(u: LogUpdate) -> bytes | None:
                part = LogPoll(files=(u,), unmatched=payload.unmatched if i == 0 else ())
                return _line(host, t, replace(reading, payload=part))
            part_line = fits(update) or _shrink(update, fits)
            if part_line is not None:
                out.append(part_line)
        if out:
            return out
    size = len(line_of(ReadingMessage(host, t, reading)))
    return [encode(ReadingMessage(host, t, Reading(
        source=reading.source, timestamp=reading.timestamp, status=ERROR,
        message=f"a {reading.source} reading of {units.mib(size)} is over the "
                f"{MAX_LINE >> 20} MiB line limit and was not sent")))]

