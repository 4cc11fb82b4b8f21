"""The numbers an OOM event carries, as ``OomNumbers`` (pure).

``numbers_from_event`` maps the parser's fields (docs/log-events.md) onto one shape for every
kind of OOM:

- ``cuda-oom``: PyTorch's message. ``others`` is every ``Process {pid} has {X} memory in use``
  clause (``process_usage``); PyTorch names its own process "this process", but inside a
  container NVML's pids differ from the process's own, so the failing process itself can be
  listed there. The old format's ``reserved_total`` includes what is allocated; its reserved but
  unallocated part is ``reserved_total - allocated``.
- ``engine-oom``: vLLM's free memory at start (``free`` of ``capacity``, ``requested`` the memory
  ``gpu_memory_utilization`` asks for) or the KV cache one request needs (``requested``).
- ``ray-oom``: host memory, not a GPU: ``capacity`` is the node's memory, ``free`` what was left
  under Ray's reading, ``this_process`` the killed worker's memory, ``others`` the top memory users
  Ray listed (the killed worker among them).
- ``child-failed`` with ``possible_host_oom``: kind ``host-oom``; no numbers, the rank and pid in
  ``detail``.

A value the message did not give stays ``None``. Any other event gives its kind and text with no
numbers rather than an error.
"""

from __future__ import annotations

from rltui.diagnosis.oom.types import OomNumbers
from rltui.model import LogEvent

MAX_TEXT = 2048

_CUDA_MARKS = ("CUDA out of memory", "CUDA error: out of memory")
_ENGINE_MARKS = ("Free memory on device", "No available memory for the cache blocks",
                 "KV cache is needed", "Not enough memory")
_RAY_MARKS = ("running low on memory", "Memory on the node", "killed due to memory pressure",
              "NODE_OUT_OF_MEMORY")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_usage(value: object) -> tuple[tuple[int, int], ...]:
    """``"23444:75430000000,5377:12150000000"`` -> ((23444, 75430000000), (5377, 12150000000)).

    Malformed entries are skipped."""
    if not isinstance(value, str) or not value:
        return ()
    out = []
    for item in value.split(","):
        pid, _, used = item.strip().partition(":")
        if pid.isdigit() and used.isdigit():
            out.append((int(pid), int(used)))
    return tuple(out)


def _lines_with(text: str, marks: tuple[str, ...], limit: int = 1) -> str:
    found = [line.strip() for line in text.splitlines() if any(m in line for m in marks)]
    return "\n".join(found[:limit])[:MAX_TEXT]


def _detail(fields: dict, used: set[str]) -> tuple[tuple[str, object], ...]:
    return tuple((k, v) for k, v in fields.items() if k not in used)


def _gpu_of(device: object) -> int | None:
    """``"cuda:3"`` -> 3."""
    if isinstance(device, str):
        tail = device.rsplit(":", 1)[-1]
        if tail.isdigit():
            return int(tail)
    return None


def numbers_from_event(event: LogEvent) -> OomNumbers:
    """The OOM's numbers, in bytes, from a cuda-oom, engine-oom, ray-oom or child-failed event."""
    fields = dict(event.fields)
    text = event.text or ""
    if event.kind == "cuda-oom":
        used = {"gpu", "requested", "capacity", "free", "allocated", "reserved_unallocated",
                "process_usage", "this_process"}
        reserved = _int(fields.get("reserved_unallocated"))
        total, allocated = _int(fields.get("reserved_total")), _int(fields.get("allocated"))
        if reserved is None and total is not None and allocated is not None and total >= allocated:
            reserved = total - allocated
        return OomNumbers(
            kind="cuda-oom", gpu=_int(fields.get("gpu")), requested=_int(fields.get("requested")),
            capacity=_int(fields.get("capacity")), free=_int(fields.get("free")),
            allocated=allocated, reserved_unallocated=reserved,
            others=parse_usage(fields.get("process_usage")),
            this_process=_int(fields.get("this_process")), detail=_detail(fields, used),
            text=_lines_with(text, _CUDA_MARKS) or event.summary[:MAX_TEXT])
    if event.kind == "engine-oom":
        used = {"engine", "free", "total", "desired", "needed"}
        requested = _int(fields.get("desired"))
        if requested is None:
            requested = _int(fields.get("needed"))
        return OomNumbers(
            kind="engine-oom", gpu=_gpu_of(fields.get("device")), requested=requested,
            capacity=_int(fields.get("total")), free=_int(fields.get("free")),
            engine=str(fields.get("engine") or ""), detail=_detail(fields, used),
            text=_lines_with(text, _ENGINE_MARKS) or event.summary[:MAX_TEXT])
    if event.kind == "ray-oom":
        used = {"used", "total", "task_memory", "process_usage"}
        node_used, node_total = _int(fields.get("used")), _int(fields.get("total"))
        free = node_total - node_used if node_used is not None and node_total is not None else None
        return OomNumbers(
            kind="ray-oom", capacity=node_total, free=free,
            others=parse_usage(fields.get("process_usage")),
            this_process=_int(fields.get("task_memory")),
            detail=(("used", node_used), *_detail(fields, used)),
            text=_lines_with(text, _RAY_MARKS, limit=3) or event.summary[:MAX_TEXT])
    if event.kind == "child-failed":
        kind = "host-oom" if fields.get("possible_host_oom") else "child-failed"
        keep = ("rank", "local_rank", "pid", "host", "exitcode", "signal", "name", "failure_time",
                "error")
        return OomNumbers(kind=kind, detail=tuple((k, fields.get(k)) for k in keep),
                          text=event.summary[:MAX_TEXT])
    return OomNumbers(kind=event.kind, detail=tuple(fields.items()),
                      text=(event.summary or text)[:MAX_TEXT])
