"""Scenario folders: Recorder writes them, load reads them, Player plays them back."""

from __future__ import annotations

import json

import pytest

from rltui import model
from rltui.model import GpuPoll, GpuSample, ProcInfo, ProcPoll, Reading
from rltui.sources.record import Recorder
from rltui.sources.replay import (
    META_FILE,
    READINGS_FILE,
    SCHEMA_VERSION,
    Player,
    Scenario,
    ScenarioError,
    load,
)


def gpus(t, util=50.0):
    return Reading("gpus", t, model.OK, GpuPoll(gpus=(GpuSample(0, "H100", "u0", util=util),),
                                                driver_version="550"))


def procs(t):
    return Reading("procs", t, model.OK, ProcPoll(procs=(ProcInfo(pid=100, rank=0),), how="x"))


READINGS = [gpus(100.0), procs(100.5), gpus(101.0, util=0.0),
            Reading("gpus", 102.0, model.TIMEOUT, None, "NVML timed out", "retry"),
            procs(103.0)]


def record(folder, readings=READINGS, **kw):
    with Recorder(folder, host=kw.pop("host", "node-7"), job=kw.pop("job", "--match train"),
                  intervals=kw.pop("intervals", {"gpus": 1.0, "procs": 0.5}),
                  description="test") as rec:
        for r in readings:
            rec.write(r)
    return rec


# -- Recorder + load -------------------------------------------------------------------------

def test_load_a_folder_written_by_recorder(tmp_path):
    folder = tmp_path / "rec"
    rec = record(folder)
    assert rec.count == len(READINGS)
    sc = load(folder)
    assert sc.readings == tuple(READINGS)
    assert sc.warnings == ()
    assert (sc.host, sc.job) == ("node-7", "--match train")
    assert sc.intervals() == {"gpus": 1.0, "procs": 0.5}
    assert (sc.start, sc.end) == (100.0, 103.0)
    assert sc.path == str(folder)
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    assert meta["schema_version"] == SCHEMA_VERSION
    assert meta["description"] == "test"
    assert meta["writer"].startswith("rltui ")


def test_recorder_writes_one_json_line_per_reading(tmp_path):
    record(tmp_path / "rec")
    lines = (tmp_path / "rec" / READINGS_FILE).read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(READINGS)
    assert all(json.loads(line)["source"] in ("gpus", "procs") for line in lines)


def test_recorder_flushes_each_line_at_once(tmp_path):
    rec = Recorder(tmp_path / "rec")
    rec.write(gpus(1.0))
    assert (tmp_path / "rec" / READINGS_FILE).read_text(encoding="utf-8").count("\n") == 1
    rec.close()
    rec.close()  # idempotent
    rec.write(gpus(2.0))  # ignored after close
    assert rec.count == 1


def test_recorder_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "other.txt").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError):
        Recorder(tmp_path / "rec")


def test_recorder_accepts_an_existing_empty_folder(tmp_path):
    (tmp_path / "rec").mkdir()
    with Recorder(tmp_path / "rec") as rec:
        rec.write(gpus(1.0))
    assert load(tmp_path / "rec").readings == (gpus(1.0),)


def test_readings_are_sorted_by_time_stably(tmp_path):
    a, b, c = gpus(5.0), procs(5.0), gpus(1.0)
    record(tmp_path / "rec", [a, b, c])
    assert load(tmp_path / "rec").readings == (c, a, b)


def test_an_empty_recording_loads_with_no_readings(tmp_path):
    record(tmp_path / "rec", [])
    sc = load(tmp_path / "rec")
    assert sc.readings == () and sc.start == 0.0 and sc.end == 0.0


# -- errors ----------------------------------------------------------------------------------

def write_folder(folder, meta, lines=None):
    folder.mkdir()
    if meta is not None:
        text = meta if isinstance(meta, str) else json.dumps(meta)
        (folder / META_FILE).write_text(text, encoding="utf-8")
    if lines is not None:
        (folder / READINGS_FILE).write_text("".join(lines), encoding="utf-8")
    return folder


GOOD_LINE = json.dumps({"source": "gpus", "timestamp": 1.0, "status": "ok", "payload": None}) + "\n"


def test_missing_folder(tmp_path):
    with pytest.raises(ScenarioError, match="no such directory"):
        load(tmp_path / "nope")


def test_a_file_is_not_a_folder(tmp_path):
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ScenarioError, match="not a scenario folder"):
        load(tmp_path / "f")


def test_missing_meta(tmp_path):
    folder = write_folder(tmp_path / "s", None, [GOOD_LINE])
    with pytest.raises(ScenarioError, match=f"{META_FILE} is missing"):
        load(folder)


def test_missing_readings_file(tmp_path):
    folder = write_folder(tmp_path / "s", {"schema_version": 1})
    with pytest.raises(ScenarioError, match=f"{READINGS_FILE}: missing"):
        load(folder)


@pytest.mark.parametrize(("meta", "fragment"), [
    ("{not json", "unreadable"),
    ("[1, 2]", "must hold a JSON object"),
    ({"host": "h"}, "unknown schema_version None"),
    ({"schema_version": "1"}, "unknown schema_version '1'"),
    ({"schema_version": 0}, "unknown schema_version 0"),
])
def test_bad_meta(tmp_path, meta, fragment):
    folder = write_folder(tmp_path / "s", meta, [GOOD_LINE])
    with pytest.raises(ScenarioError) as err:
        load(folder)
    assert fragment in str(err.value)
    assert META_FILE in str(err.value)


def test_newer_schema_version_says_upgrade(tmp_path):
    folder = write_folder(tmp_path / "s", {"schema_version": SCHEMA_VERSION + 1}, [GOOD_LINE])
    with pytest.raises(ScenarioError) as err:
        load(folder)
    message = str(err.value)
    assert f"schema_version {SCHEMA_VERSION + 1} is newer" in message
    assert "upgrade rltui" in message


def test_truncated_last_line_warns_and_keeps_the_readings(tmp_path):
    folder = tmp_path / "rec"
    record(folder)
    path = folder / READINGS_FILE
    text = path.read_text(encoding="utf-8")
    path.write_text(text + text.splitlines()[0][:37], encoding="utf-8")  # cut mid-line
    sc = load(folder)
    assert sc.readings == tuple(READINGS)
    (warning,) = sc.warnings
    assert "skipped 1 bad line(s)" in warning
    assert f"line {len(READINGS) + 1}" in warning


def test_bad_lines_in_the_middle_are_skipped_and_counted(tmp_path):
    lines = [GOOD_LINE, "garbage\n", "\n", json.dumps({"source": "gpus"}) + "\n",
             json.dumps({"source": "gpus", "timestamp": 2.0, "payload": {"gpus": [{"index": "x"}]}})
             + "\n", GOOD_LINE.replace("1.0", "3.0")]
    folder = write_folder(tmp_path / "s", {"schema_version": 1}, lines)
    sc = load(folder)
    assert [r.timestamp for r in sc.readings] == [1.0, 3.0]
    (warning,) = sc.warnings
    assert "skipped 3 bad line(s), first line 2" in warning


def test_non_utf8_line_is_skipped(tmp_path):
    folder = write_folder(tmp_path / "s", {"schema_version": 1}, [GOOD_LINE])
    with (folder / READINGS_FILE).open("ab") as f:
        f.write(b'{"source": "gpus", "timestamp": 2.0, "message": "\xff\xfe"}\n')
    sc = load(folder)
    assert len(sc.readings) == 1 and len(sc.warnings) == 1


def test_all_lines_bad_is_an_error(tmp_path):
    folder = write_folder(tmp_path / "s", {"schema_version": 1}, ["nope\n", "{\"source\": 1}\n"])
    with pytest.raises(ScenarioError, match="no valid readings .*line 1"):
        load(folder)


# -- Player ----------------------------------------------------------------------------------

def scenario(times):
    return Scenario("mem", {}, tuple(gpus(t) for t in times))


def stamps(readings):
    return [r.timestamp for r in readings]


def test_advance_hands_out_readings_as_time_passes():
    p = Player(scenario([10.0, 10.5, 11.0, 12.0, 15.0]))
    assert p.now == 10.0
    assert stamps(p.advance(0.0)) == [10.0]  # the first reading is due at once
    assert stamps(p.advance(0.5)) == [10.5]
    assert stamps(p.advance(0.4)) == []
    assert stamps(p.advance(0.1)) == [11.0]
    assert p.position == pytest.approx(1.0)
    assert stamps(p.advance(100.0)) == [12.0, 15.0]
    assert p.position == 5.0  # clamped to the duration
    assert p.finished
    assert p.advance(1.0) == []


def test_advance_scales_by_speed():
    p = Player(scenario([0.0, 1.0, 2.0, 3.0, 4.0]), speed=2.0)
    assert stamps(p.advance(1.0)) == [0.0, 1.0, 2.0]
    assert p.now == 2.0
    p.speed = 0.5
    assert stamps(p.advance(1.0)) == []
    assert stamps(p.advance(1.0)) == [3.0]


def test_negative_wall_time_does_not_rewind():
    p = Player(scenario([0.0, 1.0, 2.0]))
    p.advance(1.0)
    assert p.advance(-5.0) == []
    assert p.position == 1.0


def test_pause_stops_advance_and_step_moves_while_paused():
    p = Player(scenario([0.0, 1.0, 2.0, 3.0]))
    p.advance(0.0)
    p.paused = True
    assert p.advance(10.0) == []
    assert p.position == 0.0
    assert stamps(p.step()) == [1.0]
    assert stamps(p.step(1.5)) == [2.0]
    assert p.position == 2.5
    p.paused = False
    assert stamps(p.advance(0.5)) == [3.0]
    assert p.finished


def test_to_end_hands_out_everything_left():
    p = Player(scenario([0.0, 1.0, 2.0, 30.0]))
    p.advance(1.0)
    assert stamps(p.to_end()) == [2.0, 30.0]
    assert p.finished and p.position == p.duration == 30.0
    assert p.to_end() == []


@pytest.mark.parametrize(("start", "faster", "slower"), [
    (1.0, 2.0, 0.5),
    (0.25, 0.5, 0.25),  # slowest stays
    (64.0, 64.0, 16.0),  # fastest stays
    (3.0, 4.0, 2.0),  # a speed between the steps snaps to the neighbours
])
def test_faster_and_slower_bounds(start, faster, slower):
    p = Player(scenario([0.0]), speed=start)
    assert p.faster() == faster and p.speed == faster
    p.speed = start
    assert p.slower() == slower and p.speed == slower


def test_faster_climbs_to_the_top_and_stays():
    p = Player(scenario([0.0]))
    for _ in range(20):
        p.faster()
    assert p.speed == max(Player.SPEEDS)
    for _ in range(20):
        p.slower()
    assert p.speed == min(Player.SPEEDS)


def test_empty_scenario_is_finished_at_once():
    p = Player(scenario([]))
    assert p.finished
    assert p.advance(1.0) == [] and p.to_end() == []


def test_player_over_a_recorded_folder(tmp_path):
    record(tmp_path / "rec")
    p = Player(load(tmp_path / "rec"), speed=4.0)
    out = []
    while not p.finished:
        out += p.advance(0.25)
    assert out == READINGS
