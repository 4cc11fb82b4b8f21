"""The host flags (``--hosts/--hostfile/--slurm-job/--ray``) of the app and of diagnose:
checked, turned into a feed for the app (``cluster_bundle``) or for ``rltui diagnose`` across
nodes, headless (rltui.remote.headless runs it).

The feed is one agent per node (rltui.remote.feed.AgentFeed over ssh or srun) or a Ray
cluster's dashboard (rltui.remote.ray). The headless run feeds every reading (already on this
clock) and the nodes' states into a ``ClusterMonitor`` for ``--duration`` seconds, asks every
node for a stack dump at its end (not with ``--no-dump``), then prints the cluster's diagnosis:
the diagnose document of the merged job plus ``nodes`` (docs/diagnose-json.md).

Headless runs make one attempt per host (no reconnect): a host that cannot be reached is
reported lost with ssh's or srun's reason and the others go on. The run lasts ``--duration``,
and then waits, at most ``--connect-timeout`` + SETTLE_S more, for hosts that have not yet
sent a first reading of each of their sources, so a short run still sees every node that
answers. Exit codes: those of diagnose, and 3 when no host answered (nothing diagnosed).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rltui.cli.common import EXIT_FOUND, EXIT_OK, UsageError, invocation, write_incident
from rltui.model import replace

if TYPE_CHECKING:
    from rltui.remote.feed import Feed
    from rltui.remote.hostlist import HostlistError
    from rltui.remote.transports import Launch

# rltui.remote and rltui.cluster are imported by the functions that use them: a diagnose of
# this node asks only ``wanted`` and loads nothing of the multi-node side.


EXIT_NO_HOST = 3  # no host answered: nothing was diagnosed (as the checks' "could not finish")
SETTLE_S = 5.0  # beyond the connect timeout: an agent's start-up and first readings
HOST_FLAGS = ("hosts", "hostfile", "slurm_job", "ray")
WITH_HOSTS = ("ssh_option", "remote_rltui", "connect_timeout")  # mean nothing alone
# diagnose flags that read this node only; across nodes they would silently mean nothing.
LOCAL_ONLY = (("replay", "--replay"), ("demo", "--demo"), ("stacks", "--stacks"),
              ("pid", "--pid"), ("now", "--now"), ("job_config", "--job-config"),
              ("model_config", "--model-config"), ("job", "--job"))


def wanted(args: argparse.Namespace) -> bool:
    """Whether a host flag (or one that goes with them) was given: cmd_diagnose hands the run
    over here, and check_args refuses the second kind alone."""
    return any(getattr(args, name, None) is not None for name in HOST_FLAGS + WITH_HOSTS)


def _usage(message: str) -> Exception:
    return UsageError(message)


def _hostlist_error(flag: str, exc: HostlistError) -> Exception:
    return _usage(f"{flag}: {exc}\n  {exc.pointer().replace(chr(10), chr(10) + '  ')}"
                  if exc.position is not None else f"{flag}: {exc}")


def agent_args(args: argparse.Namespace) -> list[str]:
    """What every agent is given: the job's processes and logs as the node sees them."""
    out: list[str] = []
    if getattr(args, "match", None):
        out += ["--match", args.match]
    for log in getattr(args, "log", None) or []:
        out += ["--log", log]
    return out


def ssh_options(args: argparse.Namespace) -> list[str]:
    """Each --ssh-option is split like a shell would (``--ssh-option "-F cfg"``)."""
    words: list[str] = []
    for value in args.ssh_option or []:
        try:
            words += shlex.split(value)
        except ValueError as exc:
            raise _usage(f"--ssh-option {value!r}: {exc}") from None
    return words


def check_args(args: argparse.Namespace) -> None:
    given = [f"--{n.replace('_', '-')}" for n in HOST_FLAGS if getattr(args, n, None) is not None]
    if not given:
        alone = [f"--{n.replace('_', '-')}" for n in WITH_HOSTS
                 if getattr(args, n, None) is not None]
        raise _usage(f"{', '.join(alone)} needs --hosts, --hostfile or --slurm-job")
    if len(given) > 1:
        raise _usage(f"{' and '.join(given)}: give one of --hosts, --hostfile, --slurm-job, "
                     "--ray")
    for name, flag in LOCAL_ONLY:
        if getattr(args, name, None):
            raise _usage(f"{flag} reads this node only; it is not supported with {given[0]}")
    if (getattr(args, "duration", 0) or 0) < 0:
        raise _usage("--duration must not be negative")
    if args.connect_timeout is not None and args.connect_timeout <= 0:
        raise _usage("--connect-timeout must be positive")
    if args.slurm_job and args.ssh_option:
        raise _usage("--ssh-option applies to --hosts and --hostfile (srun starts the agents "
                     "of --slurm-job)")
    if getattr(args, "ray", None) is not None:
        used = [f"--{n.replace('_', '-')}" for n in ("ssh_option", "remote_rltui", "match", "log")
                if getattr(args, n, None)]
        if used:
            raise _usage(f"{', '.join(used)}: not used with --ray (Ray's dashboard lists the "
                         "workers and dumps them; no agent is started)")
    if getattr(args, "match", None):
        import re
        try:
            re.compile(args.match)
        except re.error as exc:
            raise _usage(f"--match {args.match!r}: not a valid regular expression: {exc}"
                         ) from None


def launches(args: argparse.Namespace) -> list[Launch]:
    """One launch per node, from the host flags; every problem is a usage error."""
    from rltui.remote.hostlist import HostlistError, expand, parse_hostfile, parse_hosts
    from rltui.remote.transports import DEFAULT_CONNECT_TIMEOUT, slurm_launches, ssh_launches
    check_args(args)
    rltui = args.remote_rltui or "rltui"
    extra = agent_args(args)
    if args.slurm_job:
        from rltui.sources.slurm import SlurmError, job_nodelist
        try:
            nodelist = job_nodelist(args.slurm_job)
        except SlurmError as exc:
            raise _usage(f"--slurm-job {args.slurm_job}: {exc}") from None
        try:
            hosts = expand(nodelist)
        except HostlistError as exc:
            raise _hostlist_error(f"--slurm-job {args.slurm_job} (squeue's nodelist)", exc) from None
        return slurm_launches(args.slurm_job, hosts, rltui=rltui, agent_args=extra)
    if args.hostfile:
        path = Path(args.hostfile).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise _usage(f"--hostfile {args.hostfile}: not found") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise _usage(f"--hostfile {args.hostfile}: cannot be read: {exc}") from None
        try:
            targets = parse_hostfile(text, source=args.hostfile)
        except HostlistError as exc:
            raise _hostlist_error("--hostfile", exc) from None
        if not targets:
            raise _usage(f"--hostfile {args.hostfile}: names no host")
    else:
        try:
            targets = parse_hosts(args.hosts)
        except HostlistError as exc:
            raise _hostlist_error("--hosts", exc) from None
        if not targets:
            raise _usage("--hosts: names no host")
    timeout = args.connect_timeout or DEFAULT_CONNECT_TIMEOUT
    return ssh_launches(targets, ssh_options=ssh_options(args), remote_rltui=rltui,
                        connect_timeout=timeout, agent_args=extra)


def make_feed(args: argparse.Namespace, settings, *, reconnect: bool) -> Feed:
    """The feed of the host flags: Ray's dashboard, or one agent per node. ``reconnect``:
    the app's streams come back after a node drops; a headless run tries each node once."""
    from rltui.remote.feed import AgentFeed
    from rltui.remote.transports import DEFAULT_CONNECT_TIMEOUT
    check_args(args)
    if getattr(args, "ray", None) is not None:
        from rltui.remote.ray.feed import RayFeed
        # The periodic rounds stay on in a headless run too: the round at its start and the
        # dump at its end are the two samples that confirm a hang (stuck, not moving).
        try:
            return RayFeed(args.ray, stack_interval=settings.pyspy.interval,
                           timeout=args.connect_timeout or DEFAULT_CONNECT_TIMEOUT)
        except ValueError as exc:
            # Not the address itself: it may hold a password (which is why it is refused).
            from rltui.redact import scrub_text
            raise _usage(f"--ray: {scrub_text(str(exc))}") from None
    return AgentFeed(launches(args), reconnect=reconnect)


def cluster_bundle(args: argparse.Namespace, settings):
    """The app's bundle across nodes: no local source; the feed brings every node's readings
    (the app folds them into a ClusterMonitor) and is closed with the bundle."""
    from rltui.remote.hostlist import compress
    from rltui.sources.bundle import Bundle
    feed = make_feed(args, settings, reconnect=True)
    hosts = feed.hosts()
    return Bundle(mode="live", host=compress(hosts) if hosts else feed.kind, feed=feed,
                  closers=[feed.close])


def dump_wait(settings) -> float:
    """How long the dump at the end may take: the agent dumps ``pyspy.max_concurrent`` ranks
    at a time, each within ``pyspy.timeout``; two batches cover 16 ranks at the default 8."""
    return 2 * settings.pyspy.timeout + SETTLE_S


def run_diagnose(args: argparse.Namespace, settings) -> int:
    """The diagnose command across nodes; returns the exit code."""
    from rltui import report
    from rltui.cluster import ClusterMonitor
    from rltui.remote import cluster_report
    from rltui.remote.headless import HeadlessRun
    from rltui.remote.transports import DEFAULT_CONNECT_TIMEOUT
    feed = make_feed(args, settings, reconnect=False)
    monitor = ClusterMonitor(thresholds=settings.thresholds)
    timeout = args.connect_timeout or DEFAULT_CONNECT_TIMEOUT
    dump_timeout = None if args.no_dump else dump_wait(settings)
    run = HeadlessRun(feed, monitor, settle_s=timeout + SETTLE_S, dump_timeout=dump_timeout)
    try:
        run.run(1.0 if args.duration is None else args.duration)  # diagnose's default: 1 s
        snap, diagnosis = monitor.evaluate(time.time())
    finally:
        run.close()
    if run.notes:
        diagnosis = replace(diagnosis, notes=diagnosis.notes + tuple(run.notes))
    merged = snap.merged
    assert merged is not None
    from rltui import findings
    found = findings.Findings(snapshot=merged, diagnosis=diagnosis, mode="live",
                              stacks=snap.stack_report, cluster=snap)
    if args.json:
        print(json.dumps(findings.document(found), indent=2))
    else:
        sys.stdout.write(findings.text(found))
    if args.report:
        from rltui.incident import LOG_TAIL
        # each host's log tails, named host:path (scrubbed by the report)
        tails = {f"{host}:{path}": lines for host, m in monitor.monitors.items()
                 for path, lines in m.tracker.logbook.tails(LOG_TAIL).items()}
        write_incident(args.report, found, tails,
                       invocation() + cluster_report.stack_commands(snap, feed.run_on))
    if all(n.snapshot is None for n in snap.nodes):
        why = f": {feed.error}" if feed.error else ""
        print(f"rltui: no host answered ({len(snap.nodes)} tried): nothing was diagnosed{why}",
              file=sys.stderr)
        return EXIT_NO_HOST
    return EXIT_FOUND if report.should_fail(diagnosis, args.fail_on) else EXIT_OK
