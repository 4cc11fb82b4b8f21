"""Attacks on the Flight Recorder reader and source (docs/flight-recorder.md, docs/reliability.md):
pickles that reach for code, pickles that would make a wrong splice, memory and CPU bombs, hostile
numbers and strings, the debug server as an adversary, ranks claimed twice.

Each test says what it holds rltui to; ``RLTUI_FUZZ_LONG=1`` runs the mutation property longer.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import pickle
import random
import struct
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from rltui.model import FrPoll, ProcInfo
from rltui.parsing import flightrec as reader
from rltui.sources import flightrec as source
from rltui.sources import torchdebug

REPO = Path(__file__).resolve().parents[2]
LONG = REPO / "fixtures" / "flight_recorder" / "gloo-2.10-long" / "nccl_trace_rank_0"
FUZZ_LONG = os.environ.get("RLTUI_FUZZ_LONG") == "1"


def whole(data: bytes, name: str = "nccl_trace_rank_0", monkeypatch=None) -> list:
    """What reading the whole pickle gives (no splice)."""
    saved = reader._spliced
    reader._spliced = lambda *a, **k: None
    try:
        return reader.read_dump(data, name)
    finally:
        reader._spliced = saved


def same_or_error(data: bytes, name: str = "nccl_trace_rank_0") -> tuple[str, list, list]:
    fast = reader.read_dump(data, name)
    slow = whole(data, name)
    if fast == slow:
        return "equal", fast, slow
    assert all(d.status == "error" for d in fast), (fast[0].message, slow[0].message)
    return "error", fast, slow


# -- a writer of pickles shaped as torch's C++ pickler writes them ----------------------------------
# (protocol 2; each string written once then referenced; a dict memoised after its items; the
# record list one MARK ... APPENDS). Python's own pickler memoises a dict before its items, so
# its pickles never take the splice: these do.

class TorchPickler:
    def __init__(self, memoize_from: int | None = None) -> None:
        self.out = io.BytesIO()
        self.memo: dict = {}
        self.n = 0
        self.memoize_from = memoize_from  # from that slot on: implicit (protocol 4's MEMOIZE)
        self.fresh: set = set()  # strings written anew each time (no memo)
        self.quiet_ids: set = set()  # records written without any memo slot
        self.quiet = False

    def put(self) -> None:
        if self.quiet:
            return
        if self.memoize_from is not None and self.n >= self.memoize_from:
            self.out.write(b"\x94")
        elif self.n < 256:
            self.out.write(b"q" + bytes([self.n]))
        else:
            self.out.write(b"r" + struct.pack("<I", self.n))
        self.n += 1

    def get(self, i: int) -> None:
        self.out.write(b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i))

    def save(self, v) -> None:
        w = self.out.write
        if isinstance(v, bool):
            w(b"\x88" if v else b"\x89")
        elif v is None:
            w(b"N")
        elif isinstance(v, int):
            if 0 <= v < 256:
                w(b"K" + bytes([v]))
            elif -(1 << 31) <= v < (1 << 31):
                w(b"J" + struct.pack("<i", v))
            else:
                b = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
                w(b"\x8a" + bytes([len(b)]) + b)
        elif isinstance(v, str):
            if v in self.memo and v not in self.fresh:
                self.get(self.memo[v])
                return
            b = v.encode("utf-8", "surrogatepass")
            w(b"X" + struct.pack("<I", len(b)) + b)
            if v not in self.fresh and not self.quiet:
                self.memo[v] = self.n
                self.put()
        elif isinstance(v, (list, tuple)):
            if id(v) in self.memo:
                self.get(self.memo[id(v)])
                return
            w(b"](")
            for x in v:
                self.save(x)
            w(b"e")
        elif isinstance(v, dict):
            if id(v) in self.memo:
                self.get(self.memo[id(v)])
                return
            was = self.quiet
            self.quiet = was or v.get("record_id", -1) in self.quiet_ids
            w(b"}(")
            for k, x in v.items():
                self.save(k)
                self.save(x)
            w(b"u")
            if not self.quiet:
                self.memo[id(v)] = self.n
            self.put()
            self.quiet = was
        else:
            raise TypeError(v)

    def dumps(self, doc) -> bytes:
        self.out.write(b"\x80\x02")
        self.save(doc)
        self.out.write(b".")
        return self.out.getvalue()


FRAMES = [{"name": "all_reduce", "filename": "/opt/venv/torch/distributed_c10d.py", "line": 3245},
          {"name": "train_step", "filename": "/home/user/job/train.py", "line": 37}]


def record(rid: int, *, pending: bool = False, op: str = "all_reduce", frames=None,
           pg: str = "0") -> dict:
    return {"frames": frames if frames is not None else FRAMES, "record_id": rid, "pg_id": 0,
            "process_group": [pg, "default_pg"], "collective_seq_id": rid + 1,
            "p2p_seq_id": 0, "op_id": rid + 1, "profiling_name": f"gloo:{op}",
            "time_created_ns": 1_790_000_000_000_000_000 + rid,
            "input_sizes": [[1024]], "input_dtypes": ["Float"], "output_sizes": [[1024]],
            "output_dtypes": ["Float"], "state": "scheduled" if pending else "completed",
            "time_discovered_started_ns": None, "retired": not pending, "timeout_ms": 600000,
            "is_p2p": False}


def doc_of(records: list) -> dict:
    return {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                    "ranks": "[0, 1]"}},
            "pg_status": {"0": {"last_enqueued_collective": len(records),
                                "last_started_collective": len(records) - 1,
                                "last_completed_collective": len(records) - 1}},
            "entries": records}


def torch_pickle(records: list, **kw) -> bytes:
    return TorchPickler(**kw).dumps(doc_of(records))


def spliced_used(data: bytes) -> bool:
    return reader._spliced(data, reader.TAIL) is not None


# -- 1. pickles that reach for code -----------------------------------------------------------------

def _planted(path: Path) -> dict[str, bytes]:
    """One pickle per opcode that could reach code; the ones that can name a function make it
    create ``path``."""
    cmd = f"touch {path}".encode()
    arg = b"X" + struct.pack("<I", len(cmd)) + cmd
    call = b"\x85R"  # TUPLE1, REDUCE
    return {
        "GLOBAL+REDUCE": b"\x80\x02cos\nsystem\n" + arg + call + b".",
        "STACK_GLOBAL": (b"\x80\x04\x8c\x02os\x8c\x06system\x93" + arg + call + b"."),
        "INST": b"(cos\nsystem\n" + b"S'" + cmd + b"'\ni" + b"os\nsystem\n.",
        "OBJ": b"\x80\x02(cos\nsystem\n" + arg + b"o.",
        "NEWOBJ": b"\x80\x02cbuiltins\nobject\n)\x81.",
        "NEWOBJ_EX": b"\x80\x04\x8c\x08builtins\x8c\x06object\x93)}\x92.",
        "BUILD": b"\x80\x02}}(X\x01\x00\x00\x00aK\x01ub.",
        "REDUCE alone": b"\x80\x02]" + arg + call + b".",
        "EXT1": b"\x80\x02\x82\x42" + arg + call + b".",
        "EXT2": b"\x80\x02\x83\x42\x00" + arg + call + b".",
        "EXT4": b"\x80\x02\x84\x42\x00\x00\x00" + arg + call + b".",
        "PERSID": b"\x80\x02P" + cmd + b"\n.",
        "BINPERSID": b"\x80\x02" + arg + b"Q.",
        "class via Python": pickle.dumps(_Evil(str(path)), protocol=2),
        "class via Python p5": pickle.dumps(_Evil(str(path)), protocol=5),
        "class in a record": pickle.dumps({"entries": [{"frames": _Evil(str(path))}]}, 2),
    }


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_every_opcode_that_reaches_code_is_refused_and_nothing_runs(tmp_path, monkeypatch):
    import copyreg
    target = tmp_path / "owned"
    # an extension code registered for os.system: EXT1/2/4 resolve through find_class
    monkeypatch.setitem(copyreg._extension_registry, ("os", "system"), 0x42)
    monkeypatch.setitem(copyreg._inverted_registry, 0x42, ("os", "system"))
    for what, data in _planted(target).items():
        for name in ("nccl_trace_rank_0", "x.json"):
            got = reader.read_dump(data, name)
            assert len(got) == 1 and got[0].status == "error", what
            assert got[0].message and len(got[0].message) <= 300, what
        # the unpickler alone refuses too (the opcode check is not the only wall)
        try:
            reader._NoGlobals(io.BytesIO(data)).load()
        except Exception:  # noqa: BLE001 - refused in any way: fine
            pass
        assert not target.exists(), what
    msg = reader.read_dump(_planted(target)["GLOBAL+REDUCE"], "r_0")[0].message
    assert "os.system" in msg and "refused" in msg
    msg = reader.read_dump(_planted(target)["STACK_GLOBAL"], "r_0")[0].message
    assert "STACK_GLOBAL" in msg and "refused" in msg


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_every_protocol_of_plain_data_reads_the_same(protocol):
    records = [record(i) for i in range(300)] + [record(300, pending=True)]
    ref = reader.read_dump(pickle.dumps(doc_of(records), protocol=2), "nccl_trace_rank_0")
    got = reader.read_dump(pickle.dumps(doc_of(records), protocol=protocol), "nccl_trace_rank_0")
    if protocol < 2:  # no header: torch never wrote these; refused with a line
        assert got[0].status == "error" and "not a Flight Recorder dump" in got[0].message
    else:
        assert got[0].status == "ok" and got == ref


# -- 1b. the two-ends splice: exact or refused --------------------------------------------------------

def test_the_torch_shaped_writer_takes_the_splice_and_reads_exactly():
    records = [record(i) for i in range(2000)] + [record(2000, pending=True)]
    data = torch_pickle(records)
    assert spliced_used(data)
    kind, fast, slow = same_or_error(data)
    assert kind == "equal" and fast[0].total == 2001


@pytest.mark.parametrize("where", [1, 2, 30, 63, 64, 65, 100])
def test_the_record_signature_inside_strings_never_misleads(where):
    """The bytes that open a record, planted in an op name, a frame's file name and an int of
    the newest records (and the first ones): the splice reads as the whole pickle or not at all."""
    probe = torch_pickle([record(i) for i in range(4)])
    at = probe.find(b"entries")
    sig = b"}(h" + probe[at + 12 + 3 + 8 + 1:][:1]  # "frames" is the first key: its memo slot
    i = probe.find(b"X\x06\x00\x00\x00frames")
    sig = b"}(h" + probe[i + 11 + 1:i + 11 + 2]
    assert probe.count(sig) == 3  # the first record writes the key, the others refer to it
    n = 2000
    records = [record(i) for i in range(n)] + [record(n, pending=True)]
    bad = sig.decode("latin-1")
    for k in (n - where, 3):
        rec = records[k]
        rec["profiling_name"] = f"gloo:all_reduce{bad}{bad}X"
        rec["frames"] = [{"name": bad + "}(" + bad, "filename": f"/x/{bad}/{bad}.py",
                          "line": int.from_bytes(sig, "little")}]
        rec["op_id"] = int.from_bytes(sig, "little")
    data = torch_pickle(records)
    kind, fast, slow = same_or_error(data)
    assert kind == "equal", fast[0].message


def test_records_with_ids_not_consecutive_read_whole():
    records = [record(i) for i in range(2000)] + [record(2000, pending=True)]
    for k in range(1990, 2001):
        records[k]["record_id"] += 7 * (k % 2)
    data = torch_pickle(records)
    assert not spliced_used(data)
    assert same_or_error(data)[0] == "equal"


def test_a_first_record_with_an_id_out_of_step_reads_whole():
    """Found by the mutation property (one flipped byte in the head): the records skipped were
    counted from the last first record's id, so the total read 1,992 of 2,000 records."""
    for k in (0, 3, 7):
        records = [record(i) for i in range(2000)] + [record(2000, pending=True)]
        records[k]["record_id"] += 8
        assert same_or_error(torch_pickle(records))[0] == "equal"


def test_newest_records_that_refer_to_the_skipped_middle_read_as_whole():
    """A frame first written in the middle (a call site new in iteration 1000) and reused by
    the newest records: kept head grows, or the whole pickle is read; never a wrong reading."""
    late = [{"name": "late_site", "filename": "/home/user/job/late.py", "line": 9}]
    records = [record(i, frames=late if i >= 1000 else None) for i in range(2000)]
    records.append(record(2000, pending=True, frames=late))
    data = torch_pickle(records)
    kind, fast, slow = same_or_error(data)
    assert kind == "equal" and fast[0].entries[-1].frames[0].name == "late_site"


def test_implicit_memo_slots_are_never_spliced():
    """A protocol 2 header over protocol 4's MEMOIZE (implicit slots: each one's index is the
    count of slots filled before it, which a splice changes). Never spliced, read whole."""
    records = [record(i) for i in range(2000)] + [record(2000, pending=True)]
    p = TorchPickler(memoize_from=60)
    p.quiet_ids = set(range(8, 1937))  # the skipped middle fills no slot: the splice would hold
    data = p.dumps(doc_of(records))
    assert data[:2] == b"\x80\x02" and b"\x94" in data
    assert not spliced_used(data)
    kind, fast, slow = same_or_error(data)
    assert kind == "equal" and slow[0].status == "ok"
    saved = reader._RUN_SPLICE
    try:  # the check is what refuses it
        reader._RUN_SPLICE = reader._RUN
        assert spliced_used(data)
    finally:
        reader._RUN_SPLICE = saved


def _mutations(data: bytes, rng: random.Random, count: int):
    n = len(data)
    for _ in range(count):
        kind = rng.randrange(6)
        if kind == 0:  # a flip anywhere
            i = rng.randrange(n)
            yield data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
        elif kind == 1:  # a flip in the newest 12 KB (what the splice reads)
            i = n - 1 - rng.randrange(12000)
            yield data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
        elif kind == 2:  # a flip in the first 3 KB
            i = rng.randrange(3000)
            yield data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
        elif kind == 3:  # cut short
            yield data[:rng.randrange(n)]
        elif kind == 4:  # a run of bytes rewritten
            i = rng.randrange(n - 16)
            yield data[:i] + rng.randbytes(rng.randrange(1, 16)) + data[i + 16:]
        else:  # the signature itself planted
            i = n - 1 - rng.randrange(12000)
            yield data[:i] + b"}(h\x10" + data[i + 4:]


def test_mutations_of_the_real_dump_read_exactly_or_as_an_error():
    """Over byte flips, truncations and planted signatures of the real 2,000-record dump: the
    reading equals the whole pickle's, or is an error, or (a change in the middle the splice
    never reads) equals the unchanged dump's reading while the whole read changed."""
    data = LONG.read_bytes()
    original = reader.read_dump(data, "nccl_trace_rank_0")
    rng = random.Random(1234)
    counts = {"equal": 0, "error": 0, "middle": 0}
    for m in _mutations(data, rng, 5000 if FUZZ_LONG else 60):
        fast = reader.read_dump(m, "nccl_trace_rank_0")
        slow = whole(m)
        if fast == slow:
            counts["equal"] += 1
        elif all(d.status == "error" for d in fast):
            counts["error"] += 1
        else:
            # the splice read the same bytes as for the unchanged dump: the change is in the
            # skipped middle, where only a whole read could see it
            assert fast == original, (fast[0].message, slow[0].status, slow[0].message)
            counts["middle"] += 1
    assert counts["equal"] > 0


# -- 2. memory and CPU bombs ---------------------------------------------------------------------------

def peak(fn) -> tuple[object, int, float]:
    tracemalloc.start()
    t = time.process_time()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1], time.process_time() - t
    finally:
        tracemalloc.stop()


def test_a_huge_memo_index_is_refused_before_it_is_allocated():
    # before: 20 bytes made the C unpickler allocate and zero 16 bytes per slot up to the index
    # (2^28: 4 GB, 12 s; 2^31: 32 GB)
    for idx in (1 << 20, 1 << 28, (1 << 32) - 1):
        data = b"\x80\x02}(X\x07\x00\x00\x00entries]r" + struct.pack("<I", idx) + b"u."
        got, mem, cpu = peak(lambda: reader.read_dump(data, "nccl_trace_rank_0"))
        assert got[0].status == "error" and "memo" in got[0].message
        assert mem < 1 << 20 and cpu < 0.5
    text = b"(dp2147483647\n."
    assert reader.read_dump(text, "nccl_trace_rank_0")[0].status == "error"


def test_a_length_longer_than_the_file_is_refused():
    for op, w in ((b"X", 4), (b"\x8d", 8), (b"\x8e", 8), (b"B", 4), (b"\x96", 8)):
        data = b"\x80\x04" + op + b"\xff" * (w - 1) + b"\x7f" + b"ab."
        got, mem, _ = peak(lambda: reader.read_dump(data, "nccl_trace_rank_0"))
        assert got[0].status == "error" and mem < 1 << 20


def test_many_references_to_one_record_stay_bounded():
    """A pickle of 2 bytes per record: 200,000 references to one pending record with 48 frames
    (the pickle shares them; a conversion per reference would not). 10^6 of them (2 MB):
    before 10^6 records converted, 1.6 GB; now 16,384, 0.4 s."""
    frames = [{"name": f"f{i}", "filename": "/x.py", "line": i} for i in range(48)]
    rec = record(1, pending=True, frames=frames)
    body = TorchPickler().dumps(doc_of([rec]))
    # the record's memo slot: its dict is put after its items, the last put before "]"... use
    # the writer: entries = [rec] * 10^6
    p = TorchPickler()
    data = p.dumps(doc_of([rec] * 60_000))
    assert len(data) < 1 << 20 and len(body) < 4000
    got, mem, cpu = peak(lambda: reader.read_dump(data, "nccl_trace_rank_0"))
    assert got[0].status == "ok" and len(got[0].entries) <= reader.MAX_WINDOW
    assert mem < 100 << 20 and cpu < 5


def test_a_rank_list_shared_by_every_group_is_read_once(monkeypatch):
    """One budget of rank text and ranks for all the groups (4 MiB, 2^20 ranks; 1 MiB here to
    stay quick). 16,384 groups sharing a 1.3 MB list: before 3.3 billion ranks read."""
    monkeypatch.setattr(reader, "MAX_RANKS_TEXT", 1 << 20)
    ranks = "[" + ", ".join(str(i) for i in range(200_000)) + "]"  # 1.3 MB
    shared = {"name": "g", "desc": "", "ranks": ranks}
    doc = doc_of([record(1, pending=True)])
    doc["pg_config"] = {str(i): dict(shared, name=str(i)) for i in range(1024)}
    data = pickle.dumps(doc, protocol=2)  # the rank string written once, referenced 16384 times
    assert len(data) < 3 << 20
    got, mem, cpu = peak(lambda: reader.read_dump(data, "nccl_trace_rank_0"))
    assert got[0].status == "ok"
    assert sum(len(g.ranks) for g in got[0].groups) <= reader.MAX_RANKS
    assert cpu < 5 and mem < 300 << 20


def test_containers_by_the_million_are_refused_before_they_are_built():
    n = 20_000_000  # 20 MB of EMPTY_LIST: ~1.3 GB of lists
    data = b"\x80\x02(" + b"]" * n + b"l."
    got, mem, cpu = peak(lambda: reader.read_dump(data, "nccl_trace_rank_0"))
    assert got[0].status == "error" and "MiB of objects" in got[0].message
    assert mem < 64 << 20 and cpu < 2


def test_deep_nesting_is_a_message():
    deep_pickle = b"\x80\x02" + b"](" * 200_000 + b"e" * 200_000 + b"."
    deep_json = b"[" * 1_000_000 + b"]" * 1_000_000
    deep_entries = (b'{"entries": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}")
    for data in (deep_pickle, deep_json, deep_entries):
        got, mem, cpu = peak(lambda: reader.read_dump(data, "nccl_trace_rank_0"))
        assert got[0].status in ("ok", "error") and cpu < 5 and mem < 200 << 20


def test_a_large_json_is_refused_whole():
    data = b'{"entries": [' + b'{"a": 1},' * (reader.MAX_JSON_BYTES // 9 + 1) + b'{}]}'
    got, mem, cpu = peak(lambda: reader.read_dump(data, "x.json"))
    assert got[0].status == "error" and "MiB" in got[0].message and mem < 1 << 20


def test_files_that_are_no_dump_are_refused_with_one_line_each(tmp_path):
    zeros = tmp_path / "nccl_trace_rank_0"
    with open(zeros, "wb") as fh:  # 200 MB of zeros, sparse
        fh.truncate(200 << 20)
    fifo = tmp_path / "nccl_trace_rank_1"
    os.mkfifo(fifo)
    (tmp_path / "nccl_trace_rank_2").symlink_to("/dev/zero")
    big = tmp_path / "nccl_trace_rank_3"
    with open(big, "wb") as fh:
        fh.truncate(600 << 20)
    src = source.FlightRecorderSource([str(tmp_path / "nccl_trace_rank_*")])
    reading, mem, cpu = peak(src.poll)
    poll: FrPoll = reading.payload
    by_rank = {d.rank: d for d in poll.dumps}
    assert by_rank[0].status == "error" and "MiB" in by_rank[0].message
    assert any("nccl_trace_rank_1" in p and "FIFO" in p.upper() for p in poll.problems)
    assert any("nccl_trace_rank_2" in p for p in poll.problems)
    assert any("nccl_trace_rank_3" in p and "MiB" in p for p in poll.problems)
    assert mem < 8 << 20 and cpu < 2


def test_a_file_growing_while_read_is_read_as_far_as_it_was(tmp_path):
    path = tmp_path / "nccl_trace_rank_0"
    data = LONG.read_bytes()
    path.write_bytes(data[:100_000])
    stop = threading.Event()

    def grow():
        with open(path, "ab") as fh:
            while not stop.is_set():
                fh.write(b"\x00" * 4096)
                fh.flush()
                if fh.tell() > 40 << 20:
                    break
    t = threading.Thread(target=grow)
    t.start()
    try:
        src = source.FlightRecorderSource([str(path)])
        reading = src.poll()
    finally:
        stop.set()
        t.join()
    d = reading.payload.dumps[0]
    assert d.status == "error" and d.message


# -- 3. numbers ------------------------------------------------------------------------------------

def test_hostile_numbers():
    rec = record(5, pending=True)
    rec.update({"collective_seq_id": -3, "record_id": 10 ** 30, "op_id": float("nan"),
                "time_created_ns": True, "timeout_ms": float("inf"),
                "input_sizes": [[10 ** 40, -1, True, 1.5]], "p2p_seq_id": "9" * 30,
                "process_group": [10 ** 5000, 2 ** 70]})
    doc = doc_of([record(i) for i in range(4)] + [rec])
    doc["pg_config"]["0"]["ranks"] = "1" * 10_000_000  # a 10 MB digit run
    doc["pg_status"]["0"]["last_completed_collective"] = 10 ** 100
    data = pickle.dumps(doc, protocol=2)
    t = time.process_time()
    got = reader.read_dump(data, "nccl_trace_rank_0")
    cpu = time.process_time() - t
    d = got[0]
    assert d.status == "ok" and cpu < 2
    e = d.entries[-1]
    assert e.seq == -3 and e.record_id == 0 and e.op_id == -1 and e.created_ns is None
    assert e.input_sizes == ((0, -1, 0, 0),) and e.group == "(a number too large)"
    assert reader.read_dump(pickle.dumps({"entries": [], "version": 10 ** 5000}, 2), "r_0")[0]


def test_a_rank_suffix_of_twenty_digits_is_no_rank():
    assert reader.rank_from_name("/tmp/nccl_trace_rank_12345678901234567890") is None
    assert reader.rank_from_name("/tmp/nccl_trace_rank_1234567") == 1234567
    assert reader.rank_from_name("/tmp/nccl_trace_rank_12345678") is None
    assert reader.rank_from_name("/tmp/nccl_trace_rank_7.pkl") == 7


def test_a_json_list_with_rank_strings():
    items = [{"rank": "3", "entries": []}, {"rank": True, "entries": []},
             {"rank": -4, "entries": []}, {"rank": "x" * 10 ** 6, "entries": []},
             {"rank": 10 ** 30, "entries": []}]
    got = reader.read_dump(json.dumps(items).encode(), "fr.json")
    assert [d.rank for d in got] == [3, 1, 2, 3, 4]  # a bad rank: its place in the list
    keyed = {"7": {"entries": []}, "x" * 1000: {"entries": [], "rank": "2"},
             "y": {"entries": [], "rank": [1]}}
    got = reader.read_dump(json.dumps(keyed).encode(), "fr.json")
    assert [d.rank for d in got] == [7, 2, None] and all(len(d.source) < 200 for d in got)


# -- 4. strings on the way out: tests/integration/test_flightrec_outputs.py (the real command)


# -- 5. the debug server as an adversary ---------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    mode = "ok"

    def log_message(self, *a) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        mode = self.server.mode  # type: ignore[attr-defined]
        try:
            if mode == "slow":
                self.send_response(200)
                self.end_headers()
                for _ in range(60):
                    self.wfile.write(b"<")
                    self.wfile.flush()
                    time.sleep(0.2)
            elif mode == "slow-headers":
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                for _ in range(60):
                    self.wfile.write(b"X-A: b\r\n")
                    self.wfile.flush()
                    time.sleep(0.2)
            elif mode == "500":
                self.send_error(500, "boom \x1b[2J")
            elif mode.startswith("redirect:"):
                self.send_response(302)
                self.send_header("Location", mode[9:])
                self.end_headers()
            elif mode == "huge":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                chunk = b"a" * (1 << 20)
                for _ in range(1024):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.write(b"0\r\n\r\n")
            else:
                body = self.server.body  # type: ignore[attr-defined]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture()
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.mode, srv.body = "ok", b""
    t = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    t.start()
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize("mode", ["slow", "slow-headers"])
def test_a_slow_server_is_cut_off_at_the_timeout(server, mode):
    srv, url = server
    srv.mode = mode
    t = time.monotonic()
    with pytest.raises(OSError) as err:
        source.fetch_text(url + "/fr_trace_json", 0.5)
    assert time.monotonic() - t < 1.5 and "0.5 s" in str(err.value)


@pytest.mark.parametrize("to", ["file:///etc/passwd", "ftp://127.0.0.1/x",
                                "http://169.254.169.254/latest/meta-data/", "/elsewhere"])
def test_a_redirect_is_never_followed(server, to):
    srv, url = server
    srv.mode = "redirect:" + to
    with pytest.raises(OSError) as err:
        source.fetch_text(url + "/stacks", 2.0)
    assert "not followed" in str(err.value) and "\n" not in str(err.value)


def test_an_error_page_is_one_line(server):
    srv, url = server
    srv.mode = "500"
    with pytest.raises(OSError) as err:
        source.fetch_text(url + "/stacks", 2.0)
    assert str(err.value).startswith("HTTP 500")
    reading = torchdebug.DebugServerStacks([url], timeout=2.0).poll()
    assert reading.status == "error" and "HTTP 500" in reading.message


def test_a_gigabyte_body_is_cut_at_the_limit(server):
    srv, url = server
    srv.mode = "huge"
    t = time.monotonic()
    out, mem, _ = peak(lambda: pytest.raises(OSError, source.fetch_text, url + "/x", 10.0,
                                             8 << 20))
    assert "larger than 8 MiB" in str(out.value) and mem < 40 << 20
    assert time.monotonic() - t < 5


def test_hostile_pages(server):
    srv, url = server
    # 10^5 headings, unclosed <pre> tags, invalid UTF-8, a hostile JSON in a <pre>
    srv.body = (b"<h2>Rank 1: h</h2><pre>" * 100_000 + b"\xff\xfe<h2>Rank 2: \x1b[2J</h2><pre>"
                + b"[" * 100_000 + b"</pre>")
    t = time.process_time()
    reading = torchdebug.DebugServerStacks([url], timeout=5.0).poll()
    assert reading.status in ("error", "unavailable", "ok")
    assert time.process_time() - t < 5
    t = time.process_time()
    poll = source.FlightRecorderSource(urls=[url], timeout=5.0).poll().payload
    assert time.process_time() - t < 10
    assert len(poll.dumps) <= 1 << 14
    # unclosed <pre> tags in one section: linear, not quadratic
    page = "<h2>Rank 0: a</h2>" + "<pre>" * 200_000
    t = time.process_time()
    dumps, problems = torchdebug.stacks_from_page(page, "x")
    assert time.process_time() - t < 1 and not dumps and problems


# -- 6. ranks claimed twice ----------------------------------------------------------------------------

def test_two_files_claiming_one_rank(tmp_path):
    from rltui.diagnosis import flightrec as fr
    data = (REPO / "fixtures" / "flight_recorder" / "gloo-2.10-frozen" / "nccl_trace_rank_1")
    for name in ("nccl_trace_rank_1", "nccl_trace_rank_01", "dump_without_rank"):
        (tmp_path / name).write_bytes(data.read_bytes())
    poll = source.FlightRecorderSource([str(tmp_path)]).poll().payload
    assert sorted((d.rank is None, d.rank) for d in poll.dumps) == [(False, 1), (False, 1),
                                                                     (True, None)]
    a = fr.analyse(poll)
    b = fr.analyse(FrPoll(dumps=tuple(reversed(poll.dumps)), problems=poll.problems))
    assert a is not None and b is not None
    ja, jb = fr.analysis_json(a), fr.analysis_json(b)
    ja.pop("sources"), jb.pop("sources"), ja.pop("problems"), jb.pop("problems")
    assert ja == jb  # the same choice whatever the order
    assert [p for p in a.problems if "rank 1:" in p] == [p for p in b.problems if "rank 1:" in p]
    assert any(p.startswith("rank 1:") and p.endswith("nccl_trace_rank_01 is read")
               for p in a.problems)
    assert any("dump_without_rank" in p and "no rank" in p for p in a.problems)


def test_an_environment_named_dump_planted_by_another_user_is_not_read(tmp_path, monkeypatch):
    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(LONG.read_bytes())
    proc = ProcInfo(pid=os.getpid(), rank=0, create_time=0.0,
                    debug_env=(("TORCH_FR_DUMP_TEMP_FILE", str(tmp_path / "nccl_trace_rank_")),))
    src = source.FlightRecorderSource(procs=lambda: [proc])
    assert src.poll().payload.dumps  # the rank's own user: read
    if os.geteuid() != 0:
        pytest.skip("planting a file owned by another user needs root")
    os.chown(path, 4242, 4242)
    os.utime(path)  # changed: read again
    poll = source.FlightRecorderSource(procs=lambda: [proc]).poll().payload
    assert not poll.dumps and any("not read" in p and "4242" in p for p in poll.problems)


def test_one_bad_section_of_the_page_leaves_the_others_read():
    good = json.dumps({"entries": [record(1, pending=True)]})
    page = (f"<h2>Rank 0: a</h2><pre>{good}</pre>"
            "<h2>Rank 1: b</h2><pre>{\"entries\": 7}</pre>"
            "<h2>Rank 2: c</h2><pre>" + "[" * 100_000 + "</pre>"
            f"<h2>Rank 3: d</h2><pre>{good}</pre>")
    got = {d.rank: d for d in reader.read_dump(page.encode(), "page.html")}
    assert [got[r].status for r in range(4)] == ["ok", "error", "error", "ok"]
    assert "entries is not a list" in got[1].message


@pytest.mark.parametrize("url", ["http://127.0.0.1:1/\x1b[2J", "http://127.0.0.1:1/é",
                                 "http://[::1", "http://127.0.0.1:99999/", "ftp://x/",
                                 "http://:80/", "file:///etc/passwd"])
def test_addresses_that_are_no_server_are_one_line(url):
    with pytest.raises(OSError) as err:
        source.fetch_text(url, 1.0)
    assert "\n" not in str(err.value)
