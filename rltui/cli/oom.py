"""``rltui oom``: the diagnose pipeline over logs and processes, printing only the OOM
triage (docs/oom.md).
"""

from __future__ import annotations

import argparse
import sys
import time

from rltui.cli.common import (
    EXIT_FOUND,
    EXIT_NO_JOB,
    EXIT_OK,
    UsageError,
    job_option,
    live_or_demo_bundle,
    load_settings,
    oom_of,
    oom_options,
    say_no_job,
    unreadable,
)


def cmd_oom(args: argparse.Namespace) -> int:
    """`rltui oom`: the diagnose pipeline, printing only the OOM triage."""
    settings, _ = load_settings(args)
    if args.duration < 0:
        raise UsageError("--duration must not be negative")
    job_config, model_config = oom_options(args)
    from rltui.monitor import Monitor
    from rltui.sources.bundle import run_schedule
    bundle = live_or_demo_bundle(args, settings)
    # Logs and processes are what an OOM is read from; no GPU polls or py-spy rounds needed.
    # Logs given alone are read offline: this node's processes are not that job's.
    offline = bool(getattr(args, "log", None)) and not getattr(args, "pid", None) \
        and not getattr(args, "match", None)
    keep = ("logs",) if offline else ("procs", "logs")
    bundle = bundle.keeping(*keep)
    monitor = Monitor(host=bundle.host, job=bundle.job, thresholds=settings.thresholds)
    monitor.focus = job_option(args)
    try:
        run_schedule(bundle.specs, args.duration, monitor.ingest)
    finally:
        bundle.close()
    snap, diagnosis = monitor.evaluate(time.time())
    if monitor.focus is not None and monitor.focus_id is None:
        say_no_job(monitor, snap)
        return EXIT_NO_JOB
    oom = oom_of(monitor, snap, job_config, model_config)
    if oom is None:
        denied = [why for why in map(unreadable, getattr(args, "log", None) or []) if why]
        if denied:  # "no OOM found" would say the file was read
            raise UsageError(f"--log {'; '.join(denied)}; run as the file's owner or make it "
                             "readable")
        if snap.unmatched_logs and not snap.logs:
            raise UsageError("--log " + ", ".join(snap.unmatched_logs) + ": matches no file")
        where = ", ".join(getattr(args, "log", None) or []) or "the job's logs"
        print(f"rltui oom: no OOM found in {where}", file=sys.stderr)
        return EXIT_FOUND
    from rltui.diagnosis.oom.report import report_json, report_text
    from rltui.scrub import outgoing_text, scrub
    if args.json:
        import json
        print(json.dumps(scrub(report_json(oom)), indent=2))
    else:
        sys.stdout.write(outgoing_text(report_text(oom)))
    return EXIT_OK
