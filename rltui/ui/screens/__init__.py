"""The app's screens, one per module."""

from rltui.ui.screens.help import HelpScreen
from rltui.ui.screens.log_file import LogFileScreen
from rltui.ui.screens.main import MainScreen

__all__ = ["HelpScreen", "LogFileScreen", "MainScreen"]
