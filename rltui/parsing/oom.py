"""Pure parsers for memory errors: PyTorch's CUDA OOM, the inference engines' start errors and
Ray's OOM killer (host memory).

Each parser takes one message (usually an exception line) and returns the parsed fields, or
None when the text is not that error. Sizes come back in bytes (int), converted from the units
PyTorch's ``format_size`` prints ("512 bytes", "1.50 KiB", "20.00 MiB", "13.91 GiB") as
``int(value * unit)``, so "13.91 GiB" is ``int(13.91 * 2**30)``.

The callers check a cheap substring first ("out of memory", "emory"); the regexes here only run
on lines that already look like a memory error.
"""

from __future__ import annotations

import re

from rltui.parsing.lazyre import LazyPattern
from rltui.units import pytorch_bytes

Fields = list[tuple[str, str | int | float | None]]

_UNITS = {
    "bytes": 1, "byte": 1, "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    # PyTorch's MPS allocator and some engines print decimal-looking names for binary units.
    "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40,
}
# Numbers are at most 18 digits (12 after the point): a longer run is no size any tool prints,
# the bound keeps int() under Python's digit limit and float() finite, and an unanchored search
# over a long digit run tries at most 18 characters per position (linear, not quadratic). The
# look-behind keeps a longer run from matching by its last digits.
_INT = r"(\d{1,18})"
_NUM = r"(\d{1,18}(?:\.\d{1,12})?)"
_SIZE = r"(?<![\d.])" + _NUM + r" ?(bytes|[KMGT]i?B)"


def size_to_bytes(number: str, unit: str) -> int:
    """``("13.91", "GiB")`` -> ``int(13.91 * 2**30)``."""
    return int(float(number) * _UNITS[unit.lower()])


def _size(regex: re.Pattern[str], text: str) -> int | None:
    m = regex.search(text)
    return size_to_bytes(m.group(1), m.group(2)) if m else None


# -- PyTorch CUDA caching allocator ----------------------------------------------------------------
# Current format (c10/cuda/CUDACachingAllocator.cpp), pieces in order:
#   CUDA out of memory. Tried to allocate {X}. GPU {i} has a total capacity of {T} of which {F} is
#   free. {proc_info}{allowed_info}Of the allocated memory {A} is allocated by PyTorch,
#   {private_pool_msg}and {R} is reserved by PyTorch but unallocated. ...
# proc_info repeats "Process {pid} has {X} memory in use. " or "Including non-PyTorch memory, this
# process has {X} memory in use. "; allowed_info is "{X} allowed; "; private_pool_msg is
# "with {X} allocated in private pools (e.g., CUDA Graphs), ". PyTorch 2.1 printed "capacty".
# Older format: "... Tried to allocate {X} (GPU {d}; {T} total capacity; {A} already allocated;
# {F} free; [{X} allowed; ]{R} reserved in total by PyTorch)"; before that "{R} cached)".
# Every clause is matched on its own so a version that drops or adds one still parses.
_TRIED = LazyPattern(r"Tried to allocate " + _SIZE)
_CUR_GPU = LazyPattern(r"GPU " + _INT + r" has a total capac\w* of " + _SIZE + r" of which " + _SIZE + r" is free")
_CUR_CAP = LazyPattern(r"GPU (\d{1,18}) has a total capac\w* of " + _SIZE)  # a message cut after it
_PROC = LazyPattern(r"Process (\d{1,18}) has " + _SIZE + r" memory in use")
_THIS_PROC = LazyPattern(r"this process has " + _SIZE + r" memory in use")
_ALLOWED = LazyPattern(_SIZE + r" allowed;")
_ALLOCATED = LazyPattern(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch")
_PRIVATE = LazyPattern(r"with " + _SIZE + r" allocated in private pools")
_RESERVED_UNALLOC = LazyPattern(_SIZE + r" is reserved by PyTorch but unallocated")
_OLD_GPU = LazyPattern(r"\(GPU (\d{1,18}); " + _SIZE + r" total capacity")
_OLD_ALLOCATED = LazyPattern(_SIZE + r" already allocated")
_OLD_FREE = LazyPattern(r"; " + _SIZE + r" free")
_OLD_RESERVED = LazyPattern(_SIZE + r" (?:reserved in total by PyTorch|cached)\)")
_EXC_BEFORE = LazyPattern(r"([A-Za-z_][\w.]*(?:Error|Exception))(?:\([\w.]*\))?: *(?:CUDA|$)")
_CUDA_ERROR_DEVICE = LazyPattern(r"\bdevice[ :=]+(\d{1,18})")


def _exception_name(text: str, at: int) -> str | None:
    """The exception class printed just before the OOM message ("torch.OutOfMemoryError")."""
    m = _EXC_BEFORE.search(text, max(0, at - 120), at + 4)
    return m.group(1) if m else None


def parse_cuda_oom(text: str) -> Fields | None:
    """Fields of a PyTorch CUDA OOM message, or None when ``text`` holds none.

    ``format`` is "current", "old", or "cuda-error" for the CUDA runtime's own
    ``CUDA error: out of memory`` (no numbers; raised outside the caching allocator).
    """
    at = text.find("CUDA out of memory")
    if at < 0:
        at = text.find("CUDA error: out of memory")
        if at < 0:
            return None
        m = _CUDA_ERROR_DEVICE.search(text, at)
        return [("format", "cuda-error"), ("exception", _exception_name(text, at)),
                ("gpu", int(m.group(1)) if m else None)]
    msg = text[at:at + 4096]  # the message is ~500 chars; a flood of process clauses stays bounded
    fields: Fields = [("exception", _exception_name(text, at)), ("requested", _size(_TRIED, msg))]
    cur = _CUR_GPU.search(msg)
    cap = cur or _CUR_CAP.search(msg)  # a message cut mid-way keeps what it printed
    if cap:
        fields += [
            ("format", "current"),
            ("gpu", int(cap.group(1))),
            ("capacity", size_to_bytes(cap.group(2), cap.group(3))),
            ("free", size_to_bytes(cur.group(4), cur.group(5)) if cur else None),
            ("allocated", _size(_ALLOCATED, msg)),
            ("reserved_unallocated", _size(_RESERVED_UNALLOC, msg)),
        ]
        others = [(int(m.group(1)), size_to_bytes(m.group(2), m.group(3))) for m in _PROC.finditer(msg)]
        if others:
            fields += [
                ("process_usage", ",".join(f"{pid}:{used}" for pid, used in others)),
                ("others_count", len(others)),
                ("others_bytes", sum(used for _, used in others)),
            ]
        this = _size(_THIS_PROC, msg)
        if this is not None:
            fields.append(("this_process", this))
        allowed = _size(_ALLOWED, msg)
        if allowed is not None:
            fields.append(("allowed", allowed))
        private = _size(_PRIVATE, msg)
        if private is not None:
            fields.append(("private_pools", private))
        return fields
    old = _OLD_GPU.search(msg)
    if old:
        fields += [
            ("format", "old"),
            ("gpu", int(old.group(1))),
            ("capacity", size_to_bytes(old.group(2), old.group(3))),
            ("free", _size(_OLD_FREE, msg)),
            ("allocated", _size(_OLD_ALLOCATED, msg)),
            ("reserved_total", _size(_OLD_RESERVED, msg)),
        ]
        allowed = _size(_ALLOWED, msg)
        if allowed is not None:
            fields.append(("allowed", allowed))
        return fields
    # "CUDA out of memory." with no numbers (cut line, or a framework's own wording).
    fields.append(("format", "unknown"))
    return fields


# The caching allocator's warning (LOG(WARNING) in alloc_block, PyTorch 2.13; INFO from the next
# release): "memory allocation failed with OOM on device 1 while trying to allocate 20971520 bytes
# (free: 15794176, total: 150111977472)." It fires on every failed cudaMalloc, including the ones
# the allocator recovers from by freeing its cache and retrying (pytorch/pytorch#193195), so it is
# an OOM reading, not proof that the process died: ``warning`` True says so.
ALLOC_WARNING = "memory allocation failed with OOM"
_ALLOC = LazyPattern(r"memory allocation failed with OOM on device " + _INT + r" while trying to allocate " + _INT + r" bytes"
                    r"(?: \(free: (\d{1,18}), total: (\d{1,18})\))?")


def parse_alloc_warning(text: str) -> Fields | None:
    """Fields of the caching allocator's OOM warning, or None."""
    m = _ALLOC.search(text)
    if not m:
        return None
    return [("format", "alloc-warning"), ("exception", None), ("gpu", int(m.group(1))),
            ("requested", int(m.group(2))), ("free", int(m.group(3)) if m.group(3) else None),
            ("capacity", int(m.group(4)) if m.group(4) else None), ("warning", True)]


# A Ray task that raised torch's OutOfMemoryError reaches the caller as
#   ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_ref_update_actor()
#     (pid=118848, ip=10.0.0.7, actor_id=..., repr=<...>)
# (Ray's own OOM killer raises ray.exceptions.OutOfMemoryError, which parse_ray_oom reads.) When
# the worker's CUDA message is not in the log, this line is all there is of the CUDA OOM.
RAY_TASK_OOM = "RayTaskError(OutOfMemoryError)"
_RAY_TASK_CALL = LazyPattern(r"ray::([\w.<>-]+)\(\)(?: \(pid=(\d{1,18})(?:, ip=([^,)\s]+))?)?")


def parse_ray_task_oom(text: str) -> Fields | None:
    """Fields of a RayTaskError(OutOfMemoryError) line without the worker's CUDA message."""
    at = text.find(RAY_TASK_OOM)
    if at < 0:
        return None
    m = _RAY_TASK_CALL.search(text, at)
    return [("format", "ray-task"), ("exception", "OutOfMemoryError"), ("gpu", None),
            ("requested", None), ("ray_task", m.group(1)[:200] if m else None),
            ("task_pid", int(m.group(2)) if m and m.group(2) else None),
            ("node_ip", m.group(3) if m and m.group(3) else None)]


def cuda_oom_summary(fields: dict) -> str:
    """"CUDA OOM on GPU 0: tried to allocate 13.91 GiB, 8.85 GiB free of 79.11 GiB; ..."."""
    gpu = fields.get("gpu")
    where = f" on GPU {gpu}" if gpu is not None else ""
    if fields.get("format") == "cuda-error":
        return f"CUDA error: out of memory{where}"
    if fields.get("format") == "ray-task":
        task = fields.get("ray_task") or "a Ray task"
        pid = f" (pid {fields['task_pid']})" if fields.get("task_pid") is not None else ""
        return (f"CUDA OOM in Ray task {task}{pid}: torch's OutOfMemoryError, "
                "the worker's message not in this log")
    parts = []
    if fields.get("requested") is not None:
        parts.append(f"tried to allocate {pytorch_bytes(fields['requested'])}")
    if fields.get("capacity") is not None:
        parts.append(f"{pytorch_bytes(fields.get('free'))} free of {pytorch_bytes(fields['capacity'])}")
    text = f"CUDA OOM{where}"
    if fields.get("warning"):
        text = f"CUDA allocator OOM warning{where}"
    if parts:
        text += ": " + ", ".join(parts)
    if fields.get("warning"):
        text += " (the allocator may have recovered by freeing its cache)"
    count = fields.get("others_count")
    if count:
        pids = str(fields.get("process_usage") or "").split(",")
        who = f"process {pids[0].split(':')[0]}" if count == 1 else f"{count} processes"
        text += f"; {who} hold{'s' if count == 1 else ''} {pytorch_bytes(fields.get('others_bytes'))}"
    return text


# -- inference engines at start ---------------------------------------------------------------------
# vLLM (vllm/worker and vllm/v1/worker, vllm/v1/core/kv_cache_utils.py):
#   ValueError: Free memory on device cuda:0 (12.18/23.56 GiB) on startup is less than desired GPU
#     memory utilization (0.92, 21.67 GiB). Decrease GPU memory utilization or ...
#   ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` ...
#   ValueError: To serve at least one request with the model's max seq len (32768), (16.00 GiB KV
#     cache is needed, which is larger than the available KV cache memory (4.85 GiB). Based on the
#     available memory, the estimated maximum model length is 9936. ...
# SGLang (model_runner / pool configurator):
#   RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.
#     [Current value: mem_fraction_static=0.8]
_VLLM_FREE = LazyPattern(
    r"Free memory on device ?([\w:]*) ?\(" + _NUM + r"/" + _NUM + r" ([KMGT]i?B)\) on startup is "
    r"less than desired GPU memory utilization \(" + _NUM + r", " + _NUM + r" ([KMGT]i?B)\)")
_VLLM_KV = LazyPattern(
    r"max seq len \((\d{1,18})\), \(?" + _SIZE + r" KV cache is needed, which is larger than the "
    r"available KV cache memory \(" + _SIZE + r"\)")
_VLLM_EST = LazyPattern(r"estimated maximum model length is (\d{1,18})")
_SGLANG_FRACTION = LazyPattern(r"mem_fraction_static=(\d{1,18}(?:\.\d{1,12})?)")

# SGLang while serving (mem_cache/common.py, the scheduler): the KV pool or the request slots
# ran out; the scheduler dies and SIGQUITs the server. The numbers follow on lines of their own:
#   RuntimeError: Prefill out of memory. Try to lower your batch size.
#   Try to allocate 8192 tokens.
#   Available full tokens: 8070656 (full_available_size=7936 + full_evictable_size_=8062720)
# (older: "Avaliable tokens: 2048" then "self.token_to_kv_pool_allocator.available_size()=2048"),
#   RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for
#     `--max-running-requests`. self.req_to_token_pool.available_size()=1, num_reqs=2,
_SGLANG_POOL = ("Prefill out of memory", "Decode out of memory")
_SGLANG_TRY = LazyPattern(r"Try to allocate (\d{1,18}) tokens")
_SGLANG_AVAIL = LazyPattern(r"Ava(?:il|li)able (?:full )?tokens: ?(\d{1,18})")
_SGLANG_SLOTS = LazyPattern(r"available_size\(\)=(\d{1,18}), num_reqs=(\d{1,18})")
# Lines that continue SGLang's multi-line pool message after its exception line.
CONTINUATION_PREFIXES = ("Try to allocate ", "Available full tokens", "Available tokens",
                         "Avaliable tokens", "Available mamba", "self.token_to_kv_pool",
                         "self.tree_cache.", "self.req_to_token_pool")

ENGINE_MARKERS = (
    "Free memory on device",
    "No available memory for the cache blocks",
    "KV cache is needed, which is larger than the available KV cache memory",
    "Not enough memory. Please try to increase --mem-fraction-static",
    *_SGLANG_POOL,
    "alloc_req_slots runs out of memory",
)


def has_continuation(text: str) -> bool:
    """An engine message whose numbers come on the lines after it (SGLang's pool errors)."""
    return any(m in text for m in _SGLANG_POOL)


def parse_engine_oom(text: str) -> Fields | None:
    """Fields of a vLLM / SGLang start-up memory error, or None."""
    if "Free memory on device" in text:
        m = _VLLM_FREE.search(text)
        if not m:
            return None
        unit = m.group(4)
        return [
            ("engine", "vllm"), ("reason", "free-memory-at-start"), ("device", m.group(1) or None),
            ("free", size_to_bytes(m.group(2), unit)), ("total", size_to_bytes(m.group(3), unit)),
            ("utilization", float(m.group(5))), ("desired", size_to_bytes(m.group(6), m.group(7))),
        ]
    if "No available memory for the cache blocks" in text:
        return [("engine", "vllm"), ("reason", "no-cache-blocks")]
    if "KV cache is needed, which is larger than the available KV cache memory" in text:
        m = _VLLM_KV.search(text)
        est = _VLLM_EST.search(text)
        fields: Fields = [("engine", "vllm"), ("reason", "kv-cache-too-small")]
        if m:
            fields += [("max_model_len", int(m.group(1))),
                       ("needed", size_to_bytes(m.group(2), m.group(3))),
                       ("available", size_to_bytes(m.group(4), m.group(5)))]
        fields.append(("estimated_max_len", int(est.group(1)) if est else None))
        return fields
    for marker in _SGLANG_POOL:
        if marker in text:
            tried, avail = _SGLANG_TRY.search(text), _SGLANG_AVAIL.search(text)
            return [("engine", "sglang"), ("reason", marker.split()[0].lower() + "-out-of-memory"),
                    ("phase", "serving"), ("tokens_requested", int(tried.group(1)) if tried else None),
                    ("tokens_available", int(avail.group(1)) if avail else None)]
    if "alloc_req_slots runs out of memory" in text:
        m = _SGLANG_SLOTS.search(text)
        return [("engine", "sglang"), ("reason", "req-slots"), ("phase", "serving"),
                ("slots_available", int(m.group(1)) if m else None),
                ("slots_requested", int(m.group(2)) if m else None)]
    if "Not enough memory. Please try to increase --mem-fraction-static" in text:
        m = _SGLANG_FRACTION.search(text)
        return [("engine", "sglang"), ("reason", "mem-fraction-static"),
                ("mem_fraction_static", float(m.group(1)) if m else None)]
    return None


def engine_oom_summary(fields: dict) -> str:
    reason = fields.get("reason")
    if reason == "free-memory-at-start":
        device = f" on {fields['device']}" if fields.get("device") else ""
        return (f"vLLM could not start: {pytorch_bytes(fields.get('free'))} free of "
                f"{pytorch_bytes(fields.get('total'))}{device}, gpu_memory_utilization "
                f"{fields.get('utilization')} wants {pytorch_bytes(fields.get('desired'))}")
    if reason == "no-cache-blocks":
        return "vLLM could not start: no GPU memory left for the KV cache blocks"
    if reason == "kv-cache-too-small":
        text = "vLLM could not start: the KV cache does not fit one request of max_model_len"
        if fields.get("needed") is not None:
            text = (f"vLLM could not start: one request of max_model_len {fields.get('max_model_len')}"
                    f" needs {pytorch_bytes(fields['needed'])} of KV cache, "
                    f"{pytorch_bytes(fields.get('available'))} available")
        return text
    if reason in ("prefill-out-of-memory", "decode-out-of-memory"):
        step = reason.split("-")[0]
        text = f"SGLang KV cache pool full during {step}"
        if fields.get("tokens_requested") is not None:
            text += f": {fields['tokens_requested']} tokens wanted"
            if fields.get("tokens_available") is not None:
                text += f", {fields['tokens_available']} available"
        return text + "; the scheduler exits"
    if reason == "req-slots":
        return (f"SGLang out of request slots: {fields.get('slots_requested')} wanted, "
                f"{fields.get('slots_available')} free; lower --max-running-requests")
    frac = fields.get("mem_fraction_static")
    return "SGLang could not start: not enough memory for the KV cache pool" + (
        f" (mem_fraction_static={frac})" if frac is not None else "")


# -- Ray's memory monitor (host memory) --------------------------------------------------------------
# The raylet kills a worker when the node's memory use passes RAY_memory_usage_threshold (0.95 by
# default). The kill is reported in several places, with the same detail text:
#   ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
#   Memory on the node (IP: 10.0.0.12, ID: 3a4b...) where the task (task ID: ..., name=WorkerDict.
#     actor_rollout_compute_log_prob, pid=5391, memory used=49.21GB) was running was 61.02GB /
#     62.80GB (0.971693), which exceeds the memory usage threshold of 0.95. Ray killed this worker
#     (ID: 5c9a...) because it was the most recently scheduled task; ...
#   Top 10 memory users:
#   PID     MEM(GB) COMMAND
#   5391    49.21   ray::WorkerDict.actor_rollout_compute_log_prob
#   Refer to the documentation on how to address the out of memory issue: ...
# Older releases say "where the task was running was ..." (no task details); newer ones "where the
# lease (lease ID: ...)" or "1 worker(s) were killed due to the node running low on memory. Memory
# on the node (...) was ... (0.954017), which exceeds the memory usage threshold of 0.950000; ...".
# The driver prints "A worker died or was killed while executing a task by an unexpected system
# error. ... Worker exit type: SYSTEM_ERROR Worker exit detail: Task was killed due to the node
# running low on memory." and the raylet, about once a minute, "N Workers (tasks / actors) killed
# due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: ..., IP: ...)".
# Ray divides bytes by 1024**3 and prints "GB"; size_to_bytes reads "GB" as GiB accordingly.
RAY_START_MARKERS = (
    "running low on memory",
    "killed due to memory pressure (OOM)",
    "Memory on the node (IP:",
    "NODE_OUT_OF_MEMORY",
)
# Lines that begin a new report: a second one after a complete report is a second kill.
_RAY_NEW_REPORT = ("A worker died or was killed", "failed due to oom", "killed due to memory pressure",
                   "OutOfMemoryError", "ActorDiedError", "exit_detail")
_RAY_DETAIL_MARKERS = RAY_START_MARKERS + (
    "Top 10 memory users",
    "MEM(GB)",
    "Ray killed this worker",
    "Refer to the documentation on how to address the out of memory",
    "Consider provisioning more memory",
    "The actor is dead because its worker process has died",
    "To adjust the eviction threshold",
)
_RAY_LINE_PREFIX = LazyPattern(r"^\s*(?:\(raylet(?:, ip=[^)]*)?\)\s*)?")
_RAY_ROW = LazyPattern(r"^\s*(\d{1,18})\s+(\d{1,18}(?:\.\d{1,12})?)\s+(\S.*)$")
_RAY_NODE = LazyPattern(r"Memory on the node \(IP: ([^,)\s]+)(?:, ID: (\w+))?\)")
_RAY_USAGE = LazyPattern(r"\bwas " + _NUM + r" ?([KMGT]i?B) / " + _NUM + r" ?([KMGT]i?B) "
                        r"\(" + _NUM + r"\)(?:, which exceeds the memory usage threshold of "
                        r"(\d{1,18}(?:\.\d{1,12})?))?")
_RAY_TASK = LazyPattern(r"where the (?:task|lease|actor) \(\w+ ID: [^,]*, name=([^,]*), pid=" + _INT + r", "
                       r"memory used=(\d{1,18}(?:\.\d{1,12})?) ?([KMGT]i?B)\)")
_RAY_WORKER = LazyPattern(r"Ray killed this worker \(ID: (\w+)\)")
_RAY_KILLED = LazyPattern(r"(?<!\d)" + _INT + r" (?:Workers \(tasks / actors\) killed due to memory pressure|"
                         r"worker\(s\) were killed due to the node running low on memory)")
_RAY_SUMMARY_NODE = LazyPattern(r"at node \(ID: (\w+), IP: ([^)\s]+)\)")
_RAY_FAILED_TASK = LazyPattern(r"Task (\S+) failed due to oom")


def ray_line_body(line: str) -> str:
    """The line without Ray's "(raylet) " prefix and surrounding blanks."""
    return _RAY_LINE_PREFIX.sub("", line, count=1).strip()


def is_ray_oom_start(line: str) -> bool:
    """A line that starts (or is) a report of Ray's OOM killer."""
    return any(m in line for m in RAY_START_MARKERS)


def is_ray_new_report(line: str) -> bool:
    """A line that begins a report of its own (a second kill after a complete report)."""
    return is_ray_oom_start(line) and any(m in line for m in _RAY_NEW_REPORT)


def is_ray_table_line(line: str) -> bool:
    """The header or a row of the "Top 10 memory users" table."""
    body = ray_line_body(line)
    return "MEM(GB)" in body or bool(_RAY_ROW.match(body))


def is_ray_detail(line: str, after_table: bool = False) -> bool:
    """A line that continues a Ray OOM report (the detail, the memory table, the advice).

    ``after_table``: the previous line of the report was the table's header or a row, so a bare
    "pid  size  command" row belongs too.
    """
    body = ray_line_body(line)
    if any(m in body for m in _RAY_DETAIL_MARKERS):
        return True
    return after_table and bool(_RAY_ROW.match(body))


def parse_ray_oom(text: str) -> Fields | None:
    """Fields of a Ray OOM-killer report (one or more lines), or None when ``text`` holds none.

    ``form``: exception (ray.exceptions.OutOfMemoryError / ActorDiedError), worker-died (the
    driver's "A worker died or was killed ..."), raylet-task ("Task X failed due to oom"),
    summary (the raylet's periodic "N Workers ... killed due to memory pressure"), detail (only
    the "Memory on the node" text). Sizes in bytes; ``usage_fraction`` and ``threshold`` as Ray
    prints them; ``process_usage`` lists the "Top 10 memory users" table as ``pid:bytes``.
    """
    if not is_ray_oom_start(text):
        return None
    text = text[:65536]
    if "OutOfMemoryError" in text or "ActorDiedError" in text or "ray.exceptions." in text:
        form = "exception"
    elif "A worker died or was killed" in text:
        form = "worker-died"
    elif "failed due to oom" in text:
        form = "raylet-task"
    elif "killed due to memory pressure" in text:
        form = "summary"
    else:
        form = "detail"
    fields: Fields = [("form", form)]
    node = _RAY_NODE.search(text)
    summary_node = _RAY_SUMMARY_NODE.search(text)
    if node:
        fields += [("node_ip", node.group(1)), ("node_id", node.group(2))]
    elif summary_node:
        fields += [("node_ip", summary_node.group(2)), ("node_id", summary_node.group(1))]
    else:
        fields += [("node_ip", None), ("node_id", None)]
    usage = _RAY_USAGE.search(text)
    if usage:
        fields += [("used", size_to_bytes(usage.group(1), usage.group(2))),
                   ("total", size_to_bytes(usage.group(3), usage.group(4))),
                   ("usage_fraction", float(usage.group(5))),
                   ("threshold", float(usage.group(6)) if usage.group(6) else None)]
    else:
        fields += [("used", None), ("total", None), ("usage_fraction", None), ("threshold", None)]
    task = _RAY_TASK.search(text)
    failed = _RAY_FAILED_TASK.search(text)
    if task:
        fields += [("task_name", task.group(1).strip()[:200] or None), ("task_pid", int(task.group(2))),
                   ("task_memory", size_to_bytes(task.group(3), task.group(4)))]
    else:
        fields += [("task_name", failed.group(1)[:200] if failed else None), ("task_pid", None),
                   ("task_memory", None)]
    worker = _RAY_WORKER.search(text)
    fields.append(("worker_id", worker.group(1) if worker else None))
    killed = _RAY_KILLED.search(text)
    fields.append(("workers_killed", int(killed.group(1)) if killed else None))
    rows = _ray_table(text)
    if rows:
        fields += [("process_usage", ",".join(f"{pid}:{used}" for pid, used, _ in rows)),
                   ("others_count", len(rows)), ("others_bytes", sum(used for _, used, _ in rows))]
    return fields


def _ray_table(text: str) -> list[tuple[int, int, str]]:
    """Rows of the "Top 10 memory users" table: (pid, bytes, command)."""
    at = text.find("MEM(GB)")
    if at < 0:
        return []
    rows = []
    for line in text[at:].splitlines()[1:24]:
        m = _RAY_ROW.match(ray_line_body(line))
        if not m:
            if rows:
                break
            continue
        rows.append((int(m.group(1)), size_to_bytes(m.group(2), "GB"), m.group(3)[:120]))
        if len(rows) >= 16:
            break
    return rows


def ray_oom_summary(fields: dict) -> str:
    """"Ray OOM killer on node 10.0.0.12: host memory 61.02 GiB of 62.80 GiB (0.97 > 0.95); ..."."""
    node = f" on node {fields['node_ip']}" if fields.get("node_ip") else ""
    if fields.get("form") == "summary" and fields.get("used") is None:
        count = fields.get("workers_killed")
        who = f"{count} worker{'s' if count != 1 else ''}" if count is not None else "workers"
        return f"Ray OOM killer{node}: {who} killed due to host memory pressure"
    text = f"Ray OOM killer{node}"
    if fields.get("used") is not None:
        text += (f": host memory {pytorch_bytes(fields['used'])} of {pytorch_bytes(fields.get('total'))}")
        frac, limit = fields.get("usage_fraction"), fields.get("threshold")
        if frac is not None and limit is not None:
            text += f" ({frac:.2f} > threshold {limit:g})"
    else:
        text += ": the node ran low on host memory"
    name, pid = fields.get("task_name"), fields.get("task_pid")
    if name or pid is not None:
        what = name or "a worker"
        extra = [f"pid {pid}"] if pid is not None else []
        if fields.get("task_memory") is not None:
            extra.append(pytorch_bytes(fields["task_memory"]))
        text += f"; killed {what}" + (f" ({', '.join(extra)})" if extra else "")
    return text[:300]
