"""A ``pynvml`` module backed by the test fake, for measuring monitors side by side.

Put this folder first on PYTHONPATH and every tool that imports ``pynvml`` (rltui, nvitop,
gpustat) sees the same eight fake GPUs. The real ``nvidia-ml-py`` supplies the constants, error
classes and structures; the functions the fake models answer from it, the rest raise
NVMLError_NotSupported, as they do for a feature a GPU lacks. ``RLTUI_FAKE_GPU_PIDS`` (comma
separated) puts those processes on the GPUs, one each, so that every tool follows the same job.

No C entry point is ever looked up (``_nvmlGetFunctionPointer``): nvitop and gpustat then use
the functions here.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import SimpleNamespace

_here = str(Path(__file__).resolve().parent)
_spec = importlib.machinery.PathFinder.find_spec(
    "pynvml", [p for p in sys.path if p and str(Path(p).resolve()) != _here])
if _spec is None or _spec.loader is None:
    raise ImportError("the shim needs the real nvidia-ml-py for its constants and errors")
# under its own name: the real module makes its error classes on sys.modules[__name__]
_spec = importlib.util.spec_from_file_location("_pynvml_real", _spec.origin)
_real = importlib.util.module_from_spec(_spec)
sys.modules["_pynvml_real"] = _real
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})


def _function_not_found(name: str):
    raise _real.NVMLError(_real.NVML_ERROR_FUNCTION_NOT_FOUND)


# nvitop calls C entry points through it unless it is not callable, then uses the functions
# here; gpustat needs it callable and falls back on FunctionNotFound.
_nvmlGetFunctionPointer = _function_not_found if "gpustat" in sys.modules else None

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from tests.fakes import fake_pynvml  # noqa: E402 - after the path it needs

fake_pynvml.NVMLError = _real.NVMLError  # the fake raises the real classes (NotSupported, ...)
_pids = [int(p) for p in os.environ.get("RLTUI_FAKE_GPU_PIDS", "").split(",") if p.strip()]
_devices = fake_pynvml.healthy(8)
for _i, _pid in enumerate(_pids[:8]):
    _devices[_i].processes = [fake_pynvml.FakeProcess(_pid)]
FAKE = fake_pynvml.FakeNvml(_devices)


def _not_supported(*_args, **_kwargs):
    raise _real.NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)


def _wrap(method):
    def call(*args, **kwargs):
        return method(*args, **kwargs)
    call.__name__ = method.__name__
    return call


for _name, _value in list(vars(_real).items()):
    if _name.startswith("nvml") and "_nvmlGetFunctionPointer" in getattr(
            getattr(_value, "__code__", None), "co_names", ()):
        globals()[_name] = _not_supported
for _name in dir(FAKE):
    if _name.startswith("nvml") and callable(getattr(FAKE, _name)):
        globals()[_name] = _wrap(getattr(FAKE, _name))


def nvmlInitWithFlags(flags: int = 0) -> None:
    FAKE.nvmlInit()


def nvmlDeviceGetMemoryInfo(handle, version=None):
    return FAKE.nvmlDeviceGetMemoryInfo(handle)


def nvmlDeviceGetIndex(handle) -> int:
    return FAKE.devices.index(handle)


def nvmlDeviceGetComputeRunningProcesses(handle):
    return [SimpleNamespace(pid=p.pid, usedGpuMemory=p.usedGpuMemory, gpuInstanceId=0xFFFFFFFF,
                            computeInstanceId=0xFFFFFFFF)
            for p in FAKE.nvmlDeviceGetComputeRunningProcesses(handle)]


def nvmlDeviceGetGraphicsRunningProcesses(handle):
    FAKE.nvmlDeviceGetComputeRunningProcesses(handle)  # same checks, no graphics contexts
    return []


nvmlDeviceGetComputeRunningProcesses_v3 = nvmlDeviceGetComputeRunningProcesses
nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses
nvmlDeviceGetGraphicsRunningProcesses_v3 = nvmlDeviceGetGraphicsRunningProcesses
nvmlDeviceGetGraphicsRunningProcesses_v2 = nvmlDeviceGetGraphicsRunningProcesses
nvmlDeviceGetMPSComputeRunningProcesses = nvmlDeviceGetGraphicsRunningProcesses
nvmlDeviceGetMPSComputeRunningProcesses_v3 = nvmlDeviceGetGraphicsRunningProcesses
