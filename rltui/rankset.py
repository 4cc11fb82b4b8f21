"""Compact rank sets, as STAT prints them: ``[0, 1, 2, 3, 5, 7, 8]`` -> ``"0-3,5,7-8"``."""

from __future__ import annotations

from collections.abc import Iterable


def compact(ranks: Iterable[int | None]) -> str:
    values = sorted({r for r in ranks if r is not None})
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def expand(text: str) -> list[int]:
    """Inverse of ``compact``; raises ValueError on malformed input."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, sep, hi = part.partition("-")
        if sep:
            a, b = int(lo), int(hi)
            if b < a:
                raise ValueError(f"descending range {part!r}")
            out.extend(range(a, b + 1))
        else:
            out.append(int(lo))
    return sorted(set(out))


def label(ranks: Iterable[int | None]) -> str:
    """"rank 3" or "ranks 0-2,5": the compact set with the right noun."""
    values = {r for r in ranks if r is not None}
    return f"{'rank' if len(values) == 1 else 'ranks'} {compact(values)}"
