"""Slurm hostlists, ``--hosts`` values and hostfiles to host names, and host names back to a
short hostlist for display. Pure: no I/O.

Expansion follows Slurm's hostlist syntax (what ``scontrol show hostnames`` prints), so the
nodelist of a job (``SLURM_JOB_NODELIST``, ``squeue -o %N``) expands here exactly as Slurm
expands it, without needing ``scontrol`` on this machine:

* names are separated by commas or whitespace; a comma inside brackets separates numbers;
* ``prefix[ranges]``: ranges are numbers and ``lo-hi`` ranges separated by commas
  (``tux[0-5,12,20-25]``); each range keeps the width of its low bound, so leading zeros are
  kept (``node[01-04]`` -> node01 .. node04, ``linux[0000-1023]``);
* several bracket groups in one name multiply out, the leftmost varying slowest
  (``rack[1-2]-node[01-02]`` -> rack1-node01, rack1-node02, rack2-node01, rack2-node02);
* duplicates are kept (as Slurm keeps them) and the order is the order written.

A suffix after the last group (``node[1-2]-ib``) is accepted, as pdsh and ClusterShell accept
it; slurm.conf(5) calls ``unit[0-31]rack`` invalid, so a nodelist from Slurm never has one and
``compress`` never writes one. Stricter than Slurm where Slurm guesses: an unclosed ``[``
(Slurm takes it as part of the name), an empty or reversed range, or more than ``MAX_HOSTS``
names (Slurm caps one range at 64K) are errors that say where they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import product

# Far above any real job (the largest have a few thousand nodes) and far below what would
# take memory: a typo like node[1-10000000] is caught before it allocates anything.
MAX_HOSTS = 100_000

_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_NUMBERS = re.compile(r"([0-9]+)")
_GROUP = re.compile(r"\[([^\]]*)\]")
# A number in a host name is at most this many digits: past it the name is kept as it is
# (int() has a digit limit, and no real name numbers its nodes beyond a few digits).
_MAX_DIGITS = 18
_DIGITS = "0123456789"
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?")

# (lo, hi, width): one range inside brackets; width is the number of digits of lo as written.
Range = tuple[int, int, int]
# A parsed name: literal, group, literal, group, ..., literal (the last literal is "").
Parts = list  # list[str | list[Range]]


class HostlistError(ValueError):
    """A malformed hostlist, ``--hosts`` value or hostfile line, with where it is."""

    def __init__(self, problem: str, text: str = "", position: int | None = None,
                 line: int | None = None, source: str = "") -> None:
        self.problem = problem
        self.text = text
        self.position = position  # 0-based index into text
        self.line = line  # 1-based line of a hostfile
        self.source = source  # the hostfile's name
        super().__init__(self._format())

    def _format(self) -> str:
        where = [w for w in (self.source, self.line is not None and f"line {self.line}",
                             self.position is not None and f"column {self.position + 1}") if w]
        text = f" in {self.text!r}" if self.text else ""
        return f"{self.problem}{text}" + (f" ({', '.join(where)})" if where else "")

    def pointer(self) -> str:
        """The text with a caret under the offending character, for a terminal."""
        if self.position is None:
            return self.text
        return f"{self.text}\n{' ' * self.position}^"


def expand(hostlist: str, *, limit: int = MAX_HOSTS) -> list[str]:
    """A Slurm hostlist to its host names, in order (``scontrol show hostnames``)."""
    hosts: list[str] = []
    for start, token in _tokens(hostlist):
        hosts.extend(_expand_token(hostlist, start, token, limit, len(hosts)))
    return hosts


def count(hostlist: str) -> int:
    """How many names a hostlist expands to, without expanding it."""
    return sum(_count(_parse_token(hostlist, s, t)) for s, t in _tokens(hostlist))


def _tokens(text: str) -> list[tuple[int, str]]:
    """Split at commas and whitespace outside brackets: [(start, token)]; brackets balanced."""
    tokens: list[tuple[int, str]] = []
    start: int | None = None
    open_at: int | None = None
    for i, ch in enumerate(text):
        if open_at is not None:
            if ch == "[":
                raise HostlistError("'[' inside brackets", text, i)
            if ch.isspace():
                raise HostlistError("space inside brackets", text, i)
            if ch == "]":
                open_at = None
            continue
        if ch == "," or ch.isspace():
            # empty names (",,", a trailing comma) are skipped, as Slurm skips them
            if start is not None:
                tokens.append((start, text[start:i]))
                start = None
            continue
        if start is None:
            start = i
        if ch == "[":
            open_at = i
        elif ch == "]":
            raise HostlistError("']' without a matching '['", text, i)
    if open_at is not None:
        raise HostlistError("'[' is never closed", text, open_at)
    if start is not None:
        tokens.append((start, text[start:]))
    return tokens


def _parse_token(text: str, base: int, token: str) -> Parts:
    parts: Parts = []
    pos = 0
    for m in _GROUP.finditer(token):
        parts.append(token[pos:m.start()])
        parts.append(_parse_ranges(text, base + m.start() + 1, m.group(1)))
        pos = m.end()
    parts.append(token[pos:])  # a suffix after the last group: node[1-2]-ib
    return parts


def _parse_ranges(text: str, at: int, body: str) -> list[Range]:
    ranges: list[Range] = []
    for piece in body.split(","):
        m = _RANGE.fullmatch(piece)
        if not m:
            problem = ("empty range" if not piece
                       else f"{piece!r} is not a number or a range lo-hi")
            raise HostlistError(problem, text, at)
        if max(len(m[1]), len(m[2] or "")) > _MAX_DIGITS:
            raise HostlistError(f"a number in {piece!r} has more than {_MAX_DIGITS} digits", text, at)
        lo = int(m[1])
        hi = int(m[2]) if m[2] is not None else lo
        if hi < lo:
            raise HostlistError(f"range {piece} is reversed (write {m[2]}-{m[1]})", text, at)
        ranges.append((lo, hi, len(m[1])))
        at += len(piece) + 1
    return ranges


def _count(parts: Parts) -> int:
    n = 1
    for part in parts[1::2]:
        n *= sum(hi - lo + 1 for lo, hi, _ in part)
    return n


def _expand_token(text: str, start: int, token: str, limit: int, so_far: int) -> list[str]:
    parts = _parse_token(text, start, token)
    if so_far + _count(parts) > limit:
        raise HostlistError(f"expands to more than {limit:,} hosts (a typo in a range?)",
                            text, start)
    choices = [[p] if isinstance(p, str) else
               [str(n).zfill(w) for lo, hi, w in p for n in range(lo, hi + 1)]
               for p in parts]
    return ["".join(c) for c in product(*choices)]


# --- hosts to a hostlist ------------------------------------------------------------------


def compress(hosts: Iterable[str]) -> str:
    """Host names to a short hostlist for display: ``node[01-04,07],gpu-a[1-2]``.

    Duplicates and order are not kept: ``expand(compress(h))`` is ``h`` without duplicates in
    natural order. Trailing numbers are bracketed per prefix (zero padding kept); then names
    that differ only in an earlier number and share the rest are merged into one more group
    (``rack1-node[01-02],rack2-node[01-02]`` -> ``rack[1-2]-node[01-02]``), repeatedly; an
    entry is written out name by name where that is shorter. Never longer than the names
    joined by commas, and always a hostlist Slurm itself reads (a group ends every name).
    """
    plain: set[str] = set()
    numbered: dict[str, list[str]] = {}
    for host in dict.fromkeys(hosts):
        # str methods, not a regex: "(.*?)([0-9]+)" retries the digit run from every position
        # of a long one (quadratic).
        prefix = host.rstrip(_DIGITS)
        digits = host[len(prefix):]
        if not digits or len(digits) > _MAX_DIGITS or any(c in host for c in "[],") \
                or any(c.isspace() for c in host):
            plain.add(host)
        else:
            numbered.setdefault(prefix, []).append(digits)
    entries: list[Parts] = [[prefix, _ranges(digits), ""] for prefix, digits in numbered.items()]
    while True:
        merged = _merge_once(entries)
        if len(merged) == len(entries):
            break
        entries = merged
    names = [name for e in entries for name in _shortest(e)] + list(plain)
    return ",".join(sorted(names, key=_natural_key))


def _shortest(parts: Parts) -> list[str]:
    """An entry's bracket form, or its names one by one where that is shorter (``n0,n1``
    rather than ``n[0-1]``); beyond a few names brackets always win."""
    bracketed = _render(parts)
    if _count(parts) <= 4:
        listed = expand(bracketed)
        if len(",".join(listed)) <= len(bracketed):
            return listed
    return [bracketed]


def _ranges(digits: Iterable[str]) -> list[Range]:
    """Digit strings to ranges, each extended only while its low bound's width writes the next
    number exactly as given (so "09","10" join as 09-10 but "9","010" do not)."""
    runs: list[Range] = []
    for d in sorted(set(digits), key=lambda d: (int(d), len(d))):
        n = int(d)
        if runs:
            lo, hi, w = runs[-1]
            if n == hi + 1 and str(n).zfill(w) == d:
                runs[-1] = (lo, n, w)
                continue
        runs.append((n, n, len(d)))
    return runs


def _merge_once(entries: list[Parts]) -> list[Parts]:
    """Merge entries whose leading literal differs only in its last number."""
    groups: dict[tuple, list[tuple[str, Parts]]] = {}
    kept: list[Parts] = []
    for parts in entries:
        head = parts[0]
        # head = prefix + number + middle (no digits in middle), split without a regex (see
        # compress)
        before = head.rstrip("".join(set(head) - set(_DIGITS)))
        middle = head[len(before):]
        prefix = before.rstrip(_DIGITS)
        number = before[len(prefix):]
        if not number or len(number) > _MAX_DIGITS:
            kept.append(parts)
            continue
        key = (prefix, middle, _render(["", *parts[1:]], force_brackets=True))
        groups.setdefault(key, []).append((number, parts))
    for (prefix, middle, _), members in groups.items():
        if len(members) == 1:
            kept.append(members[0][1])
        else:
            rest = members[0][1][1:]
            kept.append([prefix, _ranges(d for d, _ in members), middle, *rest])
    return kept


def _render(parts: Parts, force_brackets: bool = False) -> str:
    groups = parts[1::2]
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        body = ",".join(str(lo).zfill(w) if lo == hi else
                        f"{str(lo).zfill(w)}-{str(hi).zfill(w)}" for lo, hi, w in part)
        single = len(part) == 1 and part[0][0] == part[0][1]
        out.append(body if single and len(groups) == 1 and not force_brackets else f"[{body}]")
    return "".join(out)


def _natural_key(name: str) -> list:
    # Numbers compare by value without int() (no digit limit): by length without leading zeros,
    # then by digits.
    return [(0, len(p.lstrip("0")), p.lstrip("0"), p) if p and p[0] in _DIGITS
            else (1, 0, p, "") for p in _NUMBERS.split(name)]


# --- --hosts values and hostfiles -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One node to reach: its name (the label every reading carries) and an optional ssh user.

    Ports are not part of a target: they belong in ~/.ssh/config (``Host node*`` / ``Port``),
    which ssh reads for every node, or in ``--ssh-option=-p2222`` for all of them.
    """

    host: str
    user: str | None = None

    @property
    def destination(self) -> str:
        """What ssh is given: ``user@host`` or ``host``."""
        return f"{self.user}@{self.host}" if self.user else self.host


def parse_hosts(value: str, *, limit: int = MAX_HOSTS) -> list[Target]:
    """A ``--hosts`` value: comma-separated hostlists, each optionally ``user@hostlist``.

    ``node[01-16],gpu-a3``, ``alice@node[1-2],bob@login1``. A host given twice is kept once
    (one agent per node, the name is its label); twice with different users is an error.
    """
    targets: list[Target] = []
    for start, token in _tokens(value):
        targets.extend(_targets(value, start, token, limit, len(targets)))
    return _unique(targets, text=value)


def parse_hostfile(text: str, *, source: str = "hostfile",
                   limit: int = MAX_HOSTS) -> list[Target]:
    """A hostfile: one host (or hostlist) per line, optionally ``user@``; ``#`` starts a
    comment; blank lines are skipped.

    MPI hostfiles read as they are: ``key=value`` words after the host (Open MPI and
    DeepSpeed ``slots=8``, ``max_slots=8``) and MPICH's ``host:8`` process count are ignored.
    """
    targets: list[Target] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0]
        words = [(m.start(), m.group()) for m in re.finditer(r"\S+", line)]
        if not words:
            continue
        (start, token), rest = words[0], words[1:]
        for at, word in rest:
            if "=" not in word:
                raise HostlistError(f"one host per line: {word!r} is not key=value (slots=8)",
                                    line, at, lineno, source)
        m = re.fullmatch(r"([^:]+):[0-9]+", token)
        if m:  # MPICH "host:8": the number of processes, not a port
            token = m[1]
        try:
            try:
                parts = _tokens(token)
            except HostlistError as exc:  # its position is within the word: make it the line's
                raise HostlistError(exc.problem, line, start + exc.position) from None
            for at, part in parts:
                targets.extend(_targets(line, start + at, part, limit, len(targets)))
        except HostlistError as exc:
            raise HostlistError(exc.problem, line, exc.position, lineno, source) from None
    return _unique(targets, source=source)


def _targets(text: str, start: int, token: str, limit: int, so_far: int) -> list[Target]:
    user = None
    if "@" in token:
        user, _, token = token.partition("@")
        if not _USER_NAME.fullmatch(user):
            raise HostlistError(f"{user!r} is not a user name", text, start)
        start += len(user) + 1
    if token.count(":") >= 2 and _IPV6.fullmatch(token):
        return [Target(token, user)]  # an IPv6 address: no brackets, no ranges
    if ":" in token:
        raise HostlistError(
            "a port is not part of a host: set Port in ~/.ssh/config (Host ...) or pass "
            "--ssh-option=-pPORT", text, start + token.index(":"))
    hosts = _expand_token(text, start, token, limit, so_far)
    for host in hosts:
        # a name starting with '-' would reach ssh as an option
        if not _HOST_NAME.fullmatch(host):
            raise HostlistError(f"{host!r} is not a host name (letters, digits, . _ -)",
                                text, start)
    return [Target(h, user) for h in hosts]


def _unique(targets: list[Target], text: str = "", source: str = "") -> list[Target]:
    seen: dict[str, Target] = {}
    for t in targets:
        first = seen.setdefault(t.host, t)
        if first.user != t.user:
            raise HostlistError(f"{t.host} is given twice, as {first.destination} and "
                                f"{t.destination}", text, source=source)
    return list(seen.values())
