"""`rltui diagnose --log ... --json` on real files, through the real command line.

The fixture logs are copied into a temporary folder (some under rank-bearing names such as
rank3.log) and given one modification time in the past, MTIME, as logs read offline have. The
log source dates the lines already in a file when it first reads it by that time (no later than
now), so a step line without a time of its own (verl, HF) "arrived" at MTIME. Every command runs
once per module, all of them in parallel, with a --match that no process satisfies: the only
logs are those given with --log, and liveness stays unknown, as for logs read offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "logs"
# every copy was last written then: after the times the samples' own lines carry, as for a real
# log, whose last write comes after its last line's time
MTIME = datetime(2026, 9, 1, 12, 0, 0).timestamp()

# step samples: file -> (format, steps seen, last step, the lines carry their own time)
STEP_FIXTURES = {
    "areal-main.log": ("areal", 3, 3, True),
    "areal-merged.log": ("areal", 2, 2, True),
    "hf-trainer.log": ("hf", 3, 3, False),
    "openrlhf.log": ("openrlhf", 4, 4, True),
    "torchrun-hf.log": ("hf", 4, 4, False),
    "torchtitan-ansi.log": ("torchtitan", 5, 5, True),
    "torchtitan-torchrun.log": ("torchtitan", 4, 30, True),
    "trl-grpo.log": ("hf", 6, 6, False),
    "verl-quickstart.log": ("verl", 7, 6, False),
    "verl-ray.log": ("verl", 6, 6, False),
}

# event samples, each read alone 10 s after its last write: file -> {symptom id: its ranks}
EVENT_SYMPTOMS = {
    "event-oom-current.log": {"cuda-oom": [3]},
    "event-oom-old.log": {"cuda-oom": []},
    "event-oom-ray.log": {"cuda-oom": []},
    "event-oom-verl-2828.log": {"cuda-oom": []},
    "event-sglang-start.log": {"cuda-oom": []},
    "event-vllm-cache-blocks.log": {"cuda-oom": []},
    "event-vllm-free-memory.log": {"cuda-oom": []},
    "event-nccl-watchdog.log": {"nccl-timeout": [118, 119]},
    "event-nccl-old.log": {"nccl-timeout": [0, 4, 7]},
    "event-child-failed-sigkill.log": {"rank-exited": [4]},
    "event-child-failed-python.log": {"rank-exited": [1]},
    "event-failure-areal.log": {"zero-step-completion": []},  # its banner, and no step
    "event-traceback.log": {},  # a traceback alone is no symptom
    "event-traceback-chained.log": {},
    "event-traceback-truncated.log": {},
    "event-interleaved.log": {},
    "event-completion-hf.log": {},  # the banner after a step: a normal end
}

BINARY = bytes(range(256)) * 16 + b"\nstep:1 - actor/pg_loss:0.5\n" + b"\x00\xff\xfe" * 100
AREAL_LAST = datetime(2026, 5, 21, 18, 37, 49, 864000).timestamp()  # areal-main.log, step 3


def _env():
    env = dict(os.environ)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RLTUI_CONFIG"):
        env.pop(key, None)
    return env


def _place(src: Path, dest: Path, mtime: float = MTIME) -> Path:
    shutil.copyfile(src, dest)
    os.utime(dest, (mtime, mtime))
    return dest


def _diagnose(config: Path, *args: str) -> tuple[int, dict | None, str, float, float]:
    """(exit code, JSON document, stderr, time before, time after)."""
    before = time.time()
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", "--json", "--duration", "0",
                          "--config", str(config), *args],
                         check=False, capture_output=True, text=True, timeout=60, env=_env())
    after = time.time()
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        doc = None
    return out.returncode, doc, out.stderr, before, after


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("logs")
    (d / "config.yaml").write_text("")  # the defaults, whatever the user's config says
    for p in FIXTURES.glob("*.log"):
        _place(p, d / p.name)
    named = d / "named"
    named.mkdir()
    _place(FIXTURES / "verl-ray.log", named / "rank3.log")
    _place(FIXTURES / "event-oom-current.log", named / "worker-rank-5.txt")  # name beats prefix
    _place(FIXTURES / "event-child-failed-python.log", named / "rank1.log")
    future = d / "future"
    future.mkdir()
    _place(FIXTURES / "verl-ray.log", future / "verl-ray.log", mtime=time.time() + 86400)
    (d / "a-directory").mkdir()
    binary = d / "binary.log"
    binary.write_bytes(BINARY)
    os.utime(binary, (MTIME, MTIME))
    return d


@pytest.fixture(scope="module")
def runs(logdir):
    """Every command of this module, run once each, in parallel: name -> _diagnose result."""
    soon = str(MTIME + 10)
    commands = {f"event:{name}": ["--log", str(logdir / name), "--now", soon]
                for name in EVENT_SYMPTOMS}
    verl = str(logdir / "verl-ray.log")
    commands.update({
        "steps": [arg for name in sorted(STEP_FIXTURES) for arg in ("--log", str(logdir / name))],
        "verl-clock": ["--log", verl],
        "verl-soon": ["--log", verl, "--now", str(MTIME + 30)],
        "verl-hour": ["--log", verl, "--now", str(MTIME + 3600)],
        "verl-future": ["--log", str(logdir / "future" / "verl-ray.log")],
        "hf-done-hour": ["--log", str(logdir / "hf-trainer.log"), "--now", str(MTIME + 3600)],
        "areal-before-limit": ["--log", str(logdir / "areal-main.log"),
                               "--now", "2026-05-21T18:39:00"],
        "areal-after-limit": ["--log", str(logdir / "areal-main.log"),
                              "--now", "2026-05-21T18:45:00", "--fail-on", "warning"],
        "named": ["--log", str(logdir / "named" / "*"), "--now", soon],
        "no-match": ["--log", str(logdir / "nothing-here-*.log")],
        "no-match-and-one": ["--log", str(logdir / "nothing-here-*.log"), "--log", verl,
                             "--now", soon],
        "directory": ["--log", str(logdir / "a-directory")],
        "binary": ["--log", str(logdir / "binary.log"), "--now", soon],
    })
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {name: pool.submit(_diagnose, logdir / "config.yaml", *args)
                   for name, args in commands.items()}
        return {name: f.result() for name, f in futures.items()}


def doc_of(runs, name, code=None):
    rc, doc, stderr, *_ = runs[name]
    assert doc is not None, stderr
    assert "Traceback" not in stderr, stderr
    if code is not None:
        assert rc == code, stderr
    return doc


def logs_by_name(doc):
    return {os.path.basename(log["path"]): log for log in doc["logs"]}


def symptom(doc, sid):
    found = [s for s in doc["symptoms"] if s["id"] == sid]
    assert len(found) == 1, doc["symptoms"]
    return found[0]


# -- step samples ---------------------------------------------------------------------------------

def test_every_step_sample_is_listed():
    mine = {p.name for p in FIXTURES.glob("*.log") if not p.name.startswith("event-")}
    assert mine == set(STEP_FIXTURES)


@pytest.mark.parametrize("name", sorted(STEP_FIXTURES))
def test_each_step_sample_parses_to_its_format_and_steps(runs, name):
    fmt, seen, last, timed = STEP_FIXTURES[name]
    log = logs_by_name(doc_of(runs, "steps"))[name]
    assert log["status"] == "ok", log["message"]
    assert (log["format"], log["steps_seen"], log["last_step"]) == (fmt, seen, last)
    assert log["lines_seen"] == (FIXTURES / name).read_bytes().count(b"\n")
    assert log["line_numbers_exact"] is True
    if timed:  # the line's own time
        assert log["last_step_time"] != pytest.approx(MTIME)
    else:  # a history line without a time arrived when the file was last written
        assert log["last_step_time"] == pytest.approx(MTIME)


# -- event samples --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(EVENT_SYMPTOMS))
def test_each_event_sample_gives_its_symptoms(runs, name):
    rc, doc, stderr, *_ = runs[f"event:{name}"]
    assert doc is not None, stderr
    got = {s["id"]: s["ranks"] for s in doc["symptoms"]}
    assert got == EVENT_SYMPTOMS[name]
    critical = any(s["severity"] == "critical" for s in doc["symptoms"])
    assert rc == (1 if critical else 0), stderr


def test_oom_evidence_carries_the_numbers_and_fragmentation_advice(runs):
    oom = symptom(doc_of(runs, "event:event-oom-current.log", 1), "cuda-oom")
    assert oom["severity"] == "critical"
    assert oom["title"] == "CUDA out of memory (1 in the logs) on rank 3"
    assert any(":2-14: GPU 3: tried to allocate 2.32 GiB" in e and "1.06 GiB free of 79.25 GiB"
               in e and "reserved but unallocated 5.88 GiB" in e for e in oom["evidence"])
    assert any("expandable_segments:True" in n for n in oom["next_steps"])


def test_oom_with_little_reserved_memory_gets_no_fragmentation_advice(runs):
    oom = symptom(doc_of(runs, "event:event-oom-ray.log", 1), "cuda-oom")
    assert any("reserved but unallocated 0.12 GiB" in e for e in oom["evidence"])
    assert not any("expandable_segments" in n for n in oom["next_steps"])


def test_engine_oom_sample_gets_the_engine_advice(runs):
    oom = symptom(doc_of(runs, "event:event-sglang-start.log", 1), "cuda-oom")
    assert any("--mem-fraction-static" in n for n in oom["next_steps"])


def test_watchdog_sample_is_one_collective_pattern_c(runs):
    nccl = symptom(doc_of(runs, "event:event-nccl-watchdog.log", 1), "nccl-timeout")
    assert nccl["title"] == "NCCL watchdog timeout on 2 collective(s)"
    assert any("rank 118 ALLREDUCE SeqNum 2398459 timed out after 1800 s" in e
               for e in nccl["evidence"])
    assert "pattern C" in nccl["evidence"][-1]


def test_old_watchdog_sample_is_several_collectives_pattern_b(runs):
    nccl = symptom(doc_of(runs, "event:event-nccl-old.log", 1), "nccl-timeout")
    assert "pattern B" in nccl["evidence"][-1]


def test_child_failed_sample_names_the_failed_rank(runs):
    exited = symptom(doc_of(runs, "event:event-child-failed-sigkill.log", 1), "rank-exited")
    assert exited["title"] == "torchrun reports rank 4 failed"
    assert any(":5-36: torchrun: rank 4" in e and "SIGKILL" in e for e in exited["evidence"])


def test_completion_banner_without_steps_is_zero_step_completion(runs):
    zero = symptom(doc_of(runs, "event:event-failure-areal.log", 1), "zero-step-completion")
    assert zero["title"] == "training ended after 0 steps"
    assert any(e.endswith("event-failure-areal.log:10: AReaL training completes after 61 s")
               for e in zero["evidence"])
    assert "no step line in 1 log(s) (unknown)" in zero["evidence"]
    assert any(":1: training failed: Engine core initialization failed" in e
               for e in zero["evidence"])
    assert any(":2-9: RuntimeError" in e for e in zero["evidence"])


# -- "now" for logs read offline ------------------------------------------------------------------

def test_offline_now_is_when_the_files_were_last_written(runs):
    """Saved logs read a day later are not "stalled": offline, now is the newest mtime."""
    doc = doc_of(runs, "verl-clock", 0)
    assert logs_by_name(doc)["verl-ray.log"]["last_step_time"] == pytest.approx(MTIME)
    assert doc["now_source"] == "files" and doc["timestamp"] == pytest.approx(MTIME)
    assert not any(s["id"] == "steps-stalled" for s in doc["symptoms"])
    assert doc["ranks"] == [] and doc["mode"] == "offline"


def test_a_file_dated_in_the_future_arrives_now(runs):
    _, doc, stderr, before, after = runs["verl-future"]
    assert doc is not None, stderr
    when = logs_by_name(doc)["verl-ray.log"]["last_step_time"]
    assert before - 1 <= when <= after + 1
    assert doc["symptoms"] == []


def test_now_shortly_after_the_last_write_is_not_stalled(runs):
    doc = doc_of(runs, "verl-soon", 0)
    assert doc["timestamp"] == MTIME + 30 and doc["now_source"] == "--now"
    assert doc["symptoms"] == [] and doc["verdict"] == "healthy"


def test_now_an_hour_after_the_last_write_is_stalled_as_a_warning(runs):
    doc = doc_of(runs, "verl-hour", 0)
    assert doc["now_source"] == "--now"
    assert doc["timestamp"] == MTIME + 3600
    assert doc["verdict"] == "warning"
    stalled = symptom(doc, "steps-stalled")
    assert stalled["severity"] == "warning"
    assert stalled["title"] == "no new step for 60 min"
    assert stalled["since"] == pytest.approx(MTIME)
    assert any("verl-ray.log: last step 6" in e and "60 min ago" in e
               for e in stalled["evidence"])
    assert any("process liveness unknown" in e for e in stalled["evidence"])
    assert stalled["evidence"][-1].endswith(f"(--now {MTIME + 3600})")


def test_an_iso_now_is_compared_with_the_lines_own_times(runs):
    early = doc_of(runs, "areal-before-limit", 0)
    log = logs_by_name(early)["areal-main.log"]
    assert log["last_step_time"] == pytest.approx(AREAL_LAST)
    assert early["timestamp"] == pytest.approx(datetime(2026, 5, 21, 18, 39).timestamp())
    assert early["symptoms"] == []  # 70 s after the last step; the limit is 5 x median > 60 s
    late = doc_of(runs, "areal-after-limit", 1)  # --fail-on warning
    stalled = symptom(late, "steps-stalled")
    assert stalled["severity"] == "warning"
    assert late["now_source"] == "--now"
    assert stalled["evidence"][-1] == "now = 18:45:00 (--now 2026-05-21T18:45:00)"


def test_a_finished_run_read_an_hour_later_is_not_stalled(runs):
    doc = doc_of(runs, "hf-done-hour", 0)
    assert [e["kind"] for e in logs_by_name(doc)["hf-trainer.log"]["events"]] == ["completion"]
    assert [s["id"] for s in doc["symptoms"]] == []


# -- names, odd inputs ----------------------------------------------------------------------------

def test_json_logs_carry_path_rank_format_steps_and_events(runs, logdir):
    doc = doc_of(runs, "named", 1)
    logs = logs_by_name(doc)
    assert set(logs) == {"rank1.log", "rank3.log", "worker-rank-5.txt"}
    verl = logs["rank3.log"]
    assert verl["path"] == os.path.realpath(logdir / "named" / "rank3.log")
    assert (verl["rank"], verl["format"]) == (3, "verl")
    assert (verl["steps_seen"], verl["last_step"]) == (6, 6)
    assert verl["last_step_time"] == pytest.approx(MTIME)
    assert verl["events"] == [] and verl["line_numbers_exact"] is True
    for key in ("path", "rank", "pid", "format", "status", "message", "lines_seen",
                "line_numbers_exact", "steps_seen", "last_step", "last_step_time", "total_steps",
                "events"):
        assert key in verl
    oom = logs["worker-rank-5.txt"]
    assert oom["rank"] == 5  # the file name wins over the [rank3]: prefixes inside
    (event,) = oom["events"]
    assert {"kind", "line", "end_line", "time", "summary", "fields"} <= set(event)
    assert (event["kind"], event["line"], event["end_line"]) == ("cuda-oom", 2, 14)
    assert event["fields"]["gpu"] == 3 and event["fields"]["requested"] == 2491081031
    child = logs["rank1.log"]
    assert child["rank"] == 1
    assert [(e["kind"], e["line"], e["end_line"]) for e in child["events"]] == [
        ("child-failed", 13, 59), ("traceback", 1, 11)]
    ids = {s["id"]: s for s in doc["symptoms"]}
    assert set(ids) == {"cuda-oom", "rank-exited"}
    assert ids["cuda-oom"]["ranks"] == [5]
    assert ids["rank-exited"]["ranks"] == [1]


def test_a_failed_rank_s_own_traceback_is_cited_from_its_log(runs):
    exited = symptom(doc_of(runs, "named", 1), "rank-exited")
    assert any(e.startswith("rank 1's last error: ") and "rank1.log:1-11: FloatingPointError"
               in e for e in exited["evidence"])


def test_the_child_failed_sample_cites_rank_1_s_traceback(runs):
    exited = symptom(doc_of(runs, "event:event-child-failed-python.log", 1), "rank-exited")
    assert any(e.startswith("rank 1's last error: ") and ":1-11: FloatingPointError" in e
               for e in exited["evidence"])


def test_a_glob_matching_nothing_is_unmatched_with_a_note(runs, logdir):
    doc = doc_of(runs, "no-match", 0)
    pattern = str(logdir / "nothing-here-*.log")
    assert doc["unmatched_logs"] == [pattern]
    assert doc["logs"] == [] and doc["verdict"] == "healthy"
    assert f"--log {pattern}: matches no file (yet)" in doc["notes"]
    state = {s["name"]: s for s in doc["sources"]}["logs"]
    assert state["status"] == "unavailable" and "no file matches" in state["message"]


def test_an_unmatched_glob_next_to_a_real_file(runs, logdir):
    doc = doc_of(runs, "no-match-and-one", 0)
    assert doc["unmatched_logs"] == [str(logdir / "nothing-here-*.log")]
    assert list(logs_by_name(doc)) == ["verl-ray.log"]
    assert {s["name"]: s for s in doc["sources"]}["logs"]["status"] == "ok"


def test_a_directory_is_a_clear_state_not_a_crash(runs):
    doc = doc_of(runs, "directory", 0)
    (log,) = doc["logs"]
    assert log["status"] == "error"
    assert "is a directory" in log["message"] and "DIR/*.log" in log["message"]
    assert any("is a directory" in n for n in doc["notes"])
    assert doc["verdict"] == "healthy"


def test_a_binary_file_is_read_without_a_crash(runs):
    doc = doc_of(runs, "binary", 0)
    (log,) = doc["logs"]
    assert log["status"] == "ok"
    assert "binary" in log["message"]
    assert log["lines_seen"] == BINARY.count(b"\n")
