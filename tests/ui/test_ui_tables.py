"""The tables: sort (``,`` ``.`` ``I``, a header click), the rank filter (``/``), the cursor
kept on its rank through updates and re-sorts, GPU names in the room there is, per-process GPU
memory and departed ranks with how and when they left."""

from __future__ import annotations

import pytest

from rltui.ui.widgets.fast_table import FastTable
from tests.fakes.scenarios import HOST
from tests.ui.helpers import cell, header_text, plain


def header(table: FastTable) -> str:
    return "".join(seg.text for seg in table.render_line(0))


def ranks_shown(table: FastTable) -> list[str]:
    return [cell(table, key, "rank").text for key in table.row_keys]


async def test_sort_keys_move_the_column_and_reverse(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        pane = app.main_screen.ranks
        pane.table.focus()
        await pilot.pause()
        assert ranks_shown(pane.table) == [str(r) for r in range(8)]
        assert "▲" not in header(pane.table)  # the pane's own order: no mark
        await pilot.press("full_stop")  # from rank (the first column) to pid
        assert pane.sort_column == "pid" and " pid▲" in header(pane.table)
        await pilot.press("full_stop", "full_stop")  # GPU, GPU%
        assert pane.sort_column == "gpu_util"
        # ranks 0-2 wait idle (0-1 %), 4-7 spin at 100 %, rank 3 departed has no GPU%: last
        order = ranks_shown(pane.table)
        assert set(order[:3]) == {"0", "1", "2"} and order[-1] == "3"
        assert order[3:7] == ["4", "5", "6", "7"]  # ties keep the rank order
        await pilot.press("I")  # reversed: busiest first, the departed rank still last
        assert pane.sort_reverse and "GPU%▼" in header(pane.table)
        order = ranks_shown(pane.table)
        assert order[:4] == ["4", "5", "6", "7"] and order[-1] == "3"
        await pilot.press("comma", "comma", "comma")  # back to rank
        assert pane.sort_column == "rank" and not pane.sort_reverse
        assert ranks_shown(pane.table) == [str(r) for r in range(8)]


async def test_a_header_click_sorts_and_a_second_reverses(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        gpus = app.main_screen.gpus.table
        await pilot.pause()
        x = header(gpus).index(" util") + 2
        assert await pilot.click(gpus, offset=(x, 0))
        assert app.main_screen.gpus.sort_column == "util"
        idle_first = [cell(gpus, k, "index").text for k in gpus.row_keys]
        assert set(idle_first[:4]) == {"0", "1", "2", "3"}
        assert await pilot.click(gpus, offset=(x, 0))
        assert app.main_screen.gpus.sort_reverse
        busy_first = [cell(gpus, k, "index").text for k in gpus.row_keys]
        assert busy_first[:4] == ["4", "5", "6", "7"] and "util▼" in header(gpus)


async def test_the_cursor_stays_on_its_rank_through_updates_and_resorts(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        pane = app.main_screen.ranks
        table = pane.table
        table.focus()
        table.cursor_row = table.get_row_index("p4105")  # rank 5
        pane.sort_by("gpu_util", reverse=True)
        assert table.cursor_key == "p4105"
        pane.sort_by("pid", reverse=True)
        assert table.cursor_key == "p4105" and table.cursor_row == 2  # 7, 6, 5
        waiter = app.next_evaluation()
        app.evaluate_now(app.evaluated_at)  # a new evaluation of the same job
        await waiter
        assert table.cursor_key == "p4105"


async def test_a_rank_that_departs_keeps_the_cursor(replay_app):
    app = replay_app("rank_exited", paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.main_screen.ranks
        table = pane.table
        table.focus()
        await pilot.press(*"nnnnn")
        pane.sort_by("gpu_util")  # once departed, rank 3 (no GPU%) goes last, from the idle
        table.cursor_row = table.get_row_index("p4103")
        assert table.cursor_row != 7
        for _ in range(30):  # rank 3 exits 20 s in
            await pilot.press("n")
            if "d4103" in table.row_keys:
                break
        assert table.cursor_key == "d4103" and table.cursor_row == 7


async def test_filter_by_rank_set_state_and_class_and_escape_clears(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        pane = app.main_screen.ranks
        pane.table.focus()
        await pilot.press("slash")
        assert pane.filter_input.display and pane.filter_input.has_focus
        await pilot.press(*"0-3,7")
        assert ranks_shown(pane.table) == ["0", "1", "2", "3", "7"]
        assert "5 shown: /0-3,7" in pane.border_title
        await pilot.press("enter")  # back to the table, the filter stays
        assert pane.table.has_focus and pane.filter_input.display
        assert ranks_shown(pane.table) == ["0", "1", "2", "3", "7"]
        # an update keeps the filter
        waiter = app.next_evaluation()
        app.evaluate_now(app.evaluated_at)
        await waiter
        assert ranks_shown(pane.table) == ["0", "1", "2", "3", "7"]
        await pilot.press("slash", *("backspace",) * 5, *"exited")
        assert ranks_shown(pane.table) == ["3"]
        await pilot.press("backspace", "backspace")  # "exit": no state, no node: no row
        assert ranks_shown(pane.table) == []
        # does not parse: said, and the last good filter stays
        await pilot.press(*("backspace",) * 4, *"3-1")
        assert "filter: not a rank set" in pane.border_title
        assert pane.filter_input.has_class("-invalid")
        await pilot.press("escape")
        assert not pane.filter_input.display and pane.table.has_focus
        assert ranks_shown(pane.table) == [str(r) for r in range(8)]
        assert "shown" not in pane.border_title and "filter" not in pane.border_title
        assert app.screen is app.main_screen


async def test_filter_by_stack_class(replay_app):
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        pane = app.main_screen.ranks
        pane.table.focus()
        await pilot.press("slash", "number_sign", "2")
        assert ranks_shown(pane.table) == ["2"]
        pane.filter_input.value = "recv_object"  # a class's name
        await pilot.pause()
        assert ranks_shown(pane.table) == ["0", "1"]


@pytest.mark.parametrize("text", [f"node:{HOST}", HOST])
async def test_filter_by_the_node_the_header_names(replay_app, text):
    """On one node the rows name no host: the node the header names finds them all."""
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        pane = app.main_screen.ranks
        pane.table.focus()
        await pilot.press("slash")
        pane.filter_input.value = text
        await pilot.pause()
        assert f"node {HOST}" in header_text(app)
        assert ranks_shown(pane.table) == [str(r) for r in range(8)]
        pane.filter_input.value = "node:another-node"
        await pilot.pause()
        assert ranks_shown(pane.table) == []


async def test_gpu_names_whole_memory_per_process_and_departed_rows(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        gpus, ranks = app.main_screen.gpus.table, app.main_screen.ranks.table
        await pilot.pause()
        line = "".join(seg.text for seg in gpus.render_line(1))
        assert "H100 80GB HBM3" in line and "…" not in line
        assert cell(ranks, "p4105", "gpu_mem").text == "63.0G"  # 61 + 5 x 0.4 GiB
        gone = ranks.get_row_index("d4103")
        assert gone == 3  # between ranks 2 and 4
        assert cell(ranks, "d4103", "state").text == "exited"  # nothing says a code
        assert cell(ranks, "d4103", "left").text == "70s ago"  # left at 20 s, now 90 s
        assert cell(ranks, "d4103", "gpu_mem").text == "-"
        assert "left" in header(ranks) and "GPU mem" in header(ranks)


async def test_departed_rank_shows_its_exit(replay_app):
    """with_logs: rank 3 dies with a traceback; its log's time stamp says when it left."""
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        ranks = app.main_screen.ranks.table
        await pilot.pause()
        state = cell(ranks, "d4103", "state")
        assert state.text == "exited" and state.style == app.palette.bad  # it crashed
        assert cell(ranks, "d4103", "left").text.endswith(" ago")
        assert plain(app.main_screen.ranks.border_title)


SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40"),
         pytest.param((200, 60), id="200x60")]


@pytest.mark.parametrize("size", SIZES)
def test_sorted_and_filtered_ranks_snapshot(snap_compare, replay_app, size):
    """rank_exited at its end, the rank table sorted by GPU% busiest first (``.`` three times,
    ``I``) and filtered to ranks 0-5 (``/``, enter). Must be visible: the header "GPU%▼"; the
    rows 4, 5 (100 %), then 0-2 (idle), then rank 3 last, dimmed, state "exited" and, where the
    "left" column fits (it comes before role), "70s ago"; ranks 6-7 gone; the one-line filter
    "0-5" over the table and the title "Ranks (7 running, 1 departed) · 6 shown: /0-5"; at
    80x24, where the tables fold while there are symptoms, the rank pane zoomed (``z``) to the
    whole screen with every column that fits 80 (the "last step" before the role, "left").
    At 120x40 and 200x60 also the
    role and the "GPU mem" column (61.0G for rank 0 up to 63.0G for rank 5,
    "-" for rank 3); at 200x60 the GPU names whole ("H100 80GB HBM3") with the sparklines."""
    async def run_before(pilot) -> None:
        await pilot.press("e")
        pilot.app.main_screen.ranks.table.focus()
        await pilot.press(*("full_stop",) * 3, "I", "slash", *"0-5", "enter")
        if size == (80, 24):
            await pilot.press("z")
        await pilot.pause()

    assert snap_compare(replay_app("rank_exited"), run_before=run_before, terminal_size=size)
