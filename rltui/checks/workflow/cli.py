"""``rltui workflow-check module:Class``: flags, output and exit codes.

Module-level imports are standard library only: ``rltui --help`` imports this module.
Exit codes: 0 passed; 1 problems found; 2 usage or input error (bad flags, a dataset with no
usable line, a workflow that does not import or has no async ``run``); 3 could not finish (the
worker died or stopped answering, or the server at the base URL was down; partial results are
still printed); 130 interrupted (Ctrl-C; the partial report is printed first).
"""

from __future__ import annotations

import argparse
import json
import sys

from rltui.checks.console import EXIT_INTERRUPTED, run_interruptibly


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rltui.checks import params
    from rltui.checks.workflow.params import PARAMS
    params.add_arguments(p, PARAMS)


def _spec(args: argparse.Namespace):
    from rltui.checks.params import spec_values
    from rltui.checks.workflow.params import PARAMS
    from rltui.checks.workflow.spec import WorkflowSpec, parse_json_object
    return WorkflowSpec(**spec_values(PARAMS, args, parse_json_object))


def run(args: argparse.Namespace) -> int:
    from rltui.checks.workflow.report import EXIT_INPUT
    from rltui.checks.workflow.spec import SpecError, validate
    try:
        spec = _spec(args)
        validate(spec)
    except SpecError as exc:
        print(f"rltui: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    from rltui.checks.workflow.runner import run as run_check
    from rltui.scrub import outgoing_text, scrub
    report, interrupted = run_interruptibly(run_check, spec, "workflow-check")
    # bad input (a dataset with no usable line): nothing ran, so a usage error, not a report
    usage = (report.setup_error or {}).get("kind") == "input"
    if args.json:
        print(json.dumps(scrub(report.to_json()), indent=2, default=str))
    elif not usage:
        sys.stdout.write(outgoing_text(report.to_text()))
    if report.setup_error and (args.json or usage):
        print(f"rltui: error: {outgoing_text(report.setup_error['message'])}", file=sys.stderr)
    code = report.exit_code()
    if args.markdown:
        try:
            with open(args.markdown, "w", encoding="utf-8") as fh:
                fh.write(outgoing_text(report.to_markdown()))
        except OSError as exc:
            print(f"rltui: error: --markdown {args.markdown}: cannot write: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            code = EXIT_INPUT
    return EXIT_INTERRUPTED if interrupted else code
