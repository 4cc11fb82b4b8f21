"""``run(spec)`` against the sample agents and the loopback chat server: one real worker process
per step, real HTTP on 127.0.0.1. Small shapes (4 prompts x 4 samples) and short timeouts only
where a run is meant to hang."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import pytest

from rltui.checks.progress import Progress
from rltui.checks.workflow import RunResult, WorkflowSpec, run
from tests.fakes.agents.harness import AGENTS, chat_server

pytestmark = pytest.mark.integration

ROWS = [{"prompt": p} for p in ("alpha", "beta", "gamma", "delta")]
SMALL = {"global_bs": 8, "rollout_dp_size": 2, "group_size": 4}  # 4 prompts x 4 = 16 at once
# The per-run timeout where some runs hang for good and the others must finish: a hung run ends
# only at the timeout, whatever the machine's speed, and a finishing run (one loopback HTTP call
# the server answers at once) has hundreds of times what it needs, even on a loaded machine.
HANG_TIMEOUT = 3.0


@pytest.fixture(scope="module")
def server():
    with chat_server() as url:
        yield url


def check(server, target, *, progress=None, cancel=None, **kw):
    kw.setdefault("rows", ROWS)
    kw.setdefault("timeout", 30.0)
    for key, value in SMALL.items():
        kw.setdefault(key, value)
    spec = WorkflowSpec(target=target, base_url=server, paths=(str(AGENTS),), **kw)
    report = run(spec, progress=progress, cancel=cancel)
    json.dumps(report.to_json(), allow_nan=False)  # always valid, strict JSON
    return report


def test_a_good_workflow_passes_with_progress_for_every_run(server):
    seen: list[Progress] = []
    report = check(server, "agent_echo:EchoAgent", progress=seen.append)
    doc = report.to_json()
    assert doc["verdict"] == "passed", report.to_text()
    assert report.exit_code() == 0
    assert doc["single"]["ok"] and doc["single"]["reward"] == 1.0
    c = doc["concurrency"]
    assert (c["requested"], c["completed"], c["errors"], c["timeouts"]) == (16, 16, {}, 0)
    assert c["p50"] <= c["p95"] <= c["max"] and c["throughput"] > 0
    assert doc["sequential_vs_concurrent_agree"] is True
    assert doc["agreement"]["compared"] == 4
    assert doc["server"]["reachable"] is True
    phases = [p.phase for p in seen]
    assert phases[0] == "load" and phases[-1] == "done"
    assert {"single", "sequential", "concurrent"} <= set(phases)
    items = [p.item for p in seen if p.phase == "concurrent" and p.item is not None]
    assert sorted(i.run for i in items) == list(range(16))
    assert all(isinstance(i, RunResult) and i.status == "ok" for i in items)
    last = [p for p in seen if p.phase == "concurrent"][-1]
    assert (last.done, last.total) == (16, 16)


def test_dict_rewards_and_constructor_kwargs(server):
    report = check(server, "agent_echo:DictAgent", init_kwargs={"weight": 2.0})
    assert report.verdict == "passed", report.to_text()
    assert report.single.reward == {"correct": 2.0, "length": len("echo: alpha")}


def test_a_thread_lock_across_an_await_blocks_the_loop_and_is_named(server):
    report = check(server, "agent_thread_lock:ThreadLockAgent", timeout=HANG_TIMEOUT,
                   loop_block_s=0.2)
    doc = report.to_json()
    assert doc["single"]["ok"], "one run at a time never meets the lock twice"
    block = doc["loop_blocked"]
    assert block["step"] == "concurrent" and block["recovered"] is False
    assert block["where"]["file"].endswith("agent_thread_lock.py")
    assert "_LOCK" in block["where"]["code"]
    assert block["stack"][-1]["function"] == "run"
    states = {g["state"] for g in block["tasks"]}
    assert "running" in states, "the task that holds the loop is shown"
    assert doc["concurrency"]["timeouts"] == 16 and doc["concurrency"]["completed"] == 0
    assert doc["partial"] is True
    assert report.exit_code() == 1
    assert [f["id"] for f in doc["findings"]][:2] == ["loop-blocked", "timeouts"]


def test_an_event_nobody_sets_deadlocks_only_under_concurrency(server):
    report = check(server, "agent_event:SharedCacheAgent", timeout=HANG_TIMEOUT)
    doc = report.to_json()
    assert doc["single"]["ok"] and doc["loop_blocked"] is None
    c = doc["concurrency"]
    assert (c["completed"], c["timeouts"]) == (1, 15)
    groups = doc["pending_tasks"]["groups"]
    assert groups[0]["count"] == 15 and groups[0]["waiting_on"] == "Event.wait"
    assert groups[0]["where"].startswith("agent_event.py:")
    assert "self.ready.wait()" in groups[0]["frames"][0]["code"]
    assert groups[0]["runs"] == list(range(1, 16))
    assert report.exit_code() == 1


def test_errors_above_some_concurrency_are_grouped_by_type(server):
    report = check(server, "agent_pool:PoolAgent")
    doc = report.to_json()
    assert doc["single"]["ok"]
    errors = doc["concurrency"]["errors"]
    assert list(errors) == ["agent_pool.PoolExhausted"]
    assert errors["agent_pool.PoolExhausted"]["count"] == 12
    assert errors["agent_pool.PoolExhausted"]["message"] == \
        "connection pool exhausted (4 in use)"
    assert "raise PoolExhausted" in errors["agent_pool.PoolExhausted"]["traceback"]
    assert doc["concurrency"]["completed"] == 4
    assert "(the single run passed)" in doc["findings"][0]["title"]


def test_invalid_rewards_are_listed_with_their_run(server):
    rows = [{"prompt": "ok"}, {"prompt": "s", "kind": "string"}, {"prompt": "n", "kind": "nan"},
            {"prompt": "d", "kind": "dict_bad"}, {"prompt": "b", "kind": "bool"}]
    report = check(server, "agent_bad_reward:BadRewardAgent", rows=rows, global_bs=10)
    doc = report.to_json()
    assert doc["single"]["ok"]
    concurrent = {(i["prompt"], i["reason"]) for i in doc["invalid_rewards"]
                  if i["step"] == "concurrent"}
    assert concurrent == {(1, "str is not a number"), (2, "nan is not a finite number"),
                          (3, "key 'format': str is not a number"),
                          (4, "a bool is not a reward (True would train as 1.0); return a "
                              "float")}
    assert len([i for i in doc["invalid_rewards"] if i["step"] == "concurrent"]) == 16
    assert {r["reward"] for r in doc["runs"] if r["prompt"] > 0} == {None}
    assert report.exit_code() == 1


def test_state_leaking_between_runs_shows_as_disagreement(server):
    report = check(server, "agent_leaky:LeakyAgent")
    doc = report.to_json()
    assert doc["sequential_vs_concurrent_agree"] is False
    bad = doc["agreement"]["disagreements"]
    assert [d["prompt"] for d in bad] == [0, 1, 2]
    assert all(d["sequential"] == 1.0 and set(d["concurrent"]) == {0.0} for d in bad)
    assert "sequential-vs-concurrent" in [f["id"] for f in doc["findings"]]


def test_a_worker_killed_mid_step_keeps_the_runs_before_it(server):
    rows = ROWS[:3] + [{"prompt": "boom", "crash": True}]
    report = check(server, "agent_crash:CrashAgent", rows=rows)
    doc = report.to_json()
    assert doc["worker_end"]["reason"] == "crashed"
    assert doc["worker_end"]["how"] == "killed by signal SIGKILL"
    assert doc["partial"] and doc["verdict"] == "could_not_finish"
    c = doc["concurrency"]
    assert (c["completed"], c["unfinished"]) == (12, 4)
    assert len(doc["sequential"]) == 4
    assert report.exit_code() == 3


def test_cancel_from_the_progress_callback_keeps_partial_results(server):
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.phase == "concurrent" and p.done >= 3:
            cancel.set()

    report = check(server, "agent_echo:EchoAgent", progress=progress, cancel=cancel,
                   concurrency=2, extra_kwargs={"model": "echo@0.2"})
    doc = report.to_json()
    assert doc["partial"] and "cancelled during the concurrent step" in doc["partial_reason"]
    c = doc["concurrency"]
    assert c["completed"] >= 3 and c["completed"] + c["unfinished"] == 16
    assert doc["single"]["ok"] and len(doc["sequential"]) == 4
    assert report.exit_code() == 3


def test_cancelling_a_stuck_check_still_shows_where_the_runs_wait(server):
    cancel = threading.Event()

    def progress(p: Progress) -> None:
        if p.phase == "concurrent" and p.done == 1:  # run 0 done, the others wait forever
            cancel.set()

    report = check(server, "agent_event:SharedCacheAgent", progress=progress, cancel=cancel)
    pending = report.to_json()["pending_tasks"]
    assert pending["why"] == "cancelled" and pending["step"] == "concurrent"
    assert pending["groups"][0]["count"] == 15
    assert pending["groups"][0]["waiting_on"] == "Event.wait"
    assert "Pending tasks when cancelled" in report.to_text()
    assert report.exit_code() == 3


def test_cancel_before_anything_runs(server):
    cancel = threading.Event()
    cancel.set()
    report = check(server, "agent_echo:EchoAgent", cancel=cancel)
    assert report.partial and report.single is None and report.worker is not None
    assert report.to_json()["single"]["status"] == "not_run"
    assert report.to_json()["worker"] == {}, "no worker was started"
    assert report.concurrency_json()["skipped"].startswith("not run")
    assert report.exit_code() == 3


def test_a_sync_http_call_blocks_the_loop_but_recovers(server):
    """Each run holds the loop for at least the server's 1 s delay, five times --loop-block, so
    every run's block is seen. The numbers asserted hold by construction, not by speed: a block
    is reported only after --loop-block without an answer, and its length is measured later,
    from the same ping."""
    report = check(server, "agent_sync_http:SyncHttpAgent", rows=ROWS[:2], global_bs=2,
                   rollout_dp_size=1, group_size=1, loop_block_s=0.2,
                   extra_kwargs={"model": "echo@1"})
    doc = report.to_json()
    assert doc["concurrency"]["completed"] == 2 and not doc["partial"]
    assert doc["loop_blocks"]
    for block in doc["loop_blocks"]:
        assert block["recovered"] and block["blocked_s"] >= block["for_s"] >= 0.2
        assert block["where"]["file"].endswith("agent_sync_http.py")
        assert "urllib.request.urlopen(request" in block["where"]["code"]
    assert [f["id"] for f in doc["findings"]] == ["loop-blocked"]
    assert report.exit_code() == 1


def test_native_code_holding_the_gil_is_ended_as_silent(server):
    report = check(server, "agent_gil:RegexAgent", silence_s=2.0)
    doc = report.to_json()
    assert doc["worker_end"]["reason"] == "silent"
    assert doc["single"]["status"] == "timeout"
    assert doc["concurrency"]["skipped"].startswith("step one failed")
    assert report.exit_code() == 3


def test_a_failing_single_run_skips_the_concurrent_step_unless_forced(server):
    report = check(server, "agent_echo:KeyInErrorAgent", api_key="sk-test-abcdef123456")
    doc = report.to_json()
    assert doc["single"]["ok"] is False
    assert doc["single"]["error"] == "PermissionError: login refused for key ***"
    assert doc["concurrency"]["requested"] == 16 and doc["concurrency"]["completed"] == 0
    assert doc["concurrency"]["skipped"].startswith("step one failed")
    forced = check(server, "agent_echo:KeyInErrorAgent", api_key="sk-test-abcdef123456",
                   force=True).to_json()
    assert forced["concurrency"]["errors"]["PermissionError"]["count"] == 16
    for d in (doc, forced):
        assert "abcdef123456" not in json.dumps(d)


def test_a_server_that_is_down_is_said_first_and_could_not_finish(server):
    with chat_server() as url:
        down = url
    report = check(down, "agent_echo:EchoAgent")
    doc = report.to_json()
    assert doc["server"]["reachable"] is False
    assert "ConnectionRefusedError" in doc["server"]["error"]
    # the openai SDK's own words, and what it hides: the HTTP client's error under it
    assert doc["single"]["error"].startswith("openai.APIConnectionError: Connection error. "
                                             "(from ")
    assert "ConnectError: All connection attempts failed)" in doc["single"]["error"]
    assert [f["id"] for f in doc["findings"]][:2] == ["server-unreachable", "single-run-failed"]
    assert doc["verdict"] == "could_not_finish" and report.exit_code() == 3
    assert doc["partial"] and "does not accept connections" in doc["partial_reason"]
    assert doc["concurrency"]["skipped"].startswith("step one failed")


def test_load_errors_are_setup_errors_with_the_traceback(server):
    report = check(server, "agent_shapes:BadInit")
    assert report.setup_error["kind"] == "init_error"
    assert "tokenizer path is missing" in report.setup_error["traceback"]
    assert report.single is None and report.exit_code() == 2


def test_the_worker_sees_only_its_own_modules_of_rltui(server):
    report = check(server, "agent_shapes:IsolationProbe", sequential_prompts=0, global_bs=2,
                   group_size=1)
    assert report.single.reward == {"rltui_cli": 0.0, "textual": 1.0, "rltui_worker": 1.0,
                                    "rewards_is_ours": 0.0}


def test_the_worker_runs_under_the_workflow_s_own_interpreter(server, tmp_path):
    """A bare venv (no rltui, no textual): the worker needs only the standard library, and
    nothing of rltui's environment leaks into the workflow's."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")],
                   check=True, timeout=120)
    python = tmp_path / "env" / "bin" / "python"
    report = check(server, "agent_shapes:IsolationProbe", python=str(python), global_bs=2,
                   group_size=1, sequential_prompts=0)
    assert report.single.reward == {"rltui_cli": 0.0, "textual": 0.0, "rltui_worker": 1.0,
                                    "rewards_is_ours": 0.0}, report.to_text()
    # the sample workflows call the openai SDK, which that venv lacks: the check says so
    report = check(server, "agent_echo:EchoAgent", python=str(python))
    assert report.setup_error["kind"] == "import_error", report.to_text()
    assert report.setup_error["message"] == (
        "importing agent_echo failed: ModuleNotFoundError: No module named 'openai'; the "
        f"workflow needs the package 'openai', which is not installed for {python}")
    assert report.exit_code() == 2


@pytest.mark.parametrize("kw, message", [
    ({"global_bs": "many"}, "--global-bs 'many'"),
    ({"rollout_dp_size": 0}, "--rollout-dp-size 0"),
    ({"extra_kwargs": ["not", "a", "dict"]}, "extra_kwargs: expected a JSON object"),
    ({"rows": []}, "rows: expected a non-empty list of dicts"),
    ({"rows": [{"prompt": object()}]}, "rows: not JSON data"),
])
def test_a_bad_spec_from_the_app_still_returns_a_report(server, kw, message):
    report = check(server, "agent_echo:EchoAgent", **kw)
    assert report.setup_error["kind"] == "input" and message in report.setup_error["message"]
    assert report.exit_code() == 2


def test_a_missing_interpreter_is_a_setup_error(server, tmp_path):
    report = check(server, "agent_echo:EchoAgent", python=str(tmp_path / "nopython"))
    assert report.setup_error["kind"] == "python"
    assert "cannot start the worker" in report.setup_error["message"]
