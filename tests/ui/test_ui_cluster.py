"""The app across nodes: real agent processes over real pipes, read by the real AgentFeed.

Each simulated node is ``tests/fakes/replay_agent.py`` replaying the recorded cleanup deadlock
(4 ranks) with its ranks made global (node01: ranks 0-3, node02: ranks 4-7), over the real
wire protocol; an unreachable node is a process that fails the way ssh does (exit 255 and its
message). Waits are on evaluations (``app.next_evaluation``), never sleeps; the timeouts are
safety nets.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from rltui.config import Cadence, Settings
from rltui.diagnosis.thresholds import Thresholds
from rltui.remote.feed import AgentFeed
from rltui.remote.timing import Backoff
from rltui.remote.transports import LOCAL, Launch
from rltui.sources.bundle import Bundle
from rltui.ui import build_app
from rltui.ui.screens.stacks import StacksScreen
from tests.ui.helpers import header_text, until_view

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "fixtures" / "scenarios" / "demo-cleanup-deadlock"
WAIT = 60.0  # seconds: a safety net for a loaded machine, not a bound anything is held to
FAST = Settings(cadence=Cadence(ui=0.1), thresholds=Thresholds(stale_after_intervals=1000.0))
SSH_FAILS = ("sh", "-c", "echo 'ssh: connect to host node03 port 22: No route to host' >&2; "
                         "exit 255")


def replay_node(host: str, node_rank: int, *extra: str) -> Launch:
    return Launch(host, LOCAL, (
        sys.executable, "-m", "tests.fakes.replay_agent", "--host", host,
        "--scenario", str(SCENARIO), "--node-rank", str(node_rank), "--ranks-per-node", "4",
        "--world", "8", "--heartbeat", "0.2", *extra))


def cluster_app(tmp_path, plan: list[Launch], settings: Settings = FAST, **stream_options):
    # A lost node is retried 30 s later (not 0.5-1 s): its "lost" state holds while a test
    # reads the screen, however loaded the machine; reconnecting has its own test.
    stream_options.setdefault("backoff", Backoff(initial=30.0, jitter=0.0))
    feed = AgentFeed(plan, cwd=str(REPO), env={**os.environ, "PYTHONPATH": str(REPO)},
                     **stream_options)
    bundle = Bundle(mode="live", host="cluster", feed=feed, closers=[feed.close])
    return build_app(bundle, settings, config_path=tmp_path / "config.yaml")


async def until(app, condition, what: str):
    """The first view for which ``condition(view)`` holds."""
    return await until_view(app, condition, what, timeout=WAIT)


def states(view) -> dict[str, str]:
    return {n.host: n.status.state for n in view.cluster.nodes}


def ranks_in(view) -> set[int]:
    return {r.rank for r in view.cluster.ranks if r.rank is not None}


def table_text(table, row: str, column: str) -> str:
    return str(table.get_cell(row, column).text)


async def test_nodes_gpus_and_ranks_across_nodes(tmp_path):
    plan = [replay_node("node01", 0), replay_node("node02", 1), Launch("node03", LOCAL, SSH_FAILS)]
    app = cluster_app(tmp_path, plan)
    async with app.run_test(size=(200, 60)) as pilot:
        await until(app, lambda v: states(v) == {
            "node01": "live", "node02": "live", "node03": "lost"} and ranks_in(v) == set(range(8))
            and len(v.snapshot.gpus) == 8, "two nodes live with 8 ranks and 8 GPUs, one lost")
        await pilot.pause()
        screen = app.main_screen
        assert screen.node_pane is not None and "2/3 reporting (1 lost)" in header_text(app)
        lost = [x for x in app.latest.diagnosis.symptoms if x.id == "host-lost"]
        assert len(lost) == 1 and "node03 could not be reached" in lost[0].title

        # The nodes pane: the lost node first, with ssh's reason.
        nodes = screen.node_pane.table
        assert nodes.row_keys[0] == "n2"  # node03's slot
        assert table_text(nodes, "n2", "state") == "lost"
        assert "No route to host" in table_text(nodes, "n2", "reason")
        assert table_text(nodes, "n0", "ranks") == "0-3"
        assert table_text(nodes, "n1", "ranks") == "4-7"
        assert table_text(nodes, "n1", "gpus").startswith("4")

        # The GPU table, grouped: each node's name on its first GPU, local indices.
        gpus = screen.gpus.table
        keys = gpus.row_keys
        assert [table_text(gpus, k, "node") for k in keys] == [
            "node01", "", "", "", "node02", "", "", ""]
        assert [table_text(gpus, k, "index") for k in keys] == ["0", "1", "2", "3"] * 2
        assert "GPUs (8 on 2 nodes)" in str(screen.gpus.border_title)

        # The rank table: global ranks with their node; pids repeat across nodes (the
        # simulated nodes replay one recording), rows do not collide.
        ranks = screen.ranks.table
        rows = {table_text(ranks, k, "rank"): table_text(ranks, k, "node")
                for k in ranks.row_keys}
        assert {r: rows[r] for r in map(str, range(8))} == {
            **{str(r): "node01" for r in range(4)}, **{str(r): "node02" for r in range(4, 8)}}
        pids = {table_text(ranks, k, "pid") for k in ranks.row_keys}
        assert len(pids) < len(ranks.row_keys)  # the same pids on both nodes


async def test_dump_asks_every_node_and_the_stacks_span_nodes(tmp_path):
    plan = [replay_node("node01", 0), replay_node("node02", 1), Launch("node03", LOCAL, SSH_FAILS)]
    app = cluster_app(tmp_path, plan)
    notes: list[str] = []
    async with app.run_test(size=(200, 60)) as pilot:
        await until(app, lambda v: states(v)["node03"] == "lost" and all(
            n.snapshot is not None and n.snapshot.source("stacks") is not None
            for n in v.cluster.nodes if n.host != "node03"), "both nodes sent a stack round")
        real_notify = app.notify
        app.notify = lambda message, **kw: (notes.append(str(message)),
                                            real_notify(message, **kw))
        waiter = app.next_evaluation(timeout=WAIT)
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await waiter
        assert any("2 of 3 node(s) dumped" in n and "node03" in n and "No route to host" in n
                   for n in notes), notes

        view = await until(app, lambda v: v.stacks is not None, "stacks classified")
        members = {m for c in view.stacks.classes for m in c.members}
        assert {0, 7} <= members  # ranks of both nodes in one classification
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, StacksScreen)


async def test_a_node_lost_mid_stream_while_the_other_keeps_updating(tmp_path):
    plan = [replay_node("node01", 0, "--loop"), replay_node("node02", 1, "--loop")]
    # The first retry 5 s after the loss, not 0.5-1 s: long enough that the screen can be read
    # while the node is lost, on a loaded machine too; it still comes back by itself after.
    app = cluster_app(tmp_path, plan, backoff=Backoff(initial=5.0, jitter=0.0))
    async with app.run_test(size=(120, 40)) as pilot:
        view = await until(app, lambda v: set(states(v).values()) == {"live"}, "both live")
        victim = next(s for s in app.driver.feed.streams if s.host == "node02").status().pid
        os.kill(victim, signal.SIGKILL)
        view = await until(app, lambda v: states(v)["node02"] == "lost", "node02 lost")
        # On screen, as this view shows it (the panes got it before until() returned): its
        # ranks stay in the table as unknown, the header counts it lost.
        await pilot.pause()
        assert "(1 lost)" in header_text(app)
        table = app.main_screen.ranks.table
        rows = {table_text(table, k, "rank"): (table_text(table, k, "node"),
                                               table_text(table, k, "state"))
                for k in table.row_keys}
        assert {r: rows[str(r)] for r in range(4, 8)} == {
            r: ("node02", "unknown") for r in range(4, 8)}
        assert "4 unknown" in str(app.main_screen.ranks.border_title)
        lost = view.cluster.node("node02")
        assert "killed" in lost.status.reason or "exited" in lost.status.reason, lost.status
        # Its ranks are unknown (last seen alive), not exited; the others stay in the view.
        assert {r.state for r in view.cluster.ranks_on("node02")} == {"unknown"}
        assert {r.rank for r in view.cluster.ranks_on("node01")} == {0, 1, 2, 3}
        seen = view.cluster.node("node01").status.last_seen
        later = await until(app, lambda v: v.cluster.node("node01").status.last_seen > seen,
                            "node01 keeps streaming")
        assert states(later)["node01"] == "live"
        # The app's streams reconnect with backoff: the node comes back by itself.
        await until(app, lambda v: states(v)["node02"] == "live", "node02 back")


async def test_a_skewed_node_clock_is_measured_and_its_ages_corrected(tmp_path):
    plan = [replay_node("node01", 0), replay_node("node02", 1, "--clock-skew", "120")]
    app = cluster_app(tmp_path, plan)
    async with app.run_test(size=(200, 60)) as pilot:
        view = await until(app, lambda v: all(
            n.skew is not None and n.snapshot is not None for n in v.cluster.nodes),
            "both skews measured")
        skewed = view.cluster.node("node02")
        assert -121.0 < skewed.skew < -119.0  # this clock is 120 s behind the node's
        assert abs(view.cluster.node("node01").skew) < 1.0
        # Moved onto this clock: the node's readings are not 2 minutes in the future.
        assert abs(skewed.snapshot.timestamp - view.snapshot.timestamp) < 10.0
        for state in skewed.snapshot.sources:
            assert state.last_reading is not None
            assert view.snapshot.timestamp - state.last_reading > -1.0, state
        await pilot.pause()
        # the text is the measured skew (a loaded machine measures -119.9 as well as -120.0)
        shown = app.main_screen.node_pane.table.get_cell("n1", "skew").text
        assert shown.endswith("s") and -121.0 < float(shown[:-1]) < -119.0, shown


HOSTILE = (
    "import sys, json, time\n"
    "w = sys.stdout.write\n"
    "w('not json at all\\n'); w('\\x00\\xff garbage\\n'); w('{\"v\": 1}\\n')\n"
    "w('x' * (9 << 20) + '\\n')\n"  # over the 8 MiB line limit
    "w(json.dumps({'v': 1, 'type': 'hello', 'host': 'node01', 't': time.time(),"
    " 'agent': 'evil', 'pid': 1}) + '\\n')\n"
    "w(json.dumps({'v': 1, 'type': 'reading', 'host': 'node01', 't': time.time(),"
    " 'source': 'gpus', 'reading': {'source': 'gpus', 'timestamp': 'soon'}}) + '\\n')\n"
    "w(json.dumps({'v': 1, 'type': 'reading', 'host': 'node01', 't': time.time(),"
    " 'source': 'gpus', 'reading': {'source': 'gpus', 'timestamp': time.time(),"
    " 'status': 'ok', 'payload': {'gpus': [{'index': 0, 'name': 'EVIL', 'uuid': 'e'}]}}})"
    " + '\\n')\n"
    "sys.stdout.flush(); sys.stdin.read()\n")


async def test_a_hostile_stream_is_rejected_and_cannot_touch_other_nodes(tmp_path):
    """Garbage, a 9 MiB line, a wrong schema and a bad reading from one "node" are recorded as
    problems of that stream; the app keeps running, and a line naming another node is filed
    under the stream it came from, never under the node it names."""
    plan = [replay_node("node01", 0), Launch("evil", LOCAL, (sys.executable, "-c", HOSTILE))]
    app = cluster_app(tmp_path, plan)
    async with app.run_test(size=(200, 60)) as pilot:
        # The stream's lines are read in order: once its last (valid) line is folded, every
        # bad line before it has been judged.
        # node01 "live" is its hello; its GPUs come with its first reading
        # node01's ranks come with its first procs reading (the replay may send its GPUs first)
        view = await until(app, lambda v: states(v)["node01"] == "live"
                           and v.cluster.node("node01").snapshot is not None
                           and v.cluster.node("node01").snapshot.gpus
                           and any(r.host == "node01" for r in v.cluster.ranks)
                           and v.cluster.node("evil").snapshot is not None,
                           "the hostile stream read to its last line")
        evil = next(s for s in app.driver.feed.streams if s.host == "evil").status()
        kinds = {p.kind for p in evil.problems}
        assert {"not-json", "too-long", "reading"} <= kinds, evil.problems
        node01 = view.cluster.node("node01")
        assert node01.snapshot is not None and len(node01.snapshot.gpus) == 4
        assert "EVIL" not in {g.name for g in node01.snapshot.gpus}
        assert [g.name for g in view.cluster.node("evil").gpus] == ["EVIL"]
        assert {r.host for r in view.cluster.ranks} == {"node01"}
        await pilot.pause()
        assert app.is_running


async def test_the_incident_report_across_nodes_names_every_node(tmp_path):
    plan = [replay_node("node01", 0), replay_node("node02", 1), Launch("node03", LOCAL, SSH_FAILS)]
    app = cluster_app(tmp_path, plan)
    app.report_parent = tmp_path  # chosen already: `i` writes without asking
    app.report_folder = lambda now: "incident"
    async with app.run_test(size=(200, 60)) as pilot:
        # each node's own latest round, not only the merged picture: the merge has stacks as
        # soon as one node has sent its round
        await until(app, lambda v: states(v)["node03"] == "lost" and ranks_in(v) == set(range(8))
                    and all(n.snapshot is not None and n.snapshot.stacks
                            for n in v.cluster.nodes if n.host != "node03"),
                    "both nodes with stacks")
        await pilot.press("i")
        await pilot.pause()
    (md, js), = app.reports_written
    doc = json.loads(js.read_text())
    assert [n["host"] for n in doc["nodes"]] == ["node01", "node02", "node03"]
    assert {r["rank"]: r["host"] for r in doc["ranks"]} == {
        r: "node01" if r < 4 else "node02" for r in range(8)}
    # One py-spy command per dumped process of each node; these simulated nodes run here
    # (local launches), so none is prefixed (ssh and srun prefixes: test_transports.py).
    commands = [c for c in doc["commands"] if "py-spy dump --pid" in c]
    assert len(commands) == 8 and all(c.startswith("py-spy dump --pid ") for c in commands)
    text = md.read_text()
    assert "| rank | host | pid |" in text and "| 4 | node02 |" in text
    assert "| node03 | lost |" in text


SILENT_AFTER_HELLO = (
    "import sys, json, time\n"
    "print(json.dumps({'v': 1, 'type': 'hello', 'host': 'node02', 't': time.time(),"
    " 'agent': 'rltui test', 'pid': 1, 'sources': {'gpus': 1.0}}), flush=True)\n"
    "sys.stdin.read()\n")  # then silence: no reading, no heartbeat (a node stuck in D state)


async def test_a_silent_node_turns_slow_and_never_holds_the_others_back(tmp_path):
    plan = [replay_node("node01", 0),
            Launch("node02", LOCAL, (sys.executable, "-c", SILENT_AFTER_HELLO))]
    app = cluster_app(tmp_path, plan, heartbeat=0.2, slow_after=3)
    async with app.run_test(size=(200, 60)) as pilot:
        view = await until(app, lambda v: states(v)["node02"] == "slow"
                           and states(v)["node01"] == "live", "node02 slow, node01 live")
        seen = view.cluster.node("node01").status.last_seen
        later = await until(app, lambda v: v.cluster.node("node01").status.last_seen > seen,
                            "node01 keeps streaming while node02 is silent")
        assert states(later)["node02"] == "slow"
        await pilot.pause()
        nodes = app.main_screen.node_pane.table
        assert nodes.row_keys[0] == "n1"  # the slow node above the live one
        assert table_text(nodes, "n1", "state") == "slow"


async def test_at_80x24_the_nodes_pane_folds_with_the_tables(tmp_path):
    """80x24 across nodes with a lost node: the nodes, GPU and rank panes fold to one line each
    (the nodes' news first: ``2 nodes: 1 lost, 1 live``), the symptoms get the rest, and ``z``
    on the folded nodes line shows its table full screen."""
    plan = [replay_node("node01", 0, "--loop"), Launch("node03", LOCAL, SSH_FAILS)]
    app = cluster_app(tmp_path, plan)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(app, lambda v: states(v) == {"node01": "live", "node03": "lost"}
                    and any(s.id == "host-lost" for s in v.diagnosis.symptoms),
                    "node01 live, node03 lost")
        await pilot.pause()
        screen = app.main_screen
        nodes = screen.node_pane
        assert nodes.folded and screen.gpus.folded and screen.ranks.folded
        assert str(nodes.summary.render()) == "2 nodes: 1 lost, 1 live"
        assert nodes.region.height == 2  # its title line and the summary
        assert screen.symptoms.region.height >= 12
        nodes.summary.focus()
        await pilot.press("z")
        await pilot.pause()
        assert screen.maximized is nodes and not nodes.folded
        assert nodes.table.region.height > 2
        await pilot.press("escape")
        await pilot.pause()
        assert nodes.folded
