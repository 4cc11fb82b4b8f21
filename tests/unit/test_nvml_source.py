"""NvmlSource against a fake NVML in which each GPU fails its own way, and against the real
binding on a node without a driver."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.model import DENIED, ERROR, OK, UNAVAILABLE, GpuProcess, replace
from rltui.sources.nvml import NvmlSource
from tests.fakes import fake_pynvml as fk
from tests.fakes.fake_pynvml import FakeDevice, FakeNvml, FakeProcess, healthy

GiB = fk.GiB


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make(nvml: FakeNvml | None = None, local=lambda pid: True, clock=None, **kw) -> NvmlSource:
    return NvmlSource(nvml=nvml or FakeNvml(), pid_exists=local, clock=clock or Clock(), **kw)


def test_healthy_eight_gpus():
    reading = make().poll()
    assert reading.status == OK and reading.source == "gpus"
    assert (reading.message, reading.remedy) == ("", "")
    poll = reading.payload
    assert poll.driver_version == "550.54.15"
    assert poll.foreign_pids == () and not poll.simulated
    assert [g.index for g in poll.gpus] == list(range(8))
    g = poll.gpus[3]
    assert g.name == "NVIDIA H100 80GB HBM3"
    assert g.uuid == "GPU-00000003-0000-0000-0000-000000000000"
    assert (g.util, g.mem_util) == (95.0, 40.0)
    assert (g.mem_used, g.mem_total) == (60 * GiB, 80 * GiB)
    assert (g.power_w, g.power_limit_w) == (450.0, 700.0)
    assert (g.temperature_c, g.sm_clock_mhz) == (62.0, 1980)
    assert (g.throttle_reasons, g.ecc_errors, g.error) == ((), 0, "")
    assert g.processes == (GpuProcess(pid=1003, used_memory=4 * GiB, local=True),)


# What a getter failing on one device clears on that device, and nothing else.
FIELD_FAILURES = [
    ("name", {"name": ""}),
    ("uuid", {"uuid": ""}),
    ("utilization", {"util": None, "mem_util": None}),
    ("memory", {"mem_used": None, "mem_total": None}),
    ("power", {"power_w": None}),
    ("power_limit", {"power_limit_w": None}),
    ("temperature", {"temperature_c": None}),
    ("clock", {"sm_clock_mhz": None}),
    ("reasons", {"throttle_reasons": None}),
    ("ecc", {"ecc_errors": None}),
    ("processes", {"processes": ()}),
]


@pytest.mark.parametrize("key, cleared", FIELD_FAILURES, ids=[k for k, _ in FIELD_FAILURES])
def test_one_field_not_supported_on_one_device(key, cleared):
    baseline = make().poll().payload.gpus
    devices = healthy()
    devices[3].fail = {key: fk.NVML_ERROR_NOT_SUPPORTED}
    reading = make(FakeNvml(devices)).poll()
    assert reading.status == OK and reading.message == ""
    gpus = reading.payload.gpus
    assert gpus[3] == replace(baseline[3], **cleared)
    assert gpus[:3] + gpus[4:] == baseline[:3] + baseline[4:]


@pytest.mark.parametrize("code", [fk.NVML_ERROR_NO_PERMISSION, fk.NVML_ERROR_UNKNOWN,
                                  fk.NVML_ERROR_FUNCTION_NOT_FOUND, fk.NVML_ERROR_TIMEOUT])
def test_other_field_errors_are_none_too(code):
    devices = healthy(2)
    devices[1].fail = {"power": code}
    gpus = make(FakeNvml(devices)).poll().payload.gpus
    assert gpus[1].power_w is None and gpus[1].error == ""
    assert gpus[0].power_w == 450.0


@pytest.mark.parametrize("fail, error", [
    ({"handle": fk.NVML_ERROR_GPU_IS_LOST}, "GPU is lost"),
    ({"*": fk.NVML_ERROR_GPU_IS_LOST}, "GPU is lost"),
    ({"temperature": fk.NVML_ERROR_GPU_IS_LOST}, "GPU is lost"),  # lost mid-read
    ({"reasons": fk.NVML_ERROR_RESET_REQUIRED}, "GPU requires restart"),
    ({"handle": fk.NVML_ERROR_UNKNOWN}, "cannot open the device: Unknown Error"),
])
def test_failed_device_becomes_an_error_sample(fail, error):
    devices = healthy()
    devices[5].fail = fail
    reading = make(FakeNvml(devices)).poll()
    assert reading.status == OK
    lost = reading.payload.gpus[5]
    assert lost.error == error
    empty = replace(lost, util=None, mem_util=None, mem_used=None, mem_total=None,
                                power_w=None, power_limit_w=None, temperature_c=None,
                                sm_clock_mhz=None, throttle_reasons=None, ecc_errors=None,
                                processes=())
    assert lost == empty
    assert all(g.error == "" and g.util == 95.0 for g in reading.payload.gpus if g.index != 5)
    assert reading.message == f"1 of 8 GPUs failed (GPU 5: {error})"
    assert "Xid" in reading.remedy


def test_gpu_lost_after_first_poll_keeps_its_name():
    nvml = FakeNvml()
    source = make(nvml)
    source.poll()
    nvml.devices[2].fail = {"*": fk.NVML_ERROR_GPU_IS_LOST}
    lost = source.poll().payload.gpus[2]
    assert lost.error == "GPU is lost"
    assert lost.uuid == "GPU-00000002-0000-0000-0000-000000000000"
    assert lost.util is None
    assert 1002 not in source.gpu_pid_map()


INIT_FAILURES = [
    (fk.NVML_ERROR_LIBRARY_NOT_FOUND, UNAVAILABLE,
     "No NVIDIA driver or NVML library found: GPU data unavailable"),
    (fk.NVML_ERROR_DRIVER_NOT_LOADED, UNAVAILABLE, "NVIDIA driver not loaded"),
    (fk.NVML_ERROR_NO_PERMISSION, DENIED, "No permission"),
    (fk.NVML_ERROR_LIB_RM_VERSION_MISMATCH, ERROR, "versions differ"),
    (fk.NVML_ERROR_UNKNOWN, ERROR, "NVML failed (Unknown Error)"),
]


@pytest.mark.parametrize("code, status, message", INIT_FAILURES)
def test_init_failure_is_a_status(code, status, message):
    reading = make(FakeNvml(init_error=code)).poll()
    assert (reading.status, reading.payload) == (status, None)
    assert message in reading.message
    assert "\n" not in reading.message
    assert reading.remedy
    if status == UNAVAILABLE:
        assert "nvidia-smi" in reading.remedy and "driver" in reading.remedy


def test_missing_binding_package_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    reading = NvmlSource(clock=Clock()).poll()
    assert (reading.status, reading.payload) == (UNAVAILABLE, None)
    assert "nvidia-ml-py" in reading.message and "pip install nvidia-ml-py" in reading.remedy


def test_init_is_retried_only_after_the_interval():
    clock = Clock(100.0)
    nvml = FakeNvml(init_error=fk.NVML_ERROR_DRIVER_NOT_LOADED)
    source = make(nvml, clock=clock, retry_init_s=30.0)
    for t, inits, status in [(100.0, 1, UNAVAILABLE), (101.0, 1, UNAVAILABLE),
                             (129.9, 1, UNAVAILABLE), (130.0, 2, UNAVAILABLE)]:
        clock.t = t
        reading = source.poll()
        assert (nvml.calls["nvmlInit"], reading.status, reading.timestamp) == (inits, status, t)
    nvml.init_error = None  # the driver gets loaded
    clock.t = 159.0
    assert source.poll().status == UNAVAILABLE  # still waiting for the next try
    clock.t = 160.0
    assert source.poll().status == OK
    assert nvml.calls["nvmlInit"] == 3


def test_healthy_polls_do_no_setup_work_again():
    nvml = FakeNvml()
    source = make(nvml)
    source.poll()
    before = nvml.calls.copy()
    for _ in range(5):
        source.poll()
    per_poll = nvml.calls - before
    for setup in ("nvmlInit", "nvmlSystemGetDriverVersion", "nvmlDeviceGetHandleByIndex",
                  "nvmlDeviceGetName", "nvmlDeviceGetUUID"):
        assert per_poll[setup] == 0, setup
    assert per_poll["nvmlDeviceGetPowerUsage"] == 5 * 8


def test_driver_gone_mid_run_reinits_at_the_retry_pace():
    clock = Clock(0.0)
    nvml = FakeNvml()
    source = make(nvml, clock=clock, retry_init_s=10.0)
    assert source.poll().status == OK and source.gpu_pid_map()
    nvml.count_error = fk.NVML_ERROR_DRIVER_NOT_LOADED
    clock.t = 100.0  # long after the first init
    reading = source.poll()
    assert (reading.status, reading.payload) == (UNAVAILABLE, None)
    assert source.gpu_pid_map() == {}
    assert nvml.calls["nvmlShutdown"] == 1
    nvml.count_error = None
    clock.t = 105.0
    reading = source.poll()
    assert (reading.status, nvml.calls["nvmlInit"]) == (UNAVAILABLE, 1)
    assert "driver not loaded" in reading.message
    clock.t = 110.0
    assert source.poll().status == OK and nvml.calls["nvmlInit"] == 2


def test_count_error_without_reset_is_an_error_reading():
    nvml = FakeNvml(count_error=fk.NVML_ERROR_TIMEOUT)
    reading = make(nvml).poll()
    assert (reading.status, reading.payload) == (ERROR, None)
    assert "Timeout" in reading.message
    assert nvml.calls["nvmlShutdown"] == 0


def test_foreign_pids_are_kept_and_explained():
    devices = [FakeDevice(processes=[FakeProcess(4242), FakeProcess(4243)]),
               FakeDevice(processes=[FakeProcess(5151)])]
    reading = make(FakeNvml(devices), local=lambda pid: False).poll()
    assert reading.status == OK
    assert reading.payload.foreign_pids == (4242, 4243, 5151)
    assert [p.local for g in reading.payload.gpus for p in g.processes] == [False] * 3
    assert "another PID namespace" in reading.message and "4242, 4243, 5151" in reading.message
    assert "--pid=host" in reading.remedy


def test_mixed_local_and_foreign_pids():
    devices = [FakeDevice(processes=[FakeProcess(10), FakeProcess(99)]),
               FakeDevice(processes=[FakeProcess(11)]),
               FakeDevice(processes=[])]
    source = make(FakeNvml(devices), local=lambda pid: pid < 50)
    poll = source.poll().payload
    assert poll.gpus[0].processes == (GpuProcess(10, 4 * GiB, True), GpuProcess(99, 4 * GiB, False))
    assert poll.foreign_pids == (99,)
    assert source.gpu_pid_map() == {10: 0, 11: 1}


def test_many_foreign_pids_are_listed_briefly():
    devices = [FakeDevice(processes=[FakeProcess(p) for p in range(100, 120)])]
    reading = make(FakeNvml(devices), local=lambda pid: False).poll()
    assert len(reading.payload.foreign_pids) == 20
    assert "20 GPU process(es)" in reading.message
    assert "100, 101, 102, 103, 104, ..." in reading.message


def test_device_failure_and_foreign_pids_share_the_message():
    devices = [FakeDevice(processes=[FakeProcess(7)]), FakeDevice(fail={"handle": 15})]
    reading = make(FakeNvml(devices), local=lambda pid: False).poll()
    assert reading.message.startswith("1 of 2 GPUs failed (GPU 1: GPU is lost); 1 GPU process")
    assert "Xid" in reading.remedy and "--pid=host" in reading.remedy


@pytest.mark.parametrize("used", [None, 2**64 - 1])
def test_process_memory_not_available(used):
    devices = [FakeDevice(processes=[FakeProcess(1, usedGpuMemory=used), FakeProcess(2)])]
    procs = make(FakeNvml(devices)).poll().payload.gpus[0].processes
    assert [p.used_memory for p in procs] == [None, 4 * GiB]


def test_legacy_bytes_strings_are_decoded():
    poll = make(FakeNvml(legacy_strings=True)).poll().payload
    assert poll.driver_version == "550.54.15"
    assert poll.gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert isinstance(poll.gpus[0].uuid, str)


def test_driver_version_failure_is_none():
    reading = make(FakeNvml(driver_error=fk.NVML_ERROR_NOT_SUPPORTED)).poll()
    assert reading.status == OK and reading.payload.driver_version is None


THROTTLE = [
    (0, ()),
    (1, ("gpu_idle",)),
    (4 | 64, ("sw_power_cap", "hw_thermal")),
    (2, ("applications_clocks",)),
    (8 | 16 | 32, ("hw_slowdown", "sync_boost", "sw_thermal")),
    (128 | 256, ("hw_power_brake", "display_clocks")),
    (511, ("gpu_idle", "applications_clocks", "sw_power_cap", "hw_slowdown", "sync_boost",
           "sw_thermal", "hw_thermal", "hw_power_brake", "display_clocks")),
    (1 << 20, ()),  # a bit this version does not name is left out
]
EVENT_NAMES = frozenset({"nvmlDeviceGetCurrentClocksEventReasons"}
                        | {n for n in fk.REASON_CONSTANTS if "Event" in n})
ALL_REASON_NAMES = frozenset({"nvmlDeviceGetCurrentClocksEventReasons",
                              "nvmlDeviceGetCurrentClocksThrottleReasons"}
                             | set(fk.REASON_CONSTANTS))


@pytest.mark.parametrize("missing", [frozenset(), EVENT_NAMES], ids=["event", "throttle-only"])
@pytest.mark.parametrize("mask, names", THROTTLE)
def test_throttle_decoding(mask, names, missing):
    nvml = FakeNvml([FakeDevice(reasons=mask)], missing=missing)
    assert make(nvml).poll().payload.gpus[0].throttle_reasons == names
    used = "Throttle" if missing else "Event"
    assert nvml.calls[f"nvmlDeviceGetCurrentClocks{used}Reasons"] == 1


def test_old_driver_without_event_reasons_falls_back_to_throttle_reasons():
    device = FakeDevice(reasons=4, fail={"reasons": fk.NVML_ERROR_FUNCTION_NOT_FOUND})
    nvml = FakeNvml([device])
    source = make(nvml)
    for _ in range(3):
        assert source.poll().payload.gpus[0].throttle_reasons == ("sw_power_cap",)
    assert nvml.calls["nvmlDeviceGetCurrentClocksEventReasons"] == 1  # not retried each poll
    assert nvml.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 3


def test_binding_without_any_reasons_getter_gives_none():
    nvml = FakeNvml([FakeDevice(reasons=4)], missing=ALL_REASON_NAMES)
    assert make(nvml).poll().payload.gpus[0].throttle_reasons is None


def test_gpu_pid_map_follows_the_latest_poll_and_is_a_copy():
    nvml = FakeNvml(healthy(2))
    source = make(nvml)
    assert source.gpu_pid_map() == {}  # before any poll
    source.poll()
    assert source.gpu_pid_map() == {1000: 0, 1001: 1}
    source.gpu_pid_map()[1000] = 7
    assert source.gpu_pid_map()[1000] == 0
    nvml.devices[0].processes, nvml.devices[1].processes = [], [FakeProcess(1000)]
    source.poll()
    assert source.gpu_pid_map() == {1000: 1}


def test_process_on_two_gpus_maps_to_the_first():
    devices = [FakeDevice(processes=[FakeProcess(5)]), FakeDevice(processes=[FakeProcess(5)])]
    source = make(FakeNvml(devices))
    source.poll()
    assert source.gpu_pid_map() == {5: 0}


def test_close_shuts_down_once_and_swallows_errors():
    nvml = FakeNvml(shutdown_error=fk.NVML_ERROR_UNKNOWN)
    source = make(nvml)
    source.poll()
    source.close()
    source.close()
    assert nvml.calls["nvmlShutdown"] == 1


def test_close_without_init_does_not_shut_down():
    nvml = FakeNvml(init_error=fk.NVML_ERROR_LIBRARY_NOT_FOUND)
    source = make(nvml)
    source.poll()
    source.close()
    assert nvml.calls["nvmlShutdown"] == 0


def test_default_pid_check_uses_our_pid_namespace():
    devices = [FakeDevice(processes=[FakeProcess(os.getpid()), FakeProcess(2**22 + 1)])]
    poll = NvmlSource(nvml=FakeNvml(devices), clock=Clock()).poll().payload
    assert [p.local for p in poll.gpus[0].processes] == [True, False]  # above pid_max: foreign


FAIL_KEYS = ["handle", "name", "uuid", "utilization", "memory", "power", "power_limit",
             "temperature", "clock", "reasons", "ecc", "processes", "*"]
CODES = [fk.NVML_ERROR_NOT_SUPPORTED, fk.NVML_ERROR_NO_PERMISSION, fk.NVML_ERROR_GPU_IS_LOST,
         fk.NVML_ERROR_RESET_REQUIRED, fk.NVML_ERROR_UNKNOWN, fk.NVML_ERROR_FUNCTION_NOT_FOUND]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(FAIL_KEYS), st.sampled_from(CODES), max_size=4),
                min_size=0, max_size=8))
def test_any_mix_of_device_failures_gives_an_ok_reading(fails):
    devices = [FakeDevice(fail=f, processes=[FakeProcess(i)]) for i, f in enumerate(fails)]
    reading = make(FakeNvml(devices)).poll()
    assert reading.status == OK
    assert [g.index for g in reading.payload.gpus] == list(range(len(fails)))
    assert bool(reading.message) == any(g.error for g in reading.payload.gpus)


def test_fake_matches_the_real_binding():
    pynvml = pytest.importorskip("pynvml")
    for name, value in fk.CONSTANTS.items():
        assert getattr(pynvml, name) == value, name
    api = [n for n, v in vars(FakeNvml).items() if n.startswith("nvml") and callable(v)]
    assert len(api) > 15
    missing = [n for n in api if not callable(getattr(pynvml, n, None))]
    assert missing == []
    for code in (fk.NVML_ERROR_GPU_IS_LOST, fk.NVML_ERROR_NOT_SUPPORTED):
        assert str(fk.NVMLError(code)) == str(pynvml.NVMLError(code))


def _real_driver_present(pynvml) -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return exc.value not in (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
                                 pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    pynvml.nvmlShutdown()
    return True


def test_real_binding_without_a_driver_is_unavailable():
    pynvml = pytest.importorskip("pynvml")
    if _real_driver_present(pynvml):
        pytest.skip("an NVIDIA driver is present on this node")
    source = NvmlSource()  # the real module, imported on first poll
    try:
        reading = source.poll()
    finally:
        source.close()
    assert (reading.status, reading.payload) == (UNAVAILABLE, None)
    assert reading.message.startswith("No NVIDIA driver") or "driver not loaded" in reading.message
    assert "nvidia-smi" in reading.remedy


def test_importing_the_source_does_not_import_pynvml():
    code = "import sys, rltui.sources.nvml; print('pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"
