"""What carried a line of pasted text to us, taken off the line (pure, total, linear).

A py-spy dump or a log line rarely reaches an on-call engineer bare: Ray's log monitor puts
``(WorkerDict pid=123) `` in front of every line, torchrun ``[rank3]:``, docker compose
``trainer-1  | ``, ``kubectl logs --timestamps`` and CI runners a time stamp, ``srun --label``
a task number, pdsh a host name, OpenMPI's ``--tag-output`` ``[1,3]<stdout>:``, a log viewer a
line number, an issue thread ``> `` quoting. ``peel`` takes these off one line and says what
they named (a rank, a pid, an actor, a channel that tells interleaved writers apart), so the
parsers can be written against what the program itself printed.

Two kinds of prefix:

* unambiguous ones (a time stamp, Ray's ``(... pid=N)``, ``[rankN]:``) are always taken off;
* ambiguous ones (``3: `` from srun, ``node01: `` from pdsh) look like text a program prints,
  so they are taken off only when what remains is recognised by the caller's ``accept``.

Every pattern here is anchored and has no nested or overlapping quantifiers, and each looks at
a bounded head of the line: a 10 MB line costs no more than a short one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

_MAX_PREFIXES = 8  # prefixes nest (time stamp, compose service, Ray, rank); more is not a chain

# CSI, OSC, DCS/PM/APC and two-byte escapes; an escape cut at the line end too.
ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*(?:[@-~]|$)"
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\|$)"
    r"|[PX^_][^\x1b]*(?:\x1b\\|$)"
    r"|[ -/]*[0-~])?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
)

# RFC 3339 / ISO time stamps as CI runners and ``kubectl logs --timestamps`` write them, bare
# or in brackets (Jenkins), followed by one space or tab.
_STAMP = re.compile(
    r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?\]?[ \t]")
# A bracketed log header holding a date and a few words: SGLang's ``[2025-01-01 12:00:00 TP3] ``
# and ``[2025-01-01 12:00:00 DP1 TP3] ``. The words say which scheduler wrote the line.
_LOG_HEADER = re.compile(
    r"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?P<words>(?: [A-Za-z]{1,6}\d{1,6}){0,4})\] ?")
_WORD_INDEX = re.compile(r"([A-Za-z]{1,6})(\d{1,6})")
# torchrun --tee / --role: "[rank3]:" (newer) and "[default0]:" (role + local rank).
_TORCHRUN = re.compile(r"\[(?P<kind>rank|default)(?P<n>\d{1,7})\]:")
# OpenMPI --tag-output: "[jobid,rank]<stdout>:".
MPI = re.compile(r"\[\d{1,9},(?P<n>\d{1,7})\]<std(?:out|err)>:")
# Ray's log monitor: "(WorkerDict pid=123)", "(TaskRunner pid=9, ip=10.0.0.2)", "(pid=7)", an
# actor's custom repr "(MyActor(rank=3) pid=...)", Ray's own daemons by name.
RAY = re.compile(
    r"\((?P<actor>[^()\s,]+(?:\([^()]*\))?)?\s?pid=(?P<pid>\d{1,12})(?:,[^()]*)?\) ?"
    r"|\((?P<daemon>raylet|gcs_server|autoscaler|monitor|dashboard|log_monitor)(?:,[^()]*)?\) ?"
)
_RAY_RANK = re.compile(r"rank[=_ ]?(\d{1,7})", re.IGNORECASE)
# Searched in a line's last 64 characters only; no leading \s* (an unbounded search would be
# quadratic on a run of spaces): the text before it is stripped instead.
REPEATED = re.compile(r"\[repeated (\d{1,9})x across cluster\]\s*$")
# docker compose: the service name padded to the widest one, then "| ".
# docker compose names a container service-N (v2) or project_service_N (v1): the replica
# number is what tells it from text that happens to hold " | ".
COMPOSE = re.compile(r"(?P<svc>[A-Za-z][\w.-]{0,60}[-_]\d{1,4}) +\| ")
# A log viewer's or a paste tool's line number.
LINENO = re.compile(r"\[\d{1,9}\] ")
_QUOTE = re.compile(r"> ?")
# Ambiguous: srun --label "3: ", pdsh/clush "node01: ".
_SRUN = re.compile(r" {0,5}(?P<n>\d{1,6}): ")
_HOST = re.compile(r"(?P<host>[A-Za-z][\w.-]{0,62}): ")


class Peeled(msgspec.Struct, frozen=True):
    """A line without what carried it, and what the carriers said."""

    text: str
    rank: int | None = None  # [rankN]:, OpenMPI's tag, srun's task number, a Ray actor's rank=
    local_rank: int | None = None  # torchrun's [defaultN]:
    pid: int | None = None  # Ray's pid=
    actor: str | None = None  # Ray's actor or task name
    channel: tuple = ()  # what tells interleaved writers apart (pid, rank, service, host)
    words: tuple[tuple[str, int], ...] = ()  # a log header's tags: (("TP", 3), ("DP", 1))

    @property
    def bare(self) -> bool:
        return not self.channel and self.rank is None and self.pid is None


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if ("\x1b" in text or "\x9b" in text) else text


def _int(digits: str) -> int | None:
    # digit runs are bounded by the patterns, so int() never meets Python's digit limit
    return int(digits) if digits else None


_BARE_HEADS = frozenset(" \t")


def peel(line: str, accept: Callable[[str], bool] | None = None) -> Peeled:
    """Take transport prefixes (and Ray's repeat suffix) off one line; see the module doc.

    ``accept(rest)`` decides whether an ambiguous prefix is one: it is taken off only when the
    rest is accepted. Without ``accept`` ambiguous prefixes stay.
    """
    if "\x1b" in line or "\x9b" in line:
        line = strip_ansi(line)
    text = line.rstrip("\r\n")
    head = text[:1]
    # The common case in a dump: an indented frame line with nothing in front (srun pads its
    # task number with spaces, so a digit after the indent still needs a look).
    if head in _BARE_HEADS and not text.lstrip(" \t")[:1].isdigit():
        return _tail(Peeled(text)) if "across cluster]" in text[-48:] else Peeled(text)
    rank = local = pid = None
    actor: str | None = None
    channel: list = []
    words: tuple[tuple[str, int], ...] = ()
    for _ in range(_MAX_PREFIXES):
        if not text:
            break
        head = text[0]
        m = None
        if head == "[":
            m = _TORCHRUN.match(text)
            if m:
                n = _int(m.group("n"))
                if m.group("kind") == "rank":
                    rank = n
                else:
                    local = n
                channel.append(("rank", m.group(0)))
                rest = text[m.end():]
                # torch >= 2.4 writes one space after the colon; keep the line's own indent
                spaces = len(rest) - len(rest.lstrip(" "))
                text = rest[1:] if spaces % 2 else rest
                continue
            m = MPI.match(text)
            if m:
                rank = _int(m.group("n"))
                channel.append(("mpi", rank))
                text = text[m.end():]
                continue
            m = _LOG_HEADER.match(text)
            if m:
                words = tuple((w.upper(), int(n)) for w, n in _WORD_INDEX.findall(m.group("words")))
                text = text[m.end():]
                continue
            m = _STAMP.match(text) or LINENO.match(text)
            if m:
                text = text[m.end():]
                continue
            break
        if head == "(":
            m = RAY.match(text)
            if m:
                name = m.group("actor") or m.group("daemon")
                if m.group("pid"):
                    pid = _int(m.group("pid"))
                actor = name or actor
                if name:
                    r = _RAY_RANK.search(name)
                    if r:
                        rank = _int(r.group(1))
                channel.append(("ray", m.group("pid") or name))
                text = text[m.end():]
                continue
            break
        if head == ">":
            text = text[_QUOTE.match(text).end():]
            continue
        if head.isdigit():
            m = _STAMP.match(text)
            if m:
                text = text[m.end():]
                continue
        if "| " in text[:72] and not text.startswith(("Process ", "Thread ", "Python ")):
            m = COMPOSE.match(text)
            if m:
                channel.append(("svc", m.group("svc")))
                text = text[m.end():]
                continue
        if accept is not None:
            m = _SRUN.match(text)
            if m and accept(text[m.end():]) and not accept(text):
                rank = _int(m.group("n"))
                channel.append(("srun", rank))
                text = text[m.end():]
                continue
            m = _HOST.match(text) if head.isalpha() else None
            if m and accept(text[m.end():]) and not accept(text):
                channel.append(("host", m.group("host")))
                text = text[m.end():]
                continue
        break
    return _tail(Peeled(text, rank, local, pid, actor, tuple(channel), words))


def _tail(p: Peeled) -> Peeled:
    """Ray's ``[repeated Nx across cluster]`` off the end."""
    text = p.text
    if "across cluster]" not in text[-48:]:
        return p
    m = REPEATED.search(text, max(0, len(text) - 64))
    if not m:
        return p
    return Peeled(text[:m.start()].rstrip(), p.rank, p.local_rank, p.pid, p.actor, p.channel,
                  p.words)
