"""`rltui workflow-check` end to end: the real CLI in a subprocess, the sample agents, the
loopback chat server. Exit codes: 0 passed, 1 problems, 2 input/import errors, 3 unfinished."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys

import pytest

from tests.fakes.agents.harness import AGENTS, chat_server, write_jsonl
from tests.integration.ctrl_c import ctrl_c, reaped

pytestmark = pytest.mark.integration

KEY = "sk-live-0123456789abcdefXYZ"
SMALL = ["--global-bs", "8", "--group-size", "4", "--rollout-dp-size", "2"]


@pytest.fixture(scope="module")
def server():
    with chat_server(api_key=KEY) as url:
        yield url


@pytest.fixture
def data(tmp_path):
    return write_jsonl(tmp_path / "data.jsonl",
                       [{"prompt": p} for p in ("alpha", "beta", "gamma", "delta")])


def rltui(*args, env=None, cwd=None):
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "rltui", "workflow-check", *args],
                          capture_output=True, text=True, timeout=120, env=full_env, cwd=cwd)


def check(target, *args, **kw):
    return rltui(target, "--path", str(AGENTS), *SMALL, *args, **kw)


def test_a_passing_workflow_exits_0_with_json_and_markdown(server, data, tmp_path):
    md = tmp_path / "report.md"
    out = check("agent_echo:EchoAgent", "--data", str(data), "--base-url", server,
                "--json", "--markdown", str(md), env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["single"]["ok"] is True and doc["single"]["error"] is None
    assert doc["concurrency"]["requested"] == 16 and doc["concurrency"]["completed"] == 16
    assert doc["sequential_vs_concurrent_agree"] is True and doc["invalid_rewards"] == []
    assert doc["api_key_set"] is True
    text = md.read_text()
    assert text.startswith("# Workflow check: `agent_echo:EchoAgent`")
    assert "**Verdict: passed**" in text
    for blob in (out.stdout, out.stderr, text):
        assert KEY not in blob


def test_the_key_from_the_flag_reaches_the_workflow_and_nowhere_else(server, data, tmp_path):
    md = tmp_path / "r.md"
    ok = check("agent_echo:EchoAgent", "--data", str(data), "--base-url", server,
               "--api-key", KEY)
    assert ok.returncode == 0, ok.stdout
    leak = check("agent_echo:KeyInErrorAgent", "--data", str(data), "--base-url", server,
                 "--api-key", KEY, "--force", "--markdown", str(md))
    assert leak.returncode == 1
    assert "login refused for key ***" in leak.stdout
    for blob in (leak.stdout, leak.stderr, md.read_text()):
        assert KEY not in blob
    as_json = check("agent_echo:KeyInErrorAgent", "--data", str(data), "--base-url", server,
                    "--api-key", KEY, "--json")
    assert KEY not in as_json.stdout and KEY not in as_json.stderr


def test_secrets_in_kwargs_init_kwargs_and_the_url_never_show(server, data, tmp_path):
    """The agent fails with every value it was given, bare, in its message: the secret-named
    ones (an api_key in --kwargs, a token in --init-kwargs, the URL's password) are hidden,
    the others show."""
    secrets = ["plainkey1234567", "hub-token-24680", "pw-Secret-98765", KEY]
    url = server.replace("http://", "http://bob:pw-Secret-98765@")
    args = ("agent_echo:SecretsInErrorAgent", "--data", str(data), "--base-url", url,
            "--kwargs", '{"api_key": "plainkey1234567", "model": "echo-visible"}',
            "--init-kwargs", '{"hub_token": "hub-token-24680", "seed": "seed-visible"}',
            "--force")
    md = tmp_path / "r.md"
    text = check(*args, "--markdown", str(md), env={"OPENAI_API_KEY": KEY})
    as_json = check(*args, "--json", env={"OPENAI_API_KEY": KEY})
    assert text.returncode == 1 and as_json.returncode == 1, text.stdout + text.stderr
    doc = json.loads(as_json.stdout)
    # base_url, api_key, temperature, model; then hub_token, seed; then the URL's password
    assert doc["single"]["error"] == (
        f"PermissionError: refused: {url.replace('pw-Secret-98765', '***')} *** 0 echo-visible "
        "*** seed-visible ***")
    assert doc["base_url"].startswith("http://bob:***@127.0.0.1:")
    assert doc["concurrency"]["errors"]["PermissionError"]["count"] == 16
    assert "echo-visible" in text.stdout
    for blob in (text.stdout, text.stderr, md.read_text(), as_json.stdout, as_json.stderr):
        for secret in secrets:
            assert secret not in blob


def test_a_wrong_key_is_the_single_run_s_error(server, data):
    out = check("agent_echo:EchoAgent", "--data", str(data), "--base-url", server,
                "--api-key", "wrong-key", "--json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert doc["single"]["error"].startswith("openai.AuthenticationError: Error code: 401")
    assert doc["concurrency"]["skipped"].startswith("step one failed")


def test_the_base_url_comes_from_the_environment(server, data):
    out = check("agent_echo:EchoAgent", "--data", str(data), "--json",
                env={"OPENAI_BASE_URL": server, "OPENAI_API_KEY": KEY})
    assert out.returncode == 0, out.stdout
    assert json.loads(out.stdout)["base_url"] == server


def test_a_deadlock_exits_1_and_the_text_shows_where_tasks_wait(server, data):
    # 3 s: the 15 stuck runs end only at the timeout; run 0 (one loopback call) needs far less
    out = check("agent_event:SharedCacheAgent", "--data", str(data), "--base-url", server,
                "--timeout", "3", env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "PROBLEMS" in out.stdout.splitlines()[0]
    assert "15 of 16 concurrent runs did not finish within 3 s" in out.stdout
    assert "15 x agent_event.py:" in out.stdout and "waiting in Event.wait" in out.stdout
    assert "await self.ready.wait()" in out.stdout


def test_a_one_line_dataset_from_prompt_and_a_concurrency_cap(server):
    out = check("agent_echo:EchoAgent", "--prompt", "hello", "--base-url", server,
                "--concurrency", "3", "--json", env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 0, out.stdout
    doc = json.loads(out.stdout)
    assert doc["concurrency"]["completed"] == 16
    assert doc["concurrency_limit"] == 3 and doc["local_bs"] == 4


@pytest.mark.parametrize("target, message", [
    ("nosuchmodule:Agent", "no module named 'nosuchmodule' on the path"),
    ("agent_broken_import:Agent", "importing agent_broken_import failed: RuntimeError: "
                                  "AGENT_CONFIG is not set"),
    ("agent_echo:Missing", "has no 'Missing'; its classes: DictAgent, EchoAgent"),
    ("agent_shapes:NoRun", "has no run method"),
    ("agent_shapes:SyncRun", "run is not a coroutine function"),
    ("agent_shapes:BadInit", "agent_shapes:BadInit() failed: ValueError: tokenizer path"),
    ("agent_shapes:NarrowRun", "cannot take run(data, base_url, temperature)"),
])
def test_workflows_that_do_not_load_exit_2_with_a_clear_message(server, target, message):
    out = check(target, "--prompt", "hi", "--base-url", server, "--json")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert message in out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "setup_error" and message in doc["setup_error"]["message"]
    assert doc["single"]["status"] == "not_run"
    text = check(target, "--prompt", "hi", "--base-url", server)
    assert text.returncode == 2 and message in text.stdout


def test_the_import_traceback_starts_in_the_user_s_module(server):
    out = check("agent_broken_import:Agent", "--prompt", "hi", "--base-url", server)
    assert 'agent_broken_import.py", line 3, in <module>' in out.stdout
    assert "importlib" not in out.stdout


@pytest.mark.parametrize("args, message", [
    (["--global-bs", "10", "--rollout-dp-size", "4"], "is not divisible by --rollout-dp-size 4"),
    (["--group-size", "0"], "--group-size 0: must be a positive integer"),
    (["--kwargs", "{model: 1}"], "--kwargs: not JSON"),
    (["--init-kwargs", "[]"], "--init-kwargs: expected a JSON object"),
    (["--path", "/no/such/folder"], "--path /no/such/folder: not a folder"),
])
def test_bad_flags_exit_2(args, message):
    out = rltui("agent_echo:EchoAgent", "--prompt", "hi", *args)
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


def test_bad_dataset_lines_are_skipped_and_listed(server, tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b",\n[1]\n\n{"prompt": "c"}\n')
    out = check("agent_echo:EchoAgent", "--data", str(path), "--base-url", server, "--json",
                env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert [(s["line"], s["reason"].split(" (")[0]) for s in doc["skipped"]] == [
        (2, "not JSON"), (3, "a JSON list, not an object")]
    assert any(n.startswith("2 dataset line(s) skipped: line 2: not JSON") for n in doc["notes"])
    text = check("agent_echo:EchoAgent", "--data", str(path), "--base-url", server,
                 env={"OPENAI_API_KEY": KEY})
    assert text.returncode == 0 and "line 3: a JSON list, not an object" in text.stdout


def test_a_dataset_with_no_row_left_exits_2_naming_the_lines(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "b",\n[1]\n')
    out = rltui("agent_echo:EchoAgent", "--data", str(bad))
    assert out.returncode == 2, out.stdout + out.stderr
    assert "holds no valid sample: line 1: not JSON" in out.stderr
    assert "line 2: a JSON list, not an object" in out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    out = rltui("agent_echo:EchoAgent", "--data", str(bad), "--json")
    assert out.returncode == 2 and json.loads(out.stdout)["setup_error"]["kind"] == "input"
    out = rltui("agent_echo:EchoAgent", "--data", str(tmp_path / "missing.jsonl"))
    assert out.returncode == 2 and "does not exist" in out.stderr
    out = rltui("agent_echo:EchoAgent")
    assert out.returncode == 2 and "give --data FILE" in out.stderr


def test_a_server_that_is_down_exits_3_and_the_traceback_shows_the_agent_s_lines(data):
    with chat_server() as url:
        down = url
    out = check("agent_echo:EchoAgent", "--data", str(data), "--base-url", down)
    assert out.returncode == 3, out.stdout + out.stderr
    assert "COULD NOT FINISH" in out.stdout.splitlines()[0]
    assert "NOT reachable" in out.stdout and "does not accept connections" in out.stdout
    errors = out.stdout[out.stdout.index("Errors by type:"):]
    assert "answer = await chat(prompt, **extra_kwargs)" in errors  # the agent's line
    # the innermost user line, then the openai SDK's error and the refusal under it
    assert "await client(kwargs).chat.completions.create(" in errors
    assert "openai.APIConnectionError x1: Connection error. (from " in errors
    assert errors.splitlines()[-1].endswith("openai.APIConnectionError: Connection error.")


def test_ctrl_c_prints_the_partial_report_and_exits_130(data):
    requests: queue.Queue[str] = queue.Queue()
    with chat_server(api_key=KEY, requests=requests) as url:
        env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
        env["OPENAI_API_KEY"] = KEY
        process = subprocess.Popen(
            [sys.executable, "-m", "rltui", "workflow-check", "agent_echo:EchoAgent", "--path",
             str(AGENTS), *SMALL, "--data", str(data), "--base-url", url, "--timeout", "900",
             "--kwargs", '{"model": "echo@900"}', "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        with reaped(process):
            # step one's request is in the server, waiting out its delay
            assert requests.get(timeout=120).endswith("/chat/completions")
            out, err = ctrl_c(process)
    assert process.returncode == 130, err
    doc = json.loads(out)
    assert doc["partial"] and doc["partial_reason"] == "cancelled during the single step"
    assert doc["single"]["status"] == "unfinished" and doc["verdict"] == "could_not_finish"
    assert doc["pending_tasks"]["why"] == "cancelled"
    assert "interrupted" in err and "Traceback" not in err


def test_an_unwritable_markdown_path_exits_2(server, tmp_path):
    out = check("agent_echo:EchoAgent", "--prompt", "hi", "--base-url", server,
                "--markdown", str(tmp_path / "no" / "such" / "dir" / "r.md"),
                env={"OPENAI_API_KEY": KEY})
    assert out.returncode == 2 and "--markdown" in out.stderr and "cannot write" in out.stderr


def test_the_default_path_is_the_current_folder(server):
    out = rltui("agent_echo:EchoAgent", "--prompt", "hi", "--base-url", server, *SMALL,
                env={"OPENAI_API_KEY": KEY}, cwd=str(AGENTS))
    assert out.returncode == 0, out.stdout + out.stderr


def test_help_lists_the_flags():
    out = subprocess.run([sys.executable, "-m", "rltui", "workflow-check", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for flag in ("--data", "--base-url", "--api-key", "--global-bs", "--group-size",
                 "--rollout-dp-size", "--timeout", "--path", "--kwargs", "--json", "--markdown",
                 "--concurrency", "--force"):
        assert flag in out.stdout


@pytest.mark.parametrize("url, env, message", [
    ("http://[::1/v1", {}, "--base-url 'http://[::1/v1': not a usable URL (Invalid IPv6 URL)"),
    ("http://bob:pw-6161@127.0.0.1:99999/v1", {},
     "--base-url 'http://bob:***@127.0.0.1:99999/v1': not a usable URL (Port out of range"),
    (None, {"OPENAI_BASE_URL": "http://[::1/v1"}, "OPENAI_BASE_URL 'http://[::1/v1'"),
])
def test_a_malformed_base_url_exits_2_with_one_line(url, env, message):
    flags = ["--base-url", url] if url else []
    out = check("agent_echo:EchoAgent", "--prompt", "hi", *flags, env=env)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stdout == "" and out.stderr.startswith(f"rltui: error: {message}")
    assert out.stderr.count("\n") == 1 and "pw-6161" not in out.stderr
    assert "Traceback" not in out.stderr and "internal error" not in out.stderr
