"""What every command shares: exit codes, the usage error, the shared options, reading
the settings and the job selection, starting the demo. Only the standard library is imported at
module level, so ``rltui --help`` stays fast; each helper imports what it needs.

Exit codes: 0 fine, 1 something at or above ``--fail-on`` (diagnose), 2 usage or input errors,
3 across nodes no node answered, 4 no training job found (docs/diagnose-json.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2


EXIT_NO_JOB = 4  # nothing to watch: no process matched, a --pid that does not exist


class UsageError(Exception):
    """A problem the user can fix; printed as ``rltui: error: ...`` with exit code 2."""


def add_source_options(p: argparse.ArgumentParser, sub: bool = True) -> None:
    # On sub-commands the defaults are suppressed so that an option given before the command
    # (``rltui --pid 5 diagnose``) is not overwritten by the sub-parser's default.
    dflt = argparse.SUPPRESS if sub else None
    g = p.add_argument_group("which processes form the job (default: Python processes with "
                             "RANK or LOCAL_RANK in their environment, and Ray workers)")
    g.add_argument("--match", metavar="REGEX", default=dflt,
                   help="processes whose command line matches REGEX")
    g.add_argument("--pid", metavar="PID", type=int, action="append",
                   default=dflt if sub else [],
                   help="this process and its children (repeatable)")
    g.add_argument("--job", metavar="ID", default=dflt,
                   help="one job of several on the node: its id (`rltui jobs`), its name, or "
                        "the pid of its launcher or of one of its processes")
    g.add_argument("--log", metavar="PATH_OR_GLOB", action="append",
                   default=dflt if sub else [],
                   help="also follow these log files (repeatable; quote globs). The ranks' "
                        "stdout/stderr files are found without it")
    g.add_argument("--flight-recorder", metavar="PATH_OR_GLOB", action="append",
                   dest="flight_recorder", default=dflt if sub else [],
                   help="PyTorch Flight Recorder dumps of the ranks (repeatable; quote globs; "
                        "a folder means its files). The files the ranks' "
                        "TORCH_FR_DUMP_TEMP_FILE names are found without it "
                        "(rltui docs flight-recorder)")
    g.add_argument("--torch-debug", metavar="URL", action="append", dest="torch_debug",
                   default=dflt if sub else [],
                   help="torch's debug server front end on rank 0 "
                        "(torch.distributed.debug.start_debug_server), e.g. "
                        "http://node0:25999: its Flight Recorder data and stacks")


def add_config_option(p: argparse.ArgumentParser, sub: bool = True) -> None:
    p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS if sub else None,
                   help="config file (default: RLTUI_CONFIG, else the XDG config path)")


def add_oom_options(p: argparse.ArgumentParser, sub: bool = True) -> None:
    """--job-config and --model-config: what the OOM triage reads beyond the logs (the app's
    `m`, diagnose). Suppressed on sub-commands, as the source options: ``rltui --job-config F
    demo`` keeps the value given before the command."""
    dflt = argparse.SUPPRESS if sub else None
    p.add_argument("--job-config", metavar="FILE", default=dflt,
                   help="the job's config (verl Hydra YAML, AReaL YAML), for the OOM triage "
                        "(default: found from the job's command line)")
    p.add_argument("--model-config", metavar="FILE", default=dflt,
                   help="the model's HF config.json (or its folder), for the OOM memory "
                        "estimate (default: the model path of the job's config)")


def oom_options(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(job config, model config) as given; a path that does not exist is a usage error now,
    not a note found later on the OOM screen."""
    job, model = getattr(args, "job_config", None), getattr(args, "model_config", None)
    for flag, path in (("--job-config", job), ("--model-config", model)):
        if path and not Path(path).expanduser().exists():
            raise UsageError(f"{flag} {path}: not found")
    return job, model


def add_host_options(p: argparse.ArgumentParser, sub: bool = True):
    # On diagnose the defaults are suppressed, as for the source options: ``rltui --hosts a
    # diagnose`` keeps the top-level value.
    dflt = argparse.SUPPRESS if sub else None
    g = p.add_argument_group("across nodes (one agent per node, or Ray; rltui docs multi-node)")
    g.add_argument("--hosts", metavar="LIST", default=dflt,
                   help="the job's nodes as a hostlist, each optionally user@ "
                        "(node[01-16],gpu-a3), reached over ssh")
    g.add_argument("--hostfile", metavar="FILE", default=dflt,
                   help="the job's nodes, one host or hostlist per line (MPI hostfiles read)")
    g.add_argument("--slurm-job", metavar="JOBID", default=dflt,
                   help="the nodes of a running Slurm job (squeue), agents started by srun")
    g.add_argument("--ray", metavar="ADDRESS", default=dflt,
                   help="a Ray cluster's dashboard (http://HEAD:8265): nodes, workers, actors "
                        "and their stacks through Ray itself (rltui docs ray)")
    g.add_argument("--ssh-option", metavar="OPT", action="append", default=dflt,
                   help="options for ssh, split like a shell would (repeatable; "
                        "--ssh-option=-p2222, --ssh-option='-J bastion')")
    g.add_argument("--remote-rltui", metavar="PATH", default=dflt,
                   help="rltui on the nodes when it is not on their PATH "
                        "(/shared/venv/bin/rltui)")
    g.add_argument("--connect-timeout", metavar="S", type=int, default=dflt,
                   help="seconds for ssh to reach a node, or for Ray's dashboard to answer "
                        "(default 10)")
    return g


def version() -> str:
    from rltui import __version__
    return __version__


def load_settings(args: argparse.Namespace):
    from rltui import config
    path = Path(args.config).expanduser() if args.config else config.config_path()
    if args.config and not path.is_file():
        raise UsageError(f"config file {path}: not found")
    try:
        return config.load(path), path
    except config.ConfigError as exc:
        raise UsageError(f"config error: {exc}") from None


# Bounds on numbers given on the command line (docs/cli.md): NaN and infinity are never a
# duration or a speed (``--duration nan`` never returned), a time is POSIX seconds before the
# year 10000 (datetime's range), a pid fits pid_t.
MAX_SECONDS = 10**7  # --duration, --heartbeat: about 115 days
MAX_SPEED = 10**6
MAX_TIME = 253402300799.0
MAX_PID = (1 << 31) - 1  # pid_t: past it no pid anywhere (an absent smaller one: exit 4)
MAX_CONNECT_TIMEOUT = 3600


def check_numbers(args: argparse.Namespace) -> None:
    """Every number of the command line finite and in its range, before any command runs."""
    for name, flag, low, high in (("duration", "--duration", 0.0, MAX_SECONDS),
                                  ("heartbeat", "--heartbeat", 0.0, MAX_SECONDS),
                                  ("speed", "--speed", 0.0, MAX_SPEED)):
        value = getattr(args, name, None)
        if isinstance(value, float) and not low <= value <= high:  # NaN fails this too
            if value != value or value in (float("inf"), float("-inf")):
                raise UsageError(f"{flag} {value}: not a number of seconds" if flag != "--speed"
                                 else f"{flag} {value}: not a speed")
            if value > high:
                raise UsageError(f"{flag} {value:g}: at most {high:g}")
    timeout = getattr(args, "connect_timeout", None)
    if isinstance(timeout, int) and timeout > MAX_CONNECT_TIMEOUT:  # <= 0: the command says
        raise UsageError(f"--connect-timeout {timeout}: at most {MAX_CONNECT_TIMEOUT} seconds")
    for pid in getattr(args, "pid", None) or []:
        if isinstance(pid, int) and not 0 < pid <= MAX_PID:
            shown = str(pid) if len(str(pid)) <= 20 else f"{str(pid)[:20]}..."
            raise UsageError(f"--pid {shown}: not a process id (1 to {MAX_PID})")


def parse_now(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None:
        from datetime import datetime
        try:
            value = datetime.fromisoformat(text).timestamp()
        except (ValueError, OverflowError, OSError):
            raise UsageError(f"--now {text[:60]!r}: expected POSIX seconds or an ISO time such as "
                             "2026-03-01T12:00:00") from None
    if not 0 <= value <= MAX_TIME:  # NaN fails this too
        raise UsageError(f"--now {text[:60]!r}: not a time (POSIX seconds from 0 to "
                         f"{MAX_TIME:.0f}, the end of the year 9999)")
    return value


def source_args(args: argparse.Namespace) -> tuple[str | None, list[int]]:
    match = getattr(args, "match", None)
    if match:
        import re
        try:
            re.compile(match)
        except re.error as exc:
            raise UsageError(f"--match {match!r}: not a valid regular expression: {exc}") from None
    pids = list(getattr(args, "pid", []) or [])
    for pid in pids:
        if pid <= 0:
            raise UsageError(f"--pid {pid}: not a process id")
    return match, pids


def start_demo(scenario: str, ranks: int):
    from rltui.demo.job import SCENARIOS, DemoJob
    if scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    try:
        job = DemoJob(scenario=scenario, ranks=ranks)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    job.start()
    return job


def unreadable(glob: str) -> str | None:
    """Why a --log path or glob cannot be read, when the reason is a permission: the file
    itself, or the first folder on its way that may not be listed or entered; None otherwise.
    ("matches no file" for a file in a folder rltui may not enter would send the user looking
    for a typo.)"""
    import glob as globs
    import os
    path = Path(glob).expanduser()
    parts = path.parts
    for i in range(1, len(parts)):  # a folder on the way first: then the file cannot be seen
        folder = Path(*parts[:i])
        if globs.has_magic(str(folder)):
            return None
        if os.path.isdir(folder) and not os.access(folder, os.R_OK | os.X_OK):
            return f"{folder}: cannot be listed: permission denied"
    if not globs.has_magic(str(path)) and os.path.isfile(path) and not os.access(path, os.R_OK):
        return f"{path}: cannot be read: permission denied"
    return None


def log_globs(args: argparse.Namespace) -> list[str]:
    return list(getattr(args, "log", None) or [])


def flight_recorder_args(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(--flight-recorder paths or globs, --torch-debug URLs), checked."""
    paths = list(getattr(args, "flight_recorder", None) or [])
    urls = list(getattr(args, "torch_debug", None) or [])
    for p in paths:
        if not p.strip():
            raise UsageError("--flight-recorder: empty; give a dump file, a folder or a glob")
    for u in urls:
        if not u.startswith(("http://", "https://")) or len(u) > 2048 or any(
                c.isspace() or ord(c) < 32 for c in u):
            raise UsageError(f"--torch-debug {u[:80]!r}: give the debug server's http:// "
                             "address, e.g. http://node0:25999")
    return paths, urls


def load_scenario(path: str):
    from rltui.sources.replay import ScenarioError, load
    try:
        return load(path)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def live_or_demo_bundle(args: argparse.Namespace, settings):
    from rltui.sources.bundle import demo_bundle, live_bundle
    if getattr(args, "demo", None):
        job = start_demo(args.demo, args.ranks)
        return demo_bundle(settings, job)
    match, pids = source_args(args)
    paths, urls = flight_recorder_args(args)
    return live_bundle(settings, match, pids, log_globs(args), flight_recorder=paths,
                       torch_debug=urls)


def job_option(args: argparse.Namespace) -> str | None:
    wanted = getattr(args, "job", None)
    if wanted is not None and not str(wanted).strip():
        raise UsageError("--job: empty; give a job id from `rltui jobs`, a name or a pid")
    return str(wanted).strip() if wanted is not None else None


def say_no_job(monitor, snap) -> None:
    from rltui.scrub import outgoing_text
    if monitor.focus is not None:
        here = ", ".join(v.job.id for v in monitor.jobs if v.job is not None) or "none"
        why = monitor.focus_problem or f"jobs here: {here}"
        print(outgoing_text(f"rltui: no job {monitor.focus!r} on this node ({why}); "
                            "`rltui jobs` lists them"), file=sys.stderr)
        return
    looked = snap.job or "ranks found by environment"
    print(outgoing_text(f"rltui: no training job found ({looked}); choose one with --pid PID, "
                        "--match REGEX, or read saved files with --log/--stacks"),
          file=sys.stderr)


def invocation() -> list[str]:
    """How rltui was run, secrets redacted (for the incident report's commands)."""
    import shlex

    from rltui.redact import redact_argv
    return ["rltui " + shlex.join(redact_argv(sys.argv[1:]))]


def write_incident(folder: str, found, log_tails, commands) -> None:
    """incident.md and incident.json of the findings (rltui.findings) into ``folder``
    (docs/incident-report.md), on this node and across nodes alike."""
    from rltui import findings, incident
    doc = findings.incident_document(found, log_tails, commands)
    try:
        md, js = incident.write_report(folder, doc)
    except OSError as exc:
        raise UsageError(f"--report {folder}: cannot write: {exc.strerror or exc}") from None
    print(f"rltui: incident report written to {md} and {js}", file=sys.stderr)


def oom_of(monitor, snap, job_config: str | None, model_config: str | None):
    """The OOM triage of the snapshot's latest OOM, or None when its logs hold none."""
    from rltui.diagnosis.oom.report import find_oom
    if find_oom(snap) is None:  # the triage's modules are loaded only for an OOM
        return None
    from rltui.sources.oominputs import oom_report
    return oom_report(snap, monitor.tracker.logbook.lines(), job_config=job_config,
                      model_config=model_config)


def saved_stacks(path: str):
    """(dumps, problems) of saved py-spy dumps: a folder or one file (--stacks, rltui stacks)."""
    from rltui.sources.dumpfolder import NotAFolder, read_dump_folder
    try:
        return read_dump_folder(path)
    except NotAFolder as exc:
        raise UsageError(f"--stacks {exc}") from None
