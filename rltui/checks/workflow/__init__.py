"""Agent-workflow check: run ``module:Class`` once, then at RL concurrency, in a child process.

``run(spec, progress=..., cancel=...) -> WorkflowReport`` is the entry point (CLI and app);
``WorkflowSpec`` says what to check. Names load lazily: the worker process imports this package
under the workflow's interpreter and must not pull in the parent's side.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WorkflowSpec", "WorkflowReport", "RunResult", "SpecError", "run"]

_WHERE = {"WorkflowSpec": "spec", "SpecError": "spec", "WorkflowReport": "report",
          "RunResult": "results", "run": "runner"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
