"""Command line: argument parsing and the sub-commands, one module each (common, watch,
diagnose, jobs, oom; agent and the checks keep their own), and the composition root: ``main``.

Only the standard library is imported at module level so ``rltui --help`` starts fast; each
command imports what it needs. Exit codes: rltui.cli.common.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Sequence

from rltui.cli.common import (  # noqa: F401 - the public names of rltui.cli
    EXIT_FOUND,
    EXIT_NO_JOB,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_config_option,
    add_host_options,
    add_oom_options,
    add_source_options,
    check_numbers,
    invocation,
    version,
)
from rltui.cli.diagnose import cmd_diagnose
from rltui.cli.docs import cmd_docs
from rltui.cli.jobs import cmd_jobs
from rltui.cli.oom import cmd_oom
from rltui.cli.watch import cmd_demo, cmd_record, cmd_replay, cmd_stacks, cmd_watch


class _Commands(argparse._SubParsersAction):
    """The sub-commands, where a command whose flags live in another package (agent, the
    checks) gets them only when it is the one chosen: ``rltui diagnose`` imports nothing of
    rltui.checks or rltui.agent, and ``rltui --help`` lists every command from its help
    line alone. ``rltui agent --help`` still shows the agent's flags (added before parsing)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._later: dict[str, tuple[argparse.ArgumentParser, str]] = {}

    def add_later(self, name: str, arguments: str, **kwargs) -> argparse.ArgumentParser:
        """A sub-command whose flags ``arguments`` ("module:function") adds when chosen."""
        parser = self.add_parser(name, **kwargs)
        self._later[name] = (parser, arguments)
        return parser

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        later = self._later.pop(values[0], None) if values else None
        if later is not None:
            import importlib
            module, function = later[1].split(":")
            getattr(importlib.import_module(module), function)(later[0])
        super().__call__(parser, namespace, values, option_string)


DEMO_SCENARIO = "healthy"


def scenario_epilog(scenarios: dict[str, str], width: int = 78) -> str:
    """The demo's scenarios, one paragraph each, for ``rltui demo --help``."""
    rows = ["scenarios (--scenario NAME):"]
    for name, text in scenarios.items():
        mark = " (default)" if name == DEMO_SCENARIO else ""
        rows.append(textwrap.fill(f"{name}{mark}: {text}", width, initial_indent="  ",
                                  subsequent_indent="      "))
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: argparse matches abbreviations of the top-level options against every
    # word of the command line, so the agent's --host would be "ambiguous" with --hosts and
    # --hostfile. Sub-commands keep abbreviations.
    p = argparse.ArgumentParser(
        prog="rltui", allow_abbrev=False,
        description="Live monitor and hang triage for distributed RL training nodes. With no "
                    "command, watches this node.",
        epilog="Docs: rltui docs (the topics), rltui docs getting-started. Config: "
               "$XDG_CONFIG_HOME/rltui/config.yaml or RLTUI_CONFIG.")
    p.add_argument("--version", action="version", version=f"rltui {version()}")
    add_config_option(p, sub=False)
    add_source_options(p, sub=False)
    add_host_options(p, sub=False)
    add_oom_options(p, sub=False)
    # The app without the keys that change anything: what `rltui serve` starts for each browser
    # session unless --allow-actions (rltui.cli.serve). Hidden: a session's flag, not a user's.
    p.add_argument("--read-only", action="store_true", help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)

    from rltui.demo.scenarios import SCENARIOS  # standard library only: --help stays fast
    d = sub.add_parser("demo", help="start a real synthetic multi-process job and watch it",
                       # pre-wrapped: the raw formatter keeps the epilog's one line per
                       # scenario, and the description's lines with it
                       description=textwrap.fill(
                           "Starts a synthetic training job (one process per rank, verl-style "
                           "logs, simulated GPUs) and opens the monitor on it. The job is "
                           "stopped when the app quits.", 78),
                       epilog=scenario_epilog(SCENARIOS),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--scenario", default=DEMO_SCENARIO, metavar="NAME",
                   help=f"what the job does (default: {DEMO_SCENARIO}; the scenarios are "
                        "listed below)")
    d.add_argument("--ranks", type=int, default=4, help="number of ranks (2-64, default 4)")
    d.add_argument("--list", action="store_true", help="list the scenarios and exit")
    add_config_option(d)
    add_oom_options(d)

    r = sub.add_parser("replay", help="play a recorded scenario folder in the app")
    r.add_argument("dir", metavar="DIR")
    r.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")
    add_config_option(r)
    add_oom_options(r)

    rec = sub.add_parser("record", help="record every reading into a scenario folder",
                         description="Polls the sources at their cadence and writes every "
                                     "reading to OUT (see rltui docs scenarios).")
    rec.add_argument("out", metavar="OUT")
    rec.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    rec.add_argument("--demo", metavar="SCENARIO",
                     help="record a demo job running SCENARIO instead of this node's job")
    rec.add_argument("--ranks", type=int, default=4, help="demo ranks (with --demo)")
    add_config_option(rec)
    add_source_options(rec)

    dg = sub.add_parser("diagnose", help="print the snapshot and diagnosis, headless",
                        description="Samples the sources (or reads a recording) and prints the "
                                    "diagnosis. Exit 0: nothing at or above --fail-on; 1: "
                                    "something is; 2: usage error; 3: across nodes, no node "
                                    "answered.")
    dg.add_argument("--replay", metavar="DIR", help="diagnose a recorded scenario folder")
    dg.add_argument("--json", action="store_true", help="print JSON (rltui docs diagnose-json)")
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
                         "faulthandler, with Ray/torchrun/docker prefixes (rltui docs stacks)")
    dg.add_argument("--report", metavar="DIR",
                    help="also write an incident report (incident.md and incident.json) into "
                         "DIR: symptoms, stack classes, ranks, log tails, debug env, commands")
    add_oom_options(dg)
    dg.add_argument("--now", metavar="TIME",
                    help="what 'now' is for stall checks on logs read offline: POSIX seconds "
                         "or an ISO time such as 2026-03-01T12:00:00 (default: the time of "
                         "this run)")
    dg.add_argument("--demo", metavar="SCENARIO",
                    help="diagnose a demo job started for the purpose (try it without a job)")
    dg.add_argument("--ranks", type=int, default=4, help="demo ranks (with --demo)")
    add_config_option(dg)
    add_source_options(dg)
    hosts = add_host_options(dg)
    hosts.add_argument("--no-dump", action="store_true",
                       help="no stack dump of every rank at the end of the run (the stacks "
                            "are then the nodes' last periodic, non-blocking round)")

    jb = sub.add_parser("jobs", help="list the training jobs on this node",
                        description="Groups the node's training processes into jobs (by "
                                    "launcher, rendezvous, run id, Slurm step, Ray job and the "
                                    "process tree) and lists each with its launcher, ranks, "
                                    "world size and verdict (rltui docs jobs). Exit 0: jobs "
                                    "listed; 2: usage error; 4: no job found.")
    jb.add_argument("--json", action="store_true", help="print JSON (rltui docs jobs)")
    jb.add_argument("--duration", type=float, default=1.0,
                    help="seconds to sample the sources (default 1)")
    jb.add_argument("--demo", metavar="SCENARIO", help=argparse.SUPPRESS)
    jb.add_argument("--ranks", type=int, default=4, help=argparse.SUPPRESS)
    add_config_option(jb)
    add_source_options(jb)

    om = sub.add_parser("oom", help="triage a CUDA OOM: phase, config changes, a patch",
                        description="Reads the logs (--log, or this node's job), finds the latest "
                                    "OOM, decides the training phase, loads the job's config and "
                                    "proposes ranked config changes with a patch (rltui docs oom). "
                                    "Exit 0: an OOM was triaged; 1: no OOM found; 2: usage error.")
    # --config is the command's first name for it; --job-config the app's and diagnose's.
    om.add_argument("--config", "--job-config", dest="job_config", metavar="FILE",
                    default=argparse.SUPPRESS,
                    help="the job's config (verl Hydra YAML, AReaL YAML); default: found from "
                         "the job's command line")
    om.add_argument("--model-config", metavar="FILE", default=argparse.SUPPRESS,
                    help="the model's HF config.json (or its folder), for the memory estimate")
    om.add_argument("--json", action="store_true", help="print the oom object as JSON")
    om.add_argument("--duration", type=float, default=1.0,
                    help="seconds to sample a live job's sources (default 1)")
    add_source_options(om)

    dc = sub.add_parser("docs", help="print the documentation: the topics, or one topic",
                        description="Prints a page of rltui's documentation as plain text (the "
                                    "markdown shipped with rltui); with no TOPIC lists the "
                                    "topics. Exit 0: printed; 2: no such topic.")
    dc.add_argument("topic", metavar="TOPIC", nargs="?",
                    help="a topic of the list, e.g. getting-started, screen, oom")

    st = sub.add_parser("stacks", help="compare saved py-spy dumps of all ranks (STAT-style)",
                        description="Opens the compare screen on a folder of saved py-spy dumps: "
                                    "one file per process, text or --json in any mix, rank<N> "
                                    "in the file name, or one file with several dumps (a shell "
                                    "loop's output, a log with dumps in it, faulthandler "
                                    "output).")
    st.add_argument("dir", metavar="PATH")
    st.add_argument("--flight-recorder", metavar="PATH_OR_GLOB", action="append",
                    dest="flight_recorder", default=[],
                    help="the ranks' PyTorch Flight Recorder dumps, read beside the stacks "
                         "(repeatable; quote globs; rltui docs flight-recorder)")
    add_config_option(st)

    sub.add_later(
        "agent", "rltui.cli.agent:add_arguments",
        help="headless collector for one node: readings as JSON lines on stdout",
        description="Collects on this node (GPUs, processes and ranks, log tails, py-spy dumps "
                    "on request) and streams readings as JSON lines on stdout; takes requests "
                    "(dump, tail, stop) as JSON lines on stdin. What a multi-node rltui starts "
                    "on each node over ssh or srun (rltui docs agent).")

    sub.add_later(
        "serve", "rltui.cli.serve:add_arguments",
        help="the app in a browser (textual-serve), behind a token, read-only by default",
        description="Serves the app to a browser with Textualize's textual-serve, for a "
                    "teammate at the other end of an ssh tunnel: listens on 127.0.0.1 unless "
                    "--host, every address needs the random token of the URL printed at start, "
                    "and the keys that change anything (dump, report, checks, theme saving) are "
                    "off unless --allow-actions. Each browser session runs its own app (rltui "
                    "docs serve). Needs the serve extra: pip install 'rltui[serve]'.")

    sub.add_later(
        "rollout-check", "rltui.checks.rollout.cli:add_arguments",
        help="compare a reference (HF model or endpoint) with an inference server, greedy, "
             "token by token",
        description="Sends the same token ids, greedy, to a reference (a local HF transformers "
                    "model or a second endpoint) and to the inference server, and reports "
                    "agreement, the first divergent token, answer accuracy on each side and the "
                    "log-prob difference (rltui docs rollout-check). Exit 0: consistent; 1: "
                    "divergence found; 2: usage or input error; 3: could not finish (partial "
                    "results kept); 130: interrupted (partial report printed).")
    sub.add_later(
        "workflow-check", "rltui.checks.workflow.cli:add_arguments",
        help="run an agent workflow once, then at RL concurrency",
        description="Imports module:Class with `async def run(self, data, **extra_kwargs)`, "
                    "runs one sample, then local_bs x group_size at once, and reports errors by "
                    "type, timeouts (with the pending tasks), invalid rewards, latency and "
                    "whether sequential and concurrent results agree (rltui docs workflow-check). "
                    "Exit 0: passed; 1: problems found; 2: usage or import error; 3: could not "
                    "finish; 130: interrupted (partial report printed).")
    return p


COMMANDS = {None: cmd_watch, "demo": cmd_demo, "replay": cmd_replay, "record": cmd_record,
            "diagnose": cmd_diagnose, "stacks": cmd_stacks, "oom": cmd_oom, "jobs": cmd_jobs,
            "docs": cmd_docs,
            "agent": lambda args: _agent(args),
            "serve": lambda args: _serve(args),
            "rollout-check": lambda args: _check("rollout", args),
            "workflow-check": lambda args: _check("workflow", args)}


def _agent(args: argparse.Namespace) -> int:
    from rltui.cli.agent import run
    return run(args)


def _serve(args: argparse.Namespace) -> int:
    from rltui.cli.serve import run
    return run(args)


def _check(name: str, args: argparse.Namespace) -> int:
    """Both checks live in rltui.checks; their modules own flags, output and exit codes."""
    import importlib
    return importlib.import_module(f"rltui.checks.{name}.cli").run(args)


def _hosts_only_where_read(args: argparse.Namespace) -> None:
    """The host flags are read by the app and by diagnose; given before another command they
    would be dropped without a word (``rltui --hosts a demo`` watching this node)."""
    from rltui.cli.hosts import HOST_FLAGS, WITH_HOSTS
    if args.command in (None, "diagnose", "serve"):  # serve passes them on to the app
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
        check_numbers(args)
        _hosts_only_where_read(args)
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"rltui: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
