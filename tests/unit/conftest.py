"""Markers of the unit suite: the adversarial suites are ``slow``.

They feed every reader hostile input at sizes that would show a quadratic (and fuzz it with
hypothesis), and take about three quarters of the suite's time: CI runs them, the inner loop
(`python -m pytest tests/unit -m "not slow"`, docs/development.md) leaves them out."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SLOW_MODULES = {
    "test_stack_reader_attacks.py",
    "test_fuzz_parsers.py",
    "test_flightrec_attacks.py",
    "test_redact_linear.py",
    "test_linear_regexes.py",
    "test_fuzz_agent_ray.py",
}


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.parent == HERE and item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
