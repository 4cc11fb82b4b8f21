"""Ray's state API and node summary (JSON) -> rltui's model values, per Ray node. Pure.

Per node: a ``ProcPoll`` of its live workers (actors, drivers, task workers, idle pool
workers), a ``GpuPoll`` when its dashboard agent reports GPUs (``gpu_reading``: the node's
"gpus" reading, or why it has none), and the workers worth a stack dump. Where the fields come
from:

- pid and node: ``/api/v0/workers`` (the alive ones), joined with ``/api/v0/actors`` by node
  and pid;
- role: the actor's class (``WorkerDict``), ``driver``, ``IDLE`` for a pooled worker with
  nothing to do (Ray titles it ``ray::IDLE``), ``task`` for one running a task;
- name: the actor's name when it has one (``a1b2c3WorkerDict_0:3``), else ``ray::CLASS``;
- rank, world size, local rank and size: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` or
  ``RAY_LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` or ``RAY_LOCAL_WORLD_SIZE`` in the env_vars of the
  actor's ``runtime_env`` (verl's worker groups set them there); else ``rank N`` in the
  actor's name or repr;
- GPU index: the node's GPUs in ``/nodes?view=summary`` list the pids using each one;
- create time: the worker's ``start_time_ms``.

Ray shows no command line, CPU or memory per worker in these lists: they stay unknown (N/A).
A number that is not one (``"inf"``, ``NaN``, ``1e400``, absurdly large) is no reading of
anything: ``BadAnswer``, which the feed reports as an answer it cannot read.
A process's environment beyond what its ``runtime_env`` sets is not visible either, so a rank
that a program sets for itself at run time (``os.environ["RANK"] = ...`` inside the actor)
cannot be known: such workers have no rank.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rltui.model import OK, UNAVAILABLE, GpuPoll, GpuProcess, GpuSample, ProcInfo, ProcPoll, Reading
from rltui.parsing.procinfo import DEBUG_ENV, parse_int
from rltui.redact import redact_env

ALIVE, DEAD = "ALIVE", "DEAD"
DRIVER, WORKER = "DRIVER", "WORKER"
IDLE_ROLE, TASK_ROLE, DRIVER_ROLE = "IDLE", "task", "driver"
MB = 1 << 20
HOW = "Ray state API: actors' runtime_env RANK/WORLD_SIZE, else 'rank N' in the actor's name"
GPU_REMEDY = ("GPU data comes from Ray's dashboard agent on each node (ray[default]; it reads "
              "NVML through nvidia-ml-py).")

_NAME_RANK = re.compile(r"(?<![a-z])rank[-_= ]?(\d{1,6})(?!\d)", re.IGNORECASE)
_NIL_ID = re.compile(r"f+")  # Ray's nil ids are all f's: "not an actor"
# Beyond any count, percentage, MiB or milliwatt a node reports, and small enough that
# scaling it (MiB -> bytes) stays a finite float.
MAX_NUMBER = 1e15


class BadAnswer(ValueError):
    """A value in the dashboard's JSON that cannot be what the field means; the message names
    the field and quotes the value."""


@dataclass(frozen=True, slots=True)
class RayNode:
    node_id: str
    name: str  # --node-name, by default the node's IP address
    ip: str
    state: str  # ALIVE | DEAD
    message: str = ""  # why Ray marked it dead (state_message)
    head: bool = False

    @property
    def alive(self) -> bool:
        return self.state == ALIVE


@dataclass(frozen=True, slots=True)
class NodeState:
    """One live node as the dashboard shows it now."""

    node: RayNode
    procs: ProcPoll
    targets: tuple[ProcInfo, ...]  # the workers a stack round dumps
    gpus: GpuPoll | None  # None: no report from the node's agent
    hostname: str = ""  # the node's own host name, from its agent


def read_nodes(rows: Iterable[Any]) -> list[RayNode]:
    out = []
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("node_id"), str):
            continue
        ip = _text(row.get("node_ip"))
        out.append(RayNode(node_id=row["node_id"], name=_text(row.get("node_name")) or ip
                           or row["node_id"][:12], ip=ip, state=_text(row.get("state")),
                           message=_text(row.get("state_message")),
                           head=row.get("is_head_node") is True))
    return out


def assign_labels(known: Mapping[str, str], nodes: Sequence[RayNode]) -> dict[str, str]:
    """Labels for the nodes not labelled yet (node id -> label), never changing a given one.

    A node is known by its Ray node name (the node's IP unless ``--node-name`` was given); a
    second node of the same name (a node restarted on one address, two raylets on one machine)
    gets the start of its node id after a ``#``. A node already dead when first seen gets none:
    it is history, not part of what runs now. New nodes are taken head first, then by name.
    """
    taken = set(known.values())
    fresh = sorted((n for n in nodes if n.node_id not in known and n.alive),
                   key=lambda n: (not n.head, _natural(n.name), n.node_id))
    out: dict[str, str] = {}
    for node in fresh:
        label = node.name
        if label in taken:
            label = f"{node.name}#{node.node_id[:6]}"
        taken.add(label)
        out[node.node_id] = label
    return out


def node_states(nodes: Sequence[RayNode], actors: Iterable[Any], workers: Iterable[Any],
                summary: Iterable[Any] | None, how: str = HOW) -> dict[str, NodeState]:
    """Live nodes by node id, each with its workers, GPUs and dump targets. ``summary`` None:
    the node summary could not be read (no GPUs, no idle markers)."""
    by_pid = _actors_by_pid(actors)
    reports = _summaries(summary or ())
    listed: dict[str, list[dict]] = {}
    for w in workers:
        if (isinstance(w, dict) and w.get("is_alive") is not False and isinstance(w.get("pid"), int)
                and w.get("worker_type") in (DRIVER, WORKER)):
            listed.setdefault(_text(w.get("node_id")), []).append(w)
    out = {}
    for node in nodes:
        if not node.alive:
            continue
        report = reports.get(node.node_id)
        gpu_of = _gpu_of_pid(report["gpus"]) if report else {}
        running = report["running"] if report else {}
        procs, targets = [], []
        seen: set[int] = set()
        for w in sorted(listed.get(node.node_id, ()), key=lambda w: w["pid"]):
            actor = by_pid.get((node.node_id, w["pid"]))
            info, dump = _proc(w, actor, gpu_of, running.get(w["pid"]))
            procs.append(info)
            seen.add(info.pid)
            if dump:
                targets.append(info)
        # An alive actor whose worker the worker list missed (the lists are read one after
        # the other): still one of the node's processes.
        for (node_id, pid), actor in sorted(by_pid.items()):
            if node_id == node.node_id and pid not in seen:
                info, _ = _proc({"pid": pid, "worker_type": WORKER}, actor, gpu_of, None)
                procs.append(info)
                targets.append(info)
        gpus = _gpu_poll(report["gpus"]) if report else None
        out[node.node_id] = NodeState(node=node, procs=ProcPoll(procs=tuple(procs), how=how),
                                      targets=tuple(targets), gpus=gpus,
                                      hostname=report["hostname"] if report else "")
    return out


def gpu_reading(state: NodeState, summary_error: str, now: float) -> Reading:
    """A node's "gpus" reading: its agent's GPUs, or why there are none (``summary_error``:
    why the node summary could not be read, "" when it was)."""
    if state.gpus is None:
        why = (f"Ray's node summary could not be read: {summary_error}" if summary_error else
               "Ray's dashboard agent on this node has not reported yet")
        return Reading("gpus", now, UNAVAILABLE, message=why, remedy=GPU_REMEDY)
    if not state.gpus.gpus:
        return Reading("gpus", now, UNAVAILABLE,
                       message="Ray's dashboard agent reports no GPUs on this node",
                       remedy=GPU_REMEDY)
    return Reading("gpus", now, OK, state.gpus)


# -- workers ---------------------------------------------------------------------------------------

def _actors_by_pid(actors: Iterable[Any]) -> dict[tuple[str, int], dict]:
    out = {}
    for a in actors:
        if (isinstance(a, dict) and a.get("state") == ALIVE and isinstance(a.get("pid"), int)
                and a["pid"] > 0):
            out[(_text(a.get("node_id")), a["pid"])] = a
    return out


def _proc(worker: dict, actor: dict | None, gpu_of: Mapping[int, int],
          running: int | None) -> tuple[ProcInfo, bool]:
    """The worker as a ProcInfo, and whether a stack round dumps it: actors and drivers
    always, other workers only when the node's agent says they run a task (an idle pool worker
    waits in Ray's loop; a node may keep dozens)."""
    pid = worker["pid"]
    started = worker.get("start_time_ms")
    create = started / 1000.0 if isinstance(started, (int, float)) and 0 < started < 1e14 \
        else None
    gpu = gpu_of.get(pid)
    common = dict(pid=pid, create_time=create, gpu_index=gpu, gpu_from="nvml" if gpu is not None
                  else "")
    if actor is not None:
        cls = _text(actor.get("class_name")) or "actor"
        env = runtime_env_vars(actor.get("serialized_runtime_env"))
        name = _text(actor.get("name"))
        rank = parse_int(env.get("RANK"))
        if rank is None:
            rank = name_rank(name) if name else None
            rank = rank if rank is not None else name_rank(_text(actor.get("repr_name")))
        shown = {k: env[k] for k in DEBUG_ENV if k in env}
        return ProcInfo(
            **common, name=name or f"ray::{cls}", role=cls, rank=rank,
            local_rank=_first_int(env, "LOCAL_RANK", "RAY_LOCAL_RANK"),
            world_size=parse_int(env.get("WORLD_SIZE")),
            local_world_size=_first_int(env, "LOCAL_WORLD_SIZE", "RAY_LOCAL_WORLD_SIZE"),
            debug_env=tuple(sorted(redact_env(shown).items()))), True
    if worker.get("worker_type") == DRIVER:
        return ProcInfo(**common, name="ray driver", role=DRIVER_ROLE), True
    if running is None:  # the agent did not say: neither idle nor busy is known
        return ProcInfo(**common, name="ray worker", role=""), False
    if running == 0:
        return ProcInfo(**common, name="ray::IDLE", role=IDLE_ROLE), False
    return ProcInfo(**common, name="ray worker", role=TASK_ROLE), True


def runtime_env_vars(serialized: Any) -> dict[str, str]:
    """The env_vars of an actor's ``serialized_runtime_env`` (a JSON string); {} when there
    are none, or the dashboard redacted the runtime env as a whole."""
    if isinstance(serialized, str):
        try:
            serialized = json.loads(serialized) if serialized.strip() else {}
        except (ValueError, RecursionError):  # RecursionError: nested beyond the parser
            return {}
    env = serialized.get("env_vars") if isinstance(serialized, dict) else None
    if not isinstance(env, dict):
        return {}
    return {str(k): v for k, v in env.items() if isinstance(v, str)}


def name_rank(name: str) -> int | None:
    """``rank 3`` in an actor's name or repr (``policy_rank3``, ``Worker(rank=3)``)."""
    found = _NAME_RANK.findall(name)
    return int(found[0]) if len(found) == 1 else None


def _first_int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = parse_int(env.get(name))
        if value is not None:
            return value
    return None


# -- the node summary ------------------------------------------------------------------------------

def _summaries(summary: Iterable[Any]) -> dict[str, dict]:
    """node id -> {hostname, gpus (raw), running: pid -> tasks running (non-actor workers)}."""
    out = {}
    for entry in summary:
        if not isinstance(entry, dict):
            continue
        raylet = entry.get("raylet") if isinstance(entry.get("raylet"), dict) else {}
        node_id = _text(raylet.get("nodeId"))
        if not node_id:
            continue
        running: dict[int, int] = {}
        stats_list = raylet.get("coreWorkersStats")
        for stats in stats_list if isinstance(stats_list, list) else ():
            if not isinstance(stats, dict) or not isinstance(stats.get("pid"), int):
                continue
            actor = _text(stats.get("actorId"))
            if actor and not _NIL_ID.fullmatch(actor):
                continue  # an actor's worker: dumped as an actor
            tasks = _number(stats.get("numRunningTasks"), "numRunningTasks")
            running[stats["pid"]] = int(tasks) if tasks is not None else 0
        gpus = entry.get("gpus")
        out[node_id] = {"hostname": _text(entry.get("hostname")), "running": running,
                        "gpus": [g for g in gpus if isinstance(g, dict)]
                        if isinstance(gpus, list) else []}
    return out


def _gpu_processes(gpu: Mapping[str, Any]) -> list[dict]:
    # A list of {pid, gpuMemoryUsage} in the dashboard's answers; a dict by pid inside Ray's
    # agent (older and newer releases differ): take both.
    procs = _field(gpu, "processesPids", "processes_pids")
    if isinstance(procs, dict):
        procs = list(procs.values())
    if not isinstance(procs, list):  # true, a number, a string: no list of processes
        return []
    return [p for p in procs if isinstance(p, dict) and isinstance(p.get("pid"), int)]


def _gpu_of_pid(gpus: Sequence[Mapping[str, Any]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for gpu in gpus:
        index = gpu.get("index")
        if isinstance(index, int):
            for proc in _gpu_processes(gpu):
                out.setdefault(proc["pid"], index)
    return out


def _gpu_poll(gpus: Sequence[Mapping[str, Any]]) -> GpuPoll:
    samples = []
    for gpu in gpus:
        index = gpu.get("index")
        if not isinstance(index, int):
            continue
        used, total = (_numeric(gpu, "memoryUsed", "memory_used"),
                       _numeric(gpu, "memoryTotal", "memory_total"))
        power = _numeric(gpu, "powerMw", "power_mw")
        procs = tuple(GpuProcess(pid=p["pid"], used_memory=_mb(_numeric(
            p, "gpuMemoryUsage", "gpu_memory_usage"))) for p in _gpu_processes(gpu))
        samples.append(GpuSample(
            index=index, name=_text(gpu.get("name")), uuid=_text(gpu.get("uuid")),
            util=_numeric(gpu, "utilizationGpu", "utilization_gpu"),
            mem_used=_mb(used), mem_total=_mb(total),
            power_w=power / 1000.0 if power is not None else None,
            temperature_c=_numeric(gpu, "temperatureC", "temperature_c"),
            processes=procs))
    return GpuPoll(gpus=tuple(sorted(samples, key=lambda s: s.index)))


# -- small readers ---------------------------------------------------------------------------------

def _field(d: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in d:
            return d[name]
    return None


def _numeric(d: Mapping[str, Any], *names: str) -> float | None:
    """The number in the first of ``names`` that ``d`` has."""
    return _number(_field(d, *names), next((n for n in names if n in d), names[0]))


def _number(value: Any, name: str) -> float | None:
    """A number from JSON (the dashboard writes some counts as strings: "1"); None when there
    is none. A value that is not a finite number of sane size raises ``BadAnswer``: ``int()``
    of it would raise OverflowError or ValueError deep inside a poll."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    elif isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an integer of hundreds of digits
            number = math.inf
    else:
        return None
    if not math.isfinite(number) or abs(number) > MAX_NUMBER:
        # str() of an int of thousands of digits raises: its size says enough
        shown = repr(value[:40]) if isinstance(value, str) else (
            repr(value) if isinstance(value, float) else f"of {value.bit_length()} bits")
        raise BadAnswer(f"{name} {shown}, which is no finite number in range")
    return number


def _mb(value: float | None) -> int | None:
    return int(value * MB) if value is not None else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _natural(text: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))
