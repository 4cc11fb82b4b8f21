"""STAT-style merge of py-spy stacks across ranks (pure: no I/O).

Each rank contributes one thread (its thread of interest); its frames, root first, become a path
in a prefix tree whose edges carry the set of ranks that went that way. Ranks with the same path
form an equivalence class. A hang is about how ranks diverge, so the tree and the classes are what
the classification (``rltui.diagnosis.stacks``) reads.

Frame identity is (function, file) with site-packages prefixes trimmed: the same code seen from
two virtualenvs or two nodes must group together, and a rank spinning in a loop changes its line
on every sample without changing where it is. Lines are kept for display, and for telling two
call sites of one function apart. Two things that differ between processes running the same code
are not part of a frame's identity: the address of a native frame py-spy could not name
(``0x7f3a... (libc.so.6)``, randomised per process) and the count in the marker of a bounded
deep stack.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from operator import attrgetter

import msgspec

from rltui.model import OK, Frame, ProcessDump, ThreadStack
from rltui.parsing.pyspy import ELIDED, trim_path
from rltui.parsing.stackframes import is_cut

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
    # Process-group creation and rendezvous block until every member arrives: a rank that
    # never comes holds the others here, exactly as in a collective.
    "init_process_group", "new_group", "_new_process_group_helper", "new_subgroups",
    "new_subgroups_by_enumeration", "_store_based_barrier", "rendezvous", "next_rendezvous",
    "init_device_mesh",
})
# Names that are communication only inside a distributed/RPC package: ``wait`` is also
# threading.Condition.wait, ``get`` is dict.get's namesake, ``send`` a generator method.
AMBIGUOUS = frozenset({"send", "recv", "wait", "reduce", "gather", "scatter", "get", "get_objects",
                       "synchronize", "_wait", "wait_tensor"})
# Where an ambiguous name is communication. Anywhere in the path:
_COMM_PATH_HINTS = ("distributed", "c10d", "deepspeed", "megatron", "nccl", "pipelin", "p2p",
                    "parallel")
# As a whole directory or file name (``/comm`` alone would match ``common/``, ``ray/`` would
# match ``xarray/``):
_COMM_PART_HINTS = ("/comm/", "/ray/", "/comm.py", "/dist.py")
# Framework-level wrappers around point-to-point traffic: pipeline schedules (torch pipelining,
# DeepSpeed pipe, Megatron p2p_communication). They name the place, the primitive names the op.
WRAPPERS = frozenset({
    "_shape_inference", "recv_forward", "recv_backward", "send_forward", "send_backward",
    "send_forward_recv_backward", "send_backward_recv_forward", "send_forward_recv_forward",
    "send_backward_recv_backward", "_communicate", "_p2p_ops", "_batched_p2p_ops",
    "_exec_recv_activations", "_exec_recv_grads", "_exec_send_activations", "_exec_send_grads",
    "_reduce", "_gather_along_first_dim", "_reduce_scatter_along_first_dim",
})
# Wrapper names that other libraries use too (pandas' DataFrame._reduce, a client's
# _communicate): a wrapper only in a communication package's file.
_GENERIC_WRAPPERS = frozenset({"_reduce", "_communicate", "_p2p_ops", "_batched_p2p_ops"})
# Cleanup context: a wait reached from one of these is teardown, not the training loop.
TEARDOWN = frozenset({"destroy_process_group", "__exit__", "close", "destroy", "shutdown",
                      "cleanup", "teardown", "finalize", "__del__", "_run_exitfuncs", "_exitfunc",
                      "_shutdown", "__aexit__", "terminate"})
# Collectives a script calls on its way out. Called straight from the entry point (a
# ``finally:`` in ``main``) while other ranks wait deeper in the loop, they are teardown too.
CLEANUP_OPS = frozenset({"barrier", "monitored_barrier", "destroy_process_group"})
# Decorator closures between a collective and its caller (torch's ``_exception_logger``, Ray's
# ``client_mode_hook``, DeepSpeed's ``timed_op``): not the call site a reader wants to see.
_WRAPPER_NAMES = frozenset({"wrapper", "inner", "wrapped", "_fn", "_wrapper", "wrap",
                            "log_wrapper", "wrapper_func", "func_wrapper", "decorated",
                            "_inner"})
ENTRY = "<module>"
# While a script runs, its main thread's outermost frame is ``<module>`` (or runpy's). Once the
# script is done, the interpreter runs atexit handlers and ``threading._shutdown`` (which
# joins non-daemon threads) with nothing above them: a main thread whose outermost Python frame
# is one of these has left the training code, and the process is exiting.
_EXIT_ROOTS = TEARDOWN | frozenset({"_python_exit", "_exit_function", "_atexit", "exit_handler",
                                    "_cleanup", "atexit_handler", "_exit", "_atexit_cleanup"})

NONE, WRAPPER, PRIMITIVE = 0, 1, 2  # tiers of a recognised frame
_KEY = attrgetter("name", "filename", "line")  # a frame's identity, lines included
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")  # a native frame py-spy found no symbol for


def short_name(name: str) -> str:
    """``Trainer.train_step`` -> ``train_step`` (what collective names are matched on)."""
    return name.rpartition(".")[2]


def _comm_file(filename: str) -> bool:
    path = "/" + filename.replace("\\", "/").lower()
    return any(h in path for h in _COMM_PATH_HINTS) or any(h in path for h in _COMM_PART_HINTS)


# Standard-library modules whose functions share a wrapper's name (subprocess's _communicate).
_STDLIB_FILES = ("subprocess.py", "threading.py", "queue.py", "selectors.py", "socket.py",
                 "ssl.py", "asyncio/", "multiprocessing/", "concurrent/")


def _stdlib(filename: str) -> bool:
    path = filename.replace("\\", "/")
    base = path.rsplit("/", 1)[-1]
    return base in _STDLIB_FILES or any(f"/{d}" in "/" + path for d in _STDLIB_FILES
                                        if d.endswith("/"))


def comm_tier(frame: Frame) -> int:
    """How surely this frame is a collective, point-to-point or distributed wait."""
    if frame.native:
        # --native frames: NCCL/gloo/c10d internals show where the C++ side waits.
        low = frame.name.lower()
        return PRIMITIVE if ("nccl" in low or "c10d::" in low or "gloo::" in low) else NONE
    name = short_name(frame.name)
    if name in PRIMITIVES:
        return PRIMITIVE
    if name in WRAPPERS and not _stdlib(frame.filename) and (
            name not in _GENERIC_WRAPPERS or _comm_file(frame.filename)):
        return WRAPPER
    if name in AMBIGUOUS and _comm_file(frame.filename):
        return PRIMITIVE
    return NONE


def identity(frame: Frame) -> tuple[str, str]:
    """(name, file) as grouping sees them: an unnamed native frame's address (randomised per
    process) and the count in an elision marker are not part of where a frame is."""
    if frame.native and _ADDRESS.fullmatch(frame.name):
        return "0x?", frame.filename
    if frame.name == ELIDED:
        return frame.name, ""
    return frame.name, frame.filename


def is_wrapper(frame: Frame) -> bool:
    """A decorator closure around a collective (skipped when naming the call site)."""
    if frame.native:
        return False
    short = short_name(frame.name)
    closure = "<locals>" in frame.name
    return short in _WRAPPER_NAMES and (closure or _comm_file(frame.filename))


def left_script(name: str, root_first: Sequence[Frame]) -> bool:
    """A main thread (``name``) that has left its script: its outermost Python frame is an exit
    path (``_EXIT_ROOTS``, any atexit hook), its only frames are the interpreter's finalisation
    (``Py_FinalizeEx`` with ``--native``), or it has no frame at all (py-spy's view of a
    finalising interpreter). A stack whose dump was cut short has lost its outermost frames:
    it says nothing of having left."""
    if name != "MainThread":
        return False
    if not root_first:
        return True
    outer = next((f for f in root_first if not f.native and f.name != ELIDED), None)
    if outer is None:
        return any("Py_Finalize" in f.name for f in root_first)
    if is_cut(outer):
        return False
    short = short_name(outer.name)
    return short in _EXIT_ROOTS or "atexit" in short.lower()


def exiting(thread: ThreadStack) -> bool:
    """A main thread that has left its script (``left_script``)."""
    return left_script(thread.name, thread.frames[::-1])


def _busy_helper(threads: Sequence[ThreadStack], main: ThreadStack | None
                 ) -> ThreadStack | None:
    """With no thread in communication: a Python thread on CPU while MainThread idles (Ray
    Train runs the user's loop in a ``TrainingThread`` while the worker's main thread waits for
    tasks), which is where the rank works."""
    if main is None or main.status != "idle":
        return None
    return next((t for t in threads if t is not main and t.active and _python(t)), None)


def _python(thread: ThreadStack) -> bool:
    """Has a Python frame: threads of native frames only (NCCL's watchdog, a CUDA callback)
    hold C++ waits of their own in every torch process; they are not where the rank waits."""
    return any(not f.native for f in thread.frames)


def choose_thread(threads: Sequence[ThreadStack], tiers=None) -> ThreadStack | None:
    """The thread of interest: the one inside a collective or distributed call, else MainThread,
    else the first thread with frames.

    ``tiers`` (frame -> tier) lets a caller reuse its cache; MainThread wins ties because the
    training loop runs there. A helper thread idle in ``threading``'s waits is never chosen over
    MainThread for that wait: ``Condition.wait`` is not communication. A main thread that has
    left the script (``exiting``) is chosen unless another thread is in a collective: the
    process still takes part in that one (``threading._shutdown`` joins an async checkpoint's
    executor thread waiting in ``all_gather_object``).
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
        if t is not main and _python(t) and any(tier(f) for f in t.frames):
            return t
    if main is not None:
        return main if exiting(main) else (_busy_helper(threads, main) or main)
    return next((t for t in threads if t.frames), threads[0])


# -- interning -------------------------------------------------------------------------------------

def _version(text: str) -> tuple[int, ...]:
    parts = []
    for p in text.split(".")[:2]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def mixed_naming(dumps: Iterable[ProcessDump]) -> bool:
    """Dumps from Pythons on both sides of 3.11, where py-spy's names for methods changed from
    ``method`` to ``Class.method``."""
    old = new = False
    for text in {d.python_version for d in dumps}:
        v = _version(text) if text else ()
        if len(v) == 2:
            old |= v < (3, 11)
            new |= v >= (3, 11)
    return old and new


class Interner:
    """Small integer ids for frames, shared by every sample of one classification.

    ``kid`` identifies (function, file, line), ``fid`` (function, file). Paths become tuples of
    ints, cheap to hash and compare; one Interner across samples makes ids comparable in time.
    ``alias``: let ``method`` and ``Class.method`` of one file be one function (dumps from
    Pythons before and after 3.11 in one job).
    """

    __slots__ = ("_comm", "_fids", "_kids", "_paths", "_short", "_trim", "alias", "dotted",
                 "fid_of", "fname", "frame_of", "line_of", "skip", "tier_of")

    def __init__(self, alias: bool = False) -> None:
        self.alias = alias
        self._kids: dict[tuple[str, str, int], int] = {}
        self._fids: dict[tuple[str, str, bool], int] = {}
        self._short: dict[tuple[str, str], list[int]] = {}  # (short name, file) -> fids
        self._paths: dict[tuple, tuple[int, ...]] = {}  # frames' keys -> kid path
        self._trim: dict[str, str] = {}
        self._comm: dict[int, bool] = {}  # id(kid path) -> has a comm frame
        self.fid_of: list[int] = []  # kid -> fid
        self.line_of: list[int] = []  # kid -> line
        self.frame_of: list[Frame] = []  # kid -> first frame seen (for display)
        self.tier_of: list[int] = []  # fid -> comm tier
        self.fname: list[str] = []  # fid -> short function name
        self.skip: list[bool] = []  # fid -> a decorator closure (not a call site)
        self.dotted: list[bool] = []  # fid -> seen with a ``Class.`` qualified name

    def kid(self, f: Frame) -> int:
        name, filename = identity(f)
        key = (name, filename, f.line)
        k = self._kids.get(key)
        if k is None:
            fid = self._fid(f, name, filename)
            k = self._kids[key] = len(self.fid_of)
            self.fid_of.append(fid)
            self.line_of.append(f.line)
            self.frame_of.append(f)
        return k

    def _fid(self, f: Frame, name: str, filename: str) -> int:
        fn = self._trim.get(filename)
        if fn is None:
            fn = self._trim[filename] = trim_path(filename)
        fkey = (name, fn, f.native)
        fid = self._fids.get(fkey)
        if fid is not None:
            return fid
        short = short_name(name)
        dotted = "." in name
        if self.alias and not f.native:
            same = self._short.setdefault((short, fn), [])
            if dotted:  # Class.method: the one bare ``method`` of this file not yet claimed
                match = [x for x in same if not self.dotted[x]]
            else:  # method: the only Class.method of this file
                match = [x for x in same if self.dotted[x]]
            if len(match) == 1:
                fid = self._fids[fkey] = match[0]
                self.dotted[fid] |= dotted
                return fid
        fid = self._fids[fkey] = len(self.tier_of)
        if self.alias and not f.native:
            self._short[(short, fn)].append(fid)
        self.tier_of.append(comm_tier(f))
        self.fname.append(short)
        self.skip.append(is_wrapper(f))
        self.dotted.append(dotted)
        return fid

    def frame_tier(self, f: Frame) -> int:
        return self.tier_of[self.fid_of[self.kid(f)]]

    def path(self, frames: Sequence[Frame]) -> tuple[int, ...]:
        """Kid path, root first. A whole stack is looked up at once (one C-level hash of its
        frames' keys): a 4,096-rank merge converts ~250k frames, and a lookup per frame would
        dominate it. Stacks seen before (other ranks, other samples) cost no conversion."""
        key = tuple(map(_KEY, frames))
        p = self._paths.get(key)
        if p is None:
            p = self._paths[key] = tuple([self.kid(f) for f in reversed(frames)])
        return p

    def has_comm(self, path: tuple[int, ...]) -> bool:
        # Memoised per path object: ``path`` hands out one tuple per distinct stack.
        hit = self._comm.get(id(path))
        if hit is None:
            tier, fid = self.tier_of, self.fid_of
            hit = self._comm[id(path)] = any(tier[fid[k]] for k in path)
        return hit

    def fids(self, path: Sequence[int]) -> tuple[int, ...]:
        fid = self.fid_of
        return tuple([fid[k] for k in path])


# -- the merged tree -------------------------------------------------------------------------------

def member_key(dump: ProcessDump) -> int:
    """Ranks are >= 0; a process without a rank is keyed by ``-1 - pid`` (shown by pid)."""
    return dump.rank if dump.rank is not None else -1 - dump.pid


def ranks_of(members: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(m for m in members if m >= 0))


def pids_of(members: Iterable[int]) -> tuple[int, ...]:
    return tuple(sorted(-1 - m for m in members if m < 0))


class StackNode(msgspec.Struct):
    """One frame of the merged tree; ``members`` went through it (ranks, or ``-1 - pid``).
    Read-only once built: nodes that the same classes pass through share one set."""

    frame: Frame | None  # None for the virtual root
    fid: int
    members: set[int] = msgspec.field(default_factory=set)
    children: list[StackNode] = msgspec.field(default_factory=list)

    @property
    def ranks(self) -> tuple[int, ...]:
        return ranks_of(self.members)


class StackClass(msgspec.Struct, frozen=True):
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
    # Index of the frame that called the collective, decorator closures skipped (torch wraps
    # every collective in ``_exception_logger.<locals>.wrapper``).
    site_index: int | None = None
    # The collective is called from the script's entry point (``<module>`` or the function it
    # calls), e.g. a barrier in ``main``'s ``finally:``.
    from_entry: bool = False
    # The main thread has left the script (atexit, threading._shutdown): the process is exiting.
    exiting: bool = False
    # Exiting, read on another thread than MainThread: that thread waits in a collective, which
    # the process still takes part in (an async checkpoint's executor that
    # ``threading._shutdown`` joins). Its wait decides the pattern, unless ranks in the loop
    # wait elsewhere: then the rank has left the loop, as any exiting rank (stacks.classify).
    joined: bool = False

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
    def tip(self) -> Frame | None:
        """The innermost Python frame (``--native`` adds C frames below it), else the deepest."""
        return next((f for f in reversed(self.frames) if not f.native), self.deepest)

    @property
    def op(self) -> Frame | None:
        return self.frames[self.op_index] if self.op_index is not None else None

    @property
    def call_site(self) -> Frame | None:
        """The frame that called the collective (where two code paths differ in pattern B)."""
        return self.frames[self.site_index] if self.site_index is not None else None

    @property
    def waiting(self) -> bool:
        return self.op_index is not None


class StackTree(msgspec.Struct):
    root: StackNode
    classes: tuple[StackClass, ...]
    paths: dict[int, tuple[int, ...]]  # member -> fid path, root first
    dumps: dict[int, ProcessDump]  # every thread stays available here
    chosen: dict[int, ThreadStack | None]
    unreadable: tuple[ProcessDump, ...] = ()  # timeout/denied/error: alive, but no stack
    exited: tuple[int, ...] = ()  # members whose dump says the process died meanwhile
    interner: Interner = msgspec.field(default_factory=Interner)
    kpaths: dict[int, tuple[int, ...]] = msgspec.field(default_factory=dict)  # member -> kid path
    duplicates: tuple[int, ...] = ()  # members dumped more than once (the last dump counts)

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
    dumps of the same rank replace earlier ones (``duplicates`` names them).
    """
    it = interner or Interner(alias=mixed_naming(dumps))
    by_member: dict[int, ProcessDump] = {}
    unreadable: list[ProcessDump] = []
    exited: list[int] = []
    duplicates: set[int] = set()
    for d in dumps:
        if d.status != OK and not d.threads:
            if d.status == "exited":
                exited.append(member_key(d))
            else:
                unreadable.append(d)
            continue
        m = member_key(d)
        if m in by_member:
            duplicates.add(m)
        by_member[m] = d

    # Ranks read from one folder of --json dumps (``pyspy.StackCache``), synthetic or replayed
    # dumps share the very same frames tuple for one stack: converting each distinct tuple once
    # keeps 65k ranks linear in the number of distinct stacks rather than in ranks x depth. The
    # memo stops itself when the first ranks share nothing (text dumps, live rounds), where it
    # would only cost.
    seen: dict[int, tuple[tuple[Frame, ...], tuple[int, ...]]] = {}
    # (kid path root first, main thread left the script while this one waits) -> members
    groups: dict[tuple[tuple[int, ...], bool], list[int]] = {}
    status_of: dict[int, str] = {}
    chosen: dict[int, ThreadStack | None] = {}
    thread_name: dict[tuple[tuple[int, ...], bool], str] = {}
    convert = it.path
    memo = [True, 0]  # in use, hits

    def path_of(frames: tuple[Frame, ...]) -> tuple[int, ...]:
        if not memo[0]:
            return convert(frames)
        hit = seen.get(id(frames))
        if hit is not None and hit[0] is frames:
            memo[1] += 1
            return hit[1]
        p = convert(frames)
        seen[id(frames)] = (frames, p)
        if len(seen) == 256 and memo[1] == 0:
            memo[0] = False
            seen.clear()
        return p

    has_comm = it.has_comm
    for m, d in by_member.items():
        t, path, joined = _thread_of_interest(d.threads, path_of, has_comm)
        chosen[m] = t
        key = (path, joined)
        members = groups.get(key)
        if members is None:
            members = groups[key] = []
            thread_name[key] = t.name if t is not None else ""
        members.append(m)
        status_of[m] = t.status if t is not None else "unknown"

    # Collapse line-level paths into classes.
    # A member whose main thread has left the script is in a class of its own.
    classes_by: dict[tuple[tuple[int, ...], bool], list[tuple[tuple[int, ...], bool]]] = {}
    paths: dict[int, tuple[int, ...]] = {}
    kpaths: dict[int, tuple[int, ...]] = {}
    for key, members in groups.items():
        kpath, joined = key
        fpath = it.fids(kpath)
        classes_by.setdefault((kpath if lines else fpath, joined), []).append(key)
        paths.update(dict.fromkeys(members, fpath))
        kpaths.update(dict.fromkeys(members, kpath))
    _join_cut(classes_by, it)

    classes = [_make_class(kpaths_, groups, thread_name, status_of, it)
               for kpaths_ in classes_by.values()]
    classes.sort(key=lambda c: (-len(c.members), c.members[0] if c.members else 0))
    return StackTree(root=_build_tree(classes), classes=tuple(classes), paths=paths,
                     dumps=by_member, chosen=chosen, unreadable=tuple(unreadable),
                     exited=tuple(sorted(m for m in set(exited) if m not in by_member)),
                     interner=it, kpaths=kpaths, duplicates=tuple(sorted(duplicates)))


def _cut(kpath: Sequence[int], it: Interner) -> bool:
    """The stack's dump was cut short: its root is the ``CUT`` marker, its outer frames lost."""
    return bool(kpath) and is_cut(it.frame_of[kpath[0]])


def _join_cut(classes_by: dict, it: Interner) -> None:
    """A stack cut short joins the one class whose stack ends as its known frames do: the
    frames lost say nothing of a difference, and a class of its own would read as ranks waiting
    elsewhere (pattern B, the cut rank "the odd one out"). Longest first, so that stacks cut
    at different depths gather; one that two classes could hold stays alone."""
    cut = [ck for ck, keys in classes_by.items() if _cut(keys[0][0], it)]
    if not cut:
        return
    marked = set(cut)

    def known(ck) -> int:  # frames known below the marker, or all
        return len(ck[0]) - (ck in marked)

    targets = [ck for ck in classes_by if ck not in marked]
    for ck in sorted(cut, key=known, reverse=True):
        path, joined = ck
        tail = path[1:]
        if not tail:
            continue
        into = [t for t in targets
                if t[1] == joined and known(t) > len(tail) and t[0][-len(tail):] == tail]
        if len(into) == 1:
            classes_by[into[0]].extend(classes_by.pop(ck))
        elif not into:
            targets.append(ck)


def _make_class(keys: list[tuple[tuple[int, ...], bool]], groups, thread_name, status_of,
                it: Interner) -> StackClass:
    # A whole stack, the longest known, stands for the class (stacks cut short join one).
    keys.sort(key=lambda k: (_cut(k[0], it), -len(k[0]), min(groups[k])))
    first, joined = keys[0]
    fpath = it.fids(first)
    members = sorted(m for k in keys for m in groups[k])
    op = _op_index(fpath, it.tier_of)
    teardown = op is not None and any(it.fname[f] in TEARDOWN for f in fpath[:op + 1])
    frames = tuple([it.frame_of[k] for k in first])
    leaving = left_script(thread_name[keys[0]], frames)
    site = from_entry = None
    if op is not None:
        site = op - 1
        while site >= 0 and it.skip[fpath[site]]:
            site -= 1
        if site < 0:
            site = None
        else:
            from_entry = _at_entry(fpath, site, it)
    cut = (op + 1) if op is not None else len(first)
    line_of = it.line_of
    by_site: dict[tuple[int, ...], list[int]] = {}
    for key in keys:
        path = key[0]
        if len(path) != len(first):  # cut short: the class's lines above its known frames
            path = first[:len(first) - len(path) + 1] + path[1:]
        by_site.setdefault(tuple([line_of[k] for k in path[:cut]]), []).extend(groups[key])
    sites = sorted((s, tuple(sorted(ms))) for s, ms in by_site.items())
    return StackClass(
        members=tuple(members),
        frames=frames,
        fids=fpath,
        thread=thread_name[keys[0]],
        active=tuple(m for m in members if status_of[m].startswith("active")),
        idle=tuple(m for m in members if status_of[m] == "idle"),
        op_index=op, teardown=teardown or leaving, sites=tuple(sites), site_index=site,
        from_entry=bool(from_entry), exiting=leaving or joined, joined=joined)


def _at_entry(fpath: tuple[int, ...], site: int, it: Interner) -> bool:
    """The frame at ``site`` is ``<module>``, or the function ``<module>`` called (decorator
    closures such as torch elastic's ``@record`` in between)."""
    fname, skip = it.fname, it.skip
    if fname[fpath[site]] == ENTRY:
        return True
    i = site - 1
    while i >= 0 and skip[fpath[i]]:
        i -= 1
    return i >= 0 and fname[fpath[i]] == ENTRY


def _thread_of_interest(threads, path_of, has_comm):
    """``choose_thread`` on kid paths (computed once per thread, reused for the merge), and
    whether the thread chosen waits while the main thread has left the script."""
    if not threads:
        return None, (), False
    if len(threads) == 1:
        return threads[0], path_of(threads[0].frames), False
    main = main_path = None
    left = False
    for t in threads:
        if t.name == "MainThread":
            main = t
            main_path = path_of(t.frames)
            if has_comm(main_path):
                return t, main_path, False
            left = exiting(t)
            break
    for t in threads:
        if t is not main and _python(t):
            p = path_of(t.frames)
            if has_comm(p):
                return t, p, left
    if main is not None:
        busy = None if left else _busy_helper(threads, main)
        return (busy, path_of(busy.frames), False) if busy is not None else \
            (main, main_path, False)
    t = next((t for t in threads if t.frames), threads[0])
    return t, path_of(t.frames), False


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


def _build_tree(classes: Sequence[StackClass]) -> StackNode:
    # Built from the classes, not the ranks: the work is distinct paths x depth. Each node
    # records which classes pass through it; its member set is the union of theirs, built once
    # per distinct combination of classes (a chain of nodes the same classes share shares it).
    root = StackNode(frame=None, fid=-1)
    index: dict[tuple[int, int], StackNode] = {}  # (id(parent), fid) -> child: no child scans
    through: dict[int, list[int]] = {id(root): []}
    nodes = [root]
    for ci, c in enumerate(classes):
        through[id(root)].append(ci)
        node = root
        for frame, fid in zip(c.frames, c.fids, strict=True):
            child = index.get((id(node), fid))
            if child is None:
                child = index[(id(node), fid)] = StackNode(frame=frame, fid=fid)
                node.children.append(child)
                through[id(child)] = []
                nodes.append(child)
            through[id(child)].append(ci)
            node = child
    unions: dict[tuple[int, ...], set[int]] = {}
    for node in nodes:
        key = tuple(through[id(node)])
        members = unions.get(key)
        if members is None:
            members = unions[key] = set().union(*(classes[i].members for i in key))
        node.members = members
    return root


# -- comparing samples -----------------------------------------------------------------------------

LOOP_TAIL = 2  # Python frames a loop may call into between samples and still be "the same loop"


def same_place(a: tuple[int, ...], b: tuple[int, ...], it: Interner) -> bool:
    """Two kid paths (one rank, two samples) show it in the same place: the same frames and
    lines, except that the innermost frame may be on another line (a loop turning), or one
    sample may be inside a shallow call the other's innermost frame makes (a polling loop seen
    once in ``while not ready():`` and once inside ``ready``). A call from another line, or
    two different callees, is progress. C frames below the innermost Python frame (--native)
    do not count: without --native they would not be there. A sample cut short (``CUT``)
    takes the other's frames above its known ones."""
    if a == b:
        return True
    a, b = _uncut(a, b, it), _uncut(b, a, it)
    a, b = _python_end(a, it), _python_end(b, it)
    if a == b:
        return True
    fid_of = it.fid_of
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    if i < n and fid_of[a[i]] == fid_of[b[i]]:
        loop = i  # the same function on another line
    elif i == n:
        loop = i - 1  # one path ends where the other goes on
    else:
        return False  # different functions below a common frame
    if loop < 0:
        return False
    ta, tb = _python_frames(a[loop + 1:], it), _python_frames(b[loop + 1:], it)
    return min(ta, tb) == 0 and max(ta, tb) <= LOOP_TAIL


def _uncut(path: tuple[int, ...], other: tuple[int, ...], it: Interner) -> tuple[int, ...]:
    """``path`` cut short, its lost frames taken from ``other`` above the frame where its known
    ones start (where the two are as deep, else the first of that function); unchanged when
    whole, or when ``other`` never passes there."""
    if not _cut(path, it) or len(path) < 2:
        return path
    known, fid_of = path[1:], it.fid_of
    start = fid_of[known[0]]
    at = len(other) - len(known)
    if not (0 < at < len(other) and fid_of[other[at]] == start):
        at = next((i for i, k in enumerate(other) if fid_of[k] == start), -1)
    return other[:at] + known if at > 0 else path


def _python_end(path: tuple[int, ...], it: Interner) -> tuple[int, ...]:
    """``path`` without the C frames below its innermost Python frame."""
    frame_of = it.frame_of
    end = len(path)
    while end > 0 and frame_of[path[end - 1]].native:
        end -= 1
    return path[:end] if end else path


def _python_frames(path: Sequence[int], it: Interner) -> int:
    frame_of = it.frame_of
    return sum(1 for k in path if not frame_of[k].native)


def loop_index(paths: Sequence[tuple[int, ...]], it: Interner) -> int:
    """Index (root first) of the frame a rank loops in across ``paths`` (its samples): the
    deepest frame every sample shares by function, all frames above it identical."""
    first = paths[0]
    fid_of = it.fid_of
    depth = min(len(p) for p in paths)
    i = 0
    while i < depth and all(p[i] == first[i] for p in paths):
        i += 1
    if i < depth and all(fid_of[p[i]] == fid_of[first[i]] for p in paths):
        return i
    return i - 1
