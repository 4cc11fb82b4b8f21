"""Finding a gone rank's log from its job's living processes (rltui.sources.deadlogs), on real
folders laid out as torchrun, a shell redirect and Ray leave them."""

from __future__ import annotations

from rltui.model import ProcInfo, replace
from rltui.parsing import logplaces
from rltui.sources.deadlogs import DeadLogFinder


def rank(pid: int, r: int, **extra) -> ProcInfo:
    env = extra.pop("env", ())
    return ProcInfo(pid=pid, ppid=100, rank=r, local_rank=r, world_size=4, local_world_size=4,
                    cmdline=("python", "train.py"),
                    job_env=(("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"), *env),
                    **extra)


def test_torchrun_attempt_folder_from_a_survivors_error_file(tmp_path):
    attempt = tmp_path / "logs" / "run1_ab12" / "attempt_0"
    for k in range(4):
        (attempt / str(k)).mkdir(parents=True)
        (attempt / str(k) / "stderr.log").write_text(f"rank {k}\n")
    (attempt / "2" / "error.json").write_text("{}")
    survivor = rank(110, 0, env=(("TORCHELASTIC_ERROR_FILE", f"{attempt}/0/error.json"),))
    found = DeadLogFinder().find([survivor])
    by_path = {f.path: f for f in found}
    assert f"{attempt}/2/stderr.log" in by_path and f"{attempt}/2/error.json" in by_path
    assert by_path[f"{attempt}/2/stderr.log"].rank == 2
    assert by_path[f"{attempt}/2/stderr.log"].tie == "MASTER 127.0.0.1:29500"
    assert "torchrun's log folder" in by_path[f"{attempt}/2/stderr.log"].found
    assert f"{attempt}/1/stdout.log" not in by_path  # only files that exist


def test_a_rank_named_file_beside_a_survivors(tmp_path):
    for r in range(4):
        (tmp_path / f"train-rank{r}.log").write_text("x\n")
    live = [rank(110 + r, r, stderr_path=str(tmp_path / f"train-rank{r}.log")) for r in (0, 1, 3)]
    found = DeadLogFinder().find(live)
    assert [(f.path, f.rank) for f in found] == [(str(tmp_path / "train-rank2.log"), 2)]
    assert found[0].found == "beside rank 0's log train-rank0.log"


def test_ray_workers_of_the_same_job(tmp_path):
    logs = tmp_path / "session_2026-12-01_03-00-00_1_1" / "logs"
    logs.mkdir(parents=True)
    mine = logs / "worker-aa11-01000000-4242.err"
    mine.write_text("")
    dead = logs / "worker-bb22-01000000-4243.err"
    dead.write_text("Traceback (most recent call last):\n")
    other_job = logs / "worker-cc33-02000000-4244.err"
    other_job.write_text("boom\n")
    actor = ProcInfo(pid=4242, ppid=50, cmdline=("ray::WorkerDict.run",), stderr_path=str(mine))
    found = DeadLogFinder().find([actor])
    assert [f.path for f in found] == [str(dead)]  # non-empty .err of the same Ray job


def test_nothing_is_looked_at_again_before_the_recheck(tmp_path):
    clock = [0.0]
    finder = DeadLogFinder(recheck_s=10.0, clock=lambda: clock[0])
    live = [rank(110, 0, stderr_path=str(tmp_path / "rank0.log"))]
    assert finder.find(live) == []
    (tmp_path / "rank1.log").write_text("x\n")
    assert finder.find(live) == []  # cached
    clock[0] = 11.0
    assert [f.rank for f in finder.find(live)] == [1]


def test_rank_swapped_keeps_zero_padding_and_other_words():
    assert logplaces.rank_swapped("/l/run.rank03.out", 3, [1, 12]) == [
        ("/l/run.rank01.out", 1), ("/l/run.rank12.out", 12)]
    assert logplaces.rank_swapped("/l/local_rank3.log", 3, [1]) == []
    assert logplaces.rank_swapped("/l/rank3-of-rank3.log", 3, [1]) == []  # ambiguous
    assert logplaces.rank_swapped("/l/train.log", 0, [1]) == []


def test_torchrun_paths():
    assert logplaces.torchrun_attempt("/d/run_x/attempt_2/7/error.json") == ("/d/run_x/attempt_2", 7)
    assert logplaces.torchrun_attempt("/tmp/error.json") is None
    assert logplaces.log_dir_option(["torchrun", "--log-dir", "/d", "t.py"]) == "/d"
    assert logplaces.log_dir_option(["torchrun", "--log_dir=/e", "t.py"]) == "/e"
    assert logplaces.log_dir_option(["torchrun", "t.py"]) is None


def test_the_other_nodes_ranks_are_not_missing_here(tmp_path):
    """Ranks 2-3 of 4 run here (two nodes); ranks 0-1's files beside theirs on a shared
    filesystem are the other node's, not logs of ranks gone from this one."""
    for r in range(4):
        (tmp_path / f"job-rank{r}.log").write_text("x\n")
    here = [ProcInfo(pid=120 + r, ppid=100, rank=r, local_rank=r - 2, world_size=4,
                     local_world_size=2, stderr_path=str(tmp_path / f"job-rank{r}.log"),
                     job_env=(("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "29500")))
            for r in (2, 3)]
    assert DeadLogFinder().find(here) == []
    # rank 3 gone from this node: its file is found
    assert [f.rank for f in DeadLogFinder().find(here[:1])] == [3]


def _ray_actor(pid: int, rank: int, world: int, logs) -> ProcInfo:
    err = logs / f"worker-{pid:x}aa-01000000-{pid}.err"
    err.write_text(":actor_name:Trainer\nstep:1\n")
    return ProcInfo(pid=pid, ppid=50, cmdline=("ray::Trainer.fit",), stderr_path=str(err),
                    rank=rank, local_rank=rank, world_size=world, local_world_size=world)


def test_the_one_ray_worker_gone_is_the_one_rank_missing(tmp_path):
    """Seen on a real Ray 2.60 job (tests/integration/test_ray_after_the_fact.py): the dead
    actor's .err names its pid, not its rank; one rank missing and one worker gone make it
    that rank's log, so its traceback tells how the rank ended."""
    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    live = [_ray_actor(100 + r, r, 3, logs) for r in (0, 1)]
    dead = logs / "worker-ff-01000000-102.err"
    dead.write_text(":actor_name:Trainer\nTraceback (most recent call last):\n"
                    "RuntimeError: boom\n")
    found = {f.path: f for f in DeadLogFinder().find(live)}
    assert found[str(dead)].rank == 2
    assert "rank 2 the one missing" in found[str(dead)].found


def test_a_reaped_task_worker_or_another_actor_is_not_the_missing_rank(tmp_path):
    """The dead rank's own log is empty (the OOM killer gave it no time to write), while a
    task worker of the same Ray job that Ray reaped, and an actor of another class, left
    warnings: neither is taken for the missing rank."""
    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    live = [_ray_actor(100 + r, r, 3, logs) for r in (0, 1)]
    (logs / "worker-aa-01000000-102.err").write_text(":actor_name:Trainer\n")  # the rank
    (logs / "worker-bb-01000000-103.err").write_text(":task_name:load\nUserWarning: x\n")
    (logs / "worker-cc-01000000-104.err").write_text(":actor_name:Rollout\nWarning\n")
    found = {f.path: f for f in DeadLogFinder().find(live)}
    assert found[str(logs / "worker-aa-01000000-102.err")].rank == 2  # even empty of errors
    assert found[str(logs / "worker-bb-01000000-103.err")].rank is None
    assert found[str(logs / "worker-cc-01000000-104.err")].rank is None


def test_an_odd_file_name_under_the_glob_is_skipped(tmp_path):
    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    live = [_ray_actor(100, 0, 2, logs)]
    (logs / "worker-x-y-01000000-zz.err").write_text("boom\n")  # matches the glob only
    DeadLogFinder().find(live)  # no AttributeError


def test_two_ray_workers_gone_name_no_rank(tmp_path):
    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    live = [_ray_actor(100, 0, 3, logs)]
    for pid in (102, 103):
        (logs / f"worker-ff-01000000-{pid}.err").write_text("Traceback\n")
    found = DeadLogFinder().find(live)
    assert {f.rank for f in found if "-10" in f.path and "ff-" in f.path} == {None}


def test_a_dead_worker_s_actor_class_is_read_once(tmp_path, monkeypatch):
    """A dead Ray worker's log never changes: its actor class is read on the first look only,
    not again every recheck."""
    from rltui.sources import deadlogs
    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    live = [_ray_actor(100 + r, r, 3, logs) for r in (0, 1)]
    (logs / "worker-ff-01000000-102.err").write_text(":actor_name:Trainer\nboom\n")
    reads = []
    real = deadlogs._actor_class
    monkeypatch.setattr(deadlogs, "_actor_class", lambda p: reads.append(p) or real(p))
    clock = [0.0]
    finder = DeadLogFinder(recheck_s=10.0, clock=lambda: clock[0])
    for look in range(3):
        clock[0] = look * 11.0
        assert {f.rank for f in finder.find(live) if f.path.endswith("-102.err")} == {2}
    assert reads == [str(logs / "worker-ff-01000000-102.err")]


def test_ranks_started_by_hand_at_a_loopback_rendezvous(tmp_path):
    """``RANK=$i WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 python train.py > logs/rank$i.log``: no
    LOCAL_WORLD_SIZE, yet the rendezvous on loopback says the world is here, so rank 2's file
    beside the survivors' is its log."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for r in range(3):
        (logs / f"rank{r}.log").write_text("x\n")
    live = [ProcInfo(pid=110 + r, ppid=100, rank=r, local_rank=r, world_size=3,
                     cmdline=("python", "train.py"), stdout_path=str(logs / f"rank{r}.log"),
                     stderr_path=str(logs / f"rank{r}.log"),
                     job_env=(("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29555")))
            for r in (0, 1)]
    found = DeadLogFinder().find(live)
    assert [(f.path, f.rank) for f in found] == [(str(logs / "rank2.log"), 2)]
    assert found[0].found == "beside rank 0's log rank0.log"
    # the same ranks meeting at another host's address may have rank 2 on another node
    elsewhere = [replace(p, job_env=(("MASTER_ADDR", "node07"), ("MASTER_PORT", "29555")))
                 for p in live]
    assert DeadLogFinder().find(elsewhere) == []
