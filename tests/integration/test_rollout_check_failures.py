"""rollout-check when things go wrong, against the engine server of tests/fakes and the tiny
model as the local reference: a server that is down, refuses, times out, fails or dies mid-run,
bad dataset lines and settings, secrets in URLs; and the run itself: the concurrency limit,
progress, cancel.
"""

from __future__ import annotations

import json
import socket
import threading

import pytest

from rltui.checks.rollout import run
from tests.fakes.engine_server import EngineServer
from tests.fakes.tinylm import sample_dataset
from tests.integration.test_rollout_check import KEY, spec

pytestmark = pytest.mark.integration

URL_PASSWORD = "sk-url-password-31415926"
QUERY_KEY = "qs-key-27182818"


def free_port() -> int:
    with socket.socket() as s:  # a port that was free a moment ago and has no listener
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----- bad input, failing servers -----


def test_server_down(tiny_model, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, f"http://127.0.0.1:{free_port()}/v1"))
    assert report.error_kind == "server" and "cannot reach" in report.error
    assert report.exit_code() == 3 and report.results == []


def _secret_url(base: str) -> str:
    scheme, rest = base.split("://", 1)
    return f"{scheme}://user:{URL_PASSWORD}@{rest}?api_key={QUERY_KEY}"


def _assert_no_url_secret(*texts: str) -> None:
    for text in texts:
        assert URL_PASSWORD not in text and QUERY_KEY not in text, text


def test_a_password_or_key_in_the_url_is_never_shown(engine_server, tiny_model,
                                                      rollout_dataset, tmp_path):
    """The URL's password and key parameter reach the server (they are the user's way to
    authenticate) and no report: settings, sent, limits, messages, markdown, text."""
    before = len(engine_server.requests)
    report = run(spec(rollout_dataset, tiny_model, _secret_url(engine_server.v1), limit=2))
    assert report.exit_code() == 0, report.to_text()
    j = report.to_json()
    assert j["settings"]["server"].startswith("http://user:***@127.0.0.1:")
    assert j["settings"]["server"].endswith("/v1?api_key=***")
    assert j["sent"]["candidate"]["url"] == j["settings"]["server"]
    assert len(engine_server.requests) > before
    _assert_no_url_secret(json.dumps(j), report.to_markdown(), report.to_text())
    # and in the messages of a failed run: a server that is down, a wrong model name
    down = run(spec(rollout_dataset, tiny_model, _secret_url(f"http://127.0.0.1:{free_port()}")
                    + "&x=1"))
    # the URL requested: its user-info is never in it (sent apart, as Basic auth)
    assert "cannot reach http://127.0.0.1:" in down.error
    wrong = run(spec(rollout_dataset, tiny_model, _secret_url(engine_server.v1), model="nope"))
    assert "does not know model 'nope'" in wrong.error
    for r in (down, wrong):
        _assert_no_url_secret(r.error, json.dumps(r.to_json()), r.to_markdown(), r.to_text(),
                              repr(r.settings))


def test_wrong_model_name_lists_the_served_ones(engine_server, tiny_model, rollout_dataset):
    report = run(spec(rollout_dataset, tiny_model, engine_server.v1, model="llama-70b"))
    assert report.error_kind == "usage" and report.exit_code() == 2
    assert "does not know model 'llama-70b'" in report.error
    assert repr(str(tiny_model)) in report.error


def test_api_key_required_and_never_shown(tiny_model, rollout_dataset, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with EngineServer(tiny_model, api_key=KEY) as server:
        missing = run(spec(rollout_dataset, tiny_model, server.v1))
        wrong = run(spec(rollout_dataset, tiny_model, server.v1, api_key="sk-wrong"))
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        from_env = run(spec(rollout_dataset, tiny_model, server.v1, limit=2))
        given = run(spec(rollout_dataset, tiny_model, server.url + "/generate", api_key=KEY,
                         limit=2))
        monkeypatch.delenv("OPENAI_API_KEY")
        native = run(spec(rollout_dataset, tiny_model, server.url + "/generate"))
    for report in (missing, wrong, native):
        assert report.error_kind == "usage" and report.exit_code() == 2
        assert "wants an API key (--api-key or OPENAI_API_KEY)" in report.error
    assert from_env.exit_code() == 0 and from_env.settings["api_key"] == "set"
    assert given.exit_code() == 0
    # a native endpoint is only asked on the first sample: that one failure is listed
    assert [r.status for r in native.results] == ["error"] and native.partial
    for report in (missing, wrong, from_env, given, native):
        for text in (json.dumps(report.to_json()), report.to_markdown(), report.to_text()):
            assert KEY not in text and "sk-wrong" not in text


def test_timeouts_stop_the_run_with_partial_results(tiny_model, tmp_path):
    dataset = sample_dataset(tmp_path / "d.jsonl", n=12)
    server = EngineServer(tiny_model, delay_s=30, fast=True).start()
    try:
        report = run(spec(dataset, tiny_model, server.v1, timeout_s=0.5, concurrency=2,
                          max_consecutive_failures=2))
    finally:
        server.stop(drain_s=0)  # the delayed requests were given up on: no need to wait
    assert report.partial and "server not answering" in report.stopped
    assert 1 <= len(report.results) < 12
    assert all(r.status == "error" and "no answer from" in r.error for r in report.results)
    assert report.verdict == "incomplete" and report.exit_code() == 3


def test_a_server_that_fails_after_a_few_requests_keeps_the_results(tiny_model, tmp_path):
    dataset = sample_dataset(tmp_path / "d.jsonl", n=20)
    with EngineServer(tiny_model, fail_after=4) as server:
        report = run(spec(dataset, tiny_model, server.v1, concurrency=1,
                          max_consecutive_failures=3))
    statuses = [r.status for r in report.results]
    assert statuses[:4] == ["match"] * 4 and statuses[4:] == ["error"] * 3
    assert "HTTP 503" in report.results[4].error
    assert report.partial and report.stopped.startswith("server failing")
    assert report.exit_code() == 3
    assert report.to_json()["agreement_rate"] == 1.0


def test_a_divergence_found_before_the_server_failed_exits_1(tiny_model, tiny_model_perturbed,
                                                            rollout_dataset):
    with EngineServer(tiny_model_perturbed, fail_after=2) as server:
        report = run(spec(rollout_dataset, tiny_model, server.v1, concurrency=1,
                          max_consecutive_failures=3))
    assert [r.status for r in report.results] == ["mismatch"] * 2 + ["error"] * 3
    assert report.partial and report.stopped.startswith("server failing")
    assert report.verdict == "divergent" and report.exit_code() == 1
    assert report.to_json()["partial"] is True


def test_bad_dataset_lines_are_listed_and_the_rest_compared(engine_server, tiny_model,
                                                            tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"prompt": "what is 2 plus 3 ?", "answer": "5"}\n'
                       "{this is not json\n\n"
                       '{"answer": "4"}\n'
                       '{"messages": [{"role": "user", "content": "is the sky blue ?"}]}\n')
    report = run(spec(dataset, tiny_model, engine_server.v1))
    assert [(s.line, s.reason.split(" (")[0]) for s in report.skipped] == [
        (2, "not JSON"), (4, "has none of 'prompt', 'messages' and 'input_ids'")]
    assert [r.line for r in report.results] == [1, 5]
    assert report.exit_code() == 0


@pytest.mark.parametrize("kw, kind, message", [
    (dict(dataset="missing.jsonl"), "usage", "does not exist"),
    (dict(reference="no-such-folder"), "usage", "does not exist"),
    (dict(server="127.0.0.1:8000"), "usage", "--server must be an http"),
    (dict(concurrency=0), "usage", "--concurrency"),
    (dict(reference_device="cuda:999"), "usage", "cannot put the reference model on cuda:999"),
])
def test_setup_errors_are_messages(engine_server, tiny_model, rollout_dataset, kw, kind,
                                   message):
    base = dict(dataset=rollout_dataset, reference=tiny_model, server=engine_server.v1)
    base.update(kw)
    report = run(spec(base.pop("dataset"), base.pop("reference"), base.pop("server"), **base))
    assert report.error_kind == kind and message in report.error
    assert report.exit_code() == 2


# ----- concurrency, progress, cancel -----


class GatedServer(EngineServer):
    """Counts the generation requests in flight, and holds each one after the first until
    ``width`` are in flight at once: the run can only finish if the client really sends that
    many together, whatever the scheduling. (The first request is answered at once: the client
    settles its request form on it and sends the others after.) A subclass: the fake itself
    stays as it is."""

    def __init__(self, *a, width: int, **kw):
        super().__init__(*a, **kw)
        self.width = width
        self.state = threading.Condition()
        self.seen = self.now = self.peak = 0
        self.filled = False     # width requests were in flight at once

    def handle(self, method, path, headers, body):
        if method != "POST":
            return super().handle(method, path, headers, body)
        with self.state:
            self.seen += 1
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.state.notify_all()
            if self.seen > 1 and not self.filled:
                # a bound on the wait only so that a client that never sends `width` at once
                # fails the test instead of hanging it
                self.filled = self.state.wait_for(lambda: self.now >= self.width or self.filled,
                                                  timeout=60)
                self.state.notify_all()
        try:
            return super().handle(method, path, headers, body)
        finally:
            with self.state:
                self.now -= 1


def test_concurrency_is_limited_and_progress_is_reported(tiny_model, tmp_path):
    dataset = sample_dataset(tmp_path / "d.jsonl", n=12)
    seen = []
    with GatedServer(tiny_model, width=3, fast=True) as server:
        report = run(spec(dataset, tiny_model, server.v1, concurrency=3), progress=seen.append)
    assert server.filled, "three requests were never in flight at once"
    assert server.peak == 3  # and never more
    # the fast server answers a fixed text: compared, not matching
    assert len(report.results) == 12 and {r.status for r in report.results} <= {"match",
                                                                                "mismatch"}
    items = [p for p in seen if p.item is not None]
    assert [p.done for p in items] == list(range(1, 13))
    assert all(p.total == 12 and p.phase == "rollout" for p in items)
    assert {p.item.index for p in items} == set(range(12))


def test_one_at_a_time_means_one_request_in_flight(tiny_model, tmp_path):
    dataset = sample_dataset(tmp_path / "d.jsonl", n=4)
    with GatedServer(tiny_model, width=1, fast=True) as server:
        report = run(spec(dataset, tiny_model, server.v1, concurrency=1))
    assert server.peak == 1 and len(report.results) == 4


def test_cancel_keeps_what_finished(tiny_model, tmp_path):
    dataset = sample_dataset(tmp_path / "d.jsonl", n=40)
    cancel = threading.Event()

    def progress(p):
        if p.item is not None and p.done >= 2:
            cancel.set()

    with EngineServer(tiny_model, delay_s=0.2, fast=True) as server:
        report = run(spec(dataset, tiny_model, server.v1, concurrency=2), progress=progress,
                     cancel=cancel)
    assert report.cancelled and report.partial and report.stopped == "cancelled"
    assert 2 <= len(report.results) < 40
    assert all(r.status != "error" for r in report.results)
    assert report.to_json()["partial"] is True


def test_a_server_that_dies_mid_run_keeps_the_results(tiny_model, tmp_path):
    dataset = sample_dataset(tmp_path / "d.jsonl", n=30)
    server = EngineServer(tiny_model).start()

    def progress(p):
        if p.item is not None and p.done == 3:
            server.kill()  # like a crash: connections dropped, the port closed

    try:
        report = run(spec(dataset, tiny_model, server.v1, concurrency=2,
                          max_consecutive_failures=3), progress=progress)
    finally:
        server.stop(drain_s=0)
    assert report.partial and report.stopped.startswith("server down: 3 request(s) in a row")
    statuses = [r.status for r in report.results]
    assert statuses.count("match") >= 3 and set(statuses) <= {"match", "error"}
    assert len(report.results) < 30 and report.exit_code() == 3


def test_cancel_while_setting_up(engine_server, tiny_model, rollout_dataset):
    cancel = threading.Event()

    def progress(p):
        if p.message == "loading the reference model":
            cancel.set()

    report = run(spec(rollout_dataset, tiny_model, engine_server.v1), progress=progress,
                 cancel=cancel)
    assert report.cancelled and report.partial and report.results == []
    assert report.total == 8
    assert report.error is None and report.exit_code() == 3
