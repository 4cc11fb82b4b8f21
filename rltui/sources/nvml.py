"""GPU readings from NVML. The only module that imports ``pynvml`` (package nvidia-ml-py).

NVML is initialised once and kept; every error it raises becomes a value: a field a device does
not support is ``None``, a lost GPU is a ``GpuSample`` with ``error`` set, and a node without a
driver is an ``unavailable`` reading with a remedy. ``pynvml`` is imported on the first poll, not
at import time, so commands that never look at GPUs stay fast.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rltui.model import DENIED, ERROR, OK, UNAVAILABLE, GpuPoll, GpuProcess, GpuSample, Reading

# NVML return codes (nvml.h). They are part of NVML's C interface and never change, so they live
# here rather than being read from the module, which may not even import.
_ERROR_UNINITIALIZED = 1
_ERROR_NO_PERMISSION = 4
_ERROR_DRIVER_NOT_LOADED = 9
_ERROR_LIBRARY_NOT_FOUND = 12
_ERROR_FUNCTION_NOT_FOUND = 13
_ERROR_GPU_IS_LOST = 15
_ERROR_RESET_REQUIRED = 16
_ERROR_LIB_RM_VERSION_MISMATCH = 18

# Errors after which a device answers nothing at all: the whole device becomes an error sample.
_DEVICE_GONE = frozenset({_ERROR_GPU_IS_LOST, _ERROR_RESET_REQUIRED})

# NVML's "value not available" for unsigned long long; older bindings pass it through instead of
# turning it into None (processes in a container often have no memory figure).
_VALUE_NOT_AVAILABLE = 2**64 - 1

# Clock event (throttle) reasons, in bit order: short name, constant suffix. Newer bindings name
# the constants nvmlClocksEventReason*, older ones nvmlClocksThrottleReason*; the bits are equal.
_REASONS = (
    ("gpu_idle", "GpuIdle"),
    ("applications_clocks", "ApplicationsClocksSetting"),
    ("sw_power_cap", "SwPowerCap"),
    ("hw_slowdown", "HwSlowdown"),
    ("sync_boost", "SyncBoost"),
    ("sw_thermal", "SwThermalSlowdown"),
    ("hw_thermal", "HwThermalSlowdown"),
    ("hw_power_brake", "HwPowerBrakeSlowdown"),
    ("display_clocks", "DisplayClockSetting"),
)

_CHECK_SMI = "Check that `nvidia-smi` works on this node."
_NO_DRIVER_REMEDY = (f"{_CHECK_SMI} If it does not, install or load the NVIDIA driver; in a "
                     "container, start it with GPU access (e.g. `docker run --gpus all`). "
                     "Process, log and stack views work without it.")
_FOREIGN_REMEDY = ("Run rltui inside the job's container, or start the container with "
                   "--pid=host, so GPU processes can be matched to ranks.")
_DEVICE_REMEDY = ("Check `nvidia-smi` and the kernel log (`dmesg`) for Xid errors; a lost GPU "
                  "usually needs a GPU or node reset.")


class _DeviceGone(Exception):
    """Raised inside a device read when the device as a whole stopped answering."""


@dataclass(slots=True)
class _Device:
    """What does not change while NVML stays initialised, read once per GPU."""

    handle: Any
    name: str
    uuid: str


def _proc_pid_exists(pid: int) -> bool:
    # GPU nodes run Linux; /proc shows exactly the PIDs of our own PID namespace.
    return os.path.exists(f"/proc/{pid}")


def _text(value: Any) -> str | None:
    # Bindings before 11.515 return bytes for names, UUIDs and versions.
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else milliwatts / 1000.0


def _float(value: Any) -> float | None:
    # Declared float in the model; a float also survives a JSON round trip unchanged.
    return None if value is None else float(value)


def _failure(exc: BaseException, retry_s: float) -> tuple[str, str, str]:
    """(status, message, remedy) for NVML failing as a whole: at init or when counting GPUs."""
    code = getattr(exc, "value", None)
    retry = f" rltui tries again every {retry_s:g} s."
    if code == _ERROR_LIBRARY_NOT_FOUND:
        return (UNAVAILABLE, "No NVIDIA driver or NVML library found: GPU data unavailable",
                _NO_DRIVER_REMEDY + retry)
    if code == _ERROR_DRIVER_NOT_LOADED:
        return (UNAVAILABLE, "NVIDIA driver not loaded: GPU data unavailable",
                _NO_DRIVER_REMEDY + retry)
    if code == _ERROR_NO_PERMISSION:
        return (DENIED, "No permission to query the GPUs through NVML: GPU data unavailable",
                "Run rltui as a user who may open /dev/nvidia* (try `nvidia-smi` as that "
                "user)." + retry)
    if code == _ERROR_LIB_RM_VERSION_MISMATCH:
        return (ERROR, "NVML library and NVIDIA driver versions differ: GPU data unavailable",
                "The driver was probably upgraded without a reboot; reboot the node or reload "
                "the nvidia kernel modules." + retry)
    return ERROR, f"NVML failed ({exc}): GPU data unavailable", _CHECK_SMI + retry


def _pid_list(pids: tuple[int, ...], shown: int = 5) -> str:
    head = ", ".join(str(p) for p in pids[:shown])
    return head + (", ..." if len(pids) > shown else "")


class NvmlSource:
    """Polls every GPU through NVML; see the module docstring for how failures look."""

    name = "gpus"

    def __init__(self, nvml: Any = None, pid_exists: Callable[[int], bool] | None = None,
                 clock: Callable[[], float] = time.time, retry_init_s: float = 30.0) -> None:
        self._nvml = nvml  # None: import pynvml on the first poll
        self._pid_exists = pid_exists or _proc_pid_exists
        self._clock = clock
        self._retry_init_s = retry_init_s
        # poll() runs on a worker thread while close() may come from the main thread.
        self._lock = threading.Lock()
        # Separate, so the process source never waits for a whole GPU poll.
        self._map_lock = threading.Lock()
        self._pid_map: dict[int, int] = {}
        self._ready = False
        self._next_init = float("-inf")
        self._failed: tuple[str, str, str] = (UNAVAILABLE, "NVML not initialised yet", "")
        self._devices: dict[int, _Device] = {}
        self._driver_version: str | None = None
        # Bound at init: the binding's error class, throttle getter and reason bits.
        self._error: type[BaseException] = Exception
        self._reasons_fn: Callable[[Any], int] | None = None
        self._reasons_fallback: Callable[[Any], int] | None = None
        self._reason_bits: tuple[tuple[int, str], ...] = ()
        self._temperature_args: tuple[int, ...] = ()
        self._clock_args: tuple[int, ...] = ()
        self._ecc_args: tuple[int, ...] = ()

    # -- public -------------------------------------------------------------------------------

    def poll(self) -> Reading:
        with self._lock:
            now = self._clock()
            if not self._ready and not self._init(now):
                status, message, remedy = self._failed
                return Reading(self.name, now, status, None, message, remedy)
            return self._poll(now)

    def gpu_pid_map(self) -> dict[int, int]:
        """Latest pid -> GPU index for GPU processes visible in our PID namespace (a copy)."""
        with self._map_lock:
            return dict(self._pid_map)

    def close(self) -> None:
        with self._lock:
            self._shutdown()

    # -- init and shutdown --------------------------------------------------------------------

    def _init(self, now: float) -> bool:
        # NVML init loads a library and opens every device: far too costly to retry every poll.
        if now < self._next_init:
            return False
        self._next_init = now + self._retry_init_s
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                self._failed = (UNAVAILABLE, "The nvidia-ml-py package is not installed: GPU "
                                "data unavailable", "pip install nvidia-ml-py")
                return False
            self._nvml = pynvml
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - any init failure means "no GPU data for now"
            self._failed = _failure(exc, self._retry_init_s)
            return False
        self._bind(nvml)
        self._ready = True
        try:
            self._driver_version = _text(nvml.nvmlSystemGetDriverVersion())
        except self._error:
            self._driver_version = None
        return True

    def _bind(self, nvml: Any) -> None:
        """Look up what the binding offers once, so a poll does no name lookups."""
        self._error = nvml.NVMLError
        events = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        throttle = getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        self._reasons_fn = events or throttle
        self._reasons_fallback = throttle if events else None
        bits = []
        for short, suffix in _REASONS:
            bit = getattr(nvml, "nvmlClocksEventReason" + suffix,
                          getattr(nvml, "nvmlClocksThrottleReason" + suffix, None))
            if bit:
                bits.append((bit, short))
        self._reason_bits = tuple(bits)
        self._temperature_args = (nvml.NVML_TEMPERATURE_GPU,)
        self._clock_args = (nvml.NVML_CLOCK_SM,)
        self._ecc_args = (nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC)

    def _shutdown(self) -> None:
        if self._ready:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - nothing useful to do about it on the way out
                pass
        self._ready = False
        self._devices.clear()
        self._driver_version = None
        with self._map_lock:
            self._pid_map = {}

    # -- one poll -----------------------------------------------------------------------------

    def _poll(self, now: float) -> Reading:
        try:
            count = self._nvml.nvmlDeviceGetCount()
        except self._error as exc:
            failure = _failure(exc, self._retry_init_s)
            if getattr(exc, "value", None) in (_ERROR_UNINITIALIZED, _ERROR_DRIVER_NOT_LOADED):
                # The driver went away under us: start over, at the retry pace.
                self._shutdown()
                self._next_init = now + self._retry_init_s
                self._failed = failure
            else:
                with self._map_lock:
                    self._pid_map = {}
            status, message, remedy = failure
            return Reading(self.name, now, status, None, message, remedy)

        gpus = tuple(self._sample(index) for index in range(count))
        pid_map: dict[int, int] = {}
        foreign: set[int] = set()
        for gpu in gpus:
            for proc in gpu.processes:
                if proc.local:
                    # A process on several GPUs is mapped to the first one, its usual device.
                    pid_map.setdefault(proc.pid, gpu.index)
                else:
                    foreign.add(proc.pid)
        with self._map_lock:
            self._pid_map = pid_map

        foreign_pids = tuple(sorted(foreign))
        messages, remedies = [], []
        failed = [g for g in gpus if g.error]
        if failed:
            detail = "; ".join(f"GPU {g.index}: {g.error}" for g in failed)
            messages.append(f"{len(failed)} of {count} GPUs failed ({detail})")
            remedies.append(_DEVICE_REMEDY)
        if foreign_pids:
            plural = "s" if len(foreign_pids) > 1 else ""
            messages.append(f"{len(foreign_pids)} GPU process(es) not visible here (PID{plural} "
                            f"{_pid_list(foreign_pids)}): the job probably runs in another PID "
                            "namespace (a container without the host PID namespace)")
            remedies.append(_FOREIGN_REMEDY)
        payload = GpuPoll(gpus=gpus, driver_version=self._driver_version,
                          foreign_pids=foreign_pids)
        return Reading(self.name, now, OK, payload, "; ".join(messages), " ".join(remedies))

    def _sample(self, index: int) -> GpuSample:
        try:
            device = self._devices.get(index) or self._open(index)
            return self._read(index, device)
        except _DeviceGone as exc:
            known = self._devices.get(index)
            return GpuSample(index=index, name=known.name if known else "",
                             uuid=known.uuid if known else "", error=str(exc))

    def _open(self, index: int) -> _Device:
        nvml = self._nvml
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except self._error as exc:
            if getattr(exc, "value", None) in _DEVICE_GONE:
                raise _DeviceGone(str(exc)) from None
            raise _DeviceGone(f"cannot open the device: {exc}") from None
        device = _Device(handle, _text(self._get(nvml.nvmlDeviceGetName, handle)) or "",
                         _text(self._get(nvml.nvmlDeviceGetUUID, handle)) or "")
        self._devices[index] = device
        return device

    def _get(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One NVML call; an error is None, unless the whole device is gone."""
        try:
            return fn(*args)
        except self._error as exc:
            if getattr(exc, "value", None) in _DEVICE_GONE:
                raise _DeviceGone(str(exc)) from None
            return None

    def _read(self, index: int, device: _Device) -> GpuSample:
        nvml, h, get = self._nvml, device.handle, self._get
        util = get(nvml.nvmlDeviceGetUtilizationRates, h)
        memory = get(nvml.nvmlDeviceGetMemoryInfo, h)
        reasons = self._reasons(h)
        return GpuSample(
            index=index,
            name=device.name,
            uuid=device.uuid,
            util=_float(util.gpu) if util is not None else None,
            mem_util=_float(util.memory) if util is not None else None,
            mem_used=memory.used if memory is not None else None,
            mem_total=memory.total if memory is not None else None,
            power_w=_watts(get(nvml.nvmlDeviceGetPowerUsage, h)),
            power_limit_w=_watts(get(nvml.nvmlDeviceGetEnforcedPowerLimit, h)),
            temperature_c=_float(get(nvml.nvmlDeviceGetTemperature, h, *self._temperature_args)),
            sm_clock_mhz=get(nvml.nvmlDeviceGetClockInfo, h, *self._clock_args),
            throttle_reasons=None if reasons is None else self._decode(reasons),
            ecc_errors=get(nvml.nvmlDeviceGetTotalEccErrors, h, *self._ecc_args),
            processes=self._processes(get(nvml.nvmlDeviceGetComputeRunningProcesses, h)),
        )

    def _reasons(self, handle: Any) -> int | None:
        if self._reasons_fn is None:
            return None
        try:
            return self._reasons_fn(handle)
        except self._error as exc:
            code = getattr(exc, "value", None)
            if code == _ERROR_FUNCTION_NOT_FOUND and self._reasons_fallback:
                # A new binding on a driver older than 535 lacks the "event" name: use the old.
                self._reasons_fn, self._reasons_fallback = self._reasons_fallback, None
                return self._reasons(handle)
            if code in _DEVICE_GONE:
                raise _DeviceGone(str(exc)) from None
            return None

    def _decode(self, mask: int) -> tuple[str, ...]:
        # Bits this table does not name (newer drivers add some) are left out, not guessed at.
        return tuple(short for bit, short in self._reason_bits if mask & bit)

    def _processes(self, infos: Any) -> tuple[GpuProcess, ...]:
        if not infos:
            return ()
        procs = []
        for info in infos:
            used = getattr(info, "usedGpuMemory", None)
            if used == _VALUE_NOT_AVAILABLE:
                used = None
            procs.append(GpuProcess(pid=info.pid, used_memory=used,
                                    local=self._pid_exists(info.pid)))
        return tuple(procs)
