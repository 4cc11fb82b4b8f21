"""rltui.units: the one place bytes, ages, durations and clock times are written for people.
The texts are a contract (reports, symptoms and the screen show them): pinned here."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from rltui import units
from rltui.units import GIB, MIB, age, ago, clock, duration, gib, mib, millis, pytorch_bytes, stamp


@pytest.mark.parametrize("args, text", [
    ((3 * GIB,), "3.00 GiB"),
    ((GIB // 2,), "0.50 GiB"),
    ((None,), "?"),
    (("12",), "?"),  # not a number: not known
    ((3 * GIB, 1), "3.0 GiB"),
    ((None, 1, " GiB", "N/A"), "N/A"),  # the incident report's table
    ((80 * GIB, 1, "G", "N/A"), "80.0G"),  # diagnose's text report
])
def test_gib(args, text):
    assert gib(*args) == text


def test_mib():
    assert mib(12.5 * MIB) == "12.5 MiB"
    assert mib(None) == "?"


@pytest.mark.parametrize("value, text", [
    (None, "?"), (512, "512 bytes"), (1024, "1024 bytes"), (1025, "1.00 KiB"),
    (20 * MIB, "20.00 MiB"), (int(13.91 * GIB), "13.91 GiB"), (4096 * GIB, "4096.00 GiB"),
])
def test_pytorch_bytes(value, text):
    assert pytorch_bytes(value) == text


@pytest.mark.parametrize("seconds, short, prose, compact", [
    (-3.0, "0.0s", "0 s", "0.0s"),
    (0.4, "0.4s", "0 s", "0.4s"),
    (12.0, "12s", "12 s", "12s"),
    (90.0, "90s", "90 s", "1m30s"),
    (725.0, "12m", "12 min", "12m05s"),
    (9000.0, "2h", "2.5 h", "2h30m"),
    (11220.0, "3h", "3.1 h", "3h07m"),
])
def test_ages_and_durations(seconds, short, prose, compact):
    assert (age(seconds), ago(seconds), duration(seconds)) == (short, prose, compact)


def test_millis():
    assert (millis(1), millis(9999), millis(1_800_000)) == ("1 ms", "9999 ms", "1800 s")


def test_clock_and_stamp_are_local_time():
    t = 1_800_000_000.0
    assert clock(t) == time.strftime("%H:%M:%S", time.localtime(t))
    assert stamp(t) == time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
    assert re.fullmatch(r"\d\d:\d\d:\d\d", clock(t))
    assert (clock(None), stamp(None), clock(None, "-")) == ("?", "?", "-")


def test_no_module_keeps_its_own_formatter():
    """A second private _gib/_ago/... is how the texts drifted apart: they live in units only."""
    root = Path(units.__file__).parent
    own = re.compile(r"^def (_gib|_mib|_age|_ago|_clock|_duration|format_bytes)\(", re.M)
    found = [f"{p.relative_to(root)}: {m.group(1)}" for p in root.rglob("*.py")
             if p.name != "units.py" for m in own.finditer(p.read_text())]
    assert found == []
