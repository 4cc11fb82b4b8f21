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
    p.add_argument("--dataset", required=True, metavar="FILE",
                   help="JSONL: one sample a line with 'prompt', 'messages' or 'input_ids', "
                        "optional 'answer'")
    p.add_argument("--reference", required=True, metavar="MODEL_PATH_OR_URL",
                   help="a local HF model folder (greedy transformers generate), or the "
                        "http(s) URL of a second endpoint")
    p.add_argument("--server", required=True, metavar="URL",
                   help="the inference server: OpenAI-style base URL "
                        "(http://127.0.0.1:8000/v1) or a native .../generate")
    p.add_argument("--model", metavar="NAME",
                   help="the server's name for the model (default: the only one it lists)")
    p.add_argument("--max-new-tokens", type=int, default=256, metavar="N",
                   help="greedy tokens per sample on both sides (default 256)")
    p.add_argument("--limit", type=int, metavar="N", help="the first N samples only")
    p.add_argument("--concurrency", type=int, default=8, metavar="N",
                   help="samples in flight at once, one request each to the server "
                        "(default 8)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    g = p.add_argument_group("more settings")
    g.add_argument("--api", choices=["auto", "completions", "chat", "generate"], default="auto",
                   help="the server endpoint (default auto: /v1/completions with token ids, or "
                        "/generate for a native URL); chat re-templates the messages")
    g.add_argument("--tokenizer", metavar="PATH",
                   help="the tokenizer that builds the token ids (default: the reference "
                        "folder; required with a URL reference)")
    g.add_argument("--reference-model", metavar="NAME",
                   help="the model name at a URL reference (default: the only one listed)")
    g.add_argument("--reference-api", choices=["auto", "completions", "chat", "generate"],
                   default="auto", help="the endpoint of a URL reference (default auto)")
    g.add_argument("--reference-dtype", choices=["float32", "bfloat16", "float16", "auto"],
                   default="float32", help="dtype of a local reference model (default float32)")
    g.add_argument("--reference-device", default="auto", metavar="DEVICE",
                   help="where a local reference model runs: auto (a GPU when there is one), "
                        "cpu, cuda or cuda:N")
    g.add_argument("--api-key", metavar="KEY",
                   help="the server's API key (default: OPENAI_API_KEY; prefer the variable, a "
                        "flag shows in the process list). Never printed")
    g.add_argument("--reference-api-key", metavar="KEY",
                   help="the key for a URL reference (default: the server's key)")
    g.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="per request (default 120)")
    g.add_argument("--markdown", metavar="FILE", help="also write the report as markdown")
    g.add_argument("--json-out", metavar="FILE", help="also write the JSON report to FILE")


def spec_from_args(args: argparse.Namespace):
    from rltui.checks.rollout.spec import RolloutSpec
    return RolloutSpec(
        dataset=args.dataset, reference=args.reference, server=args.server, model=args.model,
        reference_model=args.reference_model, api=args.api, reference_api=args.reference_api,
        tokenizer=args.tokenizer, max_new_tokens=args.max_new_tokens, limit=args.limit,
        concurrency=args.concurrency, timeout_s=args.timeout,
        reference_dtype=args.reference_dtype, reference_device=args.reference_device,
        api_key=args.api_key,
        reference_api_key=args.reference_api_key)


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
