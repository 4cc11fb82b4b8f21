"""Reading a folder of saved py-spy dumps (rltui.sources.dumpfolder)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rltui.sources.dumpfolder import NotAFolder, folder_reading, read_dump_folder

STACKS = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"


def no_live(pid: int) -> None:
    return None


def test_ranks_come_from_file_names_in_any_mix_of_text_and_json():
    dumps, problems = read_dump_folder(str(STACKS / "stall"), rank_of_pid=no_live)
    assert [d.rank for d in dumps] == [0, 1, 2]
    assert problems == []


def test_a_shell_loop_file_uses_the_live_rank_of_each_pid_when_there_is_one(tmp_path):
    shutil.copy(STACKS / "loop" / "stall-all-ranks.txt", tmp_path / "all.txt")
    plain, _ = read_dump_folder(str(tmp_path), rank_of_pid=no_live)
    assert len(plain) >= 2 and all(d.rank is None for d in plain)
    assert [d.pid for d in plain] == sorted(d.pid for d in plain)  # ordered by pid
    ranks = {d.pid: i for i, d in enumerate(plain)}
    named, _ = read_dump_folder(str(tmp_path), rank_of_pid=ranks.get)
    assert sorted(d.rank for d in named) == list(range(len(plain)))


def test_a_live_rank_never_duplicates_a_rank_named_by_a_file(tmp_path):
    shutil.copy(STACKS / "stall" / "rank0.txt", tmp_path / "rank0.txt")
    shutil.copy(STACKS / "stall" / "rank1.json", tmp_path / "unnamed.json")
    dumps, _ = read_dump_folder(str(tmp_path), rank_of_pid=lambda pid: 0)
    assert sorted((d.rank is None, d.rank) for d in dumps) == [(False, 0), (True, None)]


def test_bad_files_are_problems_not_errors():
    dumps, problems = read_dump_folder(str(STACKS / "bad"), rank_of_pid=no_live)
    assert problems and all(isinstance(p, str) for p in problems)
    assert any("empty.txt" in p for p in problems)


def test_a_missing_folder_is_refused_with_its_name(tmp_path):
    with pytest.raises(NotAFolder, match="nope"):
        read_dump_folder(str(tmp_path / "nope"))


def test_huge_and_unreadable_files_are_skipped_with_a_reason(tmp_path, monkeypatch):
    from rltui.sources import dumpfolder
    monkeypatch.setattr(dumpfolder, "MAX_DUMP_BYTES", 10)
    (tmp_path / "big.txt").write_text("x" * 100)
    dumps, problems = read_dump_folder(str(tmp_path), rank_of_pid=no_live)
    assert dumps == [] and any("big.txt: larger than" in p for p in problems)


def test_the_folder_becomes_one_saved_round_of_the_stacks_source():
    dumps, _ = read_dump_folder(str(STACKS / "stall"), rank_of_pid=no_live)
    reading = folder_reading("stall", dumps, clock=lambda: 50.0)
    assert reading.source == "stacks" and reading.timestamp == 50.0
    assert reading.payload.trigger == "saved" and len(reading.payload.dumps) == 3


# -- one file at a time, through the folder's descriptor -------------------------------------------

def test_each_file_is_read_parsed_and_folded_before_the_next_is_read(tmp_path, monkeypatch):
    from rltui.parsing import pyspy
    from rltui.sources import dumpfolder
    for r in range(3):
        shutil.copy(STACKS / "stall" / "rank1.json", tmp_path / f"rank{r}.json")
    events = []
    read, parse = dumpfolder._Plain.read, pyspy.parse_any

    def reading(self, name, limit):
        events.append(("read", name))
        return read(self, name, limit)

    def parsing(text, source="", *args):
        events.append(("parse", source))
        return parse(text, source, *args)

    monkeypatch.setattr(dumpfolder._Plain, "read", reading)
    monkeypatch.setattr(pyspy, "parse_any", parsing)
    dumps, _ = read_dump_folder(str(tmp_path), rank_of_pid=no_live)
    assert [d.rank for d in dumps] == [0, 1, 2]
    assert events == [(kind, f"rank{r}.json") for r in range(3) for kind in ("read", "parse")]


def test_links_fifos_and_folders_inside_go_through_the_safe_opener(tmp_path):
    import os
    shutil.copy(STACKS / "stall" / "rank0.txt", tmp_path / "rank0.txt")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-target"
    elsewhere.mkdir()
    shutil.copy(STACKS / "stall" / "rank1.json", elsewhere / "target.json")
    (tmp_path / "rank1.json").symlink_to(elsewhere / "target.json")  # ours: followed
    os.mkfifo(tmp_path / "rank2.txt")
    (tmp_path / "sub").mkdir()
    dumps, problems = read_dump_folder(str(tmp_path), rank_of_pid=no_live)
    assert [d.rank for d in dumps] == [0, 1]
    assert problems == ["rank2.txt: unreadable: not a regular file (a FIFO)"]


def test_a_folder_reached_through_a_link_reads_the_same(tmp_path):
    (tmp_path / "link").symlink_to(STACKS / "stall")
    via_link, problems = read_dump_folder(str(tmp_path / "link"), rank_of_pid=no_live)
    direct, _ = read_dump_folder(str(STACKS / "stall"), rank_of_pid=no_live)
    assert via_link == direct and problems == []


def test_a_folder_under_proc_is_left_to_the_safe_opener(tmp_path):
    from rltui.sources.dumpfolder import _Plain
    assert _Plain(Path("/proc/self")).fd == -1
    plain = _Plain(tmp_path)
    try:
        assert plain.fd >= 0
        assert plain.read("missing.txt", 10) is None  # safeopen says why
    finally:
        plain.close()
