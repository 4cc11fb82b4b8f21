"""The dashboard's worker tracebacks -> the same ``StackPoll`` rounds as rltui's own py-spy
source, so the hang rules read Ray's dumps unchanged. Pure.

``GET /worker/traceback?node_id=N&ip=IP&pid=P&native=0&subprocesses=0`` makes the dashboard
agent on node N run ``py-spy dump -p P`` and answers with py-spy's text (200) or with its
failure (500: the command, then py-spy's stderr). The text goes through rltui's py-spy parser
(``rltui.parsing.pyspy.parse_text``). Ray's py-spy runs without ``--nonblocking``: each worker
pauses for the moment of its dump, periodic rounds included.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Sequence
from urllib.parse import quote_plus

from rltui.model import (
    DENIED,
    ERROR,
    OK,
    TIMEOUT,
    UNAVAILABLE,
    ProcessDump,
    ProcInfo,
    Reading,
    StackPoll,
    replace,
)
from rltui.parsing.pyspy import DumpParseError, parse_text
from rltui.redact import scrub_text

EXITED = "exited"  # as rltui.sources.stacks.EXITED: the process was gone when dumped
TRACEBACK_PATH = "/worker/traceback"
MAX_MESSAGE = 300

PROFILING_OFF = "profiling-off"  # a dump's status while the dashboard refuses tracebacks
PROFILING_REMEDY = ("Ray's dashboard serves stack traces only when the head was started with "
                    "RAY_DASHBOARD_ENABLE_PROFILING=1 in its environment "
                    "(`RAY_DASHBOARD_ENABLE_PROFILING=1 ray start --head ...`; on KubeRay, an "
                    "env entry of the head's container).")
OLD_RAY_REMEDY = "Stack traces through the dashboard need Ray 2.x with ray[default] on the head."
PTRACE_REMEDY = ("Ray's dashboard agent runs py-spy on each node as the user that started Ray: "
                 "it needs ptrace rights on the workers there (a container needs the SYS_PTRACE "
                 "capability; KubeRay: securityContext.capabilities.add: [SYS_PTRACE]).")
TIMEOUT_REMEDY = ("A worker with many threads, or a busy node or dashboard, takes longer: raise "
                  "the timeout of each request with --connect-timeout S.")
ERROR_REMEDY = "The dashboard agent's log on that node (dashboard_agent.log) says more."

_GONE = re.compile(r"process is running|no such process|os error 2|os error 3|"
                   r"failed to find python version", re.IGNORECASE)
_DENIED = re.compile(r"permission denied|operation not permitted|ptrace", re.IGNORECASE)
_CAUSE = re.compile(r"^\s*\d+: (.+)$")
_WORDS = {DENIED: "denied", TIMEOUT: "timed out", ERROR: "failed",
          EXITED: "exited before the dump", PROFILING_OFF: "refused (profiling is off)"}


def traceback_params(node_id: str, ip: str, pid: int | str) -> list[tuple[str, str]]:
    """The query of one worker's traceback. ``node_id`` picks the node on Ray 2.x dashboards
    that know it; older ones look the node up by ``ip`` (and take any node without it).
    ``native`` and ``subprocesses`` are said, not left to the head's defaults
    (RAY_DASHBOARD_PROFILING_*_DEFAULT), so that a round is what its ``StackPoll`` says."""
    params = [("node_id", node_id)]
    if ip:
        params.append(("ip", ip))
    return params + [("pid", str(pid)), ("native", "0"), ("subprocesses", "0")]


def traceback_command(base_url: str, node_id: str, ip: str) -> str:
    """The ``StackPoll.command`` of a node's round: a shell line asking the dashboard for one
    worker's traceback as rltui does, with a ``{pid}`` placeholder. The incident report pastes
    ``command.format(pid=...)`` into its list of commands, so the line holds no other brace
    and is quoted for a POSIX shell; rltui sends no credentials, so it holds none (and what
    looks like one in the address is hidden)."""
    hole = "\0"  # cannot survive in the URL: the address and the query are percent-encoded
    query = "&".join(f"{quote_plus(k)}={hole if k == 'pid' else quote_plus(v)}"
                     for k, v in traceback_params(node_id, ip, 0))
    url = f"{scrub_text(base_url)}{TRACEBACK_PATH}?{query}"
    # -g: no globbing of [..] (an IPv6 host) or {..}; -sS: no progress bar, errors still said
    line = "curl -sSg " + shlex.quote(url)
    return line.replace("{", "{{").replace("}", "}}").replace(hole, "{pid}")


def dump_of(target: ProcInfo, status: int, text: str, *, stamp: float,
            duration: float) -> ProcessDump:
    """One worker's dump from the dashboard's answer (HTTP ``status``, body ``text``)."""
    def done(state: str, message: str = "", base: ProcessDump | None = None) -> ProcessDump:
        return replace(base or ProcessDump(pid=target.pid), pid=target.pid, rank=target.rank,
                       source="live", timestamp=stamp, duration=duration, status=state,
                       message=message[:MAX_MESSAGE])

    if status == 200:
        # The whole body came (HTTP says how long it is): a missing final newline is not a
        # cut-off dump, which is what the parser would take it for.
        body = text if text.endswith("\n") else text + "\n"
        try:
            found = parse_text(body, "Ray dashboard")
        except DumpParseError as exc:
            return done(ERROR, f"not a py-spy dump: {exc}")
        dump = next((d for d in found if d.pid == target.pid), found[0])
        return done(dump.status, dump.message, dump)
    if status == 403:
        return done(PROFILING_OFF, "the dashboard refuses stack traces: profiling is disabled "
                                   "on the head (RAY_DASHBOARD_ENABLE_PROFILING)")
    if status == 404:
        return done(ERROR, "this Ray's dashboard has no /worker/traceback")
    said = failure_summary(text)
    if _GONE.search(said):
        return done(EXITED, f"the worker was gone: {said}")
    if _DENIED.search(said):
        return done(DENIED, f"ptrace refused on the node: {said}")
    return done(ERROR, f"HTTP {status}: {said}" if said else f"HTTP {status} without a reason")


def failed_dump(target: ProcInfo, status: str, message: str, *, stamp: float,
                duration: float | None = None) -> ProcessDump:
    """A worker that could not be asked (no answer in time, dashboard unreachable)."""
    return ProcessDump(pid=target.pid, rank=target.rank, source="live", timestamp=stamp,
                       duration=duration, status=status, message=message[:MAX_MESSAGE])


def failure_summary(text: str) -> str:
    """The agent's failure in one line: py-spy's ``Error:`` line and its innermost cause.

    The agent answers ``Failed to execute `[...]`.`` then ``=== stderr ===`` with py-spy's
    own error (``Error: ...``, ``Caused by:``, numbered causes, a backtrace) and
    ``=== stdout ===``.
    """
    lines = [line.strip() for line in text.splitlines()]
    if "Stack backtrace:" in lines:
        lines = lines[:lines.index("Stack backtrace:")]
    errors = [line for line in lines if line.startswith("Error:")]
    causes = [m.group(1) for line in lines if (m := _CAUSE.match(line))]
    if errors:
        head = errors[0].removeprefix("Error:").strip()
        return f"{head} ({causes[-1]})" if causes else head
    said = [line for line in lines if line and not line.startswith("===")]
    return " ".join(said)[:MAX_MESSAGE] if said else ""


def round_reading(dumps: Sequence[ProcessDump], *, started: float, finished: float,
                  trigger: str, command: str, note: str = "") -> Reading:
    """One node's round as a "stacks" reading, summed up as the py-spy source sums its own:
    ``ok`` when some worker was dumped; one state with one remedy when none could be.
    ``command``: the node's ``traceback_command``."""
    def out(status: str, payload: StackPoll | None, message: str, remedy: str) -> Reading:
        if note:
            message = f"{message}; {note}" if message else note
        return Reading(source="stacks", timestamp=finished, status=status, payload=payload,
                       message=message, remedy=remedy)

    # The dashboard's refusal is one state of the whole cluster, not an error per worker.
    shown = tuple(replace(d, status=ERROR) if d.status == PROFILING_OFF else d for d in dumps)
    poll = StackPoll(dumps=shown, started=started, finished=finished, trigger=trigger,
                     nonblocking=False, native=False, command=command)
    if not dumps:
        return out(OK, poll, "no Ray workers to dump on this node", "")
    counts = Counter(d.status for d in dumps)
    live = [d for d in dumps if d.status != EXITED]
    trouble = ", ".join(f"{n} {_WORDS.get(s, s)}" for s, n in counts.items() if s != OK)
    remedy = (PROFILING_REMEDY if counts[PROFILING_OFF] else PTRACE_REMEDY if counts[DENIED]
              else TIMEOUT_REMEDY if counts[TIMEOUT] else ERROR_REMEDY if counts[ERROR] else "")
    if counts[OK] or not live:
        message = f"dumped {counts[OK]} of {len(dumps)} workers; {trouble}" if trouble else ""
        return out(OK, poll, message, remedy)
    if all(d.status == PROFILING_OFF for d in live):
        return out(UNAVAILABLE, None, "Ray's dashboard refuses stack traces: profiling is "
                                      "disabled on the head", PROFILING_REMEDY)
    if all(d.status == DENIED for d in live):
        return out(DENIED, None, f"ptrace refused for all {len(live)} workers on the node",
                   PTRACE_REMEDY)
    status = TIMEOUT if all(d.status == TIMEOUT for d in live) else ERROR
    first = next(d for d in live if d.status != DENIED)
    return out(status, None, f"no worker could be dumped ({trouble}); pid {first.pid}: "
                             f"{first.message}", remedy)


def dumped(reading: Reading) -> tuple[bool, str]:
    """A round's outcome for ``dump_all``'s futures: (ok, message)."""
    if reading.status != OK or reading.payload is None:
        return False, reading.message or reading.status
    dumps = reading.payload.dumps
    ok = sum(d.status == OK for d in dumps)
    return True, reading.message or f"dumped {ok} of {len(dumps)} workers"

