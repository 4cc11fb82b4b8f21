"""Which collective each rank is in, from PyTorch's Flight Recorder (pure: no I/O, no clock).

py-spy shows where each rank's Python waits; the Flight Recorder says in which collective: per
process group and rank the last completed and the pending one, with its sequence id. That tells
apart what identical stacks cannot (docs/flight-recorder.md):

* ``cross-group-order``: ranks pending in different groups at once, each side waiting for ranks
  that are pending in the other side's group: two groups entered in opposite orders (pattern B);
* ``mismatch``: different ops, sizes or dtypes at the same sequence id of one group (B);
* ``p2p-unmatched``: sends and receives that do not pair up (B);
* ``behind``: a rank that never entered collective #N of a group the others wait in (the suspect);
* ``missing``: a rank with no dump, or no records of a group it belongs to;
* ``same-collective``: every rank pending in the same op at the same id of the same group: the
  true pattern C.

Findings decide the pattern when present (``pattern``); ``apply`` puts them into the stack
report, which says so. Without Flight Recorder data nothing changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from rltui.diagnosis import stacks as st
from rltui.model import OK, Frame, FrDump, FrEntry, FrPoll, replace
from rltui.rankset import label

CROSS_GROUP = "cross-group-order"
MISMATCH = "mismatch"
P2P_UNMATCHED = "p2p-unmatched"
BEHIND = "behind"
MISSING = "missing"
SAME = "same-collective"
CODE_BUGS = (CROSS_GROUP, MISMATCH, P2P_UNMATCHED)

# Stack ops (rltui.diagnosis.stacktree) that are point-to-point: gloo records none of them.
P2P_OPS = {"send": "send", "isend": "send", "recv": "recv", "irecv": "recv"}

NEXT = {
    CROSS_GROUP: "Make every rank issue the groups' collectives in one order: the call site named "
                 "above serves both groups, and its caller picks the order per rank. Where two "
                 "groups must overlap, issue both with async_op=True and wait on both, in the "
                 "same order on every rank.",
    P2P_UNMATCHED: "Pair every send with a receive in the schedule (one side sends first, or "
                   "both use batch_isend_irecv with matching ops); log each rank's "
                   "(peer, direction, shape) per micro-batch to find the step that differs.",
    BEHIND: "Look at the rank named as behind: its stack shows where it is instead of the "
            "collective (a branch that skipped it, a slow data load, a stuck GPU).",
}
NO_DUMP_YET = ("The ranks record a Flight Recorder buffer but no dump is written yet: NCCL writes "
               "it when the watchdog times out (TORCH_NCCL_DUMP_ON_TIMEOUT=1, after the "
               "group's timeout), to TORCH_FR_DUMP_TEMP_FILE + rank. A job started with "
               "TORCH_NCCL_DEBUG_INFO_PIPE_FILE dumps now when that path + rank is written "
               "to (echo 1 > PATH<rank>); rltui reads the dumps as they appear.")
CONFIRM_AGE_S = 5.0  # a record pending this long at the dump's time confirms the stall
TURN_ON = ("Turn on PyTorch's Flight Recorder for the next run: TORCH_FR_BUFFER_SIZE=2000 "
           "(older torch: TORCH_NCCL_TRACE_BUFFER_SIZE), TORCH_NCCL_DUMP_ON_TIMEOUT=1 and "
           "TORCH_FR_DUMP_TEMP_FILE=<a shared folder>/fr_trace_rank_ (the rank is appended; "
           "default /tmp/nccl_trace_rank_). On the next hang each rank's dump names the "
           "collective it is in (group and sequence id) and the rank that never entered it, and "
           "tells a slow rank or the network from two groups entered in opposite orders; rltui "
           "reads the dumps by itself, or with --flight-recorder 'PATH*'.")


class RankInGroup(msgspec.Struct, frozen=True):
    rank: int
    last_completed: int = -1  # sequence id; -1 none
    last_enqueued: int = -1
    completed: FrEntry | None = None  # the last completed record, when the dump kept it
    pending: FrEntry | None = None  # the oldest pending record of the group
    pending_count: int = 0
    age_s: float | None = None  # how long the pending one has waited, at the dump's time
    behind: bool = False
    has_dump: bool = True


class GroupView(msgspec.Struct, frozen=True):
    group: str
    desc: str
    ranks: tuple[int, ...]
    ranks_known: bool  # from pg_config (NCCL); else the ranks whose dumps name the group
    members: tuple[RankInGroup, ...]

    @property
    def name(self) -> str:
        return group_name(self.group, self.desc)


class FrFinding(msgspec.Struct, frozen=True):
    kind: str
    ranks: tuple[int, ...]
    groups: tuple[str, ...]
    text: str
    suspects: tuple[int, ...] = ()


class FrAnalysis(msgspec.Struct, frozen=True):
    dumps: tuple[FrDump, ...]
    groups: tuple[GroupView, ...]
    findings: tuple[FrFinding, ...]
    pattern: str | None  # "B" | "C" | None
    waits: tuple[tuple[int, str], ...] = ()  # rank -> its pending collective, in words
    problems: tuple[str, ...] = ()
    enabled: bool | None = None
    stack_pattern: str | None = None  # what the stacks alone said, when apply() overrode it

    @property
    def text(self) -> str:
        return " ".join(f.text for f in self.findings)

    @property
    def suspects(self) -> tuple[int, ...]:
        return tuple(sorted({r for f in self.findings for r in f.suspects}))

    def wait_of(self, rank: int | None) -> str:
        return next((t for r, t in self.waits if r == rank), "")


def group_name(group: str, desc: str = "") -> str:
    """``default_pg``, ``group 1``, ``group 3 (rollout_stats)``."""
    if desc == "default_pg":
        return "default_pg"
    return f"group {group}" + (f" ({desc})" if desc else "")


def entry_text(e: FrEntry, desc: str | None = None) -> str:
    """``all_reduce #6 of default_pg``."""
    num = f"#{e.p2p_seq} (p2p)" if e.is_p2p and not e.seq else f"#{e.seq}"
    return f"{e.op} {num} of {group_name(e.group, e.desc if desc is None else desc)}"


def call_site(e: FrEntry) -> Frame | None:
    """The first frame outside torch.distributed that issued the record."""
    for f in e.frames:
        path = f.filename.replace("\\", "/")
        if "/torch/distributed/" in path or "/torch/nn/parallel/" in path or f.name == "wrapper":
            continue
        return f
    return e.frames[0] if e.frames else None


def site_text(e: FrEntry) -> str:
    f = call_site(e)
    if f is None:
        return "(no frames in the dump)"
    file = f.filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{f.name} ({file}:{f.line})" if f.line else f"{f.name} ({file})"


# -- analysis --------------------------------------------------------------------------------------

def analyse(poll: FrPoll | None, *, expected_ranks: Iterable[int] = (),
            stack_ops: Mapping[int, str] | None = None) -> FrAnalysis | None:
    """The groups, each rank's place in them and the findings; None without any readable dump.
    ``expected_ranks``: ranks the job has (WORLD_SIZE, the processes); ``stack_ops``: rank ->
    the op its stack waits in (py-spy), for what the Flight Recorder does not record."""
    if poll is None:
        return None
    problems = list(poll.problems)
    by_rank: dict[int, FrDump] = {}
    twice = 0
    for d in poll.dumps:
        if d.status != OK:
            problems.append(f"{d.source}: {d.message}")
            continue
        if d.rank is None:
            problems.append(f"{d.source}: no rank in its name or content; left out")
            continue
        old = by_rank.get(d.rank)
        if old is None:
            by_rank[d.rank] = d
            continue
        # two dumps claim one rank (nccl_trace_rank_1 and nccl_trace_rank_01, two folders):
        # the newer is read, on a tie the first by name, whatever order they came in
        keep, drop = ((d, old) if ((d.written or 0), old.source) > ((old.written or 0), d.source)
                      else (old, d))
        by_rank[d.rank] = keep
        twice += 1
        if twice <= 8:
            problems.append(f"rank {d.rank}: {drop.source} and {keep.source} both hold its "
                            f"dump; {keep.source} is read")
    if not by_rank:
        if problems or poll.enabled is not None:
            return FrAnalysis(dumps=poll.dumps, groups=(), findings=(), pattern=None,
                              problems=tuple(problems), enabled=poll.enabled)
        return None
    ranks = sorted(by_rank)
    world = sorted(set(ranks) | set(expected_ranks))
    groups = _groups(by_rank, world)
    waits = _waits(by_rank, groups)
    findings = _findings(groups, waits, by_rank, world, stack_ops or {})
    pattern = _pattern(findings, waits)
    wait_text = tuple((r, _wait_words(waits[r], by_rank[r])) for r in ranks if r in waits)
    return FrAnalysis(dumps=poll.dumps, groups=groups, findings=tuple(findings),
                      pattern=pattern, waits=wait_text, problems=tuple(problems),
                      enabled=poll.enabled if poll.enabled is not None else True)


def _groups(by_rank: Mapping[int, FrDump], world: list[int]) -> tuple[GroupView, ...]:
    configured: dict[str, tuple[int, ...]] = {}
    descs: dict[str, str] = {}
    mentioned: dict[str, set[int]] = {}
    for r, d in by_rank.items():
        for g in d.groups:
            if g.ranks and g.group not in configured:
                configured[g.group] = g.ranks
            if g.desc:
                descs.setdefault(g.group, g.desc)
        for s in d.states:
            mentioned.setdefault(s.group, set()).add(r)
        for e in d.entries:
            mentioned.setdefault(e.group, set()).add(r)
            if e.desc:
                descs.setdefault(e.group, e.desc)
    out = []
    for g in sorted(set(mentioned) | set(configured), key=_group_order):
        desc = descs.get(g, "")
        if g in configured:
            members, known = configured[g], True
        elif desc == "default_pg" or (g == "0" and not desc):
            members, known = tuple(world), True  # the default group is the world
        else:
            members, known = tuple(sorted(mentioned.get(g, ()))), False
        rows = []
        for r in members:
            d = by_rank.get(r)
            rows.append(_rank_in(g, r, d) if d is not None else
                        RankInGroup(rank=r, has_dump=False))
        out.append(GroupView(group=g, desc=desc, ranks=tuple(members), ranks_known=known,
                             members=tuple(rows)))
    return tuple(_mark_behind(v) for v in out)


def _group_order(g: str) -> tuple:
    return (0, int(g), "") if g.isdigit() else (1, 0, g)


def _rank_in(group: str, rank: int, d: FrDump) -> RankInGroup:
    state = next((s for s in d.states if s.group == group), None)
    mine = [e for e in d.entries if e.group == group and not e.is_p2p]
    done = [e for e in mine if e.done]
    pending = sorted((e for e in mine if not e.done), key=lambda e: (e.seq, e.record_id))
    completed_seq = max([e.seq for e in done], default=-1)
    enqueued = max([e.seq for e in mine], default=-1)
    if state is not None and not mine:
        # nothing of the group among the records read: its counters (ops, not sequence ids;
        # the same where the group runs no send/recv) are all there is
        completed_seq, enqueued = state.last_completed, state.last_enqueued
    completed = max(done, key=lambda e: e.record_id, default=None)
    first = pending[0] if pending else None
    age = None
    if first is not None and first.created_ns and d.written:
        age = max(0.0, d.written - first.created_ns / 1e9)
    return RankInGroup(rank=rank, last_completed=completed_seq, last_enqueued=enqueued,
                       completed=completed, pending=first, pending_count=len(pending),
                       age_s=age)


def _mark_behind(v: GroupView) -> GroupView:
    waiting = [m.pending.seq for m in v.members if m.pending is not None]
    if not waiting:
        return v
    top = max(waiting)
    rows = tuple(replace(m, behind=True) if m.has_dump and m.pending is None
                 and m.last_enqueued < top else m for m in v.members)
    return replace(v, members=rows)


def _waits(by_rank: Mapping[int, FrDump], groups: tuple[GroupView, ...]
           ) -> dict[int, FrEntry]:
    """Each rank's oldest pending collective (the one it blocks in), any group."""
    out: dict[int, FrEntry] = {}
    for v in groups:
        for m in v.members:
            if m.pending is None:
                continue
            cur = out.get(m.rank)
            if cur is None or _older(m.pending, cur):
                out[m.rank] = m.pending
    for r, d in by_rank.items():  # point-to-point ops, where the backend records them
        for e in d.entries:
            if e.is_p2p and not e.done and r not in out:
                out[r] = e
    return out


def _older(a: FrEntry, b: FrEntry) -> bool:
    if a.created_ns and b.created_ns:
        return a.created_ns < b.created_ns
    return a.record_id < b.record_id


def _wait_words(e: FrEntry, d: FrDump) -> str:
    age = ""
    if e.created_ns and d.written:
        age = f", {max(0.0, d.written - e.created_ns / 1e9):.0f} s"
    sizes = f" {_sizes_text(e)}" if e.input_sizes else ""
    return f"{entry_text(e)}{sizes}{age}"


def _sizes_text(e: FrEntry) -> str:
    shapes = ["x".join(map(str, s)) or "scalar" for s in e.input_sizes[:3]]
    more = ",..." if len(e.input_sizes) > 3 else ""
    dt = f" {e.dtypes[0]}" if e.dtypes else ""
    return f"[{','.join(shapes)}{more}]{dt}"


def _findings(groups, waits, by_rank, world, stack_ops) -> list[FrFinding]:
    out: list[FrFinding] = []
    view = {v.group: v for v in groups}
    missing = [r for r in world if r not in by_rank]
    # sides: the ranks pending at the same place (group, seq)
    sides: dict[tuple[str, int], list[int]] = {}
    for r, e in waits.items():
        if not e.is_p2p:
            sides.setdefault((e.group, e.seq), []).append(r)
    crossed: set[int] = set()
    if len({g for g, _ in sides}) >= 2:
        out_cross = _cross_group(sides, waits, view)
        if out_cross is not None:
            out.append(out_cross)
            crossed = set(out_cross.ranks)
    out += _mismatches(groups)
    out += _p2p(waits, by_rank, view, stack_ops)
    for v in groups:
        waiting = [m for m in v.members if m.pending is not None]
        if not waiting:
            continue
        late = [m for m in v.members if m.behind and m.rank not in crossed]
        if late:
            top = max(m.pending.seq for m in waiting)  # type: ignore[union-attr]
            e = max((m.pending for m in waiting), key=lambda x: x.seq)  # type: ignore
            last = ", ".join(f"rank {m.rank} at #{m.last_enqueued}" if m.last_enqueued >= 0
                             else f"rank {m.rank} with none yet" for m in late[:6])
            elsewhere = [m.rank for m in late if m.rank in waits]
            verb = "waits" if len(waiting) == 1 else "wait"
            text = (f"{label(m.rank for m in late)} never entered {e.op} #{top} of {v.name} "
                    f"that {label(m.rank for m in waiting)} {verb} in (last enqueued: {last})")
            if elsewhere:
                text += (f"; {label(elsewhere)} wait"
                         f"{'s' if len(elsewhere) == 1 else ''} elsewhere: "
                         + "; ".join(f"rank {r} in {entry_text(waits[r])}"
                                     for r in elsewhere[:3]))
            idle = [m.rank for m in late if m.rank not in waits]
            # a late rank that waits in another collective is held there in turn: the one
            # the wait leads to (not waiting in any) is the suspect
            text += (": the one the others wait for." if idle else
                     ": held there in turn, not the cause.")
            out.append(FrFinding(BEHIND, tuple(m.rank for m in late), (v.group,), text,
                                 suspects=tuple(idle)))
        absent = [m.rank for m in v.members if not m.has_dump]
        if absent and v.ranks_known:
            missing += [r for r in absent if r not in missing]
    if missing:
        text = (f"{label(missing)} left no Flight Recorder dump (not written yet, another node, "
                "or the rank is gone): what it was doing is unknown to the Flight Recorder.")
        out.append(FrFinding(MISSING, tuple(sorted(set(missing))), (), text,
                             suspects=tuple(sorted(set(missing)))))
    if not any(f.kind in CODE_BUGS for f in out) and len(sides) == 1 and waits:
        (g, seq), members = next(iter(sides.items()))
        e = waits[members[0]]
        if len(members) == len(waits) and all(not waits[r].is_p2p for r in members):
            text = (f"Every rank that waits ({label(members)}) is pending in {entry_text(e)}, "
                    f"issued from {site_text(e)}: the same collective on every rank. Not a code "
                    "path divergence: the network or a slow rank")
            late = [f for f in out if f.kind in (BEHIND, MISSING)]
            text += (f" ({label(r for f in late for r in f.ranks)} named above)." if late
                     else ".")
            out.append(FrFinding(SAME, tuple(sorted(members)), (g,), text))
    return out


def _cross_group(sides, waits, view) -> FrFinding | None:
    """Ranks pending in different groups, each side waiting for ranks that wait elsewhere."""
    cycle_ranks: set[int] = set()
    parts = []
    for (g, seq), members in sorted(sides.items(), key=lambda kv: min(kv[1])):
        v = view.get(g)
        if v is None:
            return None
        blockers = [m.rank for m in v.members
                    if m.rank not in members and m.last_enqueued < seq]
        if not blockers or any(b not in waits or waits[b].group == g for b in blockers):
            return None
        cycle_ranks |= set(members)
        parts.append((members, waits[members[0]], blockers))
    groups = tuple(dict.fromkeys(e.group for _, e, _ in parts))
    waits_text = ", ".join(f"{label(ms)} wait in {entry_text(e)}" for ms, e, _ in parts)
    orders = "; ".join(
        f"{label(ms)}: {view[e.group].name} first, then "
        + ", ".join(dict.fromkeys(view[waits[b].group].name for b in blockers
                                  if waits[b].group != e.group))
        for ms, e, blockers in parts)
    sites = {site_text(e) for _, e, _ in parts}
    text = (f"{waits_text}: the ranks enter the groups in opposite orders ({orders}), so each "
            "side waits for ranks that wait in the other group. A cross-group ordering "
            "deadlock: a code bug, not the network.")
    if len(sites) == 1:
        text += (f" Every side issued its collective from {next(iter(sites))}: one helper used "
                 "for both groups, which is why the stacks look alike.")
    return FrFinding(CROSS_GROUP, tuple(sorted(cycle_ranks)), groups, text)


def _mismatches(groups) -> list[FrFinding]:
    out = []
    for v in groups:
        for pick in ("pending", "completed"):
            at: dict[int, list[tuple[int, FrEntry]]] = {}
            for m in v.members:
                e = getattr(m, pick)
                if e is not None:
                    at.setdefault(e.seq, []).append((m.rank, e))
            for seq, rows in sorted(at.items()):
                kinds: dict[tuple, list[tuple[int, FrEntry]]] = {}
                for r, e in rows:
                    kinds.setdefault((e.op, e.input_sizes, e.dtypes), []).append((r, e))
                if len(kinds) < 2:
                    continue
                ordered = sorted(kinds.values(), key=lambda rs: (-len(rs), rs[0][0]))
                desc = "; ".join(f"{label(r for r, _ in rs)}: {rs[0][1].op} "
                                 f"{_sizes_text(rs[0][1])} from {site_text(rs[0][1])}"
                                 for rs in ordered[:4])
                odd = [r for rs in ordered[1:] for r, _ in rs]
                state = "wait in" if pick == "pending" else "completed"
                out.append(FrFinding(
                    MISMATCH, tuple(sorted(r for r, _ in rows)), (v.group,),
                    f"Collective #{seq} of {v.name} is not the same op on every rank ({state}: "
                    f"{desc}): the ranks called different collectives at the same point of the "
                    "group's sequence. A code path differs across ranks: compare the call "
                    "sites.", suspects=tuple(odd)))
                break  # the first mismatch of a group: later ones follow from it
            if any(f.groups == (v.group,) for f in out):
                break
    return out


def _p2p(waits, by_rank, view, stack_ops) -> list[FrFinding]:
    out = []
    recorded = {r: e for r, e in waits.items() if e.is_p2p}
    if recorded:
        unmatched = []
        for r, e in recorded.items():
            kind, peer = _peer(e, view)
            if kind is None or peer is None:
                continue
            other = recorded.get(peer)
            want = "recv" if kind == "send" else "send"
            ok = other is not None and _peer(other, view) == (want, r)
            if not ok:
                unmatched.append((r, kind, peer, other))
        if unmatched:
            desc = "; ".join(
                f"rank {r} {'sends to' if k == 'send' else 'receives from'} rank {p}, which "
                + (f"waits in {entry_text(o)}" if o is not None and not o.is_p2p else
                   f"{'sends to' if _peer(o, view)[0] == 'send' else 'receives from'} rank "
                   f"{_peer(o, view)[1]}" if o is not None else "has no pending op")
                for r, k, p, o in unmatched[:4])
            out.append(FrFinding(P2P_UNMATCHED, tuple(sorted(r for r, *_ in unmatched)), (),
                                 f"Point-to-point ops that do not pair up: {desc}. A pipeline "
                                 "schedule out of step: a code bug.",
                                 suspects=()))
        return out
    # gloo records no send/recv: read the stacks of the ranks the recorder shows idle
    p2p = {r: P2P_OPS[op] for r, op in stack_ops.items() if op in P2P_OPS and r not in waits}
    if len(p2p) >= 2 and len(set(p2p.values())) == 1 and not waits:
        kind = next(iter(p2p.values()))
        verb = "receives" if kind == "recv" else "sends"
        other = "sends" if kind == "recv" else "receives"
        out.append(FrFinding(
            P2P_UNMATCHED, tuple(sorted(p2p)), (),
            f"No collective is pending on any rank, yet {label(p2p)} wait in {kind} (their "
            f"stacks; this backend's Flight Recorder does not record send/recv): every waiting "
            f"rank {verb} and none {other}, so no pair can complete. A pipeline schedule out "
            "of step: a code bug, not the network."))
    return out


def _peer(e: FrEntry | None, view) -> tuple[str | None, int | None]:
    """('send', global peer) for ``send 0->1`` (group ranks mapped through the group)."""
    if e is None:
        return None, None
    op = e.op.strip()
    try:
        if op.startswith("send") and "->" in op:
            _, b = op.split(None, 1)[1].split("->")
            kind, peer = "send", int(b)
        elif op.startswith("recv") and "<-" in op:
            _, b = op.split(None, 1)[1].split("<-")
            kind, peer = "recv", int(b)
        else:
            return None, None
    except (ValueError, IndexError):
        return None, None
    v = view.get(e.group)
    if v is not None and v.ranks_known and 0 <= peer < len(v.ranks) and \
            v.desc != "default_pg":
        peer = v.ranks[peer]
    return kind, peer


def _pattern(findings, waits) -> str | None:
    kinds = {f.kind for f in findings}
    if kinds & set(CODE_BUGS):
        return "B"
    if SAME in kinds:
        return "C"
    return None


# -- the stack report and the outputs -----------------------------------------------------------

def stack_ops(report: Any) -> dict[int, str]:
    """rank -> the op its stack waits in (from a StackReport's classes)."""
    out: dict[int, str] = {}
    for c in getattr(report, "classes", ()) or ():
        if c.op is not None:
            for r in c.ranks:
                if r is not None and r >= 0:
                    out[r] = c.op.name
    return out


def apply(report: Any, fa: FrAnalysis | None) -> Any:
    """The stack report with the Flight Recorder's reading: its findings decide the pattern
    (and say so) where the ranks wait; without findings it only adds each rank's collective."""
    if fa is None:
        return report
    if not fa.findings:
        return replace(report, flight_recorder=fa)
    if report.verdict in (st.PROGRESSING, st.WORKING) and fa.pattern is not None:
        note = ("The Flight Recorder dumps show ranks pending in collectives, but the stacks "
                "move now: the dumps may be from an earlier stall.")
        return replace(report, flight_recorder=fa, notes=report.notes + (note,))
    pattern = fa.pattern
    if pattern == "C" and report.pattern not in (None, "C"):
        # the ranks that wait agree, and a rank is behind: where it is instead, its stack
        # says (an exit, another call): the stacks' pattern stands, the laggard is named
        pattern = None
    suspects = tuple(sorted(set(report.suspect_ranks) | set(fa.suspects)))
    overruled = bool(report.pattern and pattern and report.pattern != pattern)
    said = (f" The stacks alone read pattern {report.pattern} ({report.title}); the Flight "
            "Recorder decides." if overruled else "")
    text = f"Flight Recorder: {fa.text}{said}"
    if pattern is None:
        return replace(report, flight_recorder=fa, suspect_ranks=suspects,
                       explanation=f"{report.explanation} {text}".strip())
    titles = {CROSS_GROUP: "Process groups entered in opposite orders (Flight Recorder)",
              MISMATCH: "Different collectives at the same sequence id (Flight Recorder)",
              P2P_UNMATCHED: "Sends and receives do not pair up (Flight Recorder)",
              SAME: "All ranks wait in the same collective (Flight Recorder)"}
    kind = next(f.kind for f in fa.findings if f.kind in titles)
    verdict = st.HANG if report.verdict in (st.EMPTY, st.UNCLEAR) else report.verdict
    # the stacks' own reasoning would argue the pattern just overruled: keep its notes only
    stack_text = ("" if report.verdict == st.EMPTY else
                  " ".join(report.notes) if overruled else report.explanation)
    # a collective pending for a while in the dump is a stall seen over time, not one glance
    ages = [m.age_s for v in fa.groups for m in v.members if m.age_s is not None]
    confirmed = report.confirmed or max(ages, default=0.0) >= CONFIRM_AGE_S
    advice = tuple(NEXT[f.kind] for f in fa.findings if f.kind in NEXT)
    return replace(report, verdict=verdict, pattern=pattern, symptom_id=st.SYMPTOM_OF[pattern],
                   confirmed=confirmed, advice=report.advice + tuple(dict.fromkeys(advice)),
                   title=titles[kind], explanation=f"{text} {stack_text}".strip(),
                   suspect_ranks=suspects,
                   flight_recorder=replace(fa, stack_pattern=report.pattern))


def expected_of(snap: Any) -> set[int]:
    """The ranks the job has: its processes' ranks and those below their WORLD_SIZE."""
    ranks = {p.rank for p in snap.procs if p.rank is not None}
    ranks |= {d.rank for d in snap.departed if d.rank is not None}
    worlds = [p.world_size for p in snap.procs if getattr(p, "world_size", None)]
    if worlds and max(worlds) <= 1 << 16:
        ranks |= set(range(max(worlds)))
    return ranks


def recording(snap: Any) -> bool | None:
    """Whether the job's ranks record (their TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE);
    None when no rank says."""
    from rltui.parsing.flightrec import dump_paths_from_env
    said = [dump_paths_from_env(p.debug_env)[1] for p in snap.procs]
    said = [s for s in said if s is not None]
    return any(said) if said else None


def onset(fa: FrAnalysis | None, default: float) -> float:
    """When the oldest pending collective was issued (for a hang read from dumps alone)."""
    times = [m.pending.created_ns / 1e9 for v in (fa.groups if fa else ()) for m in v.members
             if m.pending is not None and m.pending.created_ns]
    return min(min(times), default) if times else default


def read_beside(report: Any, snap: Any) -> Any:
    """The stack report of a snapshot with its Flight Recorder dumps read in; and, where the
    stacks say pattern C and the ranks do not record, how to turn the recorder on."""
    poll = snap.flight_recorder
    fa = analyse(poll, expected_ranks=expected_of(snap), stack_ops=stack_ops(report)) \
        if poll is not None and (poll.dumps or poll.problems) else None
    if fa is not None and fa.groups:
        return apply(report, fa)
    if report.pattern == "C" and not (fa is not None and fa.groups):
        on = recording(snap) is True or (poll is not None and poll.enabled is True)
        report = replace(report, advice=report.advice + ((NO_DUMP_YET,) if on else (TURN_ON,)))
    return replace(report, flight_recorder=fa) if fa is not None else report


def _entry_json(e: FrEntry | None, age: float | None = None) -> dict[str, Any] | None:
    if e is None:
        return None
    out: dict[str, Any] = {
        "seq": e.seq, "op": e.op, "sizes": [list(s) for s in e.input_sizes],
        "dtypes": list(e.dtypes), "state": e.state,
        "frames": [{"name": f.name, "file": f.filename, "line": f.line} for f in e.frames],
        "call_site": site_text(e)}
    if e.is_p2p:
        out["p2p_seq"] = e.p2p_seq
    if age is not None:
        out["age_s"] = round(age, 1)
    return out


def analysis_json(fa: FrAnalysis | None) -> dict[str, Any] | None:
    """The ``flight_recorder`` object of the diagnose document (docs/diagnose-json.md)."""
    if fa is None:
        return None
    return {
        "sources": [{"rank": d.rank, "source": d.source, "version": d.version,
                     "entries": d.total, "status": d.status, "message": d.message,
                     "written": d.written} for d in fa.dumps],
        "enabled": fa.enabled,
        "groups": [{"group": v.group, "desc": v.desc, "name": v.name, "ranks": list(v.ranks),
                    "ranks_known": v.ranks_known,
                    "per_rank": [{"rank": m.rank, "has_dump": m.has_dump,
                                  "last_completed": _entry_json(m.completed) or (
                                      {"seq": m.last_completed} if m.last_completed >= 0
                                      else None),
                                  "last_enqueued": m.last_enqueued,
                                  "pending": _entry_json(m.pending, m.age_s),
                                  "pending_count": m.pending_count, "behind": m.behind}
                                 for m in v.members]} for v in fa.groups],
        "waits": [{"rank": r, "text": t} for r, t in fa.waits],
        "findings": [{"kind": f.kind, "ranks": list(f.ranks), "groups": list(f.groups),
                      "suspects": list(f.suspects), "text": f.text} for f in fa.findings],
        "pattern": fa.pattern,
        "stack_pattern": fa.stack_pattern,
        "problems": list(fa.problems),
    }


def groups_text(fa: FrAnalysis) -> list[str]:
    """Per group each rank's sequence ids, the laggard marked; then the findings and what
    could not be read (the plain report and the incident report)."""
    out = []
    for v in fa.groups[:32]:
        known = "" if v.ranks_known else " (ranks: those whose dumps name it)"
        out.append(f"{v.name}: {label(v.ranks) if v.ranks else 'ranks unknown'}{known}")
        for m in v.members[:64]:
            if not m.has_dump:
                out.append(f"  rank {m.rank:>4}: no dump")
                continue
            pend = (f"pending {m.pending.op} #{m.pending.seq}"
                    + (f" for {m.age_s:.0f} s" if m.age_s is not None else "")
                    if m.pending is not None else "nothing pending")
            mark = "  <- behind" if m.behind else ""
            out.append(f"  rank {m.rank:>4}: completed #{m.last_completed}, enqueued "
                       f"#{m.last_enqueued}, {pend}{mark}")
    out += [f"{f.kind}: {f.text}" for f in fa.findings]
    out += [f"unread: {p}" for p in fa.problems[:8]]
    if not fa.groups and fa.enabled is False:
        out.append("the ranks run without a Flight Recorder buffer (TORCH_FR_BUFFER_SIZE unset "
                   "or 0)")
    return out
