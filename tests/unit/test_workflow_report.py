"""The report: its JSON contract, verdicts and exit codes, text and markdown, built from results
by hand (no process)."""

from __future__ import annotations

import json

from rltui.checks.workflow.report import WorkflowReport
from rltui.checks.workflow.results import RunResult

SHAPE = {"global_bs": 4, "group_size": 2, "rollout_dp_size": 2, "local_bs": 2, "requested": 4,
         "concurrency_limit": None}


def ok(step, run, prompt, reward=1.0, latency=0.1):
    return RunResult(step, run, prompt, "ok", latency_s=latency, reward=reward)


def report(**kw):
    r = WorkflowReport(target="m:A", shape=dict(SHAPE), timeout_s=2.0)
    r.single = ok("single", 0, 0)
    r.sequential = [ok("sequential", 0, 0), ok("sequential", 1, 1)]
    r.concurrent = [ok("concurrent", i, i // 2, latency=0.1 * (i + 1)) for i in range(4)]
    r.concurrent_wall_s = 0.5
    for key, value in kw.items():
        setattr(r, key, value)
    return r


def test_a_clean_run_passes_and_the_json_has_the_contract_fields():
    r = report()
    doc = json.loads(json.dumps(r.to_json(), allow_nan=False))
    assert doc["verdict"] == "passed" and r.exit_code() == 0
    assert doc["single"]["ok"] is True and doc["single"]["error"] is None
    assert set(doc["single"]) >= {"ok", "error", "latency_s", "reward"}
    c = doc["concurrency"]
    assert set(c) >= {"requested", "completed", "errors", "timeouts", "p50", "p95", "max",
                      "throughput"}
    assert (c["requested"], c["completed"], c["errors"], c["timeouts"]) == (4, 4, {}, 0)
    assert c["p50"] == 0.25 and c["max"] == 0.4 and c["throughput"] == 8.0
    assert doc["invalid_rewards"] == []
    assert doc["sequential_vs_concurrent_agree"] is True
    assert doc["local_bs"] == 2 and doc["group_size"] == 2
    assert doc["partial"] is False


def test_errors_timeouts_and_invalid_rewards_are_problems():
    r = report()
    r.concurrent[1] = RunResult("concurrent", 1, 0, "error", latency_s=0.01,
                                error_type="ConnectionResetError", message="reset",
                                traceback="Traceback...\nConnectionResetError: reset")
    r.concurrent[2] = RunResult("concurrent", 2, 1, "timeout", latency_s=2.0)
    r.concurrent[3] = RunResult("concurrent", 3, 1, "ok", latency_s=0.1, reward=None,
                                invalid={"reason": "str is not a number", "repr": "'x'"})
    r.pending_tasks = {"step": "concurrent", "task_count": 1, "groups": [
        {"where": "agent.py:9 in run", "count": 1, "runs": [2], "tasks": ["rltui-run-c-2"],
         "waiting_on": "Event.wait", "frames": [
             {"file": "/x/agent.py", "line": 9, "function": "run", "code": "await ev.wait()",
              "kind": "user"}]}]}
    doc = r.to_json()
    assert doc["verdict"] == "problems" and r.exit_code() == 1
    assert doc["concurrency"]["errors"] == {"ConnectionResetError": {
        "count": 1, "message": "reset", "traceback": "Traceback...\nConnectionResetError: reset",
        "runs": [1]}}
    assert doc["concurrency"]["timeouts"] == 1
    assert doc["invalid_rewards"] == [{"step": "concurrent", "run": 3, "prompt": 1,
                                       "reason": "str is not a number", "repr": "'x'"}]
    ids = [f["id"] for f in doc["findings"]]
    assert ids == ["errors-under-concurrency", "timeouts", "invalid-rewards"]
    text = r.to_text()
    assert "ConnectionResetError x1: reset (runs 1)" in text
    assert "1 x agent.py:9 in run, waiting in Event.wait, runs 2" in text
    md = r.to_markdown()
    assert md.startswith("# Workflow check: `m:A`")
    assert "## Findings" in md and "## Pending tasks at the first timeout" in md
    assert "agent.py:9 in run: await ev.wait()" in md


def test_a_failed_single_run_skips_the_concurrent_step():
    r = report(concurrent=[], concurrent_wall_s=None,
               concurrent_skipped="step one failed (--force runs it anyway)")
    r.single = RunResult("single", 0, 0, "error", latency_s=0.01, error_type="KeyError",
                         message="'prompt'", traceback="tb")
    doc = r.to_json()
    assert doc["single"] == {"ok": False, "status": "error", "error": "KeyError: 'prompt'",
                             "error_type": "KeyError", "traceback": "tb", "latency_s": 0.01,
                             "reward": None}
    assert doc["concurrency"]["skipped"].startswith("step one failed")
    assert doc["sequential_vs_concurrent_agree"] is None
    assert doc["agreement"]["reason"].startswith("step one failed")
    assert doc["findings"][0]["id"] == "single-run-failed"


def test_setup_errors_exit_2_and_unfinished_checks_exit_3():
    r = WorkflowReport(target="m:A", shape=dict(SHAPE), timeout_s=2.0,
                       setup_error={"kind": "no_run", "message": "m:A has no run method"})
    doc = r.to_json()
    assert doc["verdict"] == "setup_error" and r.exit_code() == 2
    assert doc["single"]["status"] == "not_run"
    assert "m:A has no run method" in r.to_text()
    r = report(worker_end={"reason": "crashed", "step": "concurrent",
                           "how": "killed by signal SIGKILL", "stderr_tail": ["boom"]},
               partial=True, partial_reason="the worker process died")
    assert r.verdict == "could_not_finish" and r.exit_code() == 3
    assert "worker-died" in [f.id for f in r.findings()]
    assert "boom" in r.to_text()


def test_loop_blocks_at_one_place_make_one_finding():
    where = {"file": "/x/a.py", "line": 5, "function": "run", "code": "time.sleep(1)",
             "kind": "user"}
    blocks = [{"step": s, "for_s": 0.3, "blocked_s": b, "recovered": True, "where": where,
               "stack": [where], "tasks": []} for s, b in
              (("single", 1.0), ("concurrent", 2.5), ("concurrent", 1.0))]
    found = [f for f in report(loop_blocks=blocks).findings() if f.id == "loop-blocked"]
    assert len(found) == 1
    assert found[0].title == ("the event loop was blocked 3 times (up to 2.5 s) at a.py:5 in "
                              "run: `time.sleep(1)`")
    assert found[0].detail == "in the single, concurrent steps"
    stuck = dict(blocks[0], recovered=False, blocked_s=None, for_s=2.0)
    found = [f for f in report(loop_blocks=[stuck]).findings() if f.id == "loop-blocked"]
    assert "stayed blocked at a.py:5" in found[0].title


def test_temperature_other_than_zero_is_not_compared():
    doc = report(temperature=0.8).to_json()
    assert doc["sequential_vs_concurrent_agree"] is None
    assert "temperature is 0.8" in doc["agreement"]["reason"]


def test_a_server_that_is_down_and_a_failed_step_one_could_not_finish():
    """Exit 3, as in the rollout check: the runs failed for want of a server, which says
    nothing about the workflow."""
    down = {"url": "http://127.0.0.1:9/v1", "reachable": False,
            "error": "ConnectionRefusedError: Connection refused"}
    failed = RunResult("single", 0, 0, "error", latency_s=0.01,
                       error_type="ConnectionRefusedError", message="Connect call failed")
    r = report(concurrent=[], concurrent_wall_s=None, server=down, single=failed)
    assert r.server_down() and r.verdict == "could_not_finish" and r.exit_code() == 3
    assert report(server=down).verdict == "passed", "a workflow with its own server is fine"
    up = dict(down, reachable=True, error=None)
    assert report(concurrent=[], server=up, single=failed).exit_code() == 1
    assert report(concurrent=[], single=failed).exit_code() == 1, "no probe, no claim"


def test_skipped_dataset_lines_are_in_the_json():
    from rltui.checks.dataset import SkippedLine
    r = report(skipped=[SkippedLine(3, "not JSON (Expecting value at column 1)")])
    assert r.to_json()["skipped"] == [{"line": 3,
                                       "reason": "not JSON (Expecting value at column 1)"}]
    assert report().to_json()["skipped"] == []


def test_a_long_traceback_in_the_text_keeps_the_user_s_line():
    frames = "".join(f'  File "/usr/lib/python3.11/asyncio/base_events.py", line {n}, in f{n}\n'
                     f"    await step{n}()\n" for n in range(10))
    tb = ('Traceback (most recent call last):\n'
          '  File "/home/u/agent.py", line 12, in run\n    answer = await call(prompt)\n'
          f"{frames}ConnectionRefusedError: [Errno 111] Connect call failed\n")
    r = report()
    r.concurrent[1] = RunResult("concurrent", 1, 0, "error", latency_s=0.01,
                                error_type="ConnectionRefusedError",
                                message="[Errno 111] Connect call failed", traceback=tb)
    text = r.to_text()
    assert 'File "/home/u/agent.py", line 12, in run' in text
    assert "answer = await call(prompt)" in text
    assert text.count("base_events.py") < 10 and "  ..." in text
    assert "ConnectionRefusedError: [Errno 111] Connect call failed" in text
    assert "in f9" in r.to_markdown(), "markdown has room for the whole of it"
