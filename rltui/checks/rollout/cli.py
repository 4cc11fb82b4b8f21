"""``rltui rollout-check``: flags, progress on stderr, output and exit codes.

Standard library only at module level (``rltui --help`` imports this). Exit codes: 0 consistent,
1 divergence (or a log-prob difference verl calls a precision problem), also when the run was
cut short after finding one, 2 usage or input error (including "nothing comparable": every
sample refused), 3 could not finish and found no divergence (partial results still printed),
130 interrupted (the partial report is printed first).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rltui.checks.console import EXIT_INTERRUPTED, run_interruptibly


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rltui.checks import params
    from rltui.checks.rollout.params import PARAMS
    params.add_arguments(p, PARAMS)


def spec_from_args(args: argparse.Namespace):
    from rltui.checks.params import spec_values
    from rltui.checks.rollout.params import PARAMS
    from rltui.checks.rollout.spec import RolloutSpec
    return RolloutSpec(**spec_values(PARAMS, args))


def _write(path: str, text: str) -> str | None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


def run(args: argparse.Namespace) -> int:
    from rltui.checks.rollout.runner import run as run_check
    from rltui.scrub import outgoing_text, scrub
    spec = spec_from_args(args)
    report, interrupted = run_interruptibly(run_check, spec, "rollout-check")
    doc = scrub(report.to_json())
    if args.json:
        print(json.dumps(doc, indent=2))
    elif report.error and not report.results:
        pass  # said once below, as an error
    else:
        print(outgoing_text(report.to_text()))
    if report.error:
        print(f"rltui: error: {outgoing_text(report.error)}", file=sys.stderr)
    problems = []
    if args.markdown:
        problems.append(_write(args.markdown, outgoing_text(report.to_markdown())))
    if args.json_out:
        problems.append(_write(args.json_out, json.dumps(doc, indent=2) + "\n"))
    for problem in filter(None, problems):
        print(f"rltui: error: {problem}", file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    code = report.exit_code()
    return 2 if any(problems) and code == 0 else code
