"""Real hangs across two nodes: a torch.distributed job (gloo) of four ranks, ranks 0-1 on host
node-a and ranks 2-3 on node-b (network namespaces with their own sshd, tests/fakes/netns.py),
hangs in each pattern; ``rltui diagnose --hosts node-a,node-b --json`` run in this (the root)
namespace, a third host, reaches both nodes' agents over real ssh and must name the hang from
one classification of both nodes' stacks: both nodes live, ranks 0-3 each on its node, the
pattern's symptom with its suspect ranks, the waiting ranks of both nodes in one class. With
``--report`` the incident report names both nodes, and each rank's log by its node.

A and B are the jobs of the single-node tests (torchjobs/cleanup_deadlock.py and
collective_mismatch.py, four ranks: rank 3 on node-b is the odd one out). C is how a job of
several nodes reaches one collective everywhere: the healthy training loop (torchjobs/healthy.py)
is cut off between the nodes after a completed cross-node all_reduce, so every rank of both
nodes waits in the next one, at the same line, for data that never comes. The single-node C job
(same_collective.py) is C there only because its stalled rank is not dumped; across nodes the
agent of node-b dumps it, and the stalled-peer case checks that rltui then names it (pattern B:
a collective some ranks call and one does not).

The ranks get torchrun's variables (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR = node-a's address, MASTER_PORT) and GLOO_SOCKET_IFNAME. Every wait is
on a rank's line or on py-spy showing the rank in its collective (deadlines are safety nets).
The agents take a py-spy round every second and the classifier counts rounds a second apart as
separate samples, so the run's ``--duration`` holds at least two and the hang is confirmed
(stacks unchanged), whether or not the run also asks every node for a dump at its end. The
ranks die with their hosts' namespaces at teardown, pass or fail.
"""

from __future__ import annotations

import json
import queue
import shlex
import subprocess
from pathlib import Path

import psutil
import pytest

from rltui.rankset import expand
from tests.fakes.netns import Host, ip
from tests.integration.test_diagnose_hosts import FAST, diagnose, rltui_command
from tests.integration.test_torch_hangs import (
    ALL_REDUCE,
    TorchJob,
    needs_torch,
    pyspy_can_attach,  # noqa: F401 - autouse: skips where py-spy may not attach
    wait_for_frame,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, needs_torch]

HOSTS = ("node-a", "node-b")
PER_HOST = 2  # ranks per node: 0-1 on node-a, 2-3 on node-b
MASTER_PORT = "29500"  # torchrun's default; nothing else listens on a fresh host
# py-spy every second on every node, and rounds a second apart count as samples.
CONFIG = FAST + "pyspy:\n  interval: 1.0\nthresholds:\n  stack_sample_gap_s: 1.0\n"
# Two periodic rounds a second apart take ssh, the agent's start and two py-spy rounds (each
# well under a second, more on a loaded machine): room for them with a margin.
DURATION = "6"
UNREACHABLE_MAC = "02:00:00:00:00:01"  # a locally administered address no host has


class MultiNodeJob(TorchJob):
    """A torchjobs script with ``PER_HOST`` ranks on each host, in rank order, each started
    inside its host's namespaces; lines, waits and stop are TorchJob's."""

    def __init__(self, script: str, hosts: list[Host], args: tuple[str, ...],
                 log_dir: Path) -> None:
        super().__init__(script, len(hosts) * PER_HOST, args, log_dir)
        self.hosts = hosts

    def host_of(self, rank: int) -> Host:
        return self.hosts[rank // PER_HOST]

    def rank_env(self, rank: int, port: str) -> dict[str, str]:
        node, local = divmod(rank, PER_HOST)
        # No TORCHJOB_PARENT: a rank's parent is outside its host's PID namespace, where
        # getppid() says 0; the host's teardown and TORCHJOB_LIFETIME end it instead.
        env = super().rank_env(rank, port)
        del env["TORCHJOB_PARENT"]
        env.update(LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(PER_HOST), GROUP_RANK=str(node),
                   MASTER_ADDR=self.hosts[0].address, MASTER_PORT=MASTER_PORT,
                   # gloo would otherwise pick an address from the host name, which no
                   # resolver here knows: each host's one interface, as on a real cluster
                   GLOO_SOCKET_IFNAME="eth0")
        return env

    def spawn(self, rank: int, argv: list[str], **popen) -> subprocess.Popen:
        return self.host_of(rank).run(argv, **popen)

    def pid(self, rank: int) -> int:
        """The rank's Python (this machine's pid): the child nsenter forked into the host."""
        (child,) = psutil.Process(self.procs[rank].pid).children()
        return child.pid

    def lines_so_far(self) -> list[tuple[int, str]]:
        """Every (rank, line) printed so far, waited for or not."""
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                return list(self.seen)


@pytest.fixture
def multinode_job(request, cluster, tmp_path):
    """``multinode_job(script, *args)``: the job on two new hosts; the finalizer kills every
    rank (and the cluster's teardown the hosts with whatever is left in them)."""
    hosts = [cluster.add(name) for name in HOSTS]

    def start(script: str, *args: str) -> MultiNodeJob:
        job = MultiNodeJob(script, hosts, args, tmp_path)
        request.addfinalizer(job.stop)  # before start: a half-started job is killed too
        return job.start()
    return start


def cut_off(a: Host, b: Host) -> None:
    """The network between two hosts goes silent (both ways); each still answers this machine.
    Each sends the other's packets to a MAC address nobody has, so nothing is refused or
    reset: the open gloo connections just stop delivering, as across a failed switch."""
    for here, there in ((a, b), (b, a)):
        ip("-n", here.namespace, "neigh", "replace", there.address, "lladdr", UNREACHABLE_MAC,
           "dev", "eth0", "nud", "permanent")


# -- the hangs -------------------------------------------------------------------------------------

def odd_rank_out(script: str, rank3_says: str, rank3_frame: str):
    """A hang where ranks 0-2 wait in all_reduce and rank 3 (node-b) says ``rank3_says`` and
    sits in ``rank3_frame``."""
    def hang(start) -> MultiNodeJob:
        job = start(script)
        job.ready({0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE, 3: rank3_says})
        for r in (0, 1, 2):
            wait_for_frame(job.pid(r), ALL_REDUCE)
        wait_for_frame(job.pid(3), rank3_frame)
        return job
    return hang


# Rank 3 raises; its cleanup waits in a barrier while ranks 0-2 wait in all_reduce.
hang_a = odd_rank_out("cleanup_deadlock.py", "cleanup", "barrier")
# Rank 3 skips the gradients' all_reduce and gathers metrics: all_gather.
hang_b = odd_rank_out("collective_mismatch.py", "all_gather", "all_gather")


def hang_c(start) -> MultiNodeJob:
    """Step 1's all_reduce completes across the nodes; then the nodes are cut off from each
    other while every rank is in step 2's rollout (0.8 s) and update (0.8 s) phases, before
    its all_reduce: all four wait in step 2's all_reduce for good."""
    job = start("healthy.py")
    job.wait_lines({r: f"phase {r} rollout 2" for r in range(job.world)})
    cut_off(*job.hosts)
    for r in range(job.world):
        wait_for_frame(job.pid(r), ALL_REDUCE)
    return job


def stalled_peer(start) -> MultiNodeJob:
    """The single-node pattern C job: rank 3 (node-b) joined the group and never calls the
    all_reduce ranks 0-2 wait in. Its node is dumped too, so it is no longer absent."""
    job = start("same_collective.py")
    job.ready({0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE, 3: "stalled peer"})
    for r in (0, 1, 2):
        wait_for_frame(job.pid(r), ALL_REDUCE)
    wait_for_frame(job.pid(3), "park", within=3)  # under Event.wait, Condition.wait
    return job


# case: (make the hang, pattern, symptom id, suspect ranks, the symptom's ranks,
#        class ranks -> (op, teardown, call site))
CASES = {
    "A": (hang_a, "A", "hang-cleanup-deadlock", [3], [3],
          {"0-2": (ALL_REDUCE, False, "Trainer.sync_gradients"),
           "3": ("barrier", True, "Trainer.close")}),
    "B": (hang_b, "B", "hang-collective-mismatch", [3], [3],
          {"0-2": (ALL_REDUCE, False, "Trainer.sync_gradients"),
           "3": ("all_gather", False, "Trainer.log_metrics")}),
    "C": (hang_c, "C", "hang-same-collective", [], [0, 1, 2, 3],
          {"0-3": (ALL_REDUCE, False, "Trainer.train")}),
    # What single-node C becomes once the stalled peer's node is dumped as well: a collective
    # that some ranks call and one does not, that one named.
    "stalled-peer": (stalled_peer, "B", "hang-collective-mismatch", [3], [3],
                     {"0-2": (ALL_REDUCE, False, "Trainer.sync_gradients"),
                      "3": (None, False, None)}),
}


def run_diagnose(cluster, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    """diagnose() of the --hosts tests, with this module's config on both sides: later flags
    win, so the duration, the remote rltui (its config in RLTUI_CONFIG) and the config of the
    run itself (the thresholds) given here replace that helper's defaults."""
    config = tmp_path / "multinode.yaml"
    config.write_text(CONFIG)
    remote = shlex.join(["env", f"RLTUI_CONFIG={config}", *rltui_command()])
    return diagnose(cluster, tmp_path, ",".join(HOSTS), "--duration", DURATION,
                    "--remote-rltui", remote, "--config", str(config), "--json", *extra)


@pytest.mark.parametrize("case", list(CASES))
def test_a_hang_across_two_nodes_is_classified_from_both(case, cluster, multinode_job,
                                                        tmp_path):
    make, pattern, symptom_id, suspects, symptom_ranks, expected = CASES[case]
    job = make(multinode_job)
    done = run_diagnose(cluster, tmp_path)
    assert done.returncode == 1, done.stderr  # a confirmed hang is critical
    doc = json.loads(done.stdout)

    nodes = {n["host"]: n for n in doc["nodes"]}
    assert list(nodes) == list(HOSTS)
    for i, name in enumerate(HOSTS):
        node = nodes[name]
        assert node["state"] == "live" and node["merged"] and node["reason"] == "", node
        assert node["ranks"] == [i * PER_HOST + j for j in range(PER_HOST)], node

    ranks = [r for r in doc["ranks"] if any(job.script in w for w in r["cmdline"])]
    host_of = {r["rank"]: r["host"] for r in ranks}
    assert [(r["rank"], r["host"]) for r in ranks] == \
        [(r, job.host_of(r).name) for r in range(job.world)]

    stacks = doc["stacks"]
    assert (stacks["verdict"], stacks["pattern"], stacks["symptom_id"]) == \
        ("hang", pattern, symptom_id), stacks["explanation"]
    assert stacks["confirmed"] and stacks["samples"] >= 2
    assert stacks["suspect_ranks"] == suspects and stacks["missing_ranks"] == []
    classes = {c["ranks"]: c for c in stacks["classes"]}
    assert set(classes) == set(expected), stacks["explanation"]
    for members, (op, teardown, call_site) in expected.items():
        c = classes[members]
        site = c["call_site"]["name"] if c["call_site"] else None
        assert (c["op"], c["teardown"], site, c["state"]) == (op, teardown, call_site, "stuck"), c
    # the waiting ranks' class spans both nodes: one classification, not two half-pictures
    (waiting,) = [m for m, (op, _, _) in expected.items() if op == ALL_REDUCE]
    assert {host_of[r] for r in expand(waiting)} == set(HOSTS)

    (symptom,) = [s for s in doc["symptoms"] if s["id"] == symptom_id]
    assert symptom["severity"] == "critical" and symptom["ranks"] == symptom_ranks, symptom
    assert not any(s["id"] == "host-lost" for s in doc["symptoms"])
    if case == "C":  # the cut came before step 2's all_reduce: no rank ever completed it
        late = [line for _, line in job.lines_so_far() if "rollout 3" in line]
        assert not late, late


def test_the_incident_report_of_a_hang_across_two_nodes_names_both(cluster, multinode_job,
                                                                   tmp_path):
    job = hang_a(multinode_job)
    folder = tmp_path / "incident"
    done = run_diagnose(cluster, tmp_path, "--report", str(folder))
    assert done.returncode == 1, done.stderr
    report = json.loads((folder / "incident.json").read_text())

    assert [(n["host"], n["state"], n["ranks"]) for n in report["nodes"]] == \
        [("node-a", "live", [0, 1]), ("node-b", "live", [2, 3])]
    assert (report["stacks"]["pattern"], report["stacks"]["suspect_ranks"]) == ("A", [3])
    (symptom,) = [s for s in report["symptoms"] if s["id"] == "hang-cleanup-deadlock"]
    assert symptom["ranks"] == [3]
    # Each rank's log (its stderr file, found by its node's agent) is named by its node, and
    # the root cause the hang points to, rank 3's exception, comes from node-b.
    logs = {r["rank"]: r["log"] for r in report["ranks"]}
    assert {r: logs[r].split(":", 1)[0] for r in range(job.world)} == \
        {r: job.host_of(r).name for r in range(job.world)}
    (rank3,) = [log for log in report["logs"] if log["rank"] == 3]
    assert rank3["path"].startswith("node-b:")
    assert any(line.startswith("RuntimeError: The size of tensor a") for line in
               rank3["last_lines"]), rank3["last_lines"]

    md = (folder / "incident.md").read_text()
    assert "### CRITICAL `hang-cleanup-deadlock`" in md
    assert f"### {rank3['path']} (rank 3)" in md
    nodes = md[md.index("## Nodes"):].splitlines()
    for name, ranks in (("node-a", "0-1"), ("node-b", "2-3")):
        (row,) = [line for line in nodes if line.startswith(f"| {name} |")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert (cells[1], cells[5], cells[6]) == ("live", ranks, ""), row


# -- the Flight Recorder across nodes --------------------------------------------------------------

class FlightRecorderMultiNodeJob(MultiNodeJob):
    """The ranks record every collective and dump on a stall (torchjobs/_flightrec.py) to
    ``prefix`` + rank: each node's agent finds its own ranks' dumps through their environment."""

    prefix = ""

    def rank_env(self, rank: int, port: str) -> dict[str, str]:
        env = super().rank_env(rank, port)
        env.update(TORCH_FR_BUFFER_SIZE="2000", TORCH_FR_DUMP_TEMP_FILE=self.prefix,
                   TORCHJOB_FR_AFTER="1")
        return env


def test_a_cross_group_deadlock_across_two_nodes_is_read_from_both_nodes_dumps(
        request, cluster, tmp_path):
    """Ranks 0,1 (node-a) enter the default group's all_reduce first, ranks 2,3 (node-b) the
    statistics group's: every py-spy stack is the same (pattern C from the stacks alone), and
    each node's agent reads its own ranks' Flight Recorder dumps, so the one classification of
    both nodes reads the cross-group ordering deadlock (pattern B) from both nodes' dumps."""
    hosts = [cluster.add(name) for name in HOSTS]
    job = FlightRecorderMultiNodeJob("fr_cross_group.py", hosts, (), tmp_path)
    job.prefix = str(tmp_path / "fr_rank_")
    request.addfinalizer(job.stop)
    job.start()
    job.ready({0: "all_reduce default", 1: "all_reduce default", 2: "all_reduce stats",
               3: "all_reduce stats"})
    job.wait_lines({r: f"frdump {r} " for r in range(job.world)})
    for r in range(job.world):
        wait_for_frame(job.pid(r), ALL_REDUCE)
    done = run_diagnose(cluster, tmp_path)
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    stacks, fr = doc["stacks"], doc["flight_recorder"]
    assert (stacks["pattern"], stacks["symptom_id"]) == ("B", "hang-collective-mismatch"), \
        stacks["explanation"]
    assert fr["stack_pattern"] == "C" and fr["pattern"] == "B"
    assert sorted((s["rank"], s["source"].split(":", 1)[0]) for s in fr["sources"]) == \
        [(r, job.host_of(r).name) for r in range(job.world)]
    (finding,) = fr["findings"]
    assert finding["kind"] == "cross-group-order" and finding["ranks"] == [0, 1, 2, 3]
