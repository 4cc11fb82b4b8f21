"""Catch-up speed of the step parsers (target: scan_steps at >= 50 MB/s on a 2-core machine).

Generates a ~200 MB verl log under Ray (step lines with ~60 metrics in NumPy 2 reprs, each
followed by the Ray/vLLM/tqdm chatter a real run prints), then measures:

* ``scan_steps`` over the whole file as one block (the history path), in MB/s;
* ``grep -c step:`` over the same file, as the floor any line-oriented reader compares with;
* ``StepReader.feed`` per line after ``strip_noise`` (the live path), in lines/s and MB/s.

Nothing here asserts a timing. Run:
``python -m pytest tests/benchmarks/test_step_parsing.py --benchmark-only -s``
(``RLTUI_BENCH_MB`` changes the size).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import time

import pytest

from rltui.parsing.noise import strip_noise
from rltui.parsing.steps import StepReader, scan_steps

SIZE_MB = float(os.environ.get("RLTUI_BENCH_MB", "200"))
FEED_LINES = 200_000

_KEYS = (
    [f"actor/{k}" for k in ("entropy", "pg_loss", "pg_clipfrac", "ppo_kl", "grad_norm", "lr", "kl_loss")]
    + [f"critic/{k}/{s}" for k in ("score", "rewards", "advantages", "returns") for s in ("mean", "max", "min")]
    + [f"response_length/{s}" for s in ("mean", "max", "min", "clip_ratio")]
    + [f"prompt_length/{s}" for s in ("mean", "max", "min", "clip_ratio")]
    + [f"timing_s/{k}" for k in ("gen", "reward", "old_log_prob", "ref", "adv", "update_actor", "step", "testing")]
    + [f"timing_per_token_ms/{k}" for k in ("gen", "ref", "adv", "update_actor")]
    + [f"training/rollout_probs_diff_{k}" for k in ("valid", "max", "mean", "std")]
    + ["training/rollout_actor_probs_pearson_corr", "perf/total_num_tokens", "perf/time_per_step",
       "perf/throughput", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb"]
    + [f"val-core/openai/gsm8k/reward/mean@{n}" for n in (1, 4, 8)]
)
_CHATTER = [
    "(WorkerDict pid=2587) INFO 05-21 18:40:02 [block_pool.py:321] Successfully reset prefix cache [repeated 7x across cluster]",
    "(TaskRunner pid=2213) Training Progress:   3%|\u258e         | 40/1245 [26:41<13:01:52, 40.12s/it]",
    "(WorkerDict pid=2587) [W socket.cpp:697] [c10d] The client socket has failed to connect to [localhost]:29500",
    "(WorkerDict pid=2588) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 1024, 'detokenize': False}",
    "(WorkerDict pid=2589) INFO 05-21 18:40:03 [executor_base.py:210] It took 0.53 seconds to wake up.",
]


def make_verl_log(target_bytes: int) -> tuple[str, int]:
    rnd = random.Random(0)
    parts: list[str] = []
    size = steps = 0
    while size < target_bytes:
        steps += 1
        items = " - ".join(f"{k}:np.float64({rnd.uniform(-1, 1000):.6g})" for k in _KEYS)
        block = [f"(TaskRunner pid=2213) step:{steps} - {items}"]
        block += [_CHATTER[i % len(_CHATTER)] for i in range(rnd.randint(10, 30))]
        text = "\n".join(block) + "\n"
        parts.append(text)
        size += len(text)
    return "".join(parts), steps


@pytest.fixture(scope="module")
def verl_log(tmp_path_factory):
    text, steps = make_verl_log(int(SIZE_MB * 1e6))
    path = tmp_path_factory.mktemp("steps") / "verl.log"
    path.write_text(text, encoding="utf-8")
    return path, text, steps


def _report(benchmark, name: str, **values) -> None:
    benchmark.extra_info.update(values)
    print(f"\n{name}: " + ", ".join(f"{k}={v}" for k, v in values.items()))


def test_scan_steps_history(benchmark, verl_log):
    path, text, steps = verl_log
    megabytes = len(text.encode("utf-8")) / 1e6
    records = benchmark.pedantic(scan_steps, args=(text, "verl", 1, 0.0), rounds=3, iterations=1)
    assert len(records) == steps and records[-1].step == steps
    scan_s = benchmark.stats.stats.min

    grep_s = None
    if shutil.which("grep"):
        start = time.perf_counter()
        out = subprocess.run(["grep", "-c", "step:", str(path)], capture_output=True, text=True, check=True)
        grep_s = time.perf_counter() - start
        assert int(out.stdout) == steps
    _report(benchmark, "scan_steps", megabytes=round(megabytes, 1), steps=steps,
            scan_mb_per_s=round(megabytes / scan_s, 1),
            grep_c_mb_per_s=round(megabytes / grep_s, 1) if grep_s else None)


def test_feed_live_lines(benchmark, verl_log):
    _, text, _ = verl_log
    lines = text.split("\n", FEED_LINES)[:FEED_LINES]
    megabytes = sum(len(line) + 1 for line in lines) / 1e6

    def feed_all():
        reader = StepReader("verl")
        found = 0
        for no, line in enumerate(lines, 1):
            found += len(reader.feed(strip_noise(line).text, no, 0.0))
        return found

    assert benchmark.pedantic(feed_all, rounds=3, iterations=1) > 0
    best = benchmark.stats.stats.min
    _report(benchmark, "feed", lines=len(lines), lines_per_s=round(len(lines) / best),
            mb_per_s=round(megabytes / best, 1))
