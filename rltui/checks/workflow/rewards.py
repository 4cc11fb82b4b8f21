"""What a workflow's ``run`` may return, and when two rewards are the same. Pure; standard
library only (the worker process imports it under the user's interpreter).

A reward is a finite real number (``int``, ``float``, numpy scalars) or a dict of ``str`` ->
finite number, the shapes RL trainers (AReaL, verl) accept. ``bool`` is refused on purpose:
``True`` is an ``int`` in Python and would train silently as 1.0, but it almost always means a
check result was returned instead of a reward.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

REPR_LIMIT = 200
TOLERANCE = 1e-9


@dataclass(frozen=True)
class RewardProblem:
    """Why a returned value is not a reward, and a short repr of it."""

    reason: str
    repr: str


def short_repr(value: Any, limit: int = REPR_LIMIT) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - a broken __repr__ must not break the check
        text = f"<{type(value).__name__} whose repr failed: {exc!r}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ in ("bool", "bool_", "bool8")


def _number_problem(value: Any) -> str | None:
    if _is_bool(value):
        return "a bool is not a reward (True would train as 1.0); return a float"
    if not isinstance(value, numbers.Real):
        hint = " (a tensor or array? return .item())" if hasattr(value, "item") else ""
        return f"{type(value).__name__} is not a number{hint}"
    if not math.isfinite(value):
        return f"{float(value)!r} is not a finite number"
    return None


def _plain(value: Any) -> Any:
    """numpy scalars (numbers.Real) as plain int/float, for JSON."""
    if isinstance(value, (int, float)):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def check_reward(value: Any) -> tuple[Any, RewardProblem | None]:
    """``(reward, None)`` with the reward as plain JSON data (int/float, or a dict of them), or
    ``(None, problem)`` when ``value`` is not a reward."""
    if isinstance(value, dict):
        if not value:
            return None, RewardProblem("an empty dict has no reward", short_repr(value))
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                return None, RewardProblem(f"dict key {short_repr(key, 40)} is not a string",
                                           short_repr(value))
            problem = _number_problem(item)
            if problem:
                return None, RewardProblem(f"key {key!r}: {problem}", short_repr(value))
            out[key] = _plain(item)
        return out, None
    problem = _number_problem(value)
    if problem:
        if value is None:
            problem = "run returned None (a missing return statement?)"
        return None, RewardProblem(problem, short_repr(value))
    return _plain(value), None


def rewards_equal(a: Any, b: Any, tolerance: float = TOLERANCE) -> bool:
    """Two valid rewards agree: numbers within ``tolerance``, dicts with the same keys and every
    value within it."""
    if isinstance(a, dict) or isinstance(b, dict):
        if not (isinstance(a, dict) and isinstance(b, dict)) or a.keys() != b.keys():
            return False
        return all(abs(a[k] - b[k]) <= tolerance for k in a)
    return abs(a - b) <= tolerance
