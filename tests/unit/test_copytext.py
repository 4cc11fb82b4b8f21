"""What ``y`` copies: a symptom's evidence block and a stack class as py-spy text. The stack
text is read back by rltui's own stack reader, so a pasted copy is a dump again."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltui.diagnosis.copytext import evidence_text, stack_class_text
from rltui.diagnosis.stacks import classify
from rltui.model import Symptom
from rltui.parsing.pyspy import parse_text, read_folder_entries

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"


def report_of(folder: str):
    files = [(p.name, p.read_text(errors="replace"))
             for p in sorted((FIXTURES / folder).iterdir())]
    dumps, _ = read_folder_entries(files)
    return classify([dumps])


def test_evidence_block_has_title_meta_and_every_line():
    s = Symptom(id="rank-exited", severity="critical", title="rank 3 crashed (RuntimeError)",
                ranks=(3,), evidence=("rank 3 (pid 4103): exited", "still running: ranks 0-2"),
                next_steps=("read the log",), since=100.0, job="trainer-4100")
    assert evidence_text(s, now=130.0) == (
        "CRITICAL  rank 3 crashed (RuntimeError)\n"
        "id rank-exited  ranks 3  for 30s  job trainer-4100\n"
        "Evidence:\n"
        "  - rank 3 (pid 4103): exited\n"
        "  - still running: ranks 0-2\n")


def test_evidence_block_without_evidence_or_time():
    s = Symptom(id="no-job-found", severity="info", title="no training job found")
    assert evidence_text(s) == "INFO  no training job found\nid no-job-found\n"


# bad: a dump cut short, its class ending in the <frames cut off> marker
@pytest.mark.parametrize("folder", ["cleanup-deadlock", "collective-mismatch", "threads", "bad"])
def test_every_class_reads_back_as_the_same_stack(folder):
    report = report_of(folder)
    assert report.classes
    for i, c in enumerate(report.classes):
        text = stack_class_text(report, i)
        assert text.startswith(f"# rltui stack class #{i + 1} of {len(report.classes)}: ")
        dumps = parse_text(text, "copied")
        assert len(dumps) == 1 and len(dumps[0].threads) == 1, text
        thread = dumps[0].threads[0]
        # py-spy's order (innermost first); the class keeps the root first
        assert [(f.name, f.filename, f.line) for f in thread.frames] == \
            [(f.name, f.filename, f.line) for f in reversed(c.frames)]
        assert thread.name == c.thread


def test_class_header_names_its_ranks_and_state():
    report = report_of("cleanup-deadlock")
    first = stack_class_text(report, 0).splitlines()[0]
    c = report.classes[0]
    assert f"({len(c.members)} processes" in first
    assert "rank" in first
