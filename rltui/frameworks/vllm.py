"""vLLM (vllm-project/vllm): the inference engine as rltui meets it (pure data).

Sources (read, not copied): ``vllm/utils`` ``set_process_title(name, suffix)`` ->
``f"{VLLM_PROCESS_NAME_PREFIX}::{name}"`` (prefix ``VLLM``); ``vllm/v1/engine/core.py``
(``EngineCore``, ``EngineCore_DP{n}``), ``vllm/v1/executor/multiproc_executor.py`` (``Worker`` +
``_DP{dp}``, ``_PP{pp}``, ``_PCP{n}``, ``_TP{tp}``, ``_DCP{n}``, ``_EP{ep}`` as the groups exist),
``vllm/entrypoints/`` (``APIServer``), ``vllm/worker/`` and ``vllm/v1/worker/`` (frames).
"""

from __future__ import annotations

from rltui.frameworks._types import Framework, LogMarker, PhaseFacts, PhaseRule, TitlePattern

_VLLM = ("vllm/",)

PHASE = PhaseFacts(
    rules=(
        PhaseRule("engine-start", "profile_run _dummy_run _dummy_sampler_run "
                  "determine_num_available_blocks determine_available_memory "
                  "_initialize_kv_caches initialize_cache initialize_kv_cache init_device "
                  "load_model capture_model _init_executor init_worker from_engine_args "
                  "initialize_from_config _init_cache_engine _allocate_kv_cache "
                  "compile_or_warm_up_model _init_engine", _VLLM, "engine-start", "rollout",
                  "vLLM engine start", generic=True),
        PhaseRule("engine-start", "__init__", ("vllm/entrypoints/llm.py", "vllm/engine/",
                                               "vllm/v1/engine/", "vllm/worker/",
                                               "vllm/v1/worker/", "vllm/executor/",
                                               "vllm/v1/executor/"),
                  "engine-start", "rollout", "vLLM engine start", generic=True),
        PhaseRule("generation", "generate chat _run_engine execute_model step run_busy_loop "
                  "_process_engine_step step_with_batch_queue", _VLLM, "generation", "rollout",
                  "vLLM generation", generic=True),
    ),
    markers=(
        LogMarker("finished", r"Graph capturing finished|"
                  r"init engine \(profile, create kv cache, warmup model\) took", None, "",
                  "the inference engine finished starting"),
        LogMarker("finished", r"seconds to fall asleep", None, "",
                  "vLLM went to sleep (its generation finished)"),
        LogMarker("engine-start", r"Initializing an? (?:V1 )?LLM engine|Loading model weights took|"
                  r"Memory profiling takes|# (?:GPU|CPU|cpu) blocks:|GPU KV cache size:|"
                  r"Maximum concurrency for|Capturing (?:CUDA )?graph|Capturing cudagraphs",
                  "engine-start", "rollout", "vLLM is starting"),
        # Sleep mode wakes the weights first (for the sync), then the KV cache (to generate).
        LogMarker("weight-sync", r"seconds to wake up tags \[[^\]]*kv_cache", "generation",
                  "rollout", "vLLM woke its KV cache up for generation"),
        LogMarker("weight-sync", r"seconds to wake up tags", "weight-sync", "actor",
                  "vLLM woke its weights up for the sync"),
        LogMarker("generation", r"Processed prompts:", "generation", "rollout",
                  "vLLM generation progress"),
    ),
)

FRAMEWORK = Framework(
    name="vllm",
    label="vLLM",
    kind="engine",
    packages=("vllm",),
    path_marks=("/vllm/",),
    log_prefixes=("INFO 08-13 19:25:45 [file.py:123] (its logger format)",
                  "(VllmWorker rank=1 pid=N) / (EngineCore_DP0 pid=N) (worker output)"),
    titles=(
        TitlePattern(r"(?:VLLM|vLLM-Omni)::(?P<role>Worker|EngineCore|APIServer|DPCoordinator)"
                     r"(?:_DP(?P<dp>\d+))?(?:_PP(?P<pp>\d+))?(?:_PCP\d+)?(?:_TP(?P<tp>\d+))?"
                     r"(?:_DCP\d+)?(?:_EP\d+)?(?:_(?P<rank>\d+))?", "",
                     "vllm/utils (set_process_title), vllm/v1/executor/multiproc_executor.py"),
        TitlePattern(r"(?:VLLM|vLLM-Omni)::(?P<role>\w+).*", "", "vllm/utils"),
    ),
    phase=PHASE,
    sources=("vllm-project/vllm",),
)
