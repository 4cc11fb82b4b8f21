"""What the results mean and what to change (playbook section 2): the findings' vocabulary.
Pure. ``rltui.checks.workflow.report.findings`` reads a report into them."""

from __future__ import annotations

from dataclasses import dataclass

from rltui.checks.workflow.taskgroups import frame_text

PROBLEM, WARNING = "problem", "warning"

ADVICE = {
    "setup": "Fix the workflow's import or constructor first; nothing ran.",
    "input": "Fix the check's input (flags, dataset, interpreter); nothing ran.",
    "single": "One run on one sample must finish before concurrency means anything (AReaL's "
              "step 2): check the base URL and model name the workflow uses, and the traceback.",
    "errors": "Errors that appear only with many runs in flight usually come from a connection "
              "limit (the HTTP client's pool, the server's max concurrent requests, open files) "
              "or a rate limit. Share one async client per process with a pool as large as "
              "local_bs x group_size, raise the server's limit, or bound the trainer's "
              "concurrency (AReaL max_concurrent_rollouts).",
    "timeouts": "A deadlock suspect. Read the largest group of pending tasks: runs that wait on "
                "a lock, an event or a queue that only another run releases (an asyncio.Lock "
                "held across a slow call, an Event nobody sets) deadlock under concurrency. If "
                "they all wait on the HTTP call instead, the server is too slow for this many "
                "runs: raise --timeout or the server's capacity.",
    "blocked": "Sync code runs inside the event loop, and while it runs no other run makes "
               "progress. A threading.Lock held across an await deadlocks as soon as two runs "
               "meet; time.sleep, requests/urllib or heavy reward code stall every run. Use "
               "asyncio.Lock, asyncio.sleep, an async HTTP client, or "
               "`await asyncio.to_thread(...)` for blocking work.",
    "invalid": "run must return a finite number or a dict of str -> finite number; the trainer "
               "would crash on these, or worse, train on them.",
    "leak": "At temperature 0 a run's reward must not depend on what else runs at the same "
            "time. Different results mean state shared between concurrent runs: attributes set "
            "on self (or the class) in run, module globals, a shared conversation or tool "
            "object. Keep per-run state in local variables or per-run objects.",
    "group": "At temperature 0 the runs of one prompt disagree among themselves: the server "
             "samples despite temperature=0 (is it passed on?) or runs share state.",
    "crashed": "The worker process died under the workflow: os._exit or sys.exit from a "
               "thread, a crash in native code, or the OOM killer. Its stderr tail is below.",
    "silent": "Not even the worker's watchdog thread could run: native code holding the GIL "
              "(a C extension call, a catastrophic regular expression) or a stopped process.",
    "server": "The base URL refuses connections: the runs will fail. Start the inference "
              "server or pass --base-url.",
}


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str
    title: str
    advice: str
    detail: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "severity": self.severity, "title": self.title,
                "detail": self.detail, "advice": self.advice}


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _block_where(block: dict) -> str:
    where = block.get("where")
    code = (where or {}).get("code")
    return f"at {frame_text(where) if where else '(unknown)'}" + (f": `{code}`" if code else "")


def block_findings(blocks: list) -> list[Finding]:
    """One finding per place where the loop was blocked (a sync call blocks it once per run)."""
    places: dict[str, list] = {}
    for block in blocks:
        places.setdefault(_block_where(block), []).append(block)
    out = []
    for at, group in places.items():
        steps = ", ".join(dict.fromkeys(b.get("step") or "loading" for b in group))
        longest = max(float(b.get("blocked_s") or b.get("for_s") or 0) for b in group)
        if all(b.get("recovered") for b in group):
            times = f"for {longest:.1f} s" if len(group) == 1 else \
                f"{len(group)} times (up to {longest:.1f} s)"
            title = f"the event loop was blocked {times} {at}"
        else:
            title = f"the event loop stayed blocked {at} ({longest:.1f} s, until the worker " \
                    "was ended)"
        out.append(Finding("loop-blocked", PROBLEM, title, ADVICE["blocked"],
                           f"in the {steps} step{'s' if ',' in steps else ''}"))
    return out
