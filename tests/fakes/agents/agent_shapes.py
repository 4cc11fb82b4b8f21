"""Classes that are not workflows, each in its own way."""


class NoRun:
    async def rollout(self, data, **extra_kwargs):
        return 1.0


class SyncRun:
    def run(self, data, **extra_kwargs):
        return 1.0


class BadInit:
    def __init__(self):
        raise ValueError("tokenizer path is missing")

    async def run(self, data, **extra_kwargs):
        return 1.0


class NarrowRun:
    async def run(self, data):
        return 1.0


def not_a_class():
    return None


class IsolationProbe:
    """Reports what the worker's interpreter can import of rltui: only the worker's modules."""

    async def run(self, data, **extra_kwargs):
        import importlib.util
        import sys
        return {"rltui_cli": float(importlib.util.find_spec("rltui.cli") is not None),
                "textual": float(importlib.util.find_spec("textual") is not None),
                "rltui_worker": float("rltui.checks.workflow.taskdump" in sys.modules),
                "rewards_is_ours": float("rewards" in sys.modules)}
