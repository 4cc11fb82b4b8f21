"""What one evaluation found, assembled once for every front end: the diagnose document, the
plain report and the incident report of ``rltui diagnose`` on this node and across nodes alike
(each used to assemble its own). Pure: the OOM triage and the config doctor, which read files,
are handed in already made (rltui.sources.oominputs).

The diagnose document and the plain report leave through ``rltui.scrub`` here: secrets hidden
in every string (thread names, command lines, log lines, event texts), and control characters
escaped in the text; the incident report through ``incident.write_report``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from rltui import report
from rltui.model import Diagnosis, NodeSnapshot
from rltui.scrub import outgoing_text, scrub

if TYPE_CHECKING:
    from rltui.diagnosis.stacks import StackReport


class Findings(msgspec.Struct, frozen=True):
    snapshot: NodeSnapshot  # the node (or, across nodes, the merged job); the focused job's
    diagnosis: Diagnosis
    mode: str  # live | demo | replay | offline
    now_source: str = "clock"
    stacks: StackReport | None = None
    stacks_job: str | None = None
    jobs: tuple = ()  # rltui.monitor.JobView, worst first
    focus: str | None = None
    oom: Any = None  # rltui.diagnosis.oom.report.OomReport, when a log holds an OOM
    doctor: tuple[str, ...] = ()  # config doctor findings (when the steps stall)
    samples: tuple[int, float | None] | None = None  # the confirming run: (taken, apart)
    cluster: Any = None  # rltui.cluster.view.ClusterSnapshot across nodes
    thresholds: Any = None  # rltui.diagnosis.thresholds.Thresholds the diagnosis used


def of_monitor(monitor, mode: str, now_source: str = "clock", **extra) -> Findings:
    """The findings of a node's Monitor after its last evaluation."""
    assert monitor.snapshot is not None and monitor.diagnosis is not None
    return Findings(snapshot=monitor.snapshot, diagnosis=monitor.diagnosis, mode=mode,
                    now_source=now_source, stacks=monitor.stacks,
                    stacks_job=monitor.stacks_job, jobs=monitor.jobs,
                    focus=monitor.focus_id or monitor.focus,
                    thresholds=monitor.thresholds, **extra)


def document(f: Findings) -> dict[str, Any]:
    """The diagnose JSON document (docs/diagnose-json.md)."""
    doc = report.to_json(f.snapshot, f.diagnosis, f.mode, f.now_source, stacks=f.stacks,
                         jobs=f.jobs, focus=f.focus, stacks_job=f.stacks_job,
                         thresholds=f.thresholds)
    if f.samples is not None:
        doc["samples"], doc["samples_apart_s"] = f.samples
    if f.oom is not None:
        from rltui.diagnosis.oom.report import report_json
        doc["oom"] = report_json(f.oom)
    if f.doctor:
        doc["config_doctor"] = list(f.doctor)
    if f.cluster is not None:
        from rltui.remote.cluster_report import nodes_json
        doc["nodes"] = nodes_json(f.cluster)
    return scrub(doc)


def text(f: Findings) -> str:
    """The plain report: the diagnosis, the OOM triage, the config doctor, the nodes."""
    out = report.to_text(f.snapshot, f.diagnosis, stacks=f.stacks,
                         jobs=f.jobs if f.focus is None else ())
    if f.oom is not None:
        from rltui.diagnosis.oom.report import report_text
        out += "\n" + report_text(f.oom)
    out += "".join(f"config doctor: {finding}\n" for finding in f.doctor)
    if f.cluster is not None:
        from rltui.remote.cluster_report import nodes_text
        out += nodes_text(f.cluster)
    return outgoing_text(out)


def incident_document(f: Findings, log_tails: Mapping[str, Sequence[str]],
                      commands: Sequence[str],
                      generated_at: float | None = None) -> dict[str, Any]:
    """The incident report's JSON (incident.md is made from it); ``generated_at`` defaults to
    the snapshot's time. Not scrubbed here: it leaves only through ``incident.write_report``,
    which scrubs it on the way out (once)."""
    from rltui import incident
    doc = incident.build(incident.ReportInputs(
        snapshot=f.snapshot, diagnosis=f.diagnosis, stacks=f.stacks, log_tails=log_tails,
        commands=list(commands), mode=f.mode, generated_at=generated_at,
        thresholds=f.thresholds, stacks_job=f.stacks_job))
    if f.cluster is not None:
        from rltui.remote.cluster_report import nodes_json
        doc["nodes"] = nodes_json(f.cluster)
    return doc
