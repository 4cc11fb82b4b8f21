"""What OOM triage reads from outside: the job's config and the model's config.json.

Given the snapshot (its logs hold the OOM; its processes, live or departed, hold the command
lines) and optional paths from the user, gather everything ``rltui.diagnosis.oom.report.triage``
needs. Never raises for a missing or bad file: each problem becomes a note in the report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltui.diagnosis.oom.report import find_oom
from rltui.diagnosis.oom.types import JobConfig
from rltui.frameworks import FRAMEWORKS, framework_in_cmdline, framework_in_traceback
from rltui.model import LogEvent, LogFileState, NodeSnapshot, ProcInfo, replace

BEFORE_LINES = 60  # log lines before the OOM that the phase reader may look at
MAX_MODEL_CONFIG = 1 << 20
# Where each framework's config names the model (a local folder holds config.json).
MODEL_PATH_KEYS = {f.name: f.config.model_path_keys for f in FRAMEWORKS
                   if f.config is not None and f.config.model_path_keys}


@dataclass
class OomInputs:
    log: LogFileState
    event: LogEvent
    before: list[str]
    config: JobConfig
    model: Any = None  # estimate.ModelShape, or None
    model_source: str = ""
    job_pids: tuple[int, ...] = ()
    problems: list[str] = field(default_factory=list)


def _all_procs(snap: NodeSnapshot) -> list[ProcInfo]:
    procs = list(snap.procs)
    procs += [d.info for d in snap.departed if d.info is not None]
    return procs


def _driver_cmdline(procs: Sequence[ProcInfo]) -> tuple[str, ...] | None:
    """The command line of a framework's driver (it carries the whole config): one whose
    program is a framework's entry point, not one with the framework in a flag's value."""
    return next((p.cmdline for p in procs if framework_in_cmdline(p.cmdline) != "unknown"),
                None)


def job_cmdline(snap: NodeSnapshot, log: LogFileState) -> tuple[str, ...]:
    """The command line that says how the job was configured: the driver's when one is seen
    (RL drivers hold the overrides), else the OOM rank's, else any rank's."""
    procs = _all_procs(snap)
    driver = _driver_cmdline(procs)
    if driver is not None:
        return driver
    for p in procs:
        if (log.pid is not None and p.pid == log.pid) or (
                log.rank is not None and p.rank == log.rank):
            return p.cmdline
    return procs[0].cmdline if procs else ()


def lines_before(lines: Sequence[Any], path: str, line_no: int, n: int = BEFORE_LINES) -> list[str]:
    """The last ``n`` kept lines of ``path`` before ``line_no`` (TaggedLine values)."""
    out = [t.line.text for t in lines if t.path == path and t.line.line_no < line_no]
    return out[-n:]


def read_model_config(path: str) -> tuple[dict | None, str]:
    """config.json of a model (a file, or a folder holding one): (data, problem)."""
    p = Path(path).expanduser()
    try:
        if p.is_dir():
            p = p / "config.json"
        if p.stat().st_size > MAX_MODEL_CONFIG:
            return None, f"{p}: larger than 1 MiB, not a model config"
        data = json.loads(p.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None, f"{p}: not found"
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"{p}: not readable as JSON ({type(exc).__name__}: {exc})"
    if not isinstance(data, dict):
        return None, f"{p}: not a model config (expected a JSON object)"
    return data, ""


def model_shape(config: JobConfig, model_config: str | None) -> tuple[Any, str, list[str]]:
    """(ModelShape or None, where it came from, problems)."""
    from rltui.diagnosis.oom.estimate import ModelShape, UnknownModel
    from rltui.diagnosis.oom.frameworks import effective

    candidates = [model_config] if model_config else [
        v for v in (effective(config, k).value for k in MODEL_PATH_KEYS.get(config.framework, ()))
        if isinstance(v, str) and v]
    problems: list[str] = []
    for path in candidates:
        data, problem = read_model_config(path)
        if data is None:
            if model_config or not problem.endswith("not found"):
                problems.append(f"model config {problem}")
            else:
                problems.append(f"model {path}: no local config.json (a hub name?); give "
                                "--model-config for a memory estimate")
            continue
        try:
            return ModelShape.from_hf_config(data), path, problems
        except UnknownModel as exc:
            problems.append(f"model config {path}: {exc}")
    return None, "", problems


def gather(snap: NodeSnapshot, lines: Sequence[Any], *, job_config: str | None = None,
           model_config: str | None = None, cwd: str | None = None) -> OomInputs | None:
    """Everything triage needs for the snapshot's latest OOM; None when its logs hold none."""
    from rltui.sources.jobconfig import load_job_config

    found = find_oom(snap)
    if found is None:
        return None
    log, event = found
    cmdline = job_cmdline(snap, log)
    config = load_job_config(cmdline or None, config_path=job_config, cwd=cwd)
    problems: list[str] = []
    if config.framework == "unknown":
        seen = framework_in_traceback(event.text)
        if seen != "unknown":
            kept = tuple(p for p in config.problems if "framework not recognised" not in p)
            config = replace(config, framework=seen, problems=kept)
            problems.append(f"framework {seen} recognised from the traceback; its config was not "
                            "found, so its documented defaults stand in (give --job-config)")
    shape, source, more = model_shape(config, model_config)
    problems += more
    return OomInputs(log=log, event=event, before=lines_before(lines, log.path, event.line_no),
                     config=config, model=shape, model_source=source,
                     job_pids=tuple(p.pid for p in _all_procs(snap)), problems=problems)


def oom_report(snap: NodeSnapshot, lines: Sequence[Any], *, job_config: str | None = None,
               model_config: str | None = None, cwd: str | None = None):
    """The OOM report of the snapshot's latest OOM (reading the configs), or None."""
    from rltui.diagnosis.oom.report import triage

    inputs = gather(snap, lines, job_config=job_config, model_config=model_config, cwd=cwd)
    if inputs is None:
        return None
    notes = list(inputs.problems)
    if inputs.model is not None:
        notes.append(f"model shape from {inputs.model_source}")
    else:
        notes.append("no model config: suggestions carry no memory estimate (give "
                     "--model-config PATH/config.json)")
    return triage(inputs.event, inputs.before, inputs.config, shape=inputs.model,
                  job_pids=inputs.job_pids, notes=notes)


def config_doctor(snap: NodeSnapshot, job_config: str | None = None) -> list[str]:
    """The config doctor's findings for the job on this snapshot (reads its config)."""
    from rltui.diagnosis.oom.doctor import doctor
    from rltui.sources.jobconfig import load_job_config

    cmdline = _driver_cmdline(_all_procs(snap))
    if cmdline is None and job_config is None:
        return []
    return doctor(load_job_config(cmdline, config_path=job_config))
