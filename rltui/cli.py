"""Command line: argument parsing, sub-commands and exit codes.

Only the standard library is imported at module level so ``rltui --help`` starts fast; each
command imports what it needs. Exit codes: 0 fine, 1 ``diagnose`` found something at or above
``--fail-on``, 2 usage or input errors (bad flags, bad config, unreadable recording).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

EXIT_OK, EXIT_FOUND, EXIT_USAGE = 0, 1, 2
EXIT_NO_JOB = 4  # nothing to watch: no process matched, a --pid that does not exist


class UsageError(Exception):
    """A problem the user can fix; printed as ``rltui: error: ...`` with exit code 2."""


def _add_source_options(p: argparse.ArgumentParser, sub: bool = True) -> None:
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


def _add_config_option(p: argparse.ArgumentParser, sub: bool = True) -> None:
    p.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS if sub else None,
                   help="config file (default: RLTUI_CONFIG, else the XDG config path)")


def _add_host_options(p: argparse.ArgumentParser, sub: bool = True):
    # On diagnose the defaults are suppressed, as for the source options: ``rltui --hosts a
    # diagnose`` keeps the top-level value.
    dflt = argparse.SUPPRESS if sub else None
    g = p.add_argument_group("across nodes (one agent per node, or Ray; docs/multi-node.md)")
    g.add_argument("--hosts", metavar="LIST", default=dflt,
                   help="the job's nodes as a hostlist, each optionally user@ "
                        "(node[01-16],gpu-a3), reached over ssh")
    g.add_argument("--hostfile", metavar="FILE", default=dflt,
                   help="the job's nodes, one host or hostlist per line (MPI hostfiles read)")
    g.add_argument("--slurm-job", metavar="JOBID", default=dflt,
                   help="the nodes of a running Slurm job (squeue), agents started by srun")
    g.add_argument("--ray", metavar="ADDRESS", default=dflt,
                   help="a Ray cluster's dashboard (http://HEAD:8265): nodes, workers, actors "
                        "and their stacks through Ray itself (docs/ray.md)")
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


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: argparse matches abbreviations of the top-level options against every
    # word of the command line, so the agent's --host would be "ambiguous" with --hosts and
    # --hostfile. Sub-commands keep abbreviations.
    p = argparse.ArgumentParser(
        prog="rltui", allow_abbrev=False,
        description="Live monitor and hang triage for distributed RL training nodes. With no "
                    "command, watches this node.",
        epilog="Docs: docs/getting-started.md. Config: $XDG_CONFIG_HOME/rltui/config.yaml or "
               "RLTUI_CONFIG.")
    p.add_argument("--version", action="version", version=f"rltui {_version()}")
    _add_config_option(p, sub=False)
    _add_source_options(p, sub=False)
    _add_host_options(p, sub=False)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("demo", help="start a real synthetic multi-process job and watch it",
                       description="Starts a synthetic training job (one process per rank, "
                                   "verl-style logs, simulated GPUs) and opens the monitor on it. "
                                   "The job is stopped when the app quits.")
    d.add_argument("--scenario", default="healthy", help="what the job does (see --list)")
    d.add_argument("--ranks", type=int, default=4, help="number of ranks (2-64, default 4)")
    d.add_argument("--list", action="store_true", help="list the scenarios and exit")
    _add_config_option(d)

    r = sub.add_parser("replay", help="play a recorded scenario folder in the app")
    r.add_argument("dir", metavar="DIR")
    r.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")
    _add_config_option(r)

    rec = sub.add_parser("record", help="record every reading into a scenario folder",
                         description="Polls the sources at their cadence and writes every "
                                     "reading to OUT (see docs/scenarios.md).")
    rec.add_argument("out", metavar="OUT")
    rec.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    rec.add_argument("--demo", metavar="SCENARIO",
                     help="record a demo job running SCENARIO instead of this node's job")
    rec.add_argument("--ranks", type=int, default=4, help="demo ranks (with --demo)")
    _add_config_option(rec)
    _add_source_options(rec)

    dg = sub.add_parser("diagnose", help="print the snapshot and diagnosis, headless",
                        description="Samples the sources (or reads a recording) and prints the "
                                    "diagnosis. Exit 0: nothing at or above --fail-on; 1: "
                                    "something is; 2: usage error; 3: across nodes, no node "
                                    "answered.")
    dg.add_argument("--replay", metavar="DIR", help="diagnose a recorded scenario folder")
    dg.add_argument("--json", action="store_true", help="print JSON (docs/diagnose-json.md)")
    dg.add_argument("--fail-on", choices=("warning", "critical"), default="critical",
                    help="lowest severity that makes the exit code 1 (default critical)")
    dg.add_argument("--duration", type=float, default=None,
                    help="seconds to sample live sources (default: one sample, and when it "
                         "suggests a hang a second one thresholds.stack_sample_gap_s later to "
                         "confirm it; sustained checks need more)")
    dg.add_argument("--quick", action="store_true",
                    help="one sample only: no confirming second sample")
    dg.add_argument("--live", action="store_true",
                    help="with --log/--stacks: also watch this node's training processes (by "
                         "default saved files are read alone, with nothing of the node mixed in)")
    dg.add_argument("--stacks", metavar="PATH",
                    help="also read saved stack dumps and classify the hang: a folder (one "
                         "file per process, rank<N> in the file name) or one file (a shell "
                         "loop's output, a log with dumps in it); py-spy text or JSON, "
                         "faulthandler, with Ray/torchrun/docker prefixes (docs/stacks.md)")
    dg.add_argument("--report", metavar="DIR",
                    help="also write an incident report (incident.md and incident.json) into "
                         "DIR: symptoms, stack classes, ranks, log tails, debug env, commands")
    dg.add_argument("--job-config", metavar="FILE",
                    help="the job's config, for the OOM triage (default: from its command line)")
    dg.add_argument("--model-config", metavar="FILE",
                    help="the model's HF config.json, for the OOM memory estimate")
    dg.add_argument("--now", metavar="TIME",
                    help="what 'now' is for stall checks on logs read offline: POSIX seconds "
                         "or an ISO time such as 2026-03-01T12:00:00 (default: the time of "
                         "this run)")
    dg.add_argument("--demo", metavar="SCENARIO",
                    help="diagnose a demo job started for the purpose (try it without a job)")
    dg.add_argument("--ranks", type=int, default=4, help="demo ranks (with --demo)")
    _add_config_option(dg)
    _add_source_options(dg)
    hosts = _add_host_options(dg)
    hosts.add_argument("--no-dump", action="store_true",
                       help="no stack dump of every rank at the end of the run (the stacks "
                            "are then the nodes' last periodic, non-blocking round)")

    jb = sub.add_parser("jobs", help="list the training jobs on this node",
                        description="Groups the node's training processes into jobs (by "
                                    "launcher, rendezvous, run id, Slurm step, Ray job and the "
                                    "process tree) and lists each with its launcher, ranks, "
                                    "world size and verdict (docs/jobs.md). Exit 0: jobs "
                                    "listed; 2: usage error; 4: no job found.")
    jb.add_argument("--json", action="store_true", help="print JSON (docs/jobs.md)")
    jb.add_argument("--duration", type=float, default=1.0,
                    help="seconds to sample the sources (default 1)")
    jb.add_argument("--demo", metavar="SCENARIO", help=argparse.SUPPRESS)
    jb.add_argument("--ranks", type=int, default=4, help=argparse.SUPPRESS)
    _add_config_option(jb)
    _add_source_options(jb)

    om = sub.add_parser("oom", help="triage a CUDA OOM: phase, config changes, a patch",
                        description="Reads the logs (--log, or this node's job), finds the latest "
                                    "OOM, decides the training phase, loads the job's config and "
                                    "proposes ranked config changes with a patch (docs/oom.md). "
                                    "Exit 0: an OOM was triaged; 1: no OOM found; 2: usage error.")
    om.add_argument("--config", dest="job_config", metavar="FILE",
                    help="the job's config (verl Hydra YAML, AReaL YAML); default: found from "
                         "the job's command line")
    om.add_argument("--model-config", metavar="FILE",
                    help="the model's HF config.json (or its folder), for the memory estimate")
    om.add_argument("--json", action="store_true", help="print the oom object as JSON")
    om.add_argument("--duration", type=float, default=1.0,
                    help="seconds to sample a live job's sources (default 1)")
    _add_source_options(om)

    st = sub.add_parser("stacks", help="compare saved py-spy dumps of all ranks (STAT-style)",
                        description="Opens the compare screen on a folder of saved py-spy dumps: "
                                    "one file per process, text or --json in any mix, rank<N> "
                                    "in the file name, or one file with several dumps (a shell "
                                    "loop's output, a log with dumps in it, faulthandler "
                                    "output).")
    st.add_argument("dir", metavar="PATH")
    _add_config_option(st)

    from rltui.agent.cli import add_arguments as agent_arguments
    agent_arguments(sub.add_parser(
        "agent", help="headless collector for one node: readings as JSON lines on stdout",
        description="Collects on this node (GPUs, processes and ranks, log tails, py-spy dumps "
                    "on request) and streams readings as JSON lines on stdout; takes requests "
                    "(dump, tail, stop) as JSON lines on stdin. What a multi-node rltui starts "
                    "on each node over ssh or srun (docs/agent.md)."))

    from rltui.checks.rollout.cli import add_arguments as rollout_arguments
    from rltui.checks.workflow.cli import add_arguments as workflow_arguments
    rollout_arguments(sub.add_parser(
        "rollout-check", help="compare a reference (HF model or endpoint) with an inference "
                              "server, greedy, token by token",
        description="Sends the same token ids, greedy, to a reference (a local HF transformers "
                    "model or a second endpoint) and to the inference server, and reports "
                    "agreement, the first divergent token, answer accuracy on each side and the "
                    "log-prob difference (docs/rollout-check.md). Exit 0: consistent; 1: "
                    "divergence found; 2: usage or input error; 3: could not finish (partial "
                    "results kept); 130: interrupted (partial report printed)."))
    workflow_arguments(sub.add_parser(
        "workflow-check", help="run an agent workflow once, then at RL concurrency",
        description="Imports module:Class with `async def run(self, data, **extra_kwargs)`, "
                    "runs one sample, then local_bs x group_size at once, and reports errors by "
                    "type, timeouts (with the pending tasks), invalid rewards, latency and "
                    "whether sequential and concurrent results agree (docs/workflow-check.md). "
                    "Exit 0: passed; 1: problems found; 2: usage or import error; 3: could not "
                    "finish; 130: interrupted (partial report printed)."))
    return p


def _version() -> str:
    from rltui import __version__
    return __version__


def _settings(args: argparse.Namespace):
    from rltui import config
    path = Path(args.config).expanduser() if args.config else config.config_path()
    if args.config and not path.is_file():
        raise UsageError(f"config file {path}: not found")
    try:
        return config.load(path), path
    except config.ConfigError as exc:
        raise UsageError(f"config error: {exc}") from None


def _parse_now(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    from datetime import datetime
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise UsageError(f"--now {text!r}: expected POSIX seconds or an ISO time such as "
                         "2026-03-01T12:00:00") from None


def _source_args(args: argparse.Namespace) -> tuple[str | None, list[int]]:
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


def _start_demo(scenario: str, ranks: int):
    from rltui.demo.job import SCENARIOS, DemoJob
    if scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; choose one of: {', '.join(SCENARIOS)}")
    try:
        job = DemoJob(scenario=scenario, ranks=ranks)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    job.start()
    return job


def _run_app(bundle, settings, config_path, job: str | None = None) -> int:
    from rltui.ui.app import build_app
    try:
        build_app(bundle, settings, config_path, commands=invocation(), job=job).run()
    finally:
        bundle.close()
    # A poll stuck in the outside world (NVML hung in the driver, a py-spy that never returns)
    # sits in a worker thread that the interpreter would join at exit; the app is done and the
    # bundle closed, so leave without waiting for it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_OK)


def _logs(args: argparse.Namespace) -> list[str]:
    return list(getattr(args, "log", None) or [])


def cmd_watch(args: argparse.Namespace) -> int:
    settings, path = _settings(args)
    from rltui.remote import cluster_run
    if cluster_run.wanted(args):
        return _run_app(cluster_run.cluster_bundle(args, settings), settings, path)
    match, pids = _source_args(args)
    from rltui.sources.bundle import live_bundle
    return _run_app(live_bundle(settings, match, pids, _logs(args)), settings, path,
                    job=_job(args))


def cmd_demo(args: argparse.Namespace) -> int:
    if args.list:
        from rltui.demo.job import SCENARIOS
        for name, text in SCENARIOS.items():
            print(f"{name:22} {text}")
        return EXIT_OK
    settings, path = _settings(args)
    job = _start_demo(args.scenario, args.ranks)
    from rltui.sources.bundle import demo_bundle
    try:
        bundle = demo_bundle(settings, job)
    except BaseException:
        job.stop()
        raise
    return _run_app(bundle, settings, path)


def _load_scenario(path: str):
    from rltui.sources.replay import ScenarioError, load
    try:
        return load(path)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def cmd_replay(args: argparse.Namespace) -> int:
    settings, path = _settings(args)
    if args.speed <= 0:
        raise UsageError("--speed must be positive")
    scenario = _load_scenario(args.dir)
    for warning in scenario.warnings:
        print(f"rltui: warning: {warning}", file=sys.stderr)
    from rltui.sources.bundle import replay_bundle
    return _run_app(replay_bundle(scenario, args.speed), settings, path)


def _live_or_demo_bundle(args: argparse.Namespace, settings):
    from rltui.sources.bundle import demo_bundle, live_bundle
    if getattr(args, "demo", None):
        job = _start_demo(args.demo, args.ranks)
        return demo_bundle(settings, job)
    match, pids = _source_args(args)
    return live_bundle(settings, match, pids, _logs(args))


def cmd_record(args: argparse.Namespace) -> int:
    settings, _ = _settings(args)
    if _job(args) is not None:
        raise UsageError("--job: record keeps every job's readings; choose the job when "
                         "reading the recording (rltui diagnose --replay DIR --job ID)")
    if args.duration <= 0:
        raise UsageError("--duration must be positive")
    from rltui.sources.bundle import run_schedule
    from rltui.sources.record import Recorder
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out}: exists and is not an empty folder")
    bundle = _live_or_demo_bundle(args, settings)
    try:
        bundle.recorder = Recorder(out, host=bundle.host, job=bundle.job,
                                   intervals=bundle.intervals(),
                                   description=f"rltui record, {args.duration:g} s")
        print(f"recording {bundle.job} to {out} for {args.duration:g} s (Ctrl-C stops early)",
              file=sys.stderr)
        try:
            run_schedule(bundle.specs, args.duration, bundle.recorder.write)
        except KeyboardInterrupt:
            print("stopped early", file=sys.stderr)
        print(f"wrote {bundle.recorder.count} readings to {out}", file=sys.stderr)
    finally:
        bundle.close()
    return EXIT_OK


def cmd_diagnose(args: argparse.Namespace) -> int:
    settings, _ = _settings(args)
    # No --duration: one sample, confirmed by a second when it suggests a hang (not --quick).
    confirm = args.duration is None and not args.quick
    args.duration = 1.0 if args.duration is None else args.duration
    from rltui.remote import cluster_run
    if cluster_run.wanted(args):
        return cluster_run.run_diagnose(args, settings)
    if args.no_dump:
        raise UsageError("--no-dump needs --hosts, --hostfile, --slurm-job or --ray (on this "
                         "node the stacks are the periodic, non-blocking rounds anyway)")
    from rltui import report
    from rltui.monitor import Monitor
    saved = _saved_stacks(args.stacks) if args.stacks else None
    bundle = None
    if args.replay:
        scenario = _load_scenario(args.replay)
        monitor = Monitor(host=scenario.host, job=scenario.job, thresholds=settings.thresholds,
                          history_len=settings.history)
        monitor.focus = _job(args)
        result = monitor.replay(scenario.readings)
        if result is None:
            raise UsageError(f"{args.replay}: the recording holds no readings")
        notes = list(scenario.warnings)
        mode, now_source = "replay", "recording"
        now = result[0].timestamp
    else:
        if args.duration < 0:
            raise UsageError("--duration must not be negative")
        now = _parse_now(args.now) if args.now else None
        sampling = None
        from rltui.sources.bundle import offline_bundle, run_schedule
        offline = _offline(args)
        bundle = offline_bundle(settings, _logs(args)) if offline else \
            _live_or_demo_bundle(args, settings)
        if saved is not None:
            # The saved dumps are the stacks to read: no live py-spy rounds beside them.
            bundle.specs = [s for s in bundle.specs if s.source is not bundle.stacks]
        monitor = Monitor(host=bundle.host, job=bundle.job, thresholds=settings.thresholds,
                          history_len=settings.history)
        monitor.focus = _job(args)

        def fold(reading):
            monitor.ingest(reading)
            monitor.observe(time.time())

        try:
            run_schedule(bundle.specs, args.duration, fold)
            if confirm and not offline and bundle.stacks is not None and any(
                    spec.source is bundle.stacks for spec in bundle.specs):
                sampling = _confirm(bundle, monitor, fold, settings.thresholds)
        finally:
            bundle.close()
        now_source = "--now" if args.now else "clock"
        if now is not None:
            monitor.tracker.now_source = f"--now {args.now}"
        elif offline:
            # Offline, "now" is when the evidence was captured: a healthy job's logs saved
            # beside its dumps are not "stalled" because they are read a day later.
            captured = _captured_at(args)
            if captured is not None:
                now, now_source = captured, "files"
                monitor.tracker.now_source = "the newest modification time of the given files"
        now = now if now is not None else time.time()
        result = monitor.evaluate(now)
        notes, mode = [], bundle.mode
    if args.replay:
        sampling = None
    if saved is not None:
        from rltui.sources.dumpfolder import folder_reading
        dumps, problems = saved
        monitor.tracker.clear_stacks()  # a recording's own rounds are not samples of these
        monitor.ingest(folder_reading(args.stacks, dumps, clock=lambda: now))
        result = monitor.evaluate(now)
        notes += [f"--stacks: {p}" for p in problems]
    snap, diagnosis = result
    if notes:
        from dataclasses import replace
        diagnosis = replace(diagnosis, notes=diagnosis.notes + tuple(notes))
    if args.json:
        import json
        doc = report.to_json(snap, diagnosis, mode, now_source, stacks=monitor.stacks,
                             jobs=monitor.jobs, focus=monitor.focus_id or monitor.focus,
                             stacks_job=monitor.stacks_job)
        if sampling is not None:
            doc["samples"], doc["samples_apart_s"] = sampling
        oom = _oom(monitor, snap, args.job_config, args.model_config)
        if oom is not None:
            from rltui.diagnosis.oom.report import report_json as oom_json
            doc["oom"] = oom_json(oom)
        found = _doctor(snap, diagnosis, args.job_config)
        if found:
            doc["config_doctor"] = found
        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(report.to_text(snap, diagnosis, stacks=monitor.stacks,
                                        jobs=monitor.jobs if monitor.focus is None else ()))
        oom = _oom(monitor, snap, args.job_config, args.model_config)
        if oom is not None:
            from rltui.diagnosis.oom.report import report_text
            sys.stdout.write("\n" + report_text(oom))
        for finding in _doctor(snap, diagnosis, args.job_config):
            sys.stdout.write(f"config doctor: {finding}\n")
    if args.report:
        _write_incident(args.report, monitor, snap, diagnosis, mode)
    if any(s.id == "no-job-found" for s in diagnosis.symptoms):
        _say_no_job(monitor, snap)
        return EXIT_NO_JOB
    return EXIT_FOUND if report.should_fail(diagnosis, args.fail_on) else EXIT_OK


def _job(args: argparse.Namespace) -> str | None:
    wanted = getattr(args, "job", None)
    if wanted is not None and not str(wanted).strip():
        raise UsageError("--job: empty; give a job id from `rltui jobs`, a name or a pid")
    return str(wanted).strip() if wanted is not None else None


def _say_no_job(monitor, snap) -> None:
    if monitor.focus is not None:
        here = ", ".join(v.job.id for v in monitor.jobs if v.job is not None) or "none"
        why = monitor.focus_problem or f"jobs here: {here}"
        print(f"rltui: no job {monitor.focus!r} on this node ({why}); `rltui jobs` lists "
              "them", file=sys.stderr)
        return
    print(f"rltui: no training job found ({snap.job or 'ranks found by environment'}); "
          "choose one with --pid PID, --match REGEX, or read saved files with --log/--stacks",
          file=sys.stderr)


def cmd_jobs(args: argparse.Namespace) -> int:
    """The jobs on this node: launcher, ranks, world size, verdict (one sample of every
    source, as ``diagnose --quick``)."""
    settings, _ = _settings(args)
    if args.duration < 0:
        raise UsageError("--duration must not be negative")
    from rltui import report
    from rltui.monitor import Monitor
    from rltui.sources.bundle import run_schedule
    bundle = _live_or_demo_bundle(args, settings)
    monitor = Monitor(host=bundle.host, job=bundle.job, thresholds=settings.thresholds,
                      history_len=settings.history)

    def fold(reading):
        monitor.ingest(reading)
        monitor.observe(time.time())

    try:
        run_schedule(bundle.specs, args.duration, fold)
    finally:
        bundle.close()
    monitor.focus = _job(args)
    snap, _ = monitor.evaluate(time.time())
    views = [v for v in monitor.jobs if v.job is not None
             and (monitor.focus is None or v.job.id == monitor.focus_id)]
    if args.json:
        import json
        print(json.dumps({"schema": report.SCHEMA, "host": snap.host, "timestamp":
                          snap.timestamp, "jobs": [report.job_json(v) for v in views]},
                         indent=2))
    else:
        sys.stdout.write(report.jobs_text(views))
    if not views and monitor.focus is not None:
        _say_no_job(monitor, snap)
        return EXIT_NO_JOB
    if not views:
        print("rltui: no training job found (looked for Python processes with RANK or "
              "LOCAL_RANK in their environment, launchers and ray:: workers); name one with "
              "--pid PID or --match REGEX", file=sys.stderr)
        return EXIT_NO_JOB
    return EXIT_OK


def _confirm(bundle, monitor, fold, thresholds) -> tuple[int, float | None]:
    """A second sample when the first suggests a hang: every source polled again once the stack
    sample gap has passed, so the verdict rests on both (stuck or moving, busy loop). Ranks on
    CPU in the same function twice may be a busy loop or a job that spends most of its step
    there, caught twice at the same point of its period: a third sample, 1.5 gaps later (an
    offset no step period aliases with both), decides. Returns (samples taken, seconds from
    the first stack round to the last)."""
    from rltui.diagnosis.stacks import BUSY_LOOP
    from rltui.sources.bundle import run_schedule
    first = monitor.evaluate(time.time())[0].stacks
    if not first or not monitor.suggests_hang():
        return 1, None
    gap = thresholds.stack_sample_gap_s
    print(f"rltui diagnose: the first sample suggests a hang; confirming with a second one in "
          f"{gap:g} s (--quick skips this)", file=sys.stderr)
    taken, last = 1, first[-1]
    for wait_gaps in (1.0, 1.5):
        wait = last.started + gap * wait_gaps - time.time()
        if wait > 0:
            time.sleep(wait)
        run_schedule(bundle.specs, 0, fold)  # every source polled once now
        rounds = monitor.evaluate(time.time())[0].stacks
        if not rounds or rounds[-1] is last:
            break
        taken, last = taken + 1, rounds[-1]
        reports = [monitor.stacks] if monitor.focus is not None else \
            [v.stacks for v in monitor.jobs]
        if not any(rep is not None and rep.symptom_id == BUSY_LOOP for rep in reports):
            break
        print("rltui diagnose: ranks on CPU in the same function twice; a third sample tells a "
              "busy loop from a long step", file=sys.stderr)
    return taken, (last.started - first[-1].started) if taken > 1 else None


def _offline(args: argparse.Namespace) -> bool:
    """Saved files given and no live selection (--match, --pid, --live, --demo): read only
    what was given."""
    given = bool(_logs(args) or getattr(args, "stacks", None))
    live = bool(getattr(args, "match", None) or getattr(args, "pid", None)
                or getattr(args, "live", False) or getattr(args, "demo", None))
    return given and not live and not getattr(args, "replay", None)


def _captured_at(args: argparse.Namespace) -> float | None:
    """The newest modification time of the files given (--log globs, --stacks PATH)."""
    import glob
    import os
    paths = [p for g in _logs(args) for p in glob.glob(os.path.expanduser(g))]
    stacks = getattr(args, "stacks", None)
    if stacks:
        paths += [os.path.join(stacks, n) for n in os.listdir(stacks)] \
            if os.path.isdir(stacks) else [stacks]
    times = []
    for p in paths[:100_000]:
        try:
            if os.path.isfile(p):
                times.append(os.stat(p).st_mtime)
        except OSError:
            continue
    # a file dated in the future (a clock ahead on another host) was not written after now
    return min(max(times), time.time()) if times else None


def _oom(monitor, snap, job_config: str | None, model_config: str | None):
    """The OOM report of the snapshot's latest OOM, or None when its logs hold none."""
    from rltui.sources.oominputs import oom_report
    return oom_report(snap, monitor.tracker.logbook.lines(), job_config=job_config,
                      model_config=model_config)


STALL_SYMPTOMS = ("steps-stalled", "hang-busy-loop")


def _doctor(snap, diagnosis, job_config: str | None) -> list[str]:
    """The config doctor, when the steps stall (its findings explain a rollout that waits)."""
    if not any(s.id in STALL_SYMPTOMS for s in diagnosis.symptoms):
        return []
    from rltui.sources.oominputs import config_doctor
    return config_doctor(snap, job_config)


def cmd_oom(args: argparse.Namespace) -> int:
    """`rltui oom`: the diagnose pipeline, printing only the OOM triage."""
    settings, _ = _settings(args)
    if args.duration < 0:
        raise UsageError("--duration must not be negative")
    for flag, path in (("--config", args.job_config), ("--model-config", args.model_config)):
        if path and not Path(path).expanduser().exists():
            raise UsageError(f"{flag} {path}: not found")
    from rltui.monitor import Monitor
    from rltui.sources.bundle import run_schedule
    bundle = _live_or_demo_bundle(args, settings)
    # Logs and processes are what an OOM is read from; no GPU polls or py-spy rounds needed.
    # Logs given alone are read offline: this node's processes are not that job's.
    offline = bool(getattr(args, "log", None)) and not getattr(args, "pid", None) \
        and not getattr(args, "match", None)
    keep = ("logs",) if offline else ("procs", "logs")
    bundle.specs = [s for s in bundle.specs if s.source.name in keep]
    monitor = Monitor(host=bundle.host, job=bundle.job, thresholds=settings.thresholds)
    monitor.focus = _job(args)
    try:
        run_schedule(bundle.specs, args.duration, monitor.ingest)
    finally:
        bundle.close()
    snap, diagnosis = monitor.evaluate(time.time())
    if monitor.focus is not None and monitor.focus_id is None:
        _say_no_job(monitor, snap)
        return EXIT_NO_JOB
    oom = _oom(monitor, snap, args.job_config, args.model_config)
    if oom is None:
        if snap.unmatched_logs and not snap.logs:
            raise UsageError("--log " + ", ".join(snap.unmatched_logs) + ": matches no file")
        where = ", ".join(getattr(args, "log", None) or []) or "the job's logs"
        print(f"rltui oom: no OOM found in {where}", file=sys.stderr)
        return EXIT_FOUND
    from rltui.diagnosis.oom.report import report_json, report_text
    if args.json:
        import json
        print(json.dumps(report_json(oom), indent=2))
    else:
        sys.stdout.write(report_text(oom))
    return EXIT_OK


def _saved_stacks(folder: str):
    from rltui.sources.dumpfolder import NotAFolder, read_dump_folder
    try:
        return read_dump_folder(folder)
    except NotAFolder as exc:
        raise UsageError(f"--stacks {exc}") from None


def invocation() -> list[str]:
    """How rltui was run, secrets redacted (for the incident report's commands)."""
    import shlex

    from rltui.redact import redact_argv
    return ["rltui " + shlex.join(redact_argv(sys.argv[1:]))]


def _write_incident(folder: str, monitor, snap, diagnosis, mode: str) -> None:
    from rltui import incident
    doc = incident.build(incident.ReportInputs(
        snapshot=snap, diagnosis=diagnosis, stacks=monitor.stacks,
        log_tails=monitor.tracker.logbook.tails(incident.LOG_TAIL),
        commands=invocation() + incident.stack_commands(snap), mode=mode))
    try:
        md, js = incident.write_report(folder, doc)
    except OSError as exc:
        raise UsageError(f"--report {folder}: cannot write: {exc.strerror or exc}") from None
    print(f"rltui: incident report written to {md} and {js}", file=sys.stderr)


def cmd_stacks(args: argparse.Namespace) -> int:
    """Open the compare screen on a folder of saved dumps."""
    settings, path = _settings(args)
    dumps, problems = _saved_stacks(args.dir)
    if not dumps:
        raise UsageError(f"{args.dir}: no py-spy dumps found"
                         + (f" ({'; '.join(problems[:3])})" if problems else ""))
    from rltui.diagnosis.stacks import classify
    from rltui.sources.sourcelines import read_source
    from rltui.ui.stacks_app import build_stacks_app
    stacks = classify([dumps])
    app = build_stacks_app(stacks, problems=problems, source_lines=read_source,
                           title=f"rltui stacks {args.dir}", theme=settings.theme)
    app.run()
    return EXIT_OK


COMMANDS = {None: cmd_watch, "demo": cmd_demo, "replay": cmd_replay, "record": cmd_record,
            "diagnose": cmd_diagnose, "stacks": cmd_stacks, "oom": cmd_oom, "jobs": cmd_jobs,
            "agent": lambda args: _agent(args),
            "rollout-check": lambda args: _check("rollout", args),
            "workflow-check": lambda args: _check("workflow", args)}


def _agent(args: argparse.Namespace) -> int:
    from rltui.agent.cli import run
    return run(args)


def _check(name: str, args: argparse.Namespace) -> int:
    """Both checks live in rltui.checks; their modules own flags, output and exit codes."""
    import importlib
    return importlib.import_module(f"rltui.checks.{name}.cli").run(args)


def _hosts_only_where_read(args: argparse.Namespace) -> None:
    """The host flags are read by the app and by diagnose; given before another command they
    would be dropped without a word (``rltui --hosts a demo`` watching this node)."""
    from rltui.remote.cluster_run import HOST_FLAGS, WITH_HOSTS
    if args.command in (None, "diagnose"):
        return
    given = [f"--{n.replace('_', '-')}" for n in HOST_FLAGS + WITH_HOSTS
             if getattr(args, n, None) is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: not an option of {args.command} (only of the "
                         "app itself and of diagnose)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _hosts_only_where_read(args)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"rltui: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
