"""Enter on a symptom's evidence line: open what it names (rltui.diagnosis.evidence).

* a log line: the file full screen with the cursor on that line;
* a stack class: the compare screen with the class under the cursor;
* a frame: the compare screen with the diff's cursor on the frame, its source below;
* a rank: the rank table's cursor on the rank's row (another pane zoomed out first; where
  the table is folded, 80x24, it is zoomed to show the row).

Kept out of the app class: the app only routes the symptoms pane's ``OpenEvidence`` here.
"""

from __future__ import annotations

from typing import Any

from rltui.diagnosis.evidence import FRAME, LOG_LINE, RANK, STACK_CLASS
from rltui.model import EvidenceLink
from rltui.ui.screens.stacks import StacksScreen
from rltui.ui.widgets.log_facts import log_index

# The app (rltui.ui.app.RltuiApp, which imports this module): its latest view, open_log,
# action_show_stacks, main_screen and notify.
App = Any


def open_evidence(app: App, link: EvidenceLink) -> None:
    if link.kind == LOG_LINE:
        view = app.latest
        rank = log_index(view.snapshot).rank_of_path.get(link.path) if view is not None else None
        app.open_log(rank, link.path, link.line)
    elif link.kind in (STACK_CLASS, FRAME):
        app.action_show_stacks()  # says why when there are no stacks
        screen = app.screen_stack[-1]
        if isinstance(screen, StacksScreen):
            screen.reveal(link)
    elif link.kind == RANK:
        _select_rank(app, link.ranks)


def _select_rank(app: App, ranks: tuple[int, ...]) -> None:
    main = app.main_screen
    pane = main.ranks
    if main.maximized is not None and main.maximized is not pane:
        main.minimize()
    for rank in ranks:
        if pane.select_rank(rank):
            if pane.folded:  # a short terminal: the row shows zoomed only (escape folds back)
                main.maximize(pane, container=False)
            pane.table.focus()
            return
    app.notify(f"No row for rank {ranks[0] if ranks else '?'} in the rank table.",
               severity="warning", timeout=4)
