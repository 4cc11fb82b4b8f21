"""Symptoms with one cause are one incident. Pure.

One dead rank used to read as three or four CRITICAL lines in no order: the rank that exited,
the hang of the ranks that wait for it, the steps that stalled, the NCCL timeout that followed.
They are one story: the root cause first, its consequences under it.

Within one job, in this order of precedence for the root cause:

1. a rank that exited (``rank-exited``): the ranks waiting for it (any ``hang-*``), the stalled
   steps, NCCL timeouts, idle GPUs and a job that ended with no step follow from it;
2. a CUDA OOM (``cuda-oom``): the same consequences (the rank that ran out of memory raised);
3. a hang named from the stacks (``hang-*``): stalled steps, NCCL timeouts and idle GPUs follow;
4. an NCCL timeout (``nccl-timeout``): stalled steps follow;

any other symptom is an incident of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from rltui.model import Incident, Symptom, severity_rank
from rltui.rankset import label

ROOTS = ("rank-exited", "cuda-oom")
EFFECTS = {
    "rank-exited": ("hang-", "steps-stalled", "nccl-timeout", "gpu-idle-vs-busy",
                    "zero-step-completion", "cuda-oom"),
    "cuda-oom": ("hang-", "steps-stalled", "nccl-timeout", "gpu-idle-vs-busy",
                 "zero-step-completion"),
    "hang-": ("steps-stalled", "nccl-timeout", "gpu-idle-vs-busy"),
    "nccl-timeout": ("steps-stalled",),
}


def _kind(symptom_id: str) -> str:
    return "hang-" if symptom_id.startswith("hang-") else symptom_id


def _follows(root: Symptom, other: Symptom) -> bool:
    effects = EFFECTS.get(_kind(root.id), ())
    if not any(other.id.startswith(e) if e.endswith("-") else other.id == e for e in effects):
        return False
    if root.id == "rank-exited" and other.id == "cuda-oom":
        # the OOM is the exited rank's own exception: the same story, told by the log
        return not other.ranks or not root.ranks or bool(set(other.ranks) & set(root.ranks))
    return True


def group(symptoms: Sequence[Symptom], job: str = "") -> list[Incident]:
    """The incidents of one job's symptoms, worst first; every symptom is in exactly one."""
    left = list(symptoms)
    out: list[Incident] = []
    for kind in ("rank-exited", "cuda-oom", "hang-", "nccl-timeout"):
        for root in [s for s in left if _kind(s.id) == kind]:
            if root not in left:
                continue
            effects = [s for s in left if s is not root and _follows(root, s)]
            left = [s for s in left if s is not root and s not in effects]
            out.append(_incident(root, effects, job))
    out += [_incident(s, [], job) for s in left]
    out.sort(key=lambda i: (-severity_rank(i.severity), i.since is None, i.since or 0.0))
    return out


def _incident(root: Symptom, effects: list[Symptom], job: str) -> Incident:
    severity = max((root, *effects), key=lambda s: severity_rank(s.severity)).severity
    return Incident(root_cause=root.id, symptoms=(root.id, *(s.id for s in effects)),
                    title=_title(root, effects), explanation=_explanation(root, effects),
                    severity=severity, job=job or root.job, ranks=root.ranks,
                    since=root.since)


def _title(root: Symptom, effects: list[Symptom]) -> str:
    """What happened, cause first: "rank 3 crashed (RuntimeError at trainer.py:130); ranks
    0-2 wait for it in all_reduce"."""
    head = root.title.split(" while ", 1)[0] if root.id == "rank-exited" else root.title
    hang = next((s for s in effects if s.id.startswith("hang-")), None)
    if hang is not None:
        tail = hang.title.split("; ", 1)[1] if "; " in hang.title else hang.title
        return f"{head}; {tail}"
    stalled = next((s for s in effects if s.id == "steps-stalled"), None)
    if stalled is not None:
        return f"{head}; {stalled.title}"
    return head


def _explanation(root: Symptom, effects: list[Symptom]) -> str:
    if not effects:
        return f"{root.title}."
    who = f" ({label(root.ranks)})" if root.ranks else ""
    parts = [f"The root cause is {root.id}{who}: {root.title}."]
    names = {s.id: s for s in effects}
    if any(i.startswith("hang-") for i in names):
        parts.append("The ranks that still run wait for it: the hang is a consequence, not a "
                     "second problem.")
    if "steps-stalled" in names:
        parts.append("The steps stopped because of it.")
    if "nccl-timeout" in names:
        parts.append("The NCCL timeout is the waiting ranks giving up.")
    if "gpu-idle-vs-busy" in names:
        parts.append("Idle GPUs are the waiting ranks'.")
    return " ".join(parts) + " Fix the root cause; the rest follows."
