"""STAT-style merge of py-spy stacks across ranks (pure: no I/O).

Each rank contributes one thread (its thread of interest); its frames, root first, become a path
in a prefix tree whose edges carry the set of ranks that went that way. Ranks with the same path
form an equivalence class. A hang is about how ranks diverge, so the tree and the classes are what
the classification (``rltui.diagnosis.stacks``) reads.

Frame identity is (function, file) with site-packages prefixes trimmed: the same code seen from
two virtualenvs or two nodes must group together, and a rank spinning in a loop changes its line
on every sample without changing where it is. Lines are kept for display, and for telling two
call sites of one function apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Iterable, Sequence

from rltui.model import OK, Frame, ProcessDump, ThreadStack
from rltui.parsing.pyspy import trim_path

# -- recognising collectives and waits -------------------------------------------------------------
# Matched on the last dotted part of the name: py-spy 0.4 on Python 3.11 prints methods as
# ``Class.method``, older ones print ``method``.

# Unambiguous communication calls: torch.distributed and the wrappers that keep its names
# (DeepSpeed's deepspeed.comm, Megatron's helpers call through to these).
PRIMITIVES = frozenset({
    "all_reduce", "all_reduce_coalesced", "all_reduce_multigpu", "inference_all_reduce",
    "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_coalesced",
    "all_gather_object", "all_gather_multigpu",
    "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "reduce_scatter_fn",
    "all_to_all", "all_to_all_single",
    "broadcast", "broadcast_object_list", "broadcast_multigpu",
    "gather_object", "scatter_object_list",
    "barrier", "monitored_barrier",
    "isend", "irecv", "batch_isend_irecv",
    "send_object_list", "recv_object_list",
    "destroy_process_group",
})
# Names that are communication only inside a distributed/RPC package: ``wait`` is also
# threading.Condition.wait, ``get`` is dict.get's namesake, ``send`` a generator method.
AMBIGUOUS = frozenset({"send", "recv", "wait", "reduce", "gather", "scatter", "get", "get_objects",
                       "synchronize", "_wait", "wait_tensor"})
_COMM_FILE_HINTS = ("distributed", "c10d", "deepspeed", "megatron", "/comm", "comm.py", "dist.py",
                    "nccl", "ray/", "pipelin", "p2p", "parallel")
# Framework-level wrappers around point-to-point traffic: pipeline schedules (torch pipelining,
# DeepSpeed pipe, Megatron p2p_communication). They name the place, the primitive names the op.
WRAPPERS = frozenset({
    "_shape_inference", "recv_forward", "recv_backward", "send_forward", "send_backward",
    "send_forward_recv_backward", "send_backward_recv_forward", "send_forward_recv_forward",
    "send_backward_recv_backward", "_communicate", "_p2p_ops", "_batched_p2p_ops",
    "_exec_recv_activations", "_exec_recv_grads", "_exec_send_activations", "_exec_send_grads",
    "_reduce", "_gather_along_first_dim", "_reduce_scatter_along_first_dim",
})
# Cleanup context: a wait reached from one of these is teardown, not the training loop.
TEARDOWN = frozenset({"destroy_process_group", "__exit__", "close", "destroy", "shutdown",
                      "cleanup", "teardown", "finalize", "__del__", "_run_exitfuncs", "_exitfunc",
                      "_shutdown", "__aexit__", "terminate"})

NONE, WRAPPER, PRIMITIVE = 0, 1, 2  # tiers of a recognised frame
_KEY = attrgetter("name", "filename", "line", "native")  # a frame's identity, lines included


def short_name(name: str) -> str:
    """``Trainer.train_step`` -> ``train_step`` (what collective names are matched on)."""
    return name.rpartition(".")[2]


def comm_tier(frame: Frame) -> int:
    """How surely this frame is a collective, point-to-point or distributed wait."""
    if frame.native:
        # --native frames: NCCL/gloo/c10d internals show where the C++ side waits.
        low = frame.name.lower()
        return PRIMITIVE if ("nccl" in low or "c10d::" in low or "gloo::" in low) else NONE
    name = short_name(frame.name)
    if name in PRIMITIVES:
        return PRIMITIVE
    if name in WRAPPERS:
        return WRAPPER
    if name in AMBIGUOUS:
        path = frame.filename.replace("\\", "/").lower()
        if any(h in path for h in _COMM_FILE_HINTS):
            return PRIMITIVE
    return NONE


def choose_thread(threads: Sequence[ThreadStack], tiers=None) -> ThreadStack | None:
    """The thread of interest: the one inside a collective or distributed call, else MainThread.

    ``tiers`` (frame -> tier) lets the merge reuse its cache; MainThread wins ties because the
    training loop runs there.
    """
    if not threads:
        return None
    if len(threads) == 1:
        return threads[0]
    tier = tiers or comm_tier
    main = next((t for t in threads if t.name == "MainThread"), None)
    if main is not None and any(tier(f) for f in main.frames):
        return main
    for t in threads:
        if any(tier(f) for f in t.frames):
            return t
    if main is not None:
        return main
    return next((t for t in threads if t.frames), threads[0])


# -- interning -------------------------------------------------------------------------------------

class Interner:
    """Small integer ids for frames, shared by every sample of one classification.

    ``kid`` identifies (function, file, line), ``fid`` (function, file). Paths become tuples of
    ints, cheap to hash and compare; one Interner across samples makes ids comparable in time.
    """

    __slots__ = ("_kids", "_fids", "fid_of", "frame_of", "tier_of", "fname", "_trim", "_comm")

    def __init__(self) -> None:
        self._kids: dict[tuple[str, str, int, bool], int] = {}
        self._fids: dict[tuple[str, str, bool], int] = {}
        self.fid_of: list[int] = []  # kid -> fid
        self.frame_of: list[Frame] = []  # kid -> first frame seen (for display)
        self.tier_of: list[int] = []  # fid -> comm tier
        self.fname: list[str] = []  # fid -> short function name
        self._trim: dict[str, str] = {}
        self._comm: dict[tuple[int, ...], bool] = {}

    def kid(self, f: Frame) -> int:
        key = (f.name, f.filename, f.line, f.native)
        k = self._kids.get(key)
        if k is None:
            fn = self._trim.get(f.filename)
            if fn is None:
                fn = self._trim[f.filename] = trim_path(f.filename)
            fkey = (f.name, fn, f.native)
            fid = self._fids.get(fkey)
            if fid is None:
                fid = self._fids[fkey] = len(self.tier_of)
                self.tier_of.append(comm_tier(f))
                self.fname.append(short_name(f.name))
            k = self._kids[key] = len(self.fid_of)
            self.fid_of.append(fid)
            self.frame_of.append(f)
        return k

    def frame_tier(self, f: Frame) -> int:
        return self.tier_of[self.fid_of[self.kid(f)]]

    def path(self, frames: Sequence[Frame]) -> tuple[int, ...]:
        """Kid path, root first. The lookups run in C (attrgetter, map): a 4,096-rank merge
        converts ~250k frames, and a Python-level loop per frame would dominate it."""
        ids = list(map(self._kids.get, map(_KEY, reversed(frames))))
        if None in ids:
            ids = [self.kid(f) for f in reversed(frames)]
        return tuple(ids)

    def has_comm(self, path: tuple[int, ...]) -> bool:
        # Memoised per path: ranks of one class repeat the same path (a C-level hash).
        hit = self._comm.get(path)
        if hit is None:
            tier, fid = self.tier_of, self.fid_of
            hit = self._comm[path] = any(tier[fid[k]] for k in path)
        return hit


# -- the merged tree -------------------------------------------------------------------------------

def member_key(dump: ProcessDump) -> int:
    """Ranks are >= 0; a process without a rank is keyed by ``-1 - pid`` (shown by pid)."""
    return dump.rank if dump.rank is not None else -1 - dump.pid


def ranks_of(members: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(m for m in members if m >= 0))


def pids_of(members: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(-1 - m for m in members if m < 0))


@dataclass(slots=True)
class StackNode:
    """One frame of the merged tree; ``members`` went through it (ranks, or ``-1 - pid``)."""

    frame: Frame | None  # None for the virtual root
    fid: int
    members: set[int] = field(default_factory=set)
    children: list["StackNode"] = field(default_factory=list)

    @property
    def ranks(self) -> tuple[int, ...]:
        return ranks_of(self.members)


@dataclass(frozen=True, slots=True)
class StackClass:
    """Ranks whose thread of interest has the same path (by function and file)."""

    members: tuple[int, ...]
    frames: tuple[Frame, ...]  # signature, root first (one member's frames, lines included)
    fids: tuple[int, ...]
    thread: str = ""
    active: tuple[int, ...] = ()  # members whose thread was on CPU
    idle: tuple[int, ...] = ()  # members whose thread py-spy reported idle
    op_index: int | None = None  # index in ``frames`` of the collective/wait frame
    teardown: bool = False  # the wait is reached from cleanup (__exit__, close, destroy, ...)
    # Members by the lines of the frames down to the op: a class groups by function, so two
    # call sites of one function at different lines share it and are told apart here.
    sites: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()
    state: str = "unknown"  # stuck | moving | unknown (one sample)

    @property
    def ranks(self) -> tuple[int, ...]:
        return ranks_of(self.members)

    @property
    def call_sites(self) -> tuple[tuple[int, ...], ...]:
        return tuple(site for site, _ in self.sites)

    @property
    def pids(self) -> tuple[int, ...]:
        return pids_of(self.members)

    @property
    def deepest(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def op(self) -> Frame | None:
        return self.frames[self.op_index] if self.op_index is not None else None

    @property
    def call_site(self) -> Frame | None:
        """The frame that called the collective (where two code paths differ in pattern B)."""
        if self.op_index is None or self.op_index == 0:
            return None
        return self.frames[self.op_index - 1]

    @property
    def waiting(self) -> bool:
        return self.op_index is not None


@dataclass(slots=True)
class StackTree:
    root: StackNode
    classes: tuple[StackClass, ...]
    paths: dict[int, tuple[int, ...]]  # member -> fid path, root first
    dumps: dict[int, ProcessDump]  # every thread stays available here
    chosen: dict[int, ThreadStack | None]
    unreadable: tuple[ProcessDump, ...] = ()  # timeout/denied/error: alive, but no stack
    exited: tuple[int, ...] = ()  # members whose dump says the process died meanwhile
    interner: Interner = field(default_factory=Interner)

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(sorted(self.paths))

    def divergence(self) -> tuple[StackNode, list[StackNode]]:
        """The deepest node every member passes through, and the branches below it."""
        node = self.root
        total = len(self.root.members)
        while True:
            full = [c for c in node.children if len(c.members) == total]
            if len(full) != 1:
                return node, sorted(node.children, key=lambda c: (-len(c.members),
                                                                  min(c.members)))
            node = full[0]


def merge(dumps: Sequence[ProcessDump], *, lines: bool = False,
          interner: Interner | None = None) -> StackTree:
    """Group ``dumps`` (one per process, one moment) into the prefix tree and classes.

    ``lines``: group by line too (two calls of one function at different lines split). Later
    dumps of the same rank replace earlier ones.
    """
    it = interner or Interner()
    fid_of, tier_of = it.fid_of, it.tier_of
    by_member: dict[int, ProcessDump] = {}
    unreadable: list[ProcessDump] = []
    exited: list[int] = []
    for d in dumps:
        if d.status != OK and not d.threads:
            if d.status == "exited":
                exited.append(member_key(d))
            else:
                unreadable.append(d)
            continue
        by_member[member_key(d)] = d

    # Ranks built from one parse share nothing, but synthetic or replayed dumps often share
    # the very same frames tuple: converting each distinct tuple once keeps 65k ranks linear
    # in the number of distinct stacks rather than in ranks x depth.
    seen: dict[int, tuple[tuple[Frame, ...], tuple[int, ...]]] = {}
    groups: dict[tuple[int, ...], list[int]] = {}  # kid path (root first) -> members
    active_of: dict[int, bool] = {}
    idle_of: dict[int, bool] = {}
    chosen: dict[int, ThreadStack | None] = {}
    thread_name: dict[tuple[int, ...], str] = {}

    def path_of(frames: tuple[Frame, ...]) -> tuple[int, ...]:
        hit = seen.get(id(frames))
        if hit is not None and hit[0] is frames:
            return hit[1]
        p = it.path(frames)
        seen[id(frames)] = (frames, p)
        return p

    for m, d in by_member.items():
        t, path = _thread_of_interest(d.threads, path_of, it)
        chosen[m] = t
        members = groups.get(path)
        if members is None:
            members = groups[path] = []
            thread_name[path] = t.name if t is not None else ""
        members.append(m)
        status = t.status if t is not None else "unknown"
        active_of[m] = status.startswith("active")
        idle_of[m] = status == "idle"

    # Collapse line-level paths into classes.
    classes_by: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    paths: dict[int, tuple[int, ...]] = {}
    for kpath, members in groups.items():
        fpath = tuple(fid_of[k] for k in kpath)
        ckey = kpath if lines else fpath
        classes_by.setdefault(ckey, []).append(kpath)
        for m in members:
            paths[m] = fpath

    classes: list[StackClass] = []
    for ckey, kpaths in classes_by.items():
        kpaths.sort(key=lambda p: min(groups[p]))
        first = kpaths[0]
        fpath = tuple(fid_of[k] for k in first)
        members = sorted(m for p in kpaths for m in groups[p])
        op = _op_index(fpath, tier_of)
        teardown = op is not None and any(it.fname[f] in TEARDOWN for f in fpath[:op + 1])
        cut = (op + 1) if op is not None else len(first)
        by_site: dict[tuple[int, ...], list[int]] = {}
        for p in kpaths:
            by_site.setdefault(tuple(it.frame_of[k].line for k in p[:cut]), []).extend(groups[p])
        sites = sorted((site, tuple(sorted(ms))) for site, ms in by_site.items())
        classes.append(StackClass(
            members=tuple(members),
            frames=tuple(it.frame_of[k] for k in first),
            fids=fpath,
            thread=thread_name[first],
            active=tuple(m for m in members if active_of[m]),
            idle=tuple(m for m in members if idle_of[m]),
            op_index=op, teardown=teardown, sites=tuple(sites)))
    classes.sort(key=lambda c: (-len(c.members), c.members[0] if c.members else 0))

    return StackTree(root=_build_tree(classes, it), classes=tuple(classes), paths=paths,
                     dumps=by_member, chosen=chosen, unreadable=tuple(unreadable),
                     exited=tuple(sorted(exited)), interner=it)


def _thread_of_interest(threads, path_of, it: Interner):
    """``choose_thread`` on kid paths (computed once per thread, reused for the merge)."""
    if not threads:
        return None, ()
    if len(threads) == 1:
        return threads[0], path_of(threads[0].frames)
    paths = {}
    main = next((t for t in threads if t.name == "MainThread"), None)
    order = ([main] if main is not None else []) + [t for t in threads if t is not main]
    for t in order:
        p = paths[id(t)] = path_of(t.frames)
        if it.has_comm(p):
            return t, p
    t = main if main is not None else next((t for t in threads if t.frames), threads[0])
    return t, paths[id(t)]


def _op_index(fpath: tuple[int, ...], tier_of: list[int]) -> int | None:
    """Index of the frame that names the wait: the outermost primitive (``recv_object_list``
    rather than the ``wait`` inside it, DeepSpeed's ``all_reduce`` rather than torch's below it),
    else the outermost wrapper (a pipeline ``_shape_inference``)."""
    wrapper = None
    for i, f in enumerate(fpath):
        t = tier_of[f]
        if t == PRIMITIVE:
            return i
        if t == WRAPPER and wrapper is None:
            wrapper = i
    return wrapper


def _build_tree(classes: Sequence[StackClass], it: Interner) -> StackNode:
    # Built from the classes, not the ranks: the work is distinct paths x depth, and each
    # class's member set is added to a node in one C-level set update.
    root = StackNode(frame=None, fid=-1)
    index: dict[tuple[int, int], StackNode] = {}  # (id(parent), fid) -> child: no child scans
    for c in classes:
        root.members.update(c.members)
        node = root
        for frame, fid in zip(c.frames, c.fids):
            child = index.get((id(node), fid))
            if child is None:
                child = index[(id(node), fid)] = StackNode(frame=frame, fid=fid)
                node.children.append(child)
            child.members.update(c.members)
            node = child
    return root
