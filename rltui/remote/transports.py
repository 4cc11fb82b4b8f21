"""The command lines that start ``rltui agent`` where the job runs, and what their exits mean.

Pure: builds argv lists, never runs them (rltui.remote.stream runs them). Three transports:

* ssh: the user's own OpenSSH client, so ~/.ssh/config, keys, agents and jump hosts apply
  untouched; rltui only adds what a headless, long-lived pipe needs (below).
* slurm: one ``srun --overlap`` step per node inside the job's allocation. Per node rather than
  one step for all nodes: a node that fails, hangs in step creation or is restarted is then
  one process with its own exit status, stderr and backoff, and never takes the other nodes'
  agents down with it (a step that loses a node is torn down whole); each agent's stdout is
  its own pipe, and a request on stdin reaches exactly one agent (srun would broadcast it).
  The cost is one srun process per node here and one step each in slurmctld, which is small
  next to the job's own steps for the 2 to 128 nodes this is for.
* local: ``python -m rltui agent`` on this machine: tests and simulated nodes.

Every agent is started with ``--host NAME``, the name rltui knows the node by, so every line
it writes carries the label the view groups by, whatever the node calls itself.
"""

from __future__ import annotations

import re
import shlex
import signal
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rltui.redact import scrub_text
from rltui.remote.hostlist import Target, expand

SSH = "ssh"
SLURM = "slurm"
LOCAL = "local"
TRANSPORTS = (SSH, SLURM, LOCAL)

DEFAULT_RLTUI = "rltui"
DEFAULT_CONNECT_TIMEOUT = 10  # seconds for ssh to reach a node before giving up on this try
# A dead connection (node powered off, network gone) is noticed after about
# ServerAliveInterval x ServerAliveCountMax = 15 s instead of the TCP timeout of minutes.
SSH_KEEPALIVE = ("-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3")
JOB_ID = re.compile(r"[0-9]+(?:[_+][0-9]+)?")  # 1234, an array task 1234_5, a het job 1234+0


@dataclass(frozen=True, slots=True)
class Launch:
    """One agent to start: the node's name (its label), the transport, and the argv."""

    host: str
    transport: str
    argv: tuple[str, ...]


def agent_command(host: str, *, rltui: str = DEFAULT_RLTUI,
                  agent_args: Sequence[str] = ()) -> list[str]:
    """``rltui agent --host HOST ...``, where ``rltui`` may be several words
    (``/shared/venv/bin/python -m rltui``) for a node where it is not on the PATH."""
    words = shlex.split(rltui)
    if not words:
        raise ValueError("the remote rltui command is empty")
    return [*words, "agent", "--host", host, *agent_args]


def _remote_shell_command(words: Sequence[str]) -> str:
    """ssh hands the remote shell one string: quote every word, but let a leading ``~/`` of
    the program expand there, since ``~/venv/bin/rltui`` is how people install it."""
    first, rest = words[0], words[1:]
    head = "~/" + shlex.quote(first[2:]) if first.startswith("~/") else shlex.quote(first)
    return " ".join([head, *(shlex.quote(w) for w in rest)])


def ssh_argv(target: Target | str, *, agent_args: Sequence[str] = (),
             remote_rltui: str = DEFAULT_RLTUI, connect_timeout: int = DEFAULT_CONNECT_TIMEOUT,
             ssh_options: Sequence[str] = (), ssh: str = "ssh") -> list[str]:
    """``ssh -T -o BatchMode=yes -o ConnectTimeout=N ... [user@]HOST -- rltui agent ...``.

    -T: no pseudo-terminal even if the user's config asks for one (a tty would turn "\\n" into
    "\\r\\n" and echo our requests back into the stream). BatchMode: never prompt for a
    password or a host key, since nobody can answer; the failure is explained instead.
    ``ssh_options`` (``--ssh-option``: ``-J bastion``, ``-p 2222``, ``-o ConnectTimeout=30``)
    come first because ssh keeps the first value it is given for an option, so the user's
    win over rltui's defaults; both win over ~/.ssh/config, which supplies everything else.
    """
    if isinstance(target, str):
        target = Target(target)
    if target.host.startswith("-"):
        raise ValueError(f"{target.host!r} is not a host name")
    remote = _remote_shell_command(agent_command(target.host, rltui=remote_rltui,
                                                 agent_args=agent_args))
    return [ssh, *ssh_options, "-T", "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={int(connect_timeout)}", *SSH_KEEPALIVE,
            target.destination, "--", remote]


def srun_argv(job_id: str, host: str, *, agent_args: Sequence[str] = (),
              rltui: str = DEFAULT_RLTUI, srun_options: Sequence[str] = (),
              srun: str = "srun") -> list[str]:
    """One step on one node of a running job: ``srun --overlap --jobid=J --nodes=1
    --ntasks=1 --nodelist=HOST ... rltui agent --host HOST ...``.

    --overlap (Slurm >= 20.11) lets the step share the CPUs, memory and GPUs the job's own
    step holds, so it starts at once and sees the job's GPUs and processes. --nodes/--ntasks
    are explicit because srun otherwise takes SLURM_NTASKS and friends from the environment
    when rltui runs inside the job. srun runs the program without a shell, with this
    shell's environment (PATH included), so an rltui on a shared filesystem is found there.
    """
    if not JOB_ID.fullmatch(str(job_id)):
        raise ValueError(f"{job_id!r} is not a Slurm job id (1234, 1234_5 or 1234+0)")
    if host.startswith("-"):
        raise ValueError(f"{host!r} is not a host name")
    return [srun, "--overlap", f"--jobid={job_id}", "--nodes=1", "--ntasks=1",
            f"--nodelist={host}", "--job-name=rltui-agent", *srun_options,
            *agent_command(host, rltui=rltui, agent_args=agent_args)]


def local_argv(host: str, *, agent_args: Sequence[str] = (),
               python: str = sys.executable) -> list[str]:
    """``python -m rltui agent --host HOST ...`` on this machine, with this interpreter."""
    return [python, "-m", "rltui", "agent", "--host", host, *agent_args]


def run_on(launch: Launch) -> list[str]:
    """How a user runs a command on the launch's node by hand, the way rltui reached it: the
    ssh command line up to ``--`` (the user's options, user@, jump hosts), or the srun step
    without the agent; nothing for a local one. For commands in incident reports."""
    argv = list(launch.argv)
    if launch.transport == SSH and "--" in argv:
        return argv[:argv.index("--") + 1]
    if launch.transport == SLURM:
        return argv[:argv.index("--job-name=rltui-agent")]
    return []


def ssh_launches(targets: Iterable[Target], **kwargs) -> list[Launch]:
    return [Launch(t.host, SSH, tuple(ssh_argv(t, **kwargs))) for t in targets]


def slurm_launches(job_id: str, nodelist: str | Iterable[str], **kwargs) -> list[Launch]:
    """One launch per node of a job; ``nodelist`` is Slurm's (``node[01-04]``) or names."""
    hosts = expand(nodelist) if isinstance(nodelist, str) else list(nodelist)
    return [Launch(h, SLURM, tuple(srun_argv(job_id, h, **kwargs)))
            for h in dict.fromkeys(hosts)]


def local_launches(hosts: Iterable[str], **kwargs) -> list[Launch]:
    return [Launch(h, LOCAL, tuple(local_argv(h, **kwargs))) for h in hosts]


# --- why did it end --------------------------------------------------------------------------

INSTALL = ("install rltui in the node's environment (pip install rltui), or point "
           "--remote-rltui at one on a shared filesystem (/shared/venv/bin/rltui)")


@dataclass(frozen=True, slots=True)
class ExitReason:
    """Why an agent's process ended, what to do, and whether retrying can help at all
    (``permanent``: not until the user acts; retrying a refused key can also lock them out)."""

    reason: str
    remedy: str = ""
    permanent: bool = False

    def __str__(self) -> str:
        return f"{self.reason}: {self.remedy}" if self.remedy else self.reason


def explain_exit(transport: str, returncode: int | None, stderr: str | bytes = "") -> str:
    """One line for the user: why the agent's process ended and what to do about it."""
    return str(classify_exit(transport, returncode, stderr))


def explain_spawn_error(transport: str, program: str, error: OSError) -> ExitReason:
    """The process could not even start (ssh or srun missing here, a bad path)."""
    if isinstance(error, FileNotFoundError):
        remedy = {SSH: "install the OpenSSH client (openssh-client)",
                  SLURM: "run rltui on a node of the Slurm cluster (a login node), where "
                         "srun is on the PATH"}.get(transport, "check the path")
        return ExitReason(f"{program} is not found on this machine", remedy, permanent=True)
    return ExitReason(f"could not start {program}: {error}", permanent=True)


_SSH_FAILURES = [
    # (pattern in ssh's stderr, reason, remedy, permanent)
    (r"host key verification failed|remote host identification has changed",
     "ssh refused the node's host key (unknown or changed)",
     "connect once by hand (ssh HOST) to check and accept it; rltui never accepts keys", True),
    (r"too many authentication failures",
     "ssh offered too many keys and the node closed the connection",
     "set IdentitiesOnly yes and IdentityFile for these hosts in ~/.ssh/config", True),
    (r"permission denied",
     "ssh could not log in (permission denied)",
     "make a key work without a prompt (ssh-agent, IdentityFile in ~/.ssh/config); "
     "BatchMode never asks for a password", True),
    (r"could not resolve hostname|name or service not known|nodename nor servname",
     "the host name does not resolve",
     "check the name (or add a Host entry with HostName to ~/.ssh/config)", True),
    (r"bad configuration option|unknown option|illegal option|usage: ssh",
     "ssh rejected an option", "check --ssh-option and ~/.ssh/config", True),
    (r"temporary failure in name resolution", "name resolution failed for now", "", False),
    (r"connection refused", "nothing answers ssh on the node (connection refused)",
     "is sshd running there, or is the node rebooting?", False),
    (r"connection timed out|operation timed out|timed out",
     "timed out connecting to the node", "is it up and reachable from here?", False),
    (r"no route to host|network is unreachable", "no network route to the node", "", False),
    (r"server not responding|timeout, server",
     "the node stopped answering (no reply to ssh keep-alives for 15 s)", "", False),
    (r"connection closed|closed by remote host|connection reset|kex_exchange_identification"
     r"|broken pipe",
     "the ssh connection dropped", "", False),
]

_SLURM_FAILURES = [
    (r"invalid job id", "the job does not exist or has ended",
     "check the id with squeue --me", True),
    (r"already completing or completed|job has already completed|job.*completing",
     "the job is ending", "", True),
    (r"access/permission denied|access denied|not authorized",
     "Slurm denied access to the job (not yours?)", "", True),
    (r"unrecognized option|invalid option|unknown option",
     "srun rejected an option (srun --overlap needs Slurm 20.11 or newer)",
     "check srun --version and --srun-option", True),
    (r"invalid node name|requested node configuration is not available|"
     r"not in (the )?job|nodelist.*not",
     "the node is not part of the job", "check squeue -j JOBID -o %N", True),
    (r"unable to contact slurm controller|socket timed out|slurm_load_jobs error",
     "the Slurm controller did not answer", "", False),
    (r"unable to create step|step creation|job step creation",
     "Slurm could not start a step on the node", "", False),
    (r"node fail|exited abnormally|connection failure|communication",
     "the step on the node failed", "", False),
]


def classify_exit(transport: str, returncode: int | None, stderr: str | bytes = "") -> ExitReason:
    """Why the process ended, from its exit status and its stderr (the tail is enough)."""
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    last = last_line(text)
    said = f" ({last})" if last else ""
    if returncode is None:
        return ExitReason(f"the agent's output ended{said}")
    if returncode < 0:
        return ExitReason(f"killed by {_signal_name(-returncode)}{said}")
    if transport == SSH and returncode == 255:
        return _first_match(_SSH_FAILURES, text) or ExitReason(f"ssh failed{said}")
    agent = _agent_exit(returncode, text, said)
    if agent is not None:
        return agent
    if transport == SLURM:
        found = _first_match(_SLURM_FAILURES, text)
        if found is not None:
            return found
    if returncode > 128 and returncode - 128 < 65:
        return ExitReason(f"ended by {_signal_name(returncode - 128)} on the node{said}",
                          "SIGKILL there is often the out-of-memory killer"
                          if returncode == 137 else "")
    if returncode == 0:
        return ExitReason(f"the agent exited{said}")
    return ExitReason(f"exited with status {returncode}{said}")


def _agent_exit(returncode: int, text: str, said: str) -> ExitReason | None:
    """What the remote shell or rltui itself said, whichever transport carried it."""
    low = text.lower()
    missing = _line_matching(text, r"command not found|execve\(\).*no such file")
    if returncode == 127 or missing:
        said = f" ({missing})" if missing else said
        return ExitReason(f"rltui is not installed on the node{said}", INSTALL, True)
    if returncode == 126:
        return ExitReason(f"rltui cannot be run on the node{said}",
                          "check the path and its permissions (--remote-rltui)", True)
    if returncode == 2 and "invalid choice: 'agent'" in low:
        return ExitReason("the node's rltui is too old to have the agent command",
                          "upgrade it there (pip install -U rltui)", True)
    if returncode == 2 and "unrecognized arguments" in low:
        return ExitReason(f"the node's rltui does not know an option sent to it{said}",
                          "upgrade it there (pip install -U rltui)", True)
    if returncode == 2 and "usage:" not in low and "srun:" not in low:
        # the agent could not start (it said why in an error line and on stderr)
        return ExitReason(f"the agent could not start{said}", "", True)
    return None


def _first_match(table: list, text: str) -> ExitReason | None:
    for pattern, reason, remedy, permanent in table:
        line = _line_matching(text, pattern)
        if line:
            return ExitReason(f"{reason} ({line})", remedy, permanent)
    return None


def _line_matching(text: str, pattern: str) -> str:
    """The last stderr line matching ``pattern``, as last_line shows it; "" if none."""
    for line in reversed(text.splitlines()):
        if re.search(pattern, line, re.I):
            return _shown(line)
    return ""


def last_line(text: str) -> str:
    """The last meaningful line of stderr, secrets scrubbed, short enough for one row (ssh's
    "Warning: Permanently added ..." is not meaningful)."""
    for line in reversed(text.splitlines()):
        if line.strip() and not line.lower().startswith("warning: permanently added"):
            return _shown(line)
    return ""


def _shown(line: str) -> str:
    line = scrub_text(line.strip())
    return line if len(line) <= 200 else line[:197] + "..."


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
