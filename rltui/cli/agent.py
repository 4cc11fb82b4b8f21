"""``rltui agent``: flags, start-up and exit codes (docs/agent.md).

Module-level imports are standard library only: ``rltui --help`` imports this module.

stdout carries protocol lines and nothing else: the agent keeps the real stdout for itself and
points descriptor 1 at stderr, so a stray print or a library's warning cannot break the stream.

Exit codes: 0 after a ``bye`` (stop request, stdin closed, SIGTERM/SIGINT/SIGHUP, --duration)
and when stdout was closed under it; 2 for a usage or config error, said on stderr and, for the
rltui reading stdout, as an ``error`` line and a ``bye``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator

EXIT_OK, EXIT_USAGE = 0, 2
DEFAULT_HEARTBEAT = 2.0  # = protocol.DEFAULT_HEARTBEAT (not imported: --help stays light)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from rltui.cli.common import add_config_option, add_source_options
    p.add_argument("--host", metavar="NAME",
                   help="the host name every message carries (default: this machine's name)")
    p.add_argument("--heartbeat", type=float, default=DEFAULT_HEARTBEAT, metavar="S",
                   help="send a heartbeat every S seconds, so that a silent node can be told "
                        "from a dead one (default 2)")
    p.add_argument("--duration", type=float, metavar="S",
                   help="stop after S seconds (default: run until a stop request, stdin "
                        "closing, or SIGTERM)")
    p.add_argument("--no-stacks", action="store_true",
                   help="no periodic py-spy rounds (dump requests still work)")
    add_source_options(p)
    add_config_option(p)


def run(args: argparse.Namespace) -> int:
    from rltui.cli import common as main_cli
    host = args.host or socket.gethostname()
    out_fd = _take_stdout()
    broken = False
    try:
        try:
            bundle, periodic = _bundle(args, main_cli)
        except (main_cli.UsageError, ValueError, OSError) as exc:
            return _refuse(out_fd, host, str(exc))
        from rltui.agent.loop import Agent
        bundle = bundle.on_host(host)
        try:
            agent = Agent(bundle, host, out_fd=out_fd, in_fd=sys.stdin.fileno(),
                          heartbeat=args.heartbeat, duration=args.duration,
                          periodic_stacks=periodic)
            with _signals(agent):
                agent.run()
            broken = agent.out.broken
        finally:
            bundle.close()
        return EXIT_OK
    finally:
        _give_back_stdout(out_fd, broken)


def _bundle(args: argparse.Namespace, main_cli):
    """The live bundle the app would build, and whether periodic stack rounds are on."""
    if args.heartbeat <= 0:
        raise main_cli.UsageError("--heartbeat must be positive")
    if args.duration is not None and args.duration <= 0:
        raise main_cli.UsageError("--duration must be positive")
    settings, _ = main_cli.load_settings(args)
    match, pids = main_cli.source_args(args)
    if args.no_stacks:
        from rltui.model import replace
        settings = replace(settings, pyspy=replace(settings.pyspy, interval=0))
    from rltui.sources.bundle import live_bundle
    bundle = live_bundle(settings, match, pids, main_cli.log_globs(args))
    return bundle, settings.pyspy.interval > 0


def _refuse(out_fd: int, host: str, message: str) -> int:
    """A start that failed: said to the person (stderr) and to the reader (stdout)."""
    import time

    from rltui.agent.protocol import Bye, ErrorMessage, encode
    print(f"rltui: error: {message}", file=sys.stderr)
    try:
        os.write(out_fd, encode(ErrorMessage(host, time.time(), message))
                 + encode(Bye(host, time.time(), "could not start")))
    except OSError:
        pass
    return EXIT_USAGE


def _take_stdout() -> int:
    """The real stdout for protocol lines; descriptor 1 then goes to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    try:
        os.dup2(2, 1)
    except OSError:  # no stderr: stray output goes nowhere rather than into the stream
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    return fd


def _give_back_stdout(fd: int, broken: bool) -> None:
    # After a broken pipe, descriptor 1 stays on stderr: the interpreter's last flush of
    # sys.stdout must not hit the closed pipe and print a BrokenPipeError traceback.
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    if not broken:
        with contextlib.suppress(OSError):
            os.dup2(fd, 1)
    os.close(fd)


@contextlib.contextmanager
def _signals(agent) -> Iterator[None]:
    """SIGTERM, SIGINT and SIGHUP end the agent with a bye. The handler only notes the signal
    and wakes the main thread: it runs between two bytecodes of that thread, which may hold a
    lock at that moment."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame) -> None:
        agent.signalled = signal.Signals(signum).name
        agent.wake()

    old = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
