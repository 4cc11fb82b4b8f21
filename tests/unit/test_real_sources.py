"""Every file of fixtures/real/ says where it came from, in fixtures/real/SOURCES.md."""

from __future__ import annotations

import re
from pathlib import Path

REAL = Path(__file__).resolve().parents[2] / "fixtures" / "real"
_ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \|")


def test_every_file_has_a_source_row_and_every_row_a_file():
    rows = {}
    for line in (REAL / "SOURCES.md").read_text().splitlines():
        m = _ROW.match(line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    files = {str(p.relative_to(REAL)) for p in REAL.rglob("*") if p.is_file()} - {"SOURCES.md"}
    assert files - set(rows) == set(), "files without a row"
    assert set(rows) - files == set(), "rows without a file"
    assert all(source and source != "-" for source in rows.values())
