"""Real step-line excerpts from public issue threads (fixtures/real/steps, SOURCES.md), read the
way the log source reads them: each line through strip_noise and StepReader.feed (the live path),
and the whole file through StepReader.scan (the catch-up path); both must agree."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltui.parsing.noise import strip_noise
from rltui.parsing.steps import StepReader
from tests.compat import tomllib

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "real" / "steps"
EXPECTED = tomllib.loads((HERE / "expected.toml").read_text(encoding="utf-8"))


def _fed(text: str):
    reader = StepReader()
    steps = []
    for i, line in enumerate(text.splitlines(), 1):
        steps += reader.feed(strip_noise(line).text, i, 1.7e9)
    return reader, steps + reader.flush()


def _scanned(text: str):
    reader = StepReader()
    return reader, reader.scan(text, 1, 1.7e9) + reader.flush()


def test_every_fixture_is_expected_and_listed():
    logs = {p.name for p in HERE.glob("*.log")}
    assert logs == set(EXPECTED)
    sources = (HERE / "SOURCES.md").read_text(encoding="utf-8")
    for name in logs:
        assert f"| {name} |" in sources, name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_steps(name):
    want = EXPECTED[name]
    text = (HERE / name).read_text(encoding="utf-8")
    for reader, steps in (_fed(text), _scanned(text)):
        assert reader.format == want["framework"]
        assert steps, "no step read"
        last = steps[-1]
        assert last.step == want["last_step"]
        if "steps" in want:
            assert len(steps) == want["steps"]
        metrics = dict(last.metrics)
        if "step_time" in want:
            assert metrics.get("step_time") == pytest.approx(want["step_time"], rel=1e-3)
        for key, value in want.get("metrics", {}).items():
            assert metrics.get(key) == pytest.approx(value), key
