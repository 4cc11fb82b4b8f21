"""``rltui diagnose``: sample the sources (or read a recording, or saved files), confirm a
suspected hang with more samples, print the document or the text report, the OOM triage, the
config doctor, and write the incident report on request.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time

from rltui.cli.common import (
    EXIT_FOUND,
    EXIT_NO_JOB,
    EXIT_OK,
    UsageError,
    flight_recorder_args,
    invocation,
    job_option,
    live_or_demo_bundle,
    load_scenario,
    load_settings,
    log_globs,
    oom_of,
    parse_now,
    saved_stacks,
    say_no_job,
    unreadable,
    write_incident,
)


def cmd_diagnose(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args)
    # No --duration: one sample, confirmed by a second when it suggests a hang (not --quick).
    confirm = args.duration is None and not args.quick
    args.duration = 1.0 if args.duration is None else args.duration
    from rltui.cli import hosts as cluster_run
    if cluster_run.wanted(args):
        return cluster_run.run_diagnose(args, settings)
    if args.no_dump:
        raise UsageError("--no-dump needs --hosts, --hostfile, --slurm-job or --ray (on this "
                         "node the stacks are the periodic, non-blocking rounds anyway)")
    from rltui import report
    from rltui.monitor import Monitor
    saved = saved_stacks(args.stacks) if args.stacks else None
    bundle = None
    if args.replay:
        scenario = load_scenario(args.replay)
        monitor = Monitor(host=scenario.host, job=scenario.job, thresholds=settings.thresholds,
                          history_len=settings.history)
        monitor.focus = job_option(args)
        result = monitor.replay(scenario.readings)
        if result is None:
            raise UsageError(f"{args.replay}: the recording holds no readings")
        notes = list(scenario.warnings)
        mode, now_source = "replay", "recording"
        now = result[0].timestamp
    else:
        if args.duration < 0:
            raise UsageError("--duration must not be negative")
        now = parse_now(args.now) if args.now else None
        for why in filter(None, map(unreadable, log_globs(args))):
            # the diagnosis can only say "matches no file (yet)": say why, once, here
            print(f"rltui: warning: --log {why}", file=sys.stderr)
        sampling = None
        from rltui.sources.bundle import offline_bundle, run_schedule
        offline = _offline(args)
        if offline:
            paths, urls = flight_recorder_args(args)
            bundle = offline_bundle(settings, log_globs(args), paths, urls)
        else:
            bundle = live_or_demo_bundle(args, settings)
        if saved is not None:
            # The saved dumps are the stacks to read: no live py-spy rounds beside them.
            bundle = bundle.without_periodic_stacks()
        monitor = Monitor(host=bundle.host, job=bundle.job, thresholds=settings.thresholds,
                          history_len=settings.history)
        monitor.focus = job_option(args)

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
        # saved dumps are evaluated below, with them (one evaluation of 4,096 ranks, not two)
        result = monitor.evaluate(now) if saved is None else None
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
        from rltui.model import replace
        diagnosis = replace(diagnosis, notes=diagnosis.notes + tuple(notes))
    from rltui import findings
    found = findings.Findings(
        snapshot=snap, diagnosis=diagnosis, mode=mode, now_source=now_source,
        stacks=monitor.stacks, stacks_job=monitor.stacks_job, jobs=monitor.jobs,
        focus=monitor.focus_id or monitor.focus, samples=sampling,
        thresholds=monitor.thresholds,
        oom=oom_of(monitor, snap, args.job_config, args.model_config),
        doctor=tuple(_doctor(snap, diagnosis, args.job_config)))
    if args.json:
        import json
        print(json.dumps(findings.document(found), indent=2))
    else:
        sys.stdout.write(findings.text(found))
    if args.report:
        from rltui.incident import LOG_TAIL, stack_commands
        write_incident(args.report, found, monitor.tracker.logbook.tails(LOG_TAIL),
                       invocation() + stack_commands(snap))
    if any(s.id == "no-job-found" for s in diagnosis.symptoms):
        say_no_job(monitor, snap)
        return EXIT_NO_JOB
    return EXIT_FOUND if report.should_fail(diagnosis, args.fail_on) else EXIT_OK


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
    for n, wait_gaps in enumerate((1.0, 1.5)):
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
        if n == 1 or not any(rep is not None and rep.symptom_id == BUSY_LOOP for rep in reports):
            break  # the last sample taken, or nothing left to tell apart
        print("rltui diagnose: ranks on CPU in the same function twice; a third sample tells a "
              "busy loop from a long step", file=sys.stderr)
    return taken, (last.started - first[-1].started) if taken > 1 else None


def _offline(args: argparse.Namespace) -> bool:
    """Saved files (or torch's debug server) given and no live selection (--match, --pid,
    --live, --demo): read only what was given."""
    given = bool(log_globs(args) or getattr(args, "stacks", None)
                 or getattr(args, "flight_recorder", None) or getattr(args, "torch_debug", None))
    live = bool(getattr(args, "match", None) or getattr(args, "pid", None)
                or getattr(args, "live", False) or getattr(args, "demo", None))
    return given and not live and not getattr(args, "replay", None)


def _captured_at(args: argparse.Namespace) -> float | None:
    """The newest modification time of the files given (--log globs, --stacks PATH)."""
    import glob
    paths = [p for g in log_globs(args) + list(getattr(args, "flight_recorder", None) or [])
             for p in glob.glob(os.path.expanduser(g))]
    stacks = getattr(args, "stacks", None)
    if stacks:
        paths += [os.path.join(stacks, n) for n in os.listdir(stacks)] \
            if os.path.isdir(stacks) else [stacks]
    times = []
    for p in paths[:100_000]:
        try:
            st = os.stat(p)  # one stat a file: 65,536 saved dumps are 65,536 of them
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            times.append(st.st_mtime)
    # a file dated in the future (a clock ahead on another host) was not written after now
    return min(max(times), time.time()) if times else None


STALL_SYMPTOMS = ("steps-stalled", "hang-busy-loop")


def _doctor(snap, diagnosis, job_config: str | None) -> list[str]:
    """The config doctor, when the steps stall (its findings explain a rollout that waits)."""
    if not any(s.id in STALL_SYMPTOMS for s in diagnosis.symptoms):
        return []
    from rltui.sources.oominputs import config_doctor
    return config_doctor(snap, job_config)
