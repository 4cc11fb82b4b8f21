"""How an OOM report's suggestions read (rltui.diagnosis.oom.present): concrete values, "not
set (default N)" for a key the config leaves out, never Python's None or 'half'; and the
app's --job-config/--model-config options."""

from __future__ import annotations

import argparse

import pytest

from rltui.cli import build_parser
from rltui.cli.common import UsageError, oom_options
from rltui.diagnosis.oom import present
from rltui.diagnosis.oom.report import report_json, report_text, triage
from rltui.diagnosis.oom.suggest import HALF
from rltui.diagnosis.oom.types import JobConfig, Suggestion
from rltui.model import LogEvent

KEY = "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"


def s(key=KEY, current=None, proposed=4, default=False, **kw) -> Suggestion:
    return Suggestion(key=key, current=current, proposed=proposed, why="w", tradeoff="t",
                      current_is_default=default, **kw)


@pytest.mark.parametrize(("suggestion", "read", "current", "proposed"), [
    (s(current=8), True, "8", "4"),
    (s(key="a.gpu_memory_utilization", current=0.5, proposed=0.3, default=True), True,
     "not set (default 0.5)", "0.3"),
    (s(key="a.use_dynamic_bsz", current=False, proposed=True), True, "false", "true"),
    (s(current=None, proposed=HALF, default=True), True, "not set (no default)",
     "half the job's value"),
    (s(current=None, proposed=HALF, default=True), False, "unknown (config not read)",
     "half the job's value"),
    (s(current=None, proposed=4), True, "null (set so in the config)", "4"),
    (s(key="micro batch size", proposed="half"), False, "unknown (config not read)",
     "half the job's value"),
    (s(key="env:PYTORCH_CUDA_ALLOC_CONF", proposed="expandable_segments:True", default=True),
     False, "not set", "expandable_segments:True"),
])
def test_current_and_proposed_read_as_values(suggestion, read, current, proposed):
    assert present.current_text(suggestion, read) == current
    assert present.proposed_text(suggestion) == proposed


def test_estimate_reads_before_and_after_or_nothing():
    gib = 1 << 30
    assert present.estimate_text(s(need_before=10 * gib, need_after=8 * gib)) == \
        "10.00 GiB -> 8.00 GiB"
    assert present.estimate_text(s()) == ""


def test_an_unknown_framework_reads_in_words_and_the_json_says_what_was_read():
    event = LogEvent("cuda-oom", 1, 1, 0.0, "oom",
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    text = report_text(triage(event, [], JobConfig()))
    assert "micro batch size: unknown (config not read) -> half the job's value" in text
    assert "None" not in text and "'half'" not in text
    assert "config: not read (give --job-config FILE)" in text
    config = JobConfig(framework="verl", values={"actor_rollout_ref": {"rollout": {
        "log_prob_micro_batch_size_per_gpu": 8}}}, sources=("ppo.yaml",))
    doc = report_json(triage(event, [], config))
    assert doc["config_sources"] == ["ppo.yaml"]
    assert doc["suggestions"][0]["current"] == 8


@pytest.mark.parametrize("argv", [
    ["--job-config", "J", "--model-config", "M"],
    ["--job-config", "J", "--model-config", "M", "demo"],
    ["demo", "--job-config", "J", "--model-config", "M"],
    ["replay", "DIR", "--job-config", "J", "--model-config", "M"],
    ["diagnose", "--job-config", "J", "--model-config", "M"],
    ["oom", "--job-config", "J", "--model-config", "M"],
    ["oom", "--config", "J", "--model-config", "M"],
])
def test_the_app_and_its_commands_take_the_oom_options(argv):
    args = build_parser().parse_args(argv)
    assert (args.job_config, args.model_config) == ("J", "M")


def test_a_missing_config_is_a_usage_error_at_start(tmp_path):
    (tmp_path / "ppo.yaml").write_text("a: 1\n")
    given = argparse.Namespace(job_config=str(tmp_path / "ppo.yaml"), model_config=None)
    assert oom_options(given) == (str(tmp_path / "ppo.yaml"), None)
    with pytest.raises(UsageError, match="--model-config .*: not found"):
        oom_options(argparse.Namespace(job_config=None, model_config=str(tmp_path / "no")))
