"""The command lines that start agents (ssh, srun, local) and how their exits are explained."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rltui.remote.hostlist import Target
from rltui.remote.transports import (
    LOCAL,
    SLURM,
    SSH,
    ExitReason,
    Launch,
    agent_command,
    classify_exit,
    explain_exit,
    explain_spawn_error,
    local_argv,
    local_launches,
    run_on,
    slurm_launches,
    srun_argv,
    ssh_argv,
    ssh_launches,
)
from tests.importcheck import forbidden_loaded

SSH_DEFAULTS = ["-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]


def test_ssh_argv_default():
    assert ssh_argv("node01") == [
        "ssh", *SSH_DEFAULTS, "node01", "--", "rltui agent --host node01"]


def test_ssh_argv_user_timeout_options_and_agent_args():
    argv = ssh_argv(Target("node01", "alice"), connect_timeout=30,
                    ssh_options=["-J", "bastion", "-o", "Port=2222"],
                    agent_args=["--heartbeat", "2", "--log", "/data/run 1/*.log"])
    assert argv == [
        "ssh", "-J", "bastion", "-o", "Port=2222", "-T", "-o", "BatchMode=yes",
        "-o", "ConnectTimeout=30", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
        "alice@node01", "--",
        "rltui agent --host node01 --heartbeat 2 --log '/data/run 1/*.log'"]


@pytest.mark.parametrize(("remote", "command"), [
    ("/shared/venv/bin/rltui", "/shared/venv/bin/rltui agent --host n1"),
    ("/shared/venv/bin/python -m rltui", "/shared/venv/bin/python -m rltui agent --host n1"),
    ("~/venv/bin/rltui", "~/venv/bin/rltui agent --host n1"),  # ~ expands on the node
    ("'/opt/my tools/rltui'", "'/opt/my tools/rltui' agent --host n1"),
])
def test_ssh_remote_rltui(remote, command):
    assert ssh_argv("n1", remote_rltui=remote)[-1] == command


def test_the_remote_command_survives_the_remote_shell_word_for_word():
    """ssh gives the node's shell one string: every word must come out as it went in."""
    hostile = ["--log", "/logs/$(touch pwned)/*.log", "--match", "a b;c|d&e'f\"g`h`"]
    command = ssh_argv("n1", remote_rltui=f"{sys.executable} -c "
                       "'import json,sys; print(json.dumps(sys.argv[1:]))'",
                       agent_args=hostile)[-1]
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["agent", "--host", "n1", *hostile]


def test_ssh_refuses_a_host_that_would_be_an_option():
    with pytest.raises(ValueError, match="not a host name"):
        ssh_argv(Target("-oProxyCommand=x"))


def test_srun_argv_one_step_per_node():
    assert srun_argv("1234", "node03") == [
        "srun", "--overlap", "--jobid=1234", "--nodes=1", "--ntasks=1", "--nodelist=node03",
        "--job-name=rltui-agent", "rltui", "agent", "--host", "node03"]
    assert srun_argv("1234_7", "n1", rltui="/shared/venv/bin/rltui",
                     srun_options=["--gres=none"], agent_args=["--no-stacks"]) == [
        "srun", "--overlap", "--jobid=1234_7", "--nodes=1", "--ntasks=1", "--nodelist=n1",
        "--job-name=rltui-agent", "--gres=none", "/shared/venv/bin/rltui", "agent", "--host",
        "n1", "--no-stacks"]
    assert srun_argv("99+1", "n1")[2] == "--jobid=99+1"


def test_run_on_is_how_rltui_reached_the_node_without_the_agent():
    """The prefix of the incident report's commands: the user's ssh (options, user@, jump
    host) up to ``--``, the srun step without the agent, nothing for a local node."""
    ssh = Launch("node01", SSH, tuple(ssh_argv(Target("node01", "alice"),
                                               ssh_options=["-J", "bastion"])))
    assert run_on(ssh) == ["ssh", "-J", "bastion", *SSH_DEFAULTS, "alice@node01", "--"]
    (srun,) = slurm_launches("1234", ["node03"])
    assert run_on(srun) == ["srun", "--overlap", "--jobid=1234", "--nodes=1", "--ntasks=1",
                            "--nodelist=node03"]
    (local,) = local_launches(["sim01"])
    assert run_on(local) == []


@pytest.mark.parametrize("job", ["", "abc", "12;rm", "-1", "1_", "--jobid=1"])
def test_srun_refuses_what_is_not_a_job_id(job):
    with pytest.raises(ValueError, match="not a Slurm job id"):
        srun_argv(job, "n1")


def test_local_argv_runs_this_python():
    assert local_argv("sim01", agent_args=["--heartbeat", "0.2"]) == [
        sys.executable, "-m", "rltui", "agent", "--host", "sim01", "--heartbeat", "0.2"]
    assert local_argv("s", python="/usr/bin/python3")[:3] == ["/usr/bin/python3", "-m", "rltui"]


def test_agent_command():
    assert agent_command("n1") == ["rltui", "agent", "--host", "n1"]
    with pytest.raises(ValueError, match="empty"):
        agent_command("n1", rltui="  ")


def test_launches():
    assert slurm_launches("42", "node[01-02],node01") == [
        Launch("node01", SLURM, tuple(srun_argv("42", "node01"))),
        Launch("node02", SLURM, tuple(srun_argv("42", "node02")))]
    assert slurm_launches("42", ["a", "b"])[1].host == "b"
    assert ssh_launches([Target("n1", "bob")], connect_timeout=5) == [
        Launch("n1", SSH, tuple(ssh_argv(Target("n1", "bob"), connect_timeout=5)))]
    assert [lc.argv[-1] for lc in local_launches(["s1", "s2"])] == ["s1", "s2"]


INSTALL = ("install rltui in the node's environment (pip install rltui), or point "
           "--remote-rltui at one on a shared filesystem (/shared/venv/bin/rltui)")

EXITS = [
    # ssh's own failures (exit 255)
    (SSH, 255, "ssh: connect to host node01 port 22: Connection refused\n",
     "nothing answers ssh on the node (connection refused) (ssh: connect to host node01 port "
     "22: Connection refused): is sshd running there, or is the node rebooting?", False),
    (SSH, 255, "ssh: connect to host node01 port 22: Connection timed out\n",
     "timed out connecting to the node (ssh: connect to host node01 port 22: Connection timed "
     "out): is it up and reachable from here?", False),
    (SSH, 255, "ssh: Could not resolve hostname nodex: Name or service not known\n",
     "the host name does not resolve (ssh: Could not resolve hostname nodex: Name or service "
     "not known): check the name (or add a Host entry with HostName to ~/.ssh/config)", True),
    (SSH, 255, "alice@node01: Permission denied (publickey,password).\n",
     "ssh could not log in (permission denied) (alice@node01: Permission denied "
     "(publickey,password).): make a key work without a prompt (ssh-agent, IdentityFile in "
     "~/.ssh/config); BatchMode never asks for a password", True),
    (SSH, 255, "No ED25519 host key is known for node01 and you have requested strict "
               "checking.\nHost key verification failed.\n",
     "ssh refused the node's host key (unknown or changed) (Host key verification failed.): "
     "connect once by hand (ssh HOST) to check and accept it; rltui never accepts keys", True),
    (SSH, 255, "Timeout, server node01 not responding.\n",
     "the node stopped answering (no reply to ssh keep-alives for 15 s) (Timeout, server "
     "node01 not responding.)", False),
    (SSH, 255, "Connection closed by 10.0.0.7 port 22\n",
     "the ssh connection dropped (Connection closed by 10.0.0.7 port 22)", False),
    # what OpenSSH prints when the node's sshd (or the session serving the agent) dies
    (SSH, 255, "Connection to 10.201.0.2 closed by remote host.\n",
     "the ssh connection dropped (Connection to 10.201.0.2 closed by remote host.)", False),
    (SSH, 255, "something new\n", "ssh failed (something new)", False),
    # what the node's shell and rltui said, through ssh
    (SSH, 127, "bash: line 1: rltui: command not found\n",
     f"rltui is not installed on the node (bash: line 1: rltui: command not found): {INSTALL}",
     True),
    (SSH, 127, "", f"rltui is not installed on the node: {INSTALL}", True),
    (SSH, 126, "bash: /shared/rltui: Permission denied\n",
     "rltui cannot be run on the node (bash: /shared/rltui: Permission denied): check the path "
     "and its permissions (--remote-rltui)", True),
    (SSH, 2, "usage: rltui [-h]\nrltui: error: argument command: invalid choice: 'agent' "
             "(choose from 'demo', 'replay')\n",
     "the node's rltui is too old to have the agent command: upgrade it there "
     "(pip install -U rltui)", True),
    (SSH, 2, "usage: rltui agent\nrltui: error: unrecognized arguments: --frob\n",
     "the node's rltui does not know an option sent to it (rltui: error: unrecognized "
     "arguments: --frob): upgrade it there (pip install -U rltui)", True),
    (SSH, 2, "rltui agent: bad config /x.yaml line 3\n",
     "the agent could not start (rltui agent: bad config /x.yaml line 3)", True),
    (SSH, 137, "", "ended by SIGKILL on the node: SIGKILL there is often the out-of-memory "
                   "killer", False),
    (SSH, 1, "Traceback...\nRuntimeError: HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123 bad\n",
     "exited with status 1 (RuntimeError: HF_TOKEN=*** bad)", False),
    (SSH, 0, "", "the agent exited", False),
    # srun
    (SLURM, 1, "srun: error: Unable to confirm allocation for job 99: Invalid job id "
               "specified\n",
     "the job does not exist or has ended (srun: error: Unable to confirm allocation for job "
     "99: Invalid job id specified): check the id with squeue --me", True),
    (SLURM, 1, "srun: unrecognized option '--overlap'\nTry \"srun --help\" for more "
               "information\n",
     "srun rejected an option (srun --overlap needs Slurm 20.11 or newer) (srun: "
     "unrecognized option '--overlap'): check srun --version and --srun-option", True),
    (SLURM, 1, "srun: error: Unable to create step for job 99: Requested node configuration "
               "is not available\n",
     "the node is not part of the job (srun: error: Unable to create step for job 99: "
     "Requested node configuration is not available): check squeue -j JOBID -o %N", True),
    (SLURM, 1, "srun: error: Unable to create step for job 99: Job/step already completing "
               "or completed\n",
     "the job is ending (srun: error: Unable to create step for job 99: Job/step already "
     "completing or completed)", True),
    (SLURM, 1, "srun: error: Unable to confirm allocation for job 99: Access/permission "
               "denied\n",
     "Slurm denied access to the job (not yours?) (srun: error: Unable to confirm allocation "
     "for job 99: Access/permission denied)", True),
    (SLURM, 2, "slurmstepd: error: execve(): rltui: No such file or directory\n"
               "srun: error: node01: task 0: Exited with exit code 2\n",
     f"rltui is not installed on the node (slurmstepd: error: execve(): rltui: No such file "
     f"or directory): {INSTALL}", True),
    (SLURM, 1, "srun: error: Unable to contact slurm controller (connect failure)\n",
     "the Slurm controller did not answer (srun: error: Unable to contact slurm controller "
     "(connect failure))", False),
    (SLURM, 1, "srun: error: Node failure on node07\n",
     "the step on the node failed (srun: error: Node failure on node07)", False),
    # local, and signals from here
    (LOCAL, -9, "", "killed by SIGKILL", False),
    (LOCAL, -15, "", "killed by SIGTERM", False),
    (LOCAL, 1, "Traceback\nValueError: boom\n", "exited with status 1 (ValueError: boom)",
     False),
    (LOCAL, None, "", "the agent's output ended", False),
]


@pytest.mark.parametrize(("transport", "returncode", "stderr", "expected", "permanent"), EXITS,
                         ids=[f"{e[0]}-{e[1]}-{i}" for i, e in enumerate(EXITS)])
def test_exits_are_explained(transport, returncode, stderr, expected, permanent):
    reason = classify_exit(transport, returncode, stderr)
    assert str(reason) == expected
    assert reason.permanent is permanent
    assert explain_exit(transport, returncode, stderr.encode()) == expected


def test_ssh_host_key_warnings_are_not_the_reason():
    stderr = "Warning: Permanently added 'node01' (ED25519) to the list of known hosts.\n"
    assert explain_exit(SSH, 1, stderr) == "exited with status 1"


def test_a_long_stderr_line_is_cut():
    reason = explain_exit(LOCAL, 1, "x" * 1000)
    assert reason == f"exited with status 1 ({'x' * 197}...)"


def test_spawn_errors():
    assert explain_spawn_error(SSH, "ssh", FileNotFoundError(2, "nope")) == ExitReason(
        "ssh is not found on this machine", "install the OpenSSH client (openssh-client)", True)
    assert "srun is not found" in str(explain_spawn_error(SLURM, "srun", FileNotFoundError()))
    assert explain_spawn_error(LOCAL, "/x", PermissionError(13, "denied")).permanent


@pytest.mark.parametrize("module", ["rltui.remote.hostlist", "rltui.remote.transports",
                                    "rltui.remote.timing", "rltui.remote.status"])
def test_the_pure_modules_import_no_outside_world(module):
    assert forbidden_loaded([module], ("textual", "rich", "pynvml", "psutil", "subprocess")) == []
