"""Symptoms read from the logs: steps-stalled, zero-step-completion, nccl-timeout, cuda-oom.

Pure. "Now" is the snapshot's timestamp: the clock for a live node, the time of the run (or
--now) for logs read offline; ``NodeSnapshot.now_source`` says which, and the evidence repeats it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rltui import units
from rltui.diagnosis import playbook
from rltui.diagnosis.evidence import Evidence, at_event, at_log
from rltui.diagnosis.oom import advice
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import LogEvent, LogFileState, NodeSnapshot, Symptom
from rltui.rankset import compact
from rltui.rankset import label as rank_label

OOM_KINDS = ("cuda-oom", "engine-oom")


def ref(log: LogFileState, event: LogEvent) -> str:
    """A file:line reference (``+N`` while the lines before a history window are uncounted)."""
    plus = "" if log.line_base_known else "+"
    if event.end_line > event.line_no:
        return f"{log.path}:{plus}{event.line_no}-{event.end_line}"
    return f"{log.path}:{plus}{event.line_no}"


def step_durations(log: LogFileState) -> list[float]:
    whens = [s.when for s in log.recent_steps]
    return [b - a for a, b in zip(whens, whens[1:]) if b > a]


def logged_step_times(log: LogFileState) -> list[float]:
    """The step times the log itself reports (verl's timing_s/step, AReaL's timing/step,
    step_time...), for steps whose lines carry no time and were read at once."""
    return [t for t in (s.metric("step_time") for s in log.recent_steps)
            if t is not None and t > 0]


def stall_limit(log: LogFileState, th: Thresholds) -> tuple[float, float | None]:
    # the intervals between the steps' own times; else the log's own timing field (a history
    # read at once has no intervals)
    durations = step_durations(log) or logged_step_times(log)
    from statistics import median as median_of  # statistics loads decimal and fractions
    median = median_of(durations) if durations else None
    limit = max(th.stall_floor_s, th.stall_factor * median) if median else th.stall_floor_s
    return limit, median


def _rank_of(log: LogFileState, snap: NodeSnapshot) -> int | None:
    if log.rank is not None:
        return log.rank
    for p in snap.procs:
        if p.pid == log.pid or log.path in (p.stdout_path, p.stderr_path):
            return p.rank
    return None


def _liveness(snap: NodeSnapshot) -> str | None:
    """"alive", "gone" (seen, then all exited), or None: never looked at, or no job process
    found on this node (logs read offline, or copied from elsewhere)."""
    if snap.source("procs") is None:
        return None
    if snap.live_procs:
        return "alive"
    return "gone" if snap.departed else None


def steps_stalled(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                  th: Thresholds) -> list[Symptom]:
    live = _liveness(snap)
    if live == "gone":
        return []  # nothing runs: an ended or crashed job, which other symptoms describe
    stalled = []
    # A departed rank's log stops because the rank left (rank-exited says so, with its log):
    # counted here it would read as a rank "alive" and stalled. So does the log of a rank's
    # earlier life, once torchrun elastic restarted the rank under a new pid writing elsewhere
    # (attempt_1/): its writer is gone while the rank runs.
    live_ranks = {p.rank for p in snap.live_procs if p.rank is not None}
    live_pids = {(p.host, p.pid) for p in snap.live_procs}
    left = {d.rank for d in snap.departed if d.rank is not None} - live_ranks
    for log in snap.logs:
        if not log.steps_seen or log.last_step_time is None:
            continue
        if left and _rank_of(log, snap) in left:
            continue
        if live_ranks and log.pid is not None and (log.host, log.pid) not in live_pids \
                and log.rank in live_ranks:
            continue
        age = snap.timestamp - log.last_step_time
        if age <= th.stall_floor_s:
            continue  # the limit is never below the floor: skip the median (hot with 512 logs)
        if finished(log):
            continue  # a completion banner after the last step: ended, not stalled
        limit, median = stall_limit(log, th)
        if age > limit:
            stalled.append((log, age, limit, median))
    if not stalled:
        return []
    evidence = Evidence()
    for log, age, limit, median in stalled:
        if median and not step_durations(log):
            typical = f"median step {median:.1f} s, as the log's own timing field says"
        elif median:
            typical = f"median step {median:.1f} s"
        elif log.steps_seen > 1:
            typical = f"{log.steps_seen} steps read at once, step time unknown"
        else:
            typical = "one step seen"
        evidence.add(f"{log.path}: last step {log.last_step} at "
                     f"{units.clock(log.last_step_time)}, {units.ago(age)} ago ({typical}; "
                     f"limit {limit:.0f} s)",
                     at_log(log.path, log.recent_steps[-1].line_no) if log.recent_steps
                     else None)
    evidence.extend(_hung_or_slow(snap, th))
    evidence.add(now_note(snap))
    ranks = tuple(sorted({r for r in (_rank_of(log, snap) for log, *_ in stalled)
                          if r is not None}))
    worst = max(age for _, age, _, _ in stalled)
    return [Symptom(
        id="steps-stalled",
        severity="critical" if live == "alive" else "warning",
        title=(f"no new step for {units.ago(worst)}"
               + (" while the job's processes are alive" if live == "alive" else "")
               + (f" ({rank_label(ranks)})" if ranks else "")),
        ranks=ranks,
        **evidence.fields(),
        next_steps=(
            "Hung, not slow? Ranks busy on CPU with idle GPUs spin in Python (a polling or "
            "rollout loop); ranks idle on both wait in a collective or a lock.",
            playbook.dump_all_ranks(snap.live_procs),
            "Look for a traceback, OOM or NCCL timeout in any rank's log just before the last "
            "step: one rank's exception leaves the others waiting.",
            playbook.SET_DEBUG_ENV,
        ),
        since=min(log.last_step_time for log, *_ in stalled if log.last_step_time),
    )]


def finished(log: LogFileState) -> bool:
    """A completion banner after the log's last step: the run ended, it did not stall."""
    last = log.recent_steps[-1].line_no if log.recent_steps else 0
    return any(e.kind == "completion" and e.line_no > last for e in log.events)


def _hung_or_slow(snap: NodeSnapshot, th: Thresholds) -> list[str]:
    """The playbook's check: are the processes busy on CPU, and are their GPUs idle?"""
    if _liveness(snap) is None:
        return ["process liveness unknown: logs read without a live job"]
    procs = snap.live_procs
    out = [f"job processes alive: {len(procs)} (ranks "
           f"{compact(p.rank for p in procs) or '-'})"]
    busy = [p for p in procs if (p.cpu_percent or 0) >= th.cpu_busy_pct]
    if busy:
        out.append(f"busy on CPU (>= {th.cpu_busy_pct:g}%): ranks "
                   f"{compact(p.rank for p in busy) or '-'} - spinning, not waiting")
    else:
        out.append("idle on CPU: every process waits in a blocking call")
    used = {p.gpu_index for p in procs if p.gpu_index is not None}
    gpus = [g for g in snap.gpus if g.index in used and g.util is not None]
    if gpus:
        idle = [g.index for g in gpus if g.util <= th.gpu_idle_pct]
        if len(idle) == len(gpus):
            out.append(f"their GPUs are idle ({', '.join(str(i) for i in idle)} at <= "
                       f"{th.gpu_idle_pct:g}%)")
        else:
            out.append(f"GPUs busy: {len(gpus) - len(idle)} of {len(gpus)}")
    return out


def now_note(snap: NodeSnapshot) -> str:
    return f"now = {units.clock(snap.timestamp)} ({snap.now_source or 'the clock of this run'})"


def events_of(snap: NodeSnapshot, kinds: Iterable[str]) -> list[tuple[LogFileState, LogEvent]]:
    wanted = set(kinds)
    return [(log, e) for log in snap.logs for e in log.events if e.kind in wanted]


def zero_step_completion(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                         th: Thresholds) -> list[Symptom]:
    if not snap.logs or any(log.steps_seen for log in snap.logs):
        return []
    banners = events_of(snap, ["completion"])
    live = _liveness(snap)
    ended_quietly = (live == "gone" and snap.departed
                     and not events_of(snap, ["traceback", "child-failed", *OOM_KINDS]))
    if not banners and not ended_quietly:
        return []
    evidence = Evidence()
    for log, e in banners[:4]:
        evidence.add(f"{ref(log, e)}: {e.summary}", at_event(log, e))
    if ended_quietly:
        evidence.add(f"all {len(snap.departed)} job processes exited without an error "
                        "in their logs")
    evidence.add(f"no step line in {len(snap.logs)} log(s) "
                    f"({', '.join(sorted({log.format for log in snap.logs}))})")
    if live == "alive":
        evidence.add(f"{len(snap.live_procs)} job process(es) still alive: probably hanging "
                        "in cleanup (destroy_process_group)")
    failures = events_of(snap, ["failure", "traceback"])
    for log, e in failures[:3]:
        evidence.add(f"{ref(log, e)}: {e.summary}", at_event(log, e))
    return [Symptom(
        id="zero-step-completion",
        severity="critical",
        title="training ended after 0 steps" + (" and processes still hang"
                                                if live == "alive" else ""),
        ranks=tuple(sorted({r for r in (_rank_of(log, snap) for log, _ in banners)
                            if r is not None})),
        **evidence.fields(),
        next_steps=(
            "An exception or early exit was swallowed by cleanup: look above the banner for "
            "'Training failed with exception' or a traceback on any rank.",
            "Check the data: empty batches come from parquet files without the prompt/"
            "reward_model columns or relative data.train_files paths.",
            playbook.dump_all_ranks(snap.live_procs),
        ),
        since=min((e.time or e.arrival for _, e in banners), default=None),
    )]


def nccl_timeout(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
                 th: Thresholds) -> list[Symptom]:
    found = events_of(snap, ["nccl-timeout"])
    stuck = events_of(snap, ["nccl-heartbeat"])
    if not found and not stuck:
        return []
    evidence = Evidence()
    for log, e in stuck[:4]:
        # The heartbeat monitor: the watchdog itself hung (a CUDA or NCCL call that never
        # returns), so no timeout could be reported; the process is taken down.
        secs = e.field("stuck_s")
        evidence.add(f"{ref(log, e)}: rank {e.field('rank')} process group {e.field('pg')}: "
                     "the NCCL watchdog got stuck"
                     + (f" for {secs:.0f} s" if isinstance(secs, (int, float)) else "")
                     + " (heartbeat monitor)", at_event(log, e))
    for log, e in found[:8]:
        timeout = e.field("timeout_ms")
        ran = e.field("ran_for_ms")
        evidence.add(
            f"{ref(log, e)}: rank {e.field('rank')} {e.field('op') or '?'} SeqNum "
            f"{e.field('seq')}" + (f" timed out after {timeout / 1000:.0f} s"
                                   if isinstance(timeout, (int, float)) else "")
            + (f" (ran {ran / 1000:.0f} s)" if isinstance(ran, (int, float)) else ""),
            at_event(log, e))
    # A collective is its process group and sequence number: a rank's status line for the same
    # work carries no op, so the op must not tell two reports of one collective apart.
    ops: dict[tuple, set] = {}
    for _, e in found:
        ops.setdefault((e.field("pg"), e.field("seq")), set()).update(
            [e.field("op")] if e.field("op") else [])
    collectives = sum(max(1, len(o)) for o in ops.values())  # one seq, two ops: a mismatch
    if not found:
        pass
    elif collectives == 1:
        evidence.add("every timeout is at the same collective: points to the network or a "
                        "slow rank rather than diverging code (pattern C)")
    else:
        evidence.add(f"{collectives} different collectives timed out: ranks may be on "
                        "different code paths (pattern B)")
    ranks = tuple(sorted({r for _, e in found + stuck if isinstance(r := e.field("rank"), int)}))
    title = (f"NCCL watchdog timeout on {len(found)} collective(s)" if found else
             f"NCCL watchdog stuck on {rank_label(ranks) if ranks else 'a rank'} (heartbeat "
             "monitor)")
    return [Symptom(
        id="nccl-timeout",
        severity="critical",
        title=title,
        ranks=ranks,
        **evidence.fields(),
        next_steps=(
            "Find the rank that never reached the collective: its log stops earlier, or its "
            "last completed work is lowest.",
            "Multi-node: check the interface and fabric (NCCL_SOCKET_IFNAME, NCCL_IB_DISABLE=0); "
            "relaunch with NCCL_DEBUG=INFO.",
            "Lower the timeout while debugging (NCCL_TIMEOUT=300) so the next hang fails fast.",
        ),
        since=min((e.time or e.arrival for _, e in found), default=None),
    )]


def cuda_oom(snap: NodeSnapshot, history: Sequence[NodeSnapshot],
             th: Thresholds) -> list[Symptom]:
    found = events_of(snap, OOM_KINDS)
    if not found:
        return []
    evidence, steps = Evidence(), []
    fragmented = False
    for log, e in found[:8]:
        if e.kind == "engine-oom":
            evidence.add(f"{ref(log, e)}: {e.summary}", at_event(log, e))
            continue
        parts = [f"tried to allocate {units.gib(e.field('requested'))}"]
        if e.field("free") is not None:
            parts.append(f"{units.gib(e.field('free'))} free of {units.gib(e.field('capacity'))}")
        if e.field("allocated") is not None:
            parts.append(f"PyTorch allocated {units.gib(e.field('allocated'))}")
        reserved = e.field("reserved_unallocated")
        if isinstance(reserved, (int, float)):
            parts.append(f"reserved but unallocated {units.gib(reserved)}")
            requested = e.field("requested")
            if isinstance(requested, (int, float)) and reserved >= requested:
                fragmented = True
        gpu = e.field("gpu")
        evidence.add(f"{ref(log, e)}: " + (f"GPU {gpu}: " if gpu is not None else "")
                     + ", ".join(parts), at_event(log, e))
    if fragmented:
        steps.append("Reserved-but-unallocated memory exceeds the request: fragmentation. Set "
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.")
    engines = [e for _, e in found if e.kind == "engine-oom"]
    if any(e.field("phase") != "serving" for e in engines):
        steps.append("Inference engine start: lower gpu_memory_utilization / "
                     "--mem-fraction-static, and look for an orphaned engine process "
                     "(VLLM::EngineCore) still holding GPU memory.")
    if any(e.field("phase") == "serving" for e in engines):
        steps.append("Inference engine while serving: its KV-cache pool ran out; lower the "
                     "concurrency (--max-running-requests, max_num_seqs) or the chunked "
                     "prefill size, or give the pool more memory (--mem-fraction-static).")
    # The keys of the job's own framework (the triage's table), or general words: never
    # another framework's keys.
    steps += advice.next_steps(advice.job_framework(snap, (e.text for _, e in found)))
    ranks = tuple(sorted({r for r in (_rank_of(log, snap) for log, _ in found) if r is not None}))
    # The caching allocator's warning (torch >= 2.8) fires on a failed attempt that a retry
    # may have rescued: alone, it is a warning, not a crash.
    retried = all(e.field("warning") is True for _, e in found)
    return [Symptom(
        id="cuda-oom",
        severity="warning" if retried else "critical",
        title=(f"CUDA allocation failed and was retried ({len(found)} in the logs)" if retried
               else f"CUDA out of memory ({len(found)} in the logs)")
              + (f" on {rank_label(ranks)}" if ranks else ""),
        ranks=ranks,
        **evidence.fields(),
        next_steps=tuple(steps),
        since=min((e.time or e.arrival for _, e in found), default=None),
    )]


ERROR_KINDS = ("traceback", "failure", "child-failed", *OOM_KINDS)


def last_error(snap: NodeSnapshot, rank: int | None, pid: int | None,
               paths: Iterable[str | None] = (), kinds: Iterable[str] = ERROR_KINDS) -> str | None:
    """The newest traceback/OOM/failure in the log of one rank, as ``file:line: summary``."""
    found = last_error_event(snap, rank, pid, paths, kinds)
    return f"{ref(*found)}: {found[1].summary}" if found else None


def last_error_event(snap: NodeSnapshot, rank: int | None, pid: int | None,
                     paths: Iterable[str | None] = (), kinds: Iterable[str] = ERROR_KINDS
                     ) -> tuple[LogFileState, LogEvent] | None:
    """The newest traceback/OOM/failure in the log of one rank, and its log."""
    wanted = {p for p in paths if p}
    kinds = set(kinds)
    best: tuple[float, LogFileState, LogEvent] | None = None
    for log in snap.logs:
        if not ((rank is not None and log.rank == rank) or (pid and log.pid == pid)
                or log.path in wanted):
            continue
        for e in log.events:
            if e.kind in kinds:
                when = e.time or e.arrival
                if best is None or when >= best[0]:
                    best = (when, log, e)
    return best[1:] if best else None
