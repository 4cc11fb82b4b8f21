"""The agent's wire protocol: round trips of every message, every rejection, line splitting,
and what the agent does to a reading before it leaves the node (scrub, split, refuse)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rltui import model
from rltui.agent import protocol as p
from rltui.agent.outbound import TRIMMED, reading_lines, scrub_reading
from rltui.model import (
    ERROR,
    OK,
    Frame,
    GpuPoll,
    GpuProcess,
    GpuSample,
    LogEvent,
    LogLine,
    LogPoll,
    LogUpdate,
    ProcessDump,
    ProcInfo,
    ProcPoll,
    Reading,
    StackPoll,
    StepRecord,
    ThreadStack,
)
from tests.importcheck import forbidden_loaded

GPUS = Reading("gpus", 10.5, OK, GpuPoll(gpus=(GpuSample(
    0, "H100", "GPU-1", util=97.0, mem_used=1 << 30, mem_total=80 << 30,
    throttle_reasons=("sw_power_cap",), processes=(GpuProcess(41, 1 << 30),)),),
    driver_version="550.54"))
PROCS = Reading("procs", 11.0, OK, ProcPoll(procs=(ProcInfo(
    41, 1, "python", ("python", "train.py", "--api-key", "***"), rank=3, local_rank=3,
    world_size=8, cpu_percent=99.5, debug_env=(("NCCL_DEBUG", "INFO"),),
    stdout_path="/logs/rank3.out"),), how="env RANK/LOCAL_RANK"))
LOGS = Reading("logs", 12.0, OK, LogPoll(files=(LogUpdate(
    "/logs/rank3.out", OK, rank=3, format="verl", size=120,
    lines=(LogLine(7, "step:7 - actor/loss:0.31"), LogLine(8, "Traceback (most recent call "
                                                             "last):", "error")),
    steps=(StepRecord(7, 7, 12.0, metrics=(("loss", 0.31),)),),
    events=(LogEvent("traceback", 8, 9, 12.0, "RuntimeError: boom", "Traceback...\nboom",
                     fields=(("rank", 3),)),)),), unmatched=("/nothing/*.log",)))
STACKS = Reading("stacks", 13.0, OK, StackPoll(dumps=(ProcessDump(
    41, 3, (ThreadStack(41, "MainThread", "active", (Frame("all_reduce", "distributed.py", 12),
                                                    Frame("<module>", "train.py", 3))),),
    source="live", timestamp=13.0, duration=0.2),), started=12.9, finished=13.1,
    trigger="on-demand", nonblocking=False, command="py-spy dump --pid {pid} --json"))
DENIED_READING = Reading("stacks", 14.0, model.DENIED, None, "ptrace refused", "run as root")

MESSAGES = [
    p.Hello("node01", 1.5, "rltui 0.1.0", 4242, "ranks found by environment",
            {"gpus": 1.0, "procs": 1.0, "logs": 1.0, "stacks": 0.0}),
    *(p.ReadingMessage("node01", 2.0, r) for r in (GPUS, PROCS, LOGS, STACKS, DENIED_READING)),
    p.Heartbeat("node01", 3.0),
    p.Reply("node01", 4.0, "req-1", True, "1 log file",
            {"files": [{"path": "/x", "lines": ["a", "é"], "cut": False, "size": 4}]}),
    p.Reply("node01", 4.5, "req-2", False, "unknown op 'x'"),
    p.ErrorMessage("node01", 5.0, "bad request line: not JSON"),
    p.Bye("node01", 6.0, "stop request"),
]


def envelope(**fields) -> bytes:
    data = {"v": 1, "type": "heartbeat", "host": "h", "t": 1.0} | fields
    return json.dumps({k: v for k, v in data.items() if v is not ...}).encode() + b"\n"


def rejected(line: bytes, kind: str) -> p.ProtocolError:
    result = p.decode(line)
    assert isinstance(result, p.ProtocolError), result
    assert result.kind == kind, result
    return result


# -- round trips -----------------------------------------------------------------------------------

@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: f"{m.type}")
def test_every_message_round_trips(msg):
    line = p.encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    data = json.loads(line)
    assert (data["v"], data["type"], data["host"], data["t"]) == (1, msg.type, msg.host, msg.t)
    assert p.decode(line) == msg


def test_a_reading_decodes_into_real_model_values():
    msg = p.decode(p.encode(p.ReadingMessage("n", 1.0, STACKS)))
    frame = msg.reading.payload.dumps[0].threads[0].frames[0]
    assert isinstance(frame, Frame) and frame.name == "all_reduce"
    assert msg.source == "stacks"
    assert json.loads(p.encode(p.ReadingMessage("n", 1.0, LOGS)))["source"] == "logs"


@pytest.mark.parametrize("request_", [
    p.Request("1", "dump"), p.Request("2", "stop"), p.Request("3", "tail", lines=50),
    p.Request("4", "tail", path="/logs/rank3.out", lines=p.MAX_TAIL_LINES)])
def test_requests_round_trip(request_):
    assert p.decode_request(p.encode(request_)) == request_


def test_non_ascii_and_undecodable_names_survive():
    msg = p.Reply("h", 1.0, "r", True, "日本語 ok", {"path": "/logs/bad-\udcff.log"})
    line = p.encode(msg)
    assert p.decode(line) == msg
    assert "日本語".encode() in p.encode(p.Reply("h", 1.0, "r", True, "日本語"))  # not escaped


def test_crlf_and_missing_newline_are_accepted():
    line = p.encode(p.Heartbeat("h", 2.0))
    assert p.decode(line[:-1] + b"\r\n") == p.Heartbeat("h", 2.0)
    assert p.decode(line[:-1]) == p.Heartbeat("h", 2.0)


def test_additive_fields_are_ignored():
    assert p.decode(envelope(type="bye", reason="x", later_field=[1, 2])) == p.Bye("h", 1.0, "x")
    req = json.dumps({"v": 1, "id": "9", "op": "dump", "priority": "high"}).encode()
    assert p.decode_request(req) == p.Request("9", "dump")


def test_encode_refuses_what_a_reader_would_refuse(monkeypatch):
    monkeypatch.setattr(p, "MAX_LINE", 100)
    with pytest.raises(p.ProtocolError) as err:
        p.encode(p.ErrorMessage("h", 1.0, "x" * 200))
    assert err.value.kind == p.TOO_LONG
    with pytest.raises(TypeError):
        p.encode(p.Unknown("h", 1.0, "later", "note"))


# -- rejections ------------------------------------------------------------------------------------

def test_a_line_over_the_limit_is_rejected_unread():
    line = b'{"v":1,"type":"error","host":"h","t":1,"message":"' + b"x" * p.MAX_LINE + b'"}\n'
    err = rejected(line, p.TOO_LONG)
    assert "8 MiB" in err.message
    assert p.decode(b"x" * p.MAX_LINE + b"\n").kind == p.NOT_JSON  # at the limit: parsed


@pytest.mark.parametrize("line,kind", [
    (b"\xff\xfe\x00garbage\n", p.NOT_UTF8),
    (b"Welcome to node01! Last login: ...\n", p.NOT_JSON),
    (b'{"v": 1, "type": \n', p.NOT_JSON),
    (b"[" * 100_000 + b"\n", p.NOT_JSON),
    (b"[1, 2]\n", p.NOT_OBJECT),
    (b'"hello"\n', p.NOT_OBJECT),
    (b"42\n", p.NOT_OBJECT),
    (b"\n", p.EMPTY),
    (b"   \r\n", p.EMPTY),
])
def test_garbage_is_rejected_with_a_message(line, kind):
    err = rejected(line, kind)
    assert err.message


def test_garbage_quoted_in_the_error_is_short_and_scrubbed():
    err = rejected(b"OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123 " + b"y" * 500 + b"\n",
                   p.NOT_JSON)
    assert "sk-abc" not in err.message and len(err.message) < 200


@pytest.mark.parametrize("fields,text", [
    ({"v": ...}, "no protocol version"),
    ({"v": "1"}, "unknown protocol version"),
    ({"v": True}, "unknown protocol version"),
    ({"v": 0}, "unknown protocol version"),
])
def test_missing_or_bad_version(fields, text):
    assert text in rejected(envelope(**fields), p.VERSION).message


def test_a_newer_major_version_says_to_upgrade():
    err = rejected(envelope(v=2, type="something-new"), p.NEWER_VERSION)
    assert "v2" in err.message and "upgrade rltui" in err.message
    assert p.decode_request(b'{"v": 3, "id": "1", "op": "dump"}').kind == p.NEWER_VERSION


def test_an_unknown_type_is_ignored_with_a_note():
    msg = p.decode(envelope(type="metrics", cpu=3))
    assert isinstance(msg, p.Unknown)
    assert msg.type_name == "metrics" and "ignored" in msg.note and msg.host == "h"


@pytest.mark.parametrize("fields,where", [
    ({"type": ...}, "$.type: missing"),
    ({"type": 5}, "$.type: expected str"),
    ({"host": ...}, "heartbeat.host: missing"),
    ({"host": 7}, "heartbeat.host"),
    ({"t": "now"}, "heartbeat.t"),
    ({"t": True}, "heartbeat.t"),
    ({"t": float("nan")}, "heartbeat.t: not a finite number"),
    ({"type": "hello", "agent": "rltui 0.1.0", "pid": "41"}, "hello.pid: expected int"),
    ({"type": "hello", "agent": "rltui 0.1.0", "pid": 41, "sources": {"gpus": "1"}},
     "hello.sources.gpus"),
    ({"type": "hello", "agent": "rltui 0.1.0", "pid": 41, "sources": []}, "hello.sources"),
    ({"type": "reply", "id": "1", "ok": "yes", "message": ""}, "reply.ok: expected bool"),
    ({"type": "reply", "id": 1, "ok": True, "message": ""}, "reply.id"),
    ({"type": "reply", "id": "1", "ok": True}, "reply.message: missing"),
    ({"type": "error"}, "error.message: missing"),
    ({"type": "bye", "reason": None}, "bye.reason"),
    ({"type": "reading", "reading": {"source": "gpus", "timestamp": 1.0}}, "reading.source"),
])
def test_wrong_field_types_name_the_field(fields, where):
    assert where in rejected(envelope(**fields), p.BAD_FIELD).message


def test_a_bad_reading_names_the_path_inside_it():
    data = json.loads(p.encode(p.ReadingMessage("h", 1.0, PROCS)))
    data["reading"]["payload"]["procs"][0]["pid"] = "forty-one"
    err = rejected(json.dumps(data).encode(), p.BAD_READING)
    assert "procs" in err.message and "pid" in err.message
    data["reading"] = [1]
    assert "must be an object" in rejected(json.dumps(data).encode(), p.BAD_READING).message


def test_a_reading_whose_source_disagrees_is_rejected():
    data = json.loads(p.encode(p.ReadingMessage("h", 1.0, GPUS)))
    data["source"] = "procs"
    assert "does not match" in rejected(json.dumps(data).encode(), p.BAD_FIELD).message


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_reading_stamped_with_no_real_time_is_rejected(value):
    """Every age on screen is measured from the reading's time: inf or nan there would show
    as an age of "infh" (JSON from Python may carry them)."""
    line = p.encode(p.ReadingMessage("h", 1.0, GPUS)).decode()
    data = json.loads(line)
    text = json.dumps(data).replace(f'"timestamp": {data["reading"]["timestamp"]}',
                                    f'"timestamp": {value}')
    assert value in text
    assert "not a finite number" in rejected(text.encode(), p.BAD_READING).message


# -- the one pass and the checked decoding --------------------------------------------------------
# A well-formed line is decoded in one pass from its bytes (msgspec Structs, tagged on "type");
# any other goes through the checked decoding. The one pass must take real messages, and agree
# with the checked decoding on every line it takes.

@pytest.mark.parametrize("msg", [m for m in MESSAGES], ids=lambda m: f"{m.type}")
def test_well_formed_lines_take_the_one_pass(msg):
    line = p.encode(msg)
    assert p._one_pass(line) == msg == p.decode_checked(line)


_SPOILERS = [None, True, 0, 7, -1.5, 2**70, "", "x", [], ["x"], {}, {"pid": 1}, "DELETE"]


def _spoiled(data, path=()):
    """Every copy of ``data`` with one value (or key) replaced by each of _SPOILERS."""
    node = data
    for key in path:
        node = node[key]
    keys = node.keys() if isinstance(node, dict) else range(len(node))
    for key in keys:
        for new in _SPOILERS:
            if new == "DELETE" and not isinstance(node, dict):
                continue
            copy = json.loads(json.dumps(data))
            target = copy
            for k in path:
                target = target[k]
            if new == "DELETE":
                del target[key]
            else:
                target[key] = new
            yield copy
        if isinstance(node[key], (dict, list)) and node[key]:
            yield from _spoiled(data, (*path, key))


def test_the_one_pass_agrees_with_the_checked_decoding():
    """Every message with each of its values spoiled in turn, the version and type included:
    ``decode`` gives what the checked decoding gives (the same message or the same error)."""
    seen = set()
    for msg in [*MESSAGES[:2], MESSAGES[3], *MESSAGES[5:]]:
        for data in _spoiled(json.loads(p.encode(msg))):
            line = json.dumps(data).encode()
            result = p.decode(line)
            assert result == p.decode_checked(line), data
            seen.add(type(result).__name__ if not isinstance(result, p.ProtocolError)
                     else result.kind)
    assert {"Hello", "ReadingMessage", "Reply", "Unknown", p.BAD_FIELD, p.BAD_READING,
            p.VERSION, p.NEWER_VERSION} <= seen


def test_a_reading_over_the_limits_is_cut_as_by_the_checked_decoding(monkeypatch):
    monkeypatch.setattr(p, "MAX_READING_PROCS", 1)
    line = p.encode(p.ReadingMessage("h", 1.0, Reading("procs", 1.0, OK, ProcPoll(
        procs=(ProcInfo(1), ProcInfo(2), ProcInfo(3)))))).replace(b'"pid":3', b'"pid":"x"')
    assert p._one_pass(line) is None  # a bad process past the limit: never decoded
    msg = p.decode(line)
    assert msg == p.decode_checked(line)
    assert msg.reading.payload.procs == (ProcInfo(1),)
    assert msg.dropped == ("a procs reading over the limits of one reading: dropped 2 "
                           "processes over 1 (docs/agent.md, Limits)")


@pytest.mark.parametrize(("limit", "reading", "dropped"), [
    ("MAX_READING_PROCS", PROCS, "1 processes over 0"),
    ("MAX_READING_GPUS", GPUS, "1 GPUs over 0"),
    ("MAX_READING_DUMPS", STACKS, "1 process dumps over 0"),
    ("MAX_READING_LOG_FILES", LOGS, "1 log files over 0"),
    ("MAX_READING_LOG_LINES", LOGS, "2 log lines over 0"),
    ("MAX_READING_LOG_STEPS", LOGS, "1 log steps over 0"),
    ("MAX_READING_LOG_EVENTS", LOGS, "1 log events over 0"),
])
def test_a_well_formed_reading_over_a_limit_is_cut(monkeypatch, limit, reading, dropped):
    monkeypatch.setattr(p, limit, 0)
    line = p.encode(p.ReadingMessage("h", 1.0, reading))
    assert p._one_pass(line) is None
    msg = p.decode(line)
    assert msg == p.decode_checked(line) and dropped in msg.dropped


# -- requests --------------------------------------------------------------------------------------

@pytest.mark.parametrize("data,rid,text", [
    ({"v": 1, "op": "dump"}, None, "request.id: missing"),
    ({"v": 1, "id": 5, "op": "dump"}, None, "request.id"),
    ({"v": 1, "id": "7"}, "7", "request.op: missing"),
    ({"v": 1, "id": "7", "op": "tail", "lines": "10"}, "7", "tail.lines: expected int"),
    ({"v": 1, "id": "7", "op": "tail", "lines": 0}, "7", "outside 1..10000"),
    ({"v": 1, "id": "7", "op": "tail", "lines": p.MAX_TAIL_LINES + 1}, "7", "outside"),
    ({"v": 1, "id": "7", "op": "tail", "path": 3}, "7", "tail.path"),
])
def test_bad_requests_keep_their_id_when_they_have_one(data, rid, text):
    err = p.decode_request(json.dumps(data).encode())
    assert isinstance(err, p.ProtocolError) and err.kind == p.BAD_FIELD
    assert err.id == rid and text in err.message


def test_an_unknown_op_decodes_so_that_it_can_be_answered():
    assert p.decode_request(b'{"v":1,"id":"x","op":"profile"}') == p.Request("x", "profile")


def test_request_lines_get_the_same_envelope_checks():
    assert p.decode_request(b"not json").kind == p.NOT_JSON
    assert p.decode_request(b'{"id": "1", "op": "dump"}').kind == p.VERSION


# -- line splitting --------------------------------------------------------------------------------

def test_lines_split_across_reads():
    s = p.LineSplitter(max_line=64)
    assert s.feed(b'{"a":1}\n{"b"') == [b'{"a":1}\n']
    assert s.feed(b":2}") == []
    assert s.feed(b"\n\n{") == [b'{"b":2}\n', b"\n"]
    assert s.end() == [b"{"]
    assert s.end() == []


def test_an_overlong_line_comes_out_once_cut_and_the_rest_is_skipped():
    s = p.LineSplitter(max_line=10)
    out = s.feed(b"0123456789ABC")  # no newline yet, already over the limit
    assert out == [b"0123456789A"] and p.decode(out[0]) is not None
    assert s.feed(b"DEFGH" * 1000) == []  # the rest of it: skipped, not kept
    assert s.feed(b"IJ\nok\n") == [b"ok\n"]
    assert s.feed(b"x" * 30 + b"\nfine\n") == [b"x" * 11, b"fine\n"]  # whole, in one read


def test_a_cut_line_is_rejected_as_too_long():
    s = p.LineSplitter()
    first = s.feed(b"{" + b" " * p.MAX_LINE)
    assert len(first) == 1 and p.decode(first[0]).kind == p.TOO_LONG


# -- what leaves the node --------------------------------------------------------------------------

def test_secrets_in_log_text_and_messages_are_scrubbed():
    secret = "sk-abcdefghijklmnopqrstuvwxyz0123"
    reading = Reading("logs", 1.0, OK, LogPoll(files=(LogUpdate(
        "/l", OK, lines=(LogLine(1, f"export OPENAI_API_KEY={secret}"), LogLine(2, "loss 0.1")),
        events=(LogEvent("traceback", 3, 4, 1.0, f"auth failed: Bearer {secret}",
                         f"token={secret}"),)),)), message=f"key {secret}")
    clean = scrub_reading(reading)
    text = json.dumps(model_data(clean))
    assert secret not in text and "loss 0.1" in text
    stacks = scrub_reading(Reading("stacks", 1.0, OK, StackPoll(dumps=(ProcessDump(
        1, command=f"python x.py --hf_token {secret}", message=f"password={secret}"),))))
    assert secret not in json.dumps(model_data(stacks))
    assert secret not in reading_lines("h", 1.0, reading)[0].decode()


def model_data(reading: Reading):
    from rltui.serialize import reading_to_data
    return reading_to_data(reading)


def big_logs(files: int, lines: int, width: int) -> Reading:
    return Reading("logs", 1.0, OK, LogPoll(files=tuple(LogUpdate(
        f"/logs/rank{f}.out", OK, rank=f,
        lines=tuple(LogLine(i + 1, f"{i:06d} " + "x" * width) for i in range(lines)),
        steps=(StepRecord(1, 1, 1.0),)) for f in range(files)), unmatched=("/none/*",)))


def test_a_logs_reading_over_the_limit_is_split_per_file(monkeypatch):
    monkeypatch.setattr(p, "MAX_LINE", 20_000)
    lines = reading_lines("h", 1.0, big_logs(files=3, lines=50, width=100))
    assert len(lines) == 3
    parts = [p.decode(line) for line in lines]
    assert [m.reading.payload.files[0].path for m in parts] == [f"/logs/rank{f}.out"
                                                               for f in range(3)]
    assert [m.reading.payload.unmatched for m in parts] == [("/none/*",), (), ()]
    assert all(len(m.reading.payload.files[0].lines) == 50 for m in parts)


def test_one_file_over_the_limit_keeps_its_newest_lines(monkeypatch):
    monkeypatch.setattr(p, "MAX_LINE", 20_000)
    (line,) = reading_lines("h", 1.0, big_logs(files=1, lines=1000, width=100))
    update = p.decode(line).reading.payload.files[0]
    assert 0 < len(update.lines) < 1000 and update.lines[-1].line_no == 1000
    assert update.message == TRIMMED and update.steps


def test_another_reading_over_the_limit_becomes_an_error_reading(monkeypatch):
    monkeypatch.setattr(p, "MAX_LINE", 2_000)
    dumps = tuple(ProcessDump(pid, threads=(ThreadStack(1, frames=tuple(
        Frame(f"f{i}", "x.py", i) for i in range(50))),)) for pid in range(5))
    (line,) = reading_lines("h", 1.0, Reading("stacks", 5.0, OK, StackPoll(dumps=dumps)))
    reading = p.decode(line).reading
    assert (reading.status, reading.payload, reading.timestamp) == (ERROR, None, 5.0)
    assert "over the" in reading.message and "not sent" in reading.message


# -- layering --------------------------------------------------------------------------------------

@pytest.mark.parametrize("module", ["rltui.agent.protocol", "rltui.agent.outbound",
                                    "rltui.cli.agent"])
def test_pure_agent_modules_import_nothing_heavy(module):
    assert forbidden_loaded([module], ("textual", "rich", "pynvml", "psutil", "subprocess")) == []


def test_no_agent_module_imports_textual():
    """The agent runs on every node of a job: no screen library, whichever module loads."""
    import pkgutil

    import rltui.agent
    names = [m.name for m in pkgutil.walk_packages(rltui.agent.__path__, "rltui.agent.")]
    assert {"rltui.agent.loop", "rltui.agent.requests"} <= set(names)
    names.append("rltui.cli.agent")  # its command line, with the others in rltui.cli
    code = ("import sys, json, importlib\n"
            f"for name in {names!r}: importlib.import_module(name)\n"
            "print(json.dumps([m for m in ('textual', 'rich') if m in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("line", [
    rb'{"v":1,"type":"heartbeat","host":"h","t":"\udcff"}',  # a known type, a bad number
    rb'{"v":1,"type":"newer-kind","host":"h","t":"\ud800"}',  # an unknown type's envelope
])
def test_a_lone_surrogate_is_a_bad_field_not_a_crash(line):
    """Valid UTF-8 and valid JSON, but the escape decodes to a lone surrogate that msgspec
    cannot take: one such line from a node once killed the host's reader thread."""
    got = p.decode(line)
    assert isinstance(got, p.ProtocolError) and got.kind == p.BAD_FIELD
    assert "lone surrogate" in got.message


def test_a_request_with_a_lone_surrogate_is_answered_as_a_bad_field():
    got = p.decode_request(rb'{"v":1,"id":"x","op":"tail","lines":"\udcff"}')
    assert isinstance(got, p.ProtocolError) and got.kind == p.BAD_FIELD
    assert got.message.startswith("tail:") and got.id == "x"
