"""The OOM screen: the triage of the latest CUDA OOM, as ``rltui oom`` prints it.

The phase and why, the error's numbers, the ranked suggestions with their effect and trade-off,
the patch to paste and the memory estimate. The text comes from ``report_text``, so the screen
and the headless command cannot disagree.
"""

from __future__ import annotations

from rltui.ui.screens.text import TextScreen


class OomScreen(TextScreen):
    def __init__(self, title: str, text: str) -> None:
        super().__init__(title, text, id="oom")
