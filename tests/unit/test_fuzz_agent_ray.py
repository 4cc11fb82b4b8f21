"""Fuzzing of the two decoders that read another machine's JSON: the agent protocol decoder
(``rltui.agent.protocol.decode`` and ``decode_request``) and the Ray state API readers
(``rltui.remote.ray``: ``unwrap_list``, ``read_nodes``, ``node_states``, ``gpu_reading``,
``runtime_env_vars``, ``name_rank``).

Totality: every input gives a value or the documented error (``ProtocolError`` returned;
``DashboardError`` from ``unwrap_list``, ``BadAnswer`` from ``node_states``), never another
exception. Work: each input must cost this process little CPU time (``time.process_time``, not
wall time: other work shares the machine); the bound is generous (a second for inputs of a few
kilobytes) and catches a blow-up, not a slowdown.

The normal run keeps to a few seconds; ``RLTUI_FUZZ_LONG=1`` raises the examples for a
benchmark run (the counts and the slowest input are printed with ``-s``).
"""

from __future__ import annotations

import copy
import json
import os
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rltui.agent import protocol
from rltui.agent.protocol import ProtocolError
from rltui.model import Reading
from rltui.remote.ray.client import DashboardError, unwrap_list
from rltui.remote.ray.state import (
    BadAnswer,
    gpu_reading,
    name_rank,
    node_states,
    read_nodes,
    runtime_env_vars,
)

LONG = os.environ.get("RLTUI_FUZZ_LONG") == "1"
EXAMPLES = 10_000 if LONG else 100
CPU_BOUND_S = 1.0  # per input of a few KiB: generous; a quadratic blow-up costs far more
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
                database=None)

# the long run takes minutes per test: past the suite's per-test timeout
pytestmark = [pytest.mark.timeout(3600)] if LONG else []

SLOWEST: dict[str, float] = {}
COUNT: dict[str, int] = {}


def timed(name: str, fn, *args):
    """``fn(*args)`` with its CPU time bounded and recorded."""
    start = time.process_time()
    try:
        return fn(*args)
    finally:
        spent = time.process_time() - start
        COUNT[name] = COUNT.get(name, 0) + 1
        SLOWEST[name] = max(SLOWEST.get(name, 0.0), spent)
        assert spent < CPU_BOUND_S, f"{name}: {spent:.2f} s of CPU for one input"


# -- JSON values -----------------------------------------------------------------------------------

NUMBERS = (st.integers(min_value=-2**70, max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True)
           | st.sampled_from([0, -1, 2**63, 10**400, 1e308, "inf", "nan", "1e400", "7"]))
SCALARS = st.none() | st.booleans() | NUMBERS | st.text(max_size=20)
JSON = st.recursive(SCALARS, lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=20)


def shaped(keys: list[str]):
    """Dicts with the fields a reader looks for, each holding any JSON value (or missing)."""
    return st.fixed_dictionaries({}, optional={k: JSON | SCALARS for k in keys})


# -- the agent protocol ----------------------------------------------------------------------------

PAYLOADS = {
    "procs": shaped(["procs", "how", "denied"]),
    "gpus": shaped(["gpus", "driver_version", "simulated", "foreign_pids"]),
    "logs": shaped(["files", "unmatched"]),
    "stacks": shaped(["dumps", "started", "finished", "trigger", "nonblocking"]),
}
PROC = shaped(["pid", "rank", "local_rank", "world_size", "name", "cmdline", "create_time",
               "gpu_index", "is_zombie", "debug_env", "ppid"])
GPU = shaped(["index", "name", "uuid", "util", "mem_used_mb", "mem_total_mb", "processes"])


@st.composite
def readings(draw):
    source = draw(st.sampled_from([*PAYLOADS, "other"]))
    payload = draw(PAYLOADS.get(source, JSON))
    if source == "procs" and draw(st.booleans()):
        payload["procs"] = draw(st.lists(PROC, max_size=4))
    if source == "gpus" and draw(st.booleans()):
        payload["gpus"] = draw(st.lists(GPU, max_size=4))
    reading = draw(shaped(["timestamp", "status", "message", "remedy"]))
    reading.update(source=draw(st.sampled_from([source, source, "gpus"])), payload=payload)
    return source, reading


@st.composite
def messages(draw):
    kind = draw(st.sampled_from(["hello", "reading", "heartbeat", "reply", "error", "bye",
                                 "future", 7]))
    msg = draw(shaped(["host", "t", "agent", "pid", "job", "sources", "id", "ok", "message",
                       "reason", "data"]))
    msg.update(v=draw(st.sampled_from([1, 1, 1, 2, 0, "1", None, 1.0])), type=kind)
    if draw(st.booleans()):
        msg.update(host="n1", t=draw(NUMBERS))
    if kind == "reading":
        source, reading = draw(readings())
        msg.update(source=source, reading=reading)
    return json.dumps(msg, allow_nan=True).encode()


LINES = messages() | st.binary(max_size=300) | JSON.map(
    lambda v: json.dumps(v, allow_nan=True).encode())


@FUZZ
@given(LINES)
# found by this test: an integer of 401 digits overflowed float() (OverflowError, not a
# ProtocolError) in a message's time and in a hello's source intervals
@example(b'{"v": 1, "type": "hello", "host": "n1", "t": 1' + b"0" * 400 + b"}")
@example(b'{"v": 1, "type": "hello", "host": "n1", "t": 1, "agent": "a", "pid": 1, '
         b'"sources": {"gpus": 1' + b"0" * 400 + b"}}")
def test_the_agent_decoder_is_total_and_cheap(line):
    out = timed("protocol.decode", protocol.decode, line)
    assert isinstance(out, (ProtocolError, *protocol.Message.__args__)), out
    if isinstance(out, protocol.ReadingMessage):
        assert isinstance(out.reading, Reading)
    req = timed("protocol.decode_request", protocol.decode_request, line)
    assert isinstance(req, (ProtocolError, protocol.Request)), req


# -- the Ray state API readers ---------------------------------------------------------------------

NODE = shaped(["node_id", "node_ip", "node_name", "state", "state_message", "is_head_node"])
WORKER = shaped(["pid", "node_id", "worker_type", "is_alive", "start_time_ms"])
ACTOR = shaped(["pid", "node_id", "state", "class_name", "name", "repr_name", "actor_id",
                "serialized_runtime_env"])
GPU_REPORT = shaped(["index", "name", "uuid", "utilizationGpu", "memoryUsed", "memoryTotal",
                     "processesPids", "gpuMemoryUsage", "temperatureC", "powerMw"])
SUMMARY = shaped(["raylet", "gpus", "hostname", "ip", "nodeId", "coreWorkersStats"])
IDS = st.sampled_from(["n1", "n2", "a" * 40])
PIDS = st.sampled_from([1, 2, 7, 2**31, -1])


def with_ids(rows):
    """Rows that often name a real node and pid, so that the joins are exercised too."""
    return st.lists(rows, max_size=5).flatmap(lambda rs: st.tuples(*[
        st.tuples(st.just(r), IDS, PIDS, st.booleans()) for r in rs]).map(
        lambda items: [dict(r, node_id=i, pid=p) if on else r for r, i, p, on in items]))


ENVS = st.dictionaries(st.sampled_from(["RANK", "WORLD_SIZE", "LOCAL_RANK", "RAY_LOCAL_RANK",
                                        "LOCAL_WORLD_SIZE"]), SCALARS, max_size=4)


@st.composite
def summaries(draw):
    rows = draw(with_ids(SUMMARY))
    for r in rows:
        if draw(st.booleans()):
            r["gpus"] = draw(st.lists(GPU_REPORT, max_size=3))
        if draw(st.booleans()) and "node_id" in r:
            r["raylet"] = {"nodeId": r["node_id"], "state": "ALIVE"}
    return rows


@FUZZ
@given(JSON | st.fixed_dictionaries({"result": JSON, "data": st.fixed_dictionaries(
    {"result": st.fixed_dictionaries({"result": st.lists(JSON, max_size=3) | JSON},
                                     optional={"total": NUMBERS,
                                               "partial_failure_warning": JSON})})}))
def test_the_state_api_envelope_is_total_and_cheap(answer):
    try:
        rows, note = timed("ray.unwrap_list", unwrap_list, answer, "workers", "node01")
    except DashboardError as exc:
        assert exc.message
        return
    assert isinstance(rows, list) and isinstance(note, str)


@FUZZ
@given(with_ids(NODE), with_ids(ACTOR), with_ids(WORKER), st.none() | summaries(),
       st.lists(ENVS, max_size=2))
# found by this test: a GPU's processesPids or a raylet's coreWorkersStats that is no list
# (true, a number) was iterated (TypeError)
@example([{"node_id": "n1", "state": "ALIVE"}], [], [],
         [{"raylet": {"nodeId": "n1", "state": "ALIVE"},
           "gpus": [{"index": 0, "processesPids": True}]}], [])
@example([{"node_id": "n1", "state": "ALIVE"}], [], [],
         [{"raylet": {"nodeId": "n1", "state": "ALIVE", "coreWorkersStats": 7}}], [])
def test_the_state_api_readers_are_total_and_cheap(nodes, actors, workers, summary, envs):
    # copies: Hypothesis may draw the same objects again, and they are changed below
    nodes, actors, workers, summary = copy.deepcopy((nodes, actors, workers, summary))
    for node in nodes:
        if "node_id" in node and "state" not in node:
            node["state"] = "ALIVE"
    for actor, env in zip(actors, envs):
        actor["serialized_runtime_env"] = json.dumps({"env_vars": env}, allow_nan=True)
    read = timed("ray.read_nodes", read_nodes, nodes)
    try:
        states = timed("ray.node_states", node_states, read, actors, workers, summary)
    except BadAnswer as exc:
        assert str(exc)
        return
    for state in states.values():
        assert isinstance(timed("ray.gpu_reading", gpu_reading, state, "", 1.0), Reading)


@FUZZ
@given(JSON | st.text(max_size=200), st.text(max_size=60))
def test_runtime_env_and_name_readers_are_total_and_cheap(serialized, name):
    env = timed("ray.runtime_env_vars", runtime_env_vars, serialized)
    assert isinstance(env, dict)
    rank = timed("ray.name_rank", name_rank, name)
    assert rank is None or isinstance(rank, int)


def teardown_module() -> None:
    for name in sorted(COUNT):
        print(f"fuzz {name}: {COUNT[name]} inputs, slowest {SLOWEST[name] * 1000:.1f} ms CPU")
