"""Rollout consistency: does the inference server reproduce a reference (a local HF model or a
second endpoint), greedy, on the same token ids? (docs/rollout-check.md)

Public API: ``RolloutSpec``, ``run(spec, *, progress=None, cancel=None) -> RolloutReport``,
``RolloutReport`` (``to_json()``, ``to_markdown()``, ``to_text()``, ``exit_code()``),
``SampleResult`` and ``sorted_results(report)`` (worst first, for a results table).

Importing this package is cheap and pure: names load on first use, so the pure modules
(spec, compare, report) come without asyncio, and torch, transformers and the HTTP client load
only when a run starts.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RolloutReport", "RolloutSpec", "SampleResult", "SpecError", "run",
           "sorted_results"]

_WHERE = {"RolloutReport": "report", "SampleResult": "report", "sorted_results": "report",
          "run": "runner", "RolloutSpec": "spec", "SpecError": "spec"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
