"""The lines around and between stack dumps that say which process comes next. Pure.

A dump rarely stands alone: SGLang's watchdog says ``Pyspy dump for PID N:``, PyTorch's debug
server heads each rank with ``=== Rank N: host:port ===``, ``ray stack`` prints ``Stack dump for
<ps line>``, faulthandler ``Timeout (0:05:00)!`` or ``Fatal Python error: Aborted``, a shell loop
``== rank 3 (pid 12) ==``, a person condensing a paste ``6 processes are in:``. ``marker`` reads
one such line; ``title_info`` reads a process title or command line for its rank and role.
"""

from __future__ import annotations

import re

import msgspec

from rltui.frameworks import process_role

MAX_COUNT = 65_536  # processes one "N processes are in:" line may stand for

_SGLANG = re.compile(r"Pyspy dump for PID (\d{1,10}):")
_RAY_STACK = re.compile(r"Stack dump for (.*)$")
_TORCH_DEBUG = re.compile(r"(?:===|---) Rank (\d{1,7}): ?(.*?) (?:===|---)$")
_FH_START = re.compile(r"Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!$|Fatal Python error: |"
                       r"Windows fatal exception: ")
# A person condensing a dump: "6 processes are in:", "4 in:", "ranks 0-3 are in:".
_COUNT = re.compile(r"(?:(\d{1,5})-(\d{1,5})|(\d{1,5})) (?:(?:processes|procs|ranks|workers) )?"
                    r"(?:are )?in:$")
# Loose separator words: "== pid 123 ==", "PID 123", "rank 3:", "----- rank 3 (pid 12) -----".
SEP_RANK = re.compile(r"(?<![A-Za-z])(?:global[_ ]?)?rank[ _=:#-]{0,3}(\d{1,6})(?!\d)", re.I)
SEP_PID = re.compile(r"(?<![A-Za-z])pid[ _=:#-]{0,3}(\d{1,10})(?!\d)", re.I)
# What a command line says of its rank (the titles are the frameworks' registry's).
_LOCAL_RANK = re.compile(r"--local[_-]rank[= ](\d{1,6})(?!\d)")
_NON_WORD = re.compile(r"[^A-Za-z0-9]+")
# The words a shell loop's separator is made of ("== dumping rank 3 (pid 12) on node 7 =="); a
# line with any other word ("rank 3: loss 0.5", "worker pid 77 exited") is the job's own log.
_SEP_WORDS = frozenset({"rank", "pid", "global", "local", "localrank", "dump", "dumping",
                        "dumped", "stack", "stacks", "of", "for", "process", "proc", "py", "spy",
                        "pyspy", "node", "host", "gpu", "task", "worker", "at", "on", "echo",
                        "thread", "threads"})


class Marker(msgspec.Struct, frozen=True):
    """What a line between dumps says. ``kind``: ``next`` (the next dump is rank/pid),
    ``section`` (everything until the next section is rank ``rank``), ``start`` (a faulthandler
    dump begins; ``fatal`` when the process is dying), ``count`` (the next stack stands for
    ``count`` processes)."""

    kind: str
    rank: int | None = None
    pid: int | None = None
    title: str = ""
    fatal: str = ""
    count: int = 0


def separator_like(s: str) -> bool:
    """A short line made for a reader, of separator words and numbers only: ``== rank 3 (pid
    12) ==``, ``rank 3:``, ``PID 4242``, ``echo`` output; not ``rank 3: loss 0.5``."""
    if len(s) > 100:
        return False
    words = _NON_WORD.sub(" ", s).split()
    return len(words) <= 8 and all(w.isdigit() or w.lower() in _SEP_WORDS for w in words)


def is_separator(s: str) -> bool:
    return separator_like(s) and bool(SEP_RANK.search(s) or SEP_PID.search(s))


def _words_rank(words: tuple[tuple[str, int], ...]) -> int | None:
    """SGLang's log header tags (``TP3``, ``DP1 TP3``): a rank only when TP is the only one."""
    tags = dict(words)
    return tags["TP"] if "TP" in tags and len(tags) == 1 else None


def marker(s: str, words: tuple[tuple[str, int], ...] = ()) -> Marker | None:
    """The marker a stripped line is, or None. ``words``: its log header's tags."""
    m = _SGLANG.search(s)
    if m:
        return Marker("next", rank=_words_rank(words), pid=int(m.group(1)))
    m = _TORCH_DEBUG.match(s)
    if m:
        return Marker("section", rank=int(m.group(1)))
    if s.startswith("Stack dump for "):
        ps = _RAY_STACK.match(s).group(1).split()
        pid = int(ps[1]) if len(ps) > 1 and ps[1].isdigit() and len(ps[1]) < 11 else None
        return Marker("next", pid=pid, title=" ".join(ps[10:]) if len(ps) > 10 else "")
    m = _FH_START.match(s)
    if m:
        fatal = s[:160] if m.group(0).startswith(("Fatal", "Windows")) else ""
        return Marker("start", fatal=fatal)
    if len(s) <= 60:
        m = _COUNT.search(s)
        if m:
            n = (int(m.group(2)) - int(m.group(1)) + 1) if m.group(1) else int(m.group(3))
            return Marker("count", count=max(1, min(n, MAX_COUNT)))
    if not s.startswith(("File ", "Traceback")) and separator_like(s):
        rank, pid = SEP_RANK.search(s), SEP_PID.search(s)
        if rank or pid:
            return Marker("next", rank=int(rank.group(1)) if rank else None,
                          pid=int(pid.group(1)) if pid else None)
    return None


def title_info(command: str) -> tuple[int | None, str]:
    """(rank, role) from a process title or command line, through the frameworks' registry
    (``rltui.frameworks.process_role``): ``sglang::scheduler_TP3`` -> (3, "sglang scheduler
    TP3"), ``VLLM::EngineCore`` -> (None, "vllm EngineCore"); ``python train.py
    --local_rank=3`` (DeepSpeed's and torch.distributed.launch's convention) -> (3, "").

    A parallel index is a rank only when it is the title's only one: two DP replicas or two
    pipeline stages each have a TP0.
    """
    if not command:
        return None, ""
    head = command[:400]
    first = head.split(None, 1)[0] if head.strip() else ""
    found = process_role(first) if first else None
    rank = None
    role = ""
    if found is not None:
        indices = [(k, v) for k, v in (("DP", found.dp), ("PP", found.pp), ("TP", found.tp))
                   if v is not None]
        role = f"{found.framework} {found.role}" + "".join(f" {k}{v}" for k, v in indices)
        if len(indices) == 1:
            rank = indices[0][1]
        elif not indices:
            rank = found.rank
    m = _LOCAL_RANK.search(head)
    if m and rank is None:
        rank = int(m.group(1))
    return rank, role
