"""``run(spec)``: drive the worker process through the steps and fold what it reports.

The parent never runs user code. It starts the worker (``worker.py``, from a folder holding only
the worker's modules) in its own session, so that the workflow's own subprocesses end with it;
hands it the configuration on stdin (the API key never goes on a command line); reads its JSON
lines from a thread; and ends it on cancel, when its event loop stays blocked past the per-run
timeout, when it goes silent (not even the watchdog thread's heartbeat), or when loading takes
too long. Whatever it reported before that stays in the report.

Two workers per check: one for step one (a single run) and a fresh one for the sequential pass
and the concurrent step, so that a first run that wedges its loop does not take the rest with it
(``force``).
"""

from __future__ import annotations

import os
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from rltui.checks.progress import Progress, ProgressCallback, cancelled, report_progress
from rltui.checks.workflow import spec as specmod
from rltui.checks.workflow.process import EOF, Worker, probe, worker_env, worker_package
from rltui.checks.workflow.report import WorkflowReport
from rltui.checks.workflow.results import RunResult
from rltui.checks.workflow.scrub import Scrubber, secrets_of
from rltui.checks.workflow.spec import SpecError, WorkflowSpec
from rltui.redact import redact_url

POLL_S = 0.05
KEEP_BLOCK_STACKS = 5
LAST_DUMP_S = 1.0


def _shape(spec: WorkflowSpec) -> dict:
    """The batch shape as the report shows it; zeros where the spec is not valid yet (the report
    of a bad spec still needs one)."""
    try:
        local_bs = spec.global_bs // spec.rollout_dp_size
        requested = local_bs * spec.group_size
    except (TypeError, ZeroDivisionError):
        local_bs = requested = 0
    return {"global_bs": spec.global_bs, "group_size": spec.group_size,
            "rollout_dp_size": spec.rollout_dp_size, "local_bs": local_bs,
            "requested": requested, "concurrency_limit": spec.concurrency}


class Check:
    """State of one ``run``: the report being filled and the step in progress."""

    def __init__(self, spec: WorkflowSpec, progress: ProgressCallback | None,
                 cancel: threading.Event | None) -> None:
        self.spec = spec
        self.progress = progress
        self.cancel = cancel
        self.scrub = Scrubber(secrets_of(spec))
        self.kwargs: dict = {}
        base_url = spec.resolved_base_url()
        self.report = WorkflowReport(
            target=str(spec.target), timeout_s=spec.timeout, temperature=0,
            base_url=self.scrub.text(redact_url(base_url)) if base_url else None,
            api_key_set=bool(spec.resolved_api_key()), shape=_shape(spec))
        self.step: str | None = None
        self.totals: dict[str, int] = {"load": 1}
        self.done: dict[str, int] = {"load": 0}
        self.seen: dict[str, set] = {}

    def _progress(self, phase: str, message: str = "", item: Any = None) -> None:
        report_progress(self.progress, Progress(phase, self.done.get(phase, 0),
                                                self.totals.get(phase, 0), message, item))

    # -- one worker --------------------------------------------------------------------
    def _handle(self, msg: dict, state: dict) -> None:
        event = msg.get("event")
        r = self.report
        if event == "hello":
            r.worker = {"pid": msg.get("pid"), "python": msg.get("python")}
            self._progress("load", f"worker pid {msg.get('pid')} loading {self.spec.target}")
        elif event == "loaded":
            state["loaded"] = self.loaded = True
            self.done["load"] = 1
            self._progress("load", f"loaded {self.spec.target}")
        elif event == "load_error":
            r.setup_error = {"kind": msg.get("kind"), "message": msg.get("message"),
                             "traceback": msg.get("traceback"), "file": msg.get("file")}
        elif event == "step":
            self.step = msg.get("step")
            self.totals[self.step] = int(msg.get("total", 0))
            self.done[self.step] = 0
            self.seen[self.step] = set()
            self._step_start = time.monotonic()
            self._progress(self.step, f"{self.step}: {self.totals[self.step]} runs")
        elif event == "result":
            result = RunResult.from_message(msg)
            self._store(result)
            self.done[result.step] = self.done.get(result.step, 0) + 1
            self.seen.setdefault(result.step, set()).add(result.run)
            self._progress(result.step, f"{result.step} run {result.run}: {result.status}",
                           result)
        elif event == "pending_tasks":
            if r.pending_tasks is None:
                r.pending_tasks = {k: msg.get(k) for k in ("step", "run", "why", "task_count",
                                                           "groups")}
        elif event == "step_done":
            if msg.get("step") == "concurrent":
                r.concurrent_wall_s = msg.get("wall_s")
        elif event == "loop_blocked":
            state["blocked_at"] = time.monotonic() - float(msg.get("for_s") or 0)
            full = len(r.loop_blocks) < KEEP_BLOCK_STACKS  # a sync call blocks once per run
            r.loop_blocks.append({"step": self.step, "for_s": msg.get("for_s"),
                                  "recovered": False, "blocked_s": None,
                                  "where": msg.get("where"),
                                  "stack": msg.get("stack") if full else None,
                                  "tasks": msg.get("tasks") if full else None,
                                  "task_count": msg.get("task_count")})
            self._progress(self.step or "load", "event loop blocked")
        elif event == "loop_unblocked":
            state["blocked_at"] = None
            if r.loop_blocks:
                r.loop_blocks[-1].update(recovered=True, blocked_s=msg.get("blocked_s"))
        elif event == "fatal":
            r.notes.append(f"worker error: {msg.get('error_type')}: {msg.get('message')}")
        elif event == "done":
            state["done"] = True

    def _store(self, result: RunResult) -> None:
        if result.step == "single":
            self.report.single = result
        elif result.step == "sequential":
            self.report.sequential.append(result)
        else:
            self.report.concurrent.append(result)

    def _drive(self, worker: Worker) -> str:
        """Fold the worker's lines until it ends; why it ended: ``done``, ``load_error``,
        ``cancelled``, ``blocked``, ``silent``, ``startup_timeout`` or ``crashed``."""
        state: dict = {"loaded": False, "done": False, "blocked_at": None}
        started = last = time.monotonic()
        while True:
            if cancelled(self.cancel):
                # what the worker said before the cancel (the step it started) is read first,
                # or the report would not know which step was cut short
                self._drain(worker, state)
                self._last_dump(worker, state)
                worker.kill()
                return "cancelled"
            try:
                msg = worker.lines.get(timeout=POLL_S)
            except queue.Empty:
                msg = None
            now = time.monotonic()
            if msg is EOF:
                worker.proc.wait()
                if self.report.setup_error:
                    return "load_error"
                return "done" if state["done"] else "crashed"
            if msg is not None:
                last = now
                self._handle(self.scrub(msg), state)
                continue
            blocked_at = state["blocked_at"]
            if blocked_at is not None and now - blocked_at > self.spec.timeout:
                worker.kill()
                self.report.loop_blocks[-1]["for_s"] = round(now - blocked_at, 3)
                return "blocked"
            if not state["loaded"] and now - started > self.spec.startup_timeout:
                worker.kill()
                return "startup_timeout"
            if state["loaded"] and now - last > self.spec.silence_s:
                worker.kill()
                return "silent"

    def _drain(self, worker: Worker, state: dict) -> None:
        """Fold the lines already waiting in the queue, without waiting for more."""
        while True:
            try:
                msg = worker.lines.get_nowait()
            except queue.Empty:
                return
            if msg is EOF:
                worker.lines.put(EOF)  # the end stays for whoever reads next
                return
            self._handle(self.scrub(msg), state)

    def _last_dump(self, worker: Worker, state: dict) -> None:
        """Ask a cancelled worker where its runs wait (SIGUSR1) and give it a moment to say."""
        if self.step is None or self.report.pending_tasks is not None \
                or state["blocked_at"] is not None or worker.proc.poll() is not None:
            return
        try:
            os.kill(worker.proc.pid, signal.SIGUSR1)
        except OSError:
            return
        deadline = time.monotonic() + LAST_DUMP_S
        while self.report.pending_tasks is None and time.monotonic() < deadline:
            try:
                msg = worker.lines.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if msg is EOF:
                return
            self._handle(self.scrub(msg), state)

    def _close_step(self, worker: Worker, ending: str, steps: list[str]) -> None:
        """Runs that were in flight when the worker ended, and the report's account of why."""
        r = self.report
        status = "timeout" if ending in ("blocked", "silent") else "unfinished"
        why = {"blocked": "the event loop stayed blocked; the worker was ended",
               "silent": "the worker stopped answering and was ended",
               "cancelled": "cancelled", "crashed": "the worker process died",
               "startup_timeout": "the workflow did not load in time"}[ending]
        step = self.step
        if step is not None and step in steps:
            expected = self._expected_runs(step)
            for run, prompt in expected:
                if run not in self.seen.get(step, set()):
                    self._store(RunResult(step, run, prompt, status, message=why))
            if step == "concurrent" and r.concurrent_wall_s is None:
                r.concurrent_wall_s = round(time.monotonic() - self._step_start, 6)
        if ending in ("cancelled", "crashed", "silent", "startup_timeout", "blocked"):
            r.partial = True
            r.partial_reason = why + (f" during the {step} step" if step else "")
        if ending in ("crashed", "silent", "startup_timeout", "cancelled"):
            r.worker_end = {"reason": ending, "step": step, "how": worker.how_it_ended(),
                            "after_s": self.spec.silence_s if ending == "silent" else None,
                            "stderr_tail": [self.scrub.text(t) for t in worker.stderr]}

    def _expected_runs(self, step: str) -> list[tuple[int, int]]:
        if step == "single":
            return [(0, 0)]
        local_bs = self.report.shape["local_bs"]
        if step == "sequential":
            k = min(self.spec.sequential_prompts, local_bs)
            return [(p, p) for p in range(k)]
        g = self.spec.group_size
        return [(p * g + i, p) for p in range(local_bs) for i in range(g)]

    def _stage(self, steps: list[str], rows: list[dict]) -> str:
        cfg = {"target": self.spec.target, "paths": self.spec.resolved_paths(),
               "init_kwargs": self.spec.init_kwargs, "extra_kwargs": self.kwargs,
               "rows": rows, "steps": steps, "group_size": self.spec.group_size,
               "sequential_prompts": self.spec.sequential_prompts,
               "timeout": self.spec.timeout, "concurrency": self.spec.concurrency,
               "loop_block_s": self.spec.loop_block_s}
        python = self.spec.python or sys.executable
        if cancelled(self.cancel):
            r = self.report
            r.partial, r.partial_reason = True, "cancelled before the " + steps[0] + " step"
            r.worker_end = {"reason": "cancelled", "step": None, "how": "not started",
                            "stderr_tail": []}
            return "cancelled"
        try:
            worker = Worker(python, self.root / "rltui" / "checks" / "workflow" / "worker.py",
                            cfg, worker_env(self.spec, self.root))
        except OSError as exc:
            self.report.setup_error = {"kind": "python", "message": f"cannot start the worker "
                                       f"with {python}: {exc.strerror or exc}"}
            return "load_error"
        self.step = None
        self.loaded = False
        self.done["load"] = 0
        self._step_start = time.monotonic()
        try:
            ending = self._drive(worker)
        finally:
            if worker.proc.poll() is None:
                worker.kill()
        if ending == "load_error":
            self.report.setup_error["stderr_tail"] = [self.scrub.text(t) for t in worker.stderr]
        elif ending == "crashed" and not self.loaded:
            # Died before running anything: the import itself crashed the interpreter.
            self.report.setup_error = {
                "kind": "worker_crashed",
                "message": f"the worker died while loading {self.spec.target} "
                           f"({worker.how_it_ended()})",
                "stderr_tail": [self.scrub.text(t) for t in worker.stderr]}
            return "load_error"
        elif ending != "done":
            self._close_step(worker, ending, steps)
        for runs in (self.report.sequential, self.report.concurrent):
            runs.sort(key=lambda r: r.run)
        return ending

    # -- the whole check ---------------------------------------------------------------
    def run(self) -> WorkflowReport:
        start = time.monotonic()
        try:
            with tempfile.TemporaryDirectory(prefix="rltui-worker-") as tmp:
                self.root = worker_package(Path(tmp))
                self._run()
        except Exception as exc:  # noqa: BLE001 - a bug here must still return the results
            r = self.report
            r.partial = True
            r.partial_reason = self.scrub.text(f"internal error: {type(exc).__name__}: {exc}")
            r.worker_end = {"reason": "internal", "step": self.step, "how": "rltui failed",
                            "stderr_tail": self.scrub(traceback.format_exc().splitlines()[-12:])}
        finally:
            self.report.wall_s = time.monotonic() - start
            self._progress("done", self.report.verdict)
        return self.report

    def _run(self) -> None:
        r = self.report
        try:
            specmod.validate(self.spec)
            rows, skipped = specmod.load_rows(self.spec)
        except SpecError as exc:
            r.setup_error = {"kind": "input", "message": self.scrub.text(str(exc))}
            return
        r.skipped = list(skipped)
        if skipped:
            shown = "; ".join(str(s) for s in skipped[:5])
            more = f" (and {len(skipped) - 5} more, all in the JSON's skipped)" \
                if len(skipped) > 5 else ""
            r.notes.append(f"{len(skipped)} dataset line(s) skipped: {shown}{more}")
        self.kwargs = specmod.run_kwargs(self.spec)
        r.temperature = self.kwargs.get("temperature")
        batch, note = specmod.batch_rows(rows, r.shape["local_bs"])
        if note and (self.spec.rows is not None or self.spec.dataset is not None):
            r.notes.append(note)
        base_url = self.spec.resolved_base_url()
        if base_url and self.spec.probe_server:
            r.server = self.scrub(probe(base_url))
        elif not base_url:
            r.notes.append("no base URL (--base-url or OPENAI_BASE_URL): the workflow uses "
                           "its own")
        if r.temperature != 0:
            r.notes.append(f"temperature {r.temperature!r} from --kwargs: sequential and "
                           "concurrent results are not compared")
        ending = self._stage(["single"], batch[:1])
        if ending in ("load_error", "cancelled"):
            r.concurrent_skipped = "not run: " + (r.partial_reason or "the workflow did not load")
            return
        single_ok = r.single is not None and r.single.valid
        if r.server_down():
            r.partial = True
            r.partial_reason = (f"the server at {r.server.get('url')} does not accept "
                                "connections, and step one failed")
        if not single_ok and not self.spec.force:
            r.concurrent_skipped = ("step one failed (one run on one sample must pass first; "
                                    "--force runs the concurrent step anyway)")
            return
        steps = (["sequential"] if self.spec.sequential_prompts else []) + ["concurrent"]
        self._stage(steps, batch)
        if r.partial and not r.concurrent:
            r.concurrent_skipped = f"not run: {r.partial_reason}"


def run(spec: WorkflowSpec, *, progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None) -> WorkflowReport:
    """Run the workflow check. Synchronous (call it from a thread worker); reports progress
    through ``progress`` from the calling thread, stops soon after ``cancel`` is set, and always
    returns a report (``partial`` when cut short, ``setup_error`` for bad input)."""
    return Check(spec, progress, cancel).run()
