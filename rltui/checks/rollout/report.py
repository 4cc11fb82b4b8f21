"""The rollout-consistency report: per-sample results, the aggregate, JSON, markdown and text.
Pure. No API key ever reaches it (the spec gives ``settings()`` without one).

``answer_marks(result)`` is also the app's answer column (rollout/form.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rltui.checks.dataset import SkippedLine
from rltui.checks.rollout.answers import AnswerMatch
from rltui.checks.rollout.compare import (
    NORMAL_BELOW,
    PROBLEM_ABOVE,
    USUAL_CAUSES,
    Comparison,
    LogprobSummary,
    summarise,
)

EXIT_CONSISTENT, EXIT_DIVERGENT, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


@dataclass(frozen=True)
class SideResult:
    text: str
    tokens: int
    finish_reason: str | None
    latency_s: float | None
    prompt_tokens: int | None = None
    tokens_from_text: bool = False
    answer: AnswerMatch | None = None

    def to_json(self) -> dict:
        return {"text": self.text, "tokens": self.tokens, "finish_reason": self.finish_reason,
                "latency_s": self.latency_s, "prompt_tokens": self.prompt_tokens,
                "tokens_from_text": self.tokens_from_text,
                "answer_match": self.answer.match if self.answer else None,
                "answer_found": self.answer.extracted if self.answer else None,
                "answer_rule": self.answer.method if self.answer else None}


@dataclass(frozen=True)
class SampleResult:
    index: int
    line: int
    input: str                      # given | chat template | encoded prompt
    prompt_tokens: int
    expected: str | None
    status: str                     # match | mismatch | refused | error
    comparison: Comparison | None = None
    refused: str | None = None
    error: str | None = None
    reference: SideResult | None = None
    candidate: SideResult | None = None

    @property
    def match(self) -> bool | None:
        return self.comparison.match if self.comparison else None

    @property
    def first_divergence(self):
        return self.comparison.divergence if self.comparison else None

    def summary(self) -> str:
        """One line, for a progress message or a table cell."""
        if self.status == "match":
            return "match"
        if self.status == "mismatch":
            d = self.first_divergence
            return "mismatch at " + d.describe() if d else "mismatch (text differs)"
        return f"{self.status}: {self.refused or self.error}"

    def to_json(self) -> dict:
        c = self.comparison
        return {
            "index": self.index, "line": self.line, "status": self.status, "match": self.match,
            "first_divergence": self.first_divergence.to_json() if self.first_divergence else None,
            "refused": self.refused, "error": self.error, "input": self.input,
            "prompt_tokens": self.prompt_tokens, "answer": self.expected,
            "reference_answer_match": (self.reference.answer.match
                                       if self.reference and self.reference.answer else None),
            "candidate_answer_match": (self.candidate.answer.match
                                       if self.candidate and self.candidate.answer else None),
            "compared_on": c.basis if c else None,
            "logprob": c.logprob.to_json() if c and c.logprob else None,
            "logprob_missing": c.logprob_missing if c else None,
            "reference": self.reference.to_json() if self.reference else None,
            "candidate": self.candidate.to_json() if self.candidate else None,
        }


_ORDER = {"mismatch": 0, "error": 1, "refused": 2, "match": 3}


def _worst_key(r: SampleResult) -> tuple:
    d = r.first_divergence
    lp = r.comparison.logprob if r.comparison else None
    return (_ORDER.get(r.status, 4), d.index if d else 0, -(lp.max if lp else -1.0), r.index)


@dataclass
class RolloutReport:
    settings: dict
    results: list[SampleResult] = field(default_factory=list)
    total: int = 0                  # samples meant to run (after skipping and --limit)
    skipped: list[SkippedLine] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    sent: dict = field(default_factory=dict)
    partial: bool = False
    cancelled: bool = False
    stopped: str | None = None      # why the run stopped early
    error: str | None = None        # what kept it from running (or finishing) at all
    error_kind: str | None = None   # usage | server | reference
    duration_s: float | None = None

    # ----- aggregate -----

    def _with(self, status: str) -> list[SampleResult]:
        return [r for r in self.results if r.status == status]

    @property
    def compared(self) -> list[SampleResult]:
        return [r for r in self.results if r.status in ("match", "mismatch")]

    @property
    def agreement_rate(self) -> float | None:
        compared = self.compared
        return len(self._with("match")) / len(compared) if compared else None

    def accuracy(self, side: str) -> float | None:
        """Share of the compared samples with an expected answer that this side got right:
        both sides are scored on the same samples."""
        scored = [getattr(r, side).answer for r in self.compared
                  if r.expected is not None and getattr(r, side) is not None]
        scored = [a for a in scored if a is not None]
        return sum(a.match for a in scored) / len(scored) if scored else None

    @property
    def logprob(self) -> LogprobSummary | None:
        return summarise(r.comparison.logprob for r in self.compared)

    def logprob_reason(self) -> str | None:
        if self.logprob is not None:
            return None
        if not self.compared:
            return "no sample was compared"
        reasons = {r.comparison.logprob_missing for r in self.compared
                   if r.comparison.logprob_missing}
        return "; ".join(sorted(reasons)) or "no log-probs"

    @property
    def verdict(self) -> str:
        lp = self.logprob
        if self._with("mismatch") or (lp is not None and lp.verdict == "precision-problem"):
            return "divergent"
        if self.error and not self.results:
            return "error"
        if self.partial or self._with("error") or self.error:
            return "incomplete"
        if not self.compared:
            return "nothing-compared"
        return "consistent"

    def exit_code(self) -> int:
        """0 consistent; 1 divergent, even when the run was cut short (a divergence found is
        the more useful answer to a script; ``partial`` stays true in the JSON); 2 usage error
        or nothing comparable; 3 could not finish without finding a divergence."""
        if self.error_kind == "usage":
            return EXIT_USAGE
        verdict = self.verdict
        if verdict == "divergent":
            return EXIT_DIVERGENT
        if self.partial or self.error:
            return EXIT_INCOMPLETE
        if verdict == "nothing-compared":
            return EXIT_USAGE if self._with("refused") or not self.results else EXIT_INCOMPLETE
        if verdict == "incomplete":
            return EXIT_INCOMPLETE
        return EXIT_CONSISTENT

    def causes(self) -> list[str]:
        lp = self.logprob
        if self._with("mismatch") or (lp is not None and lp.verdict != "normal"):
            return list(USUAL_CAUSES)
        return []

    # ----- exports -----

    def to_json(self) -> dict:
        lp = self.logprob
        logprob_diff = None if lp is None else {
            "mean": lp.mean, "max": lp.max, "prob_mean": lp.prob_mean, "prob_max": lp.prob_max,
            "tokens": lp.tokens, "samples": lp.samples, "verdict": lp.verdict,
            "thresholds": {"applies_to": "prob_mean", "normal_below": NORMAL_BELOW,
                           "problem_above": PROBLEM_ABOVE,
                           "meaning": "verl's thresholds apply to prob_mean, the mean "
                                      "|p_reference - p_candidate| (verl's "
                                      "rollout_probs_diff_mean); mean and max are "
                                      "|delta log p| and are not compared with them"}}
        return {
            "verdict": self.verdict, "samples": self.total, "compared": len(self.compared),
            "matched": len(self._with("match")), "mismatched": len(self._with("mismatch")),
            "refused": len(self._with("refused")), "errors": len(self._with("error")),
            "agreement_rate": self.agreement_rate,
            "reference_accuracy": self.accuracy("reference"),
            "candidate_accuracy": self.accuracy("candidate"),
            "logprob_diff": logprob_diff, "logprob_diff_reason": self.logprob_reason(),
            "limits": list(self.limits), "usual_causes": self.causes(),
            "partial": self.partial, "cancelled": self.cancelled, "stopped": self.stopped,
            "error": self.error,
            "skipped": [{"line": s.line, "reason": s.reason} for s in self.skipped],
            "settings": dict(self.settings), "sent": dict(self.sent),
            "duration_s": self.duration_s,
            "per_sample": [r.to_json() for r in self.results],
        }

    def to_text(self, worst: int = 10) -> str:
        return text(self, worst)

    def to_markdown(self) -> str:
        return markdown(self)


def sorted_results(report: RolloutReport) -> list[SampleResult]:
    """Worst first: mismatches by earliest divergence, then errors, refusals, and matches by
    largest log-prob difference."""
    return sorted(report.results, key=_worst_key)


# ----- the report as text (terminal) and markdown (a ticket) -----

HEADLINES = {
    "consistent": "consistent: every compared sample matches token for token",
    "divergent": "DIVERGENT: the server does not reproduce the reference",
    "incomplete": "incomplete: the run did not cover every sample",
    "nothing-compared": "nothing compared: no sample could be compared",
    "error": "could not run",
}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _logprob_line(report: RolloutReport) -> str:
    lp = report.logprob
    if lp is None:
        return f"not available ({report.logprob_reason()})"
    return (f"{lp.verdict} by mean |dp| {lp.prob_mean:.4g} (verl's thresholds, on |dp|: below "
            f"{NORMAL_BELOW} normal, above {PROBLEM_ABOVE} a precision problem); max |dp| "
            f"{lp.prob_max:.4g}, mean |dlogp| {lp.mean:.4g}, max |dlogp| {lp.max:.4g}; over "
            f"{lp.tokens} tokens of {lp.samples} samples")


def summary_rows(report: RolloutReport) -> list[tuple[str, str]]:
    s = report.settings
    j = report.to_json()
    rows = [
        ("reference", str(s.get("reference"))), ("server", str(s.get("server"))),
        ("model", str(report.sent.get("candidate", {}).get("model") or s.get("model"))),
        ("samples", f"{j['samples']} ({j['compared']} compared, {j['refused']} refused, "
                    f"{j['errors']} errors, {len(report.skipped)} dataset lines skipped)"),
        ("agreement", f"{_pct(report.agreement_rate)} ({j['matched']} of {j['compared']})"),
        ("accuracy", f"reference {_pct(j['reference_accuracy'])}, server "
                     f"{_pct(j['candidate_accuracy'])}"),
        ("log-prob diff", _logprob_line(report)),
    ]
    if report.stopped:
        rows.append(("stopped", report.stopped))
    if report.error:
        rows.append(("error", report.error))
    return rows


def _cell(text: str, width: int = 40) -> str:
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def answer_marks(result: SampleResult) -> str:
    """Whether each side found the expected answer, ``reference/candidate``: ``yes/no``; ``-``
    for a side without an output, or for the whole cell when the sample has no answer."""
    def one(side) -> str:
        if side is None or side.answer is None:
            return "-"
        return "yes" if side.answer.match else "no"
    if result.expected is None:
        return "-"
    return f"{one(result.reference)}/{one(result.candidate)}"


def _divergence_cell(r: SampleResult) -> str:
    d = r.first_divergence
    if d is None:
        return "" if r.status != "mismatch" else "text differs"
    ref = repr(d.reference.text) if d.reference else f"<end {d.reference_end}>"
    cand = repr(d.candidate.text) if d.candidate else f"<end {d.candidate_end}>"
    return f"@{d.index}: {ref} vs {cand}"


def _logprob_cells(r: SampleResult) -> str:
    lp = r.comparison.logprob if r.comparison else None
    return f"{lp.prob_mean:.3g} | {lp.mean:.3g} / {lp.max:.3g}" if lp else "- | -"


def markdown(report: RolloutReport) -> str:
    out = [f"# Rollout consistency: {HEADLINES.get(report.verdict, report.verdict)}", ""]
    out += ["| | |", "| --- | --- |"]
    out += [f"| {k} | {_cell(v, 400)} |" for k, v in summary_rows(report)]
    sent = report.sent
    if sent:
        out += ["", "Sent: " + "; ".join(
            f"{side}: " + ", ".join(f"{k}={v}" for k, v in params.items() if k != "url")
            for side, params in sent.items())]
    if report.limits:
        out += ["", "## What the servers could not do", ""]
        out += [f"- {line}" for line in report.limits]
    causes = report.causes()
    if causes:
        out += ["", "## Usual causes", ""] + [f"- {c}" for c in causes]
    rows = sorted_results(report)
    if rows:
        out += ["", "## Samples (worst first)", "",
                "| # | line | result | first divergence | answer ref/server | \\|dp\\| mean | "
                "\\|dlogp\\| mean / max |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            result = r.status if r.status in ("match", "mismatch") else \
                f"{r.status}: {r.refused or r.error}"
            out.append(f"| {r.index} | {r.line} | {_cell(result, 80)} | "
                       f"{_cell(_divergence_cell(r), 60)} | {answer_marks(r)} | "
                       f"{_logprob_cells(r)} |")
    if report.skipped:
        out += ["", "## Dataset lines skipped", ""]
        out += [f"- line {s.line}: {s.reason}" for s in report.skipped]
    return "\n".join(out) + "\n"


def text(report: RolloutReport, worst: int = 10) -> str:
    out = [f"rollout-check: {HEADLINES.get(report.verdict, report.verdict)}"]
    width = max(len(k) for k, _ in summary_rows(report))
    out += [f"  {k.ljust(width)}  {v}" for k, v in summary_rows(report)]
    if report.limits:
        out.append("limits:")
        out += [f"  - {line}" for line in report.limits]
    causes = report.causes()
    if causes:
        out.append("usual causes:")
        out += [f"  - {c}" for c in causes]
    bad = [r for r in sorted_results(report) if r.status != "match"][:worst]
    if bad:
        out.append(f"worst samples (of {len(report.results)}):")
        out += [f"  #{r.index} (line {r.line}): {r.summary()}" for r in bad]
    if report.skipped:
        out.append(f"dataset lines skipped: {len(report.skipped)}")
        out += [f"  - {s}" for s in report.skipped[:worst]]
    return "\n".join(out)
