"""Frozen, timestamped value types shared by every layer.

Nothing here does I/O. Sources produce these, the snapshot fold combines them, diagnosis reads
them and the UI renders them. Times are POSIX seconds (float); sizes are bytes; percentages are
0-100. A field that a device or the OS could not give us is ``None`` (shown as N/A), never a
made-up zero.
"""

from __future__ import annotations

from typing import Any

import msgspec

# Reading statuses: a failure outside is a state, never an exception.
OK = "ok"
UNAVAILABLE = "unavailable"  # the thing is not there (no driver, no py-spy, no such file)
DENIED = "denied"  # it is there but we may not read it (ptrace, /proc permissions)
TIMEOUT = "timeout"
ERROR = "error"
STATUSES = (OK, UNAVAILABLE, DENIED, TIMEOUT, ERROR)

# Symptom severities, least to most severe.
SEVERITIES = ("info", "warning", "critical")


def severity_rank(severity: str) -> int:
    """Order of a severity (unknown ones sort lowest)."""
    try:
        return SEVERITIES.index(severity)
    except ValueError:
        return -1


def replace(value: Any, /, **changes: Any) -> Any:
    """A copy of ``value`` with ``changes``: the model's types are msgspec Structs (built at
    import many times faster than dataclasses, which a local run's start-up pays for every
    class), other value types of the project are dataclasses. One call for both."""
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.replace(value, **changes)
    import dataclasses

    return dataclasses.replace(value, **changes)


class Reading(msgspec.Struct, frozen=True):
    """One poll of one source.

    ``source`` names the source kind ("gpus", "procs", ...); ``payload`` is that kind's value
    type (``GpuPoll`` for gpus, ``ProcPoll`` for procs) or ``None`` when the poll failed.
    ``message`` says what went wrong in one line and ``remedy`` what the user can do about it.
    """

    source: str
    timestamp: float
    status: str
    payload: Any = None
    message: str = ""
    remedy: str = ""


class GpuProcess(msgspec.Struct, frozen=True):
    """A process that NVML reports on a GPU. ``pid`` is in NVML's (the host's) PID namespace."""

    pid: int
    used_memory: int | None = None  # bytes
    local: bool = True  # False: this PID does not exist in our PID namespace


class GpuSample(msgspec.Struct, frozen=True):
    index: int
    name: str
    uuid: str
    util: float | None = None  # GPU utilisation, %
    mem_util: float | None = None  # memory controller utilisation, %
    mem_used: int | None = None  # bytes
    mem_total: int | None = None  # bytes
    power_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    sm_clock_mhz: int | None = None
    throttle_reasons: tuple[str, ...] | None = None  # None: not supported
    ecc_errors: int | None = None  # volatile uncorrected; None: not supported
    processes: tuple[GpuProcess, ...] = ()
    simulated: bool = False
    error: str = ""  # this device failed as a whole (e.g. "GPU is lost")

    @property
    def mem_percent(self) -> float | None:
        if self.mem_used is None or not self.mem_total:
            return None
        return 100.0 * self.mem_used / self.mem_total


class GpuPoll(msgspec.Struct, frozen=True):
    """Payload of a "gpus" reading."""

    gpus: tuple[GpuSample, ...] = ()
    driver_version: str | None = None
    simulated: bool = False
    # PIDs NVML reports that do not exist here: the job runs in another PID namespace.
    foreign_pids: tuple[int, ...] = ()


class ProcInfo(msgspec.Struct, frozen=True):
    """One process of the watched job, as psutil and /proc show it."""

    pid: int
    ppid: int | None = None
    name: str = ""
    cmdline: tuple[str, ...] = ()
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    role: str = ""  # e.g. "trainer", "WorkerDict", "TaskRunner", "vllm"
    cpu_percent: float | None = None
    rss: int | None = None  # bytes
    state: str = ""  # psutil status: running, sleeping, disk-sleep, zombie, ...
    num_threads: int | None = None
    create_time: float | None = None
    gpu_index: int | None = None
    gpu_from: str = ""  # "nvml" | "env" | "" (how gpu_index was found)
    debug_env: tuple[tuple[str, str], ...] = ()  # NCCL_DEBUG & co., secrets redacted
    stdout_path: str | None = None
    stderr_path: str | None = None
    partial: bool = False  # some fields could not be read
    partial_reason: str = ""
    # The node it runs on, in a view of many nodes (the name rltui knows the node by); "" on
    # one node. Pids repeat across nodes: (host, pid) names a process.
    host: str = ""
    # NODE_RANK (torchrun, Lightning) else GROUP_RANK (torchrun's elastic agent): which node of
    # the job this is, for a global rank when RANK itself is missing.
    node_rank: int | None = None
    # What ties it to the other processes of its job (rltui.jobs): MASTER_ADDR, MASTER_PORT,
    # TORCHELASTIC_RUN_ID, TORCHELASTIC_ERROR_FILE, SLURM_JOB_ID... (parsing.procinfo.JOB_ENV)
    job_env: tuple[tuple[str, str], ...] = ()
    launcher: str = ""  # "torchrun" | "deepspeed" | "accelerate" when it launches ranks

    def env(self, key: str) -> str | None:
        for k, v in self.job_env:
            if k == key:
                return v
        return None

    @property
    def is_zombie(self) -> bool:
        return self.state == "zombie"


class ProcPoll(msgspec.Struct, frozen=True):
    """Payload of a "procs" reading."""

    procs: tuple[ProcInfo, ...] = ()
    how: str = ""  # how the job was found, e.g. "env RANK/LOCAL_RANK", "--pid 12 13"
    denied: int = 0  # processes we could not inspect at all


class DepartedRank(msgspec.Struct, frozen=True):
    """A process of the job that was seen earlier and is gone (or a zombie) now."""

    pid: int
    rank: int | None
    last_seen: float
    gone_since: float  # first snapshot time at which it was missing
    reason: str = "exited"  # "exited" | "zombie" | "missing from WORLD_SIZE"
    info: ProcInfo | None = None  # the process as last seen alive (GPU, role, log paths)


class Job(msgspec.Struct, frozen=True):
    """The processes of one training job on the node (or across nodes), told apart from the
    other jobs there (rltui.jobs). ``members`` name processes as (host, pid): pids repeat from
    node to node. Departed processes stay members: a job is followed by its processes, not by
    its launcher's children."""

    id: str  # stable while the job lives: "<name>-<pid of its launcher or first process>"
    name: str  # the script or module the ranks run ("train", "main_ppo")
    members: tuple[tuple[str, int], ...] = ()
    ranks: tuple[int, ...] = ()  # ranks of live and departed processes
    world_size: int | None = None
    launcher_pid: int | None = None
    launcher_cmdline: tuple[str, ...] = ()  # redacted
    launcher: str = ""  # torchrun | deepspeed | accelerate | "" (none seen)
    tie: str = ""  # what holds the processes together, for people: "MASTER 127.0.0.1:29500"
    hosts: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # every tie (rltui.jobs.ties) of its processes

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(pid for _, pid in self.members)


class SourceState(msgspec.Struct, frozen=True):
    """What the header shows per source: status and the age of its last reading."""

    name: str
    status: str
    last_reading: float | None = None  # time of the newest reading, any status
    last_ok: float | None = None
    message: str = ""
    remedy: str = ""


class NodeSnapshot(msgspec.Struct, frozen=True):
    """Everything known about the node at ``timestamp`` ("now" for diagnosis)."""

    timestamp: float
    host: str = ""
    job: str = ""
    gpus: tuple[GpuSample, ...] = ()
    gpu_simulated: bool = False
    foreign_gpu_pids: tuple[int, ...] = ()
    procs: tuple[ProcInfo, ...] = ()
    departed: tuple[DepartedRank, ...] = ()
    sources: tuple[SourceState, ...] = ()
    logs: tuple[LogFileState, ...] = ()
    unmatched_logs: tuple[str, ...] = ()  # --log globs that match nothing yet
    now_source: str = ""  # what "now" is when it is not the monitor's clock (e.g. "--now")
    # The latest rounds of py-spy dumps, oldest first (bounded): successive samples tell
    # stuck stacks from moving ones.
    stacks: tuple[StackPoll, ...] = ()
    # The ranks' Flight Recorder dumps last read (files, torch's debug server), when any
    flight_recorder: FrPoll | None = None
    # The jobs its processes make (rltui.jobs), in the order they were first seen; a snapshot
    # split into one job's view (jobs.partition) holds that job alone.
    jobs: tuple[Job, ...] = ()

    def source(self, name: str) -> SourceState | None:
        for state in self.sources:
            if state.name == name:
                return state
        return None

    @property
    def live_procs(self) -> tuple[ProcInfo, ...]:
        return tuple(p for p in self.procs if not p.is_zombie)


class EvidenceLink(msgspec.Struct, frozen=True):
    """What one evidence line of a symptom names, so the app can open it (enter on the line):
    ``log-line`` (``path`` at ``line``), ``stack-class`` (``stack_class``, the index in the
    stack report's classes, ``#1`` being 0; ``ranks`` its members), ``rank`` (``ranks``) or
    ``frame`` (the source file ``path`` at ``line``, ``name`` the function). Built by the rules
    beside the text (rltui.diagnosis.evidence), never parsed back out of it."""

    evidence: int  # the index of the line in Symptom.evidence
    kind: str  # log-line | stack-class | rank | frame
    path: str = ""
    line: int = 0
    ranks: tuple[int, ...] = ()
    stack_class: int | None = None
    name: str = ""


class Symptom(msgspec.Struct, frozen=True):
    """A finding. ``id`` is a stable public string (see docs/symptoms.md)."""

    id: str
    severity: str  # one of SEVERITIES
    title: str
    ranks: tuple[int, ...] = ()
    evidence: tuple[str, ...] = ()
    next_steps: tuple[str, ...] = ()
    since: float | None = None
    job: str = ""  # the id of the job it is about (rltui.jobs); "" when not one job's
    evidence_links: tuple[EvidenceLink, ...] = ()  # by line index, lines naming no target left out


class Incident(msgspec.Struct, frozen=True):
    """Symptoms with one cause (rltui.diagnosis.incidents): the root cause first, what it led
    to after it. ``title`` says what happened ("rank 3 crashed (RuntimeError at
    trainer.py:130); ranks 0-2 wait for it in all_reduce")."""

    root_cause: str  # a symptom id
    symptoms: tuple[str, ...]  # ids, the root cause first
    title: str
    explanation: str
    severity: str
    job: str = ""
    ranks: tuple[int, ...] = ()  # the root cause's ranks
    since: float | None = None


class Diagnosis(msgspec.Struct, frozen=True):
    timestamp: float
    verdict: str  # healthy | warning | critical
    symptoms: tuple[Symptom, ...] = ()  # most severe first
    notes: tuple[str, ...] = msgspec.field(default=())  # what could not be checked, and why
    incidents: tuple[Incident, ...] = ()  # the symptoms grouped by cause, worst first


# -- logs ------------------------------------------------------------------------------------------
# A log source reads files incrementally; the pure parsers turn each new line into LogLine,
# StepRecord and LogEvent values; the snapshot fold keeps a bounded LogFileState per file.

# Every format name the step reader reports: the registry's (rltui.frameworks, which imports
# this module and so cannot be imported here; a test holds the two equal) plus these two.
LOG_FORMATS = ("verl", "areal", "openrlhf", "torchtitan", "megatron", "deepspeed", "hf",
               "custom", "unknown")

# Normalised names of the step metrics that matter in triage (parsers map framework keys here).
TRIAGE_METRICS = ("loss", "reward", "entropy", "grad_norm", "step_time", "throughput",
                  "response_length", "rollout_probs_diff")


class LogLine(msgspec.Struct, frozen=True):
    """One line as shown in the log pane: noise stripped (ANSI, tqdm redraws, prefixes)."""

    line_no: int  # 1-based line number in the file (since the last rotation/truncation)
    text: str
    level: str = ""  # "error" | "warning" | "" ; from the line's own level word or content
    rank: int | None = None  # from a torchrun ``[rankN]:`` prefix on this line
    cut: bool = False  # the line was longer than the limit and was cut


class StepRecord(msgspec.Struct, frozen=True):
    """One training step as a log line reported it."""

    step: int
    line_no: int
    arrival: float  # when rltui read the line
    time: float | None = None  # the line's own timestamp, when it has one
    total: int | None = None  # total steps, when the line says (AReaL "Step 3/100")
    metrics: tuple[tuple[str, float], ...] = ()  # (name in TRIAGE_METRICS, value)

    @property
    def when(self) -> float:
        return self.time if self.time is not None else self.arrival

    def metric(self, name: str) -> float | None:
        for key, value in self.metrics:
            if key == name:
                return value
        return None


class LogEvent(msgspec.Struct, frozen=True):
    """Something in a log that means something: a traceback, an OOM, a timeout, a banner.

    ``kind`` is one of: traceback, failure (AReaL "Training failed with exception"), cuda-oom,
    engine-oom (vLLM/SGLang memory errors at start),
    nccl-timeout, child-failed (torchrun ChildFailedError), completion (a framework's end
    banner). ``fields`` holds the parsed numbers (bytes, ranks, seq numbers...) by name.
    """

    kind: str
    line_no: int
    end_line: int
    arrival: float
    summary: str  # one line for people
    text: str = ""  # the whole event (bounded)
    time: float | None = None
    fields: tuple[tuple[str, str | int | float | None], ...] = ()

    def field(self, name: str) -> str | int | float | None:
        for key, value in self.fields:
            if key == name:
                return value
        return None


class LogUpdate(msgspec.Struct, frozen=True):
    """One file's news in one poll of the log source."""

    path: str
    status: str  # a Reading status: ok, unavailable (missing), denied, error
    rank: int | None = None
    format: str = "unknown"  # one of LOG_FORMATS
    size: int | None = None
    lines: tuple[LogLine, ...] = ()
    steps: tuple[StepRecord, ...] = ()
    events: tuple[LogEvent, ...] = ()
    message: str = ""
    reset: bool = False  # rotated or truncated: line numbers start over
    pid: int | None = None  # the job process writing it, when found from its stdout/stderr
    # A multi-GB file is opened from its end: until the lines before the read window are
    # counted, line numbers count from the window's first line (line_base_known False). When
    # the count is done, one update carries line_shift, to be added to every line number
    # already handed out for this file.
    line_base_known: bool = True
    line_shift: int = 0
    found: str = ""  # how it was found, when not as a process's stdout/stderr or --log
    tie: str = ""  # the job it belongs to (a rltui.jobs tie), for a log no process writes now
    truncated: bool = False  # this update ends a generation truncated in place (copytruncate)


class LogPoll(msgspec.Struct, frozen=True):
    """Payload of a "logs" reading."""

    files: tuple[LogUpdate, ...] = ()
    unmatched: tuple[str, ...] = ()  # --log globs that match nothing (yet)


class LogFileState(msgspec.Struct, frozen=True):
    """What the snapshot knows about one log file."""

    path: str
    status: str = OK
    message: str = ""
    rank: int | None = None
    pid: int | None = None
    format: str = "unknown"
    lines_seen: int = 0  # over every generation of the file (rotations, truncations)
    truncations: int = 0  # truncations in place noticed (each one also a message)
    steps_seen: int = 0
    last_step: int | None = None
    last_step_time: float | None = None  # line time when present, else arrival
    last_step_arrival: float | None = None
    total_steps: int | None = None
    recent_steps: tuple[StepRecord, ...] = ()  # bounded, oldest first
    events: tuple[LogEvent, ...] = ()  # bounded, oldest first
    last_line_arrival: float | None = None
    line_base_known: bool = True
    host: str = ""  # across nodes: the node the file is on (its path is then host:path)
    found: str = ""  # how rltui found it, when not as a process's stdout/stderr or --log
    tie: str = ""  # the job it belongs to (a rltui.jobs tie), for a log no process writes now


# -- stacks ----------------------------------------------------------------------------------------
# py-spy dumps of the job's processes, parsed into these values (rltui.parsing.pyspy) and grouped
# STAT-style into equivalence classes (rltui.diagnosis.stacks).

class Frame(msgspec.Struct, frozen=True):
    """One frame as py-spy reports it. ``line`` 0 means no line information."""

    name: str
    filename: str  # py-spy's short filename when it has one, else the full path
    line: int = 0
    module: str = ""
    native: bool = False  # a C/C++ frame (py-spy --native)


class ThreadStack(msgspec.Struct, frozen=True):
    thread_id: int
    name: str = ""  # thread name ("MainThread"); empty when py-spy had none
    status: str = "unknown"  # idle | active | active+gil | unknown
    frames: tuple[Frame, ...] = ()  # innermost first, as py-spy prints them

    @property
    def active(self) -> bool:
        return self.status.startswith("active")


# Dumps read from text that named no pid (a paste of frames, "6 processes are in:") are numbered
# from here, so that two of them are two processes; no system hands out pids this large.
ANONYMOUS_PID = 1 << 40
CRASHED = "crashed"


class ProcessDump(msgspec.Struct, frozen=True):
    """One process's stacks at one moment, from a live dump or a saved file."""

    pid: int
    rank: int | None = None
    threads: tuple[ThreadStack, ...] = ()
    python_version: str = ""
    command: str = ""
    source: str = ""  # the file it was read from, or "live"
    timestamp: float | None = None
    # ok | exited (died during the dump) | timeout | denied | error | crashed (the stacks were
    # printed as the process died: faulthandler's "Fatal Python error: ...", in ``message``)
    status: str = OK
    message: str = ""
    duration: float | None = None  # seconds py-spy took for this process
    role: str = ""  # what the text said the process is: a Ray actor, "sglang scheduler TP3"


class StackPoll(msgspec.Struct, frozen=True):
    """Payload of a "stacks" reading: one round of py-spy dumps over the job's processes.

    The reading's status sums the round up: ``ok`` when at least one process was dumped,
    ``unavailable`` when py-spy is missing, ``denied`` when ptrace is refused for every process
    (one state with one remedy, not an error per rank). Each dump carries its own status.
    """

    dumps: tuple[ProcessDump, ...] = ()
    started: float = 0.0  # POSIX time the round started
    finished: float = 0.0
    trigger: str = "periodic"  # periodic | on-demand
    nonblocking: bool = True  # periodic rounds never pause the job; on-demand ones may
    native: bool = False
    command: str = ""  # the py-spy command line, with {pid} for the process id


# -- PyTorch's Flight Recorder ----------------------------------------------------------------------

class FrEntry(msgspec.Struct, frozen=True):
    """One collective (or point-to-point op) as a rank's Flight Recorder recorded it.

    ``group`` is the process group's name ("0" is the default group), ``desc`` its description
    ("default_pg", a user's group_desc; "" for torch's "undefined"); ``seq`` the group's
    collective sequence id (``p2p_seq`` for send/recv); ``op`` the operation without its
    backend ("all_reduce", "send 0->1"). ``done`` says the rank finished it (retired, or state
    completed); times are POSIX nanoseconds, None where the dump has none."""

    group: str
    seq: int
    op: str
    desc: str = ""
    backend: str = ""
    p2p_seq: int = 0
    is_p2p: bool = False
    record_id: int = 0
    op_id: int = -1  # the group's count of every op, send/recv included (pg_status counts it)
    state: str = ""
    done: bool = False
    input_sizes: tuple[tuple[int, ...], ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    dtypes: tuple[str, ...] = ()
    created_ns: int | None = None
    started_ns: int | None = None
    frames: tuple[Frame, ...] = ()
    timeout_ms: int | None = None


class FrGroupState(msgspec.Struct, frozen=True):
    """A group's counters in one rank's dump (``pg_status``; -1: none yet). They count the
    group's ops (``op_id``: send/recv included), not its collectives' sequence ids."""

    group: str
    last_enqueued: int = -1
    last_started: int = -1
    last_completed: int = -1


class FrGroup(msgspec.Struct, frozen=True):
    """A process group as ``pg_config`` describes it; ``ranks`` empty when the dump does not
    say (gloo's dumps never do)."""

    group: str
    desc: str = ""
    ranks: tuple[int, ...] = ()


class FrDump(msgspec.Struct, frozen=True):
    """One rank's Flight Recorder dump: where it came from and what it holds.

    ``entries`` are the records the diagnosis reads, oldest first: among the newest ones
    (rltui.parsing.flightrec.TAIL), every one still pending and each group's newest finished
    one; ``total`` counts the records in the dump; the groups' counters are the whole dump's. ``written`` is when the dump was taken (the file's
    modification time, or the time it was fetched); ``pid`` the process whose environment
    named the file, when rltui found it so."""

    rank: int | None
    source: str
    status: str = OK  # ok | error (unreadable: ``message`` says why)
    message: str = ""
    version: str = ""
    entries: tuple[FrEntry, ...] = ()
    groups: tuple[FrGroup, ...] = ()
    states: tuple[FrGroupState, ...] = ()
    total: int = 0  # records in the dump
    written: float | None = None
    pid: int | None = None
    host: str = ""


class FrPoll(msgspec.Struct, frozen=True):
    """Payload of a "flight_recorder" reading: the dumps read, what could not be read, and
    whether the ranks record at all (``enabled``: True/False from their environment, None
    when unknown)."""

    dumps: tuple[FrDump, ...] = ()
    problems: tuple[str, ...] = ()
    enabled: bool | None = None
    looked: tuple[str, ...] = ()  # where dumps were looked for (paths, globs, URLs)
