"""Run a rollout-consistency check: ``run(spec, progress=..., cancel=...) -> RolloutReport``.

Synchronous on the outside (the CLI calls it directly, the app from a thread worker); inside,
one asyncio loop sends up to ``concurrency`` samples at a time. A local HF reference generates
in one worker thread, one sample at a time, while the server's requests overlap with it.

It always returns a report. Setup problems (bad settings, unreadable dataset, a server that is
down, a wrong model name, a missing key) come back as ``error`` with ``error_kind``; a run cut
short (cancel, or ``max_consecutive_failures`` connection failures or timeouts in a row: the
server died) keeps its results with ``partial=True``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rltui.checks.dataset import DatasetError, SkippedLine, load_dataset
from rltui.checks.progress import Progress, ProgressCallback, cancelled, report_progress
from rltui.checks.rollout.answers import check_answer
from rltui.checks.rollout.background import in_daemon_thread
from rltui.checks.rollout.compare import Generation, compare
from rltui.checks.rollout.endpoints import Endpoint, EndpointError, Outcome
from rltui.checks.rollout.inputs import (
    PreparedSample,
    TokenizerError,
    eos_ids,
    load_tokenizer,
    prepare,
    token_text,
)
from rltui.checks.rollout.reference_hf import HFReference, ReferenceError
from rltui.checks.rollout.report import RolloutReport, SampleResult, SideResult
from rltui.checks.rollout.spec import RolloutSpec, SpecError
from rltui.checks.rollout.verify import refusal
from rltui.model import replace
from rltui.redact import scrub_text

PHASE = "rollout"
# How often the loop looks at the cancel event (a threading.Event cannot be awaited).
CANCEL_POLL_S = 0.05


class _Abort(Exception):
    """Setup failed; the report already says why."""


def resolve(spec: RolloutSpec) -> RolloutSpec:
    """Fill the defaults that come from the environment (the key is never printed)."""
    key = spec.api_key or os.environ.get("OPENAI_API_KEY") or None
    return replace(spec, api_key=key, reference_api_key=spec.reference_api_key or key)


def run(spec: RolloutSpec, *, progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None) -> RolloutReport:
    report = RolloutReport(settings={})
    start = time.perf_counter()
    try:
        spec = resolve(spec)
        report.settings = spec.settings()
        asyncio.run(_Run(spec, report, progress, cancel).main())
    except Exception as exc:  # noqa: BLE001 - a report, never a traceback, for the user
        report.error = scrub_text(f"internal error: {type(exc).__name__}: {exc}")
        report.error_kind = report.error_kind or "internal"
        report.partial = True
    report.duration_s = time.perf_counter() - start
    report.results.sort(key=lambda r: r.index)
    return report


class _Run:
    def __init__(self, spec: RolloutSpec, report: RolloutReport,
                 progress: ProgressCallback | None, cancel: threading.Event | None):
        self.spec, self.report, self.progress, self.cancel = spec, report, progress, cancel
        self.stop = threading.Event()      # also stops the HF reference mid-sample
        self.failures = {"server": 0, "reference": 0}
        # the reference's samples, one at a time; the loads run in daemon threads instead
        # (background.py): a cancelled load must not hold up the run or the process's exit
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rltui-reference")
        self.candidate: Endpoint | None = None
        self.reference: Endpoint | HFReference | None = None
        self.tokenizer: Any = None
        self.eos: tuple[int, ...] = ()
        self.tasks: list[asyncio.Task] = []
        self.done = 0

    def _fail(self, kind: str, message: str) -> _Abort:
        self.report.error, self.report.error_kind = message, kind
        return _Abort(message)

    def _say(self, message: str, total: int = 0) -> None:
        report_progress(self.progress, Progress(PHASE, self.done, total, message))

    async def main(self) -> None:
        work = asyncio.create_task(self._main())
        watcher = asyncio.create_task(self._watch_cancel(work))
        try:
            await work
        except _Abort:
            pass
        except asyncio.CancelledError:
            if not self.report.cancelled:
                raise
            # cancelled while setting up: a load still running in its daemon thread is left
            # to end by itself (or with the process)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            self.stop.set()
            for side in (self.candidate, self.reference):
                if isinstance(side, Endpoint):
                    await side.close()
            # waits for a reference sample in progress (the stop event ends it at the next
            # token); the thread must not outlive the run. No load ever runs in this pool.
            await asyncio.get_running_loop().run_in_executor(None, self.pool.shutdown, True)
            self._collect()

    async def _main(self) -> None:
        spec = self.spec
        try:
            spec.validate()
            # the whole file: --limit counts the samples that can be sent, known only after
            # prepare() (a chat endpoint cannot take an input_ids-only sample)
            data = load_dataset(spec.dataset)
        except (SpecError, DatasetError) as exc:
            raise self._fail("usage", str(exc)) from None
        self.report.skipped = list(data.skipped)
        self.report.total = min(len(data.samples), spec.limit or len(data.samples))
        self._say("loading the tokenizer")
        try:
            self.tokenizer = await in_daemon_thread(
                load_tokenizer, spec.tokenizer or spec.reference, name="rltui-tokenizer-load")
        except TokenizerError as exc:
            raise self._fail("usage", str(exc)) from None
        await self._open_sides()
        chat = "chat" in (self.candidate.api, getattr(self.reference, "api", None))
        prepared = self._prepare(data, chat)
        self.report.total = len(prepared)
        if not prepared:
            raise self._fail("usage", "no sample can be sent: " + "; ".join(
                str(s) for s in self.report.skipped[:3]))
        await self._run_all(prepared)

    def _prepare(self, data: Any, chat: bool) -> list[PreparedSample]:
        """The first ``limit`` samples that can be sent; the lines passed over before the last
        one taken are listed as skipped (those after it were never looked at)."""
        prepared: list[PreparedSample] = []
        unsendable: list[SkippedLine] = []
        for sample in data.samples:
            if self.spec.limit is not None and len(prepared) >= self.spec.limit:
                break
            try:
                prepared.append(prepare(sample, self.tokenizer, chat=chat))
            except ValueError as exc:
                unsendable.append(SkippedLine(sample.line, str(exc)))
        last = prepared[-1].sample.line if prepared and self.spec.limit is not None else None
        skipped = [s for s in self.report.skipped + unsendable if last is None or s.line < last]
        self.report.skipped = sorted(skipped, key=lambda s: s.line)
        return prepared

    async def _open_sides(self) -> None:
        spec = self.spec

        def retokenise(text: str) -> list[int]:
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]

        common = dict(timeout_s=spec.timeout_s, max_new_tokens=spec.max_new_tokens,
                      concurrency=spec.concurrency, retokenise=retokenise)
        self.candidate = Endpoint(spec.server, role="server", api=spec.api, model=spec.model,
                                  api_key=spec.api_key, **common)
        loading = None
        if spec.reference_is_url:
            self.reference = Endpoint(spec.reference, role="reference", api=spec.reference_api,
                                      model=spec.reference_model,
                                      api_key=spec.reference_api_key, **common)
        else:
            self.reference = HFReference(spec.reference, self.tokenizer,
                                         dtype=spec.reference_dtype,
                                         device=spec.reference_device,
                                         max_new_tokens=spec.max_new_tokens, stop=self.stop)
            self._say("loading the reference model")
            loading = in_daemon_thread(self.reference.load, name="rltui-reference-load")
        try:
            await self.candidate.open()
            if isinstance(self.reference, Endpoint):
                await self.reference.open()
        except EndpointError as exc:
            kind = "usage" if exc.kind in ("auth", "model", "missing") else "server"
            if loading is not None:
                await asyncio.gather(loading, return_exceptions=True)
            raise self._fail(kind, str(exc)) from None
        if loading is not None:
            try:
                await loading
            except ReferenceError as exc:
                raise self._fail("usage", str(exc)) from None
            generation_config = self.reference.config
        else:
            generation_config = None
        self.eos = eos_ids(self.tokenizer, generation_config)

    async def _run_all(self, prepared: list[PreparedSample]) -> None:
        sem = asyncio.Semaphore(self.spec.concurrency)
        total = len(prepared)
        self._say("sending", total)

        async def one(ps: PreparedSample) -> None:
            async with sem:
                if self.stop.is_set():
                    return
                result = await self._sample(ps)
            if result is None:
                return
            self.report.results.append(result)
            self.done += 1
            report_progress(self.progress, Progress(PHASE, self.done, total,
                                                    self._tally(result), item=result))

        self.tasks = [asyncio.create_task(one(ps)) for ps in prepared]
        try:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.done < total:
            self.report.partial = True

    def _tally(self, last: SampleResult) -> str:
        counts: dict[str, int] = {}
        for r in self.report.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        head = ", ".join(f"{counts[k]} {k}" for k in ("match", "mismatch", "refused", "error")
                         if counts.get(k))
        return f"{head}; #{last.index}: {last.summary()}"

    async def _watch_cancel(self, work: asyncio.Task) -> None:
        """Cancel, as soon as the event is set: while samples are sent, stop sending (the
        results so far stay); while setting up, abandon the set-up."""
        while not cancelled(self.cancel):
            await asyncio.sleep(CANCEL_POLL_S)
        self.report.cancelled = self.report.partial = True
        self.report.stopped = self.report.stopped or "cancelled"
        if self.tasks:
            self._halt()
        else:
            self.stop.set()
            work.cancel()

    def _halt(self) -> None:
        """Stop sending: pending samples return at once, the reference ends its sample."""
        self.stop.set()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()

    async def _reference_side(self, ps: PreparedSample) -> Outcome:
        if isinstance(self.reference, Endpoint):
            return await self.reference.generate(ps)
        loop = asyncio.get_running_loop()
        gen = await loop.run_in_executor(self.pool, self.reference.generate, ps)
        return Outcome(gen, None)

    def _count(self, role: str, exc: BaseException | None) -> None:
        """Consecutive failures of one side that say the server is gone (connection refused,
        timeouts, 5xx answers) or refuses the key; too many in a row: stop."""
        kind = _failure_kind(exc)
        if kind is None:
            self.failures[role] = 0
            return
        self.failures[role] += 1
        limit = 1 if kind == "auth" else self.spec.max_consecutive_failures
        if self.failures[role] >= limit and not self.stop.is_set():
            what = {"connection": "down", "timeout": "not answering", "http": "failing",
                    "auth": "refusing the API key"}[kind]
            self.report.stopped = (f"{role} {what}: {self.failures[role]} request(s) in a row "
                                   f"failed (last: {exc})")
            self.report.partial = True
            if kind == "auth":  # a native endpoint has no model list to ask it before the run
                self.report.error, self.report.error_kind = str(exc), "usage"
            self._halt()

    async def _sample(self, ps: PreparedSample) -> SampleResult | None:
        """One sample, both sides at once; None when it failed because the run was already
        stopping (not a finding)."""
        ref, cand = await asyncio.gather(self._reference_side(ps), self.candidate.generate(ps),
                                         return_exceptions=True)
        for exc in (ref, cand):
            if isinstance(exc, asyncio.CancelledError):
                raise exc
        failed = isinstance(ref, BaseException) or isinstance(cand, BaseException)
        if failed and self.stop.is_set():
            return None
        self._count("reference", ref if isinstance(ref, BaseException) else None)
        self._count("server", cand if isinstance(cand, BaseException) else None)
        s = ps.sample
        base = dict(index=s.index, line=s.line, input=ps.how, prompt_tokens=len(ps.input_ids),
                    expected=s.answer)
        errors = [f"{role}: {_message(x)}" for role, x in (("reference", ref), ("server", cand))
                  if isinstance(x, BaseException)]
        if errors:
            return SampleResult(status="error", error="; ".join(errors), **base,
                                reference=None if isinstance(ref, BaseException)
                                else self._side(ref.generation, s.answer),
                                candidate=None if isinstance(cand, BaseException)
                                else self._side(cand.generation, s.answer))
        rgen, cgen = ref.generation, cand.generation
        sides = dict(reference=self._side(rgen, s.answer), candidate=self._side(cgen, s.answer))
        n = self.spec.max_new_tokens
        why = (refusal("reference", rgen, prompt_len=len(ps.input_ids), max_new_tokens=n,
                       greedy_violation=ref.greedy_violation)
               or refusal("server", cgen, prompt_len=len(ps.input_ids), max_new_tokens=n,
                          greedy_violation=cand.greedy_violation))
        if why:
            return SampleResult(status="refused", refused=why, **base, **sides)
        tok = self.tokenizer
        result = compare(rgen, cgen, eos_ids=self.eos,
                         token_text=lambda i: token_text(tok, i),
                         encode=lambda text: tok(text, add_special_tokens=False)["input_ids"])
        return SampleResult(status="match" if result.match else "mismatch", comparison=result,
                            **base, **sides)

    def _side(self, gen: Generation, expected: str | None) -> SideResult:
        return SideResult(text=gen.text, tokens=len(gen.token_ids),
                          finish_reason=gen.finish_reason, latency_s=gen.latency_s,
                          prompt_tokens=gen.prompt_tokens, tokens_from_text=gen.tokens_from_text,
                          answer=check_answer(gen.text, expected) if expected else None)

    def _collect(self) -> None:
        """What each side could not do, and what was sent, into the report."""
        limits: list[str] = []
        sent: dict = {}
        for role, side in (("reference", self.reference), ("candidate", self.candidate)):
            if isinstance(side, HFReference):
                limits += side.notes
                sent[role] = side.sent()
            elif isinstance(side, Endpoint):
                limits += side.limits()
                sent[role] = side.sent()
        self.report.limits = list(dict.fromkeys(limits))
        self.report.sent = sent


def _failure_kind(exc: BaseException | None) -> str | None:
    if not isinstance(exc, EndpointError):
        return None
    if exc.kind in ("connection", "timeout", "auth"):
        return exc.kind
    if exc.kind == "http" and exc.status is not None and exc.status >= 500:
        return "http"
    return None


def _message(exc: BaseException) -> str:
    if isinstance(exc, (EndpointError, ReferenceError)):
        return str(exc)  # already without secrets
    return scrub_text(f"{type(exc).__name__}: {exc}")
