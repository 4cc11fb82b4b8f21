"""Hang classification from py-spy stacks across ranks (pure: no I/O, no clock).

The playbook's three patterns (section 1), read from the merged stacks (``stacktree``):

* A, cleanup deadlock (``hang-cleanup-deadlock``): some ranks sit in teardown (a wait reached from
  ``__exit__``/``close``/``destroy``..., ``destroy_process_group``, or a barrier called straight
  from the script's entry point, as a ``finally:`` in ``main`` does) or have exited, while the
  others wait in the loop. The root cause is the exception on the ranks that left.
* B, collective mismatch (``hang-collective-mismatch``): every rank waits inside the loop, but in
  different collectives or from different call sites: a code-path divergence.
* C, same collective (``hang-same-collective``): every rank waits in the same collective from the
  same call site: the network, or a slow rank; not the code.

Plus ``hang-busy-loop``: ranks on CPU in the same non-collective loop in every sample. A pattern is
named only when the ranks wait (idle in a recognised collective or wait), or their stacks stayed
the same across samples: a job whose stacks move is progressing (healthy or slow). docs/
hang-patterns.md describes the rules for users.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec

from rltui.diagnosis.evidence import Evidence, at_class, at_frame, at_ranks
from rltui.diagnosis.stacktree import (
    CLEANUP_OPS,
    Interner,
    StackClass,
    StackTree,
    is_wrapper,
    loop_index,
    member_key,
    merge,
    mixed_naming,
    pids_of,
    ranks_of,
    same_place,
    short_name,
)
from rltui.model import CRASHED, Frame, ProcessDump, Symptom, replace
from rltui.rankset import compact, label

CLEANUP_DEADLOCK = "hang-cleanup-deadlock"
COLLECTIVE_MISMATCH = "hang-collective-mismatch"
SAME_COLLECTIVE = "hang-same-collective"
BUSY_LOOP = "hang-busy-loop"
SYMPTOM_OF = {"A": CLEANUP_DEADLOCK, "B": COLLECTIVE_MISMATCH, "C": SAME_COLLECTIVE}

# Verdicts of a report: what the stacks say, before any pattern.
HANG = "hang"  # the ranks wait (or spin) and nothing says they progress
PROGRESSING = "progressing"  # stacks changed between samples: healthy or slow
WORKING = "working"  # one sample, some rank on CPU outside any collective
UNCLEAR = "unclear"  # one sample, no rank in a recognised wait, or a rank with no status
EMPTY = "empty"  # no stacks at all


class StackReport(msgspec.Struct, frozen=True):
    verdict: str
    pattern: str | None  # "A" | "B" | "C" | None
    symptom_id: str | None
    title: str
    classes: tuple[StackClass, ...]  # of the latest sample, with moving/stuck
    suspect_ranks: tuple[int, ...] = ()
    missing_ranks: tuple[int, ...] = ()
    # Processes without a rank known to have left (a crash dump that named no rank)
    missing_pids: tuple[int, ...] = ()
    explanation: str = ""
    divergence: Frame | None = None  # the deepest frame every rank shares
    branches: tuple[Frame, ...] = ()  # the first frame of each branch below it
    loop_frame: Frame | None = None  # busy loop: where the ranks spin
    samples: int = 0
    confirmed: bool = False  # stuck across samples (or steps known stalled), not one glance
    unreadable: tuple[int, ...] = ()  # pids whose dump failed (alive, no stack)
    tree: StackTree | None = None
    duplicate_ranks: tuple[int, ...] = ()  # dumped twice in the latest sample (last one kept)
    notes: tuple[str, ...] = ()  # what limits the reading (unreadable, duplicate, mixed dumps)
    other_pids: tuple[int, ...] = ()  # processes without a rank, left out beside ranked ones
    # PyTorch's Flight Recorder read beside the stacks (rltui.diagnosis.flightrec.FrAnalysis)
    flight_recorder: Any = None
    advice: tuple[str, ...] = ()  # next steps the stacks' reading adds (Flight Recorder off)

    @property
    def hang(self) -> bool:
        return self.verdict == HANG


def where(frame: Frame | None) -> str:
    """``Trainer.train_step (trainer.py:246)``."""
    if frame is None:
        return "(no frame)"
    file = frame.filename.replace("\\", "/").rsplit("/", 1)[-1]
    loc = f"{file}:{frame.line}" if frame.line else file
    return f"{frame.name} ({loc})" if loc else frame.name


def who(members: Iterable[int]) -> str:
    """``ranks 0-2`` / ``rank 3`` / ``pid 812`` for a member set (ranks, or processes by pid)."""
    members = list(members)
    ranks, pids = ranks_of(members), pids_of(members)
    parts = [label(ranks)] if ranks else []
    if pids:
        parts.append(("pid " if len(pids) == 1 else "pids ") + ",".join(map(str, pids[:8]))
                     + (",..." if len(pids) > 8 else ""))
    return " and ".join(parts) or "no rank"


def _verb(members: Sequence[int], one: str, many: str) -> str:
    return one if len(members) == 1 else many


def _chain(c: StackClass, n: int = 4) -> str:
    """Innermost frames of a class, py-spy order: ``all_reduce <- Trainer._sync_gradients``.
    C frames below the innermost Python frame (``--native``) and decorator closures between a
    collective and its caller are left out: they are the same for every rank."""
    frames = [f for f in reversed(c.frames) if not is_wrapper(f)]
    if any(not f.native for f in frames):
        while frames and frames[0].native:
            frames.pop(0)
    text = " <- ".join(f.name for f in frames[:n])
    return text + (" <- ..." if len(frames) > n else "") if frames else "(empty stack)"


def _op_text(c: StackClass) -> str:
    if c.op is None:
        return f"at {where(c.tip)}"
    site = f" called from {where(c.call_site)}" if c.call_site is not None else ""
    return f"in {c.op.name}{site}"


def classify(samples: Sequence[Sequence[ProcessDump]] | Sequence[ProcessDump],
             missing_ranks: Iterable[int] = (), *, expected_ranks: Iterable[int] | None = None,
             world_size: int | None = None, steps_stalled: bool | None = None,
             lines: bool = False) -> StackReport:
    """Classify successive dumps of the job (oldest first; a flat list is one sample).

    Ranks are missing when listed in ``missing_ranks``, when their dump says the process exited,
    or when ``expected_ranks`` / ``world_size`` names them and no dump has them. ``steps_stalled``
    comes from the logs: True confirms a hang, False rules one out, None means unknown.
    """
    if samples and isinstance(samples[0], ProcessDump):
        samples = [samples]  # type: ignore[list-item]
    samples, others = _ranked_only(samples)  # type: ignore[arg-type]
    # A dump printed as its process died (faulthandler on a fatal error) is a rank that left,
    # not one that waits: the others wait for it.
    crashed = [d for d in (samples[-1] if samples else ()) if d.status == CRASHED]
    if crashed:
        samples = [[d for d in s if d.status != CRASHED] for s in samples]
        # Ranks, or ``-1 - pid`` for a process without one (faulthandler in a log with no
        # rank label): the process that died is what the others wait for either way.
        missing_ranks = set(missing_ranks) | {member_key(d) for d in crashed}
    it = Interner(alias=mixed_naming(d for s in samples for d in s))  # type: ignore[union-attr]
    trees = [merge(s, lines=lines, interner=it) for s in samples]  # type: ignore[arg-type]
    if not trees:
        trees = [merge((), interner=it)]
    tree = trees[-1]
    present = set(tree.paths)
    unreadable_ranks = {d.rank for d in tree.unreadable if d.rank is not None}
    missing = set(missing_ranks) | {m for m in tree.exited if m >= 0}
    if world_size is not None:
        expected_ranks = range(world_size) if expected_ranks is None else expected_ranks
    if expected_ranks is not None:
        missing |= set(expected_ranks) - present - unreadable_ranks
    missing -= present
    memo: dict[tuple[int, int], bool] = {}
    classes = _with_joined_exits(_with_teardown(
        tuple(_with_state(c, trees, it, memo) for c in tree.classes)))
    notes = _notes(tree, it) + tuple(
        f"{who([member_key(d)])} crashed ({d.message}): its stacks were printed as it died."
        for d in crashed[:4])
    if others:
        shown = ", ".join(map(str, others[:8])) + (", ..." if len(others) > 8 else "")
        notes += (f"{len(others)} process(es) without a rank (pid {shown}: a launcher, a Ray "
                  "driver or a helper) are left out of the comparison.",)
    base: dict[str, Any] = {
        "classes": classes, "missing_ranks": ranks_of(missing),
        "missing_pids": pids_of(missing), "samples": len(trees),
        "unreadable": tuple(sorted(d.pid for d in tree.unreadable)), "tree": tree,
        "duplicate_ranks": ranks_of(tree.duplicates), "notes": notes, "other_pids": others}

    def report(verdict, title, text, pattern=None, symptom_id=None, **more) -> StackReport:
        threads = _thread_notes(classes, tree.chosen)
        if threads:
            text = f"{text} {threads}"
        if notes:
            text = f"{text} {' '.join(notes)}"
        args = base | more
        return StackReport(verdict=verdict, pattern=pattern, symptom_id=symptom_id,
                           title=title, explanation=text, **args)

    if not classes:
        # A crash dump alone: its process is the one whose stacks were given, not one missing.
        died = {member_key(d) for d in crashed}
        text = f"No stacks to compare: {who(died)} crashed." if died else "No stacks to compare."
        if missing - died:
            text += f" {who(missing - died)} missing from the dump."
        return report(EMPTY, text, text)

    node, below = tree.divergence()
    # No children: every rank has the same path, nothing diverges.
    div = node.frame if below else None
    branches = tuple(b.frame for b in below if b.frame is not None)
    base.update(divergence=div, branches=branches)
    # Compared: some rank was seen in an earlier sample too. Only then can stacks move or stay.
    compared = len(trees) >= 2 and any(c.state != "unknown" for c in classes)
    moving = [c for c in classes if c.state == "moving"]
    stuck = [c for c in classes if c.state == "stuck"]
    working = [c for c in classes if c.op is None and c.active and c.state != "stuck"]
    gone = f" {who(missing)} missing from the dump." if missing else ""

    if moving:
        moved = [m for c in moving for m in c.members]
        text = (f"The stacks of {who(moved)} changed between the {len(trees)} samples: the job "
                "is progressing (healthy or slow), not hung.")
        waits = [c for c in stuck if c.op is not None]
        if waits:
            text += (" " + "; ".join(f"{who(c.members)} sat {_op_text(c)} in every sample"
                                     for c in waits[:3])
                     + f": if the steps are slow, {who(moved)} may be the slow side.")
        return report(PROGRESSING, "Stacks move between samples: not a hang", text + gone)
    if working:
        busy = [m for c in working for m in c.active]
        lead = "One sample: " if not compared else f"Seen in one sample only, {who(busy)}: "
        every = len(classes) == 1 and len(busy) == len(classes[0].members)
        if every:
            text = (f"{lead}every rank ({who(busy)}) is on CPU at {where(working[0].tip)}, "
                    "outside any collective: working, not waiting.")
        else:
            text = (f"{lead}the ranks differ and at least one is working: {who(busy)} on CPU "
                    f"at {where(working[0].tip)}, outside any collective.")
        text += (" One dump cannot tell a hang from a slow step: dump again in a few seconds "
                 "and compare.")
        title = "Ranks are working" if every else "Ranks differ; at least one is working"
        return report(WORKING, title, text + gone)
    if not compared:
        unsure = [m for c in classes if c.op is None for m in c.members if m not in c.idle]
        if unsure:
            text = (f"One sample: {who(unsure)} neither waits in a recognised collective nor is "
                    "reported idle or active; dump again to see whether the stacks move.")
            return report(UNCLEAR, "One sample: cannot tell whether the ranks wait", text + gone)
        if all(c.op is None for c in classes):
            spots = "; ".join(f"{who(c.members)} at {where(c.tip)}" for c in classes[:3])
            text = (f"One sample: every rank is idle, none in a recognised collective or wait "
                    f"({spots}). Idle outside communication may be a pause (sleep, input, a "
                    "queue) as well as a hang: dump again to see whether the stacks move.")
            return report(UNCLEAR, "One sample: ranks idle outside any collective", text + gone)

    # From here every rank waits (one sample) or no stack moved (several samples).
    confirmed = bool(compared and stuck) or steps_stalled is True
    base["confirmed"] = confirmed
    if steps_stalled is False:
        text = ("The stacks did not change, but the steps still advance: not a hang "
                f"({who(present)} {_op_text(classes[0])}).")
        return report(PROGRESSING, "Steps advance: not a hang", text)
    spinning = [c for c in classes if c.op is None and c.active and c.state == "stuck"]
    if spinning:
        return _busy_loop(classes, spinning, missing, trees, it, steps_stalled, report)
    teardown = [c for c in classes if c.teardown]
    loop = [c for c in classes if not c.teardown]
    if (teardown and loop) or missing:
        return _pattern_a(classes, teardown, loop, missing, div, branches, report)
    if teardown and any(c.op is not None for c in teardown):
        # (ranks that only exit, waiting in no collective, and nobody waiting for them: no
        # hang to name from the stacks)
        return _teardown_only(teardown, report, world_known=expected_ranks is not None)
    return _pattern_b_or_c(classes, div, branches, report)


def _thread_notes(classes: Sequence[StackClass], chosen: dict | None = None) -> str:
    """Which thread waits, where it is not the main one (DeepSpeed's ZeRO-3 prefetch, a
    pipeline's comms thread, an async weight sync): the main thread may look idle elsewhere.
    Ranks of one class may wait on differently named threads (Thread-3, Thread-5): each name
    is said with its ranks. Ranks whose main thread has left the script are said too."""
    by_name: dict[str, list[int]] = {}
    left: list[int] = []
    for c in classes[:4]:
        if c.op is None:
            continue
        for m in c.members:
            t = chosen.get(m) if chosen else None
            name = t.name if t is not None else c.thread
            by_name.setdefault(name, []).append(m)
        if c.joined:
            left += c.members
    parts = [f"{who(ms)}: thread {name!r}" for name, ms in by_name.items()
             if name and name != "MainThread"]
    if not parts:
        return ""
    text = ("The wait is on another thread than MainThread (" + "; ".join(parts) + "), "
            "chosen because it is the one in communication.")
    if left:
        text += (f" The main thread of {who(left)} has left the script (atexit or the "
                 "interpreter's shutdown, which joins the threads still running): the process "
                 "still takes part in that thread's collective.")
    return text


def _with_state(c: StackClass, trees: Sequence[StackTree], it: Interner,
                memo: dict[tuple[int, int], bool]) -> StackClass:
    """Stuck: every member was in the same place in every sample that has it (``same_place``:
    the same frames and callers' lines; a loop may turn, or step into a shallow call)."""
    if len(trees) < 2:
        return c
    latest = trees[-1].kpaths
    moved = seen_twice = False
    for m in c.members:
        b = latest[m]
        for t in trees[:-1]:
            a = t.kpaths.get(m)
            if a is None:
                continue
            seen_twice = True
            if a is b:
                continue
            # Paths are shared tuples (one per distinct stack): compare each pair once.
            same = memo.get((id(a), id(b)))
            if same is None:
                same = memo[(id(a), id(b))] = same_place(a, b, it)
            if not same:
                moved = True
                break
        if moved:
            break
    state = "moving" if moved else ("stuck" if seen_twice else "unknown")
    return replace(c, state=state)


def _with_teardown(classes: tuple[StackClass, ...]) -> tuple[StackClass, ...]:
    """A barrier or destroy_process_group called straight from the entry point (``main``'s
    ``finally:``) is teardown when other ranks wait deeper, inside the loop."""
    deeper = any(c.op is not None and not c.teardown and not c.from_entry for c in classes)
    if not deeper:
        return classes
    return tuple(replace(c, teardown=True) if (not c.teardown and c.from_entry and c.op
                                               and short_name(c.op.name) in CLEANUP_OPS)
                 else c for c in classes)


def _with_joined_exits(classes: tuple[StackClass, ...]) -> tuple[StackClass, ...]:
    """Ranks whose main thread has left the script while another of their threads waits in a
    collective (``StackClass.joined``) still take part in that collective: alone, or beside
    ranks waiting in the same one, that wait is what they do. Beside ranks still in the loop
    that wait elsewhere (or idle outside any collective), they have left the loop and will
    never join those: teardown, as any exiting rank (pattern A)."""
    joined = [c for c in classes if c.joined and not c.teardown]
    if not joined:
        return classes
    waits = {c.fids[:c.op_index + 1] for c in joined if c.op_index is not None}
    elsewhere = any(not c.teardown and not c.exiting
                    and (c.op_index is None or c.fids[:c.op_index + 1] not in waits)
                    for c in classes)
    if not elsewhere:
        return classes
    return tuple(replace(c, teardown=True) if c.joined else c for c in classes)


def _ranked_only(samples: Sequence[Sequence[ProcessDump]]
                 ) -> tuple[list[Sequence[ProcessDump]], tuple[int, ...]]:
    """Beside ranked processes, drop the ones without a rank: torchrun's launcher idles in its
    monitor loop and a Ray driver in ray.get; compared with the ranks they would turn every
    same-collective hang into a mismatch. With no rank anywhere (a folder of dumps named by
    pid), every process is kept. A crash dump is kept too: a process that died (faulthandler
    in a log with no rank label) is what the ranks wait for, not a launcher idling."""
    if not any(d.rank is not None for sample in samples for d in sample):
        return list(samples), ()
    others = sorted({d.pid for sample in samples for d in sample
                     if d.rank is None and d.status != CRASHED})
    return [[d for d in sample if d.rank is not None or d.status == CRASHED]
            for sample in samples], tuple(others)


def _notes(tree: StackTree, it: Interner) -> tuple[str, ...]:
    out = []
    if tree.unreadable:
        bad = ", ".join(f"pid {d.pid}" + (f" (rank {d.rank})" if d.rank is not None else "")
                        + f": {d.status}" for d in tree.unreadable[:4])
        more = f" and {len(tree.unreadable) - 4} more" if len(tree.unreadable) > 4 else ""
        out.append(f"No stack from {bad}{more}: alive but unread, so not counted as missing; "
                   "dump it again (py-spy --nonblocking if it timed out).")
    if tree.duplicates:
        out.append(f"{who(tree.duplicates)} appeared more than once in one sample; the last "
                   "dump of each was used.")
    if it.alias:
        out.append("The dumps come from Pythons before and after 3.11, which name methods "
                   "differently (method vs Class.method); the names were matched by file.")
    return tuple(out)


def _busy_loop(classes, spinning, missing, trees, it, steps_stalled, report) -> StackReport:
    ranks = [m for c in spinning for m in c.active]
    loop = _loop_frame(spinning, trees, it)
    waiting = [c for c in classes if c.op is not None]
    text = (f"{who(ranks)} stayed on CPU in {where(loop)} in every sample, outside any "
            "collective: a busy loop, not a communication wait.")
    if waiting:
        text += " " + "; ".join(f"{who(c.members)} {_verb(c.members, 'waits', 'wait')} "
                                f"{_op_text(c)}" for c in waiting[:3])
        text += f", most likely for {who(ranks)}."
    elif steps_stalled is not True:
        text += (" A long computation in one function looks the same from outside: check that "
                 "the steps stalled too.")
    if missing:
        text += f" {who(missing)} missing from the dump."
    text += (f" Look at the loop in {where(loop)}: its exit condition, or what it polls (a "
             "queue, a flag, a file another rank should write).")
    # Ranks on CPU in one function in every sample may also be a job that spends most of its
    # step there, caught at the same point of its period: only stalled steps confirm it.
    return report(HANG, f"{who(ranks)} {_verb(ranks, 'spins', 'spin')} in "
                        f"{loop.name if loop else '?'} (busy loop)", text,
                  symptom_id=BUSY_LOOP, suspect_ranks=ranks_of(ranks), loop_frame=loop,
                  confirmed=steps_stalled is True)


def _loop_frame(spinning: Sequence[StackClass], trees: Sequence[StackTree],
                it: Interner) -> Frame | None:
    """Where the spinning ranks loop: per rank, the deepest frame all its samples share
    (``loop_index``); the one most ranks share, the outermost on a tie."""
    votes: Counter[tuple[int, int]] = Counter()
    kid_of: dict[tuple[int, int], int] = {}
    per_path: dict[tuple[tuple[int, ...], ...], tuple[int, int]] = {}
    for c in spinning:
        for m in c.active:
            paths = tuple(t.kpaths[m] for t in trees if m in t.kpaths)
            hit = per_path.get(paths)
            if hit is None:
                i = loop_index(paths, it)
                latest = paths[-1]
                # The innermost Python frame when the loop index lands on a C frame.
                while i > 0 and it.frame_of[latest[i]].native:
                    i -= 1
                hit = per_path[paths] = (i, it.fid_of[latest[i]]) if i >= 0 else (-1, -1)
                if i >= 0:
                    kid_of[hit] = latest[i]
            votes[hit] += 1
    best = max(votes, key=lambda k: (votes[k], -k[0]), default=None)
    if best is None or best[0] < 0:
        return spinning[0].tip
    return it.frame_of[kid_of[best]]


def _pattern_a(classes, teardown, loop, missing, div, branches, report) -> StackReport:
    exiting = [m for c in teardown if c.exiting for m in c.members]
    cleanup = [c for c in teardown if not c.exiting]
    left = [m for c in cleanup for m in c.members]
    waiting_loop = [c for c in loop if c.op is not None] or loop
    waiters = [m for c in waiting_loop for m in c.members]
    ops = sorted({c.op.name for c in waiting_loop if c.op is not None})
    parts = []
    if missing:
        parts.append(f"{who(missing)} exited (missing from the dump)")
    if exiting:
        first = next(c for c in teardown if c.exiting)
        if first.joined:  # read on the thread still in a collective, not the main one
            how = f"; its thread {first.thread!r} still waits {_op_text(first)}"
        else:
            how = f" and sits in {where(first.tip)}"
        parts.append(f"{who(exiting)} {_verb(exiting, 'is', 'are')} exiting: the main thread "
                     f"has left the script (atexit or the interpreter's shutdown){how}")
    if left:
        parts.append(f"{who(left)} {_verb(left, 'sits', 'sit')} in cleanup "
                     f"{_op_text(cleanup[0])}")
    gone = " and ".join(parts)
    culprits = set(missing) | set(exiting) | set(left)  # ranks, or ``-1 - pid``
    gone_who = who(culprits)
    many = len(culprits) > 1
    if waiters:
        text = (f"{gone}, while {who(waiters)} {_verb(waiters, 'waits', 'wait')} "
                + "; ".join(_op_text(c) for c in waiting_loop[:3]) + ". ")
        text += (f"{who(waiters)} {_verb(waiters, 'waits', 'wait')} for {gone_who}, which "
                 f"left the training loop and will never join that call: {who(waiters)} "
                 f"{_verb(waiters, 'is', 'are')} {'their' if many else 'its'} "
                 f"{_verb(waiters, 'victim', 'victims')}, not the cause. ")
    else:
        text = (f"{gone}; no dumped rank waits inside the training loop: "
                f"{who(left + exiting)} {_verb(left + exiting, 'waits', 'wait')} in cleanup for "
                f"{who(missing) if missing else 'the ranks that left'}. ")
    if div is not None and branches:
        text += f"The ranks diverge below {where(div)}. "
    text += (f"Look at why {gone_who if culprits else 'those ranks'} left "
             "the loop: the exception in the log is the root cause (it may have been swallowed "
             "by cleanup code in __exit__); rerun with CUDA_LAUNCH_BLOCKING=1 if it was a CUDA "
             "error.")
    at = f" in {', '.join(ops[:2])}" if ops else ""
    verb = _verb(waiters, "waits", "wait")
    if (missing or exiting) and not left:
        what = []
        if missing:
            what.append(f"{who(missing)} exited")
        if exiting:
            what.append(f"{who(exiting)} {_verb(exiting, 'is', 'are')} exiting")
        title = (f"{' and '.join(what)}; {who(waiters)} {verb} for {'them' if many else 'it'}"
                 f"{at}") if waiters else " and ".join(what)
    elif waiters:
        title = f"Cleanup deadlock: {who(left or missing)} in teardown, {who(waiters)} {verb}"
    else:
        ops_left = sorted({c.op.name for c in cleanup if c.op is not None})
        in_op = f" in {', '.join(ops_left[:2])}" if ops_left else " in cleanup"
        title = ((f"{who(missing)} exited; " if missing else "")
                 + f"{who(left)} {_verb(left, 'waits', 'wait')}"
                 + (f" for {'them' if len(missing) > 1 else 'it'}" if missing else "") + in_op)
    return report(HANG, title, text, pattern="A", symptom_id=CLEANUP_DEADLOCK,
                  suspect_ranks=ranks_of(culprits))


def _teardown_only(teardown, report, world_known: bool = False) -> StackReport:
    """Every dumped rank is in teardown: not pattern C, since no rank waits inside the loop,
    and the ranks that left first are where the cause is. When nothing says who else there
    was, they wait for ranks that are not in the dump (exited, or on another node)."""
    left = [m for c in teardown for m in c.members]
    where_ = "; ".join(f"{who(c.members)} {'exiting at' if c.exiting else 'in cleanup'} "
                       f"{where(c.op or c.tip) if c.exiting else _op_text(c)}"
                       for c in teardown[:3])
    if world_known:
        text = (f"Every rank ({who(left)}) is in cleanup: {where_}. A teardown collective "
                "(destroy_process_group, a final barrier) that every rank entered and none "
                "leaves waits on a communicator that is already broken: read the logs for the "
                "error that sent the first rank into cleanup; set NCCL_TIMEOUT low while "
                "debugging so the job fails instead of hanging.")
        title = f"All ranks ({who(left)}) are stuck in teardown"
    else:
        text = (f"Every dumped rank ({who(left)}) is in cleanup: {where_}. A rank in "
                "teardown waits for peers that have left the training loop or were never "
                "dumped: dump every rank of the job (all nodes), and read the logs of the ranks "
                "missing here for the exception that ended them; cleanup code in __exit__ or "
                "finally may have swallowed it.")
        title = f"{who(left)} in teardown; the other ranks are not in the dump"
    return report(HANG, title, text, pattern="A", symptom_id=CLEANUP_DEADLOCK, suspect_ranks=())


def _pattern_b_or_c(classes, div, branches, report) -> StackReport:
    # A wait's signature: the path down to the collective plus the lines of its callers. Frames
    # inside the collective do not count (the same op may sit in different internals).
    # Units: (signature, members, class). One class splits into several units when its ranks
    # call the collective from different lines.
    groups: dict[Any, list[tuple[list[int], StackClass]]] = {}
    for c in classes:
        if c.op_index is None:
            groups.setdefault(("at", c.fids), []).append((list(c.members), c))
        else:
            for site, ms in c.sites:
                groups.setdefault((c.fids[:c.op_index + 1], site), []).append((list(ms), c))
    recognised = all(c.op is not None for c in classes)
    if len(groups) == 1 and recognised:
        c = classes[0]
        members = [m for k in classes for m in k.members]
        text = (f"Every rank ({who(members)}) waits {_op_text(c)}: the same collective from "
                "the same call site. This is not a code-path divergence: suspect the network "
                "or a slow rank. Check NCCL_DEBUG=INFO output for the slow or stuck peer, the "
                "network interface (NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE=0) and whether one "
                "rank's GPU or host is slower. Ranks that were not dumped (another node) may "
                "be the ones that never arrived.")
        return report(HANG, f"All ranks wait in {c.op.name if c.op else '?'}", text,
                      pattern="C", symptom_id=SAME_COLLECTIVE)
    if len(groups) == 1 and not recognised:
        c = classes[0]
        text = (f"Every rank ({who(c.members)}) is idle at {where(c.tip)}, which is not "
                "a recognised collective or wait. If it is your framework's communication "
                "call, this is the same-collective picture: check the network and look for "
                "a slow rank.")
        return report(HANG, f"All ranks idle at {c.tip.name if c.tip else '?'}", text)
    units = sorted(((sum(len(ms) for ms, _ in us), sig, us) for sig, us in groups.items()),
                   key=lambda x: -x[0])
    largest = units[0][0]
    minority = [m for n, _, us in units if n < largest for ms, _ in us for m in ms]
    desc = "; ".join(f"{who(m for ms, _ in us for m in ms)} {_unit_text(sig, us[0][1])}"
                     for _, sig, us in units[:4])
    text = f"All ranks are inside the loop but wait at different places: {desc}. "
    if div is not None and branches:
        text += (f"They diverge below {where(div)}: "
                 + " vs ".join(where(b) for b in branches[:3]) + ". ")
    if not recognised:
        text += "Some ranks are not in a recognised collective. "
    text += ("A collective is called on some ranks and not on others: compare the two call "
             "sites for a branch that differs across ranks (data-dependent, rank-dependent or "
             "an early exit); TORCH_DISTRIBUTED_DEBUG=DETAIL logs every collective with its "
             "ranks and shapes.")
    if minority:
        text += f" The odd ones out: {who(minority)}."
    return report(HANG, "Ranks wait in different collectives or call sites", text,
                  pattern="B", symptom_id=COLLECTIVE_MISMATCH, suspect_ranks=ranks_of(minority))


def _unit_text(sig: Any, c: StackClass) -> str:
    """Where one unit waits; with the caller's line when several units share a class."""
    if c.op is not None and c.site_index is not None and len(c.sites) > 1:
        caller = replace(c.call_site, line=sig[1][c.site_index])
        return f"in {c.op.name} called from {where(caller)}"
    return _op_text(c)


# -- output ----------------------------------------------------------------------------------------

def _frame_json(f: Frame | None) -> dict[str, Any] | None:
    if f is None:
        return None
    out: dict[str, Any] = {"name": f.name, "file": f.filename, "line": f.line}
    if f.native:
        out["native"] = True
    return out


def class_json(c: StackClass) -> dict[str, Any]:
    return {
        "ranks": compact(c.ranks),
        "count": len(c.members),
        "pids": list(c.pids),
        "thread": c.thread,
        "state": c.state,
        "moving": None if c.state == "unknown" else c.state == "moving",
        "active": compact(r for r in c.active if r >= 0),
        "idle": compact(r for r in c.idle if r >= 0),
        "op": c.op.name if c.op else None,
        "call_site": _frame_json(c.call_site),
        "teardown": c.teardown,
        "exiting": c.exiting,
        "deepest": _frame_json(c.deepest),
        "tip": _frame_json(c.tip),
        "frames": [_frame_json(f) for f in c.frames],  # signature, root first
    }


def report_json(report: StackReport) -> dict[str, Any]:
    """The ``stacks`` object of the JSON report."""
    return {
        "verdict": report.verdict,
        "pattern": report.pattern,
        "symptom_id": report.symptom_id,
        "title": report.title,
        "samples": report.samples,
        "confirmed": report.confirmed,
        "classes": [class_json(c) for c in report.classes],
        "suspect_ranks": list(report.suspect_ranks),
        "missing_ranks": list(report.missing_ranks),
        "missing_pids": list(report.missing_pids),
        "unreadable_pids": list(report.unreadable),
        "duplicate_ranks": list(report.duplicate_ranks),
        "divergence": _frame_json(report.divergence),
        "branches": [_frame_json(f) for f in report.branches],
        "loop_frame": _frame_json(report.loop_frame),
        "explanation": report.explanation,
        "notes": list(report.notes),
        "other_pids": list(report.other_pids),
    }


_NEXT = {
    CLEANUP_DEADLOCK: (
        "Go back to the exception on the ranks that left the loop (exited or in cleanup): read "
        "the end of their log for a traceback or OOM; cleanup code in __exit__ may have "
        "swallowed it.",
        "If it was a CUDA error, rerun with CUDA_LAUNCH_BLOCKING=1 so it surfaces at the right "
        "line (debugging only: large slowdown).",
        "Make cleanup not wait on peers after an error (skip destroy_process_group or barrier "
        "when an exception is in flight) so the job fails instead of hanging.",
    ),
    COLLECTIVE_MISMATCH: (
        "A code-path divergence: compare the call sites where the ranks wait and find the "
        "branch that differs across ranks (rank-, data- or shape-dependent).",
        "Relaunch with TORCH_DISTRIBUTED_DEBUG=DETAIL to log every collective with its ranks "
        "and shapes, and NCCL_TIMEOUT=300 to fail fast.",
    ),
    SAME_COLLECTIVE: (
        "Not a code bug: every rank is at the same collective. Suspect the network or a slow "
        "rank: relaunch with NCCL_DEBUG=INFO and look for the peer that never answers.",
        "Multi-node: check NCCL_SOCKET_IFNAME (the right interface) and NCCL_IB_DISABLE=0 "
        "(InfiniBand on); compare per-rank step times and GPU use to find the slow rank.",
    ),
    BUSY_LOOP: (
        "Read the loop named in the evidence: its exit condition and what it waits for (a "
        "queue, a flag, a file, a reply from another rank or a Ray actor).",
        "Dump again with --locals to see the loop's variables.",
    ),
}


def _fr_waits(fa: Any) -> list[tuple[str, list[int]]]:
    """Evidence lines from the Flight Recorder's reading beside the stacks
    (rltui.diagnosis.flightrec.FrAnalysis, which reads this module): each side's wait, and
    the ranks it names (their links)."""
    if fa is None:
        return []
    by_text: dict[str, list[int]] = {}
    for r, t in fa.waits:
        by_text.setdefault(t.rsplit(", ", 1)[0] if t.endswith(" s") else t, []).append(r)
    return [(f"Flight Recorder: {label(rs)} pending in {t}", rs)
            for t, rs in list(by_text.items())[:4]]


def symptoms(report: StackReport) -> list[Symptom]:
    """The report as symptoms (at most one); none unless the stacks show a hang."""
    if report.symptom_id is None:
        return []
    evidence = Evidence()
    for i, c in enumerate(report.classes[:6]):
        state = "" if c.state == "unknown" else f" [{c.state}]"
        thread = (f" (thread {c.thread!r})" if c.op is not None and c.thread
                  and c.thread != "MainThread" else "")
        evidence.add(f"{who(c.members)}: {_chain(c)}{state}{thread}", at_class(i, c.members))
    if len(report.classes) > 6:
        evidence.add(f"... {len(report.classes) - 6} more classes")
    if report.divergence is not None and report.branches:
        evidence.add(f"ranks diverge below {where(report.divergence)}: "
                     + " vs ".join(where(b) for b in report.branches[:3]),
                     at_frame(report.divergence))
    if report.loop_frame is not None:
        evidence.add(f"busy loop at {where(report.loop_frame)}", at_frame(report.loop_frame))
    if report.missing_ranks or report.missing_pids:
        gone = [*report.missing_ranks, *(-1 - p for p in report.missing_pids)]
        evidence.add(f"{who(gone)} missing from the dump (exited): read its traceback",
                     at_ranks(report.missing_ranks))
    for text, ranks in _fr_waits(report.flight_recorder):
        evidence.add(text, at_ranks(ranks))
    if not report.confirmed:
        evidence.add("one sample only: dump again to confirm the stacks do not move")
    evidence.add(report.explanation)
    ranks = report.suspect_ranks or tuple(r for c in report.classes for r in c.ranks)
    return [Symptom(id=report.symptom_id,
                    severity="critical" if report.confirmed else "warning",
                    title=report.title, ranks=tuple(sorted(set(ranks))),
                    **evidence.fields(),
                    next_steps=_NEXT[report.symptom_id] + report.advice)]
