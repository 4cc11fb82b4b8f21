"""Grouping a node's processes into jobs (rltui.jobs), and each job's own view of the node."""

from __future__ import annotations

from rltui import jobs
from rltui.model import (
    DepartedRank,
    GpuProcess,
    GpuSample,
    LogFileState,
    NodeSnapshot,
    ProcessDump,
    ProcInfo,
    StackPoll,
    replace,
)


def rank(pid: int, r: int | None, port: int | None = 29500, *, ppid: int = 100,
         world: int | None = 4, script: str = "train.py", host: str = "", run: str = "",
         addr: str = "127.0.0.1", job_env_extra: tuple = (), **extra) -> ProcInfo:
    env = list(job_env_extra)
    if port is not None:
        env += [("MASTER_ADDR", addr), ("MASTER_PORT", str(port))]
    if run:
        env.append(("TORCHELASTIC_RUN_ID", run))
    return ProcInfo(pid=pid, ppid=ppid, rank=r, local_rank=r, world_size=world,
                    local_world_size=world, cmdline=("python", script), role=script[:-3],
                    job_env=tuple(env), host=host, **extra)


def launcher(pid: int, script: str = "train.py", ppid: int = 1) -> ProcInfo:
    return ProcInfo(pid=pid, ppid=ppid, cmdline=("python", "/usr/bin/torchrun", script),
                    role="torchrun", launcher="torchrun")


def members(job) -> set[int]:
    return set(job.pids)


def test_two_jobs_with_the_same_ranks_are_two_jobs():
    procs = [launcher(100), *(rank(110 + r, r, 29500) for r in range(4)),
             launcher(200, "eval.py"), *(rank(210 + r, r, 29501, ppid=200, script="eval.py")
                                         for r in range(4))]
    a, b = jobs.group(procs)
    assert members(a) == {100, 110, 111, 112, 113} and members(b) == {200, 210, 211, 212, 213}
    assert (a.id, b.id) == ("train-100", "eval-200")
    assert a.ranks == b.ranks == (0, 1, 2, 3) and a.world_size == 4
    assert a.launcher_pid == 100 and a.launcher == "torchrun" and "29500" in a.tie


def test_ranks_re_parented_to_init_stay_in_their_job():
    """The launcher died: its ranks now have pid 1 as parent, their rendezvous still ties
    them (and not to another job's ranks under pid 1)."""
    procs = [*(rank(110 + r, r, 29500, ppid=1) for r in range(3)),
             *(rank(210 + r, r, 29501, ppid=1) for r in range(3))]
    a, b = jobs.group(procs)
    assert members(a) == {110, 111, 112} and members(b) == {210, 211, 212}


def test_torchrun_default_run_id_none_ties_nothing():
    procs = [rank(110, 0, None, run="none", ppid=50), rank(210, 0, None, run="none", ppid=60)]
    assert len(jobs.group(procs)) == 2
    same = [rank(110, 0, None, run="d4f1", ppid=50), rank(210, 1, None, run="d4f1", ppid=60)]
    assert len(jobs.group(same)) == 1


def test_a_loopback_rendezvous_is_per_node():
    here = [rank(110, 0, host="node01"), rank(111, 1, host="node01")]
    there = [rank(110, 0, host="node02"), rank(111, 1, host="node02")]
    assert len(jobs.group(here + there)) == 2
    shared = [rank(110, 0, host="node01", addr="10.0.0.1"),
              rank(110, 1, host="node02", addr="10.0.0.1")]
    (job,) = jobs.group(shared)
    assert job.hosts == ("node01", "node02") and job.members == (("node01", 110),
                                                                 ("node02", 110))


def test_a_launcher_chain_joins_its_ranks():
    """deepspeed's runner starts launch, which starts the ranks: both launchers are the job's;
    the outermost is its launcher."""
    runner = ProcInfo(pid=90, ppid=1, cmdline=("python", "/usr/bin/deepspeed", "train.py"),
                      launcher="deepspeed")
    launch = ProcInfo(pid=100, ppid=90, cmdline=("python", "-m", "deepspeed.launcher.launch"),
                      launcher="deepspeed")
    (job,) = jobs.group([runner, launch, rank(110, 0), rank(111, 1)])
    assert members(job) == {90, 100, 110, 111} and job.launcher_pid == 90


def test_an_untied_process_joins_its_siblings_when_they_are_one_job():
    """A Ray actor without a rendezvous beside the job's ranks under the same raylet."""
    actor = ProcInfo(pid=300, ppid=100, cmdline=("ray::TaskRunner.run",), role="TaskRunner")
    (job,) = jobs.group([rank(110, 0, ppid=100), rank(111, 1, ppid=100), actor])
    assert 300 in members(job)
    # beside two jobs it cannot tell which: a job of its own
    other = [rank(210, 0, 29501, ppid=100), rank(211, 1, 29501, ppid=100)]
    assert len(jobs.group([rank(110, 0, ppid=100), rank(111, 1, ppid=100), actor, *other])) == 3


def test_untied_ranks_of_one_program_are_one_job_until_a_rank_repeats():
    procs = [rank(110 + i, r, None, ppid=1) for i, r in enumerate([0, 1, 2, 0, 1])]
    a, b = jobs.group(procs)
    assert members(a) == {110, 111, 112} and members(b) == {113, 114}


def test_a_departed_rank_stays_in_its_job_and_a_restart_is_not_a_second_job():
    gone = rank(112, 2)
    restarted = rank(120, 2)
    (job,) = jobs.group([rank(110, 0), rank(111, 1), restarted], departed=[gone])
    assert members(job) == {110, 111, 112, 120}


def test_ids_stay_when_the_first_process_goes():
    names = jobs.JobNames()
    (first,) = jobs.group([rank(110, 0, ppid=1), rank(111, 1, ppid=1)], names=names)
    (later,) = jobs.group([rank(111, 1, ppid=1)], names=names)
    assert first.id == later.id == "train-110"
    # a new job with the same script gets its own id
    a, b = jobs.group([rank(111, 1, ppid=1), rank(210, 0, 29501, ppid=1)], names=names)
    assert a.id == "train-110" and b.id == "train-210"


def find(found, wanted):
    return jobs.resolve(found, wanted)[0]


def part(snap, job, lens=None):
    """One job's view (job None: what no job claims, or None when there is nothing)."""
    return next((p for j, p in jobs.partition(snap, lens) if j is job), None)


def test_find_by_id_name_and_pid():
    procs = [launcher(100), rank(110, 0), launcher(200, "eval.py"),
             rank(210, 0, 29501, ppid=200, script="eval.py")]
    found = jobs.group(procs)
    assert find(found, "eval-200").id == "eval-200"
    assert find(found, "eval").id == "eval-200"
    assert find(found, "100").id == "train-100"
    assert find(found, "210").id == "eval-200"
    assert find(found, "nothing") is None and find(found, "999") is None


def test_missing_from_world_is_per_job():
    """Job A lost rank 2; job B's running rank 2 must not hide it."""
    a = [rank(110 + r, r, 29500) for r in (0, 1, 3)]
    b = [rank(210 + r, r, 29501) for r in range(4)]
    assert [d.rank for d in jobs.missing_from_world(a, 5.0, set())] == [2]
    assert jobs.missing_from_world(b, 5.0, set()) == []


def _snapshot() -> NodeSnapshot:
    procs = (launcher(100), *(rank(110 + r, r, 29500, gpu_index=r) for r in (0, 1, 3)),
             launcher(200, "eval.py"),
             *(rank(210 + r, r, 29501, ppid=200, script="eval.py", gpu_index=4 + r)
               for r in range(4)))
    gone = rank(112, 2, 29500, gpu_index=2, stderr_path="/logs/train-rank2.log")
    departed = (DepartedRank(pid=112, rank=2, last_seen=1.0, gone_since=2.0, info=gone),)
    dumps = tuple(ProcessDump(pid=p.pid, rank=p.rank) for p in procs if p.rank is not None)
    saved = ProcessDump(pid=7777, rank=0, source="dump.txt")
    logs = (LogFileState(path="/logs/train-rank2.log", pid=112, rank=2),
            LogFileState(path="/logs/eval-rank0.log", pid=210, rank=0),
            LogFileState(path="/logs/other.log", rank=0, lines_seen=3))
    gpus = tuple(GpuSample(index=i, name="g", uuid=str(i),
                           processes=(GpuProcess(pid=110 + i if i < 4 else 206 + i),))
                 for i in range(8))
    snap = NodeSnapshot(timestamp=10.0, procs=procs, departed=departed, logs=logs, gpus=gpus,
                        stacks=(StackPoll(dumps=dumps + (saved,), started=5.0),))
    return NodeSnapshot(**{**{f: getattr(snap, f) for f in snap.__slots__},
                           "jobs": jobs.group(procs, [gone])})


def test_partition_keeps_each_jobs_own_evidence():
    snap = _snapshot()
    train, evl = snap.jobs
    t = part(snap, train)
    assert {p.pid for p in t.procs} == {100, 110, 111, 113}
    assert [d.pid for d in t.departed] == [112]
    assert [log.path for log in t.logs] == ["/logs/train-rank2.log"]
    assert {g.index for g in t.gpus} == {0, 1, 2, 3}
    assert {d.pid for d in t.stacks[0].dumps} == {110, 111, 113}
    e = part(snap, evl)
    assert {p.rank for p in e.procs if p.rank is not None} == {0, 1, 2, 3}
    assert e.departed == () and [log.path for log in e.logs] == ["/logs/eval-rank0.log"]
    # what no job claims (a saved dump of a pid not here, a log naming no writer)
    rest = part(snap, None)
    assert [log.path for log in rest.logs] == ["/logs/other.log"]
    assert [d.pid for d in rest.stacks[0].dumps] == [7777]
    assert rest.source("procs") is None


def test_the_lens_keeps_a_jobs_rounds_the_same_objects():
    snap = _snapshot()
    lens = jobs.Lens()
    first = part(snap, snap.jobs[0], lens).stacks
    again = part(snap, snap.jobs[0], lens).stacks
    assert first[0] is again[0]


# -- what an adversarial review found -------------------------------------------------------------

def test_one_slurm_step_or_rdzv_id_never_joins_two_rendezvous():
    """Two torchrun jobs started from one `srun --pty bash` share the Slurm step; the same
    --rdzv-id reused; each keeps its own ranks."""
    step = (("SLURM_JOB_ID", "777"), ("SLURM_STEP_ID", "0"))
    procs = [rank(110 + r, r, 29500, ppid=100, job_env_extra=step) for r in (0, 1, 3)] + \
        [rank(210 + r, r, 29501, ppid=200, job_env_extra=step) for r in range(4)]
    a, b = jobs.group(procs)
    assert members(a) == {110, 111, 113} and members(b) == {210, 211, 212, 213}
    # a process with the step and no rendezvous of its own joins nobody's ranks by it
    helper = ProcInfo(pid=300, ppid=1, job_env=step, cmdline=("python", "monitor.py"))
    assert len(jobs.group([*procs, helper])) == 3
    # with one rendezvous, the step ties a process that has none to it
    one = [rank(110, 0, 29500, job_env_extra=step),
           ProcInfo(pid=301, ppid=1, job_env=step, cmdline=("python", "x.py"))]
    assert len(jobs.group(one)) == 1


def test_two_ray_clusters_number_their_jobs_alike_but_are_two():
    def actor(pid, raylet):
        return ProcInfo(pid=pid, ppid=raylet, cmdline=("ray::WorkerDict.run",),
                        job_env=(("RAY_JOB_ID", "01000000"), ("RAY_RAYLET_PID", str(raylet))))
    assert len(jobs.group([actor(1100, 1000), actor(1101, 1000), actor(2100, 2000)])) == 2


def test_two_untied_runs_of_one_script_from_two_shells_stay_apart():
    a = [rank(110, 0, None, ppid=50, world=2), rank(111, 1, None, ppid=50, world=2)]
    b = [rank(210, 0, None, ppid=60, world=2), rank(211, 1, None, ppid=60, world=2)]
    found = jobs.group([a[0], b[0], a[1], b[1]])
    assert sorted(sorted(j.pids) for j in found) == [[110, 111], [210, 211]]


def test_a_launchers_own_master_env_is_its_shells():
    """The shell exported MASTER_* and torchrun kept them; its ranks got other values."""
    shell_env = (("MASTER_ADDR", "10.9.9.9"), ("MASTER_PORT", "1234"))
    agent = ProcInfo(pid=100, ppid=1, cmdline=("torchrun", "train.py"), launcher="torchrun",
                     job_env=shell_env)
    (job,) = jobs.group([agent, rank(110, 0, ppid=100), rank(111, 1, ppid=100)])
    assert job.launcher_pid == 100 and members(job) == {100, 110, 111}


def test_a_launcher_waiting_for_its_rendezvous_is_not_its_siblings_job():
    """A sweep shell started torchrun A (no ranks yet) and torchrun B (ranks up)."""
    a = ProcInfo(pid=100, ppid=90, cmdline=("torchrun", "train.py"), launcher="torchrun",
                 role="torchrun")
    b = ProcInfo(pid=200, ppid=90, cmdline=("torchrun", "eval.py"), launcher="torchrun",
                 role="torchrun")
    found = jobs.group([a, b, rank(210, 0, 29501, ppid=200, script="eval.py")])
    assert sorted(sorted(j.pids) for j in found) == [[100], [200, 210]]
    assert {j.id for j in found} == {"train-100", "eval-200"}


def test_a_reused_pid_does_not_take_the_old_jobs_id():
    names = jobs.JobNames()
    old = replace_create(launcher(100), 1.0)
    (first,) = jobs.group([old, rank(110, 0)], names=names)
    new = replace_create(launcher(100, "eval.py"), 99.0)
    found = jobs.group([new, rank(210, 0, 29501, ppid=100, script="eval.py")], names=names)
    assert found[0].id != first.id
    # the same script relaunched under the reused pid: still not the old job's id
    again = replace_create(launcher(100), 199.0)
    found = jobs.group([again, rank(310, 0, 29502, ppid=100)], names=names)
    assert found[0].id not in (first.id, "eval-100") and found[0].id.startswith("train-100")


def test_resolve_says_when_a_name_is_ambiguous_and_refuses_odd_digits():
    procs = [rank(110, 0, 29500, ppid=1), rank(210, 0, 29501, ppid=1)]
    found = jobs.group(procs)
    job, why = jobs.resolve(found, "train")
    assert job is None and "2 jobs run 'train'" in why
    assert jobs.resolve(found, "²")[0] is None and jobs.resolve(found, "٣")[0] is None


def test_a_hostile_rendezvous_value_is_shown_on_one_printable_line():
    evil = ProcInfo(pid=110, rank=0, job_env=(("MASTER_ADDR", "h\n  x HEALTHY\x1b[2J"),
                                              ("MASTER_PORT", "1")))
    (job,) = jobs.group([evil])
    assert "\n" not in job.tie and "\x1b" not in job.tie


def test_every_spelling_of_loopback_is_one_rendezvous():
    a = rank(110, 0, addr="localhost")
    b = rank(111, 1, addr="127.0.0.1")
    assert len(jobs.group([a, b])) == 1


def test_many_untied_processes_group_in_linear_time():
    import time
    procs = [ProcInfo(pid=1000 + i, ppid=500 + i % 7, rank=i % 64, world_size=64,
                      cmdline=("python", "t.py"), role="t") for i in range(5000)]
    start = time.process_time()
    jobs.group(procs)
    # not a timing assertion on the machine (benchmarks do that): an O(n^2) pass over 5,000
    # processes takes tens of seconds, far beyond this bound on any machine
    assert time.process_time() - start < 5.0


def replace_create(p: ProcInfo, t: float) -> ProcInfo:
    from rltui.model import replace
    return replace(p, create_time=t)


def _by_hand(pid: int, r: int, addr: str, local_world: int | None = None) -> ProcInfo:
    """A rank started by hand: ``RANK=$i WORLD_SIZE=3 MASTER_ADDR=... python train.py``, no
    LOCAL_WORLD_SIZE unless given."""
    return replace(rank(pid, r, 29555, world=3, addr=addr), local_world_size=local_world)


def test_a_loopback_rendezvous_puts_the_whole_world_on_this_node():
    """Ranks started by hand set no LOCAL_WORLD_SIZE; meeting at 127.0.0.1 they cannot be on
    another node, so rank 2 of 3 is missing here."""
    for addr in ("127.0.0.1", "localhost", "127.0.1.1", "::1"):
        procs = [_by_hand(110 + r, r, addr) for r in (0, 1)]
        assert jobs.whole_world_here(procs) == 3, addr
        assert [d.rank for d in jobs.missing_from_world(procs, 5.0, set())] == [2], addr
        assert jobs.missing_from_world(procs, 5.0, {2}) == []


def test_a_rendezvous_on_another_host_says_nothing_about_the_world():
    """MASTER_ADDR names a host: the other ranks may be on other nodes, not missing."""
    procs = [_by_hand(110 + r, r, "node07") for r in (0, 1)]
    assert jobs.whole_world_here(procs) is None
    assert jobs.missing_from_world(procs, 5.0, set()) == []


def test_local_world_size_wins_over_the_loopback_rendezvous():
    """LOCAL_WORLD_SIZE given and smaller than WORLD_SIZE: the job says it spans nodes."""
    procs = [_by_hand(110 + r, r, "127.0.0.1", local_world=2) for r in (0, 1)]
    assert jobs.whole_world_here(procs) is None
    procs = [_by_hand(110 + r, r, "127.0.0.1", local_world=3) for r in (0, 1)]
    assert jobs.whole_world_here(procs) == 3
