"""``rltui agent`` for real: the agent runs as a subprocess with pipes, like ssh or srun would
start it, against a real log file and a real rank-like process (RANK in its environment, found
by the process source the way a torchrun rank is), with the real py-spy.

Every wait is for a line on the agent's stdout (or its exit) with a deadline; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest

from rltui import __version__
from rltui.agent import protocol as p
from rltui.model import OK, GpuPoll, LogPoll, ProcPoll, Reading, StackPoll

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PY = os.path.realpath(sys.executable)  # the ranks: the interpreter itself, as a job runs it
DEADLINE_S = 30.0
HOST = "node-under-test"

# A rank stand-in: its stdout goes to a file (a log the process source discovers), it says it
# is ready on the pipe in argv[1] and then waits in a function the stack dumps must show.
RANK = """\
import os, sys
def wait_for_the_collective():
    os.write(int(sys.argv[1]), b"ready\\n")
    sys.stdin.read()
print("rank 0 starting", flush=True)
wait_for_the_collective()
"""

FAST = "cadence:\n  gpus: 0.2\n  procs: 0.2\n  logs: 0.2\npyspy:\n  interval: 1\n"
QUIET = "cadence:\n  gpus: 60\n  procs: 60\n  logs: 60\n"


def ptrace_allowed() -> bool:
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = "0"
    return os.geteuid() == 0 or scope == "0"


needs_ptrace = pytest.mark.skipif(not ptrace_allowed(),
                                  reason="py-spy needs ptrace rights on another process tree")


class Rank:
    def __init__(self, tmp: Path) -> None:
        self.out_path = tmp / "rank0.out"
        r, w = os.pipe()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RANK": "0", "LOCAL_RANK": "0",
               "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen([PY, "-c", RANK, str(w)], env=env,
                                         stdin=subprocess.PIPE, stdout=out,
                                         stderr=subprocess.STDOUT, pass_fds=(w,))
        os.close(w)
        try:
            ready, _, _ = select.select([r], [], [], DEADLINE_S)
            assert ready and os.read(r, 64) == b"ready\n", "the rank did not start"
        finally:
            os.close(r)
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(DEADLINE_S)


class Agent:
    """The agent subprocess; its stdout read as protocol messages, each of which must decode."""

    def __init__(self, tmp: Path, *args: str, config: str = FAST) -> None:
        self.tmp = tmp
        cfg = tmp / f"config-{id(self)}.yaml"
        cfg.write_text(config)
        self.stderr_path = tmp / f"agent-{id(self)}.err"
        env = {k: v for k, v in os.environ.items()
               if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "RLTUI_CONFIG")}
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rltui.cli", "agent", "--config", str(cfg),
                 "--host", HOST, *args],
                cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.splitter = p.LineSplitter()
        self.pending: deque[p.Message] = deque()
        self.seen: list[p.Message] = []
        self.eof = False

    # -- reading

    def next(self, deadline: float) -> p.Message | None:
        """The next message, or None at end of stream."""
        fd = self.proc.stdout.fileno()
        while not self.pending and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise AssertionError(f"no line in time; seen: {self.summary()}; stderr: "
                                     f"{self.stderr()[-2000:]}")
            chunk = os.read(fd, 1 << 16)
            lines = self.splitter.feed(chunk) if chunk else self.splitter.end()
            self.eof = not chunk
            for line in lines:
                msg = p.decode(line)
                assert not isinstance(msg, p.ProtocolError), (msg, line[:300])
                self.pending.append(msg)
        if not self.pending:
            return None
        msg = self.pending.popleft()
        self.seen.append(msg)
        return msg

    def until(self, pred: Callable[[p.Message], bool], what: str) -> p.Message:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            msg = self.next(deadline)
            if msg is None:
                raise AssertionError(f"the stream ended before {what}; seen: {self.summary()}; "
                                     f"stderr: {self.stderr()[-2000:]}")
            if pred(msg):
                return msg

    def reading(self, pred: Callable[[Reading], bool], what: str) -> Reading:
        return self.until(lambda m: isinstance(m, p.ReadingMessage) and pred(m.reading),
                          what).reading

    def reply(self, rid: str) -> p.Reply:
        return self.until(lambda m: isinstance(m, p.Reply) and m.id == rid, f"reply {rid}")

    def rest(self) -> list[p.Message]:
        """Every message up to the end of the stream."""
        deadline = time.monotonic() + DEADLINE_S
        out = []
        while (msg := self.next(deadline)) is not None:
            out.append(msg)
        return out

    def summary(self) -> str:
        return ", ".join(getattr(m, "source", m.type) for m in self.seen[-30:])

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    # -- writing and ending

    def send(self, data: dict | bytes) -> None:
        line = data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n"
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def wait(self) -> int:
        return self.proc.wait(DEADLINE_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(DEADLINE_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


@pytest.fixture(scope="module")
def rank(tmp_path_factory):
    r = Rank(tmp_path_factory.mktemp("rank"))
    yield r
    r.stop()


@pytest.fixture(scope="module")
def job_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("logs") / "trainer.log"
    path.write_text("".join(f"history line {i}\n" for i in range(1, 51)))
    return path


@pytest.fixture(scope="module")
def agent(tmp_path_factory, rank, job_log):
    """One agent for the stream and request tests (each reads on from where the last left)."""
    a = Agent(tmp_path_factory.mktemp("agent"), "--log", str(job_log))
    yield a
    a.close()


@pytest.fixture
def lone_agent(tmp_path):
    made = []

    def make(*args: str, config: str = FAST) -> Agent:
        made.append(Agent(tmp_path, *args, config=config))
        return made[-1]
    yield make
    for a in made:
        a.close()


def hello_of(a: Agent) -> p.Hello:
    msg = a.next(time.monotonic() + DEADLINE_S)
    assert isinstance(msg, p.Hello), msg
    return msg


# -- the stream ------------------------------------------------------------------------------------

def test_hello_comes_first(agent):
    hello = hello_of(agent)
    assert hello.agent == f"rltui {__version__}" and hello.pid == agent.proc.pid
    assert hello.host == HOST
    assert hello.sources == {"gpus": 0.2, "procs": 0.2, "logs": 0.2, "stacks": 1.0,
                             "flight_recorder": 1.0}


def test_every_source_streams_readings_that_decode_to_model_values(agent, rank, job_log):
    gpus = agent.reading(lambda r: r.source == "gpus", "a gpus reading")
    assert gpus.payload is None or isinstance(gpus.payload, GpuPoll)  # no GPU here: a state
    procs = agent.reading(lambda r: r.source == "procs" and isinstance(r.payload, ProcPoll)
                          and any(i.pid == rank.pid for i in r.payload.procs),
                          "the rank in a procs reading")
    info = next(i for i in procs.payload.procs if i.pid == rank.pid)
    assert (info.rank, info.world_size) == (0, 1)
    assert info.stdout_path == str(rank.out_path.resolve())

    with open(job_log, "a") as f:
        f.write("step 51 loss 0.25 appended by the test\n")
    # Two files in the logs readings: the --log file, and the rank's stdout, which the log
    # source finds through the process source. Each line comes once, in whichever reading.
    wanted = {str(job_log.resolve()): "appended by the test",
              str(rank.out_path.resolve()): "rank 0 starting"}
    found = set()

    def both_found(r: Reading) -> bool:
        if r.source == "logs" and isinstance(r.payload, LogPoll):
            assert r.status == OK, r.message
            found.update(u.path for u in r.payload.files if u.path in wanted
                         and any(wanted[u.path] in line.text for line in u.lines))
        return len(found) == 2

    agent.reading(both_found, "the appended line and the rank's own output in logs readings")


@needs_ptrace
def test_periodic_stack_rounds_dump_the_rank(agent, rank):
    stacks = agent.reading(lambda r: r.source == "stacks" and isinstance(r.payload, StackPoll)
                           and any(d.pid == rank.pid for d in r.payload.dumps),
                           "a periodic stack round with the rank")
    assert stacks.payload.trigger == "periodic"
    dump = next(d for d in stacks.payload.dumps if d.pid == rank.pid)
    assert dump.status == OK and dump.rank == 0
    assert any(f.name == "wait_for_the_collective" for t in dump.threads for f in t.frames)


# -- requests --------------------------------------------------------------------------------------

@needs_ptrace
def test_dump_request_sends_an_on_demand_round_then_the_reply(agent, rank):
    agent.send({"v": 1, "id": "dump-1", "op": "dump"})
    stacks = agent.reading(lambda r: r.source == "stacks"
                           and getattr(r.payload, "trigger", "") == "on-demand",
                           "the on-demand stack round")
    dump = next(d for d in stacks.payload.dumps if d.pid == rank.pid)
    assert dump.status == OK and not stacks.payload.nonblocking
    assert any(f.name == "wait_for_the_collective" for t in dump.threads for f in t.frames)
    reply = agent.reply("dump-1")
    assert reply.ok and reply.data["status"] == OK and reply.data["dumped"] >= 1
    # the reply follows its reading, with no other on-demand round in between
    after = agent.seen[agent.seen.index(reply) - 1::-1]
    last_round = next(m for m in after if isinstance(m, p.ReadingMessage)
                      and m.reading.source == "stacks")
    assert last_round.reading is stacks


def test_tail_returns_the_files_last_lines(agent, job_log, rank):
    with open(job_log, "a") as f:
        f.write("written just before the tail\n")
    expected = job_log.read_text().splitlines()[-3:]
    agent.send({"v": 1, "id": "tail-1", "op": "tail", "path": str(job_log), "lines": 3})
    reply = agent.reply("tail-1")
    assert reply.ok, reply.message
    (entry,) = reply.data["files"]
    assert entry["path"] == str(job_log.resolve())
    assert entry["lines"] == expected and expected[-1] == "written just before the tail"
    assert entry["cut"] is False and entry["size"] == job_log.stat().st_size

    agent.reading(lambda r: r.source == "procs" and any(i.pid == rank.pid
                                                        for i in r.payload.procs),
                  "the rank found, so that its stdout is one of the job's logs")
    agent.send({"v": 1, "id": "tail-all", "op": "tail", "lines": 1})
    files = {f["path"]: f["lines"] for f in agent.reply("tail-all").data["files"]}
    assert files[str(job_log.resolve())] == ["written just before the tail"]
    assert files[str(rank.out_path.resolve())] == ["rank 0 starting"]


def test_tail_reads_only_the_jobs_logs(agent, tmp_path):
    other = tmp_path / "not-a-log.txt"
    other.write_text("private\n")
    agent.send({"v": 1, "id": "tail-2", "op": "tail", "path": str(other)})
    reply = agent.reply("tail-2")
    assert not reply.ok and "not one of the job's log files" in reply.message
    assert reply.data is None


def test_tail_hides_secrets(agent, job_log):
    with open(job_log, "a") as f:
        f.write("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123\n")
    agent.send({"v": 1, "id": "tail-3", "op": "tail", "path": str(job_log), "lines": 1})
    (line,) = agent.reply("tail-3").data["files"][0]["lines"]
    assert "hf_abc" not in line and "HF_TOKEN=" in line
    logs = agent.reading(lambda r: r.source == "logs" and any(
        "HF_TOKEN=" in x.text for u in r.payload.files for x in u.lines), "the line, followed")
    assert not any("hf_abc" in x.text for u in logs.payload.files for x in u.lines)


def test_a_malformed_request_gets_an_error_and_the_agent_goes_on(agent):
    agent.send(b"this is not json\n")
    error = agent.until(lambda m: isinstance(m, p.ErrorMessage), "an error line")
    assert "bad request line" in error.message and "not JSON" in error.message
    agent.send(b"\xff\xfe garbage \x00\n")
    assert "not UTF-8" in agent.until(lambda m: isinstance(m, p.ErrorMessage), "error").message
    agent.send(b"{" + b" " * (p.MAX_LINE + 10) + b"\n")
    assert "8 MiB" in agent.until(lambda m: isinstance(m, p.ErrorMessage), "error").message
    agent.send({"v": 1, "id": "bad-lines", "op": "tail", "lines": "many"})
    reply = agent.reply("bad-lines")
    assert not reply.ok and "tail.lines" in reply.message
    agent.send({"v": 1, "id": "what", "op": "profile"})
    reply = agent.reply("what")
    assert not reply.ok and "unknown op" in reply.message
    agent.send({"v": 2, "id": "newer", "op": "dump"})
    assert "upgrade rltui" in agent.until(lambda m: isinstance(m, p.ErrorMessage),
                                          "error").message
    agent.send({"v": 1, "id": "still-here", "op": "tail", "lines": 1})
    assert agent.reply("still-here").ok
    agent.reading(lambda r: r.source == "procs", "readings still flowing")


def test_stop_replies_says_bye_and_exits_0(agent):
    agent.send({"v": 1, "id": "stop-1", "op": "stop"})
    reply = agent.reply("stop-1")
    assert reply.ok
    rest = agent.rest()
    assert isinstance(rest[-1], p.Bye) and rest[-1].reason == "stop request"
    assert not any(isinstance(m, p.Reply) for m in rest)
    assert agent.wait() == 0
    assert "Traceback" not in agent.stderr()


# -- the end, every way ----------------------------------------------------------------------------

def test_stdin_eof_ends_the_agent(lone_agent):
    a = lone_agent("--no-stacks")
    hello = hello_of(a)
    assert hello.sources["stacks"] == 0.0  # dumps on request only
    a.proc.stdin.close()
    bye = a.rest()[-1]
    assert isinstance(bye, p.Bye) and bye.reason == "stdin closed"
    assert a.wait() == 0


def test_sigterm_ends_the_agent_with_bye(lone_agent):
    a = lone_agent("--no-stacks")
    hello_of(a)
    a.reading(lambda r: r.source == "logs", "a first reading")
    a.proc.send_signal(signal.SIGTERM)
    bye = a.rest()[-1]
    assert isinstance(bye, p.Bye) and bye.reason == "SIGTERM"
    assert a.wait() == 0


def test_the_consumer_going_away_ends_the_agent_quietly(lone_agent):
    a = lone_agent("--no-stacks")
    hello_of(a)
    a.proc.stdout.close()  # readings come every 0.2 s: the next write finds the pipe closed
    assert a.wait() == 0
    err = a.stderr()
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_heartbeat_when_idle(lone_agent):
    a = lone_agent("--no-stacks", "--heartbeat", "0.3", config=QUIET)
    hello_of(a)
    for source in ("gpus", "procs", "logs"):  # every source polls once at the start
        a.reading(lambda r, s=source: r.source == s, f"the first {source} reading")
    beat = a.until(lambda m: isinstance(m, p.Heartbeat), "a heartbeat")
    assert beat.host == HOST
    a.until(lambda m: isinstance(m, p.Heartbeat), "a second heartbeat")


def test_requests_do_not_wait_for_a_poll(lone_agent, job_log):
    """Cadences of 60 s: each source polls once at the start and not again during the test,
    so replies that arrive show that requests are served on their own."""
    a = lone_agent("--no-stacks", "--log", str(job_log), config=QUIET)
    hello_of(a)
    for source in ("gpus", "procs", "logs"):
        a.reading(lambda r, s=source: r.source == s, f"the first {source} reading")
    a.send({"v": 1, "id": "t", "op": "tail", "lines": 2})
    a.send({"v": 1, "id": "d", "op": "dump"})
    assert a.reply("t").ok
    a.reply("d")
    polled = [m.reading.source for m in a.seen if isinstance(m, p.ReadingMessage)]
    # stacks: the dump's round; flight_recorder: its first look for the ranks' dumps
    assert sorted(polled) == ["flight_recorder", "gpus", "logs", "procs", "stacks"]


def test_every_request_is_answered_before_the_bye(lone_agent):
    a = lone_agent()
    hello_of(a)
    a.send(b"".join(json.dumps({"v": 1, "id": f"d{i}", "op": "dump"}).encode() + b"\n"
                    for i in range(3)) + b'{"v": 1, "id": "s", "op": "stop"}\n')
    rest = a.rest()
    replies = {m.id: m for m in rest if isinstance(m, p.Reply)}
    assert set(replies) == {"d0", "d1", "d2", "s"}
    assert isinstance(rest[-1], p.Bye) and rest[-1].reason == "stop request"
    for rid in ("d0", "d1", "d2"):  # done before the stop, or told why not
        assert replies[rid].ok or "the agent is stopping" in replies[rid].message
    assert a.wait() == 0


def test_duration_ends_the_agent(lone_agent):
    a = lone_agent("--no-stacks", "--duration", "0.5")
    hello_of(a)
    bye = a.rest()[-1]
    assert isinstance(bye, p.Bye) and bye.reason == "duration reached"
    assert a.wait() == 0


def test_a_usage_error_is_said_on_both_streams(lone_agent):
    a = lone_agent("--heartbeat", "0")
    error, bye = a.rest()
    assert isinstance(error, p.ErrorMessage) and "--heartbeat" in error.message
    assert isinstance(bye, p.Bye) and bye.reason == "could not start"
    assert a.wait() == 2
    assert "rltui: error: --heartbeat must be positive" in a.stderr()


def test_a_bad_config_is_a_usage_error(lone_agent):
    a = lone_agent(config="cadence: [1, 2]\n")
    error, _ = a.rest()
    assert "config error" in error.message
    assert a.wait() == 2


def test_the_agent_runs_without_textual(tmp_path):
    """The agent in-process, for real, then a look at what it imported."""
    code = ("import json, sys\nfrom rltui.cli import main\n"
            "rc = main(['agent', '--no-stacks', '--duration', '0.3'])\n"
            "print(json.dumps([rc, [m for m in ('textual', 'rich') if m in sys.modules]]),"
            " file=sys.stderr)\n")
    env = {k: v for k, v in os.environ.items() if k != "RLTUI_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(tmp_path)  # no user config: the defaults
    r, w = os.pipe()  # stdin stays open while it runs: the duration ends it, not EOF
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, stdin=r,
                              capture_output=True, timeout=DEADLINE_S)
    finally:
        os.close(r)
        os.close(w)
    assert json.loads(proc.stderr.decode().strip().splitlines()[-1]) == [0, []]
    lines = proc.stdout.splitlines(keepends=True)
    kinds = [p.decode(line).type for line in lines]
    assert kinds[0] == "hello" and kinds[-1] == "bye" and "reading" in kinds


# -- the tail's reading of files -------------------------------------------------------------------

def test_last_lines_of_real_files(tmp_path):
    from rltui.agent.lastlines import last_lines
    f = tmp_path / "a.log"
    f.write_bytes(b"".join(b"line %d\r\n" % i for i in range(1, 20001)))
    lines, cut, size = last_lines(str(f), 3, 1 << 20)
    assert lines == ["line 19998", "line 19999", "line 20000"] and not cut
    assert size == f.stat().st_size
    lines, cut, _ = last_lines(str(f), 10_000, 100)  # the budget ends first
    assert cut and lines[-1] == "line 20000" and len(lines) < 20
    assert all(line.startswith("line ") for line in lines)  # the partial first one is dropped
    f.write_bytes(b"no newline at the end")
    assert last_lines(str(f), 5, 1000) == (["no newline at the end"], False, 21)
    f.write_bytes(b"a\n\nb\n\xff\xfe\n")
    assert last_lines(str(f), 10, 1000)[0] == ["a", "", "b", "\ufffd\ufffd"]
    f.write_bytes(b"")
    assert last_lines(str(f), 5, 1000) == ([], False, 0)
    with pytest.raises(OSError):
        last_lines(str(tmp_path), 5, 1000)
    with pytest.raises(OSError):
        last_lines(str(tmp_path / "missing.log"), 5, 1000)


def test_tail_shares_the_budget_and_reports_unreadable_files(tmp_path, monkeypatch):
    from rltui.agent import requests
    big, gone = tmp_path / "big.log", tmp_path / "gone.log"
    big.write_text("".join(f"{i:09d}\n" for i in range(100_000)))
    monkeypatch.setattr(requests, "MAX_TAIL_BYTES", 2000)
    ok, message, data = requests.tail(p.Request("1", "tail", lines=10_000),
                                      [str(big), str(gone)])
    assert ok and message == "1 of 2 log files"
    first, second = data["files"]
    assert first["cut"] and len(first["lines"]) < 101 and first["lines"][-1] == "000099999"
    assert second["error"] and second["lines"] == []
    ok, message, _ = requests.tail(p.Request("2", "tail"), [str(gone)])
    assert not ok and "No such file" in message
