"""SGLang (sgl-project/sglang): the inference engine as rltui meets it (pure data).

Sources (read, not copied): ``python/sglang/srt/managers/scheduler.py`` (``setproctitle(
f"sglang::scheduler{prefix}")`` with `` DP{dp} TP{tp}`` and, in later versions, `` EP{ep}`` /
`` PP{pp}`` parts joined by ``_``), ``detokenizer_manager.py`` (``sglang::detokenizer``),
``data_parallel_controller.py``, ``multi_tokenizer_mixin.py`` (``sglang::tokenizer_worker:PID``),
``srt/model_executor/model_runner.py`` and ``srt/entrypoints/engine.py`` (start-up frames).
"""

from __future__ import annotations

from rltui.frameworks._types import Framework, LogMarker, PhaseFacts, PhaseRule, TitlePattern

_SGLANG = ("sglang/srt/", "sglang/")

PHASE = PhaseFacts(
    rules=(
        PhaseRule("engine-start", "init_memory_pool init_cuda_graphs load_model initialize "
                  "profile_max_num_token capture capture_one_batch_size init_torch_distributed "
                  "_launch_subprocesses launch_server launch_engine init_device_graphs", _SGLANG,
                  "engine-start", "rollout", "SGLang engine start", generic=True),
        PhaseRule("engine-start", "__init__", ("sglang/srt/entrypoints/engine.py",
                                               "sglang/srt/managers/scheduler.py",
                                               "sglang/srt/managers/tp_worker",
                                               "sglang/srt/model_executor/"),
                  "engine-start", "rollout", "SGLang engine start", generic=True),
        PhaseRule("weight-sync", "update_weights_from_distributed update_weights_from_tensor "
                  "update_weights_from_disk", _SGLANG, "weight-sync", "rollout",
                  "SGLang receives new weights"),
        PhaseRule("generation", "event_loop_normal event_loop_overlap event_loop_pp run_batch "
                  "forward_batch_generation generate async_generate generate_request", _SGLANG,
                  "generation", "rollout", "SGLang generation", generic=True),
    ),
    markers=(
        LogMarker("finished", r"Capture cuda graph end|The server is fired up and ready to roll",
                  None, "", "the inference engine finished starting"),
        LogMarker("engine-start", r"Load weight (?:begin|end)|KV Cache is allocated|"
                  r"Memory pool end|Capture cuda graph begin|Init torch distributed begin",
                  "engine-start", "rollout", "SGLang is starting"),
    ),
)

FRAMEWORK = Framework(
    name="sglang",
    label="SGLang",
    kind="engine",
    packages=("sglang",),
    path_marks=("/sglang/",),
    log_prefixes=("[2025-01-01 12:00:00 DP1 TP3] (the scheduler's log prefix)",),
    titles=(
        TitlePattern(r"sglang::(?P<role>scheduler|semi_pd_scheduler)"
                     r"(?:_(?:PREFILL|DECODE|OTHER))?(?:_DP(?P<dp>\d+))?(?:_TP(?P<tp>\d+))?"
                     r"(?:_EP\d+)?(?:_PP(?P<pp>\d+))?", "",
                     "python/sglang/srt/managers/scheduler.py"),
        TitlePattern(r"sglang::(?P<role>detokenizer|data_parallel_controller|tokenizer_worker|"
                     r"gpu_worker|async_draft_runner)\b.*", "",
                     "python/sglang/srt/managers/detokenizer_manager.py, "
                     "data_parallel_controller.py, multi_tokenizer_mixin.py"),
        TitlePattern(r"sglang::(?P<role>\w+).*", "", "python/sglang/srt/"),
    ),
    phase=PHASE,
    sources=("sgl-project/sglang",),
)
