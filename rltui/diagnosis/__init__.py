"""Pure diagnosis: snapshots in, symptoms and suggestions out.

No I/O, no clock (time arrives in the snapshot), no Textual. Each rule is a function
``(snapshot, history, thresholds) -> list[Symptom]``; later issues append to ``RULES``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rltui.diagnosis import gpu, hangs, incidents, logs, ranks
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import Diagnosis, NodeSnapshot, Symptom, severity_rank

Rule = Callable[[NodeSnapshot, Sequence[NodeSnapshot], Thresholds], list[Symptom]]

RULES: list[Rule] = [gpu.idle_vs_busy, ranks.rank_exited, logs.steps_stalled,
                     logs.zero_step_completion, logs.nccl_timeout, logs.cuda_oom,
                     hangs.stack_hang, ranks.no_job_found]


def verdict_of(symptoms: Sequence[Symptom]) -> str:
    worst = max((severity_rank(s.severity) for s in symptoms), default=-1)
    if worst >= severity_rank("critical"):
        return "critical"
    if worst >= severity_rank("warning"):
        return "warning"
    return "healthy"


def diagnose(snapshot: NodeSnapshot, history: Sequence[NodeSnapshot] = (),
             thresholds: Thresholds | None = None,
             memo: hangs.HangMemo | None = None) -> Diagnosis:
    """Run every rule. ``history`` is oldest first and may include ``snapshot`` itself;
    ``memo``: the watcher's hang memo, so that the stack rule classifies each round once."""
    th = thresholds or Thresholds()
    symptoms: list[Symptom] = []
    for rule in RULES:
        if rule is hangs.stack_hang and memo is not None:
            rule = memo.symptoms
        symptoms.extend(rule(snapshot, history, th))
    symptoms.sort(key=lambda s: (-severity_rank(s.severity), s.id, s.ranks))
    return Diagnosis(timestamp=snapshot.timestamp, verdict=verdict_of(symptoms),
                     symptoms=tuple(symptoms), notes=tuple(notes_of(snapshot)),
                     incidents=tuple(incidents.group(symptoms)))


def notes_of(snap: NodeSnapshot) -> list[str]:
    """What could not be checked, and why (the diagnosis's notes)."""
    notes = []
    for state in snap.sources:
        if state.status != "ok":
            notes.append(f"{state.name}: {state.status}: {state.message}".rstrip(": "))
    if not snap.procs and not snap.departed and snap.source("procs") is not None:
        notes.append("No training processes found; rank checks had nothing to look at.")
    for glob in snap.unmatched_logs:
        notes.append(f"--log {glob}: matches no file (yet)")
    if snap.foreign_gpu_pids:
        notes.append(f"{len(snap.foreign_gpu_pids)} GPU process(es) are not visible here: the "
                     "job runs in another PID namespace (a container without the host PID "
                     "namespace).")
    return notes
