"""The rollout check as the app's check screen shows it: the form, the spec it builds, and a
report as table rows (worst first) and a summary. Pure: the screen calls ``run`` in a worker."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rltui.checks.export import export_report
from rltui.checks.forms import CheckForm, text_value
from rltui.checks.params import form_fields, form_key, form_values
from rltui.checks.rollout.params import PARAMS
from rltui.checks.rollout.report import answer_marks

COLUMNS = ("#", "line", "status", "first divergence", "answer ref/cand", "|Δp| mean",
           "|Δlogp| max")

# the settings the form asks for, in its order (each declared once, in rollout/params.py)
FORM_ORDER = ("dataset", "reference", "server", "model", "max_new_tokens", "limit",
              "concurrency", "api", "tokenizer", "timeout_s", "api_key")
FIELDS = form_fields(PARAMS, FORM_ORDER)


def build_spec(values: Mapping[str, str]):
    from rltui.checks.rollout.spec import RolloutSpec

    required = [p.form.label for p in PARAMS if p.required and p.form is not None
                and not text_value(values, form_key(p))]
    if required:
        raise ValueError("fill in " + ", ".join(required))
    dataset = text_value(values, "dataset")
    if not Path(dataset).expanduser().is_file():
        raise ValueError(f"dataset {dataset}: no such file")
    typed = form_values(PARAMS, values, FORM_ORDER)
    spec = RolloutSpec(**{**typed, "dataset": str(Path(dataset).expanduser())})
    spec.validate()  # SpecError is a ValueError: the form shows its message
    return spec


def run(spec: Any, *, progress=None, cancel=None):
    from rltui.checks.rollout.runner import run as run_check
    return run_check(spec, progress=progress, cancel=cancel)


def _divergence(d: Any) -> str:
    """Short for a table cell; the detail view and the exports give the token ids."""
    def side(tok: Any, end: str | None) -> str:
        return repr(tok.text) if tok is not None else f"<end: {end or '?'}>"
    return (f"token {d.index}: {side(d.reference, d.reference_end)} vs "
            f"{side(d.candidate, d.candidate_end)}")


def row(result: Any) -> tuple[str, ...]:
    comparison = result.comparison
    lp = comparison.logprob if comparison else None
    if result.status == "mismatch" and result.first_divergence is not None:
        where = _divergence(result.first_divergence)
    elif result.status in ("refused", "error"):
        where = result.refused or result.error or ""
    else:
        where = ""
    return (str(result.index), str(result.line), result.status, where, answer_marks(result),
            f"{lp.prob_mean:.2g}" if lp else "-", f"{lp.max:.3g}" if lp else "-")


def rows(report: Any) -> list[tuple[str, ...]]:
    from rltui.checks.rollout.report import sorted_results
    return [row(r) for r in sorted_results(report)]


def detail(report: Any, index: int) -> tuple[str, str]:
    """One sample in full: both outputs, where they part, answers and log-probs."""
    from rltui.checks.rollout.report import sorted_results
    ordered = sorted_results(report)
    if not 0 <= index < len(ordered):
        return ("", report.to_text())
    r = ordered[index]
    lines = [f"status: {r.summary()}", f"input: {r.input}, {r.prompt_tokens} prompt tokens"]
    if r.expected is not None:
        lines.append(f"expected answer: {r.expected!r} (reference/candidate: {answer_marks(r)})")
    c = r.comparison
    if c is not None:
        lines.append(f"compared on {c.basis}: reference {c.reference_tokens} tokens, candidate "
                     f"{c.candidate_tokens} tokens")
        if c.logprob is not None:
            lp = c.logprob
            lines.append(f"log-prob on the shared prefix ({lp.tokens} tokens): mean |Δlogp| "
                         f"{lp.mean:.3g}, max {lp.max:.3g}; mean |Δp| {lp.prob_mean:.3g}")
        elif c.logprob_missing:
            lines.append(f"log-prob: not compared ({c.logprob_missing})")
    for name, side in (("reference", r.reference), ("candidate", r.candidate)):
        if side is not None:
            lines += ["", f"{name} ({side.tokens} tokens, finish {side.finish_reason or '?'}):",
                      side.text]
    return (f"sample {r.index} (dataset line {r.line}): {r.status}", "\n".join(lines))


def item_row(item: Any) -> tuple[str, ...] | None:
    return row(item) if hasattr(item, "status") and hasattr(item, "comparison") else None


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def could_not_run(report: Any) -> bool:
    """Stopped before any sample was compared (no server, no reference, a bad dataset)."""
    return bool(report.error) and not report.compared


def summary(report: Any) -> str:
    data = report.to_json()
    if data["error"] and not data["compared"]:
        return f"could not run: {data['error']}"
    lines = [f"{data['verdict']}: {data['compared']} of {data['samples']} compared, agreement "
             f"{_rate(data['agreement_rate'])}, accuracy reference "
             f"{_rate(data['reference_accuracy'])} / candidate "
             f"{_rate(data['candidate_accuracy'])}"]
    lp = data["logprob_diff"]
    if lp is not None:
        lines.append(f"log-prob difference: mean |Δp| {lp['prob_mean']:.3g} ({lp['verdict']}), "
                     f"max |Δlogp| {lp['max']:.3g} over {lp['tokens']} tokens")
    else:
        lines.append(f"log-prob difference: none ({data['logprob_diff_reason']})")
    if data["refused"] or data["errors"]:
        lines.append(f"refused {data['refused']}, errors {data['errors']}")
    if data["error"]:
        lines.append(f"error: {data['error']}")
    if data["partial"]:
        lines.append("partial: " + (data["stopped"] or ("cancelled" if data["cancelled"]
                                                        else "cut short")))
    lines += [f"limit: {limit}" for limit in data["limits"]]
    return "\n".join(lines)


def export(report: Any, folder: Path) -> list[Path]:
    return export_report(report, folder, "rollout-check")


def rollout_form() -> CheckForm:
    return CheckForm(
        kind="rollout", title="Rollout consistency: reference vs inference server",
        intro="Same token ids on both sides, greedy, same max new tokens: the first divergent "
              "token, answers and log-prob difference per sample (rltui docs rollout-check).",
        fields=FIELDS, build_spec=build_spec, run=run, columns=COLUMNS, rows=rows,
        item_row=item_row, summary=summary, export=export, detail=detail,
        could_not_run=could_not_run)
