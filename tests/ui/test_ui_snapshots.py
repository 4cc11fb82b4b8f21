"""Snapshot tests at 80x24 and 200x60. Each replays a recorded scenario to its end (``e``), so
the screen holds scenario time only, never the wall clock, and is the same on every run.

Update with ``pytest tests/ui --snapshot-update`` and look at every changed SVG before keeping
it (snapshot_report.html shows the differences)."""

from __future__ import annotations

import pytest

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((200, 60), id="200x60")]


@pytest.mark.parametrize("size", SIZES)
def test_rank_exited(snap_compare, replay_app, size):
    """Rank 3 exited 70 s ago while ranks 0-2 wait idle and 4-7 spin. At 80x24 (symptoms on
    screen) the GPU and rank tables fold to "8 GPUs: 4 busy, 4 idle, 61-64 GiB" and "8 ranks: 4
    running, 3 sleeping, 1 exited" and the symptom detail shows its Evidence and Next steps;
    the rest of what follows holds at 200x60. Must be visible: header
    "CRITICAL (2)" with "replay 90.0/90.0s x1 end" and "gpus ok 0.0s", "procs ok 0.5s"; GPU
    rows with 0% (idle colour) for GPUs 0-3 and 100% (ok colour) for 4-7; the rank table with
    rank 3 dimmed as "exited" between ranks 2 and 4; the symptoms as one incident: "CRIT rank 3
    exited", and under it "└ WARN 3 of the job's GPUs idle while 4 busy" (its consequence);
    the detail "rank 3 exited while 7 other process(es) remain"; the footer
    keys (with "l Logs"). The rank table's "left" column after the state: "70s ago" on rank 3's
    row, blank on the others (at 80x24 in the role's place). At 200x60 also the "GPU mem"
    column (61.0G rank 0 ... 63.8G rank 7, "-" rank 3), the sparklines, throttle/ECC columns, full symptom
    detail with next steps, and the log pane saying how logs are found (this recording has no
    log source)."""
    assert snap_compare(replay_app("rank_exited"), press=["e"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_nvml_unavailable(snap_compare, replay_app, size):
    """No NVIDIA driver. Must be visible: the GPU pane replaced by one message "No NVIDIA driver
    or NVML library found: GPU data unavailable" with the remedy "Install the NVIDIA driver...";
    header "gpus unavailable" in the bad colour and "procs ok"; the four ranks with "-" GPU%;
    symptoms "No symptoms" and, under "Not checked", the gpus note."""
    assert snap_compare(replay_app("nvml_unavailable"), press=["e"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_help_screen(snap_compare, replay_app, size):
    """The help screen over the rank-exited replay. Must be visible: "rltui help" with the quit
    keys (q, ctrl+c, ctrl+q) and "rltui docs", the keys table (q / ^c Quit, p / space Pause, r Refresh, z Zoom, t Theme, ? / f1 Help, the replay keys) and, at
    200x60, the thresholds table with the default values (gpu_idle_pct 5%, gpu_busy_pct 50%,
    ...) and their colours."""
    assert snap_compare(replay_app("rank_exited"), press=["e", "question_mark"],
                        terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_colorblind_theme(snap_compare, replay_app, size):
    """The rank-exited replay in the colour-blind theme. Must be visible: the same content as
    test_rank_exited (at 80x24 the tables folded to a summary line each), painted in Okabe-Ito
    colours: busy GPUs sky blue (not green), the CRIT
    symptom and CRITICAL verdict vermillion (not red), warnings orange, idle GPUs reddish
    purple."""
    assert snap_compare(replay_app("rank_exited", theme="colorblind"), press=["e"],
                        terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_logs(snap_compare, replay_app, size):
    """4 ranks with logs, played to the end (60 s). Must be visible: header "logs ok 0.8s". At
    80x24 the tables folded to "4 GPUs: 4 idle, 62 GiB" and "4 ranks: 3 running, 1 exited", the
    symptoms (CUDA OOM on rank 2, rank 3 crashed) with the first one's evidence below. Larger: the
    rank table's "last step" column with "8 · 20s" for ranks 0-2 and "7 · 24s" for rank 3
    (dimmed, exited, "left" "20s ago"). At 200x60 also the "step time" sparklines ("▅▄▄▅▇▄▅ 4.6s" for rank 0,
    the slow step 6 tallest) and the ETA ("7m03s" rank 0, "6m35s" ranks 1-2); the log pane
    titled "Logs (5 files) · step 7-8/100 · eta 6m53s" (the ETA of rank 3, furthest behind)
    with the line "--log /jobs/ppo-7/logs/critic-*.log: no match yet, waiting for it to
    appear.", then the newest
    lines tagged r0-r3 in four colours, rank 3's traceback in the error colour for its
    "Traceback" and "RuntimeError" lines, and the status line "follow  all ranks" with the
    key hints."""
    async def run_before(pilot) -> None:
        # the log view scrolls to its end after a refresh; on a loaded machine the snapshot
        # could be taken between the two (the scrollbar's thumb one row off)
        await pilot.press("e")
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()

    assert snap_compare(replay_app("with_logs"), run_before=run_before, terminal_size=size)


def test_logs_zoomed_with_search(snap_compare, replay_app):
    """80x24: `l` zooms the hidden log pane; a search for "step:8". Must be visible: the log pane
    over the whole body, the "step:8" lines of ranks 0-2 with "step:8" highlighted (accent
    background), the newest one on the cursor line (a fourth match, rank 2's
    "timing_s/step:8.10", is off to the right); long step lines ending in "…"; the status
    line "follow off  all ranks  /step:8 4 of 4"; the footer with the log keys (f Follow,
    / Search, n Next match, x Errors, o Open log)."""
    assert snap_compare(replay_app("with_logs"), press=["e", "l", "slash", *"step:8", "enter"],
                        terminal_size=(80, 24))


def test_rank_log_screen(snap_compare, replay_app):
    """80x24: rank 3's log full screen (`l`, `<` for rank 3, `o`), then `,` to its traceback.
    Must be visible: the title "rank 3 log  /jobs/ppo-7/logs/rank3.log  step 7/100 ..."; line
    numbers in the gutter (no rank tags); the traceback from "Traceback (most recent call
    last):" (on the cursor line) to "RuntimeError: NCCL communicator was aborted on rank 3...",
    its first and last lines in the error colour; the footer with escape Close, ending in
    "▏^p palette" with nothing after it (no key's letter showing in the last column)."""
    assert snap_compare(replay_app("with_logs"),
                        press=["e", "l", "less_than_sign", "o", "comma"],
                        terminal_size=(80, 24))


@pytest.mark.parametrize("size", SIZES)
def test_stacks_pattern_a(snap_compare, replay_app, size):
    """Three py-spy rounds of a pipeline job (real saved dumps): ranks 0-1 in recv_object_list,
    rank 2 in destroy_process_group from __exit__. Must be visible: header "CRITICAL" and a
    "stacks ok" entry; at 80x24 the rank pane folded to "3 ranks: 2 wait in recv_object_list, 1
    in destroy_process_group"; symptom "CRIT Cleanup deadlock: rank 2 in teardown, ranks 0-1 wait"
    (hang-cleanup-deadlock) with "since HH:MM:SS" (its onset) first in its evidence. At 200x60
    also the rank table's stack column with
    "#1 recv_object_list" for ranks 0-1 and "#2 destroy_process_group" for rank 2 (rank 2 in
    the bad colour, a suspect), and the symptom's evidence: the classes marked [stuck] and the
    divergence point."""
    assert snap_compare(replay_app("cleanup_deadlock_with_stacks"), press=["e"],
                        terminal_size=size)


def _cluster_app(tmp_path):
    from pathlib import Path

    from rltui.config import Settings
    from rltui.sources.bundle import Bundle
    from rltui.ui import build_app
    from tests.fakes.fixed_feed import scenario_nodes

    scenario = Path(__file__).resolve().parents[2] / "fixtures/scenarios/demo-cleanup-deadlock"
    now = 1_800_000_000.0
    feed = scenario_nodes(str(scenario), now, live=2, lost="node03")
    app = build_app(Bundle(mode="live", host="cluster", feed=feed), Settings(),
                    config_path=tmp_path / "config.yaml")
    app.clock = lambda: now
    return app


@pytest.mark.parametrize("size", SIZES)
def test_across_nodes(snap_compare, tmp_path, size):
    """Two nodes replaying the cleanup deadlock (ranks 0-3 on node01, 4-7 on node02) and one
    unreachable node. Must be visible: header "nodes 2/3 reporting (1 lost)"; the nodes pane
    with node03 first and "lost", then node01 and node02 "live" with their ranks "0-3" and
    "4-7", their GPU counts and node02's skew "-120.3s" (at 200x60 also the node# column and
    node03's reason "ssh exited with status 255: ssh: connect to host node03 por…", cut at the
    column's width); the GPU table grouped by node (node01 on GPU 0's row, node02 on its GPU 0's
    row, indices 0-3 each) with the name "Simulated GPU (demo)" whole at 200x60; the rank table
    with a node column (ranks 0-3 node01, 4-7 node02) and their stack classes. At 80x24 the
    three tables fold to one line each: "3 nodes: 1 lost, 2 live", "8 GPUs: 8 idle, 44-65 GiB",
    "8 ranks: 6 wait in recv_object_list, 2 in destroy_process_group", and the host-lost
    symptom's evidence holds node03's reason; the symptoms "CRIT Cleanup deadlock: ranks 3,7 in teardown, ranks
    0-2,4-6 wait" (across both nodes) and "WARN node03 could not be reached" (host-lost)."""
    app = _cluster_app(tmp_path)

    async def run_before(pilot) -> None:
        await pilot.pause()  # the feed's readings are folded
        await app.next_evaluation()  # and shown (the fixed clock keeps every age the same)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_two_jobs_header(snap_compare, replay_app, size):
    """Two 4-GPU jobs on one node, both with ranks 0-3; train_ppo's rank 2 exited. Must be
    visible: the header "CRITICAL (1)  node gpu-node-07  replay ... end  2 jobs:
    train_ppo-4000 (3/4 live) CRITICAL, eval-5000 (4) ok" (cut at 80 columns after the mode);
    the
    symptom "rank 2 exited while 4 other process(es) remain" (train_ppo's) with its evidence;
    at 80x24 the tables folded ("8 GPUs: 4 busy, 4 idle, 61-64 GiB", and the ranks per job,
    "train_ppo 5 ranks: 3 running, 1 exited, 1 sleeping · eval 5 ranks: 4 running,…" cut at the
    width); larger, the rank table with each job's ranks together, train_ppo's
    first. At 200x60 the whole jobs segment."""
    assert snap_compare(replay_app("two_jobs"), press=["e"], terminal_size=size)


@pytest.mark.parametrize("size", SIZES)
def test_two_jobs_picker(snap_compare, replay_app, size):
    """`j` on the two-jobs replay: the job picker over the main screen. Must be visible: "2 jobs
    on this node, worst first", the options "All jobs" (highlighted), "train_ppo-4000
    CRITICAL ranks 0-3 of 4 torchrun 4000 MASTER 127.0.0.1:29500" and "eval-5000 HEALTHY
    ranks 0-3 of 4 torchrun 5000 MASTER 127.0.0.1:29501"."""
    assert snap_compare(replay_app("two_jobs"), press=["e", "j"], terminal_size=size)


def test_evidence_cursor(snap_compare, replay_app):
    """The pattern-A replay at 120x40, enter on the hang symptom, the cursor moved down twice.
    Must be visible: the symptoms pane zoomed with "CRITICAL  Cleanup deadlock ..."; under
    "Evidence" the title "enter opens the source at rank.py:85, escape goes back"; the two
    class lines ("ranks 0-1: recv_object_list ...", "rank 2: destroy_process_group ...")
    marked "›"; the cursor "▶" and reverse video on "ranks diverge below main (rank.py:85)";
    "since HH:MM:SS" and the explanation marked "-" (they open nothing); the footer with
    "enter Open"."""
    assert snap_compare(replay_app("cleanup_deadlock_with_stacks"),
                        press=["e", "tab", "tab", "enter", "down", "down"],
                        terminal_size=(120, 40))


LAYOUT_SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40"),
                pytest.param((200, 60), id="200x60")]


@pytest.mark.parametrize("size", LAYOUT_SIZES)
@pytest.mark.parametrize("scenario", ["ranks4", "ranks16", "ranks64"])
def test_many_ranks_layout(snap_compare, replay_app, scenario, size):
    """4 ranks on 4 GPUs (rank 1 exited), or 16 or 64 ranks on 8 GPUs, one rank exited, GPUs
    0-1 idle. Must be visible: at 80x24 the GPU and rank panes folded to one line each ("4
    GPUs: 2 busy, 2 idle, 61-68 GiB" and "4 ranks: 2 running, 1 sleeping, 1 exited" for 4
    ranks; "8 GPUs: 6 busy, 2 idle, 61-78 GiB";
    "16 ranks: 12 running, 3 sleeping, 1 exited" / "64 ranks: 48 running, 15 sleeping, 1
    exited") and the symptoms pane with "CRIT rank 3 exited" (15 for 64 ranks), the detail's
    Evidence lines and Next steps; at 120x40 both tables at most 11 rows (the rank table
    scrolls) and the symptoms and logs with 15 rows (4 ranks: every row, rank 1 "exited 40s
    ago"); at 200x60 every row of 4 and 16 ranks, the 64-rank table scrolling, the symptoms
    below."""
    assert snap_compare(replay_app(scenario), press=["e"], terminal_size=size)
