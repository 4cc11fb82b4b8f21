"""Pure: a table folded to one line per group, for a terminal too short for the table.

At 80x24 with symptoms on screen the incident and its evidence matter more than the rows; the
GPU and rank tables each fold to one sentence that still says what the rows would:
``8 GPUs: 6 busy, 2 idle, 61-78 GiB`` and ``16 ranks: 12 wait in all_reduce, 4 in
destroy_process_group``. Groups are the largest first; a group's verb is said once for a run
of groups sharing it ("12 wait in all_reduce, 4 in barrier").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

GIB = 1024**3
MAX_GROUPS = 4  # more groups than this read as a table again: the rest are counted together

Doing = tuple[str, str]  # (verb, what): ("wait in", "all_reduce"), ("", "running")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def groups(noun: tuple[str, str], doing: Sequence[Doing]) -> str:
    """``noun`` (singular, plural) counted, then each group of equal ``doing``, largest first
    (ties in the order first seen), at most MAX_GROUPS of them."""
    head = _count(len(doing), *noun)
    if not doing:
        return head
    counts = Counter(doing)
    first = {d: i for i, d in reversed(list(enumerate(doing)))}
    ordered = sorted(counts, key=lambda d: (-counts[d], first[d]))
    shown, rest = ordered[:MAX_GROUPS], ordered[MAX_GROUPS:]
    if len(ordered) == MAX_GROUPS + 1:  # "1 other" says less than the group itself
        shown, rest = ordered, []
    parts: list[str] = []
    verb_before = None
    for shown_verb, what in shown:
        verb = shown_verb
        if verb == verb_before:  # "wait in all_reduce, 4 in barrier": the verb once
            verb = verb.partition(" ")[2]
        said = f"{verb} {what}" if verb else what
        parts.append(f"{counts[(shown_verb, what)]} {said}")
        verb_before = shown_verb
    if rest:
        parts.append(f"{sum(counts[d] for d in rest)} other")
    return f"{head}: " + ", ".join(parts)


def gib_range(used: Sequence[int]) -> str:
    """Memory used as whole GiB, low to high: ``61-78 GiB`` (one value when all round alike)."""
    if not used:
        return ""
    low, high = round(min(used) / GIB), round(max(used) / GIB)
    return f"{low} GiB" if low == high else f"{low}-{high} GiB"


def gpu_groups(utils: Sequence[float | None], used: Sequence[int], idle_pct: float,
               busy_pct: float, errors: int = 0) -> str:
    """The GPU table in one line: how many busy (at or over ``busy_pct``), idle (at or under
    ``idle_pct``), in between (their range), without a reading, unreadable; then the memory
    used across them."""
    n = len(utils) + errors
    busy = sum(1 for u in utils if u is not None and u >= busy_pct)
    idle = sum(1 for u in utils if u is not None and u <= idle_pct)
    between = [u for u in utils if u is not None and idle_pct < u < busy_pct]
    unknown = sum(1 for u in utils if u is None)
    parts = []
    if busy:
        parts.append(f"{busy} busy")
    if idle:
        parts.append(f"{idle} idle")
    if between:
        low, high = round(min(between)), round(max(between))
        parts.append(f"{len(between)} at {low}%" if low == high
                     else f"{len(between)} at {low}-{high}%")
    if unknown:
        parts.append(f"{unknown} no reading")
    if errors:
        parts.append(f"{errors} unreadable")
    memory = gib_range(used)
    if memory:
        parts.append(memory)
    head = _count(n, "GPU", "GPUs")
    return f"{head}: " + ", ".join(parts) if parts else head
