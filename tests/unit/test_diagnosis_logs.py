"""Symptoms read from the logs (steps-stalled, zero-step-completion, nccl-timeout, cuda-oom),
last_error, and the log side of rank-exited. Snapshots are built directly; time is explicit."""

from __future__ import annotations

import time

import pytest

from rltui import model
from rltui.diagnosis import diagnose
from rltui.diagnosis.logs import (
    cuda_oom,
    last_error,
    nccl_timeout,
    now_note,
    stall_limit,
    steps_stalled,
    zero_step_completion,
)
from rltui.diagnosis.ranks import rank_exited
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import (
    DepartedRank,
    GpuSample,
    LogEvent,
    LogFileState,
    NodeSnapshot,
    ProcInfo,
    SourceState,
    StepRecord,
)

TH = Thresholds()  # stall_factor 5, stall_floor_s 60, cpu_busy_pct 80, gpu_idle_pct 5
T0 = 1_800_000_000.0
GIB = 2**30


def clock(t):
    return time.strftime("%H:%M:%S", time.localtime(t))


def steps_at(*whens, first=1, timed=True):
    """Steps numbered from ``first``, one per time; the time is the line's own or the arrival."""
    return tuple(StepRecord(step=first + i, line_no=10 * (i + 1),
                            arrival=w if not timed else w + 0.5, time=w if timed else None)
                 for i, w in enumerate(whens))


def log(path="/logs/train.log", steps=(), events=(), rank=None, pid=None, fmt="verl",
        line_base_known=True):
    last = steps[-1] if steps else None
    return LogFileState(path=path, rank=rank, pid=pid, format=fmt, steps_seen=len(steps),
                        last_step=last.step if last else None,
                        last_step_time=last.when if last else None,
                        last_step_arrival=last.arrival if last else None,
                        recent_steps=tuple(steps), events=tuple(events),
                        line_base_known=line_base_known)


def ev(kind, line_no, end_line=None, summary=None, arrival=T0, time=None, **fields):
    return LogEvent(kind=kind, line_no=line_no, end_line=end_line or line_no, arrival=arrival,
                    summary=summary or f"{kind} here", time=time,
                    fields=tuple(fields.items()))


def proc(rank, cpu=1.0, gpu=None, pid=None, state="sleeping", stdout=None):
    return ProcInfo(pid=pid or 100 + rank, rank=rank, cpu_percent=cpu, gpu_index=gpu,
                    state=state, stdout_path=stdout)


def gone(rank, since, pid=None, info=None):
    return DepartedRank(pid=pid or 100 + rank, rank=rank, last_seen=since - 1, gone_since=since,
                        info=info)


def snap(now, logs=(), procs=None, departed=(), gpus=(), now_source=""):
    """``procs=None``: the process source was never looked at (logs read offline)."""
    sources = () if procs is None else (SourceState("procs", model.OK, now, now),)
    return NodeSnapshot(timestamp=now, logs=tuple(logs), procs=tuple(procs or ()),
                        departed=tuple(departed), gpus=tuple(gpus), sources=sources,
                        now_source=now_source)


def run(rule, s, th=TH):
    return rule(s, [s], th)


def one(rule, s, th=TH):
    found = run(rule, s, th)
    assert len(found) == 1, found
    return found[0]


EVERY_30 = steps_at(T0, T0 + 30, T0 + 60, T0 + 90, T0 + 120)  # median 30 s: limit 150 s
LAST_30 = T0 + 120
EVERY_5 = steps_at(T0, T0 + 5, T0 + 10, T0 + 15)  # 5 x 5 s = 25 s < floor: limit 60 s
LAST_5 = T0 + 15


# -- steps-stalled: when ------------------------------------------------------------------------

@pytest.mark.parametrize(("steps", "last", "age", "fires"), [
    (EVERY_30, LAST_30, 151, True),
    (EVERY_30, LAST_30, 150, False),  # exactly the limit: not yet
    (EVERY_30, LAST_30, 149, False),
    (EVERY_30, LAST_30, 61, False),  # over the floor but under k x median
    (EVERY_5, LAST_5, 61, True),  # k x median is under the floor: the floor rules
    (EVERY_5, LAST_5, 59, False),
    (steps_at(T0), T0, 61, True),  # one step: no median, the floor
    (steps_at(T0), T0, 60, False),
])
def test_fires_past_max_of_k_times_median_and_floor(steps, last, age, fires):
    found = run(steps_stalled, snap(last + age, [log(steps=steps)]))
    assert bool(found) is fires


def test_the_limit_and_median():
    assert stall_limit(log(steps=EVERY_30), TH) == (150.0, 30.0)
    assert stall_limit(log(steps=EVERY_5), TH) == (60.0, 5.0)
    assert stall_limit(log(steps=steps_at(T0)), TH) == (60.0, None)


def test_custom_thresholds_are_used():
    th = Thresholds(stall_factor=2.0, stall_floor_s=10.0)
    assert run(steps_stalled, snap(LAST_30 + 61, [log(steps=EVERY_30)]), th)
    assert not run(steps_stalled, snap(LAST_30 + 59, [log(steps=EVERY_30)]), th)
    assert run(steps_stalled, snap(LAST_5 + 11, [log(steps=EVERY_5)]), th)


def test_the_line_time_counts_not_the_arrival():
    # read much later than written: the step's own time is what the age is measured from
    steps = tuple(StepRecord(step=i, line_no=i, arrival=T0 + 5000, time=T0 + 10 * i)
                  for i in range(1, 4))
    assert run(steps_stalled, snap(T0 + 5000, [log(steps=steps)]))


def test_logs_without_steps_are_not_stalled():
    s = snap(T0 + 10_000, [log(events=(ev("traceback", 3),))])
    assert run(steps_stalled, s) == []


def test_not_when_the_job_s_processes_are_all_gone():
    s = snap(LAST_30 + 1000, [log(steps=EVERY_30, rank=0)], procs=(),
             departed=[gone(0, LAST_30 + 10), gone(1, LAST_30 + 10)])
    assert run(steps_stalled, s) == []


def test_not_when_only_zombies_remain():
    s = snap(LAST_30 + 1000, [log(steps=EVERY_30)], procs=(proc(0, state="zombie"),),
             departed=[gone(0, LAST_30 + 10)])
    assert run(steps_stalled, s) == []


# -- steps-stalled: severity and evidence ---------------------------------------------------------

def test_critical_while_the_job_s_processes_are_alive():
    s = snap(LAST_30 + 600, [log(steps=EVERY_30, rank=0)], procs=(proc(0), proc(1)))
    sym = one(steps_stalled, s)
    assert sym.id == "steps-stalled" and sym.severity == "critical"
    assert "while the job's processes are alive" in sym.title
    assert "10 min" in sym.title
    assert sym.ranks == (0,)
    assert sym.since == LAST_30
    assert any("job processes alive: 2 (ranks 0-1)" in e for e in sym.evidence)
    assert any("py-spy dump --pid $p" in n and "100 101" in n for n in sym.next_steps)


def test_warning_when_no_process_was_looked_at():
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30)]))
    assert sym.severity == "warning"
    assert "alive" not in sym.title
    assert any("process liveness unknown" in e for e in sym.evidence)


def test_warning_when_the_process_source_found_no_job():
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30)], procs=()))
    assert sym.severity == "warning"


def test_evidence_per_stalled_log_with_its_numbers():
    path = "/logs/rank0.log"
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(path, steps=EVERY_30)]))
    assert sym.evidence[0] == (f"{path}: last step 5 at {clock(LAST_30)}, 10 min ago "
                               "(median step 30.0 s; limit 150 s)")


def test_evidence_says_when_only_one_step_was_seen():
    sym = one(steps_stalled, snap(T0 + 90, [log(steps=steps_at(T0))]))
    assert "one step seen; limit 60 s" in sym.evidence[0]
    assert "90 s ago" in sym.evidence[0]


def test_evidence_does_not_claim_one_step_when_several_share_a_time():
    steps = steps_at(T0, T0, T0, T0, T0, T0, T0, timed=False)
    lg = log(steps=steps)
    assert lg.steps_seen == 7
    sym = one(steps_stalled, snap(T0 + 3600, [lg]))
    assert "one step seen" not in sym.evidence[0]


def test_only_the_stalled_logs_are_reported():
    fresh = log("/logs/rank1.log", steps=steps_at(LAST_30 + 500, LAST_30 + 590), rank=1)
    old = log("/logs/rank0.log", steps=EVERY_30, rank=0)
    sym = one(steps_stalled, snap(LAST_30 + 600, [old, fresh]))
    assert sym.ranks == (0,)
    assert not any("/logs/rank1.log" in e for e in sym.evidence)
    assert "(rank 0)" in sym.title


def test_a_departed_rank_s_log_is_not_a_stall_of_the_live_ranks():
    """Rank 2 crashed; its log stopped with it (rank-exited reports it). Ranks 0-1 are
    alive and stopped stepping too: the stall names them, not rank 2 "alive"."""
    logs = [log(f"/logs/rank{r}.log", steps=EVERY_30, rank=r) for r in range(3)]
    procs = (proc(0, pid=100), proc(1, pid=101))
    sym = one(steps_stalled, snap(LAST_30 + 600, logs, procs=procs,
                                  departed=(gone(2, LAST_30, pid=102),)))
    assert sym.ranks == (0, 1) and "(ranks 0-1)" in sym.title
    assert not any("/logs/rank2.log" in e for e in sym.evidence)
    # rank 2's log alone stalled while the others step: nothing stalled here
    fresh = [log(f"/logs/rank{r}.log", steps=steps_at(LAST_30 + 500, LAST_30 + 590), rank=r)
             for r in range(2)]
    assert steps_stalled(snap(LAST_30 + 600, [*fresh, logs[2]], procs=procs,
                              departed=(gone(2, LAST_30, pid=102),)), [], TH) == []


def test_the_log_of_a_rank_s_earlier_life_is_no_stall_once_torchrun_restarted_it():
    """torchrun elastic restarted ranks 0-1 under new pids, each writing to a new file
    (attempt_1/): the files of their first lives stopped with those processes, and the
    snapshot no longer counts those as departed (the rank runs). The live ranks step: nothing
    stalled."""
    old = [log(f"/tmp/tr/attempt_0/{r}/stdout.log", steps=EVERY_30, rank=r, pid=100 + r)
           for r in range(2)]
    new = [log(f"/tmp/tr/attempt_1/{r}/stdout.log", rank=r, pid=200 + r,
               steps=steps_at(LAST_30 + 500, LAST_30 + 590)) for r in range(2)]
    procs = (proc(0, pid=200), proc(1, pid=201))
    assert steps_stalled(snap(LAST_30 + 600, [*old, *new], procs=procs), [], TH) == []
    # the new lives stalled: their files are the evidence, not the old ones
    stale = [log(f"/tmp/tr/attempt_1/{r}/stdout.log", rank=r, pid=200 + r, steps=EVERY_30)
             for r in range(2)]
    sym = one(steps_stalled, snap(LAST_30 + 600, [*old, *stale], procs=procs))
    assert sym.ranks == (0, 1) and not any("attempt_0" in e for e in sym.evidence)


def test_busy_cpu_is_spinning():
    procs = (proc(0, cpu=99.0, gpu=0), proc(1, cpu=85.0, gpu=1))
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30)], procs=procs))
    assert "busy on CPU (>= 80%): ranks 0-1 - spinning, not waiting" in sym.evidence


def test_idle_cpu_is_waiting():
    procs = (proc(0, cpu=0.5), proc(1, cpu=None))
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30)], procs=procs))
    assert "idle on CPU: every process waits in a blocking call" in sym.evidence
    assert not any("busy on CPU" in e for e in sym.evidence)


def test_idle_gpus_of_the_job_are_named():
    procs = (proc(0, gpu=0), proc(1, gpu=1))
    gpus = (GpuSample(0, "H100", "GPU-0", util=0.0), GpuSample(1, "H100", "GPU-1", util=5.0),
            GpuSample(2, "H100", "GPU-2", util=100.0))  # not the job's: left out
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30)], procs=procs, gpus=gpus))
    assert "their GPUs are idle (0, 1 at <= 5%)" in sym.evidence


def test_some_busy_gpus_are_counted():
    procs = (proc(0, gpu=0), proc(1, gpu=1))
    gpus = (GpuSample(0, "H100", "GPU-0", util=0.0), GpuSample(1, "H100", "GPU-1", util=97.0))
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30)], procs=procs, gpus=gpus))
    assert "GPUs busy: 1 of 2" in sym.evidence
    assert not any("their GPUs are idle" in e for e in sym.evidence)


def test_evidence_says_what_now_was():
    s = snap(LAST_30 + 600, [log(steps=EVERY_30)], now_source="--now 2027-01-01T00:00:00")
    sym = one(steps_stalled, s)
    assert sym.evidence[-1] == f"now = {clock(LAST_30 + 600)} (--now 2027-01-01T00:00:00)"
    plain = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30)]))
    assert plain.evidence[-1] == f"now = {clock(LAST_30 + 600)} (the clock of this run)"
    assert now_note(snap(T0)) == f"now = {clock(T0)} (the clock of this run)"


def test_rank_from_the_process_that_writes_the_log():
    path = "/var/run/job/out-7.txt"
    procs = (proc(2, stdout=path), proc(3))
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(path, steps=EVERY_30)], procs=procs))
    assert sym.ranks == (2,)


def test_rank_from_the_pid_that_writes_the_log():
    procs = (proc(4, pid=4444), proc(5))
    sym = one(steps_stalled, snap(LAST_30 + 600, [log(steps=EVERY_30, pid=4444)], procs=procs))
    assert sym.ranks == (4,)


def test_the_log_s_own_rank_wins_and_unknown_ranks_are_left_out():
    logs = [log("/a.log", steps=EVERY_30, rank=6), log("/b.log", steps=EVERY_30)]
    procs = (proc(2, stdout="/a.log"),)
    sym = one(steps_stalled, snap(LAST_30 + 600, logs, procs=procs))
    assert sym.ranks == (6,)


def test_a_log_that_completed_after_its_last_step_is_not_stalled_offline():
    banner = ev("completion", 200, summary="training finished: Training completed",
                arrival=LAST_30 + 5)
    s = snap(LAST_30 + 7200, [log(steps=EVERY_30, events=(banner,), fmt="torchtitan")])
    assert run(steps_stalled, s) == []


# -- zero-step-completion -------------------------------------------------------------------------

BANNER = ev("completion", 12, summary="training finished: Training completes!",
            time=T0 + 5, framework="areal")


def test_banner_without_steps_is_critical():
    s = snap(T0 + 60, [log("/logs/main.log", events=(BANNER,), fmt="unknown")])
    sym = one(zero_step_completion, s)
    assert sym.severity == "critical"
    assert sym.title == "training ended after 0 steps"
    assert "/logs/main.log:12: training finished: Training completes!" in sym.evidence
    assert "no step line in 1 log(s) (unknown)" in sym.evidence
    assert sym.since == T0 + 5


def test_banner_with_steps_in_any_log_is_nothing():
    logs = [log("/logs/main.log", events=(BANNER,)), log("/logs/rank0.log", steps=EVERY_30)]
    assert run(zero_step_completion, snap(T0 + 60, logs)) == []
    same = [log("/logs/main.log", steps=EVERY_5, events=(BANNER,))]
    assert run(zero_step_completion, snap(T0 + 60, same)) == []


def test_banner_while_processes_are_alive_says_they_hang():
    s = snap(T0 + 60, [log(events=(BANNER,), rank=0)], procs=(proc(0), proc(1)))
    sym = one(zero_step_completion, s)
    assert sym.title == "training ended after 0 steps and processes still hang"
    assert any("2 job process(es) still alive" in e and "destroy_process_group" in e
               for e in sym.evidence)
    assert sym.ranks == (0,)


def test_banner_with_a_failure_above_cites_it():
    failure = ev("failure", 1, summary="Training failed with exception: boom")
    tb = ev("traceback", 2, 9, summary="RuntimeError: boom")
    s = snap(T0 + 60, [log("/l.log", events=(failure, tb, BANNER))])
    sym = one(zero_step_completion, s)
    assert "/l.log:1: Training failed with exception: boom" in sym.evidence
    assert "/l.log:2-9: RuntimeError: boom" in sym.evidence


def test_all_processes_exiting_quietly_without_steps_fires():
    s = snap(T0 + 60, [log("/logs/rank0.log", fmt="unknown"), log("/logs/rank1.log", fmt="verl")],
             procs=(), departed=[gone(0, T0), gone(1, T0)])
    sym = one(zero_step_completion, s)
    assert "all 2 job processes exited without an error in their logs" in sym.evidence
    assert "no step line in 2 log(s) (unknown, verl)" in sym.evidence
    assert sym.since is None  # no banner to date it


@pytest.mark.parametrize("kind", ["traceback", "child-failed", "cuda-oom", "engine-oom"])
def test_an_error_in_the_logs_is_not_a_quiet_exit(kind):
    s = snap(T0 + 60, [log(events=(ev(kind, 4),))], procs=(), departed=[gone(0, T0)])
    assert run(zero_step_completion, s) == []


def test_an_error_and_a_banner_fire_without_the_quiet_exit_line():
    s = snap(T0 + 60, [log(events=(ev("traceback", 3, 8, summary="KeyError: 'x'"), BANNER))],
             procs=(), departed=[gone(0, T0)])
    sym = one(zero_step_completion, s)
    assert not any("exited without an error" in e for e in sym.evidence)
    assert any("KeyError: 'x'" in e for e in sym.evidence)


def test_quiet_exit_needs_logs_and_a_departed_process():
    assert run(zero_step_completion, snap(T0, [], procs=(), departed=[gone(0, T0)])) == []
    assert run(zero_step_completion, snap(T0, [log()], procs=())) == []  # nothing ever ran
    assert run(zero_step_completion, snap(T0, [log()])) == []  # offline, no banner
    assert run(zero_step_completion, snap(T0, [log()], procs=(proc(0),))) == []  # still running


# -- nccl-timeout ---------------------------------------------------------------------------------

def watchdog(rank, seq, op="ALLREDUCE", line_no=1, when=None, **more):
    fields = {"rank": rank, "pg": 0, "seq": seq, "op": op, "timeout_ms": 1_800_000,
              "ran_for_ms": 1_800_068, "timed_out": True}
    fields.update(more)
    return ev("nccl-timeout", line_no, summary=f"NCCL watchdog timeout on rank {rank}",
              time=when, **fields)


def test_the_same_collective_everywhere_is_pattern_c():
    logs = [log("/logs/rank0.log", events=(watchdog(0, 77, when=T0 + 3),)),
            log("/logs/rank1.log", events=(watchdog(1, 77, line_no=5),))]
    sym = one(nccl_timeout, snap(T0 + 60, logs))
    assert sym.severity == "critical"
    assert sym.title == "NCCL watchdog timeout on 2 collective(s)"
    assert sym.ranks == (0, 1)
    assert sym.evidence[0] == ("/logs/rank0.log:1: rank 0 ALLREDUCE SeqNum 77 timed out after "
                               "1800 s (ran 1800 s)")
    assert sym.evidence[1].startswith("/logs/rank1.log:5: rank 1 ALLREDUCE SeqNum 77")
    assert "pattern C" in sym.evidence[-1] and "network" in sym.evidence[-1]
    assert not any("pattern B" in e for e in sym.evidence)
    assert any("NCCL_SOCKET_IFNAME" in n for n in sym.next_steps)


@pytest.mark.parametrize(("second_op", "second_seq"), [("ALLREDUCE", 78), ("ALLGATHER", 77)])
def test_different_collectives_are_pattern_b(second_op, second_seq):
    logs = [log("/a.log", events=(watchdog(0, 77),)),
            log("/b.log", events=(watchdog(1, second_seq, op=second_op),))]
    sym = one(nccl_timeout, snap(T0 + 60, logs))
    assert "2 different collectives timed out" in sym.evidence[-1]
    assert "pattern B" in sym.evidence[-1]
    assert not any("pattern C" in e for e in sym.evidence)


def test_ranks_come_from_the_fields_not_the_file():
    events = (watchdog(118, 9), watchdog(119, 9, line_no=2), watchdog(None, 9, line_no=3))
    sym = one(nccl_timeout, snap(T0, [log(rank=0, events=events)]))
    assert sym.ranks == (118, 119)
    assert "rank None ALLREDUCE SeqNum 9" in sym.evidence[2]


def test_a_status_line_without_numbers_gives_short_evidence():
    status = ev("nccl-timeout", 4, rank=4, pg=2, seq=610, last_enqueued=616,
                last_completed=609, timed_out=None)
    sym = one(nccl_timeout, snap(T0, [log("/n.log", events=(status,), line_base_known=False)]))
    assert sym.evidence[0] == "/n.log:+4: rank 4 ? SeqNum 610"


def test_a_status_line_at_the_same_seq_is_the_same_collective():
    status = ev("nccl-timeout", 4, rank=1, pg=0, seq=77, last_enqueued=80,
                last_completed=76, timed_out=None)
    logs = [log("/a.log", events=(watchdog(0, 77),)), log("/b.log", events=(status,))]
    sym = one(nccl_timeout, snap(T0, logs))
    assert "pattern C" in sym.evidence[-1]


def test_no_timeout_no_symptom():
    assert run(nccl_timeout, snap(T0, [log(events=(ev("traceback", 1),))])) == []


# -- cuda-oom -------------------------------------------------------------------------------------

def oom(requested=2 * GIB, reserved=6 * GIB, gpu=3, line_no=2, end_line=14, when=None, **more):
    fields = {"exception": "torch.OutOfMemoryError", "requested": requested,
              "format": "current", "gpu": gpu, "capacity": 80 * GIB, "free": 1 * GIB,
              "allocated": 70 * GIB, "reserved_unallocated": reserved}
    fields.update(more)
    return ev("cuda-oom", line_no, end_line, summary="CUDA out of memory", time=when, **fields)


def test_the_numbers_are_in_the_evidence():
    sym = one(cuda_oom, snap(T0, [log("/logs/rank3.log", rank=3, events=(oom(),))]))
    assert sym.severity == "critical"
    assert sym.title == "CUDA out of memory (1 in the logs) on rank 3"
    assert sym.ranks == (3,)
    assert sym.evidence == (
        ("/logs/rank3.log:2-14: GPU 3: tried to allocate 2.00 GiB, 1.00 GiB free of 80.00 GiB, "
         "PyTorch allocated 70.00 GiB, reserved but unallocated 6.00 GiB"),)


@pytest.mark.parametrize(("reserved", "fragmented"), [
    (6 * GIB, True),
    (2 * GIB, True),  # exactly the request
    (2 * GIB - 1, False),
    (None, False),  # the old format has no such number
])
def test_fragmentation_advice_when_reserved_covers_the_request(reserved, fragmented):
    sym = one(cuda_oom, snap(T0, [log(events=(oom(reserved=reserved),))]))
    advice = any("expandable_segments:True" in n for n in sym.next_steps)
    assert advice is fragmented
    # no process and no framework in the traceback: general words, no framework's keys
    # (tests/unit/test_oom_advice.py has each framework's)
    assert any("micro batch size" in n for n in sym.next_steps)
    assert not any("actor_rollout_ref" in n for n in sym.next_steps)


def test_old_format_without_gpu_or_free_numbers():
    old = ev("cuda-oom", 5, summary="CUDA out of memory", requested=20 * 2**20, format="old",
             allocated=9 * GIB)
    sym = one(cuda_oom, snap(T0, [log("/o.log", events=(old,))]))
    assert sym.evidence == ("/o.log:5: tried to allocate 0.02 GiB, PyTorch allocated 9.00 GiB",)
    assert sym.ranks == ()
    assert sym.title == "CUDA out of memory (1 in the logs)"


def test_engine_oom_gets_the_engine_advice():
    engine = ev("engine-oom", 3, 12, summary="vLLM: no available memory for the cache blocks",
                engine="vllm", reason="no-cache-blocks")
    sym = one(cuda_oom, snap(T0, [log("/v.log", events=(engine,))]))
    assert sym.evidence == ("/v.log:3-12: vLLM: no available memory for the cache blocks",)
    assert any("gpu_memory_utilization" in n and "VLLM::EngineCore" in n for n in sym.next_steps)
    assert not any("expandable_segments" in n for n in sym.next_steps)


def test_several_ooms_on_several_ranks():
    logs = [log("/r0.log", rank=0, events=(oom(gpu=0, when=T0 + 9),)),
            log("/r1.log", rank=1, events=(oom(gpu=1, reserved=0),))]
    sym = one(cuda_oom, snap(T0 + 60, logs))
    assert sym.title == "CUDA out of memory (2 in the logs) on ranks 0-1"
    assert sym.ranks == (0, 1)
    assert len(sym.evidence) == 2


def test_no_oom_no_symptom():
    assert run(cuda_oom, snap(T0, [log(events=(ev("nccl-timeout", 1, rank=0),))])) == []


# -- last_error -----------------------------------------------------------------------------------

def test_last_error_is_the_newest_error_of_that_rank_s_log():
    events = (ev("traceback", 1, 9, summary="ValueError: a", time=T0 + 1),
              ev("cuda-oom", 20, 30, summary="CUDA out of memory", time=T0 + 5),
              ev("completion", 40, summary="done", time=T0 + 9),  # not an error
              ev("nccl-timeout", 41, summary="timeout", time=T0 + 9))  # not this rank's cause
    logs = [log("/r1.log", rank=1, events=events),
            log("/r2.log", rank=2, events=(ev("traceback", 3, summary="KeyError", time=T0 + 99),))]
    s = snap(T0 + 100, logs)
    assert last_error(s, 1, None) == "/r1.log:20-30: CUDA out of memory"
    assert last_error(s, 2, None) == "/r2.log:3: KeyError"
    assert last_error(s, 7, None) is None


def test_last_error_by_pid_or_by_path():
    tb = ev("traceback", 4, 14, summary="KeyError: 'final_answer'")
    s = snap(T0, [log("/out/p.txt", pid=555, events=(tb,))])
    assert last_error(s, None, 555) == "/out/p.txt:4-14: KeyError: 'final_answer'"
    assert last_error(s, None, None, ["/out/p.txt", None]) == \
        "/out/p.txt:4-14: KeyError: 'final_answer'"
    assert last_error(s, None, 556, ["/elsewhere"]) is None


def test_last_error_marks_uncounted_line_numbers():
    s = snap(T0, [log("/big.log", rank=0, line_base_known=False,
                      events=(ev("failure", 8, summary="Training failed"),))])
    assert last_error(s, 0, None) == "/big.log:+8: Training failed"


# -- rank-exited: the log side --------------------------------------------------------------------

def test_a_departed_rank_s_last_traceback_is_cited_with_file_and_line():
    path = "/job/out/rank1.out"
    info = ProcInfo(pid=101, rank=1, stdout_path=path)
    tb = ev("traceback", 4, 14, summary="KeyError: 'final_answer' at math_reward.py:37")
    s = snap(T0 + 30, [log(path, events=(tb,))], procs=(proc(0),),
             departed=[gone(1, T0, info=info)])
    sym = one(rank_exited, s)
    assert sym.ranks == (1,)
    assert (f"rank 1's last error: {path}:4-14: KeyError: 'final_answer' at math_reward.py:37"
            in sym.evidence)


def test_a_departed_rank_s_error_found_by_the_log_s_rank():
    tb = ev("traceback", 2, 6, summary="ValueError: empty batch")
    logs = [log("/logs/rank3.log", rank=3, events=(tb,)),
            log("/logs/rank0.log", rank=0, events=(ev("traceback", 9, summary="other rank"),))]
    s = snap(T0 + 30, logs, procs=(proc(0),), departed=[gone(3, T0)])
    sym = one(rank_exited, s)
    assert "rank 3's last error: /logs/rank3.log:2-6: ValueError: empty batch" in sym.evidence
    assert not any("other rank" in e for e in sym.evidence)


def test_torchrun_reports_are_cited_while_ranks_remain():
    child = ev("child-failed", 13, 59, summary="torchrun: rank 1 exited with code 1", rank=1)
    s = snap(T0 + 30, [log("/logs/launcher.log", events=(child,))], procs=(proc(0),),
             departed=[gone(1, T0)])
    sym = one(rank_exited, s)
    assert "/logs/launcher.log:13-59: torchrun: rank 1 exited with code 1" in sym.evidence


def test_child_failed_alone_fires_without_a_process_source():
    child = ev("child-failed", 5, 36, summary="torchrun: rank 4 (local_rank 4) on node-1 killed "
               "by SIGKILL (pid 208585)", time=T0 + 2, rank=4, exitcode=-9, signal="SIGKILL")
    s = snap(T0 + 600, [log("/logs/torchrun.log", events=(child,))])
    sym = one(rank_exited, s)
    assert sym.severity == "critical"
    assert sym.ranks == (4,)
    assert sym.title == "torchrun reports rank 4 failed"
    assert sym.evidence[0].startswith("/logs/torchrun.log:5-36: torchrun: rank 4")
    assert sym.since == T0 + 2
    assert any("SIGKILL" in n and "dmesg" in n for n in sym.next_steps)


def test_child_failed_after_the_whole_job_is_gone_still_fires():
    child = ev("child-failed", 5, rank=2)
    s = snap(T0 + 600, [log(events=(child,))], procs=(), departed=[gone(0, T0), gone(2, T0)])
    assert one(rank_exited, s).ranks == (2,)


def test_child_failed_without_a_rank_names_a_rank():
    sym = one(rank_exited, snap(T0, [log(events=(ev("child-failed", 5, rank=None),))]))
    assert sym.ranks == () and sym.title == "torchrun reports a rank failed"


def test_child_failed_cites_the_failed_rank_s_own_traceback():
    child = ev("child-failed", 5, 30, summary="torchrun: rank 1 exited with code 1", rank=1,
               time=T0 - 100)
    tb = ev("traceback", 1, 11, summary="FloatingPointError: loss is nan", arrival=T0)
    logs = [log("/logs/agent.log", events=(child,)), log("/logs/rank1.log", rank=1, events=(tb,))]
    sym = one(rank_exited, snap(T0 + 5, logs))
    assert "rank 1's last error: /logs/rank1.log:1-11: FloatingPointError: loss is nan" \
        in sym.evidence


def test_no_child_failed_and_no_processes_is_nothing():
    s = snap(T0, [log(events=(ev("traceback", 1), ev("cuda-oom", 9)))])
    assert run(rank_exited, s) == []


def test_child_failed_does_not_cite_itself_as_the_rank_s_last_error():
    # live order: the rank's traceback, then (later) torchrun's report in the same log
    tb = ev("traceback", 1, 11, summary="FloatingPointError: loss is nan", arrival=T0)
    child = ev("child-failed", 13, 59, summary="torchrun: rank 1 exited with code 1", rank=1,
               arrival=T0 + 1)
    s = snap(T0 + 5, [log("/logs/rank1.log", rank=1, events=(tb, child))])
    sym = one(rank_exited, s)
    cited = [e for e in sym.evidence if e.startswith("rank 1's last error")]
    assert cited == ["rank 1's last error: /logs/rank1.log:1-11: FloatingPointError: loss is nan"]


def test_a_path_naming_child_failed_does_not_hide_the_rank_s_traceback():
    path = "/logs/event-child-failed-python.log"
    tb = ev("traceback", 1, 11, summary="FloatingPointError: loss is nan", arrival=T0 + 9)
    child = ev("child-failed", 13, 59, summary="torchrun: rank 1 exited with code 1", rank=1,
               time=T0)
    sym = one(rank_exited, snap(T0 + 10, [log(path, rank=1, events=(child, tb))]))
    assert f"rank 1's last error: {path}:1-11: FloatingPointError: loss is nan" in sym.evidence


# -- through diagnose() ---------------------------------------------------------------------------

def test_offline_stall_alone_is_a_warning_verdict():
    d = diagnose(snap(LAST_30 + 600, [log(steps=EVERY_30)]))
    assert d.verdict == "warning"
    assert [s.id for s in d.symptoms] == ["steps-stalled"]


def test_log_symptoms_together_most_severe_first():
    logs = [log("/a.log", rank=0, steps=EVERY_30),
            log("/b.log", rank=1, events=(oom(), watchdog(1, 5, line_no=40)))]
    d = diagnose(snap(LAST_30 + 600, logs))
    assert d.verdict == "critical"
    assert [s.id for s in d.symptoms] == ["cuda-oom", "nccl-timeout", "steps-stalled"]
