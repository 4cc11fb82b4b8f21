"""A small fake distributed training job that really hangs, for demos and integration tests.

``DemoJob(scenario).start()`` launches rank processes that train, log verl-style step lines and,
depending on the scenario, block in real socket reads inside ``all_reduce``,
``recv_object_list`` or ``destroy_process_group``, so that ``py-spy dump`` shows the hang
patterns of the triage playbook. Pure Python, no GPU. See docs/demo.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DemoJob", "SCENARIOS"]


def __getattr__(name: str) -> Any:
    # Lazy, so that a rank (``python -m rltui.demo.rank``) or ``python -m rltui.demo.job`` does
    # not import the launcher twice or pull subprocess and socketserver into every rank.
    if name == "DemoJob":
        from rltui.demo.job import DemoJob
        return DemoJob
    if name == "SCENARIOS":
        from rltui.demo.scenarios import SCENARIOS
        return SCENARIOS
    raise AttributeError(f"module 'rltui.demo' has no attribute {name!r}")
