"""Several hosts on this one machine, for the multi-node tests: each a network namespace with a
real OpenSSH server on its own address.

A ``Cluster`` owns a bridge in this (the root) namespace with the first address of a /24 that
nothing on the machine routes yet; rltui runs here, as on a login node. Each ``Host`` is a
network namespace (``ip netns``, named ``rltui-test-<pid>-<token>-<name>``) joined to the
bridge by a veth pair, plus its own UTS, PID and mount namespaces: its hostname is its name and
its processes see only each other in /proc, as on another node, so an agent there finds that
host's ranks and not its neighbours'. The filesystem stays shared (the "rltui on a shared
filesystem path" case). Its sshd (``/usr/sbin/sshd -D -e``) is the namespace's PID 1, so
killing it takes every process of the host down with it, like a node dropping off.

Keys are made for the run (ssh-keygen into the work folder): one client key, authorized by
every host, and one host key per host, written into a prepared known_hosts, so ssh checks host
keys strictly and never accepts one. ``cluster.ssh_options`` (``-F CONFIG``) is what a test
passes to rltui's ``ssh_argv``; the config maps each host's name to its address.

Needs root, iproute2, util-linux (unshare, nsenter) and openssh-server; ``missing()`` says
what is not there, for a skip. Teardown kills and removes everything even when a test fails,
and a run that died without one is swept by the next run (the owner's pid is in the names).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import psutil

PREFIX = "rltui-test"
SSHD = "/usr/sbin/sshd"
# 10.201/16 first (as unlikely as any private range), then 198.18/15, which RFC 2544 sets
# aside for benchmarking networks and which no real network should route.
BASES = ("10.201.0.0/16", "198.18.0.0/15")
WAIT = 60.0  # seconds: a safety net for a stuck start, not a bound anything is held to
_NAME = re.compile(r"[a-z][a-z0-9-]{0,30}")

# Every host: the known_hosts is prepared, so nothing is ever accepted on the fly.
SSH_CONFIG = """\
Host *
    User root
    IdentityFile {cluster.client_key}
    IdentitiesOnly yes
    IdentityAgent none
    UserKnownHostsFile {cluster.known_hosts}
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    UpdateHostKeys no
    CheckHostIP no
    BatchMode yes
    ControlMaster no
    ControlPath none
"""
# StrictModes no: the keys live in a test's temporary folder.
SSHD_CONFIG = """\
ListenAddress {host.address}
Port 22
HostKey {host.host_key}
PidFile {host.dir}/sshd.pid
AuthorizedKeysFile {host.cluster.authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
UseDNS no
PrintMotd no
X11Forwarding no
AllowTcpForwarding no
MaxStartups 100
"""


def missing() -> str | None:
    """Why these hosts cannot be made here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "network namespaces and a real sshd need root"
    for tool in ("ip", "ssh", "ssh-keygen", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is not installed (apt-get install openssh-server)"
    # root in a container may still lack the rights: try each kind of thing a host needs
    probe = f"{PREFIX}-{os.getpid()}-probe{random.randrange(1 << 32):08x}"
    steps = [["ip", "netns", "add", probe],
             ["ip", "-n", probe, "link", "add", "probe0", "type", "veth", "peer", "probe1"],
             ["ip", "netns", "exec", probe, "unshare", "--uts", "--pid", "--mount", "--fork",
              "--mount-proc", "true"]]
    try:
        for argv in steps:
            done = subprocess.run(argv, capture_output=True, text=True)
            if done.returncode != 0:
                return f"{' '.join(argv[:3])} does not work here: {done.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def sweep() -> None:
    """Remove what runs that died without their teardown left behind (their pid is gone)."""
    def dead(name: str) -> bool:
        m = re.match(rf"{PREFIX}-(\d+)-", name)
        if not m:
            return False
        try:  # a zombie owner is dead too: it only waits for its parent to reap it
            return psutil.Process(int(m.group(1))).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True
    for line in ip("netns", "list").splitlines():
        ns = line.split()[0] if line.strip() else ""
        if dead(ns):
            _kill_all(ns)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    for link in json.loads(ip("-j", "link", "show") or "[]"):
        if dead(link.get("ifalias", "")):
            subprocess.run(["ip", "link", "del", link["ifname"]], capture_output=True)


def _kill_all(ns: str) -> None:
    pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    for pid in pids.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


def keygen(path: Path, comment: str) -> str:
    """A new ed25519 key without passphrase; returns the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                    "-f", str(path)], check=True, capture_output=True)
    return path.with_name(path.name + ".pub").read_text().strip()


class Cluster:
    """``with Cluster(tmp_path) as c: a = c.add("node-a")``; then
    ``ssh_argv("node-a", ssh_options=c.ssh_options, ...)`` reaches node-a's sshd."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = Path(workdir)
        self.token = f"{random.randrange(1 << 24):06x}"
        self.tag = f"{PREFIX}-{os.getpid()}-{self.token}"  # namespaces' prefix, bridge's alias
        self.bridge = f"rt{self.token}br"  # interface names are at most 15 characters
        self.hosts: dict[str, Host] = {}
        self.subnet: ipaddress.IPv4Network | None = None
        self.ssh_config = self.workdir / "ssh_config"
        self.known_hosts = self.workdir / "known_hosts"
        self.client_key = self.workdir / "client_key"
        self.authorized_keys = self.workdir / "authorized_keys"
        self._next = 2  # .1 is the bridge, this machine's side

    @property
    def ssh_options(self) -> tuple[str, ...]:
        return ("-F", str(self.ssh_config))

    def __enter__(self) -> Cluster:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def _start(self) -> None:
        sweep()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.authorized_keys.write_text(keygen(self.client_key, self.tag) + "\n")
        ip("link", "add", self.bridge, "type", "bridge")
        ip("link", "set", self.bridge, "alias", self.tag)
        # Two runs at once must not pick the same subnet: choosing and taking it is one step.
        lock = Path("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir())
        with open(lock / f"{PREFIX}-netns.lock", "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            self.subnet = _free_subnet()
            ip("addr", "add", f"{self.subnet[1]}/{self.subnet.prefixlen}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        self._write_client_config()

    def add(self, name: str, *, sshd: bool = True) -> Host:
        """A new host on the bridge, its sshd started and listening (``sshd=False``: the
        address answers, but nothing listens on port 22: connection refused)."""
        if not _NAME.fullmatch(name) or name in self.hosts:
            raise ValueError(f"bad or duplicate host name {name!r}")
        address = str(self.subnet[self._next])
        host = Host(self, name, address, index=self._next)
        self._next += 1
        self.hosts[name] = host
        host.create()
        self._write_client_config()
        if sshd:
            host.start_sshd()
        return host

    def _write_client_config(self) -> None:
        blocks = [f"Host {h.name}\n    HostName {h.address}\n" for h in self.hosts.values()]
        self.ssh_config.write_text("".join(blocks) + SSH_CONFIG.format(cluster=self))
        self.known_hosts.write_text("".join(
            f"{h.name},{h.address} {h.host_public_key}\n" for h in self.hosts.values()))

    def close(self) -> None:
        """Everything goes, whatever failed before; what could not go is raised at the end."""
        errors: list[str] = []
        for host in reversed(list(self.hosts.values())):
            errors += host.close()
        self.hosts.clear()
        gone = subprocess.run(["ip", "link", "del", self.bridge], capture_output=True,
                              text=True)
        if gone.returncode != 0 and "Cannot find device" not in gone.stderr:
            errors.append(f"bridge {self.bridge}: {gone.stderr.strip()}")
        if errors:
            raise RuntimeError("netns teardown: " + "; ".join(errors))


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of BASES that overlaps no address or route of this machine."""
    taken = []
    for route in json.loads(ip("-j", "-4", "route", "show", "table", "all") or "[]"):
        if route.get("dst") not in (None, "default"):
            taken.append(ipaddress.ip_network(route["dst"], strict=False))
    for addr in json.loads(ip("-j", "-4", "addr", "show") or "[]"):
        for info in addr.get("addr_info", []):
            taken.append(ipaddress.ip_network(f"{info['local']}/{info['prefixlen']}",
                                              strict=False))
    for base in BASES:
        free = [net for net in ipaddress.ip_network(base).subnets(new_prefix=24)
                if not any(net.overlaps(t) for t in taken)]
        if free:
            return random.choice(free)
    raise RuntimeError(f"no free /24 in {BASES} on this machine")


class Host:
    """One node: a namespace with an address and (after ``start_sshd``) a real sshd."""

    def __init__(self, cluster: Cluster, name: str, address: str, index: int) -> None:
        self.cluster = cluster
        self.name = name
        self.address = address
        self.namespace = f"{cluster.tag}-{name}"
        self.veth = f"rt{cluster.token}v{index}"  # this side; the namespace's side is eth0
        self.dir = cluster.workdir / name
        self.host_key = self.dir / "ssh_host_ed25519_key"
        self.host_public_key = ""
        self.sshd: subprocess.Popen | None = None
        self.init_pid: int | None = None  # sshd, PID 1 of the host's PID namespace
        self._log: _LineLog | None = None
        self._started: list[subprocess.Popen] = []

    def __enter__(self) -> Host:
        return self

    def __exit__(self, *exc) -> None:
        self.cluster.hosts.pop(self.name, None)
        errors = self.close()
        if errors:
            raise RuntimeError("netns teardown: " + "; ".join(errors))

    def create(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        key = keygen(self.host_key, f"{self.name} host key").split()
        self.host_public_key = " ".join(key[:2])
        ns, peer = self.namespace, f"{self.veth}p"
        ip("netns", "add", ns)
        ip("link", "add", self.veth, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", ns)
        ip("link", "set", self.veth, "alias", self.cluster.tag)  # for sweep()
        ip("link", "set", self.veth, "master", self.cluster.bridge)
        ip("link", "set", self.veth, "up")
        ip("-n", ns, "link", "set", peer, "name", "eth0")
        ip("-n", ns, "addr", "add", f"{self.address}/{self.cluster.subnet.prefixlen}",
           "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")

    def sshd_config(self) -> Path:
        path = self.dir / "sshd_config"
        path.write_text(SSHD_CONFIG.format(host=self))
        return path

    def start_sshd(self) -> None:
        """Start sshd in fresh UTS, PID and mount namespaces inside the host's network
        namespace, and return once it says it is listening (its own log line, on -e)."""
        if self.sshd is not None and self.sshd.poll() is None:
            raise RuntimeError(f"{self.name}: sshd is already running")
        # sshd needs its privilege-separation folder; the system's service makes it at boot
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        inner = (f"hostname {shlex.quote(self.name)} && exec {SSHD} -D -e "
                 f"-f {shlex.quote(str(self.sshd_config()))}")
        # --kill-child: if unshare dies, sshd (and with it the whole host) goes too
        self.sshd = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, "unshare", "--uts", "--pid", "--mount",
             "--fork", "--mount-proc", "--kill-child", "--", "sh", "-c", inner],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        self._log = _LineLog(self.sshd.stderr, self.dir / "sshd.log", "Server listening on")
        if not self._log.wait():
            self.kill_sshd()
            raise RuntimeError(f"{self.name}: sshd did not start:\n{self.log()}")
        self.init_pid = next(p.pid for p in psutil.Process(self.sshd.pid).children()
                             if p.name() == "sshd")

    def kill_sshd(self, sig: int = signal.SIGKILL) -> None:
        """End the host's sshd. It is PID 1 of the host's PID namespace, so the kernel kills
        every process of the host with it: sessions, agents, ranks (a node dropping off)."""
        if self.sshd is None:
            return
        if self.sshd.poll() is None:  # once it has ended, its pids may belong to others
            target = self.init_pid if self.init_pid is not None else self.sshd.pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, sig)
        try:
            self.sshd.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.sshd.kill()
            self.sshd.wait(WAIT)
        if self._log is not None:
            self._log.thread.join(WAIT)
        self.sshd.stderr.close()
        self.init_pid = None

    def sessions(self) -> list[int]:
        """The sshd processes serving connections (the listener's children), host pids."""
        if self.init_pid is None:
            return []
        return [p.pid for p in psutil.Process(self.init_pid).children()]

    def run(self, argv: list[str], **popen) -> subprocess.Popen:
        """Run a process on this host: in its network, PID, mount and UTS namespaces (only
        its network namespace while no sshd runs). Killed at teardown."""
        if self.init_pid is not None:
            prefix = ["nsenter", f"--target={self.init_pid}", "--net", "--pid", "--mount",
                      "--uts", "--"]
        else:
            prefix = ["ip", "netns", "exec", self.namespace]
        proc = subprocess.Popen([*prefix, *argv], **popen)
        self._started.append(proc)
        return proc

    def pids(self) -> list[int]:
        """Every process in the host's network namespace (host pids)."""
        return [int(p) for p in ip("netns", "pids", self.namespace).split()]

    def silence(self) -> None:
        """Make the address drop every packet, as a node powered off behind a stale ARP entry
        would: this machine sends to a MAC address nobody has, so a connect times out rather
        than being refused."""
        self.kill_sshd()
        ip("neigh", "replace", self.address, "lladdr", "02:00:00:00:00:01", "dev",
           self.cluster.bridge, "nud", "permanent")

    def log(self) -> str:
        """What sshd said on stderr (connections, authentication, errors)."""
        return self._log.text() if self._log is not None else ""

    def close(self) -> list[str]:
        """Kill the host's processes and remove its namespace and links; the errors."""
        errors: list[str] = []
        try:
            self.kill_sshd()
        except Exception as exc:  # go on: the namespace must go whatever happened
            errors.append(f"{self.name} sshd: {exc}")
        with contextlib.suppress(RuntimeError):  # a namespace never made has no processes
            _kill_all(self.namespace)
        for proc in self._started:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(WAIT)
        for args in (["link", "del", self.veth], ["netns", "del", self.namespace]):
            done = subprocess.run(["ip", *args], capture_output=True, text=True)
            if done.returncode != 0 and not re.search(r"Cannot find|No such file",
                                                      done.stderr):
                errors.append(f"ip {' '.join(args)}: {done.stderr.strip()}")
        return errors


class _LineLog:
    """A thread that keeps reading a pipe line by line into a file and memory (sshd's log
    must be drained for as long as sshd runs), and sets ``ready`` on the line that starts
    with ``marker``, or ``ended`` at the end of the pipe."""

    def __init__(self, pipe, path: Path, marker: str) -> None:
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.ended = threading.Event()
        self._pipe, self._path, self._marker = pipe, path, marker
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"log-{path}")
        self.thread.start()

    def _run(self) -> None:
        with open(self._path, "a", encoding="utf-8") as out, \
                contextlib.suppress(OSError, ValueError):  # the pipe closed under us
            for raw in self._pipe:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.lines.append(line)
                out.write(line + "\n")
                out.flush()
                if line.startswith(self._marker):
                    self.ready.set()
        self.ended.set()
        self.ready.set()  # wake the waiter; ended says it was not the marker

    def wait(self) -> bool:
        """True once the marker line came; False when the pipe ended first."""
        self.ready.wait(WAIT)
        return self.ready.is_set() and any(x.startswith(self._marker) for x in self.lines)

    def text(self) -> str:
        return "\n".join(self.lines)
