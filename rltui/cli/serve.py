"""``rltui serve``: the app in a browser, for a teammate at the other end of an ssh tunnel.

Each browser session runs the app as its own process (``python -m rltui ... --read-only``, the
command built here from serve's options) through Textualize's textual-serve; rltui.cli.serve_http
puts every address behind a random token. Bound to 127.0.0.1 unless --host says otherwise. The
sessions are read-only unless --allow-actions: the app itself hides the keys that change
anything (rltui.ui.drivers.READ_ONLY_OFF), so nothing here patches the app.

The command line is checked before the server starts (the same parser and checks as the app's
own), so a mistake is an error here rather than a session that ends at once in the browser.
"""

from __future__ import annotations

import argparse
import shlex
import socket
import sys

from rltui.cli.common import (
    EXIT_OK,
    UsageError,
    add_config_option,
    add_host_options,
    add_oom_options,
    add_source_options,
    load_scenario,
    load_settings,
)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
LOOPBACK = ("127.0.0.1", "localhost", "::1")
# The app's options serve passes on to each session as the app's own top-level options: dest
# -> flag. A flag added to the app is passed on by one line here.
APP_OPTIONS = {
    "config": "--config", "match": "--match", "pid": "--pid", "job": "--job", "log": "--log",
    "flight_recorder": "--flight-recorder", "torch_debug": "--torch-debug",
    "hosts": "--hosts", "hostfile": "--hostfile", "slurm_job": "--slurm-job", "ray": "--ray",
    "ssh_option": "--ssh-option", "remote_rltui": "--remote-rltui",
    "connect_timeout": "--connect-timeout",
    "job_config": "--job-config", "model_config": "--model-config",
}
INSTALL = "rltui serve needs textual-serve: pip install 'rltui[serve]' (or textual-serve)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("the server")
    g.add_argument("--host", default=DEFAULT_HOST,
                   help=f"address to listen on (default {DEFAULT_HOST}: reached through an ssh "
                        "tunnel; any other address lets the network reach the token's page)")
    g.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"port (default {DEFAULT_PORT}; 0: one the system picks)")
    g.add_argument("--allow-actions", action="store_true",
                   help="let the browser's sessions dump stacks (d), write incident reports "
                        "(i), run the checks (c, w) and save the theme (t); off by default")
    a = p.add_argument_group("what each session shows (default: this node's job, as `rltui`)")
    a.add_argument("--replay", metavar="DIR", help="a recorded scenario folder (rltui replay)")
    a.add_argument("--speed", type=float, default=1.0,
                   help="replay speed (with --replay; default 1)")
    a.add_argument("--demo", metavar="SCENARIO",
                   help="a demo job, one per browser session (rltui demo --scenario)")
    a.add_argument("--ranks", type=int, default=4, help="demo ranks (with --demo; default 4)")
    add_config_option(p)
    add_source_options(p)
    add_host_options(p)
    add_oom_options(p)


def app_argv(args: argparse.Namespace) -> list[str]:
    """The app's command line for one session, without the interpreter: rltui's top-level
    options, then the mode. ``--flag=value`` keeps a value that starts with '-' a value."""
    argv: list[str] = []
    for dest, flag in APP_OPTIONS.items():
        value = getattr(args, dest, None)
        for one in value if isinstance(value, list) else [value]:
            if one is not None:
                argv.append(f"{flag}={one}")
    if not args.allow_actions:
        argv.append("--read-only")
    if args.replay is not None:
        argv += ["replay", args.replay, f"--speed={args.speed:g}"]
    elif args.demo is not None:
        argv += ["demo", f"--scenario={args.demo}", f"--ranks={args.ranks}"]
    return argv


def check(args: argparse.Namespace, argv: list[str]) -> None:
    """What would end a session at once, said here: the app's own parser and checks on the
    command line built, the config file, the recording, the demo's scenario."""
    if args.replay is not None and args.demo is not None:
        raise UsageError("--replay and --demo: one or the other")
    if args.replay is None and args.speed != 1.0:
        raise UsageError("--speed: only with --replay")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a port (0 to 65535)")
    from rltui.cli import _hosts_only_where_read, build_parser, check_numbers
    parsed = build_parser().parse_args(argv)  # exits 2 with argparse's message, as main would
    check_numbers(parsed)
    _hosts_only_where_read(parsed)
    load_settings(parsed)
    if args.replay is not None:
        load_scenario(args.replay)
    if args.demo is not None:
        from rltui.demo.scenarios import SCENARIOS
        if args.demo not in SCENARIOS:
            raise UsageError(f"--demo {args.demo}: no such scenario (rltui demo --list)")
        if not 2 <= args.ranks <= 64:
            raise UsageError("--ranks: 2 to 64")


def run(args: argparse.Namespace) -> int:
    argv = app_argv(args)
    check(args, argv)
    try:
        from rltui.cli import serve_http
    except ImportError as exc:
        raise UsageError(f"{INSTALL} ({exc})") from None
    import asyncio
    import secrets
    token = secrets.token_urlsafe(24)
    command = shlex.join([sys.executable, "-m", "rltui", *argv])
    shown = shlex.join(["rltui", *argv])
    if args.host not in LOOPBACK:
        print(f"rltui: warning: --host {args.host}: anyone who can reach this address and "
              "port and has the URL gets the app; prefer the default and an ssh tunnel",
              file=sys.stderr)

    def ready(port: int) -> None:
        print(banner(args.host, port, token, shown, args.allow_actions), flush=True)

    try:
        asyncio.run(serve_http.serve(command, args.host, args.port, token,
                                     f"rltui on {socket.gethostname()}", ready))
    except OSError as exc:  # the port in use, an address not of this machine
        raise UsageError(f"cannot listen on {args.host} port {args.port}: "
                         f"{exc.strerror or exc}") from None
    return EXIT_OK


def banner(host: str, port: int, token: str, shown: str, allow_actions: bool) -> str:
    """What serve prints once listening: the URL with its token first (like Jupyter), then
    how to reach it from another machine."""
    where = socket.gethostname()
    url_host = where if host in ("0.0.0.0", "::", "") else host
    url_host = f"[{url_host}]" if ":" in url_host else url_host
    rows = [f"rltui serve: open http://{url_host}:{port}/{token}/",
            f"  each browser session runs: {shown}"]
    if allow_actions:
        rows.append("  actions allowed: d (dump), i (report), c and w (checks), t (theme saved)")
    else:
        rows.append("  read-only: d (dump), i (report), c and w (checks) are off, the theme is "
                    "not saved (--allow-actions turns them on)")
    if host in LOOPBACK:
        rows.append(f"  from your machine: ssh -L {port}:127.0.0.1:{port} {where}, then open "
                    "the URL above")
    rows.append("  Ctrl+C stops the server and every session")
    return "\n".join(rows)
