"""A fake ``pynvml``: a ``FakeNvml`` instance stands in for the module.

Each ``FakeDevice`` can be told that any of its getters raises a given NVML error code, so one
test can make GPU 3 lose its power reading and GPU 5 fall off the bus while the others stay
healthy. Names and constant values are those of the real module (a test checks them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

GiB = 1024**3

NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1

_REASON_BITS = {
    "GpuIdle": 1, "ApplicationsClocksSetting": 2, "SwPowerCap": 4, "HwSlowdown": 8,
    "SyncBoost": 16, "SwThermalSlowdown": 32, "HwThermalSlowdown": 64,
    "HwPowerBrakeSlowdown": 128, "DisplayClockSetting": 256,
}
REASON_CONSTANTS = {prefix + suffix: bit for suffix, bit in _REASON_BITS.items()
                    for prefix in ("nvmlClocksEventReason", "nvmlClocksThrottleReason")}

_TEXT = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _TEXT.get(self.value, f"NVML error {self.value}")


@dataclass
class FakeProcess:
    pid: int
    usedGpuMemory: int | None = 4 * GiB  # noqa: N815 - the binding's attribute name


@dataclass
class FakeDevice:
    """One GPU. ``fail`` maps a getter key (see ``FakeNvml``) to the NVML error it raises;
    the key "*" makes every getter but "handle" fail."""

    name: str = "NVIDIA H100 80GB HBM3"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    util: int = 95
    mem_util: int = 40
    mem_used: int = 60 * GiB
    mem_total: int = 80 * GiB
    power_mw: int = 450_000
    power_limit_mw: int = 700_000
    temperature: int = 62
    sm_clock: int = 1980
    reasons: int = 0  # clock event reason bitmask
    ecc: int = 0  # volatile uncorrected
    processes: list[FakeProcess] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)


def healthy(n: int = 8) -> list[FakeDevice]:
    """``n`` healthy GPUs, one training process each (pid 1000 + index)."""
    return [FakeDevice(uuid=f"GPU-{i:08d}-0000-0000-0000-000000000000",
                       processes=[FakeProcess(1000 + i)]) for i in range(n)]


class FakeNvml:
    """Acts as the pynvml module. ``calls`` counts every API call, by name.

    ``missing`` hides attributes, as an older binding lacks them; ``legacy_strings`` returns
    bytes for names, UUIDs and the driver version, as bindings before 11.515 did.
    """

    def __init__(self, devices: list[FakeDevice] | None = None, *, init_error: int | None = None,
                 count_error: int | None = None, driver_version: str = "550.54.15",
                 driver_error: int | None = None, shutdown_error: int | None = None,
                 legacy_strings: bool = False, missing: frozenset[str] = frozenset()) -> None:
        self.devices = healthy() if devices is None else devices
        self.init_error = init_error
        self.count_error = count_error
        self.driver_version = driver_version
        self.driver_error = driver_error
        self.shutdown_error = shutdown_error
        self.legacy_strings = legacy_strings
        self.missing = missing
        self.initialised = False
        self.calls: Counter[str] = Counter()

    def __getattribute__(self, name: str):
        if name in object.__getattribute__(self, "missing"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    # -- helpers ----------------------------------------------------------------------------

    def _enter(self, call: str) -> None:
        self.calls[call] += 1
        if not self.initialised:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _dev(self, call: str, handle: FakeDevice, key: str) -> FakeDevice:
        self._enter(call)
        code = handle.fail.get(key, handle.fail.get("*"))
        if code is not None:
            raise NVMLError(code)
        return handle

    def _str(self, value: str) -> str | bytes:
        return value.encode() if self.legacy_strings else value

    # -- the module's API -------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised = False
        if self.shutdown_error is not None:
            raise NVMLError(self.shutdown_error)

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._enter("nvmlSystemGetDriverVersion")
        if self.driver_error is not None:
            raise NVMLError(self.driver_error)
        return self._str(self.driver_version)

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        if self.count_error is not None:
            raise NVMLError(self.count_error)
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeDevice:
        self._enter("nvmlDeviceGetHandleByIndex")
        device = self.devices[index]
        if "handle" in device.fail:
            raise NVMLError(device.fail["handle"])
        return device

    def nvmlDeviceGetName(self, h: FakeDevice) -> str | bytes:
        return self._str(self._dev("nvmlDeviceGetName", h, "name").name)

    def nvmlDeviceGetUUID(self, h: FakeDevice) -> str | bytes:
        return self._str(self._dev("nvmlDeviceGetUUID", h, "uuid").uuid)

    def nvmlDeviceGetUtilizationRates(self, h: FakeDevice) -> SimpleNamespace:
        d = self._dev("nvmlDeviceGetUtilizationRates", h, "utilization")
        return SimpleNamespace(gpu=d.util, memory=d.mem_util)

    def nvmlDeviceGetMemoryInfo(self, h: FakeDevice) -> SimpleNamespace:
        d = self._dev("nvmlDeviceGetMemoryInfo", h, "memory")
        return SimpleNamespace(total=d.mem_total, used=d.mem_used, free=d.mem_total - d.mem_used)

    def nvmlDeviceGetPowerUsage(self, h: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetPowerUsage", h, "power").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetEnforcedPowerLimit", h, "power_limit").power_limit_mw

    def nvmlDeviceGetTemperature(self, h: FakeDevice, sensor: int) -> int:
        d = self._dev("nvmlDeviceGetTemperature", h, "temperature")
        if sensor != NVML_TEMPERATURE_GPU:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return d.temperature

    def nvmlDeviceGetClockInfo(self, h: FakeDevice, clock_type: int) -> int:
        d = self._dev("nvmlDeviceGetClockInfo", h, "clock")
        if clock_type != NVML_CLOCK_SM:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # only the SM clock is modelled
        return d.sm_clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetCurrentClocksEventReasons", h, "reasons").reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeDevice) -> int:
        return self._dev("nvmlDeviceGetCurrentClocksThrottleReasons", h,
                         "throttle_reasons").reasons

    def nvmlDeviceGetTotalEccErrors(self, h: FakeDevice, error_type: int, counter: int) -> int:
        d = self._dev("nvmlDeviceGetTotalEccErrors", h, "ecc")
        if (error_type, counter) != (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # only that counter is modelled
        return d.ecc

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeDevice) -> list[FakeProcess]:
        return list(self._dev("nvmlDeviceGetComputeRunningProcesses", h, "processes").processes)


# The module's constants and error class, reachable on an instance as on the module.
CONSTANTS = {name: value for name, value in globals().items() if name.startswith("NVML_")}
CONSTANTS |= REASON_CONSTANTS
for _name, _value in CONSTANTS.items():
    setattr(FakeNvml, _name, _value)
FakeNvml.NVMLError = NVMLError
