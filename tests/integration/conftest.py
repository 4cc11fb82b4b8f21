"""Every test here is marked ``integration`` (real processes: the demo job, py-spy, torch,
servers), as each module also says for itself."""

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)
