"""``rltui jobs``: the training jobs on this node, each with its launcher, ranks, world size
and verdict (docs/jobs.md).
"""

from __future__ import annotations

import argparse
import sys
import time

from rltui.cli.common import (
    EXIT_NO_JOB,
    EXIT_OK,
    UsageError,
    job_option,
    live_or_demo_bundle,
    load_settings,
    say_no_job,
)


def cmd_jobs(args: argparse.Namespace) -> int:
    """The jobs on this node: launcher, ranks, world size, verdict (one sample of every
    source, as ``diagnose --quick``)."""
    settings, _ = load_settings(args)
    if args.duration < 0:
        raise UsageError("--duration must not be negative")
    from rltui import report
    from rltui.monitor import Monitor
    from rltui.sources.bundle import run_schedule
    bundle = live_or_demo_bundle(args, settings)
    monitor = Monitor(host=bundle.host, job=bundle.job, thresholds=settings.thresholds,
                      history_len=settings.history)

    def fold(reading):
        monitor.ingest(reading)
        monitor.observe(time.time())

    try:
        run_schedule(bundle.specs, args.duration, fold)
    finally:
        bundle.close()
    monitor.focus = job_option(args)
    snap, _ = monitor.evaluate(time.time())
    views = [v for v in monitor.jobs if v.job is not None
             and (monitor.focus is None or v.job.id == monitor.focus_id)]
    from rltui.scrub import outgoing_text, scrub
    if args.json:
        import json
        print(json.dumps(scrub({"schema": report.SCHEMA, "host": snap.host, "timestamp":
                                snap.timestamp, "jobs": [report.job_json(v) for v in views]}),
                         indent=2))
    else:
        sys.stdout.write(outgoing_text(report.jobs_text(views)))
    if not views and monitor.focus is not None:
        say_no_job(monitor, snap)
        return EXIT_NO_JOB
    if not views:
        print("rltui: no training job found (looked for Python processes with RANK or "
              "LOCAL_RANK in their environment, launchers and ray:: workers); name one with "
              "--pid PID or --match REGEX", file=sys.stderr)
        return EXIT_NO_JOB
    return EXIT_OK
