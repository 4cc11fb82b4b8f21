"""Pure parsers for distributed failures: the NCCL watchdog and torchrun's ChildFailedError report.

NCCL watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), one line each, glog-prefixed and
under torchrun also ``[rankN]:``-prefixed:
    [Rank 118] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2398459,
      OpType=ALLREDUCE, NumelIn=8652160, NumelOut=8652160, Timeout(ms)=1800000) ran for 1800068
      milliseconds before timing out.
and its companion, whose wording changed across releases:
    [PG ID 0 PG GUID 0(default_pg) Rank 118]  failure detected by watchdog at work sequence id:
      2398459 PG status: last enqueued work: 2398578, last completed work: 2398458
    [PG 1 Rank 0] Exception (either an error or timeout) detected by watchdog at work: 7753,
      last enqueued NCCL work: 7755, last completed NCCL work: 7752.
    [PG ID 2 PG GUID 9 Rank 4] Timeout at NCCL work: 610, last enqueued NCCL work: 616, last
      completed NCCL work: 609.
Older releases print WorkNCCL(SeqNum=.., OpType=.., Timeout(ms)=..) without the Numel fields, so
the parenthesis is read as key=value pairs rather than one fixed regex.

torchrun (torch/distributed/elastic/multiprocessing/errors/__init__.py) raises ChildFailedError
whose message is a framed report: a ``=`` border, "<name> FAILED", a ``-`` rule, "Failures:"
with entries or "  <NO_OTHER_FAILURES>", a rule, "Root Cause (first observed failure):", one
entry, and the closing border. An entry is "[idx]:" then indented "key : value" lines for time,
host, rank ("4 (local_rank: 4)"), exitcode ("-9 (pid: 208585)"), error_file and traceback (a
"Signal 9 (SIGKILL) received by PID ..." message, the docs hint, or an indented Python traceback
from the child's error file). A child killed by SIGKILL that left no Python error is flagged
``possible_host_oom``: the kernel's OOM killer sends SIGKILL and leaves no traceback.
"""

from __future__ import annotations

from rltui import units
from rltui.parsing.lazyre import LazyPattern

Fields = list[tuple[str, str | int | float | None]]

# -- NCCL watchdog ---------------------------------------------------------------------------------
WATCHDOG_MARK = "Watchdog caught collective operation timeout"
_WORK = LazyPattern(r"WorkNCCL\(((?:[^()]|\(ms\))*)\)")
# Bounded runs: findall restarts at every character of a long word run, so an unbounded \w+ there
# is quadratic; no field name or value PyTorch prints comes near these bounds.
_PAIR = LazyPattern(r"(?<!\w)(\w{1,40}(?:\(ms\))?)=([^,\s)]{1,200})")
_RAN_FOR = LazyPattern(r"ran for (\d{1,18}) milliseconds")
_RANK_TAG = LazyPattern(r"Rank (\d{1,18})\]")
_PG_ID = LazyPattern(r"\[PG(?: ID)? (\d{1,18}) ")
_COMPANION = (
    # " ?": a hard wrap at "detected\nby watchdog" loses the space when the lines are joined.
    LazyPattern(r"detected ?by watchdog at work sequence id: (\d{1,18}) PG status: last enqueued work: "
               r"(-?\d{1,18}), last completed work: (-?\d{1,18})"),
    LazyPattern(r"detected ?by watchdog at work: (\d{1,18}), last enqueued NCCL work: (-?\d{1,18}), "
               r"last completed NCCL work: (-?\d{1,18})"),
    LazyPattern(r"Timeout at NCCL work: (\d{1,18}), last enqueued NCCL work: (-?\d{1,18}), "
               r"last completed NCCL work: (-?\d{1,18})"),
)


def _int(value: str | None) -> int | None:
    if value is None or len(value.lstrip("-")) > 18:  # no counter PyTorch prints is longer
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _rank_of(text: str, end: int) -> int | None:
    """The rank named in the last "[... Rank N]" tag before ``end`` (the message's own tag)."""
    last = None
    for m in _RANK_TAG.finditer(text, 0, end):
        last = m
    return int(last.group(1)) if last else None


def parse_watchdog(text: str) -> Fields | None:
    """Fields of a watchdog timeout line: rank, pg, seq, op, numel_in, numel_out, timeout_ms, ran_for_ms."""
    at = text.find(WATCHDOG_MARK)
    if at < 0:
        return None
    work = _WORK.search(text, at)
    if work:
        pairs = dict(_PAIR.findall(work.group(1)[:4096]))
    else:  # cut before its ")" (a log cut mid-line): read the pairs that were printed
        open_at = text.find("WorkNCCL(", at)
        pairs = dict(_PAIR.findall(text, open_at, open_at + 1000)) if open_at >= 0 else {}
    ran = _RAN_FOR.search(text, at)
    pg = _PG_ID.search(text, 0, at)
    # The C++ what() of the exception that ends the process repeats the timeout after this prefix
    # (2.2-2.6 "Process group watchdog thread terminated", 2.1 "NCCL watchdog thread terminated").
    terminated = "watchdog thread terminated" in text[:at]
    return [
        ("rank", _rank_of(text, at)),
        ("pg", int(pg.group(1)) if pg else None),
        ("seq", _int(pairs.get("SeqNum"))),
        ("op", pairs.get("OpType")),
        ("numel_in", _int(pairs.get("NumelIn"))),
        ("numel_out", _int(pairs.get("NumelOut"))),
        ("timeout_ms", _int(pairs.get("Timeout(ms)"))),
        ("ran_for_ms", int(ran.group(1)) if ran else None),
        ("terminated", True if terminated else None),
    ]


def is_companion(text: str) -> bool:
    """Cheap test for the watchdog's PG-status line (any release's wording)."""
    return "watchdog at work" in text or "Timeout at NCCL work:" in text


def parse_companion(text: str) -> Fields | None:
    """Fields of the PG-status line: rank, pg, seq, last_enqueued, last_completed."""
    for regex in _COMPANION:
        m = regex.search(text)
        if m:
            pg = _PG_ID.search(text, 0, m.start())
            return [("rank", _rank_of(text, m.start())), ("pg", int(pg.group(1)) if pg else None),
                    ("seq", int(m.group(1))), ("last_enqueued", int(m.group(2))),
                    ("last_completed", int(m.group(3)))]
    return None


def watchdog_summary(fields: dict) -> str:
    rank = fields.get("rank")
    who = f"rank {rank}" if rank is not None else "a rank"
    op = fields.get("op") or "collective"
    seq = fields.get("seq")
    text = f"NCCL watchdog timeout on {who}: {op}"
    if seq is not None:
        text += f" #{seq}"
    ran = fields.get("ran_for_ms")
    timeout = fields.get("timeout_ms")
    if isinstance(ran, int):
        text += f" ran {units.millis(ran)}"
        if isinstance(timeout, int):
            text += f" (timeout {units.millis(timeout)})"
    done = fields.get("last_completed")
    queued = fields.get("last_enqueued")
    if isinstance(done, int) and isinstance(queued, int):
        text += f"; last completed {done}, last enqueued {queued}"
    if fields.get("terminated"):
        text += "; the watchdog took the process down"
    return text


# -- NCCL heartbeat monitor --------------------------------------------------------------------------
# The monitor thread (PyTorch >= 2.2) kills the process when the watchdog itself stops making
# progress (a CUDA/NCCL call blocking it), usually after a timeout it could not finish handling:
#   [PG 0 Rank 1] Heartbeat monitor timed out! Process will be terminated after dumping debug
#     info. workMetaList_.size()=103
#   [F ...] [PG 0 Rank 1] [PG 0 Rank 1] ProcessGroupNCCL's watchdog got stuck for 600 seconds
#     without making progress in monitoring enqueued collectives. ... workMetaList_.size() = 103
# 2.6+ logs only the second, at severity E, with "[PG ID 0 PG GUID 0(default_pg) Rank 2]".
HEARTBEAT_MARK = "Heartbeat monitor timed out"
STUCK_MARK = "watchdog got stuck for"
_STUCK = LazyPattern(r"watchdog got stuck for (\d{1,18}) seconds")
_WORK_ITEMS = LazyPattern(r"workMetaList_\.size\(\) ?= ?(\d{1,18})")
_GLOG_FATAL = LazyPattern(r"(?:^|\]:)\[F(?:\d| )")


def is_heartbeat(text: str) -> bool:
    return HEARTBEAT_MARK in text or STUCK_MARK in text


def parse_heartbeat(text: str) -> Fields | None:
    """Fields of a heartbeat-monitor line: rank, pg, stuck_s, work_items, fatal, form."""
    at = text.find(STUCK_MARK)
    form = "watchdog-stuck"
    if at < 0:
        at = text.find(HEARTBEAT_MARK)
        form = "monitor-timeout"
        if at < 0:
            return None
    pg = _PG_ID.search(text, 0, at)
    stuck = _STUCK.search(text, at)
    items = _WORK_ITEMS.search(text, at)
    return [
        ("rank", _rank_of(text, at)),
        ("pg", int(pg.group(1)) if pg else None),
        ("stuck_s", int(stuck.group(1)) if stuck else None),
        ("work_items", int(items.group(1)) if items else None),
        ("fatal", True if _GLOG_FATAL.search(text, 0, at) else None),
        ("form", form),
    ]


def heartbeat_summary(fields: dict) -> str:
    rank = fields.get("rank")
    who = f"rank {rank}" if rank is not None else "a rank"
    text = f"NCCL watchdog hung on {who}"
    if fields.get("stuck_s") is not None:
        text += f": no progress for {fields['stuck_s']} s"
    else:
        text += ": heartbeat monitor timed out"
    if fields.get("work_items") is not None:
        text += f", {fields['work_items']} collectives queued"
    return text + "; the process is taken down (a CUDA/NCCL call blocks the watchdog)"


# -- torch.distributed.elastic agent -----------------------------------------------------------------
# The agent logs one line per failed worker before raising ChildFailedError:
#   ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0
#     (pid: 333202) of binary: /usr/bin/python3                        (torch <= 2.0, logging)
#   torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: -9) ...   (2.1)
#   E0325 20:57:27.620000 2606 .../elastic/multiprocessing/api.py:869] failed (exitcode: -9) ... (2.2+)
AGENT_MARK = "failed (exitcode:"
_AGENT = LazyPattern(r"failed \(exitcode: (-?\d{1,18})\) local_rank: (\d{1,18}) \(pid: (\d{1,18})\)(?: of binary: ?(\S*))?")


def parse_agent_failure(text: str) -> Fields | None:
    """Fields of the agent's "failed (exitcode: N) local_rank: L (pid: P)" line, or None."""
    m = _AGENT.search(text)
    if not m:
        return None
    exitcode = int(m.group(1))
    signal = signal_name(exitcode)
    return [
        ("local_rank", int(m.group(2))), ("exitcode", exitcode), ("pid", int(m.group(3))),
        ("signal", signal), ("binary", (m.group(4) or None) and m.group(4)[:300]),
        ("possible_host_oom", signal == "SIGKILL" or exitcode == 137),
    ]


# -- torchrun ChildFailedError ---------------------------------------------------------------------
CHILD_MARK = "ChildFailedError"
_ENTRY = LazyPattern(r"^\[(\d{1,18})\]:\s*$")
_KEY = LazyPattern(r"^\s+(time|host|rank|exitcode|error_file|traceback)\s*:\s?(.*)$")
_RANK_VALUE = LazyPattern(r"(-?\d{1,18})(?!\d)(?: \(local_rank: (-?\d{1,18})\))?")
_EXIT_VALUE = LazyPattern(r"(-?\d{1,18})(?!\d)(?: \(pid: (\d{1,18})\))?")
_SIGNAL_MSG = LazyPattern(r"Signal (\d{1,18}) \((\w+)\) received by PID (\d{1,18})")
_PY_EXC = LazyPattern(r"^\s*([A-Za-z_][\w.]*(?:\([\w.]*\))?): (.*)$")
_CHILD_TIME = LazyPattern(r"(\d{4})-(\d\d)-(\d\d)[_ T](\d\d):(\d\d):(\d\d)")
# Linux numbering: the report comes from the training node, not from where rltui runs.
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT",
            7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2",
            13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}


HOST_OOM_HINT = "possible host OOM: check dmesg / the kernel's OOM killer"


def signal_name(exitcode: int | None) -> str | None:
    """Name of the signal a negative exit code stands for (-9 -> SIGKILL)."""
    if exitcode is None or exitcode >= 0:
        return None
    return _SIGNALS.get(-exitcode, f"signal {-exitcode}")


class ChildReport:
    """Incremental reader of one ChildFailedError report (fed line by line, bounded)."""

    __slots__ = ("_in_tb", "current", "done", "entries", "name", "section")

    def __init__(self) -> None:
        self.name: str | None = None
        self.section = ""  # "" before "Failures:", then "other", then "root"
        self.entries: list[tuple[str, dict]] = []  # (section, {key: value})
        self.current: dict | None = None
        self.done = False
        self._in_tb = False

    def feed(self, line: str) -> bool:
        """Take one line of the report; False when the line cannot belong to it."""
        stripped = line.strip()
        if stripped.startswith("=" * 8):
            if self.section == "root" and self.current is not None:
                self.done = True  # the closing border
            return True
        if not stripped or stripped.startswith("-" * 8):
            return True
        if stripped == "Failures:":
            self.section = "other"
            return True
        if stripped.startswith("Root Cause"):
            self.section = "root"
            return True
        if stripped == "<NO_OTHER_FAILURES>":
            return True
        m = _ENTRY.match(line)
        if m:
            self.current = {}
            self._in_tb = False
            if len(self.entries) < 64:  # a 1000-rank job lists every failure; keep the first
                self.entries.append((self.section, self.current))
            return True
        if self.section == "" and stripped.endswith(" FAILED"):
            self.name = stripped[: -len(" FAILED")][:200]
            return True
        if self.current is None:
            return False
        m = _KEY.match(line)
        if m:
            key, value = m.group(1), m.group(2).strip()
            self.current[key] = value[:500]
            self._in_tb = key == "traceback"
            return True
        if line[:1] in (" ", "\t") and self._in_tb:
            # A child's Python traceback, indented by two more spaces: keep its exception line.
            exc = _PY_EXC.match(line)
            if exc and not stripped.startswith("File "):
                self.current["error"] = f"{exc.group(1)}: {exc.group(2)}"[:500]
            return True
        return line[:1] in (" ", "\t")

    def fields(self) -> Fields:
        root = next((e for s, e in self.entries if s == "root"), None)
        if root is None and self.entries:
            root = self.entries[-1][1]
        root = root or {}
        rank = _RANK_VALUE.match(root.get("rank", ""))
        code = _EXIT_VALUE.match(root.get("exitcode", ""))
        exitcode = _int(code.group(1)) if code else None
        message = root.get("traceback", "")
        sig = _SIGNAL_MSG.search(message)
        signal = sig.group(2) if sig else signal_name(exitcode)
        others = [e for s, e in self.entries if s == "other"]
        other_ranks = []
        for entry in others:
            m = _RANK_VALUE.match(entry.get("rank", ""))
            if m:
                other_ranks.append(m.group(1))
        error = root.get("error")
        if error is None and message and not sig and "To enable traceback" not in message \
                and not message.startswith("Traceback"):
            error = message
        # SIGKILL (or a shell's 137) and no Python error from the child: nothing in the process
        # raised; the kernel's OOM killer (or the scheduler) is the usual sender.
        host_oom = (signal == "SIGKILL" or exitcode == 137) and not error
        return [
            ("name", self.name),
            ("rank", _int(rank.group(1)) if rank else None),
            ("local_rank", _int(rank.group(2)) if rank and rank.group(2) else None),
            ("exitcode", exitcode),
            ("pid", _int(code.group(2)) if code and code.group(2) else None),
            ("signal", signal),
            ("host", root.get("host")),
            ("failure_time", root.get("time")),
            ("error_file", root.get("error_file")),
            ("error", error),
            ("other_ranks", ",".join(other_ranks)),
            ("failures", len(others) + (1 if root else 0)),
            ("possible_host_oom", host_oom),
            ("complete", self.done),
        ]


def child_time(value: str | None) -> tuple[int, ...] | None:
    """(Y, M, D, h, m, s) from the report's ISO time "2026-05-21_18:37:16"."""
    m = _CHILD_TIME.search(value or "")
    return tuple(int(g) for g in m.groups()) if m else None


def child_summary(fields: dict) -> str:
    rank = fields.get("rank")
    who = f"rank {rank}" if rank is not None else "a worker"
    if fields.get("local_rank") is not None:
        who = (f"{who} (local_rank {fields['local_rank']})" if rank is not None
               else f"local_rank {fields['local_rank']}")
    if fields.get("host"):
        who += f" on {fields['host']}"
    signal = fields.get("signal")
    exitcode = fields.get("exitcode")
    if signal:
        what = f"killed by {signal}"
    elif exitcode is not None:
        what = f"exited with code {exitcode}"
    else:
        what = "failed"
    text = f"torchrun: {who} {what}"
    if fields.get("pid") is not None:
        text += f" (pid {fields['pid']})"
    if fields.get("error"):
        text += f": {fields['error']}"
    if fields.get("possible_host_oom"):
        text += f"; {HOST_OOM_HINT}"
    others = fields.get("other_ranks")
    if others:
        text += f"; also failed: rank {others}" if "," not in others else f"; also failed: ranks {others}"
    return text[:300]
