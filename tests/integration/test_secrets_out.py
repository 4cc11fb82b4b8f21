"""Nothing secret leaves rltui, and no outside string reaches a terminal raw, checked end to end.

A real process carries every shape of the corpus (tests/data/secret_shapes.toml: fake values in
the shapes of real keys) in every channel rltui reads: its command line, its environment (a
debug variable the incident report quotes, and secret-named ones), the names of its Python
threads (which py-spy dumps) and the lines it logs to its stdout file. Its script name, its log
path, its command line and a log line also carry terminal escapes (a window title, a screen
clear, colours) and Rich markup. Then every output is searched: ``diagnose --json``, the plain
report, incident.md/json written by ``diagnose --report``, a recording made by ``rltui record``,
the agent's stream and a check export. Every wait is on the process saying it is ready or on a
command's exit; nothing sleeps.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rltui.checks.export import export_report
from rltui.sources.replay import META_FILE, READINGS_FILE
from tests.compat import tomllib

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SHAPES = tomllib.loads((REPO / "tests" / "data" / "secret_shapes.toml")
                       .read_text(encoding="utf-8"))["shape"]
PY = os.path.realpath(sys.executable)
WAIT = 120  # seconds: a safety net for a stuck command, not a performance bound
ESCAPES = ["\x1b]0;owned-title\x07", "\x1b[2J", "\x1b[31mred\x1b[0m", "[bold red]x[/]",
           "car\rriage", "\x9b2J"]
DEBUG_VARS = ("NCCL_DEBUG_SUBSYS", "TORCH_DISTRIBUTED_DEBUG", "NCCL_TIMEOUT",
              "TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
              "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
              "CUDA_LAUNCH_BLOCKING", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE")
RAW = ("\x1b", "\x07", "\x9b")  # what must never reach a terminal or a text output

JOB = r'''
import os, sys, threading, tomllib
shapes = tomllib.loads(open(sys.argv[1], encoding="utf-8").read())["shape"]
def wait_here():
    threading.Event().wait()
for s in shapes:
    threading.Thread(target=wait_here, name="worker " + s["written"], daemon=True).start()
for s in shapes:
    print("INFO " + s["written"], flush=True)
print("INFO colours \x1b]0;owned-title\x07 \x1b[2J \x1b[31mred\x1b[0m [bold red]x[/] \x9b2J",
      flush=True)
os.write(int(sys.argv[2]), b"ready\n")
sys.stdin.read()
'''


def ptrace_allowed() -> bool:
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        scope = "0"
    return os.geteuid() == 0 or scope == "0"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("job")
    script = tmp / "train-\x1b[31mred\x1b[0m.py"  # a script name with escapes in it
    script.write_text(JOB, encoding="utf-8")
    log = tmp / "rank0-\x1b]0;owned\x07.log"  # and a log path
    argv = [a for s in SHAPES for a in shlex.split(s["written"])] + ESCAPES
    r, w = os.pipe()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1", "NCCL_DEBUG": "INFO",
           # the debug variables the incident report quotes carry every shape between them
           **{name: " ; ".join(s["written"] for s in SHAPES[i::len(DEBUG_VARS)])
              for i, name in enumerate(DEBUG_VARS)},
           "HF_TOKEN": "hf_FAKEenvHuggingFace0123456789",
           "OPENAI_API_KEY": "sk-proj-FAKEenvOpenAI0123456789abcdef"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([PY, str(script), str(REPO / "tests/data/secret_shapes.toml"),
                                 str(w), *argv], env=env, stdin=subprocess.PIPE, stdout=out,
                                stderr=subprocess.STDOUT, pass_fds=(w,))
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], WAIT)
        assert ready and os.read(r, 64) == b"ready\n", "the job did not start"
    finally:
        os.close(r)
    yield proc, tmp
    proc.stdin.close()
    proc.wait(WAIT)


def _rltui(*args: str, cwd: Path) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one rltui command. Its stdin stays open until it exits
    (the agent ends when its stdin closes)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RLTUI_CONFIG")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out, err = cwd / f"stdout-{args[0]}-{len(args)}", cwd / f"stderr-{args[0]}-{len(args)}"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "rltui", *args], cwd=cwd, env=env,
                                stdin=subprocess.PIPE, stdout=o, stderr=e)
        try:
            code = proc.wait(WAIT)
        finally:
            proc.kill()
            proc.stdin.close()
    return (code, out.read_text(encoding="utf-8", errors="replace"),
            err.read_text(encoding="utf-8", errors="replace"))


class _Report:
    """A check's report as export_report sees it (to_json, to_markdown), holding every shape
    the way a worker's error or an answer would."""

    def to_json(self) -> dict:
        return {"errors": [s["written"] for s in SHAPES], "prompt": ESCAPES}

    def to_markdown(self) -> str:
        return "".join(f"- error: {s['written']} {''.join(ESCAPES)}\n" for s in SHAPES)


@pytest.fixture(scope="module")
def outputs(job, tmp_path_factory) -> dict[str, str]:
    proc, _ = job
    tmp = tmp_path_factory.mktemp("out")
    cfg = tmp / "config.yaml"
    cfg.write_text("cadence:\n  gpus: 0.5\n  procs: 0.5\n  logs: 0.5\npyspy:\n  interval: 1\n")
    pid = str(proc.pid)
    common = ("--pid", pid, "--config", str(cfg))
    runs = {
        "diagnose --json": ("diagnose", "--json", "--duration", "3", "--report",
                            str(tmp / "report"), *common),
        "diagnose (text)": ("diagnose", "--duration", "3", *common),
        "record": ("record", str(tmp / "recording"), "--duration", "4", *common),
        "agent stream": ("agent", "--host", "node-under-test", "--duration", "4", *common),
    }
    with ThreadPoolExecutor(len(runs)) as pool:
        done = {name: pool.submit(_rltui, *args, cwd=tmp) for name, args in runs.items()}
        results = {name: f.result() for name, f in done.items()}
    for name, (code, _, err) in results.items():
        assert code in (0, 1), (name, err[-2000:])
    out = {name: stdout for name, (_, stdout, _) in results.items()}
    for name in ("incident.md", "incident.json"):
        out[name] = (tmp / "report" / name).read_text(encoding="utf-8")
    out["recording"] = (tmp / "recording" / READINGS_FILE).read_text(encoding="utf-8")
    out["recording meta"] = (tmp / "recording" / META_FILE).read_text(encoding="utf-8")
    del out["record"]
    out.update({f"check export {p.suffix}": p.read_text(encoding="utf-8")
                for p in export_report(_Report(), tmp / "export", "workflow-check")})
    return out


def test_the_channels_reached_the_outputs(outputs):
    # Each channel must show up where it is output, or a missing leak proves nothing.
    marks = {"diagnose --json": ["cmdline", "--password", "INFO"],
             "incident.md": ["NCCL_SOCKET_IFNAME=", "INFO worker token=", "--password"],
             "recording": ["--password", "INFO logged in with"],
             "agent stream": ["--password", "INFO logged in with"]}
    if ptrace_allowed():  # py-spy's dumps carry the thread names (only they say "worker OPENAI")
        marks["agent stream"].append("worker OPENAI key ***")
        marks["recording"].append("worker OPENAI key ***")
    for output, wanted in marks.items():
        for mark in wanted:
            assert mark in outputs[output], (output, mark)


@pytest.mark.parametrize("shape", SHAPES, ids=[s["name"] for s in SHAPES])
def test_no_secret_in_any_output(outputs, shape):
    leaks = [name for name, text in outputs.items() if shape["secret"] in text]
    assert not leaks, f"{shape['name']} leaked into {leaks}"


def test_no_environment_secret_in_any_output(outputs):
    for secret in ("FAKEenvHuggingFace", "FAKEenvOpenAI"):
        assert not [name for name, text in outputs.items() if secret in text], secret


@pytest.mark.parametrize("output", ["diagnose (text)", "incident.md", "check export .md"])
def test_text_outputs_carry_no_raw_control_characters(outputs, output):
    text = outputs[output]
    assert not [c for c in RAW if c in text], output
    assert "\\x1b" in text  # shown, escaped


@pytest.mark.parametrize("output", ["diagnose --json", "incident.json", "recording",
                                    "agent stream", "check export .json"])
def test_json_outputs_keep_the_string_escaped_by_json(outputs, output):
    # JSON always escapes C0 controls (ESC, BEL); the agent's wire format writes the rest of
    # Unicode as UTF-8 (a line is read by rltui, never shown), the files as \u escapes.
    raw = RAW[:2] if output == "agent stream" else RAW
    assert not [c for c in raw if c in outputs[output]]
    docs = [json.loads(line) for line in outputs[output].splitlines() if line.startswith("{")] \
        if output in ("recording", "agent stream") else [json.loads(outputs[output])]
    assert any("\x1b" in text for text in _strings(docs))  # the string as it was


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _strings(value)
