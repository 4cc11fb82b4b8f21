"""``rltui rollout-check`` through ``rltui.cli.main``: the --json shape, text output, exports,
exit codes, messages instead of tracebacks, the key never printed; and Ctrl-C in a real
process: the partial report, exit 130."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rltui.cli import main
from tests.fakes.engine_server import EngineServer
from tests.integration.ctrl_c import ctrl_c, reaped

pytestmark = pytest.mark.integration

KEY = "sk-cli-test-777"
ROOT = Path(__file__).resolve().parents[2]


def args(dataset, reference, server, *more) -> list[str]:
    return ["rollout-check", "--dataset", str(dataset), "--reference", str(reference),
            "--server", server, "--max-new-tokens", "8", *more]


def test_json_output(engine_server, tiny_model, rollout_dataset, capsys):
    code = main(args(rollout_dataset, tiny_model, engine_server.v1, "--json", "--limit", "3",
                     "--concurrency", "2"))
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert code == 0, err
    assert {"samples", "agreement_rate", "reference_accuracy", "candidate_accuracy",
            "logprob_diff", "limits", "per_sample"} <= set(doc)
    assert doc["samples"] == 3 and doc["agreement_rate"] == 1.0
    assert doc["settings"]["limit"] == 3 and doc["settings"]["concurrency"] == 2
    assert [s["index"] for s in doc["per_sample"]] == [0, 1, 2]
    assert all(s["match"] is True and s["first_divergence"] is None for s in doc["per_sample"])
    assert {"mean", "max"} <= set(doc["logprob_diff"])
    assert err == ""  # no progress bar when stderr is not a terminal


def test_divergence_text_and_exports(engine_server_perturbed, tiny_model, rollout_dataset,
                                     tmp_path, capsys):
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    code = main(args(rollout_dataset, tiny_model, engine_server_perturbed.v1, "--markdown",
                     str(md), "--json-out", str(js)))
    out, _ = capsys.readouterr()
    assert code == 1
    assert out.startswith("rollout-check: DIVERGENT")
    assert "mismatch at token" in out and "usual causes:" in out
    assert md.read_text().startswith("# Rollout consistency: DIVERGENT")
    assert json.loads(js.read_text())["verdict"] == "divergent"


@pytest.mark.parametrize("make, code, message", [
    (lambda d, m, s: args(d.parent / "missing.jsonl", m, s), 2, "does not exist"),
    (lambda d, m, s: args(d, m, s, "--model", "nope"), 2, "does not know model 'nope'"),
    (lambda d, m, s: args(d, m, "ftp://x"), 2, "--server must be an http"),
    (lambda d, m, s: args(d, m, s, "--limit", "0"), 2, "--limit must be at least 1"),
])
def test_usage_errors(engine_server, tiny_model, rollout_dataset, capsys, make, code, message):
    assert main(make(rollout_dataset, tiny_model, engine_server.v1)) == code
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("rltui: error: ") and message in err
    assert "Traceback" not in err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("flag, url, message", [
    ("--reference", "http://[::1", "--reference must be a local model folder or an http(s) URL "
                                   "(got 'http://[::1': Invalid IPv6 URL)"),
    ("--server", "http://[::1/v1", "(got 'http://[::1/v1': Invalid IPv6 URL)"),
    ("--server", "http://127.0.0.1:99999/v1", "(got 'http://127.0.0.1:99999/v1': Port out of "
                                              "range 0-65535)"),
    ("--server", "http://u:pw-8181@127.0.0.1:port/v1", "(got 'http://u:***@127.0.0.1:port/v1': "
                                                       "Port could not be cast"),
])
def test_a_malformed_url_is_a_usage_error_in_one_line(tiny_model, rollout_dataset, capsys, flag,
                                                     url, message):
    given = {"--reference": str(tiny_model), "--server": f"http://127.0.0.1:{free_port()}/v1"}
    given[flag] = url
    assert main(args(rollout_dataset, given["--reference"], given["--server"])) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("rltui: error: ") and message in err
    assert err.count("\n") == 1 and "pw-8181" not in err


def test_missing_flag_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["rollout-check", "--dataset", "d.jsonl", "--reference", "m"])
    assert exc.value.code == 2 and "--server" in capsys.readouterr().err


def test_server_down_exits_3(tiny_model, rollout_dataset, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(args(rollout_dataset, tiny_model, f"http://127.0.0.1:{port}/v1", "--json")) == 3
    out, err = capsys.readouterr()
    assert json.loads(out)["error"].startswith("cannot reach")
    assert "cannot reach" in err


def test_the_key_is_never_printed_or_written(tiny_model, rollout_dataset, tmp_path, capsys):
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    with EngineServer(tiny_model, api_key=KEY) as server:
        good = main(args(rollout_dataset, tiny_model, server.v1, "--api-key", KEY, "--json",
                         "--limit", "2", "--markdown", str(md), "--json-out", str(js)))
        good_out = capsys.readouterr()
        bad = main(args(rollout_dataset, tiny_model, server.v1, "--api-key", KEY + "x"))
        bad_out = capsys.readouterr()
    assert good == 0 and bad == 2
    assert "wants an API key (--api-key or OPENAI_API_KEY)" in bad_out.err
    for text in (*good_out, *bad_out, md.read_text(), js.read_text()):
        assert KEY not in text


def test_a_password_or_key_in_the_server_url_is_never_printed(engine_server, tiny_model,
                                                              rollout_dataset, tmp_path, capsys):
    secret, query_key = "sk-cli-url-password-1618", "qs-cli-key-1414"
    host = engine_server.v1.split("://", 1)[1]
    md = tmp_path / "r.md"
    good = main(args(rollout_dataset, tiny_model,
                     f"http://user:{secret}@{host}?api_key={query_key}", "--limit", "2",
                     "--markdown", str(md)))
    good_out = capsys.readouterr()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = main(args(rollout_dataset, tiny_model,
                     f"http://user:{secret}@127.0.0.1:{port}/v1?api_key={query_key}", "--json"))
    down_out = capsys.readouterr()
    assert (good, down) == (0, 3)
    assert "http://user:***@127.0.0.1:" in good_out.out and "api_key=***" in good_out.out
    # the user-info is not in the URLs requested (the client would make it a header)
    assert f"cannot reach http://127.0.0.1:{port}/v1/models" in down_out.err
    for text in (*good_out, *down_out, md.read_text()):
        assert secret not in text and query_key not in text


def test_ctrl_c_prints_the_partial_report_and_exits_130(tiny_model, tmp_path):
    from tests.fakes.tinylm import sample_dataset

    dataset = sample_dataset(tmp_path / "d.jsonl", n=20)
    with EngineServer(tiny_model, delay_s=600, fast=True) as server:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("OPENAI_API_KEY", None)
        process = subprocess.Popen(
            [sys.executable, "-m", "rltui", *args(dataset, tiny_model, server.v1, "--json")],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with reaped(process):
            # a generation request is in the server, waiting out its delay
            assert server.request_received.wait(120), process.stderr.read()
            out, err = ctrl_c(process)
    assert process.returncode == 130, err
    doc = json.loads(out)
    assert doc["partial"] is True and doc["cancelled"] is True
    assert doc["samples"] == 20 and len(doc["per_sample"]) < 20
    assert "interrupted" in err and "Traceback" not in err
