"""The workflow check as the app's check screen shows it: the form, the spec it builds, and a
report as rows (findings first, then the runs that failed) and a summary. Pure: the screen
calls ``run`` in a worker."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rltui.checks.export import export_report
from rltui.checks.forms import CheckForm, text_value
from rltui.checks.params import form_fields, form_values
from rltui.checks.workflow.params import PARAMS

COLUMNS = ("kind", "where", "what")
MAX_RUN_ROWS = 200  # the export has every run; the table shows the first failures

# the settings the form asks for, in its order (each declared once, in workflow/params.py)
FORM_ORDER = ("target", "dataset", "prompt", "paths", "base_url", "api_key", "global_bs",
              "group_size", "rollout_dp_size", "timeout", "concurrency", "extra_kwargs")
FIELDS = form_fields(PARAMS, FORM_ORDER)
TYPED = ("base_url", "api_key", "global_bs", "group_size", "rollout_dp_size", "timeout",
         "concurrency")  # read as declared; the others below


def build_spec(values: Mapping[str, str]):
    from rltui.checks.workflow.spec import WorkflowSpec, parse_json_object, validate

    target = text_value(values, "target")
    if not target:
        raise ValueError("fill in the workflow (module:Class)")
    data, prompt = text_value(values, "data"), text_value(values, "prompt")
    if not data and not prompt:
        raise ValueError("fill in data (a JSONL file) or a prompt")
    path = text_value(values, "path")
    kwargs = text_value(values, "kwargs")
    spec = WorkflowSpec(
        target=target, dataset=str(Path(data).expanduser()) if data else None,
        prompt=None if data else prompt, **form_values(PARAMS, values, TYPED),
        extra_kwargs=parse_json_object(kwargs, "extra kwargs") if kwargs else {},
        paths=(path,) if path else ())
    validate(spec)  # SpecError is a ValueError: the form shows its message
    return spec


def run(spec: Any, *, progress=None, cancel=None):
    from rltui.checks.workflow.runner import run as run_check
    return run_check(spec, progress=progress, cancel=cancel)


def _run_row(result: Any) -> tuple[str, str, str] | None:
    """A run worth a row: failed, timed out, unfinished, or returned an invalid reward."""
    where = f"{result.step} run {result.run} (prompt {result.prompt})"
    if result.status == "error":
        return ("error", where, f"{result.error_type}: {result.message}")
    if result.status in ("timeout", "unfinished"):
        return (result.status, where, result.message or "")
    if result.invalid:
        return ("invalid reward", where, str(result.invalid.get("reason", "")))
    return None


def item_row(item: Any) -> tuple[str, ...] | None:
    return _run_row(item) if hasattr(item, "status") and hasattr(item, "step") else None


def _failed_runs(report: Any) -> list[Any]:
    runs = ([report.single] if report.single else []) + report.sequential + report.concurrent
    return [r for r in runs if _run_row(r) is not None]


def rows(report: Any) -> list[tuple[str, ...]]:
    out = [(f.severity, f.title, f.detail or f.advice) for f in report.findings()]
    failed = _failed_runs(report)
    out += [_run_row(r) for r in failed[:MAX_RUN_ROWS]]
    if len(failed) > MAX_RUN_ROWS:
        out.append(("...", f"{len(failed) - MAX_RUN_ROWS} more runs", "in the export"))
    if not out and report.single is not None:
        out.append(("ok", "every run", "no errors, timeouts or invalid rewards"))
    return out


def detail(report: Any, index: int) -> tuple[str, str]:
    """The full text behind a row: a finding with its advice, or a run with its traceback."""
    found = report.findings()
    if index < len(found):
        f = found[index]
        return (f"[{f.severity}] {f.title}", "\n\n".join(x for x in (f.detail, f.advice) if x))
    failed = _failed_runs(report)[:MAX_RUN_ROWS]
    index -= len(found)
    if 0 <= index < len(failed):
        r = failed[index]
        kind, where, what = _run_row(r)
        body = [what, "", r.traceback or ""]
        if r.status == "timeout" and report.pending_tasks:
            body.append("Pending tasks at the first timeout: see the export.")
        return (f"{kind}: {where}", "\n".join(body).rstrip())
    return ("", report.to_text())


def could_not_run(report: Any) -> bool:
    """Stopped before the first run (the module did not import, the data could not be read),
    or the first run failed for want of a server, which says nothing about the workflow."""
    return bool(report.setup_error) or report.server_down()


def summary(report: Any) -> str:
    data = report.to_json()
    single, c = data["single"], data["concurrency"]
    verdict = data["verdict"].replace("_", " ")
    if data.get("setup_error"):
        return f"{verdict}: {data['setup_error'].get('message')}"
    lines = [f"{verdict}: single run "
             + ("ok" if single["ok"] else f"{single['status']}: {single['error']}")]
    if c.get("skipped"):
        lines.append(f"concurrent: skipped ({c['skipped']})")
    else:
        lat = ", ".join(f"{k} {c[k]:.2f} s" for k in ("p50", "p95", "max")
                        if c.get(k) is not None) or "no completed runs"
        tput = f", {c['throughput']:.1f} runs/s" if c.get("throughput") else ""
        lines.append(f"concurrent: {c['completed']}/{c['requested']} completed, "
                     f"{c['error_count']} errors, {c['timeouts']} timeouts; {lat}{tput}")
    agree = data["sequential_vs_concurrent_agree"]
    lines.append("sequential vs concurrent: " + {True: "agree", False: "DISAGREE",
                                                 None: "not compared"}[agree])
    if data["invalid_rewards"]:
        lines.append(f"invalid rewards: {len(data['invalid_rewards'])}")
    if data.get("skipped"):
        lines.append(f"dataset lines skipped: {len(data['skipped'])} (see the export)")
    if data.get("partial"):
        lines.append("partial: " + (data.get("partial_reason")
                                    or "the check did not run to the end"))
    return "\n".join(lines)


def export(report: Any, folder: Path) -> list[Path]:
    return export_report(report, folder, "workflow-check")


def workflow_form() -> CheckForm:
    return CheckForm(
        kind="workflow", title="Agent workflow: one run, then RL-shaped concurrency",
        intro="module:Class runs in a child process: one sample, then global_bs // "
              "rollout_dp_size prompts x group_size samples at once (rltui docs workflow-check).",
        fields=FIELDS, build_spec=build_spec, run=run, columns=COLUMNS, rows=rows,
        item_row=item_row, summary=summary, export=export, detail=detail,
        could_not_run=could_not_run)
