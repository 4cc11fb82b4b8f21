"""What the stack compare screen shows, computed from a ``StackReport`` (pure: no I/O, no UI).

Four views of one report:

* class rows: one per equivalence class (``#1`` is the largest), with its compact rank set,
  state and the frame that names where it waits (the collective and its caller, else the
  deepest frame);
* the merged tree flattened into visible rows, given the set of collapsed nodes. Node keys
  hash the path of (function, file) from the root, so they survive a live update that builds
  a new tree: a collapsed node stays collapsed and a cursor stays on its node;
* a side-by-side diff of two stacks (a rank's own frames, or a class's signature), root first,
  with the first frame where they part;
* ``class_labels``: each rank's class label, for the rank table's stack column;
* with the Flight Recorder read (``report.flight_recorder`` with groups), each rank's pending
  collective (``Pending``), grouped per class (``pending_kinds``), and where the pattern came
  from (``pattern_source``).

Members are ranks (>= 0) or, for a process with no rank, ``-1 - pid`` (the tree's convention).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rltui.diagnosis.flightrec import FrAnalysis
from rltui.diagnosis.stacks import (
    BUSY_LOOP,
    EMPTY,
    HANG,
    PROGRESSING,
    UNCLEAR,
    WORKING,
    StackReport,
)
from rltui.diagnosis.stacktree import StackClass, StackNode, identity
from rltui.model import OK, Frame
from rltui.parsing.pyspy import trim_path
from rltui.parsing.stackframes import is_cut
from rltui.rankset import compact

PATTERN_NAMES = {"A": "cleanup deadlock", "B": "collective mismatch", "C": "same collective"}
MAX_PIDS_SHOWN = 4
# Past the common prefix the two stacks are aligned by difflib, quadratic in the worst case;
# a 1,500-deep recursion must not stall the screen, so longer tails are compared index by index.
MAX_ALIGNED = 2000

# Kinds of a diff row.
SAME = "same"
LINE = "line"  # same function and file, another line
DIFFER = "differ"  # another function (or file)
LEFT_ONLY = "left"
RIGHT_ONLY = "right"
LOST = "lost"  # above the known frames of a stack cut short: unknown, not a difference
KIND_TEXT = {SAME: "same frame", LINE: "same function, other line", DIFFER: "other function",
             LEFT_ONLY: "only on the left", RIGHT_ONLY: "only on the right",
             LOST: "cut off on one side"}


# -- frames and members ----------------------------------------------------------------------------

@lru_cache(maxsize=8192)
def _trimmed(filename: str) -> str:
    return trim_path(filename)


def frame_id(frame: Frame) -> tuple[str, str, bool]:
    """What makes two frames the same place: function and trimmed file (as the merge groups)."""
    name, filename = identity(frame)
    return name, _trimmed(filename), frame.native


def short_file(filename: str) -> str:
    return filename.replace("\\", "/").rsplit("/", 1)[-1]


def frame_text(frame: Frame | None) -> str:
    """``Trainer.train_step (trainer.py:249)``; no ``:0`` for frames without a line."""
    if frame is None:
        return "(no frame)"
    file = short_file(frame.filename)
    loc = f"{file}:{frame.line}" if frame.line else file
    return f"{frame.name} ({loc})" if loc else frame.name


def fit_frame(frame: Frame | None, width: int, lead: str = "") -> str:
    """``lead`` + the frame's text in ``width`` characters. What gets cut is the start of the
    function's name (``…ner.train_step (trainer.py:249)``), never the file and line: the line
    is often the only thing that tells two call sites apart."""
    text = lead + frame_text(frame)
    if len(text) <= width or frame is None:
        return text if len(text) <= width else text[:max(0, width - 1)] + "…"
    loc = frame_text(frame)[len(frame.name):]  # " (trainer.py:249)"
    room = width - len(lead) - len(loc)
    if room >= 6:
        return lead + "…" + frame.name[-(room - 1):] + loc
    return text[:max(0, width - 1)] + "…"


def member_text(member: int) -> str:
    return f"rank {member}" if member >= 0 else f"pid {-1 - member}"


def members_text(members: Iterable[int]) -> str:
    """``0-3,5`` for ranks; processes without a rank as ``pid 812,813`` (the first few)."""
    members = list(members)
    ranks = compact(m for m in members if m >= 0)
    pids = sorted(-1 - m for m in members if m < 0)
    if not pids:
        return ranks
    shown = ",".join(map(str, pids[:MAX_PIDS_SHOWN])) + (",…" if len(pids) > MAX_PIDS_SHOWN
                                                          else "")
    text = ("pid " if len(pids) == 1 else "pids ") + shown
    return f"{ranks} {text}" if ranks else text


def _member_order(member: int) -> tuple[int, int]:
    # Ranks ascending, then processes without a rank by pid.
    return (0, member) if member >= 0 else (1, -1 - member)


def pattern_source(report: StackReport) -> str:
    """``Flight Recorder; stacks alone: C`` when the Flight Recorder decided the pattern
    (``the stacks agree`` when they read the same one); "" when the stacks did."""
    fa = report.flight_recorder
    if fa is None or fa.pattern is None or report.pattern != fa.pattern or \
            report.verdict in (PROGRESSING, WORKING):
        return ""
    if fa.stack_pattern == fa.pattern:
        return "Flight Recorder; the stacks agree"
    if fa.stack_pattern:
        return f"Flight Recorder; stacks alone: {fa.stack_pattern}"
    return "Flight Recorder"


def pattern_name(report: StackReport) -> str:
    """The header's first words: ``Pattern B: collective mismatch``, ``No hang`` ..."""
    if report.pattern == "A" and (report.missing_ranks or report.missing_pids) and not any(
            c.teardown or c.exiting for c in report.classes):
        # nobody is in cleanup: the ranks wait for one that is gone (crashed, killed, exited)
        return "Pattern A: a rank left"
    if report.pattern in PATTERN_NAMES:
        return f"Pattern {report.pattern}: {PATTERN_NAMES[report.pattern]}"
    if report.symptom_id == BUSY_LOOP:
        return "Busy loop"
    if report.verdict == HANG:
        return "Hang"
    if report.verdict in (PROGRESSING, WORKING):
        return "No hang"
    if report.verdict == UNCLEAR:
        return "Unclear"
    if report.verdict == EMPTY:
        return "No stacks"
    return report.verdict.capitalize() or "Stacks"


# -- classes ---------------------------------------------------------------------------------------

def class_label(index: int) -> str:
    return f"#{index + 1}"


def class_key(c: StackClass) -> str:
    """Identity of a class across reports: its path by function and file."""
    return format(hash(tuple(frame_id(f) for f in c.frames)) & (2**64 - 1), "x")


def class_where(c: StackClass) -> tuple[str, Frame | None]:
    """Where a class waits, as a lead and a frame: the collective and its caller (two classes
    may wait in the same op from two places), else the deepest frame."""
    lead = "[cleanup] " if c.teardown else ""
    op = c.op
    if op is not None:
        site = c.call_site
        return (lead + f"{op.name} ← ", site) if site is not None else (lead, op)
    return lead, c.deepest


@dataclass(frozen=True, slots=True)
class ClassRow:
    key: str
    label: str  # "#1"
    index: int  # in report.classes
    members: tuple[int, ...]
    ranks: str  # compact set ("0-3,5"), processes without a rank by pid
    count: int
    state: str  # stuck | moving | unknown
    lead: str  # "[cleanup] all_reduce ← ": kept whole when the row is cut to fit
    frame: Frame | None  # the collective's caller, else the collective, else the deepest
    teardown: bool
    waiting: bool  # in a recognised collective or wait

    @property
    def where(self) -> str:
        return self.lead + (frame_text(self.frame) if self.frame is not None
                            else "(empty stack)")


def class_rows(report: StackReport) -> tuple[ClassRow, ...]:
    return tuple(ClassRow(key=class_key(c), label=class_label(i), index=i,
                          members=tuple(c.members), ranks=members_text(c.members),
                          count=len(c.members), state=c.state, lead=class_where(c)[0],
                          frame=class_where(c)[1], teardown=c.teardown,
                          waiting=c.op is not None)
                 for i, c in enumerate(report.classes))


def member_labels(report: StackReport) -> dict[int, str]:
    """``member -> "#1"`` for every member (a rank, or ``-1 - pid`` for a process without
    one): the numbering the compare screen, the rank table and the incident report share."""
    return {m: class_label(i) for i, c in enumerate(report.classes) for m in c.members}


def class_labels(report: StackReport) -> dict[int, str]:
    """``rank -> "#1"``: the class of every rank that has a stack (processes without a rank
    are left out)."""
    return {m: label for m, label in member_labels(report).items() if m >= 0}


# -- the Flight Recorder's collectives -------------------------------------------------------------

NOTHING_PENDING = "nothing pending"
NO_DUMP = "no dump"
# flightrec.FrAnalysis.wait_of: "all_reduce #6 of default_pg [4] Float, 12 s"
_WAIT = re.compile(r"^(?P<what>.*?)(?: (?P<sizes>\[[^\]]*\](?: \S+)?))?(?:, (?P<age>\d+) s)?$")


def fr_of(report: StackReport) -> FrAnalysis | None:
    """The report's Flight Recorder reading when it has groups (else nothing to show)."""
    fa = report.flight_recorder
    return fa if fa is not None and fa.groups else None


@dataclass(frozen=True, slots=True)
class Pending:
    """A rank's pending collective, in parts so a narrow column keeps what matters: ``what``
    (``all_reduce #4 of default_pg``, or ``nothing pending`` / ``no dump``), the tensors
    (``[4] Float``) and how long it has waited (seconds, at the dump's time)."""

    what: str
    sizes: str = ""
    age_s: int | None = None

    @property
    def waiting(self) -> bool:
        return self.what not in (NOTHING_PENDING, NO_DUMP, "")

    @property
    def short(self) -> str:
        """Without the op: ``#4 of default_pg``."""
        op, sep, rest = self.what.partition(" #")
        return f"#{rest}" if sep and self.waiting else self.what

    def texts(self) -> list[str]:
        """Longest first: with the tensors and the age, with the age, the collective alone."""
        age = f", {self.age_s} s" if self.age_s is not None else ""
        out = [f"{self.what} {self.sizes}{age}" if self.sizes else f"{self.what}{age}",
               f"{self.what}{age}", self.what]
        return list(dict.fromkeys(out))


def pending_of(fa: FrAnalysis, rank: int) -> Pending:
    text = fa.wait_of(rank)
    if not text:
        dumped = any(d.rank == rank and d.status == OK for d in fa.dumps)
        return Pending(NOTHING_PENDING if dumped else NO_DUMP)
    m = _WAIT.match(text)
    if m is None:  # pragma: no cover - the regex matches any text
        return Pending(text)
    age = m.group("age")
    return Pending(m.group("what"), m.group("sizes") or "", int(age) if age else None)


def pending_kinds(fa: FrAnalysis, members: Iterable[int]
                  ) -> list[tuple[Pending, tuple[int, ...]]]:
    """The ranks among ``members`` grouped by their pending collective (the same op, id, group
    and tensors; the age shown is the longest), the most common first. Processes without a
    rank are left out."""
    kinds: dict[tuple[str, str], list[tuple[Pending, int]]] = {}
    for m in members:
        if m < 0:
            continue
        p = pending_of(fa, m)
        kinds.setdefault((p.what, p.sizes), []).append((p, m))
    out = []
    for (what, sizes), rows in kinds.items():
        ages = [p.age_s for p, _ in rows if p.age_s is not None]
        out.append((Pending(what, sizes, max(ages) if ages else None),
                    tuple(sorted(r for _, r in rows))))
    out.sort(key=lambda k: (not k[0].waiting, -len(k[1]), k[1][0]))
    return out


def fit_first(texts: Sequence[str], width: int) -> str:
    """The first of ``texts`` (longest first) that fits ``width``, else the last one cut."""
    for t in texts:
        if len(t) <= width:
            return t
    last = texts[-1] if texts else ""
    return last[:max(0, width - 1)] + "…" if width > 0 else ""


# -- the merged tree -------------------------------------------------------------------------------

ROOT_KEY = 0


def node_key(parent: int, frame: Frame) -> int:
    return hash((parent, *frame_id(frame)))


def path_keys(frames: Sequence[Frame]) -> list[int]:
    """The tree keys of the nodes along ``frames`` (root first)."""
    keys, key = [], ROOT_KEY
    for f in frames:
        key = node_key(key, f)
        keys.append(key)
    return keys


@dataclass(frozen=True, slots=True)
class TreeRow:
    key: int
    parent: int  # ROOT_KEY for the top frames
    depth: int  # frames above it
    prefix: str  # tree guides: "├╴" / "└╴" at a branch, "│ " beside a branch that goes on
    frame: Frame
    text: str
    members: Collection[int]
    ranks: str
    count: int
    has_children: bool
    collapsed: bool
    hidden: int  # frames hidden below a collapsed node
    divergence: bool  # the deepest node every member passes through, where they part


def divergence_keys(root: StackNode) -> list[int]:
    """Keys from the top down to the node where the members part (empty when they never
    part: one path for all, or no stacks)."""
    keys, node, key = [], root, ROOT_KEY
    total = len(root.members)
    while True:
        full = [c for c in node.children if len(c.members) == total]
        if len(full) != 1:
            break
        node = full[0]
        assert node.frame is not None
        key = node_key(key, node.frame)
        keys.append(key)
    # No branch below: everyone went the same way, there is no divergence to show.
    return keys if node.children else []


def _subtree_size(node: StackNode) -> int:
    count, todo = 0, list(node.children)
    while todo:
        n = todo.pop()
        count += 1
        todo.extend(n.children)
    return count


def _sorted_children(node: StackNode) -> list[StackNode]:
    # Largest branch first, then by the lowest member: the majority reads top-down.
    return sorted(node.children,
                  key=lambda c: (-len(c.members), min(map(_member_order, c.members),
                                                       default=(2, 0))))


class _NodeFacts:
    """What a node shows that depends only on the tree, computed once per node: a screen
    redraws the rows at every key, and a node of a 4,096-rank job has 4,096 members."""

    __slots__ = ("children", "ranks", "size")

    def __init__(self, node: StackNode) -> None:
        self.children = _sorted_children(node)
        self.ranks = members_text(node.members)
        self.size: int | None = None


def flatten(root: StackNode, collapsed: Collection[int] = frozenset(),
            divergence: int | None = None,
            facts: dict[int, _NodeFacts] | None = None) -> list[TreeRow]:
    """The visible rows, top frame first, children of a collapsed node left out.

    A chain of single children keeps its indentation (a deep stack stays readable at 80
    columns); only a branch adds a level of guides. Iterative: a 1,500-frame recursion must
    not hit Python's recursion limit. ``facts`` caches per-node work between calls on the same
    tree (``StackView`` keeps one).
    """
    known = facts if facts is not None else {}

    def facts_of(node: StackNode) -> _NodeFacts:
        f = known.get(id(node))
        if f is None:
            f = known[id(node)] = _NodeFacts(node)
        return f

    rows: list[TreeRow] = []
    # (node, depth, parent key, own guide, guide for what is below it)
    todo: list[tuple[StackNode, int, int, str, str]] = []

    def push_children(node: StackNode, depth: int, key: int, below: str) -> None:
        children = facts_of(node).children
        branching = len(children) > 1
        for i, c in reversed(list(enumerate(children))):
            last = i == len(children) - 1
            if branching:
                todo.append((c, depth, key, below + ("└╴" if last else "├╴"),
                             below + ("  " if last else "│ ")))
            else:
                todo.append((c, depth, key, below, below))

    push_children(root, 0, ROOT_KEY, "")
    while todo:
        node, depth, parent, guide, below = todo.pop()
        assert node.frame is not None
        key = node_key(parent, node.frame)
        shut = key in collapsed and bool(node.children)
        info = facts_of(node)
        if shut and info.size is None:
            info.size = _subtree_size(node)
        rows.append(TreeRow(key=key, parent=parent, depth=depth, prefix=guide, frame=node.frame,
                            text=frame_text(node.frame), members=node.members,
                            ranks=info.ranks, count=len(node.members),
                            has_children=bool(node.children), collapsed=shut,
                            hidden=(info.size or 0) if shut else 0,
                            divergence=key == divergence))
        if node.children and not shut:
            push_children(node, depth + 1, key, below)
    return rows


# -- side-by-side diff -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class DiffRow:
    left: Frame | None
    right: Frame | None
    kind: str  # SAME | LINE | DIFFER | LEFT_ONLY | RIGHT_ONLY | LOST


@dataclass(frozen=True, slots=True)
class StackDiff:
    rows: tuple[DiffRow, ...]
    first: int | None  # first row that is not SAME (a line difference counts; LOST does not)
    first_function: int | None  # first row whose function differs

    @property
    def identical(self) -> bool:
        return self.first is None


def _pair(a: Frame, b: Frame) -> DiffRow:
    if frame_id(a) != frame_id(b):
        return DiffRow(a, b, DIFFER)
    return DiffRow(a, b, SAME if a.line == b.line else LINE)


def diff_frames(left: Sequence[Frame], right: Sequence[Frame]) -> StackDiff:
    """Align two stacks (root first): the common prefix row by row, then the rest by function
    so that frames both share again below the split (the same collective reached from two
    callers) line up. A stack cut short (``<frames cut off>`` at its root) beside a whole one
    is aligned by its known frames; the other's frames above them are ``LOST`` rows, unknown
    rather than different."""
    cut_left, cut_right = _cut_short(left), _cut_short(right)
    if cut_left == cut_right:
        rows = _aligned(left, right)
    elif cut_left:
        rows = _lost(_aligned(left[1:], right), left[0], 0)
    else:
        rows = _lost(_aligned(left, right[1:]), right[0], 1)
    first = next((i for i, r in enumerate(rows) if r.kind not in (SAME, LOST)), None)
    first_function = next((i for i, r in enumerate(rows) if r.kind not in (SAME, LINE, LOST)),
                          None)
    return StackDiff(rows=tuple(rows), first=first, first_function=first_function)


def _cut_short(frames: Sequence[Frame]) -> bool:
    return bool(frames) and is_cut(frames[0])


def _lost(rows: list[DiffRow], marker: Frame, side: int) -> list[DiffRow]:
    """``rows`` of a cut stack's known frames (on ``side``, 0 left) against a whole one: the
    whole one's frames above the first known frame are lost rows, the marker beside the
    first of them (a row of its own when there is none)."""
    n = 0
    while n < len(rows) and (rows[n].left, rows[n].right)[side] is None:
        n += 1
    if not n:
        return [DiffRow(marker, None, LOST) if side == 0 else DiffRow(None, marker, LOST),
                *rows]
    head = [DiffRow(r.left, r.right, LOST) for r in rows[:n]]
    top = head[0]
    head[0] = DiffRow(marker, top.right, LOST) if side == 0 else DiffRow(top.left, marker, LOST)
    return head + rows[n:]


def _aligned(left: Sequence[Frame], right: Sequence[Frame]) -> list[DiffRow]:
    rows: list[DiffRow] = []
    n = 0
    while n < len(left) and n < len(right) and frame_id(left[n]) == frame_id(right[n]):
        rows.append(_pair(left[n], right[n]))
        n += 1
    a, b = left[n:], right[n:]
    if len(a) + len(b) <= MAX_ALIGNED:
        matcher = difflib.SequenceMatcher(None, [frame_id(f) for f in a],
                                          [frame_id(f) for f in b], autojunk=False)
        for op, i1, i2, j1, j2 in matcher.get_opcodes():
            if op == "equal":
                rows.extend(_pair(x, y) for x, y in zip(a[i1:i2], b[j1:j2], strict=True))
            elif op == "delete":
                rows.extend(DiffRow(x, None, LEFT_ONLY) for x in a[i1:i2])
            elif op == "insert":
                rows.extend(DiffRow(None, y, RIGHT_ONLY) for y in b[j1:j2])
            else:  # replace: side by side, the longer side's rest alone
                rows.extend(_replace(a[i1:i2], b[j1:j2]))
    else:
        rows.extend(_replace(a, b))
    return rows


def _replace(a: Sequence[Frame], b: Sequence[Frame]) -> list[DiffRow]:
    out = [_pair(x, y) for x, y in zip(a, b, strict=False)]
    out.extend(DiffRow(x, None, LEFT_ONLY) for x in a[len(b):])
    out.extend(DiffRow(None, y, RIGHT_ONLY) for y in b[len(a):])
    return out


# -- the whole screen's model ----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Side:
    """One side of the diff: a member (rank, or ``-1 - pid``) or a class (by ``class_key``)."""

    member: int | None = None
    class_key: str | None = None

    @property
    def is_class(self) -> bool:
        return self.class_key is not None


class StackView:
    """Derived data of one report, built once per report (the screen rebuilds it on update)."""

    def __init__(self, report: StackReport) -> None:
        self.report = report
        self.tree = report.tree
        self.classes = class_rows(report)
        self.class_of: dict[int, int] = {m: i for i, c in enumerate(report.classes)
                                          for m in c.members}
        self.members: tuple[int, ...] = tuple(sorted(self.class_of, key=_member_order))
        self._by_key = {c.key: c.index for c in self.classes}
        root = self.tree.root if self.tree is not None else None
        self.divergence_path: list[int] = divergence_keys(root) if root is not None else []
        self._facts: dict[int, _NodeFacts] = {}  # by id(node): the tree lives as long as self
        self.fr = fr_of(report)

    # -- tree
    @property
    def divergence_key(self) -> int | None:
        return self.divergence_path[-1] if self.divergence_path else None

    def tree_rows(self, collapsed: Collection[int] = frozenset()) -> list[TreeRow]:
        if self.tree is None:
            return []
        return flatten(self.tree.root, collapsed, self.divergence_key, self._facts)

    def class_path(self, index: int) -> list[int]:
        """Tree keys down to the deepest frame of class ``index``."""
        return path_keys(self.report.classes[index].frames)

    # -- classes and members
    def class_index(self, key: str | None) -> int | None:
        return self._by_key.get(key) if key is not None else None

    def label_of(self, member: int) -> str:
        i = self.class_of.get(member)
        return class_label(i) if i is not None else "-"

    def frames_of_member(self, member: int) -> tuple[Frame, ...]:
        """The member's own frames, root first (its lines, not its class's)."""
        thread = self.tree.chosen.get(member) if self.tree is not None else None
        if thread is not None and thread.frames:
            return tuple(reversed(thread.frames))
        i = self.class_of.get(member)
        return tuple(self.report.classes[i].frames) if i is not None else ()

    # -- sides
    def valid(self, side: Side) -> bool:
        if side.is_class:
            return side.class_key in self._by_key
        return side.member in self.class_of

    def frames_of(self, side: Side) -> tuple[Frame, ...]:
        if side.is_class:
            i = self.class_index(side.class_key)
            return tuple(self.report.classes[i].frames) if i is not None else ()
        return self.frames_of_member(side.member) if side.member is not None else ()

    def side_text(self, side: Side) -> str:
        """``rank 0 (#1)`` or ``class #2 (ranks 1-3)``."""
        if side.is_class:
            i = self.class_index(side.class_key)
            if i is None:
                return "(gone)"
            return f"class {self.classes[i].label} ({self.classes[i].ranks})"
        if side.member is None:
            return "(none)"
        return f"{member_text(side.member)} ({self.label_of(side.member)})"

    def side_members(self, side: Side) -> tuple[int, ...]:
        if side.is_class:
            i = self.class_index(side.class_key)
            return tuple(self.report.classes[i].members) if i is not None else ()
        return (side.member,) if side.member is not None else ()

    def side_pending(self, side: Side) -> list[str]:
        """The side's pending collective, longest text first (``[]`` without the Flight
        Recorder): a rank's, a class's when its ranks share one, else ``N kinds``."""
        if self.fr is None:
            return []
        kinds = pending_kinds(self.fr, self.side_members(side))
        if not kinds:
            return []
        if len(kinds) > 1:
            return [f"{len(kinds)} kinds"]
        p = kinds[0][0]
        return list(dict.fromkeys([p.what, p.short]))

    def class_side(self, index: int) -> Side:
        return Side(class_key=self.classes[index].key)

    def default_sides(self) -> tuple[Side, Side]:
        """The first member of the largest class against the first of the next (the odd one
        out); with one class, its first two members, or, with the Flight Recorder, its first
        member against the first that is pending in another collective."""
        cls = self.report.classes
        if not cls:
            return Side(), Side()
        first = min(cls[0].members, key=_member_order)
        if len(cls) > 1:
            return Side(member=first), Side(member=min(cls[1].members, key=_member_order))
        ordered = sorted(cls[0].members, key=_member_order)
        if self.fr is not None and len(ordered) > 1:
            # one stack for all: the first rank the Flight Recorder finds in another collective
            mine = pending_of(self.fr, first).what if first >= 0 else None
            other = next((m for m in ordered[1:]
                          if m >= 0 and pending_of(self.fr, m).what != mine), None)
            if other is not None:
                return Side(member=first), Side(member=other)
        return Side(member=first), Side(member=ordered[1] if len(ordered) > 1 else first)

    def step(self, side: Side, delta: int) -> Side:
        """The member ``delta`` places after this side's (a class side starts at its first
        member), wrapping around."""
        if not self.members:
            return side
        if side.is_class:
            i = self.class_index(side.class_key)
            current = (min(self.report.classes[i].members, key=_member_order)
                       if i is not None else self.members[0])
            if delta > 0:
                delta -= 1  # the class's first member is the next stop, not the one after
        else:
            current = side.member if side.member in self.class_of else self.members[0]
        at = self.members.index(current)
        return Side(member=self.members[(at + delta) % len(self.members)])

    def diff(self, left: Side, right: Side) -> StackDiff:
        return diff_frames(self.frames_of(left), self.frames_of(right))
