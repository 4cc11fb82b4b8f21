"""Real hangs with the Flight Recorder on: gloo jobs that deadlock, dump their Flight Recorder
(``torchjobs/_flightrec.py``, what the NCCL watchdog does on a timeout) and their stacks (the
real py-spy), read back by ``rltui diagnose`` as a user would run it.

Each scenario is one job, started once for its class of tests and killed when the class is done
(pass or fail): one test reads the raw dumps (what the job really wrote: the pending entries per
rank, the group status), the others run the command line on them. The ranks run with
``TORCH_FR_BUFFER_SIZE`` (record every collective) and ``TORCH_FR_DUMP_TEMP_FILE`` in the test's
folder, and dump after ``FR_AFTER`` seconds without progress; the tests wait for each rank's
``frdump`` line, never a fixed time.

The scenarios (4 ranks unless said):

- ``fr_cross_group``: ranks 0,1 wait in all_reduce #4 of the default group, ranks 2,3 in
  all_reduce #4 of a second group, all from the same line: the stacks alone read "every rank in
  the same collective" (pattern C); the Flight Recorder tells the cross-group order (B).
- ``fr_skipped``: rank 3 skipped all_reduce #4 (an empty batch) and waits for rollouts; the
  others wait in it. Rank 3's last collective is #3, completed: it is behind.
- ``fr_frozen``: rank 3 is parked before all_reduce #4, where the others wait; only ranks 0-2
  are dumped with py-spy (a stalled peer on another node): same collective (C), rank 3 behind.
- ``fr_p2p`` (2 ranks): both pipeline stages wait in recv. gloo records no send/recv in the
  Flight Recorder, so no rank has a pending entry: the stacks alone show the mismatch (B).
- ``fr_debug_server``: the cross-group hang with torch's debug server on; rltui reads the
  Flight Recorder over HTTP from rank 0's front end.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.integration.test_torch_hangs import (
    ALL_REDUCE,
    PYSPY,
    TorchJob,
    free_port,
    needs_torch,
    pyspy,
    pyspy_can_attach,  # noqa: F401 - autouse: skips where py-spy may not attach
    wait_for_frame,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow, needs_torch]

FR_AFTER = 1.0  # seconds without progress before a rank dumps its Flight Recorder
FAIL_STEP = 4  # the jobs' step that hangs: collectives #1..#3 of each group completed
DEFAULT, STATS = "0", "1"  # the default group's id, the second group's (in creation order)
CROSS_GROUP_KINDS = {"cross-group-order", "mismatch", "behind", "missing", "same-collective"}


class FlightRecorderJob(TorchJob):
    """A TorchJob whose ranks record every collective and dump on a stall into ``fr_dir``."""

    def __init__(self, script, world, args, log_dir, fr_dir: Path, debug_port: int = 0):
        super().__init__(script, world, args, log_dir)
        self.fr_dir, self.debug_port = fr_dir, debug_port

    @property
    def prefix(self) -> str:
        return str(self.fr_dir / "nccl_trace_rank_")

    def rank_env(self, rank: int, port: str) -> dict[str, str]:
        env = super().rank_env(rank, port)
        env.update(TORCH_FR_BUFFER_SIZE="2000", TORCH_FR_DUMP_TEMP_FILE=self.prefix,
                   TORCHJOB_FR_AFTER=str(FR_AFTER), TORCHJOB_DEBUG_PORT=str(self.debug_port),
                   # the debug server's /pyspy_dump runs "py-spy" from the rank's PATH
                   PATH=os.pathsep.join([str(Path(PYSPY).parent), env.get("PATH", "")]))
        return env

    def dumps(self) -> dict[int, str]:
        """Wait for every rank's ``frdump RANK PATH`` line; rank -> path."""
        found = self.wait_lines({r: f"frdump {r} " for r in range(self.world)})
        paths = {r: self.seen[i][1].split(" ", 2)[2] for r, i in found.items()}
        assert paths == {r: f"{self.prefix}{r}" for r in range(self.world)}
        return paths


class Hung:
    """A scenario's job, hung and dumped: its Flight Recorder files and its py-spy folder."""

    def __init__(self, job: FlightRecorderJob, root: Path) -> None:
        self.job, self.root = job, root
        self.paths: dict[int, str] = {}
        self.url = ""  # the debug server's front end, where the job has one
        self.stacks = root / "stacks"
        self.stacks.mkdir()

    @property
    def fr_glob(self) -> str:
        return f"{self.job.prefix}*"

    def save_stacks(self, frames: dict[int, str]) -> None:
        """Wait until each rank's MainThread shows its frame, then save one py-spy text dump
        per rank as ``rank<R>.txt`` (how ``rltui diagnose --stacks DIR`` reads the rank)."""
        for r, name in frames.items():
            wait_for_frame(self.job.pid(r), name, within=3)
        for r in frames:
            (self.stacks / f"rank{r}.txt").write_text(pyspy(self.job.pid(r)))

    def raw(self) -> dict[int, dict]:
        return {r: pickle.loads(Path(p).read_bytes()) for r, p in self.paths.items()}


def start_hung(request, tmp_path_factory, script: str, world: int, *args: str,
               ready: dict[int, str], frames: dict[int, str], debug_port: int = 0) -> Hung:
    root = tmp_path_factory.mktemp(Path(script).stem)
    (root / "fr").mkdir()
    job = FlightRecorderJob(script, world, args, root, root / "fr", debug_port)
    request.addfinalizer(job.stop)  # before start: a half-started job is killed too
    hung = Hung(job.start(), root)
    job.ready(ready)
    hung.paths = job.dumps()
    hung.save_stacks(frames)
    return hung


# -- reading the raw dumps and the command line ------------------------------------------------

def pending(dump: dict) -> list[dict]:
    return [e for e in dump["entries"] if not e["retired"]]


def last_retired(dump: dict, group: str) -> dict | None:
    done = [e for e in dump["entries"] if e["retired"] and e["process_group"][0] == group]
    return done[-1] if done else None


def diagnose(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", "--json", *args],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout.strip(), f"rltui diagnose {' '.join(args)}: no JSON; {out.stderr[-2000:]}"
    doc = json.loads(out.stdout)
    doc["_stderr"] = out.stderr
    return doc


def fr_of(doc: dict) -> dict:
    fr = doc.get("flight_recorder")
    assert fr, f"no flight_recorder in the JSON; notes: {doc.get('notes')}; {doc['_stderr']}"
    return fr


def group(fr: dict, gid: str) -> dict:
    return next(g for g in fr["groups"] if g["group"] == gid)


def per_rank(fr: dict, gid: str) -> dict[int, dict]:
    return {p["rank"]: p for p in group(fr, gid)["per_rank"]}


def findings(fr: dict, kind: str) -> list[dict]:
    return [f for f in fr["findings"] if f["kind"] == kind]


def check_sources(fr: dict, world: int, where: str) -> None:
    assert sorted(s["rank"] for s in fr["sources"]) == list(range(world))
    for s in fr["sources"]:
        assert s["status"] == "ok", s
        assert s["version"] == "2.10" and s["entries"] > 0
        assert where in s["source"]


def check_pending(p: dict, seq: int, size: int, frame: str | None) -> None:
    pend = p["pending"]
    assert pend is not None, p
    assert (pend["seq"], pend["op"]) == (seq, ALL_REDUCE)
    assert pend["sizes"] == [[size]] and pend["dtypes"] == ["Float"]
    assert pend["age_s"] >= FR_AFTER / 2  # it was pending a while before the rank dumped
    if frame is not None:  # the JSON over HTTP carries no frames
        assert frame in [f["name"] for f in pend["frames"]], pend["frames"]
    assert p["last_completed"]["seq"] == seq - 1


def check_cross_group(fr: dict) -> None:
    """Ranks 0,1 wait in all_reduce #4 of the default group, ranks 2,3 in #4 of the other."""
    assert {g["group"] for g in fr["groups"]} == {DEFAULT, STATS}
    assert group(fr, DEFAULT)["desc"] == "default_pg"
    for gid, size, waiting, other in ((DEFAULT, 4, (0, 1), (2, 3)),
                                      (STATS, 2, (2, 3), (0, 1))):
        assert group(fr, gid)["ranks"] == [0, 1, 2, 3]
        ranks = per_rank(fr, gid)
        for r in waiting:
            check_pending(ranks[r], FAIL_STEP, size, "reduce_in")
        for r in other:
            assert ranks[r]["pending"] is None
            assert ranks[r]["last_completed"]["seq"] == FAIL_STEP - 1
    (found,) = findings(fr, "cross-group-order")
    assert sorted(found["ranks"]) == [0, 1, 2, 3]
    assert sorted(found["groups"]) == [DEFAULT, STATS]
    assert found["text"]
    assert fr["pattern"] == "B"


def check_one_behind(fr: dict, world: int = 4) -> None:
    """Ranks 0..world-2 wait in all_reduce #4 of the default group; the last rank's last
    collective is #3, completed, nothing pending: it is the one behind."""
    ranks = per_rank(fr, DEFAULT)
    last = world - 1
    for r in range(last):
        check_pending(ranks[r], FAIL_STEP, 4, "sync_gradients")
    assert ranks[last]["pending"] is None and ranks[last]["behind"] is True
    assert ranks[last]["last_enqueued"] == FAIL_STEP - 1
    assert ranks[last]["last_completed"]["seq"] == FAIL_STEP - 1
    assert not any(ranks[r]["behind"] for r in range(last))
    blamed = findings(fr, "behind") + findings(fr, "missing")
    assert blamed and all(f["ranks"] == [last] for f in blamed), fr["findings"]
    assert not findings(fr, "cross-group-order")


# -- a cross-group ordering deadlock ---------------------------------------------------------------

@pytest.fixture(scope="class")
def cross_group(request, tmp_path_factory):
    return start_hung(request, tmp_path_factory, "fr_cross_group.py", 4,
                      ready={0: "all_reduce default", 1: "all_reduce default",
                             2: "all_reduce stats", 3: "all_reduce stats"},
                      frames={r: ALL_REDUCE for r in range(4)})


class TestCrossGroupOrder:
    def test_the_dumps_hold_one_pending_all_reduce_per_rank_in_two_groups(self, cross_group):
        for r, dump in cross_group.raw().items():
            assert dump["version"] == "2.10"
            (pend,) = pending(dump)
            gid = DEFAULT if r < 2 else STATS
            assert pend["process_group"] == ((gid, "default_pg") if gid == DEFAULT
                                             else (gid, "undefined"))
            assert (pend["collective_seq_id"], pend["profiling_name"]) == \
                (FAIL_STEP, "gloo:all_reduce")
            assert [f["name"] for f in pend["frames"]][2:4] == ["reduce_in", "train_step"]
            other = STATS if gid == DEFAULT else DEFAULT
            status = dump["pg_status"]
            assert status[gid]["last_enqueued_collective"] == FAIL_STEP
            assert status[gid]["last_completed_collective"] == FAIL_STEP - 1
            assert status[other]["last_enqueued_collective"] == FAIL_STEP - 1
            assert last_retired(dump, other)["collective_seq_id"] == FAIL_STEP - 1

    def test_the_stacks_alone_read_the_same_collective(self, cross_group):
        """Every rank's stack is the same: from py-spy alone this is pattern C."""
        doc = diagnose("--stacks", str(cross_group.stacks))
        assert doc["stacks"]["pattern"] == "C"
        assert doc.get("flight_recorder") is None
        (c,) = doc["stacks"]["classes"]
        assert (c["ranks"], c["op"]) == ("0-3", ALL_REDUCE)
        assert c["call_site"]["name"] == "Trainer.reduce_in"

    def test_the_flight_recorder_tells_the_cross_group_order(self, cross_group):
        doc = diagnose("--stacks", str(cross_group.stacks),
                       "--flight-recorder", cross_group.fr_glob)
        fr = fr_of(doc)
        check_sources(fr, 4, str(cross_group.job.fr_dir))
        check_cross_group(fr)
        assert doc["stacks"]["pattern"] == "B"

    def test_live_diagnose_finds_the_dumps_through_the_ranks_environment(self, cross_group):
        """No --flight-recorder: rltui finds the ranks by their command line and the dumps
        where each rank's TORCH_FR_DUMP_TEMP_FILE says."""
        doc = diagnose("--match", r"torchjobs/fr_cross_group\.py")
        assert sorted(r["rank"] for r in doc["ranks"]) == [0, 1, 2, 3]
        fr = fr_of(doc)
        check_sources(fr, 4, str(cross_group.job.fr_dir))
        check_cross_group(fr)
        assert doc["stacks"]["pattern"] == "B"


# -- a rank that skipped a collective --------------------------------------------------------------

@pytest.fixture(scope="class")
def skipped(request, tmp_path_factory):
    return start_hung(request, tmp_path_factory, "fr_skipped.py", 4,
                      ready={0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE, 3: "skipped"},
                      frames={0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE,
                              3: "wait_for_batch"})


class TestSkippedCollective:
    def test_the_dumps_show_the_last_rank_one_collective_behind(self, skipped):
        raw = skipped.raw()
        for r in range(3):
            (pend,) = pending(raw[r])
            assert pend["process_group"] == (DEFAULT, "default_pg")
            assert pend["collective_seq_id"] == FAIL_STEP
            assert raw[r]["pg_status"][DEFAULT]["last_enqueued_collective"] == FAIL_STEP
        assert pending(raw[3]) == []
        assert raw[3]["pg_status"][DEFAULT] == {"last_enqueued_collective": FAIL_STEP - 1,
                                                "last_started_collective": -1,
                                                "last_completed_collective": FAIL_STEP - 1}
        assert "wait_for_batch" in (skipped.stacks / "rank3.txt").read_text()

    def test_the_flight_recorder_names_the_rank_behind(self, skipped):
        doc = diagnose("--stacks", str(skipped.stacks), "--flight-recorder", skipped.fr_glob)
        fr = fr_of(doc)
        check_sources(fr, 4, str(skipped.job.fr_dir))
        check_one_behind(fr)
        assert 3 in doc["stacks"]["suspect_ranks"]


# -- a frozen rank ---------------------------------------------------------------------------------

@pytest.fixture(scope="class")
def frozen(request, tmp_path_factory):
    """Rank 3 is parked before the collective; only ranks 0-2 are dumped with py-spy (a
    stalled peer on another node), every rank's Flight Recorder is read."""
    return start_hung(request, tmp_path_factory, "fr_frozen.py", 4,
                      ready={0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE, 3: "frozen"},
                      frames={r: ALL_REDUCE for r in range(3)})


class TestFrozenRank:
    def test_the_frozen_rank_still_dumps_its_last_completed_collective(self, frozen):
        raw = frozen.raw()
        for r in range(3):
            (pend,) = pending(raw[r])
            assert pend["collective_seq_id"] == FAIL_STEP
            assert [f["name"] for f in pend["frames"]][2:4] == ["sync_gradients", "train_step"]
        assert pending(raw[3]) == []
        assert last_retired(raw[3], DEFAULT)["collective_seq_id"] == FAIL_STEP - 1

    def test_the_stacks_alone_read_the_same_collective(self, frozen):
        doc = diagnose("--stacks", str(frozen.stacks))
        assert doc["stacks"]["pattern"] == "C" and doc["stacks"]["suspect_ranks"] == []

    def test_the_flight_recorder_names_the_frozen_rank(self, frozen):
        doc = diagnose("--stacks", str(frozen.stacks), "--flight-recorder", frozen.fr_glob)
        fr = fr_of(doc)
        check_sources(fr, 4, str(frozen.job.fr_dir))
        check_one_behind(fr)
        assert findings(fr, "same-collective")
        assert doc["stacks"]["pattern"] == "C"
        assert 3 in doc["stacks"]["suspect_ranks"]


# -- a send/recv mismatch ----------------------------------------------------------------------

@pytest.fixture(scope="class")
def p2p(request, tmp_path_factory):
    return start_hung(request, tmp_path_factory, "fr_p2p.py", 2,
                      ready={0: "recv", 1: "recv"}, frames={0: "recv", 1: "recv"})


class TestPointToPoint:
    def test_gloo_records_no_send_or_recv(self, p2p):
        """Three steps of send, recv and a loss all_reduce: only the all_reduces are entries,
        and nothing is pending although both ranks wait in recv. pg_status counts op ids,
        which the unrecorded sends and receives advanced: 9, where the last entry's
        collective_seq_id is 3."""
        for dump in p2p.raw().values():
            assert pending(dump) == []
            assert [e["profiling_name"] for e in dump["entries"]] == ["gloo:all_reduce"] * 3
            assert not any(e["is_p2p"] for e in dump["entries"])
            assert [e["collective_seq_id"] for e in dump["entries"]] == [1, 2, 3]
            assert [e["op_id"] for e in dump["entries"]] == [3, 6, 9]
            assert dump["pg_status"][DEFAULT]["last_enqueued_collective"] == 9

    def test_the_stacks_show_the_mismatch_the_flight_recorder_cannot(self, p2p):
        doc = diagnose("--stacks", str(p2p.stacks), "--flight-recorder", p2p.fr_glob)
        fr = fr_of(doc)
        check_sources(fr, 2, str(p2p.job.fr_dir))
        ranks = per_rank(fr, DEFAULT)
        for r in (0, 1):
            assert ranks[r]["pending"] is None and not ranks[r]["behind"]
            assert ranks[r]["last_completed"]["seq"] == FAIL_STEP - 1  # not the op id, 9
        assert not {f["kind"] for f in fr["findings"]} & CROSS_GROUP_KINDS, fr["findings"]
        assert doc["stacks"]["pattern"] == "B"


# -- torch's debug server --------------------------------------------------------------------------

PRE = re.compile(r"<h2>Rank (\d+): (\S+)</h2>\s*<pre>(.*?)</pre>", re.S)


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as resp:  # noqa: S310 - a local test server
        return resp.read().decode()


@pytest.fixture(scope="class")
def debug_server(request, tmp_path_factory):
    hung = start_hung(request, tmp_path_factory, "fr_debug_server.py", 4,
                      ready={0: "all_reduce default", 1: "all_reduce default",
                             2: "all_reduce stats", 3: "all_reduce stats"},
                      frames={r: ALL_REDUCE for r in range(4)}, debug_port=free_port())
    hung.url = f"http://127.0.0.1:{hung.job.debug_port}"
    return hung


class TestDebugServer:
    def test_the_front_end_serves_every_ranks_flight_recorder_and_stacks(self, debug_server):
        page = get(debug_server.url + "/fr_trace_json")
        ranks = PRE.findall(page)
        assert [int(r) for r, _, _ in ranks] == [0, 1, 2, 3]
        for r, addr, text in ranks:
            assert addr.endswith("/handler/fr_trace_json?")
            doc = json.loads(text)  # the JSON is not HTML-escaped
            (pend,) = [e for e in doc["entries"] if not e["retired"]]
            gid = DEFAULT if int(r) < 2 else STATS
            assert pend["process_group"] == [gid, "default_pg" if gid == DEFAULT
                                             else "undefined"]
            assert pend["collective_seq_id"] == FAIL_STEP
            assert "frames" not in pend  # the JSON dump carries no stacks
            # the JSON's status numbers are strings
            assert doc["pg_status"][gid]["last_enqueued_collective"] == str(FAIL_STEP)

        stacks = get(debug_server.url + "/stacks")
        texts = PRE.findall(stacks)
        assert len(texts) == 4
        for _, _, text in texts:
            assert re.search(r"line \d+ in reduce_in\n.*line \d+ in train_step", text), text

        spy = PRE.findall(get(debug_server.url + "/pyspy_dump"))
        assert len(spy) == 4 and all("reduce_in" in text for _, _, text in spy)

    def test_diagnose_reads_the_flight_recorder_over_http(self, debug_server):
        doc = diagnose("--torch-debug", debug_server.url)
        fr = fr_of(doc)
        check_sources(fr, 4, debug_server.url)
        # the JSON over HTTP has no frames: check the numbers, the groups and the finding
        assert {g["group"] for g in fr["groups"]} == {DEFAULT, STATS}
        for gid, waiting in ((DEFAULT, (0, 1)), (STATS, (2, 3))):
            ranks = per_rank(fr, gid)
            for r in waiting:
                check_pending(ranks[r], FAIL_STEP, 4 if gid == DEFAULT else 2, None)
        (found,) = findings(fr, "cross-group-order")
        assert sorted(found["groups"]) == [DEFAULT, STATS]
        assert fr["pattern"] == "B"

