"""The live monitor (default process discovery) with eight fake NVML GPUs, for CPU benchmarks.

This machine has no GPU, so NVML is the one part replaced (by the test fake); processes,
psutil, the ranks' logs, py-spy, the UI and the terminal are real. (monitor_cpu.py now runs `python -m rltui` itself with the pynvml shim.)
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rltui import config  # noqa: E402
from rltui.sources.bundle import Bundle, RememberProcs, SourceSpec, log_source, stack_specs  # noqa: E402
from rltui.sources.nvml import NvmlSource  # noqa: E402
from rltui.sources.procs import FULL_SCAN_S, ProcSource  # noqa: E402
from rltui.ui.app import build_app  # noqa: E402
from tests.fakes.fake_pynvml import FakeNvml, healthy  # noqa: E402


def main() -> None:
    settings = config.load()  # RLTUI_CONFIG: try other cadences
    nvml = NvmlSource(nvml=FakeNvml(healthy(8)), pid_exists=lambda pid: True)
    procs = RememberProcs(ProcSource(gpu_map=nvml.gpu_pid_map, full_scan_s=FULL_SCAN_S))
    stacks, stack_spec = stack_specs(settings, procs)  # periodic py-spy rounds, as live
    bundle = Bundle(mode="live", job="benchmark", stacks=stacks, specs=[
        SourceSpec(nvml, settings.cadence.gpus), SourceSpec(procs, settings.cadence.procs),
        SourceSpec(log_source(settings, procs), settings.cadence.logs), *stack_spec])
    try:
        build_app(bundle, settings).run()
    finally:
        bundle.close()


if __name__ == "__main__":
    main()
