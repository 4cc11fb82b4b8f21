"""Every real stack artefact in fixtures/real/stacks/ is read as a careful human reads it.

The artefacts were posted in public issue threads (fixtures/real/stacks/SOURCES.md says where);
expected.toml holds what the artefact itself shows, or what its thread concluded: how many
processes and threads, which ranks, where the interesting thread waits and which thread that
is, and the hang pattern where the thread or the artefact establishes one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rltui.diagnosis.stacks import classify
from rltui.diagnosis.stacktree import choose_thread, short_name
from rltui.sources.dumpfolder import read_dump_folder
from tests.compat import tomllib

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "stacks"
EXPECTED = tomllib.loads((CORPUS / "expected.toml").read_text())


def _no_live(pid: int) -> None:
    return None  # a saved artefact's pids are not this machine's processes


def read(name: str):
    return read_dump_folder(str(CORPUS / name), rank_of_pid=_no_live)


def test_every_artefact_has_an_expectation_and_a_source():
    files = {p.name for p in CORPUS.iterdir()
             if p.name not in ("SOURCES.md", "expected.toml")}
    assert files == set(EXPECTED)
    sources = (CORPUS / "SOURCES.md").read_text()
    for name, want in EXPECTED.items():
        assert name in sources, name
        assert want.get("source"), name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_artefact(name):
    want = EXPECTED[name]
    dumps, problems = read(name)
    if want.get("reads") is False:
        # Not a stack dump; the message must say what rltui looked for and where it stopped.
        assert dumps == []
        assert any("line" in p and "not" in p for p in problems), problems
        return
    assert dumps, problems
    assert not any("not py-spy output" in p for p in problems), problems
    if "processes" in want:
        assert len(dumps) == want["processes"], [(d.pid, d.rank) for d in dumps]
    if "threads" in want:
        assert sum(len(d.threads) for d in dumps) == want["threads"]
    if "ranks" in want:
        assert sorted(d.rank for d in dumps if d.rank is not None) == sorted(want["ranks"])
    if "waits_in" in want:
        chosen = [choose_thread(d.threads) for d in dumps]
        names = {short_name(f.name) for t in chosen if t is not None for f in t.frames}
        assert want["waits_in"] in names, names
        holders = [t for t in chosen if t is not None
                   and any(short_name(f.name) == want["waits_in"] for f in t.frames)]
        if "wait_thread" in want:
            assert {t.name for t in holders} == {want["wait_thread"]}
        if "wait_thread_id" in want:
            assert {t.thread_id for t in holders} == {want["wait_thread_id"]}
    report = classify([dumps])
    if "pattern" in want:
        assert report.pattern == want["pattern"], report.explanation
    if "dead_rank" in want:
        assert want["dead_rank"] in report.suspect_ranks + report.missing_ranks, \
            report.explanation
