"""The incident report: one folder with ``incident.md`` and ``incident.json`` for a ticket.

What the person on call pastes into the ticket at 3 a.m.: the symptoms with their evidence and
next steps, the stack classes with one full stack per class, each rank's GPU, CPU and last step,
the last lines of each rank's log, the debug environment (secrets redacted) and the exact
commands rltui ran to get all this, so the next person can run them again.

``build`` and ``to_markdown`` are pure (values in, a document out); ``write_report`` is the one
function here that touches the disk. The JSON layout is public (docs/incident-report.md):
fields are only ever added.
"""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltui import __version__, units
from rltui.diagnosis.exits import exit_of
from rltui.diagnosis.flightrec import analysis_json
from rltui.diagnosis.stacks import StackReport, report_json, where
from rltui.diagnosis.stackview import class_label, member_labels
from rltui.diagnosis.thresholds import Thresholds
from rltui.diagnosis.timeline import of_snapshot as timeline_of
from rltui.diagnosis.timelinechart import chart as timeline_chart
from rltui.diagnosis.timelinechart import summary as timeline_summary
from rltui.model import Diagnosis, Frame, NodeSnapshot, ProcInfo, ThreadStack
from rltui.parsing.stackframes import is_cut
from rltui.rankset import compact
from rltui.redact import scrub_text
from rltui.serialize import to_data

SCHEMA = 1
LOG_TAIL = 30  # lines per log file
MAX_FRAMES = 200  # per stack in the markdown (the JSON keeps the parsed stack)
TIMELINE_ROWS = 32  # ranks in the markdown's timeline chart (the JSON keeps every rank)
TIMELINE_WIDTH = 48  # columns of its bars


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """Everything a report is built from, gathered by the caller (app or CLI)."""

    snapshot: NodeSnapshot
    diagnosis: Diagnosis
    stacks: StackReport | None = None
    log_tails: Mapping[str, Sequence[str]] = ()  # type: ignore[assignment] # path -> lines
    commands: Sequence[str] = ()  # how rltui was run and what it ran (py-spy, ...)
    mode: str = "live"
    generated_at: float | None = None  # defaults to the snapshot's time
    thresholds: Thresholds | None = None  # the diagnosis's (the timeline's stall limit)
    stacks_job: str | None = None  # the job ``stacks`` reads, when the node runs several


# -- the document ----------------------------------------------------------------------------------

def _frame(f: Frame) -> dict[str, Any]:
    out: dict[str, Any] = {"name": f.name, "file": f.filename, "line": f.line}
    if f.native:
        out["native"] = True
    return out


def _class_stacks(report: StackReport) -> list[dict[str, Any]]:
    """One full stack per class: the chosen thread of its first member whose dump was whole
    (a stack cut short counts with a class, but lost its outer frames), innermost first."""
    out = []
    tree = report.tree
    for i, c in enumerate(report.classes):
        member = c.members[0]
        if tree is not None:
            member = next((m for m in c.members if not _cut_short(tree.chosen.get(m))), member)
        thread: ThreadStack | None = tree.chosen.get(member) if tree is not None else None
        dump = tree.dumps.get(member) if tree is not None else None
        frames = thread.frames if thread is not None else tuple(reversed(c.frames))
        out.append({
            "class": class_label(i),
            "ranks": compact(c.ranks),
            "member_rank": member if member >= 0 else None,
            "pid": dump.pid if dump is not None else (-1 - member if member < 0 else None),
            "thread": thread.name if thread is not None else c.thread,
            "status": thread.status if thread is not None else "unknown",
            "state": c.state,
            "frames": [_frame(f) for f in frames],  # innermost first, as py-spy prints
        })
    return out


def _cut_short(thread: ThreadStack | None) -> bool:
    return thread is not None and bool(thread.frames) and is_cut(thread.frames[-1])


def _gpu_of(snap: NodeSnapshot, p: ProcInfo) -> dict[str, Any] | None:
    for g in snap.gpus:
        if g.index == p.gpu_index:
            return {"index": g.index, "name": g.name, "util": g.util, "mem_used": g.mem_used,
                    "mem_total": g.mem_total, "error": g.error or None}
    return None


def _ranks(snap: NodeSnapshot, labels: Mapping[int, str]) -> list[dict[str, Any]]:
    # Across nodes pids repeat: a log found by pid is matched on its node too.
    logs_by_pid = {(log.host, log.pid): log for log in snap.logs if log.pid is not None}
    logs_by_rank = {log.rank: log for log in snap.logs if log.rank is not None}
    rows = []
    for p in sorted(snap.procs, key=lambda p: (p.rank is None, p.rank or 0, p.pid)):
        log = logs_by_pid.get((p.host, p.pid)) or logs_by_rank.get(p.rank)
        member = p.rank if p.rank is not None else -1 - p.pid
        rows.append({
            "rank": p.rank, "host": p.host, "pid": p.pid, "role": p.role, "state": p.state,
            "cpu_percent": p.cpu_percent, "rss": p.rss, "gpu": _gpu_of(snap, p),
            "last_step": log.last_step if log else None,
            "last_step_age_s": (round(snap.timestamp - log.last_step_time, 1)
                                if log and log.last_step_time is not None else None),
            "stack_class": labels.get(member),
            "log": log.path if log else None,
        })
    for d in snap.departed:
        ex = exit_of(snap, d)
        state = d.reason + (f", {ex.how}" if ex.how else "")
        rows.append({"rank": d.rank, "host": d.info.host if d.info else "",
                     "pid": d.pid or None, "state": state,
                     "gone_since": d.gone_since, "stack_class": None,
                     "role": d.info.role if d.info else "",
                     "exit_code": ex.code, "signal": ex.signal or None, "left_at": ex.at,
                     "left_at_from": ex.at_from or None, "error": ex.error or None})
    return rows


def _debug_env(snap: NodeSnapshot) -> dict[str, dict[str, str]]:
    """Debug variables per rank (ProcInfo already redacted them); identical sets collapse into
    one entry keyed by the compact rank set."""
    by_env: dict[tuple, list[int]] = {}
    for p in snap.procs:
        by_env.setdefault(tuple(sorted(p.debug_env)), []).append(
            p.rank if p.rank is not None else -1)
    out = {}
    for env, ranks in sorted(by_env.items(), key=lambda kv: min(kv[1])):
        key = "ranks " + compact(r for r in ranks if r >= 0) if any(r >= 0 for r in ranks) \
            else "processes without a rank"
        out[key] = dict(env)
    return out


def build(inputs: ReportInputs) -> dict[str, Any]:
    """The JSON document of an incident."""
    snap, diag, stacks = inputs.snapshot, inputs.diagnosis, inputs.stacks
    labels = member_labels(stacks) if stacks is not None else {}
    return {
        "schema": SCHEMA,
        "kind": "rltui-incident",
        "tool": f"rltui {__version__}",
        "generated_at": inputs.generated_at if inputs.generated_at is not None
        else snap.timestamp,
        "mode": inputs.mode,
        "host": snap.host,
        "job": snap.job,
        "snapshot_time": snap.timestamp,
        "verdict": diag.verdict,
        "symptoms": [_scrubbed(s) for s in diag.symptoms],
        "incidents": [{"root_cause": i.root_cause, "symptoms": list(i.symptoms), "job": i.job,
                       "title": scrub_text(i.title), "explanation": scrub_text(i.explanation),
                       "severity": i.severity, "ranks": list(i.ranks), "since": i.since}
                      for i in diag.incidents],
        "stacks": report_json(stacks) if stacks is not None else None,
        "class_stacks": _class_stacks(stacks) if stacks is not None else [],
        "flight_recorder": analysis_json(stacks.flight_recorder) if stacks is not None else None,
        "ranks": _ranks(snap, labels),
        "timeline": timeline_of(snap, stacks, inputs.thresholds, inputs.stacks_job),
        "gpus": [to_data(g) for g in snap.gpus],
        "gpu_simulated": snap.gpu_simulated,
        "logs": [{"path": path, "rank": _rank_of_log(snap, path),
                  "last_lines": [scrub_text(line) for line in lines]}
                 for path, lines in inputs.log_tails.items()],
        "debug_env": _debug_env(snap),
        "sources": [to_data(s) for s in snap.sources],
        "commands": list(inputs.commands),
        "notes": [scrub_text(n) for n in diag.notes],
    }


def _scrubbed(symptom) -> dict[str, Any]:
    """A symptom for a ticket: evidence quotes log lines, which may hold secrets."""
    data = to_data(symptom)
    data["evidence"] = [scrub_text(e) for e in data["evidence"]]
    return data


def _rank_of_log(snap: NodeSnapshot, path: str) -> int | None:
    return next((log.rank for log in snap.logs if log.path == path), None)


def stack_commands(snap: NodeSnapshot, limit: int = 64, prefix: str = "") -> list[str]:
    """The py-spy command of the latest round, once per process it dumped; ``prefix``: how to
    run it on the node it is for (across nodes: the ssh or srun command line)."""
    if not snap.stacks:
        return []
    poll = snap.stacks[-1]
    if "{pid}" not in poll.command:
        return []  # saved dumps: rltui ran no py-spy
    where = f"{prefix} " if prefix else ""
    out = [where + poll.command.format(pid=d.pid) for d in poll.dumps[:limit]]
    if len(poll.dumps) > limit:
        out.append(f"# ... and {len(poll.dumps) - limit} more processes")
    return out


# -- markdown --------------------------------------------------------------------------------------

def _fmt(v: Any, unit: str = "", digits: int = 0) -> str:
    if v is None:
        return "N/A"
    return f"{v:.{digits}f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _stack_lines(frames: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for f in frames[:MAX_FRAMES]:
        loc = f"{f['file']}:{f['line']}" if f.get("line") else f["file"]
        lines.append(f"    {f['name']} ({loc})")
    if len(frames) > MAX_FRAMES:
        lines.append(f"    ... {len(frames) - MAX_FRAMES} more frames (see incident.json)")
    return lines


def to_markdown(doc: Mapping[str, Any]) -> str:
    """The report for people: the same facts as the JSON, in reading order."""
    out = [f"# rltui incident report: {doc['host'] or '?'}", "",
           f"- job: {doc['job'] or '?'}",
           f"- when: {units.stamp(doc['snapshot_time'])} ({doc['mode']})",
           f"- verdict: **{doc['verdict'].upper()}**",
           f"- tool: {doc['tool']}", ""]
    grouped = [i for i in doc.get("incidents", ()) if len(i["symptoms"]) > 1]
    if grouped:
        out += ["## What happened", ""]
        for i in grouped:
            out += [f"- **{_cell(i['title'])}** (`{i['root_cause']}` -> "
                    + ", ".join(f"`{x}`" for x in i["symptoms"][1:]) + ")",
                    f"  {_cell(i['explanation'])}"]
        out.append("")
    out += ["## Symptoms", ""]
    if not doc["symptoms"]:
        out += ["No symptoms found.", ""]
    for s in doc["symptoms"]:
        ranks = f" (ranks {compact(s['ranks'])})" if s["ranks"] else ""
        out += [f"### {s['severity'].upper()} `{s['id']}`: {s['title']}{ranks}", ""]
        out += [f"- {_cell(e)}" for e in s["evidence"]]
        if s["next_steps"]:
            out += ["", "Next steps:", ""]
            out += [f"{i}. {step}" for i, step in enumerate(s["next_steps"], 1)]
        out.append("")
    out += _timeline_md(doc.get("timeline"))
    stacks = doc.get("stacks")
    out += ["## Stacks", ""]
    if stacks is None:
        out += ["No py-spy dumps were taken.", ""]
    else:
        pattern = f"pattern {stacks['pattern']}" if stacks["pattern"] else "no pattern"
        out += [f"**{stacks['title']}** ({pattern}, verdict {stacks['verdict']}, "
                f"{stacks['samples']} sample(s))", "", stacks["explanation"], ""]
        if stacks["missing_ranks"]:
            out += [f"Missing from the dump (exited): ranks {compact(stacks['missing_ranks'])}",
                    ""]
        if stacks.get("missing_pids"):  # documents written before the field had none
            out += ["Missing from the dump (exited): pids "
                    + ",".join(map(str, stacks["missing_pids"])), ""]
        if stacks["classes"]:
            out += ["| class | ranks | state | waits in | deepest frame |",
                    "|---|---|---|---|---|"]
            for i, c in enumerate(stacks["classes"], 1):
                deepest = c["deepest"]
                deep = (where(Frame(deepest["name"], deepest["file"], deepest["line"] or 0))
                        if deepest else "-")
                out.append(f"| #{i} | {c['ranks'] or '-'} | {c['state']} | {c['op'] or '-'} "
                           f"| {_cell(deep)} |")
            out.append("")
        for cs in doc["class_stacks"]:
            who = (f"rank {cs['member_rank']}" if cs["member_rank"] is not None
                   else f"pid {cs['pid']}")
            members = cs["ranks"] or "-"
            members = f"rank {members}" if members.isdigit() else f"ranks {members}"
            out += [f"### Class {cs['class']}: {members} "
                    f"(stack of {who}, thread {cs['thread'] or '?'}, {cs['status']})", "",
                    "```"] + _stack_lines(cs["frames"]) + ["```", ""]
    out += _flight_recorder_md(doc.get("flight_recorder"))
    # Across nodes a host column: pids repeat from node to node.
    across = bool(doc.get("nodes"))
    host_head, host_rule = ("host | ", "---|") if across else ("", "")
    out += ["## Ranks", "",
            f"| rank | {host_head}pid | state | CPU | GPU | GPU util | GPU mem | last step | age "
            "| class |",
            f"|---|{host_rule}---|---|---|---|---|---|---|---|---|"]
    for r in doc["ranks"]:
        gpu = r.get("gpu") or {}
        age = r.get("last_step_age_s")
        host = f"{r.get('host') or '-'} | " if across else ""
        out.append(
            f"| {_fmt(r['rank'])} | {host}{_fmt(r['pid'])} | {r['state']} "
            f"| {_fmt(r.get('cpu_percent'), '%')} | {_fmt(gpu.get('index'))} "
            f"| {_fmt(gpu.get('util'), '%')} "
            f"| {units.gib(gpu.get('mem_used'), 1, missing='N/A')} "
            f"| {_fmt(r.get('last_step'))} | {'N/A' if age is None else f'{age:.0f} s'} "
            f"| {r.get('stack_class') or '-'} |")
    if not doc["ranks"]:
        out.append("| no job process was seen |" + " |" * (9 + across))
    out.append("")
    out += ["## Debug environment (secrets redacted)", ""]
    if not doc["debug_env"]:
        out += ["No debug variables set (NCCL_DEBUG, TORCH_DISTRIBUTED_DEBUG, ...).", ""]
    for who, env in doc["debug_env"].items():
        vars_ = ", ".join(f"`{k}={v}`" for k, v in env.items()) or "none set"
        out.append(f"- {who}: {vars_}")
    out.append("")
    out += ["## Logs (last lines)", ""]
    if not doc["logs"]:
        out += ["No log files were followed.", ""]
    for log in doc["logs"]:
        rank = "" if log["rank"] is None else f" (rank {log['rank']})"
        out += [f"### {log['path']}{rank}", "", "```"] + list(log["last_lines"]) + ["```", ""]
    if doc.get("nodes"):  # a report across nodes (rltui diagnose --hosts --report)
        out += _nodes_markdown(doc["nodes"], doc["snapshot_time"])
    out += ["## Commands", "", "```"] + list(doc["commands"]) + ["```", ""]
    if doc["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in doc["notes"]] + [""]
    return "\n".join(out)


# -- writing ---------------------------------------------------------------------------------------

def _nodes_markdown(nodes: Sequence[Mapping[str, Any]], now: float) -> list[str]:
    out = ["## Nodes", "", "| host | state | last seen | skew | node rank | ranks | reason |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for n in nodes:
        seen = "never" if n["last_seen"] is None else f"{max(0.0, now - n['last_seen']):.1f} s ago"
        skew = "" if n["skew_s"] is None else f"{n['skew_s']:+.2f} s"
        out.append(f"| {n['host']} | {n['state']} | {seen} | {skew} | "
                   f"{'' if n['node_rank'] is None else n['node_rank']} | "
                   f"{compact(n['ranks'])} | {_cell(n['reason'])} |")
    return out + [""]


def default_folder(host: str, when: float) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(when))
    safe = "".join(ch if ch.isalnum() or ch in "-._" else "_" for ch in host or "node")
    return f"rltui-incident-{safe}-{stamp}"


def write_report(folder: str | os.PathLike, doc: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write ``incident.md`` and ``incident.json`` into ``folder`` (created if needed).

    Raises OSError with the path when the folder cannot be written; an existing report there is
    replaced whole (written to a temporary name first, so a full disk leaves the old one).
    Both pass ``rltui.scrub`` on the way: secrets hidden in every string, and control
    characters escaped in the markdown. Nothing is written through a link someone planted in
    the folder (a shared one, such as /tmp): the temporary file is one this call creates, and
    the rename replaces a link at the report's name rather than follow it.
    """
    from rltui.scrub import outgoing_text, scrub
    doc = scrub(doc)
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    md, js = path / "incident.md", path / "incident.json"
    for target, text in ((md, outgoing_text(to_markdown(doc))), (js, json.dumps(doc, indent=2) + "\n")):
        tmp = target.with_name(target.name + ".tmp")
        _write_created(tmp, text)
        os.replace(tmp, target)
    return md, js


def _write_created(path: Path, text: str) -> None:
    """``text`` into ``path`` as a file created here: what was at that name (a leftover of an
    interrupted write, a link) is removed, not written through; one put back meanwhile makes
    the creation fail (O_EXCL) rather than be followed."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    with open(fd, "w", encoding="utf-8") as f:
        f.write(text)


MAX_SAME_NAME = 100  # reports of one second: folder, folder-2, ... folder-100


def write_new_report(folder: str | os.PathLike, doc: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write the report into a new folder: ``folder``, or ``folder-2``, ``folder-3``... when
    that one exists (the app names folders by the second: two reports in one second must not
    replace each other). The folder is claimed by creating it, so two writers never share one.
    Raises OSError as write_report does, or FileExistsError when every name is taken."""
    base = Path(folder)
    base.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, MAX_SAME_NAME + 1):
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return write_report(path, doc)
    raise FileExistsError(errno.EEXIST, "every folder name of this second is taken", str(base))


def _timeline_md(tl: Mapping[str, Any] | None) -> list[str]:
    """Who stopped first: one line per rank, its steps over the window and where it stopped."""
    if not tl:
        return []  # a report written before the timeline existed
    return (["## Timeline", "", timeline_summary(tl), "", "```"]
            + timeline_chart(tl, TIMELINE_WIDTH, TIMELINE_ROWS,
                             more_where="incident.json holds every rank")
            + ["```", ""])


def _flight_recorder_md(fr: dict[str, Any] | None) -> list[str]:
    """Which collective each rank is in, per group (PyTorch's Flight Recorder), the laggard
    marked, and the findings."""
    if not fr or not fr["groups"]:
        return []
    out = ["## Flight Recorder", ""]
    if fr.get("stack_pattern") and fr["pattern"] and fr["stack_pattern"] != fr["pattern"]:
        out += [f"The stacks alone read pattern {fr['stack_pattern']}; the Flight Recorder "
                f"decides pattern {fr['pattern']}.", ""]
    for f in fr["findings"]:
        out += [f"- **{f['kind']}**: {_cell(f['text'])}"]
    out += ["", "| group | rank | last completed | last enqueued | pending | since |",
            "|---|---|---|---|---|---|"]
    for g in fr["groups"][:32]:
        for m in g["per_rank"][:256]:
            done = m["last_completed"]["seq"] if m["last_completed"] else "-"
            pend = m["pending"]
            what = (f"{pend['op']} #{pend['seq']}" if pend else
                    ("no dump" if not m["has_dump"] else "-"))
            if m["behind"]:
                what += " (behind)"
            age = f"{pend['age_s']:.0f} s" if pend and pend.get("age_s") is not None else "-"
            out.append(f"| {_cell(g['name'])} | {m['rank']} | {done} | {m['last_enqueued']} "
                       f"| {_cell(what)} | {age} |")
    out.append("")
    out += [f"Read: {_cell(p)}" for p in fr["problems"][:8]]
    return out + ([""] if fr["problems"] else [])
