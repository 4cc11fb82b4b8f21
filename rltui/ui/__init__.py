"""The Textual UI: the only package that imports textual. ``build_app`` is its entry point."""

from rltui.ui.app import RltuiApp, build_app

__all__ = ["RltuiApp", "build_app"]
