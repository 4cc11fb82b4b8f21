"""The cluster's diagnosis: the single-node rules on the merged snapshot, the hang classification
of the merged stacks, and what only a cluster has (hosts not answering, ranks claimed twice).
Pure: no I/O, no clock.

Every rule of ``rltui.diagnosis.RULES`` reads the merged snapshot as it would one node's, so
``gpu-idle-vs-busy``, ``rank-exited``, ``steps-stalled`` and the log rules span nodes as they
are. The stack rule is the one exception: its snapshot carries no stack rounds and the merged
rounds are classified here, with the same ``stacks.classify`` and ``hangs.steps_state``,
because the single-node rule drops the dumps of departed processes by pid and pids repeat
across nodes (``stackmerge`` filters per host instead).

Two texts are adjusted for a cluster: GPU evidence names the host (``node02 GPU 3``, not the
cluster-wide index) and "dump every rank" lists no pids (they mean nothing without their host).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rltui.cluster.view import (
    CONNECTING,
    GPU_STRIDE,
    LOST,
    RANK_UNKNOWN,
    ClusterRank,
    DuplicateRank,
    NodeView,
    seen_ago,
)
from rltui.diagnosis import diagnose, hangs, verdict_of
from rltui.diagnosis.stacks import StackReport, classify, symptoms
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import Diagnosis, NodeSnapshot, StackPoll, Symptom, replace, severity_rank
from rltui.rankset import label
from rltui.redact import scrub_text

HOST_LOST = "host-lost"
UNREACHABLE = "cluster-unreachable"
STEPS_STALLED = "steps-stalled"  # rltui.diagnosis.logs.steps_stalled
DUPLICATE_RANKS = "rank-duplicate"

_GPU_EVIDENCE = re.compile(r"^GPU (\d+)\b")


def stack_inputs(merged: NodeSnapshot, rounds: Sequence[StackPoll],
                 history: Sequence[NodeSnapshot], th: Thresholds, base: Diagnosis | None = None
                 ) -> tuple[tuple[int, ...], bool | None]:
    """What the single-node rule feeds the classification besides the stacks: the departed
    ranks (missing from the dump) and whether the logs say the steps stalled
    (``hangs.steps_state``). ``base``: the rules' diagnosis of ``merged`` when already made;
    its steps-stalled symptom answers the first question of steps_state without reading
    every log again (the costly part with a thousand logs)."""
    missing = tuple(sorted({d.rank for d in merged.departed if d.rank is not None}))
    if base is not None and any(s.id == STEPS_STALLED for s in base.symptoms):
        return missing, True
    return missing, hangs.steps_state(replace(merged, stacks=tuple(rounds)), history, th)


def classify_rounds(rounds: Sequence[StackPoll], missing: Sequence[int],
                    stalled: bool | None) -> StackReport | None:
    """The hang report of the merged samples (None without any)."""
    if not rounds:
        return None
    return classify([p.dumps for p in rounds], missing_ranks=missing, steps_stalled=stalled)


def _hang_symptoms(report: StackReport | None, rounds: Sequence[StackPoll],
                   unknown: Sequence[int]) -> list[Symptom]:
    if report is None:
        return []
    found = symptoms(report)
    extra = ((f"{label(unknown)} on hosts that do not answer: not in the comparison, unknown "
              "rather than exited",) if unknown else ())
    return [replace(s, since=rounds[0].started, evidence=s.evidence + extra) for s in found]


def _host_lost(nodes: Sequence[NodeView], rows: Sequence[ClusterRank],
               now: float) -> list[Symptom]:
    """One warning for every host that does not answer: those that had data (lost, or
    reconnecting: their ranks are unknown, not exited) and those never reached (lost before a
    first reading: their ranks are not in the view at all). A host still connecting for the
    first time is not yet a problem (the app's first seconds)."""
    silent = [n for n in nodes if n.status.state == LOST
              or (n.snapshot is not None and n.status.state == CONNECTING)]
    if not silent:
        return []
    evidence, everyone = [], []
    for n in silent:
        reason = f": {scrub_text(n.status.reason)}" if n.status.reason else ""
        if n.snapshot is None:
            line = f"{n.host}: never reached{reason or ': no answer'}; its ranks are not seen"
        else:
            ranks = sorted({r.rank for r in rows if r.host == n.host
                            and r.state == RANK_UNKNOWN and r.rank is not None})
            everyone += ranks
            who = label(ranks) if ranks else "no ranked process"
            line = (f"{n.host}: {n.status.state}, last heard {seen_ago(now, n.status.last_seen)}"
                    f"{reason}; {who} alive when last seen, now unknown (not counted as "
                    "exited)")
        if len(evidence) < 8:
            evidence.append(line)
    if len(silent) > 8:
        evidence.append(f"... and {len(silent) - 8} more hosts")
    hosts = ", ".join(n.host for n in silent[:4]) + (", ..." if len(silent) > 4 else "")
    ranks = f": {label(everyone)} unknown" if everyone else ""
    what = ("could not be reached" if all(n.snapshot is None for n in silent)
            else "not answering")
    title = (f"{hosts} {what}{ranks}" if len(silent) == 1
             else f"{len(silent)} hosts {what} ({hosts}){ranks}")
    return [Symptom(
        id=HOST_LOST, severity="warning", title=title, ranks=tuple(sorted(set(everyone))),
        evidence=tuple(evidence),
        next_steps=(
            "Read the reason: it says what ssh or srun reported and what to do about it.",
            "Check the node itself: does `ssh HOST true` answer without a prompt (BatchMode), "
            "is it up (sinfo -n HOST, scontrol show node HOST), does the job still run there "
            "(squeue -j JOBID)? A slow jump host may need a longer --connect-timeout.",
            "A node that went down takes its ranks with it: the others then wait for them in a "
            "collective (all in one collective, these ranks absent).",
            "When the host answers again its ranks are read afresh; those gone by then are "
            "reported as exited.",
        ),
        since=min((n.status.last_seen for n in silent if n.status.last_seen is not None),
                  default=None))]


def _unreachable(feed_error: str) -> list[Symptom]:
    """The source of every node cannot be read (a Ray dashboard that does not answer): nothing
    on screen is current, and no node may be listed at all."""
    if not feed_error:
        return []
    return [Symptom(
        id=UNREACHABLE, severity="critical",
        title="The cluster cannot be read: nothing shown is current",
        evidence=(scrub_text(feed_error),),
        next_steps=(
            "Read the evidence: it says what failed and what to do about it.",
            "Check the address from this machine (curl http://HEAD:8265/api/version for a Ray "
            "dashboard); behind a firewall, tunnel it (ssh -L 8265:localhost:8265 HEAD) and "
            "give --ray 127.0.0.1:8265.",
        ))]


def _duplicates(dups: Sequence[DuplicateRank]) -> list[Symptom]:
    if not dups:
        return []
    evidence = [f"rank {d.rank}: " + ", ".join(f"{h} pid {pid}" for h, pid in d.claims)
                + f" (kept: {d.claims[0][0]})" for d in dups[:8]]
    if len(dups) > 8:
        evidence.append(f"... and {len(dups) - 8} more ranks")
    ranks = tuple(d.rank for d in dups)
    return [Symptom(
        id=DUPLICATE_RANKS, severity="warning",
        title=f"{label(ranks)} claimed by more than one host",
        ranks=ranks, evidence=tuple(evidence),
        next_steps=(
            "Are these hosts one job? A host of another job in the host list shows its ranks "
            "a second time.",
            "Several worker groups (Ray, verl resource pools) number their ranks from 0 each: "
            "the ranks repeat by design; read each host's processes on their own.",
            "Check RANK, NODE_RANK and GROUP_RANK on each host: two nodes launched with one "
            "node rank collide exactly like this.",
        ))]


def _for_cluster(s: Symptom, nodes: Sequence[NodeView]) -> Symptom:
    slots = {n.slot: n.host for n in nodes}

    def gpu_label(m: re.Match) -> str:
        slot, local = divmod(int(m.group(1)), GPU_STRIDE)
        return f"{slots.get(slot, '?')} GPU {local}"

    evidence = tuple(_GPU_EVIDENCE.sub(gpu_label, e) for e in s.evidence)
    return s if evidence == s.evidence else replace(s, evidence=evidence)


def diagnose_cluster(merged: NodeSnapshot, history: Sequence[NodeSnapshot], th: Thresholds, *,
                     nodes: Sequence[NodeView], rows: Sequence[ClusterRank],
                     duplicates: Sequence[DuplicateRank], rounds: Sequence[StackPoll],
                     report: StackReport | None, notes: Sequence[str],
                     base: Diagnosis | None = None, feed_error: str = "") -> Diagnosis:
    """One diagnosis for the whole job. ``merged`` has no stack rounds; ``rounds`` and
    ``report`` are the merged samples and their classification (``classify_rounds``); ``base``
    the rules' diagnosis of ``merged`` when already made."""
    base = base or diagnose(merged, history, th)
    unknown = sorted({r.rank for r in rows if r.state == RANK_UNKNOWN and r.rank is not None})
    found = [_for_cluster(s, nodes) for s in base.symptoms]
    found += _hang_symptoms(report, rounds, unknown)
    found += _host_lost(nodes, rows, merged.timestamp)
    found += _duplicates(duplicates)
    found += _unreachable(feed_error)
    found.sort(key=lambda s: (-severity_rank(s.severity), s.id, s.ranks))
    return Diagnosis(timestamp=merged.timestamp, verdict=verdict_of(found),
                     symptoms=tuple(found), notes=base.notes + tuple(notes))
