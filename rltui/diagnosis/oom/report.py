"""Assemble the OOM report: the latest OOM of the snapshot's logs, its phase, the job's config and
model, ranked suggestions with their memory effects, and the patch (pure).

``find_oom`` picks the event; ``triage`` does the rest; ``report_json`` is the ``oom`` object of
``diagnose --json`` and ``oom --json`` (docs/oom.md), ``report_text`` its plain twin (the CLI and
the app's OOM screen show the same text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rltui import units
from rltui.model import LogEvent, LogFileState, NodeSnapshot

if TYPE_CHECKING:
    from rltui.diagnosis.oom.estimate import ModelShape
    from rltui.diagnosis.oom.types import JobConfig, OomReport

OOM_KINDS = ("cuda-oom", "engine-oom", "ray-oom")


def is_oom(event: LogEvent) -> bool:
    if event.kind in OOM_KINDS:
        return True
    return event.kind == "child-failed" and bool(event.field("possible_host_oom"))


def find_oom(snap: NodeSnapshot) -> tuple[LogFileState, LogEvent] | None:
    """The most recent OOM event of any log (by its time, else arrival)."""
    best = None
    for log in snap.logs:
        for e in log.events:
            if is_oom(e):
                # Tracebacks carry no time and one read gives its lines one arrival: the later
                # line wins a tie. Arrival orders across files when a log time is missing.
                when = (e.arrival, e.time or 0.0, e.line_no)
                if best is None or when >= best[0]:
                    best = (when, log, e)
    return (best[1], best[2]) if best else None


def triage(event: LogEvent, before: Sequence[str], config: JobConfig, *,
           shape: ModelShape | None = None, job_pids: Sequence[int] = (),
           notes: Sequence[str] = ()) -> OomReport:
    """The report for one OOM event. With the model's ``shape``, suggestions carry their memory
    effect and the report the estimate; without it effects come from the error's own numbers."""
    # Imported here: ``find_oom`` alone (is there an OOM at all?) stays light for a diagnose
    # whose logs hold none.
    from rltui.diagnosis.oom import phase as phase_reader
    from rltui.diagnosis.oom.needs import estimate_for, need_for
    from rltui.diagnosis.oom.numbers import numbers_from_event
    from rltui.diagnosis.oom.suggest import Context, patch, suggest
    from rltui.diagnosis.oom.types import OomReport
    numbers = numbers_from_event(event)
    ph = phase_reader.read_phase(event, before, config.framework)
    need = estimate = None
    if shape is not None:
        need = need_for(shape, config, ph, numbers)
        estimate = estimate_for(shape, config, ph, numbers)
    ctx = Context(numbers=numbers, phase=ph, config=config, need=need,
                  job_pids=frozenset(job_pids))
    found, more = suggest(ctx)
    return OomReport(numbers=numbers, phase=ph, framework=config.framework,
                     suggestions=tuple(found), patch=patch(config.framework, found),
                     estimate=estimate,
                     notes=tuple(notes) + tuple(config.problems) + tuple(more),
                     config_sources=config.sources)


def report_json(r: OomReport) -> dict[str, Any]:
    n = r.numbers
    return {
        "kind": n.kind,
        "phase": r.phase.phase,
        "confidence": r.phase.confidence,
        "reason": r.phase.reason,
        "role": r.phase.role,
        "framework": r.framework,
        "gpu": n.gpu,
        "numbers": {
            "requested": n.requested, "capacity": n.capacity, "free": n.free,
            "allocated": n.allocated, "reserved_unallocated": n.reserved_unallocated,
            "others": [{"pid": pid, "bytes": used} for pid, used in n.others],
            "this_process": n.this_process,
        },
        "suggestions": [{
            "key": s.key, "current": s.current, "current_is_default": s.current_is_default,
            "proposed": s.proposed, "why": s.why, "effect_bytes": s.effect_bytes,
            "tradeoff": s.tradeoff, "also": [{"key": k, "value": v} for k, v in s.also],
            "estimate_before": s.need_before, "estimate_after": s.need_after,
        } for s in r.suggestions],
        "patch": r.patch,
        "estimate": dict(r.estimate) if r.estimate is not None else None,
        "notes": list(r.notes),
        "config_sources": list(r.config_sources),
    }


def report_text(r: OomReport) -> str:
    from rltui.diagnosis.oom import present
    n = r.numbers
    lines = [f"OOM ({n.kind}) on GPU {n.gpu if n.gpu is not None else '?'}: "
             f"phase {r.phase.phase} ({r.phase.confidence} confidence"
             + (f", {r.phase.role}" if r.phase.role else "") + ")",
             f"  why this phase: {r.phase.reason or 'nothing decided it'}",
             f"  framework: {r.framework}",
             f"  config: {present.config_text(r)}"]
    if n.requested is not None or n.capacity is not None:
        lines.append(f"  tried to allocate {units.gib(n.requested)}; capacity "
                     f"{units.gib(n.capacity)}, free {units.gib(n.free)}, allocated by PyTorch "
                     f"{units.gib(n.allocated)}, reserved but unallocated "
                     f"{units.gib(n.reserved_unallocated)}")
    for pid, used in n.others:
        lines.append(f"  process {pid} holds {units.gib(used)}")
    lines.append("")
    shortfall = present.shortfall(r)
    if shortfall is not None:
        lines.append(f"  short by {units.gib(shortfall)} (requested minus free)")
    if r.suggestions:
        lines.append("Suggestions, most direct first:")
        for i, s in enumerate(r.suggestions, 1):
            cur = present.current_text(s, bool(r.config_sources))
            effect = f", saves {present.saves_text(s)}" if s.effect_bytes else ""
            if s.effect_bytes and shortfall and s.effect_bytes >= shortfall:
                effect += " (covers the shortfall)"
            lines.append(f" {i}. {present.key_text(s)}: {cur} -> {present.proposed_text(s)}"
                         f"{effect}")
            if present.estimate_text(s):
                lines.append(f"      estimate for the phase: {present.estimate_text(s)}")
            for k, v in s.also:
                lines.append(f"      with {k}: {present.value_text(v)}")
            lines.append(f"      why: {s.why}")
            lines.append(f"      trade-off: {s.tradeoff}")
    else:
        lines.append("No suggestion: nothing in the config can be changed for this phase.")
    if r.patch:
        lines += ["", "Patch:", *("  " + line for line in r.patch.rstrip("\n").split("\n"))]
    if r.estimate:
        lines += ["", "Memory estimate per GPU (before):"]
        for name, value in (r.estimate.get("components") or {}).items():
            lines.append(f"  {name:16} {units.gib(value)}")
    if r.notes:
        lines += [""] + [f"note: {note}" for note in r.notes]
    return "\n".join(lines) + "\n"
