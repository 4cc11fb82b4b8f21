"""Step parsers: each framework's real line shapes, auto-detection, the history scan, custom
parsers from the config, every fixture log, and arbitrary input that must never crash."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.model import LOG_FORMATS, TRIAGE_METRICS, StepRecord
from rltui.parsing.frameworks import METRIC_KEYS, to_float
from rltui.parsing.noise import strip_noise
from rltui.parsing.steps import (
    StepReader,
    compile_custom,
    detect_format,
    parsers_from_config,
    scan_steps,
)
from tests.importcheck import forbidden_loaded

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
ARRIVAL = datetime(2026, 5, 21, 19, 0, 0).timestamp()
E = "\x1b"


def local(*args) -> float:
    return datetime(*args).timestamp()


def feed_all(lines, fmt="auto", custom=(), arrival=ARRIVAL):
    reader = StepReader(fmt, custom)
    out = []
    for no, raw in enumerate(lines, 1):
        out += reader.feed(strip_noise(raw).text, no, arrival)
    return reader, out + reader.flush()


def read_fixture(name: str) -> str:
    # bytes, not read_text: universal newlines would turn tqdm's \r redraws into lines
    return (FIXTURES / name).read_bytes().decode("utf-8")


# -- one line per framework ------------------------------------------------------------------

VERL_REAL = ("step:0 - timing/gen:21.470 - timing/ref:4.360 - actor/entropy_loss:0.433 - actor/pg_loss:-0.005 - "
             "actor/grad_norm:1.992 - actor/lr(1e-4):0.010 - critic/score/mean:0.004 - critic/rewards/mean:0.004 - "
             "response_length/mean:239.133 - response_length/max:256.000")
TITAN_REAL = ("[rank0]:[titan] 2025-06-04 08:51:58,557 - root - INFO - step: 10  loss: 10.7069  "
              "memory: 30.99GiB(32.62%)  tps: 7,034  tflops: 407.35  mfu: 41.19%")

# (raw line, format detected, step, total, time, metrics expected exactly)
SINGLE = [
    (VERL_REAL, "verl", 0, None, None,
     {"loss": -0.005, "reward": 0.004, "grad_norm": 1.992, "response_length": 239.133}),
    ("(TaskRunner pid=2213) step:12 - actor/pg_loss:np.float64(-5.2e-05) - critic/score/mean:np.float64(0.4375) - "
     "timing_s/step:41.2204 - perf/throughput:2874.61 - actor/entropy:0.6812 - training/rollout_probs_diff_mean:0.0031",
     "verl", 12, None, None,
     {"loss": -5.2e-05, "reward": 0.4375, "step_time": 41.2204, "throughput": 2874.61, "entropy": 0.6812,
      "rollout_probs_diff": 0.0031}),
    ("step:3 - critic/rewards/mean:0.25 - critic/score/mean:0.5", "verl", 3, None, None, {"reward": 0.5}),
    ("step:7", "verl", 7, None, None, {}),
    ("step:8 - actor/pg_loss:nan - critic/score/mean:tensor(0.5, device='cuda:0') - actor/grad_norm:inf - "
     "actor/entropy:1.5e+00", "verl", 8, None, None, {"entropy": 1.5}),
    ("step:9 - actor/pg_loss:-0.1 - critic/sc", "verl", 9, None, None, {"loss": -0.1}),  # cut mid-write
    (TITAN_REAL, "torchtitan", 10, None, local(2025, 6, 4, 8, 51, 58, 557000),
     {"loss": 10.7069, "throughput": 7034.0}),
    (f"[titan] 2026-03-01 12:00:00,000 - root - INFO - {E}[31mstep:  5  {E}[32mloss:  7.1234  {E}[33mgrad_norm:  "
     f"1.2345  {E}[36mmemory: 38.12GiB(48.17%)  {E}[34mtps: 3,210  {E}[36mtflops: 150.12  {E}[35mmfu: 15.18%{E}[39m",
     "torchtitan", 5, None, local(2026, 3, 1, 12, 0, 0),
     {"loss": 7.1234, "grad_norm": 1.2345, "throughput": 3210.0}),
    ("  [2025-09-11 14:09:47,568581][I][components/metrics:437:log] step:  2  loss: 14.4458  grad_norm: 41.7880  "
     "memory:  8.44GiB(13.20%)  tps: 6,697  tflops: 62.15  mfu: 20.84%", "torchtitan", 2, None,
     local(2025, 9, 11, 14, 9, 47, 568581), {"loss": 14.4458, "grad_norm": 41.788, "throughput": 6697.0}),
    ("(PPOTrainer pid=1) INFO 05-13 19:25:45 ppo_trainer.py:547] ✨ Global step 3: {'policy_loss': -0.0213, "
     "'actor_lr': 5e-07, 'reward': np.float64(0.412), 'response_length': 541.2, 'vllm_kl': 0.00081, "
     "'entropy': 0.83, 'timing/step_total': 97.5}",
     "openrlhf", 3, None, local(2026, 5, 13, 19, 25, 45),
     {"loss": -0.0213, "reward": 0.412, "response_length": 541.2, "rollout_probs_diff": 0.00081,
      "entropy": 0.83, "step_time": 97.5}),
    ("INFO 05-13 19:25:45 ppo_trainer.py:610] Global step 4 [replay]: {'policy_loss': 0.0011, 'reward': 0.5}",
     "openrlhf", 4, None, local(2026, 5, 13, 19, 25, 45), {"loss": 0.0011, "reward": 0.5}),
    ("(AReaL) 20260521-18:37:16.123 StatsLogger INFO: Epoch 1/1 Step 3/100 Train step 3/100 done.",
     "areal", 3, 100, local(2026, 5, 21, 18, 37, 16, 123000), {}),
    ("[AReaL] 20260521-18:37:16.123 StatsLogger INFO: Epoch 2/3 Step 4/50 Train step 54/150 done.",
     "areal", 54, 150, local(2026, 5, 21, 18, 37, 16, 123000), {}),
    ("20250101-00:00:01.000 StatsLogger INFO: Epoch 1/1 Step 7/9 done.", "areal", 7, 9,
     local(2025, 1, 1, 0, 0, 1), {}),
    ("{'loss': 1.2345, 'grad_norm': 0.87, 'learning_rate': 4.9e-05, 'epoch': 0.02}", "hf", 1, None, None,
     {"loss": 1.2345, "grad_norm": 0.87}),
    ("{'loss': 0.0123, 'grad_norm': 0.45, 'learning_rate': 1e-06, 'completion_length': 312.5, "
     "'rewards/accuracy_reward': 0.25, 'reward': 0.25, 'reward_std': 0.3, 'kl': 0.0, 'entropy': 0.61, 'epoch': 0.01}",
     "hf", 1, None, None, {"loss": 0.0123, "grad_norm": 0.45, "response_length": 312.5, "reward": 0.25,
                           "entropy": 0.61}),
]


@pytest.mark.parametrize("raw,fmt,step,total,when,metrics", SINGLE, ids=[s[0][:50] for s in SINGLE])
def test_single_line(raw, fmt, step, total, when, metrics):
    reader, records = feed_all([raw])
    assert reader.format == fmt
    assert len(records) == 1
    record = records[0]
    assert (record.step, record.total, record.line_no, record.arrival) == (step, total, 1, ARRIVAL)
    assert record.time == (pytest.approx(when) if when is not None else None)
    assert dict(record.metrics) == pytest.approx(metrics)
    assert [name for name, _ in record.metrics] == [m for m in TRIAGE_METRICS if m in metrics]
    # a fixed format reads the same line the same way
    assert feed_all([raw], fmt)[1] == records


NOT_STEPS = [
    "[titan] 2026-03-01 12:00:40,998 - root - INFO - validate step:  5  loss:  8.8812  tps: 21,044",
    "{'eval_loss': 1.8421, 'eval_runtime': 1.203, 'epoch': 0.67}",
    "{'train_runtime': 30.4, 'train_samples_per_second': 7.9, 'train_loss': 1.84, 'epoch': 1.0}",
    "{'actor_rollout_ref': {'actor': {'strategy': 'fsdp', 'ppo_mini_batch_size': 256}}}",
    "(AReaL) 20260521-18:37:02.000 StatsLogger INFO: Training completes! Total time elapsed 120.55.",
    "global_step:5 - x:1",
    "step: 5 - loss: 1",
    "step:-1 - actor/pg_loss:0.1",
    "step:" + "9" * 40 + " - actor/pg_loss:0.1",
    "step:²³ - x:1",
    "Global step x: {}",
    "Training Progress:   3%|▎         | 40/1245 [26:41<13:01:52, 40.12s/it]",
    "",
    "x" * 1_000_000,
    "step:" + "- " * 500_000,
]


@pytest.mark.parametrize("raw", NOT_STEPS, ids=[r[:40] for r in NOT_STEPS])
def test_not_a_step(raw):
    _, records = feed_all([raw])
    assert records == []
    for fmt in LOG_FORMATS:
        assert feed_all([raw], fmt)[1] == []


def test_megabyte_step_line():
    line = "step:4 - " + " - ".join(f"k{i}:{i}" for i in range(100_000)) + " - actor/pg_loss:0.5"
    assert len(line) > 1_000_000
    (record,) = feed_all([line])[1]
    assert (record.step, record.metrics) == (4, (("loss", 0.5),))


def test_hf_counts_logging_steps_not_dicts():
    lines = ["{'loss': 2.0, 'learning_rate': 1e-05, 'epoch': 0.1}",
             "{'eval_loss': 1.0, 'epoch': 0.1}",
             "{'loss': 1.0, 'learning_rate': 1e-05, 'epoch': 0.2}",
             "{'train_runtime': 1.0, 'train_loss': 1.5, 'epoch': 0.2}"]
    _, records = feed_all(lines)
    assert [(r.step, r.line_no) for r in records] == [(1, 1), (2, 3)]


def test_openrlhf_year_comes_from_arrival():
    line = "INFO 12-31 23:59:00 ppo_trainer.py:547] ✨ Global step 9: {'reward': 1.0}"
    _, (late,) = feed_all([line], arrival=local(2026, 1, 1, 0, 5))
    assert late.time == local(2025, 12, 31, 23, 59)  # read just after New Year
    _, (same,) = feed_all([line], arrival=local(2025, 12, 31, 23, 59, 30))
    assert same.time == local(2025, 12, 31, 23, 59)


def test_to_float_forms():
    assert to_float("np.float64(0.1)") == 0.1
    assert to_float("numpy.int64(3)") == 3.0
    assert to_float("-5e-06") == -5e-06
    assert to_float("3,210") == 3210.0
    assert to_float("'0.5'") == 0.5
    for bad in ("nan", "inf", "-inf", "np.float64(nan)", "tensor(0.5)", "(1)", "x", "", "1" * 100, "np.float64(0.1"):
        assert to_float(bad) is None


def test_metric_table_is_consistent():
    assert set(METRIC_KEYS) == set(TRIAGE_METRICS)
    keys = [key for keys in METRIC_KEYS.values() for key in keys]
    assert len(keys) == len(set(keys)), "a framework key maps to two metrics"


# -- AReaL tables ----------------------------------------------------------------------------

AREAL_HEAD = "(AReaL) 20260521-18:37:16.123 StatsLogger INFO: Epoch 1/1 Step {n}/100 Train step {n}/100 done."
AREAL_TABLE = [
    "(AReaL) 20260521-18:37:16.123 StatsLogger INFO: Stats (1/1):",
    "(AReaL) 20260521-18:37:16.123 StatsLogger INFO: ",
    "╒════════╤═════════════╤═════════╤════════════╕",
    "│ ppo_actor/task_reward/avg       │  4.3750e-01 │ ppo_actor/update/grad_norm │ 2.5704e+00 │",
    "├────────┼─────────────┼─────────┼────────────┤",
    "│ ppo_actor/update/actor_loss/avg │ -2.5289e-04 │ timeperf/train_step │ 4.1772e+00 │",
    "├────────┼─────────────┼─────────┼────────────┤",
    "│ ppo_actor/update/entropy/avg    │  3.5120e-01 │                     │            │",
    "╘════════╧═════════════╧═════════╧════════════╛",
]
AREAL_METRICS = {"reward": 0.4375, "grad_norm": 2.5704, "loss": -2.5289e-04, "step_time": 4.1772, "entropy": 0.3512}


def test_areal_table_attaches_to_its_step():
    reader = StepReader()
    out = reader.feed(strip_noise(AREAL_HEAD.format(n=3)).text, 10, ARRIVAL)
    assert out == [] and reader.format == "areal"
    for no, line in enumerate(AREAL_TABLE[:-1], 11):
        assert reader.feed(line, no, ARRIVAL + 1) == []
    (record,) = reader.feed(AREAL_TABLE[-1], 19, ARRIVAL + 1)
    assert (record.step, record.total, record.line_no, record.arrival) == (3, 100, 10, ARRIVAL)
    assert dict(record.metrics) == pytest.approx(AREAL_METRICS)
    assert reader.flush() == []


def test_areal_open_table_is_flushed_and_next_header_closes_previous():
    _, records = feed_all([AREAL_HEAD.format(n=1), *AREAL_TABLE[:5], AREAL_HEAD.format(n=2), *AREAL_TABLE[:4]])
    assert [(r.step, r.line_no) for r in records] == [(1, 1), (2, 7)]
    assert dict(records[0].metrics) == pytest.approx({"reward": 0.4375, "grad_norm": 2.5704})
    assert dict(records[1].metrics) == pytest.approx({"reward": 0.4375, "grad_norm": 2.5704})


def test_areal_gives_up_on_a_table_that_never_comes():
    reader = StepReader("areal")
    reader.feed(AREAL_HEAD.format(n=5), 1, ARRIVAL)
    out = []
    for no in range(2, 200):
        out += reader.feed("(AReaL) 20260521-18:37:17.000 PPOActor INFO: unrelated", no, ARRIVAL)
    assert [r.step for r in out] == [5]


def test_areal_second_stats_table_is_not_a_new_step():
    lines = [AREAL_HEAD.format(n=4), *AREAL_TABLE, AREAL_TABLE[0].replace("(1/1)", "(2/2)"), *AREAL_TABLE[1:]]
    _, records = feed_all(lines)
    assert [r.step for r in records] == [4]


# -- fixtures --------------------------------------------------------------------------------

# file -> (format, [(step, line_no)], {step: {metric: value}} spot checks)
FIXTURE_STEPS = {
    "verl-ray.log": ("verl", [(1, 7), (2, 9), (3, 11), (4, 13), (5, 15), (6, 18)],
                     {1: {"loss": -0.0123, "reward": 0.3125, "entropy": 0.6812, "grad_norm": 0.4871,
                          "step_time": 41.2204, "throughput": 2874.61, "response_length": 512.34,
                          "rollout_probs_diff": 0.0031},
                      6: {"entropy": 0.654, "step_time": 40.0021, "throughput": 2998.1}}),
    "verl-quickstart.log": ("verl", [(0, 6), (1, 7), (2, 8), (3, 9), (4, 10), (5, 11), (6, 13)],
                            {0: {"loss": -0.005, "reward": 0.004, "grad_norm": 1.992, "response_length": 239.133},
                             6: {"loss": -0.001}}),
    "areal-main.log": ("areal", [(1, 3), (2, 14), (3, 25)],
                       {2: {"loss": 0.0010113, "reward": 0.375, "entropy": 0.3398, "grad_norm": 1.9981,
                            "step_time": 4.0236}}),
    "areal-merged.log": ("areal", [(1, 5), (2, 16)],
                         {2: {"loss": -0.0012, "reward": 0.28125, "entropy": 0.4, "grad_norm": 2.8,
                              "step_time": 5.05}}),
    "openrlhf.log": ("openrlhf", [(1, 7), (2, 9), (3, 11), (4, 13)],
                     {3: {"loss": -0.0071, "reward": 0.468, "entropy": 0.66, "step_time": 96.94,
                          "response_length": 517.3, "rollout_probs_diff": 0.00091},
                      4: {"loss": 0.0011, "reward": 0.5, "step_time": 97.0}}),
    "torchtitan-ansi.log": ("torchtitan", [(1, 6), (2, 8), (3, 9), (4, 10), (5, 11)],
                            {5: {"loss": 8.9196, "grad_norm": 4.0045, "throughput": 7014.0}}),
    "torchtitan-torchrun.log": ("torchtitan", [(1, 5), (10, 7), (20, 8), (30, 9)],
                                {10: {"loss": 10.7069, "throughput": 7034.0}}),
    "hf-trainer.log": ("hf", [(1, 7), (2, 9), (3, 10)], {3: {"loss": 1.6017, "grad_norm": 0.9921}}),
    "trl-grpo.log": ("hf", [(1, 4), (2, 5), (3, 7), (4, 8), (5, 9), (6, 10)],
                     {1: {"loss": 0.0123, "reward": 0.25, "entropy": 0.612, "grad_norm": 0.4612,
                          "response_length": 312.5, "rollout_probs_diff": 0.0021}}),
    "torchrun-hf.log": ("hf", [(1, 9), (2, 11), (3, 12), (4, 13)], {4: {"loss": 2.3327, "grad_norm": 1.7702}}),
}
FIXTURE_TIMES = {
    "areal-main.log": (1, local(2026, 5, 21, 18, 36, 12, 507000)),
    "openrlhf.log": (1, local(2026, 8, 13, 19, 23, 41)),  # no year in the line: the arrival's
    "torchtitan-torchrun.log": (1, local(2025, 6, 4, 8, 51, 48, 74000)),
}


def test_every_fixture_is_listed():
    mine = {p.name for p in FIXTURES.glob("*.log") if not p.name.startswith("event-")}
    assert mine == set(FIXTURE_STEPS)


@pytest.mark.parametrize("name", sorted(FIXTURE_STEPS))
def test_fixture_parses_to_expected_steps(name):
    fmt, steps, spots = FIXTURE_STEPS[name]
    text = read_fixture(name)
    arrival = local(2026, 9, 1, 12, 0)
    reader, records = feed_all(text.split("\n")[:-1], arrival=arrival)
    assert reader.format == fmt
    assert [(r.step, r.line_no) for r in records] == steps
    by_step = {r.step: r for r in records}
    for step, metrics in spots.items():
        assert dict(by_step[step].metrics) == pytest.approx(metrics)
    if name in FIXTURE_TIMES:
        step, when = FIXTURE_TIMES[name]
        assert by_step[step].time == pytest.approx(when)
    # the catch-up path finds exactly the same, whole or in pieces, and detects the same format
    assert scan_steps(text, "auto", 1, arrival) == records
    assert scan_steps(text, fmt, 1, arrival) == records
    assert detect_format(text) == fmt
    lines = text.split("\n")
    for cut in (1, 5, len(lines) // 2):
        reader = StepReader()
        head, tail = "\n".join(lines[:cut]) + "\n", "\n".join(lines[cut:])
        pieces = reader.scan(head, 1, arrival) + reader.scan(tail, cut + 1, arrival) + reader.flush()
        assert pieces == records, f"cut after line {cut}"


# -- the history scan ------------------------------------------------------------------------

def test_scan_counts_lines_from_first_line_no_and_handles_crlf():
    chunk = "noise\r\nstep:1 - actor/pg_loss:0.5\r\n\r\nmore noise\r\nstep:2 - actor/pg_loss:0.25"  # no final newline
    records = scan_steps(chunk, "auto", 1001, ARRIVAL)
    assert [(r.step, r.line_no, r.metrics) for r in records] == [
        (1, 1002, (("loss", 0.5),)), (2, 1005, (("loss", 0.25),))]


def test_scan_with_fixed_format_ignores_other_formats():
    chunk = "{'loss': 1.0, 'learning_rate': 1.0, 'epoch': 0.1}\nstep:3 - actor/pg_loss:0.1\n"
    assert [r.step for r in scan_steps(chunk, "verl", 1, ARRIVAL)] == [3]
    assert [r.step for r in scan_steps(chunk, "hf", 1, ARRIVAL)] == [1]
    assert [r.step for r in scan_steps(chunk, "auto", 1, ARRIVAL)] == [1]  # the first step line decides


def test_scan_empty_and_unknown():
    assert scan_steps("", "auto", 1, ARRIVAL) == []
    assert scan_steps("hello\nworld\n", "auto", 1, ARRIVAL) == []
    assert detect_format("hello\n") == "unknown"
    with pytest.raises(ValueError):
        StepReader("jax")


# -- custom parsers --------------------------------------------------------------------------

def test_custom_parser_reads_named_groups():
    parser = compile_custom(
        "mytrainer",
        r"^(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) it (?P<step>\d+)/(?P<total>\d+) "
        r"loss=(?P<loss>\S+) r=(?P<rew>\S+)",
        {"rew": "reward"},
    )
    line = "2026-05-21 18:00:00 it 12/500 loss=np.float64(0.25) r=1,000.5"
    reader, records = feed_all(["noise", line], custom=[parser])
    assert reader.format == "custom"
    assert records == [StepRecord(12, 2, ARRIVAL, local(2026, 5, 21, 18), 500,
                                  (("loss", 0.25), ("reward", 1000.5)))]
    assert scan_steps("noise\n" + line + "\n", "custom", 1, ARRIVAL) == []  # scan_steps has no parsers
    reader = StepReader("auto", [parser])
    assert reader.scan("noise\n" + line + "\n", 1, ARRIVAL) == records


def test_custom_parsers_are_tried_before_frameworks():
    parser = compile_custom("verl-like", r"^step:(?P<step>\d+)")
    reader, records = feed_all(["step:5 - actor/pg_loss:0.1"], custom=[parser])
    assert reader.format == "custom"
    assert [(r.step, r.metrics) for r in records] == [(5, ())]


def test_custom_epoch_time_and_bad_values():
    parser = compile_custom("p", r"s=(?P<step>\S+) t=(?P<time>\S+) l=(?P<loss>\S+)")
    _, records = feed_all(["s=3 t=1779000000.5 l=nan", "s=x t=0 l=1", "s=4 t=junk l=0.5"], custom=[parser])
    assert [(r.step, r.time, r.metrics) for r in records] == [(3, 1779000000.5, ()), (4, None, (("loss", 0.5),))]


BAD_CUSTOM = [
    (r"(?P<step>\d+", "does not compile"),
    (r"loss=(?P<loss>\S+)", "no (?P<step>"),
    (r"(?P<step>\d+) (?P<lr>\S+)", "'lr' is not a metric name"),
]


@pytest.mark.parametrize("pattern,says", BAD_CUSTOM)
def test_bad_custom_regex_names_parser_regex_and_error(pattern, says):
    with pytest.raises(ValueError) as info:
        compile_custom("broken", pattern)
    message = str(info.value)
    assert "'broken'" in message and repr(pattern) in message and says in message


def test_bad_metric_renames():
    with pytest.raises(ValueError, match="'nope' is not a metric"):
        compile_custom("p", r"(?P<step>\d+) (?P<x>\S+)", {"x": "nope"})
    with pytest.raises(ValueError, match="lacks"):
        compile_custom("p", r"(?P<step>\d+)", {"x": "loss"})
    with pytest.raises(ValueError, match="not a metric"):
        compile_custom("p", r"(?P<step>\d+) (?P<total>\d+)", {"total": "loss"})


def test_parsers_from_config():
    parsers = parsers_from_config([
        {"name": "a", "regex": r"A (?P<step>\d+) (?P<l>\S+)", "metrics": {"l": "loss"}},
        {"name": "b", "regex": r"B (?P<step>\d+)"},
    ])
    assert [p.name for p in parsers] == ["a", "b"]
    assert parsers[0].metrics == (("l", "loss"),)


@pytest.mark.parametrize("items,says", [
    ({"name": "a"}, "must be a list"),
    ([["a"]], r"logs.parsers\[0\] must be a mapping"),
    ([{"regex": "(?P<step>1)"}], r"logs.parsers\[0\]: name"),
    ([{"name": "a", "regex": "(?P<step>1)", "metric": {}}], "'a': unknown key"),
    ([{"name": "a", "regex": ""}], "'a': regex must be"),
    ([{"name": "a", "regex": "(?P<step>1)", "metrics": ["loss"]}], "'a': metrics must map"),
    ([{"name": "a", "regex": "(?P<step>1)"}, {"name": "a", "regex": "(?P<step>2)"}], "'a': defined twice"),
    ([{"name": "a", "regex": "(?P<step>1"}], "'a'.*does not compile"),
])
def test_parsers_from_config_errors_name_the_parser(items, says):
    with pytest.raises(ValueError, match=says):
        parsers_from_config(items)


# -- arbitrary input never crashes -----------------------------------------------------------

texty = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)
stepish = st.builds(
    lambda head, body: head + body,
    st.sampled_from(["step:", "step:1 - ", "step:  3  loss: ", "Global step 2: {'", "{'loss': ", "│ ", "╘",
                     "Epoch 1/1 Step 3/9 Train step 3/9 done.", "(AReaL) 20260521-18:37:16.123 ", "[rank0]:",
                     "INFO 02-30 25:61:61 x] Global step 1: {", "[titan] 9999-99-99 99:99:99,9 - step: 1  loss: "]),
    texty,
)
FORMATS = ["auto", *LOG_FORMATS]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(texty, stepish), max_size=8), st.sampled_from(FORMATS))
def test_feed_never_raises(lines, fmt):
    custom = [compile_custom("c", r"(?P<step>\d+) (?P<loss>\S+)")] if fmt in ("auto", "custom") else []
    reader = StepReader(fmt, custom)
    for no, line in enumerate(lines, 1):
        for record in reader.feed(strip_noise(line).text, no, ARRIVAL):
            assert isinstance(record, StepRecord) and record.step >= 0
            assert all(name in TRIAGE_METRICS for name, _ in record.metrics)
    reader.flush()
    assert reader.format in LOG_FORMATS


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(texty, stepish), max_size=8), st.sampled_from(FORMATS))
def test_scan_never_raises_and_agrees_with_feed(lines, fmt):
    chunk = "\n".join(lines)
    records = scan_steps(chunk, fmt, 1, ARRIVAL)
    # the scan only skips lines that cannot be steps, so it finds what feeding every line finds
    reader = StepReader(fmt)
    fed = []
    for no, line in enumerate(chunk.split("\n"), 1):
        fed += reader.feed(strip_noise(line).text, no, ARRIVAL)
    assert records == fed + reader.flush()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600), st.sampled_from(FORMATS))
def test_arbitrary_bytes_never_raise(data, fmt):
    text = data.decode("utf-8", errors="replace")
    scan_steps(text, fmt, 1, ARRIVAL)
    reader = StepReader(fmt)
    for line in text.split("\n"):
        reader.feed(strip_noise(line).text, 1, ARRIVAL)
    reader.flush()
    detect_format(text)


def test_parsing_modules_stay_pure():
    modules = ["rltui.parsing.noise", "rltui.parsing.steps", "rltui.parsing.frameworks"]
    assert forbidden_loaded(modules, ["textual", "rich", "pynvml", "psutil", "subprocess"]) == []


def test_docs_list_every_metric_key():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "log-formats.md").read_text(encoding="utf-8")
    for metric, keys in METRIC_KEYS.items():
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{metric}` |"))
        assert row == f"| `{metric}` | " + ", ".join(f"`{k}`" for k in keys) + " |"


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("event-*.log")))
def test_event_samples_scan_like_feed(name):
    # the event parsers' samples hold tracebacks and banners between step lines: whatever the
    # step parsers make of them, the catch-up scan and the live path must agree
    text = read_fixture(name)
    _, fed = feed_all(text.split("\n"))
    assert scan_steps(text, "auto", 1, ARRIVAL) == fed
