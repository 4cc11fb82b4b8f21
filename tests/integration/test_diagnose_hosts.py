"""``rltui diagnose --hosts ... --json`` across real hosts: network namespaces on this machine,
each with its own OpenSSH server (tests/fakes/netns.py), a real rank process (RANK in its
environment) writing step lines to its stdout file, and rltui run as a command, reaching the
agents with its own ssh command lines (``--ssh-option "-F config"``) and this checkout's rltui
as ``--remote-rltui`` (the hosts share this filesystem: rltui on a shared filesystem).

``--duration`` is the command's own sampling time; the run also waits for each host's first
readings, so nothing here waits on a clock. Agents run with a fast cadence (0.2 s) through
RLTUI_CONFIG in the remote command, so a few seconds hold many polls.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.netns import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WAIT = 120  # seconds: a safety net for a stuck run, not a performance bound
FAST = "cadence:\n  gpus: 0.2\n  procs: 0.2\n  logs: 0.2\n"
RANK_MARK = "rltui-diagnose-hosts-test-rank"
# A rank stand-in: RANK in its environment; writes verl-style step lines to its stdout (a
# file, so the agent finds the log through the process), says ready on stderr, then waits.
RANK_CODE = (f"import sys  # {RANK_MARK}\n"
             "for i in range(1, 6):\n    print(f'step:{i} - actor/loss:0.{i}', flush=True)\n"
             "print('ready', file=sys.stderr, flush=True)\nsys.stdin.read()\n")


def rltui_command() -> list[str]:
    script = Path(sys.executable).parent / "rltui"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-m", "rltui"]


@pytest.fixture
def ranks(tmp_path):
    started: list[subprocess.Popen] = []

    def start(host, rank: int, world: int) -> Path:
        log = tmp_path / f"rank{rank}.log"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RANK": str(rank),
               "LOCAL_RANK": "0", "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": "1"}
        with open(log, "w") as out:
            proc = host.run([sys.executable, "-c", RANK_CODE], env=env, stdin=subprocess.PIPE,
                            stdout=out, stderr=subprocess.PIPE)
        started.append(proc)
        ready, _, _ = select.select([proc.stderr], [], [], WAIT)
        assert ready and proc.stderr.readline() == b"ready\n", "the rank did not start"
        return log
    yield start
    for proc in started:
        proc.stdin.close()
        proc.wait(WAIT)


def diagnose(cluster: Cluster, tmp_path: Path, hosts: str, *extra: str):
    config = tmp_path / "agent.yaml"
    config.write_text(FAST)
    remote = shlex.join(["env", f"RLTUI_CONFIG={config}", *rltui_command()])
    argv = [*rltui_command(), "diagnose", "--hosts", hosts, "--duration", "3",
            "--ssh-option", shlex.join(cluster.ssh_options), "--remote-rltui", remote,
            "--connect-timeout", "5", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=WAIT,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def test_two_hosts_are_diagnosed_as_one_job_with_their_ranks(cluster, ranks, tmp_path):
    a, b = cluster.add("node-a"), cluster.add("node-b")
    ranks(a, 0, 2)
    ranks(b, 1, 2)
    done = diagnose(cluster, tmp_path, "node-a,node-b", "--json", "--report",
                    str(tmp_path / "incident"))
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)

    nodes = {n["host"]: n for n in doc["nodes"]}
    assert list(nodes) == ["node-a", "node-b"]
    for name, rank in (("node-a", 0), ("node-b", 1)):
        node = nodes[name]
        assert node["state"] == "live", node
        assert node["ranks"] == [rank] and node["merged"]
        assert node["last_seen"] is not None and node["skew_s"] is not None
        assert node["reason"] == ""

    # the merged job: both ranks by global rank, each with its host
    job = [r for r in doc["ranks"] if any(RANK_MARK in w for w in r["cmdline"])]
    assert [(r["rank"], r["host"]) for r in job] == [(0, "node-a"), (1, "node-b")]
    assert doc["host"] == "node-a,node-b"
    # every existing field of the document is still there
    for field in ("schema", "tool", "mode", "job", "timestamp", "now_source", "verdict",
                  "symptoms", "gpus", "gpu_simulated", "foreign_gpu_pids", "departed",
                  "sources", "logs", "unmatched_logs", "notes"):
        assert field in doc, field
    # each host's log, found through its rank's stdout, with the host in its path
    logs = {log["path"]: log for log in doc["logs"]}
    for name, rank in (("node-a", 0), ("node-b", 1)):
        (path,) = [p for p in logs if p.startswith(f"{name}:") and p.endswith(f"rank{rank}.log")]
        assert logs[path]["rank"] == rank and logs[path]["last_step"] == 5
    assert not any(s["id"] == "host-lost" for s in doc["symptoms"])

    report = json.loads((tmp_path / "incident" / "incident.json").read_text())
    assert [n["host"] for n in report["nodes"]] == ["node-a", "node-b"]
    md = (tmp_path / "incident" / "incident.md").read_text()
    assert "## Nodes" in md
    assert "| node-a | live |" in md and "| node-b | live |" in md


def test_a_host_without_sshd_is_lost_with_sshs_reason_and_the_other_is_reported(
        cluster, ranks, tmp_path):
    a = cluster.add("node-a")
    cluster.add("node-c", sshd=False)
    ranks(a, 0, 1)
    done = diagnose(cluster, tmp_path, "node-a,node-c", "--json", "--fail-on", "warning")
    doc = json.loads(done.stdout)
    nodes = {n["host"]: n for n in doc["nodes"]}
    assert nodes["node-a"]["state"] == "live" and nodes["node-a"]["ranks"] == [0]
    lost = nodes["node-c"]
    assert lost["state"] == "lost" and lost["last_seen"] is None
    assert "connection refused" in lost["reason"] and "ssh: connect to host" in lost["reason"]
    (symptom,) = [s for s in doc["symptoms"] if s["id"] == "host-lost"]
    assert symptom["severity"] == "warning" and "node-c could not be reached" in symptom["title"]
    assert done.returncode == 1  # --fail-on warning: the unreachable host counts


def test_no_host_answering_is_exit_3_with_the_reasons(cluster, tmp_path):
    cluster.add("node-c", sshd=False)
    done = diagnose(cluster, tmp_path, "node-c")
    assert done.returncode == 3, done.stderr
    assert "no host answered" in done.stderr
    assert "node-c" in done.stdout and "connection refused" in done.stdout
