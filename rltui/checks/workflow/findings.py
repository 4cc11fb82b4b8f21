"""What the results mean and what to change (playbook section 2). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rltui.checks.workflow.taskgroups import frame_text

if TYPE_CHECKING:
    from rltui.checks.workflow.report import WorkflowReport

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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _block_where(block: dict) -> str:
    where = block.get("where")
    code = (where or {}).get("code")
    return f"at {frame_text(where) if where else '(unknown)'}" + (f": `{code}`" if code else "")


def _block_findings(blocks: list) -> list[Finding]:
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


def findings(report: "WorkflowReport") -> list[Finding]:
    out: list[Finding] = []
    if report.setup_error:
        err = report.setup_error
        advice = ADVICE["input"] if err.get("kind") in ("input", "python") else ADVICE["setup"]
        out.append(Finding("setup-error", PROBLEM, err["message"], advice))
        return out
    server = report.server
    if server and not server.get("reachable"):
        out.append(Finding("server-unreachable", WARNING,
                           f"{server.get('url')}: {server.get('error')}", ADVICE["server"]))
    single = report.single
    if single is not None and single.status == "error":
        out.append(Finding("single-run-failed", PROBLEM,
                           f"one run on one sample fails: {single.error_type}: {single.message}",
                           ADVICE["single"]))
    elif single is not None and single.status == "timeout":
        why = single.message or f"not within {report.timeout_s:g} s"
        out.append(Finding("single-run-timeout", PROBLEM,
                           f"one run on one sample did not finish: {why}", ADVICE["single"]))
    out += _block_findings(report.loop_blocks)
    c = report.concurrency_json()
    requested = c["requested"]
    if c["errors"]:
        kinds = ", ".join(f"{k} x{v['count']}" for k, v in c["errors"].items())
        n = sum(v["count"] for v in c["errors"].values())
        only = " (the single run passed)" if single is not None and single.valid else ""
        out.append(Finding("errors-under-concurrency", PROBLEM,
                           f"{n} of {requested} concurrent runs raised{only}: {kinds}",
                           ADVICE["errors"]))
    if c["timeouts"]:
        groups = (report.pending_tasks or {}).get("groups") or []
        detail = "; ".join(f"{g['count']} waiting at {g['where']}" for g in groups[:3])
        if not groups and report.loop_blocks:
            detail = "they were stuck behind the blocked event loop: see the finding above"
        out.append(Finding("timeouts", PROBLEM,
                           f"{c['timeouts']} of {requested} concurrent runs did not finish "
                           f"within {report.timeout_s:g} s: a deadlock suspect", ADVICE["timeouts"],
                           detail))
    invalid = report.invalid_rewards()
    if invalid:
        first = invalid[0]
        out.append(Finding("invalid-rewards", PROBLEM,
                           f"{_plural(len(invalid), 'run')} returned an invalid reward, e.g. "
                           f"{first['step']} run {first['run']}: {first['reason']} "
                           f"({first['repr']})", ADVICE["invalid"]))
    agree, details = report.agreement()
    if agree is False:
        d = details["disagreements"][0]
        out.append(Finding("sequential-vs-concurrent", PROBLEM,
                           f"sequential and concurrent results disagree on "
                           f"{_plural(len(details['disagreements']), 'prompt')} of "
                           f"{details['compared']} at temperature 0, e.g. prompt {d['prompt']}: "
                           f"{d['sequential']!r} alone, {d['concurrent'][:4]!r} concurrently",
                           ADVICE["leak"]))
    if details.get("groups_differing"):
        out.append(Finding("group-disagrees", WARNING,
                           f"at temperature 0 the concurrent runs of "
                           f"{_plural(len(details['groups_differing']), 'prompt')} disagree "
                           "among themselves", ADVICE["group"]))
    end = report.worker_end or {}
    if end.get("reason") == "crashed":
        out.append(Finding("worker-died", PROBLEM,
                           f"the worker process died during the {end.get('step') or 'check'} "
                           f"step ({end.get('how')})", ADVICE["crashed"]))
    elif end.get("reason") == "silent":
        out.append(Finding("worker-silent", PROBLEM,
                           f"the worker stopped answering for {end.get('after_s', 0):.0f} s "
                           f"during the {end.get('step') or 'check'} step and was ended",
                           ADVICE["silent"]))
    return out
