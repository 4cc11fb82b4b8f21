"""Put a remote node's reading on this machine's clock. Pure.

Sign convention, the one ``AgentStream.skew`` uses: ``skew = receive time - agent time``
(seconds this machine is ahead of the node; about -100 for a node whose clock is 100 s ahead),
so ``local = agent + skew``. Every time a reading carries that was stamped by the node's clock is
moved: the reading's own timestamp, process start times, log arrival and line times, stack round
and dump times. A log line's own timestamp is moved too: the job wrote it with the node's clock.
Ages computed afterwards (stalls, a source's last reading, how long a rank has been gone) are
then true ages on this machine, whatever the node's clock says.
"""

from __future__ import annotations

from rltui.model import LogPoll, ProcPoll, Reading, StackPoll, replace


def _t(value: float | None, d: float) -> float | None:
    return None if value is None else value + d


def _procs(poll: ProcPoll, d: float) -> ProcPoll:
    return replace(poll, procs=tuple(
        replace(p, create_time=p.create_time + d) if p.create_time is not None else p
        for p in poll.procs))


def _logs(poll: LogPoll, d: float) -> LogPoll:
    files = []
    for u in poll.files:
        if u.steps or u.events:
            u = replace(
                u,
                steps=tuple(replace(s, arrival=s.arrival + d, time=_t(s.time, d))
                            for s in u.steps),
                events=tuple(replace(e, arrival=e.arrival + d, time=_t(e.time, d))
                             for e in u.events))
        files.append(u)
    return replace(poll, files=tuple(files))


def _stacks(poll: StackPoll, d: float) -> StackPoll:
    return replace(poll, started=poll.started + d, finished=poll.finished + d,
                   dumps=tuple(replace(x, timestamp=x.timestamp + d)
                               if x.timestamp is not None else x for x in poll.dumps))


def to_local(reading: Reading, skew: float | None) -> Reading:
    """``reading`` with every node-clock time moved by ``skew``; the same object when there is
    nothing to move (no estimate yet, or none needed). Payloads of other kinds (GPUs, sources
    added later) move only the reading's timestamp: they carry no other time."""
    if not skew:
        return reading
    payload = reading.payload
    if isinstance(payload, ProcPoll):
        payload = _procs(payload, skew)
    elif isinstance(payload, LogPoll):
        payload = _logs(payload, skew)
    elif isinstance(payload, StackPoll):
        payload = _stacks(payload, skew)
    return replace(reading, timestamp=reading.timestamp + skew, payload=payload)
