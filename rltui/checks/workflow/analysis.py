"""Pure numbers over run results: percentiles, errors by type, invalid rewards, and whether the
sequential and concurrent results agree."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from rltui.checks.workflow.results import RunResult
from rltui.checks.workflow.rewards import rewards_equal


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def percentile(values: Iterable[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks (numpy's default); None for no values."""
    data = sorted(values)
    if not data:
        return None
    pos = (len(data) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def counts(results: list[RunResult]) -> dict[str, int]:
    out = {"completed": 0, "errors": 0, "timeouts": 0, "unfinished": 0}
    key = {"ok": "completed", "error": "errors", "timeout": "timeouts",
           "unfinished": "unfinished"}
    for r in results:
        out[key[r.status]] += 1
    return out


def latency(results: list[RunResult]) -> dict[str, float | None]:
    """p50/p95/max over the runs that returned (whatever their reward)."""
    done = [r.latency_s for r in results if r.status == "ok" and r.latency_s is not None]
    return {"p50": _round(percentile(done, 0.5)), "p95": _round(percentile(done, 0.95)),
            "max": _round(max(done) if done else None)}


def errors_by_type(results: list[RunResult]) -> dict[str, dict]:
    """``{type: {count, message (the first), traceback (the first), runs}}``, most frequent
    first."""
    groups: dict[str, dict] = {}
    for r in results:
        if r.status != "error":
            continue
        g = groups.setdefault(r.error_type or "Exception",
                              {"count": 0, "message": r.message, "traceback": r.traceback,
                               "runs": []})
        g["count"] += 1
        g["runs"].append(r.run)
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["count"]))


def invalid_rewards(results: list[RunResult]) -> list[dict]:
    return [{"step": r.step, "run": r.run, "prompt": r.prompt, **(r.invalid or {})}
            for r in results if r.status == "ok" and r.invalid]


def _temperature_is_zero(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def agreement(sequential: list[RunResult], concurrent: list[RunResult],
              temperature: Any) -> tuple[bool | None, dict]:
    """Compare each sequential run with the concurrent runs of the same prompt. At temperature 0
    they must return the same reward; a difference means state leaks between concurrent runs.
    ``(True|False, details)``, or ``(None, details with a reason)`` when nothing could be
    compared."""
    details: dict = {"compared": 0, "disagreements": [], "reason": None,
                     "groups_differing": []}
    if not _temperature_is_zero(temperature):
        details["reason"] = (f"temperature is {temperature!r}, not 0: sampled results may "
                             "differ legitimately")
        return None, details
    by_prompt: dict[int, list[RunResult]] = defaultdict(list)
    for r in concurrent:
        if r.valid:
            by_prompt[r.prompt].append(r)
    for prompt, runs in sorted(by_prompt.items()):
        if any(not rewards_equal(runs[0].reward, r.reward) for r in runs[1:]):
            details["groups_differing"].append(prompt)
    if not sequential:
        details["reason"] = "no sequential runs"
        return None, details
    for s in sequential:
        others = by_prompt.get(s.prompt, [])
        if not s.valid or not others:
            continue
        details["compared"] += 1
        differing = [r.run for r in others if not rewards_equal(s.reward, r.reward)]
        if differing:
            details["disagreements"].append({
                "prompt": s.prompt, "sequential": s.reward,
                "concurrent": [r.reward for r in others][:16], "runs": differing})
    if not details["compared"]:
        details["reason"] = ("no prompt has a valid reward in both the sequential and the "
                             "concurrent runs")
        return None, details
    return not details["disagreements"], details
