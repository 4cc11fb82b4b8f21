"""The commands that open the app: watch this node (no command), the demo, a replay, the
stack compare screen; and ``record``, which polls the same sources into a scenario folder.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rltui.cli.common import (
    EXIT_OK,
    UsageError,
    flight_recorder_args,
    invocation,
    job_option,
    live_or_demo_bundle,
    load_scenario,
    load_settings,
    log_globs,
    oom_options,
    saved_stacks,
    source_args,
    start_demo,
)


def run_app(bundle, settings, config_path, job: str | None = None,
            oom: tuple[str | None, str | None] = (None, None), read_only: bool = False) -> int:
    """``oom``: the --job-config and --model-config the OOM triage (`m`) reads; ``read_only``:
    the app without the keys that change anything (``rltui serve``)."""
    from rltui.ui.app import build_app
    try:
        build_app(bundle, settings, config_path, commands=invocation(), job=job,
                  job_config=oom[0], model_config=oom[1], read_only=read_only).run()
    finally:
        bundle.close()
    # A poll stuck in the outside world (NVML hung in the driver, a py-spy that never returns)
    # sits in a worker thread that the interpreter would join at exit; the app is done and the
    # bundle closed, so leave without waiting for it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_OK)


def cmd_watch(args: argparse.Namespace) -> int:
    settings, path = load_settings(args)
    from rltui.cli import hosts as cluster_run
    if cluster_run.wanted(args):  # refuses --job-config and --model-config: this node's files
        return run_app(cluster_run.cluster_bundle(args, settings), settings, path,
                       read_only=args.read_only)
    oom = oom_options(args)
    match, pids = source_args(args)
    paths, urls = flight_recorder_args(args)
    from rltui.sources.bundle import live_bundle
    return run_app(live_bundle(settings, match, pids, log_globs(args), flight_recorder=paths,
                               torch_debug=urls), settings, path, job=job_option(args), oom=oom,
                   read_only=args.read_only)


def cmd_demo(args: argparse.Namespace) -> int:
    if args.list:
        from rltui.demo.job import SCENARIOS
        for name, text in SCENARIOS.items():
            print(f"{name:22} {text}")
        return EXIT_OK
    settings, path = load_settings(args)
    oom = oom_options(args)
    job = start_demo(args.scenario, args.ranks)
    from rltui.sources.bundle import demo_bundle
    try:
        bundle = demo_bundle(settings, job)
    except BaseException:
        job.stop()
        raise
    return run_app(bundle, settings, path, oom=oom, read_only=args.read_only)


def cmd_replay(args: argparse.Namespace) -> int:
    settings, path = load_settings(args)
    if args.speed <= 0:
        raise UsageError("--speed must be positive")
    oom = oom_options(args)
    scenario = load_scenario(args.dir)
    for warning in scenario.warnings:
        print(f"rltui: warning: {warning}", file=sys.stderr)
    from rltui.sources.bundle import replay_bundle
    return run_app(replay_bundle(scenario, args.speed), settings, path, oom=oom,
                   read_only=args.read_only)


def cmd_record(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args)
    if job_option(args) is not None:
        raise UsageError("--job: record keeps every job's readings; choose the job when "
                         "reading the recording (rltui diagnose --replay DIR --job ID)")
    if args.duration <= 0:
        raise UsageError("--duration must be positive")
    from rltui.sources.bundle import run_schedule
    from rltui.sources.record import Recorder
    out = Path(args.out)
    try:
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise UsageError(f"{out}: exists and is not an empty folder")
        out.mkdir(parents=True, exist_ok=True)  # before any job is touched: /proc/rec fails here
    except OSError as exc:
        raise UsageError(f"{out}: cannot create the recording folder: "
                         f"{exc.strerror or exc}") from None
    bundle = live_or_demo_bundle(args, settings)
    try:
        try:
            recorder = Recorder(out, host=bundle.host, job=bundle.job,
                                intervals=bundle.intervals(),
                                description=f"rltui record, {args.duration:g} s")
        except OSError as exc:
            raise UsageError(f"{out}: cannot write the recording: {exc.strerror or exc}") from None
        bundle = bundle.recording(recorder)
        from rltui.scrub import outgoing_text
        print(outgoing_text(f"recording {bundle.job} to {out} for {args.duration:g} s "
                            "(Ctrl-C stops early)"), file=sys.stderr)
        try:
            run_schedule(bundle.specs, args.duration, bundle.recorder.write)
        except KeyboardInterrupt:
            print("stopped early", file=sys.stderr)
        print(f"wrote {bundle.recorder.count} readings to {out}", file=sys.stderr)
    finally:
        bundle.close()
    return EXIT_OK


def cmd_stacks(args: argparse.Namespace) -> int:
    """Open the compare screen on a folder of saved dumps."""
    settings, path = load_settings(args)
    dumps, problems = saved_stacks(args.dir)
    if not dumps:
        raise UsageError(f"{args.dir}: no py-spy dumps found"
                         + (f" ({'; '.join(problems[:3])})" if problems else ""))
    from rltui.diagnosis.stacks import classify
    from rltui.sources.clipboard import save_copy
    from rltui.sources.sourcelines import read_source
    from rltui.ui.stacks_app import build_stacks_app
    stacks = classify([dumps])
    paths, _ = flight_recorder_args(args)
    if paths:
        from rltui.diagnosis.flightrec import analyse, apply, stack_ops
        from rltui.sources.flightrec import FlightRecorderSource
        poll = FlightRecorderSource(paths).poll().payload
        fa = analyse(poll, expected_ranks={d.rank for d in dumps if d.rank is not None},
                     stack_ops=stack_ops(stacks))
        stacks = apply(stacks, fa)
        problems = list(problems) + [f"--flight-recorder: {p}" for p in poll.problems]
    app = build_stacks_app(stacks, problems=problems, source_lines=read_source,
                           title=f"rltui stacks {args.dir}", theme=settings.theme,
                           config_path=path, copy_sink=save_copy)
    app.run()
    return EXIT_OK
