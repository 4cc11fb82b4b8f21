"""The check both event-fixture tables use: the events a fixture file gives, against its row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def check_fixture_events(name: str, got: Sequence[Any], want: Sequence[tuple]) -> None:
    """``want`` rows are (kind, line_no, end_line, {field: exact value}), ordered by line."""
    assert [(e.kind, e.line_no, e.end_line) for e in got] == [w[:3] for w in want]
    for event, (_, _, _, fields) in zip(got, want, strict=True):
        have = dict(event.fields)
        for key, value in fields.items():
            assert have.get(key) == value, (name, event.line_no, key)
        assert event.summary and "\n" not in event.summary and len(event.summary) <= 300
        assert event.text
