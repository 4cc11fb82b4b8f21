"""The workflow check's report: JSON (a public contract, docs/workflow-check.md), text for a
terminal and markdown for an issue or a PR."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltui.checks.workflow import analysis
from rltui.checks.workflow.findings import ADVICE, PROBLEM, WARNING, Finding, block_findings, plural
from rltui.checks.workflow.results import RunResult
from rltui.checks.workflow.taskgroups import STATE_TEXT, frame_text
from rltui.checks.workflow.tracebacks import excerpt

EXIT_PASSED, EXIT_PROBLEMS, EXIT_INPUT, EXIT_UNFINISHED = 0, 1, 2, 3
# Why the worker was ended early that leave the check without an answer (exit 3); a worker
# ended because its event loop stayed blocked gave the answer (a deadlock, exit 1).
UNFINISHED = ("cancelled", "crashed", "silent", "startup_timeout", "internal")


def _shown(frames: list, depth: int) -> list:
    """The frames worth printing: from the caller of the user's innermost frame inwards (the
    asyncio machinery below it included), at most ``depth + 2``."""
    users = [i for i, f in enumerate(frames) if f.get("kind") == "user"]
    start = max(0, users[-1] - 1) if users else max(0, len(frames) - depth)
    return frames[start:][:depth + 2]


@dataclass
class WorkflowReport:
    target: str
    shape: dict
    timeout_s: float
    temperature: Any = 0
    base_url: str | None = None
    api_key_set: bool = False
    server: dict | None = None
    worker: dict = field(default_factory=dict)
    setup_error: dict | None = None
    single: RunResult | None = None
    sequential: list = field(default_factory=list)
    concurrent: list = field(default_factory=list)
    concurrent_wall_s: float | None = None
    concurrent_skipped: str | None = None
    pending_tasks: dict | None = None
    loop_blocks: list = field(default_factory=list)
    worker_end: dict | None = None
    partial: bool = False
    partial_reason: str | None = None
    notes: list = field(default_factory=list)
    skipped: list = field(default_factory=list)     # dataset lines skipped (SkippedLine)
    wall_s: float = 0.0

    # -- numbers -------------------------------------------------------------------------
    def concurrency_json(self) -> dict:
        n = analysis.counts(self.concurrent)
        requested = self.shape.get("requested", 0)
        wall = self.concurrent_wall_s
        return {"requested": requested, **n,
                "not_run": max(0, requested - sum(n.values())),
                "errors": analysis.errors_by_type(self.concurrent),
                "error_count": n["errors"],
                **analysis.latency(self.concurrent),
                "throughput": round(n["completed"] / wall, 3) if wall else None,
                "wall_s": wall, "skipped": self.concurrent_skipped}

    def invalid_rewards(self) -> list[dict]:
        runs = ([self.single] if self.single else []) + self.sequential + self.concurrent
        return analysis.invalid_rewards(runs)

    def agreement(self) -> tuple[bool | None, dict]:
        if not self.concurrent:
            return None, {"compared": 0, "disagreements": [], "groups_differing": [],
                          "reason": self.concurrent_skipped or "no concurrent runs"}
        return analysis.agreement(self.sequential, self.concurrent, self.temperature)

    def findings(self) -> list[Finding]:
        return findings(self)

    def server_down(self) -> bool:
        """The base URL refused connections and step one failed: the runs failed for want of a
        server, which says nothing about the workflow."""
        return bool(self.server) and self.server.get("reachable") is False \
            and self.single is not None and not self.single.valid

    @property
    def verdict(self) -> str:
        if self.setup_error:
            return "setup_error"
        if self.worker_end and self.worker_end.get("reason") in UNFINISHED:
            return "could_not_finish"
        if self.server_down():
            return "could_not_finish"
        if any(f.severity == PROBLEM for f in self.findings()):
            return "problems"
        return "passed"

    def exit_code(self) -> int:
        return {"setup_error": EXIT_INPUT, "could_not_finish": EXIT_UNFINISHED,
                "problems": EXIT_PROBLEMS}.get(self.verdict, EXIT_PASSED)

    # -- JSON ----------------------------------------------------------------------------
    def _single_json(self) -> dict:
        s = self.single
        if s is None:
            reason = (self.setup_error or {}).get("message") or self.partial_reason
            return {"ok": False, "status": "not_run", "error": reason, "latency_s": None,
                    "reward": None}
        error = None
        if s.status == "error":
            error = f"{s.error_type}: {s.message}"
        elif s.status in ("timeout", "unfinished"):
            error = s.message or f"did not finish within {self.timeout_s:g} s"
        elif s.invalid:
            error = f"invalid reward: {s.invalid['reason']}"
        return {"ok": s.valid, "status": s.status, "error": error, "error_type": s.error_type,
                "traceback": s.traceback, "latency_s": s.latency_s, "reward": s.reward}

    def to_json(self) -> dict:
        agree, details = self.agreement()
        return {
            "target": self.target, "verdict": self.verdict, **self.shape,
            "timeout_s": self.timeout_s, "temperature": self.temperature,
            "base_url": self.base_url, "api_key_set": self.api_key_set, "server": self.server,
            "setup_error": self.setup_error,
            "single": self._single_json(),
            "sequential": [r.to_json() for r in self.sequential],
            "concurrency": self.concurrency_json(),
            "invalid_rewards": self.invalid_rewards(),
            "sequential_vs_concurrent_agree": agree,
            "agreement": details,
            "pending_tasks": self.pending_tasks,
            "loop_blocked": self.loop_blocks[0] if self.loop_blocks else None,
            "loop_blocks": self.loop_blocks,
            "worker": self.worker, "worker_end": self.worker_end,
            "partial": self.partial, "partial_reason": self.partial_reason,
            "findings": [f.to_json() for f in self.findings()],
            "notes": self.notes,
            "skipped": [{"line": s.line, "reason": s.reason} for s in self.skipped],
            "wall_s": round(self.wall_s, 3),
            "runs": [r.to_json(traceback=False) for r in self.concurrent],
        }

    # -- text ----------------------------------------------------------------------------
    def _shape_line(self) -> str:
        s = self.shape
        limit = s.get("concurrency_limit")
        cap = f", at most {limit} at a time" if limit else ""
        return (f"global_bs {s['global_bs']} / rollout_dp_size {s['rollout_dp_size']} = "
                f"local_bs {s['local_bs']} prompts x group_size {s['group_size']} = "
                f"{s['requested']} runs at once{cap}; timeout {self.timeout_s:g} s per run")

    def _lines(self, md: bool) -> list[str]:
        out = [f"shape: {self._shape_line()}"]
        if self.server:
            state = "reachable" if self.server.get("reachable") else \
                f"NOT reachable: {self.server.get('error')}"
            out.append(f"server: {self.server.get('url')} ({state})")
        if self.setup_error:
            err = self.setup_error
            out.append(f"setup error ({err['kind']}): {err['message']}")
            tb = excerpt(err.get("traceback"), 30)
            if tb:
                out += (["```"] + tb + ["```"]) if md else ["  " + t for t in tb]
            return out
        single = self._single_json()
        if single["status"] == "ok" and single["ok"]:
            out.append(f"step one, a single run: ok in {single['latency_s']:.3f} s, reward "
                       f"{single['reward']!r}")
        else:
            out.append(f"step one, a single run: {single['status']}: {single['error']}")
        if self.sequential:
            n = analysis.counts(self.sequential)
            out.append(f"sequential: {len(self.sequential)} runs, {n['completed']} returned, "
                       f"{n['errors']} errors, {n['timeouts']} timeouts")
        c = self.concurrency_json()
        if c["skipped"]:
            out.append(f"concurrent: skipped: {c['skipped']}")
        else:
            lat = ", ".join(f"{k} {c[k]:.3f} s" for k in ("p50", "p95", "max")
                            if c[k] is not None) or "no completed runs"
            tput = f"; throughput {c['throughput']:.1f} runs/s" if c["throughput"] else ""
            out.append(f"concurrent: {c['requested']} requested, {c['completed']} completed, "
                       f"{c['error_count']} errors, {c['timeouts']} timeouts"
                       + (f", {c['unfinished']} unfinished" if c["unfinished"] else "")
                       + (f", {c['not_run']} not run" if c["not_run"] else "")
                       + f"; latency {lat}{tput}")
        agree, details = self.agreement()
        if agree is None:
            out.append(f"sequential vs concurrent: not compared ({details['reason']})")
        else:
            verdict = (f"{len(details['disagreements'])} DISAGREE" if not agree
                       else "all agree")
            out.append(f"sequential vs concurrent (temperature 0): {details['compared']} "
                       f"prompt(s) compared, {verdict}")
        if self.partial:
            out.append(f"partial: {self.partial_reason}")
        return out

    def _error_blocks(self, md: bool, tb_lines: int) -> list[str]:
        out = []
        groups = analysis.errors_by_type(([self.single] if self.single else [])
                                         + self.sequential + self.concurrent)
        for name, g in groups.items():
            runs = ", ".join(map(str, g["runs"][:12])) + (" ..." if len(g["runs"]) > 12 else "")
            out.append(f"{name} x{g['count']}: {g['message']} (runs {runs})")
            tb = excerpt(g.get("traceback"), tb_lines)
            if tb:
                out += (["```"] + tb + ["```"]) if md else ["    " + t for t in tb]
        return out

    @staticmethod
    def _task_groups(groups: list, md: bool, depth: int = 6) -> list[str]:
        out = []
        for g in groups[:8]:
            more = " ..." if len(g["runs"]) > 10 else ""
            runs = f", runs {', '.join(map(str, g['runs'][:10]))}{more}" if g["runs"] else ""
            state = g.get("state", "waiting")
            if state != "waiting" and g["frames"]:
                waiting = f", {STATE_TEXT.get(state, state)}"
            else:
                waiting = f", waiting in {g['waiting_on']}" if g.get("waiting_on") else ""
            out.append(f"{g['count']} x {g['where']}{waiting}{runs}")
            frames = [f"  {frame_text(f)}: {f['code']}" for f in _shown(g["frames"], depth)]
            out += (["```"] + frames + ["```"]) if md and frames else ["  " + f for f in frames]
        return out

    def _details(self, md: bool) -> list[tuple[str, list[str]]]:
        sections = []
        errors = self._error_blocks(md, 40 if md else 12)
        if errors:
            sections.append(("Errors by type", errors))
        if self.pending_tasks:
            p = self.pending_tasks
            when = "when cancelled" if p.get("why") == "cancelled" else "at the first timeout"
            sections.append((f"Pending tasks {when} ({p.get('step')} step, "
                             f"{p.get('task_count')} tasks)", self._task_groups(p["groups"], md)))
        for block in self.loop_blocks[:2]:
            stack = [f"  {frame_text(f)}: {f['code']}" for f in (block.get("stack") or [])[-10:]]
            lines = (["```"] + stack + ["```"]) if md else stack
            lines += ["pending tasks:"] + self._task_groups(block.get("tasks") or [], md, 4)
            sections.append((f"Event loop blocked ({block.get('step')} step): loop thread stack",
                             lines))
        invalid = self.invalid_rewards()
        if invalid:
            sections.append(("Invalid rewards", [
                f"{i['step']} run {i['run']} (prompt {i['prompt']}): {i['reason']}: {i['repr']}"
                for i in invalid[:20]]))
        agree, details = self.agreement()
        if details.get("disagreements"):
            sections.append(("Sequential vs concurrent disagreements", [
                f"prompt {d['prompt']}: {d['sequential']!r} alone, {d['concurrent']!r} "
                f"concurrently (runs {d['runs']})" for d in details["disagreements"]]))
        tail = (self.worker_end or {}).get("stderr_tail")
        if tail and (self.worker_end or {}).get("reason") != "done":
            sections.append(("Worker stderr (last lines)",
                             (["```"] + tail + ["```"]) if md else ["  " + t for t in tail]))
        if self.notes:
            sections.append(("Notes", self.notes))
        return sections

    def to_text(self) -> str:
        out = [f"workflow-check {self.target}: {self.verdict.replace('_', ' ').upper()}", ""]
        out += self._lines(md=False)
        found = [f for f in self.findings() if f.id != "setup-error"]
        if self.setup_error:
            out.append(f"  -> {self.findings()[0].advice}")
        if found:
            out += ["", "Findings:"]
            for f in found:
                out.append(f"  [{f.severity}] {f.title}")
                if f.detail:
                    out.append(f"      {f.detail}")
                out.append(f"      -> {f.advice}")
        for title, lines in self._details(md=False):
            out += ["", f"{title}:"] + ["  " + line for line in lines]
        return "\n".join(out) + "\n"

    def to_markdown(self) -> str:
        out = [f"# Workflow check: `{self.target}`", "",
               f"**Verdict: {self.verdict.replace('_', ' ')}**", ""]
        out += [f"- {line}" for line in self._lines(md=True)]
        found = self.findings()
        if found:
            out += ["", "## Findings", "", "| severity | finding | what to change |",
                    "| --- | --- | --- |"]
            for f in found:
                title = (f.title + (f" ({f.detail})" if f.detail else "")).replace("|", "\\|")
                out.append(f"| {f.severity} | {title} | {f.advice.replace('|', chr(92) + '|')} |")
        for title, lines in self._details(md=True):
            out += ["", f"## {title}", ""]
            in_code = False
            for line in lines:
                if line == "```":
                    in_code = not in_code
                    out.append(line)
                else:
                    out.append(line if in_code else f"- {line}")
        return "\n".join(out) + "\n"


def findings(report: WorkflowReport) -> list[Finding]:
    """What the report's results mean, problems first as they were found."""
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
    out += block_findings(report.loop_blocks)
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
                           f"{plural(len(invalid), 'run')} returned an invalid reward, e.g. "
                           f"{first['step']} run {first['run']}: {first['reason']} "
                           f"({first['repr']})", ADVICE["invalid"]))
    agree, details = report.agreement()
    if agree is False:
        d = details["disagreements"][0]
        out.append(Finding("sequential-vs-concurrent", PROBLEM,
                           f"sequential and concurrent results disagree on "
                           f"{plural(len(details['disagreements']), 'prompt')} of "
                           f"{details['compared']} at temperature 0, e.g. prompt {d['prompt']}: "
                           f"{d['sequential']!r} alone, {d['concurrent'][:4]!r} concurrently",
                           ADVICE["leak"]))
    if details.get("groups_differing"):
        out.append(Finding("group-disagrees", WARNING,
                           f"at temperature 0 the concurrent runs of "
                           f"{plural(len(details['groups_differing']), 'prompt')} disagree "
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
