"""Fixtures for the UI tests: scenario folders built once per session, and app factories.
Every test here is marked ``ui`` (`-m "not ui"` leaves the Pilot and snapshot tests out)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rltui.config import Settings
from rltui.ui import RltuiApp, build_app
from tests.fakes import scenarios

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.ui)


@pytest.fixture(scope="session")
def scenario_path(tmp_path_factory) -> Callable[[str], Path]:
    """``scenario_path("rank_exited")``: the folder written by that builder (once)."""
    root = tmp_path_factory.mktemp("scenarios")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = getattr(scenarios, name)(root / name)
        return built[name]

    return get


@pytest.fixture
def replay_app(scenario_path, tmp_path) -> Callable[..., RltuiApp]:
    """``replay_app("rank_exited", theme="dark")``: an app replaying that scenario; the theme
    is remembered in a config file under the test's tmp_path, never the user's."""

    def make(name: str, theme: str = "dark", settings: Settings | None = None,
             paused: bool = False, **options) -> RltuiApp:
        """``options``: build_app's own (job_config, model_config, ...)."""
        bundle = scenarios.bundle(scenario_path(name))
        if bundle.player is not None:
            bundle.player.paused = paused
        return build_app(bundle, settings or Settings(theme=theme),
                         config_path=tmp_path / "config.yaml", **options)

    return make
