"""The rollout report as text (terminal) and markdown (a ticket). Pure.

``answer_marks(result)`` is also the app's answer column (rollout/form.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rltui.checks.rollout.compare import NORMAL_BELOW, PROBLEM_ABOVE

if TYPE_CHECKING:
    from rltui.checks.rollout.report import RolloutReport, SampleResult

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


def _logprob_line(report: "RolloutReport") -> str:
    lp = report.logprob
    if lp is None:
        return f"not available ({report.logprob_reason()})"
    return (f"{lp.verdict} by mean |dp| {lp.prob_mean:.4g} (verl's thresholds, on |dp|: below "
            f"{NORMAL_BELOW} normal, above {PROBLEM_ABOVE} a precision problem); max |dp| "
            f"{lp.prob_max:.4g}, mean |dlogp| {lp.mean:.4g}, max |dlogp| {lp.max:.4g}; over "
            f"{lp.tokens} tokens of {lp.samples} samples")


def summary_rows(report: "RolloutReport") -> list[tuple[str, str]]:
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


def answer_marks(result: "SampleResult") -> str:
    """Whether each side found the expected answer, ``reference/candidate``: ``yes/no``; ``-``
    for a side without an output, or for the whole cell when the sample has no answer."""
    def one(side) -> str:
        if side is None or side.answer is None:
            return "-"
        return "yes" if side.answer.match else "no"
    if result.expected is None:
        return "-"
    return f"{one(result.reference)}/{one(result.candidate)}"


def _divergence_cell(r: "SampleResult") -> str:
    d = r.first_divergence
    if d is None:
        return "" if r.status != "mismatch" else "text differs"
    ref = repr(d.reference.text) if d.reference else f"<end {d.reference_end}>"
    cand = repr(d.candidate.text) if d.candidate else f"<end {d.candidate_end}>"
    return f"@{d.index}: {ref} vs {cand}"


def _logprob_cells(r: "SampleResult") -> str:
    lp = r.comparison.logprob if r.comparison else None
    return f"{lp.prob_mean:.3g} | {lp.mean:.3g} / {lp.max:.3g}" if lp else "- | -"


def markdown(report: "RolloutReport") -> str:
    from rltui.checks.rollout.report import sorted_results

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


def text(report: "RolloutReport", worst: int = 10) -> str:
    from rltui.checks.rollout.report import sorted_results

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
