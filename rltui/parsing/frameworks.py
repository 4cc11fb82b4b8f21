"""Per-framework step-line parsers and the metric-name table.

Each parser reads one CLEANED line (see ``noise.strip_noise``) and returns the parts of a
step or ``None``; none of them raises on any input. Formats are documented, with their
sources, in docs/log-formats.md.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable
from typing import NamedTuple

from rltui.model import TRIAGE_METRICS

# Framework keys per triage metric, most preferred first. When one step reports several keys
# of the same metric (verl logs both critic/score/mean and critic/rewards/mean) the earlier
# key wins. Keys not listed are not stored.
METRIC_KEYS: dict[str, tuple[str, ...]] = {
    "loss": ("actor/pg_loss", "policy_loss", "loss", "train/loss",
             "ppo_actor/update/actor_loss/avg", "loss_metrics/global_avg_loss", "sft/loss/avg",
             "loss/policy_avg"),
    "reward": ("critic/score/mean", "critic/rewards/mean", "reward", "rewards/mean",
               "task_reward", "ppo_actor/task_reward/avg", "grpo_actor/task_reward/avg",
               "rollout/reward"),
    "entropy": ("actor/entropy", "entropy", "ppo_actor/update/entropy/avg"),
    "grad_norm": ("actor/grad_norm", "grad_norm", "ppo_actor/update/grad_norm"),
    # AReaL has no whole-step timer in its table; timeperf/train_step is the training part.
    "step_time": ("timing_s/step", "timing/step", "timing/step_total", "perf/time_per_step",
                  "timeperf/train_step"),
    "throughput": ("perf/throughput", "tps", "throughput", "throughput(tps)"),
    "response_length": ("response_length/mean", "response_length", "completion_length",
                        "completions/mean_length"),
    "rollout_probs_diff": ("training/rollout_probs_diff_mean", "vllm_kl",
                           "sampling/sampling_logp_difference/mean"),
}

# key -> (index in TRIAGE_METRICS, preference); built once so a lookup is one dict hit.
_KEY_TABLE: dict[str, tuple[int, int]] = {
    key: (TRIAGE_METRICS.index(metric), rank)
    for metric, keys in METRIC_KEYS.items()
    for rank, key in enumerate(keys)
}

_MAX_NUMBER = 64  # longer "numbers" are garbage; float() on them only costs time
_NUMPY_SCALARS = frozenset(
    f"{mod}.{kind}" for mod in ("np", "numpy")
    for kind in ("float64", "float32", "float16", "int64", "int32", "int16", "int8",
                 "uint64", "uint32", "uint16", "uint8", "longdouble", "double", "single")
)


def to_float(raw: str) -> float | None:
    """A metric value as printed: 0.1, -5e-06, 3,210, np.float64(0.1), '0.5'. Else None.

    NaN and infinities are skipped like unparsable values, so consumers can compare and plot
    metrics without guarding every float.
    """
    if len(raw) > _MAX_NUMBER:
        return None
    raw = raw.strip()
    if raw[-1:] == ")":  # NumPy 2 scalar repr np.float64(0.1); tensors and the like are skipped
        open_ = raw.find("(")
        if raw[:open_].strip() not in _NUMPY_SCALARS:
            return None
        raw = raw[open_ + 1:-1]
    try:
        value = float(raw)  # the common case, and the cheapest to try
    except ValueError:
        try:
            value = float(raw.strip("'\" ").replace(",", ""))
        except ValueError:
            return None
    return value if math.isfinite(value) else None


def collect(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, float], ...]:
    """Map (framework key, raw value) pairs to triage metrics, in TRIAGE_METRICS order."""
    best: dict[int, tuple[int, float]] = {}
    table = _KEY_TABLE
    for key, raw in pairs:
        hit = table.get(key)
        if hit is None:
            continue
        metric, rank = hit
        held = best.get(metric)
        if held is not None and held[0] <= rank:
            continue
        # Fast path for the two shapes verl prints millions of: 0.123 and np.float64(0.123).
        if raw.startswith("np.float64(") and raw.endswith(")"):
            raw = raw[11:-1]
        try:
            value = float(raw) if len(raw) <= _MAX_NUMBER else math.nan
        except ValueError:
            value = to_float(raw)
            if value is None:
                continue
        if math.isfinite(value):
            best[metric] = (rank, value)
    return tuple((TRIAGE_METRICS[m], best[m][1]) for m in sorted(best))


def _alternation(words: Iterable[str]) -> str:
    """A regex matching exactly ``words``, factored as a prefix tree: Python's engine tries
    the branches of a flat alternation one by one, a tree only along shared prefixes."""
    tree: dict = {}
    for word in words:
        node = tree
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        ends_here = "" in node
        if len(branches) == 1 and not ends_here:
            return branches[0]
        return "(?:" + "|".join(branches) + (")?" if ends_here else ")")

    return emit(tree)


class Parsed(NamedTuple):
    step: int
    total: int | None = None
    time: float | None = None
    metrics: tuple[tuple[str, float], ...] = ()


def _int(digits: str | None) -> int | None:
    return int(digits) if digits else None


def local_time(year: int, month: int, day: int, hour: int, minute: int, second: int,
               frac: str | None = None) -> float | None:
    """POSIX time of a wall-clock stamp in this machine's time zone (where logs are written)."""
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 62):
        return None
    try:
        stamp = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    except (OverflowError, ValueError):
        return None
    if frac:
        stamp += int(frac) / 10 ** len(frac)
    return stamp


# 2026-03-01 12:00:00,000 (logging's asctime) or 20260521-18:37:16.123 (AReaL's datefmt)
_ISO_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[,.](\d{1,6}))?")
_AREAL_TIME = re.compile(r"(\d{4})(\d\d)(\d\d)-(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")


def stamp_time(text: str) -> float | None:
    """The first "YYYY-MM-DD HH:MM:SS[,fff]" or "YYYYMMDD-HH:MM:SS[.fff]" stamp in text."""
    m = _ISO_TIME.search(text) or _AREAL_TIME.search(text)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    return local_time(y, mo, d, h, mi, s, m.group(7))


# -- verl: "step:N - key:value - key:value ..." ----------------------------------------------

# Only known keys are wanted, so one regex finds them among the 50-200 items of a step line
# (many times faster than splitting every item on a slow core). Values never hold a space.
_VERL_ITEM = re.compile(" - (" + _alternation(_KEY_TABLE) + "):([^ ]*)")


def parse_verl(text: str, arrival: float = 0.0) -> Parsed | None:
    line = text.lstrip()
    if not line.startswith("step:"):
        return None
    end = line.find(" - ")
    head = line[5:end] if end >= 0 else line[5:].rstrip()  # verl prints f"step:{step}", no space
    if not (head.isascii() and head.isdigit()) or len(head) > 18:
        return None
    return Parsed(int(head), metrics=collect(_VERL_ITEM.findall(line, end if end >= 0 else len(line))))


# -- torchtitan: "[titan] <asctime> - root - INFO - step:  5  loss:  7.1234  grad_norm: ..." -

_TITAN_STEP = re.compile(r"(?<!validate )\bstep:\s{0,8}(\d{1,18})\s{1,8}loss:")
_TITAN_FIELD = re.compile(r"([A-Za-z_]\w{0,40}):\s{0,8}([-+]?[\d.,]{1,40}(?:[eE][-+]?\d{1,4})?)")


def parse_torchtitan(text: str, arrival: float = 0.0) -> Parsed | None:
    if "step:" not in text:
        return None
    m = _TITAN_STEP.search(text)
    if not m:
        return None
    fields = _TITAN_FIELD.findall(text, m.end() - 5)
    return Parsed(int(m.group(1)), time=stamp_time(text[:m.start()]), metrics=collect(fields))


# -- OpenRLHF: "INFO 08-13 19:25:45 ppo_trainer.py:547] ✨ Global step 3: {...}" ---------------

_ORLHF_STEP = re.compile(r"Global step (\d{1,18})(?: \[[^\]]{0,40}\])?: ?(?=\{)")
_ORLHF_TIME = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")
# One "'key': value" item of a Python dict repr; values that are not scalars fail to_float.
_DICT_ITEM = re.compile(r"'([^'\\]{1,200})': ([^,{}\[\]]{1,80})")


def _year_of(arrival: float) -> int:
    try:
        return time.localtime(arrival).tm_year
    except (OverflowError, OSError, ValueError):
        return time.localtime().tm_year


def parse_openrlhf(text: str, arrival: float) -> Parsed | None:
    if "Global step " not in text:
        return None
    m = _ORLHF_STEP.search(text)
    if not m:
        return None
    stamp = None
    t = _ORLHF_TIME.match(text)
    if t:
        # vLLM-style "%m-%d %H:%M:%S" has no year: take the reading's, and step back one
        # year when that puts the line in the future (a December line read in January).
        year = _year_of(arrival)
        mo, d, h, mi, s = (int(g) for g in t.groups())
        stamp = local_time(year, mo, d, h, mi, s)
        if stamp is not None and stamp > arrival + 86400:
            stamp = local_time(year - 1, mo, d, h, mi, s)
    items = _DICT_ITEM.findall(text, m.end())
    return Parsed(int(m.group(1)), time=stamp, metrics=collect(items))


# -- HF Trainer / TRL: "{'loss': 1.2345, 'grad_norm': 0.87, 'learning_rate': 4.9e-05, ...}" -

# TRL's PPOTrainer logs "lr" and "loss/policy_avg" instead of the Trainer's names.
_HF_STEP_KEYS = frozenset(("loss", "learning_rate", "grad_norm", "lr", "loss/policy_avg"))
# Dicts that are not training steps: evaluation results and the final summary.
_HF_NOT_STEP = ("eval_", "test_", "predict_", "train_runtime", "train_samples_per_second")


# The same dict printed as JSON (ms-swift's logging callback): double quotes.
_JSON_ITEM = re.compile(r'"([^"\\]{1,200})": ([^,{}\[\]]{1,80})')


def hf_items(text: str) -> list[tuple[str, str]] | None:
    """The items of a logging-step dict (a Python repr, or JSON), or None when the line is
    not one."""
    line = text.strip()
    if line.startswith("{'"):
        items = _DICT_ITEM.findall(line)
    elif line.startswith('{"'):
        items = _JSON_ITEM.findall(line)
    else:
        return None
    keys = {key for key, _ in items}
    if not keys & _HF_STEP_KEYS or any(key.startswith(_HF_NOT_STEP) for key in keys):
        return None
    return items


def looks_hf(text: str) -> bool:
    """Stricter than hf_items, for auto-detection: a whole dict that carries an epoch."""
    line = text.strip()
    return (line.endswith("}") and ("'epoch': " in line or '"epoch": ' in line)
            and hf_items(line) is not None)


# -- AReaL: header line, "Stats (i/n):", then a box-drawn table of key/value column pairs ----

_AREAL_STEP = re.compile(
    r"(?:Epoch (\d{1,9})/(\d{1,9}) )?Step (\d{1,18})/(\d{1,18})"
    r"(?: Train step (\d{1,18})/(\d{1,18}))? done"
)


def parse_areal_header(text: str) -> Parsed | None:
    """``Epoch 1/1 Step 3/100 Train step 3/100 done.``: the global train step when printed."""
    if "Step " not in text:
        return None
    m = _AREAL_STEP.search(text)
    if not m:
        return None
    if m.group(5):
        step, total = int(m.group(5)), _int(m.group(6))
    else:
        step, total = int(m.group(3)), _int(m.group(4))
    return Parsed(step, total=total, time=stamp_time(text[:m.start()]))


def areal_row(text: str) -> list[tuple[str, str]]:
    """(key, value) cells of one fancy_grid row "│ k │ v │ k │ v │ ..."; [] for other lines."""
    line = text.strip()
    if not line.startswith("│"):
        return []
    cells = [cell.strip() for cell in line.strip("│").split("│")]
    return [(cells[i], cells[i + 1]) for i in range(0, len(cells) - 1, 2) if cells[i]]


def areal_table_end(text: str) -> bool:
    return text.lstrip().startswith("╘")


def _ordered(values: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """Triage metrics already named, in TRIAGE_METRICS order (NaN and infinities dropped)."""
    return tuple((name, values[name]) for name in TRIAGE_METRICS
                 if name in values and math.isfinite(values[name]))


# -- HF dicts with a step number: ms-swift's 'global_step/max_steps': '5/100' ----------------

_SWIFT_STEP = "global_step/max_steps"


def hf_step(items: list[tuple[str, str]]) -> tuple[int | None, int | None, float | None]:
    """(step, total, step time) a logs dict carries itself (ms-swift adds them), else Nones."""
    step = total = None
    step_time = None
    for key, raw in items:
        if key == _SWIFT_STEP:
            done, _, most = raw.strip("'\" ").partition("/")
            if done.isdigit() and len(done) < 19:
                step = int(done)
                total = int(most) if most.isdigit() and len(most) < 19 else None
        elif key == "step_time":  # newer ms-swift: the step's own seconds
            step_time = to_float(raw)
        elif key == "train_speed(iter/s)" and step_time is None:
            speed = to_float(raw)
            if speed:
                step_time = 1.0 / speed
        elif key == "train_speed(s/it)" and step_time is None:
            step_time = to_float(raw)
    return step, total, step_time


# -- Megatron-LM: " [<time>] iteration   N/   M | consumed samples: ... | lm loss: ... |" -------

_MEGATRON_STEP = re.compile(r"\biteration\s{1,12}(\d{1,18})/\s{0,12}(\d{1,18}) \|")
_MEGATRON_FIELD = re.compile(r" ([a-z][a-z0-9 ()/_-]{0,60}): {0,16}([-+]?[\d.]{1,30}(?:[eE][-+]?\d{1,4})?) {0,8}\|")
# Megatron's field names -> triage metrics; "elapsed time per iteration (ms)" is the step time.
_MEGATRON_KEYS = {"lm loss": "loss", "lm_loss": "loss", "loss": "loss", "grad norm": "grad_norm",
                  "tokens per gpu per second (tgs)": "throughput",
                  "throughput per gpu (tflop/s/gpu)": ""}


def parse_megatron(text: str, arrival: float = 0.0) -> Parsed | None:
    if "iteration" not in text:
        return None
    m = _MEGATRON_STEP.search(text)
    if not m:
        return None
    values: dict[str, float] = {}
    for key, raw in _MEGATRON_FIELD.findall(text, m.end() - 2):
        value = to_float(raw)
        if value is None:
            continue
        if key == "elapsed time per iteration (ms)":
            values["step_time"] = value / 1000.0
        else:
            metric = _MEGATRON_KEYS.get(key)
            if metric and metric not in values:
                values[metric] = value
    return Parsed(int(m.group(1)), total=int(m.group(2)), time=stamp_time(text[:m.start()]),
                  metrics=_ordered(values))


# -- DeepSpeed: "[<asctime>] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, ..." --

_DS_STEP = re.compile(r"\bstep=(\d{1,18}), skipped=\d{1,18}, lr=")


def parse_deepspeed(text: str, arrival: float = 0.0) -> Parsed | None:
    if "step=" not in text:
        return None
    m = _DS_STEP.search(text)
    if not m:
        return None
    return Parsed(int(m.group(1)), time=stamp_time(text[:m.start()]))


# -- OpenRLHF's episode bar: "Episode [1/1]:  10%|#   | 3/30 [02:11<19:41, 43.77s/it, k=v]" ---

_ORLHF_BAR = re.compile(
    r"Episode \[(\d{1,9})/(\d{1,9})\]:\s{0,4}\d{1,3}%\|[^|]{0,200}\|\s{0,8}(\d{1,12})/(\d{1,12})"
    r"(?: \[([^\]]{0,2000})\])?")
_RATE = re.compile(r"([\d.]{1,20})(s/it|it/s)")
_POSTFIX = re.compile(r"([A-Za-z_][\w/]{0,80})=([^,\]\s]{1,80})")


def parse_openrlhf_bar(text: str, arrival: float = 0.0) -> Parsed | None:
    """The episode bar counts global steps: step = (episode - 1) x its total + its count. A bar
    at 0 (the first draw) is no step. Its postfix carries the step's status dict."""
    if "Episode [" not in text:
        return None
    m = _ORLHF_BAR.search(text)
    if not m:
        return None
    episode, episodes, done, per = (int(g) for g in m.groups()[:4])
    if done <= 0 or episode <= 0:
        return None
    extra = m.group(5) or ""
    pairs = _POSTFIX.findall(extra)
    metrics = dict(collect(pairs))
    rate = _RATE.search(extra)
    if rate and "step_time" not in metrics:
        value = to_float(rate.group(1))
        if value:
            metrics["step_time"] = value if rate.group(2) == "s/it" else 1.0 / value
    return Parsed((episode - 1) * per + done, total=episodes * per, metrics=_ordered(metrics))


def with_metric(metrics: tuple[tuple[str, float], ...], name: str,
                value: float) -> tuple[tuple[str, float], ...]:
    """``metrics`` plus one more, kept in TRIAGE_METRICS order."""
    values = dict(metrics)
    values[name] = value
    return _ordered(values)


# -- the parsers by the ids the framework registry names (rltui.frameworks StepFormat.parser) --

PARSERS = {
    "verl": parse_verl,
    "torchtitan": parse_torchtitan,
    "openrlhf": parse_openrlhf,
    "openrlhf-bar": parse_openrlhf_bar,
    "megatron": parse_megatron,
    "deepspeed": parse_deepspeed,
}

# Auto-detection: is this cleaned line a step in that format? (HF's check is stricter than its
# parser: a whole dict that carries an epoch.)
DETECTORS = {
    "areal": lambda text: parse_areal_header(text) is not None,
    "verl": lambda text: parse_verl(text) is not None,
    "torchtitan": lambda text: parse_torchtitan(text) is not None,
    "openrlhf": lambda text: parse_openrlhf(text, 0.0) is not None,
    "openrlhf-bar": lambda text: parse_openrlhf_bar(text) is not None,
    "megatron": lambda text: parse_megatron(text) is not None,
    "deepspeed": lambda text: parse_deepspeed(text) is not None,
    "hf": looks_hf,
}
