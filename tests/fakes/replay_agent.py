"""A node agent that replays a recorded scenario instead of reading a node: a simulated node of
a multi-node job, for the app's tests and the cluster benchmark.

``python -m tests.fakes.replay_agent --host node07 --scenario DIR --node-rank 7`` speaks the
real agent's wire protocol (rltui.agent.protocol, the same encoder and line limits) on stdout
and reads its requests on stdin, like ``rltui agent``, so the app reads it through the real
``AgentStream`` and ``AgentFeed``. What differs is where readings come from: the scenario's
readings, played at their recorded pace from now on, every time in them moved to now (the way
rltui moves a skewed node's readings, rltui.cluster.skew), and every rank made global:
``node_rank x ranks_per_node + the recorded rank``, WORLD_SIZE ``--world``. Pids stay as
recorded, so every simulated node has the same pids, as containers on real nodes do.

``--clock-skew S`` stamps everything S seconds ahead of this machine's clock, as a node whose
clock is off. ``--loop`` plays the scenario again and again (GPUs, processes and stacks; the
log lines only once, since a log does not repeat its line numbers); without it the node stays
up after the recording, with heartbeats and answers, showing its last state. A ``dump`` request is
answered with the newest recorded stack round, stamped now. ``stop`` or end of input ends it
with a ``bye``.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
import time

from rltui.agent import protocol
from rltui.agent.outbound import reading_lines
from rltui.agent.protocol import Bye, Heartbeat, Hello, Reply
from rltui.cluster.skew import to_local
from rltui.model import LogPoll, ProcPoll, Reading, StackPoll, replace
from rltui.sources.replay import load


def _global(rank: int | None, base: int) -> int | None:
    return None if rank is None else base + rank


def globalise(reading: Reading, base: int, world: int) -> Reading:
    """The recorded node's ranks as ranks of node ``base // ranks_per_node`` of the job."""
    payload = reading.payload
    if isinstance(payload, ProcPoll):
        payload = replace(payload, procs=tuple(
            replace(p, rank=_global(p.rank, base), world_size=world) for p in payload.procs))
    elif isinstance(payload, LogPoll):
        payload = replace(payload, files=tuple(
            replace(u, rank=_global(u.rank, base),
                    lines=tuple(replace(x, rank=_global(x.rank, base)) for x in u.lines))
            for u in payload.files))
    elif isinstance(payload, StackPoll):
        payload = replace(payload, dumps=tuple(replace(d, rank=_global(d.rank, base))
                                               for d in payload.dumps))
    else:
        return reading
    return replace(reading, payload=payload)


class Replayer:
    def __init__(self, args: argparse.Namespace) -> None:
        scenario = load(args.scenario)
        self.host = args.host
        self.skew = args.clock_skew
        self.loop = args.loop
        self.heartbeat = args.heartbeat
        base = args.node_rank * args.ranks_per_node
        self.readings = [globalise(r, base, args.world) for r in scenario.readings]
        self.start = scenario.start
        self.length = max(scenario.end - scenario.start, 1.0)
        self.job = scenario.job
        self.sources = scenario.intervals()
        self.last_stacks: Reading | None = None
        self.out = sys.stdout.buffer

    def now(self) -> float:
        return time.time() + self.skew  # this node's clock

    def send(self, line: bytes) -> None:
        self.out.write(line)
        self.out.flush()

    def emit(self, reading: Reading, offset: float) -> None:
        moved = to_local(reading, offset)
        if isinstance(moved.payload, StackPoll):
            self.last_stacks = reading
        for line in reading_lines(self.host, self.now(), moved):
            self.send(line)

    def answer(self, line: bytes) -> bool:
        """One request; False when the agent is to stop."""
        request = protocol.decode_request(line)
        if isinstance(request, protocol.ProtocolError):
            return True
        if request.op == "stop":
            return False
        if request.op == "dump" and self.last_stacks is not None:
            offset = self.now() - self.last_stacks.timestamp
            self.emit(self.last_stacks, offset)
            self.send(protocol.encode(Reply(self.host, self.now(), request.id, True,
                                            "replayed the newest recorded round")))
        else:
            self.send(protocol.encode(Reply(self.host, self.now(), request.id, False,
                                            f"{request.op}: not replayed")))
        return True

    def run(self) -> str:
        self.send(protocol.encode(Hello(self.host, self.now(), "rltui replay", os.getpid(),
                                        self.job, self.sources)))
        mono0, offset0 = time.monotonic(), self.now() - self.start
        passes, i, beat = 0, 0, time.monotonic() + self.heartbeat
        pending = b""
        while True:
            elapsed = time.monotonic() - mono0
            offset = offset0 + passes * self.length
            while i < len(self.readings) and \
                    self.readings[i].timestamp - self.start + passes * self.length <= elapsed:
                reading = self.readings[i]
                i += 1
                if passes == 0 or reading.source != "logs":
                    self.emit(reading, offset)
            if i >= len(self.readings) and self.loop:
                passes, i = passes + 1, 0
                continue
            # After the recording (without --loop) the node stays: heartbeats and answers.
            due = (self.readings[i].timestamp - self.start + passes * self.length
                   if i < len(self.readings) else float("inf"))
            wait = max(0.0, min(due - elapsed, beat - time.monotonic()))
            ready, _, _ = select.select([sys.stdin.buffer], [], [], wait)
            if ready:
                chunk = os.read(sys.stdin.fileno(), 1 << 16)
                if not chunk:
                    return "end of input"
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip() and not self.answer(line):
                        return "stopped"
            if time.monotonic() >= beat:
                self.send(protocol.encode(Heartbeat(self.host, self.now())))
                beat = time.monotonic() + self.heartbeat


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="replay_agent")
    p.add_argument("--host", required=True)
    p.add_argument("--scenario", required=True)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--ranks-per-node", type=int, default=8)
    p.add_argument("--world", type=int, default=8)
    p.add_argument("--clock-skew", type=float, default=0.0)
    p.add_argument("--heartbeat", type=float, default=protocol.DEFAULT_HEARTBEAT)
    p.add_argument("--loop", action="store_true")
    args = p.parse_args(argv)
    replayer = Replayer(args)
    try:
        reason = replayer.run()
        replayer.send(protocol.encode(Bye(args.host, replayer.now(), reason)))
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
