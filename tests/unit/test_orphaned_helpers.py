"""Helpers that outlived their rank (rltui.sources.procs.orphaned_helpers): a child forked after
the process group was made keeps the rank's environment; when the rank dies it is re-parented
to init and must not read as that rank alive. Seen on a real Ray 2.60 job, where the ranks have
no rendezvous variables (tests/integration/test_ray_after_the_fact.py): the Ray job ties them."""

from __future__ import annotations

from rltui.model import ProcInfo, replace
from rltui.sources.procs import orphaned_helpers

MASTER = (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500"))
RAY = (("RAY_JOB_ID", "01000000"), ("RAY_RAYLET_PID", "13878"))


def rank(pid, r, ppid, started, env):
    return ProcInfo(pid=pid, ppid=ppid, rank=r, world_size=3, create_time=started,
                    cmdline=("ray::Trainer.fit",), job_env=env)


def test_a_late_orphan_of_a_ray_job_is_a_helper():
    procs = [rank(14057, 0, 13878, 396.9, RAY), rank(14058, 1, 13878, 396.9, RAY),
             rank(14170, 2, 1, 401.8, RAY)]
    assert orphaned_helpers(procs) == {14170}


def test_a_late_orphan_of_a_rendezvous_is_a_helper():
    procs = [rank(10, 0, 5, 100.0, MASTER), rank(11, 1, 5, 100.0, MASTER),
             rank(12, 2, 1, 110.0, MASTER)]
    assert orphaned_helpers(procs) == {12}


def test_ranks_re_parented_together_are_kept():
    procs = [rank(10, 0, 1, 100.0, RAY), rank(11, 1, 1, 100.0, RAY), rank(12, 2, 1, 100.0, RAY)]
    assert orphaned_helpers(procs) == set()


def test_an_orphan_of_another_job_is_not_this_job_s_helper():
    other = (("RAY_JOB_ID", "02000000"), ("RAY_RAYLET_PID", "13878"))
    procs = [rank(10, 0, 5, 100.0, RAY), rank(11, 1, 5, 100.0, RAY),
             rank(12, 2, 1, 110.0, other)]
    assert orphaned_helpers(procs) == set()


def test_an_orphan_that_started_with_the_others_is_kept():
    procs = [rank(10, 0, 5, 100.0, RAY), rank(11, 1, 5, 100.0, RAY), rank(12, 2, 1, 101.0, RAY)]
    assert orphaned_helpers(procs) == set()


def test_processes_with_no_tie_are_left_alone():
    procs = [rank(10, 0, 5, 100.0, ()), rank(11, 1, 5, 100.0, ()), rank(12, 2, 1, 110.0, ())]
    assert orphaned_helpers(procs) == set()


def test_ranks_tied_by_different_tokens_are_one_job():
    """Ranks may show different ties of one job (verl sets MASTER_ADDR in-process on rank 0
    and passes it to the others): the orphan whose strongest tie is the rendezvous is still
    the helper of the job its peers show only by the Ray job."""
    both = RAY + MASTER
    procs = [rank(10, 0, 5, 100.0, RAY), rank(11, 1, 5, 100.0, RAY),
             rank(12, 2, 1, 110.0, both)]
    assert orphaned_helpers(procs) == {12}


def threaded(pid, r, ppid, started, threads, env=MASTER):
    return replace(rank(pid, r, ppid, started, env), num_threads=threads)


def test_a_forked_helper_of_ranks_started_by_hand_from_a_shell_now_gone():
    """Every rank is init's (``for i in 0 1 2; do ... & done`` in a shell that exited), so the
    parents tell nothing; the helper runs one thread where the ranks run their group's.
    Measured on tests/integration/torchjobs/crash_early.py: ranks 6 and 5 threads, the helper
    1, forked 7.2 s after the ranks started."""
    procs = [threaded(3848, 0, 1, 344.89, 6), threaded(3849, 1, 1, 344.89, 5),
             threaded(3878, 2, 1, 352.12, 1)]
    assert orphaned_helpers(procs) == {3878}


def test_a_helper_forked_soon_after_its_rank_started_is_still_one():
    """The shell still runs the ranks; the helper was forked 1.2 s after they started (a
    fast machine): under ORPHAN_LATE_S, but one thread beside ranks with several."""
    procs = [threaded(10, 0, 5, 100.0, 6), threaded(11, 1, 5, 100.0, 5),
             threaded(12, 2, 1, 101.2, 1)]
    assert orphaned_helpers(procs) == {12}


def test_a_helper_re_parented_to_a_subreaper_is_one():
    """Not init but a subreaper (systemd --user, a container's init shim) took the helper: its
    parent is no rank's."""
    procs = [threaded(10, 0, 5, 100.0, 6), threaded(11, 1, 5, 100.0, 5),
             threaded(12, 2, 900, 104.0, 1)]
    assert orphaned_helpers(procs) == {12}


def test_ranks_with_one_thread_each_are_kept():
    """A job whose ranks run one thread (no process group threads): nothing to tell by."""
    procs = [threaded(10, 0, 1, 100.0, 1), threaded(11, 1, 1, 100.0, 1),
             threaded(12, 2, 1, 110.0, 1)]
    assert orphaned_helpers(procs) == set()


def test_a_late_rank_that_runs_its_threads_is_kept():
    """Rank 2 started by hand 30 s after the others, from a shell of its own since closed: it
    joined the group, it has its threads; it is rank 2 alive."""
    procs = [threaded(10, 0, 1, 100.0, 6), threaded(11, 1, 1, 100.0, 5),
             threaded(12, 2, 1, 130.0, 5)]
    assert orphaned_helpers(procs) == set()


def test_a_single_threaded_rank_started_with_the_others_is_kept():
    procs = [threaded(10, 0, 1, 100.0, 6), threaded(11, 1, 1, 100.0, 5),
             threaded(12, 2, 1, 100.2, 1)]
    assert orphaned_helpers(procs) == set()


def test_a_forked_process_claiming_a_live_rank_is_left_to_the_others_rules():
    """One thread, init's, late, but rank 1 runs: a rank claimed twice is not a helper here."""
    procs = [threaded(10, 0, 1, 100.0, 6), threaded(11, 1, 1, 100.0, 5),
             threaded(12, 1, 1, 110.0, 1)]
    assert orphaned_helpers(procs) == set()
