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
    p.add_argument("workflow", metavar="MODULE:CLASS",
                   help="the workflow class, e.g. my_agent.flow:MathAgent (its folder via --path)")
    data = p.add_mutually_exclusive_group()
    data.add_argument("--data", metavar="FILE",
                      help="JSONL dataset: each line a JSON object passed to run as `data` "
                           "(other lines are skipped and listed)")
    data.add_argument("--prompt", metavar="TEXT",
                      help="a one-row dataset {\"prompt\": TEXT, \"messages\": [user TEXT]}")
    p.add_argument("--base-url", metavar="URL",
                   help="OpenAI-compatible base URL passed to run as base_url= "
                        "(default: OPENAI_BASE_URL)")
    p.add_argument("--api-key", metavar="KEY",
                   help="passed to run as api_key= (default: OPENAI_API_KEY, which keeps it "
                        "off the command line); never printed or exported")
    p.add_argument("--global-bs", type=int, default=256, metavar="N",
                   help="trainer's global batch size in prompts (default 256)")
    p.add_argument("--group-size", type=int, default=8, metavar="N",
                   help="samples per prompt (default 8)")
    p.add_argument("--rollout-dp-size", type=int, default=4, metavar="N",
                   help="rollout processes; local_bs = global_bs // rollout_dp_size (default 4)")
    p.add_argument("--concurrency", type=int, metavar="N",
                   help="at most N runs in flight (default: all local_bs x group_size at once, "
                        "like the trainer)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds per run (default 60)")
    p.add_argument("--path", action="append", default=[], metavar="DIR",
                   help="added to the worker's sys.path (repeatable; default: the current "
                        "folder)")
    p.add_argument("--kwargs", metavar="JSON", default="{}",
                   help="more extra_kwargs for run, a JSON object (e.g. '{\"model\": \"m\"}')")
    p.add_argument("--init-kwargs", metavar="JSON", default="{}",
                   help="keyword arguments for the class's constructor, a JSON object")
    p.add_argument("--sequential", type=int, default=4, metavar="K",
                   help="prompts run one at a time before the concurrent step, to compare "
                        "(default 4; 0 skips the comparison)")
    p.add_argument("--force", action="store_true",
                   help="run the concurrent step even when the single run fails")
    p.add_argument("--loop-block", type=float, default=1.0, metavar="S",
                   help="report the event loop as blocked when it does not answer for S "
                        "seconds (default 1)")
    p.add_argument("--startup-timeout", type=float, default=120.0, metavar="S",
                   help="seconds allowed to import and construct the workflow (default 120)")
    p.add_argument("--python", metavar="PATH",
                   help="interpreter for the worker, e.g. the training venv's python "
                        "(default: rltui's)")
    p.add_argument("--no-probe", action="store_true",
                   help="do not test that the base URL accepts connections first")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as markdown")


def _spec(args: argparse.Namespace):
    from rltui.checks.workflow.spec import WorkflowSpec, parse_json_object
    return WorkflowSpec(
        target=args.workflow, dataset=args.data, prompt=args.prompt, base_url=args.base_url,
        api_key=args.api_key, global_bs=args.global_bs, group_size=args.group_size,
        rollout_dp_size=args.rollout_dp_size, timeout=args.timeout, paths=tuple(args.path),
        extra_kwargs=parse_json_object(args.kwargs, "--kwargs"),
        init_kwargs=parse_json_object(args.init_kwargs, "--init-kwargs"),
        concurrency=args.concurrency, force=args.force, sequential_prompts=args.sequential,
        loop_block_s=args.loop_block, startup_timeout=args.startup_timeout,
        python=args.python, probe_server=not args.no_probe)


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
