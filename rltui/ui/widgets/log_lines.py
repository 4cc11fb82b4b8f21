"""The lines of a log view, drawn with the Line API from a ``LogBuffer``.

Why not ``Log`` or ``RichLog``: a search highlight or a filter change would mean writing every
kept line again, and both render each line through Rich when it is written. Here a line is
formatted only when it is on screen, so 20 000 kept lines cost what the 50 visible ones cost,
and new lines cost one list append each.

Following: while ``follow`` is on, new lines scroll the view to the end; when it is off (``f``,
or any move up, a jump or a search) the view stays where it is, even while old lines are
dropped from the front.
"""

from __future__ import annotations

from functools import lru_cache

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import MouseScrollUp, Resize
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from rltui.ui.themes import Palette, load_theme
from rltui.ui.widgets.log_buffer import CUT, ERROR, MARKER, WARNING, Entry, LogBuffer

CUT_MARK = " [cut]"

@lru_cache(maxsize=256)
def _style(text: str) -> Style:
    return Style.parse(text) if text else Style()


class LogLines(ScrollView, can_focus=True):
    COMPONENT_CLASSES = {"log-lines--cursor", "log-lines--match"}
    DEFAULT_CSS = """
    LogLines {
        background: $surface;
        color: $foreground;
        overflow-x: auto;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
        scrollbar-size-horizontal: 0;
    }
    LogLines > .log-lines--cursor {
        background: $primary 30%;
    }
    LogLines:focus > .log-lines--cursor {
        background: $primary 55%;
    }
    LogLines > .log-lines--match {
        background: $accent;
        color: $background;
        text-style: bold;
    }
    """
    BINDINGS = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "top", "Oldest line", show=False),
        Binding("end", "bottom", "Newest line, follow", show=False),
        Binding("left", "sideways(-8)", "Left", show=False),
        Binding("right", "sideways(8)", "Right", show=False),
    ]

    follow = reactive(True)

    def __init__(self, buffer: LogBuffer, *, tags: bool = True, line_numbers: bool = False,
                 id: str | None = None) -> None:
        super().__init__(id=id)
        self.buffer = buffer
        self.tags = tags
        self.line_numbers = line_numbers
        self.cursor: int | None = None  # absolute position of the line a jump landed on
        self._base: Style | None = None
        self._palette: Palette | None = None
        # Rank tag colours: the active theme's (``ranks:`` of its file, via the palette).
        self._colours: tuple[str, ...] = load_theme("dark").palette.ranks
        # Drawn lines by entry: following a busy log scrolls every line on screen each second,
        # and most of them were drawn the second before. The entry itself is kept in the value
        # so its id cannot be reused while cached.
        self._drawn: dict[tuple, tuple[object, Strip]] = {}

    # -- what the owner calls -----------------------------------------------------------------
    def set_palette(self, palette: Palette) -> None:
        if palette != self._palette:
            self._palette = palette
            self._colours = palette.ranks or (palette.info,)
            self.refresh()

    def rows_changed(self, added: int, dropped: int) -> None:
        """The buffer gained ``added`` rows at the end and lost ``dropped`` at the front."""
        if not added and not dropped:
            return
        top = int(self.scroll_y)
        visible_end = top + self.size.height
        self._resize_virtual()
        if self.follow:
            self._scroll(y=self.max_scroll_y)
            self.refresh()
        elif dropped:
            # Old lines left the front: move up with the lines being read.
            self._scroll(y=max(0, top - dropped))
            self.refresh()
        elif len(self.buffer.shown) - added < visible_end:
            self.refresh()  # the new rows land on screen

    def rebuilt(self, keep: int | None) -> None:
        """The rows were rebuilt (a filter changed): keep ``keep`` (a position) in view."""
        self._resize_virtual()
        if self.follow or keep is None:
            self._scroll(y=self.max_scroll_y)
        else:
            self.show_row(self.buffer.nearest_row(keep), center=False)
        self.refresh()

    def jump(self, pos: int, column: int | None = None, width: int = 0) -> bool:
        """Put the cursor on ``pos`` and scroll it into view (follow goes off); with
        ``column``, scroll sideways too if the text from there (``width`` long) is off
        screen."""
        row = self.buffer.row_of(pos)
        if row is None:
            return False
        self.follow = False
        self.cursor = pos
        self.show_row(row, center=True)
        if column is not None:
            room = self.scrollable_content_region.width - self._gutter()
            x = int(self.scroll_x)
            if column < x or column + width > x + room:
                self._scroll(x=max(0, column + width - room // 2) if column + width > room
                             else 0)
        self.refresh()
        return True

    def show_row(self, row: int, center: bool) -> None:
        height = max(1, self.size.height)
        top = int(self.scroll_y)
        if center and not top <= row < top + height:
            self._scroll(y=max(0, row - height // 2))
        elif not center:
            self._scroll(y=row)

    def top_position(self) -> int | None:
        """The absolute position of the first line on screen."""
        shown = self.buffer.shown
        top = int(self.scroll_y)
        return shown[top] if top < len(shown) else (shown[-1] if shown else None)

    def visible(self, pos: int | None) -> bool:
        row = None if pos is None else self.buffer.row_of(pos)
        top = int(self.scroll_y)
        return row is not None and top <= row < top + self.size.height

    def edge_position(self, direction: int) -> int:
        """Where a search or jump starts: the cursor when it is on screen, else just above
        the first line on screen (forward) or below the last one (backward)."""
        if self.visible(self.cursor):
            assert self.cursor is not None
            return self.cursor
        shown = self.buffer.shown
        if not shown:
            return 0
        top = int(self.scroll_y)
        if direction > 0:
            return shown[min(top, len(shown) - 1)] - 1
        bottom = min(top + self.size.height, len(shown)) - 1
        return shown[max(0, bottom)] + 1

    def _scroll(self, x: float | None = None, y: float | None = None) -> None:
        # Forced: right after rows are added the scrollbars are not laid out yet, and an
        # unforced scroll would be refused as "nothing to scroll".
        self.scroll_to(x=x, y=y, animate=False, immediate=True, force=True)

    def _resize_virtual(self) -> None:
        width = self._gutter() + self.buffer.widest + len(CUT_MARK)
        size = Size(width, len(self.buffer.shown))
        old = self.virtual_size
        if size == old:
            return
        if self._same_scrollbars(old, size):
            # Assigning virtual_size asks for a layout of the whole screen, which repaints every
            # pane (containers and all) each time a followed log grows. The pane's size does
            # not depend on its lines, so while no scrollbar appears or goes only the
            # scrollbars and the scroll limits need updating.
            self.set_reactive(LogLines.virtual_size, size)
            self._scroll_update(size)
        else:
            self.virtual_size = size

    def _same_scrollbars(self, old: Size, new: Size) -> bool:
        """Whether the scrollbars shown for ``old`` are those for ``new`` (laid out already;
        the vertical bar is the only one that takes room)."""
        height, width = self.size.height, self.size.width
        if not height or not width or not self.is_mounted:
            return False
        bar = self.styles.scrollbar_size_vertical
        return (old.height > height and new.height > height
                and (old.width > width - bar) == (new.width > width - bar))

    def _gutter(self) -> int:
        buf = self.buffer
        width = buf.tag_width + 1 if self.tags and buf.tag_width else 0
        if self.line_numbers:
            width += self._number_width() + 1
        return width

    def _number_width(self) -> int:
        last = self.buffer.entries[-1].line_no if self.buffer.entries else 0
        return max(4, len(str(last)))

    # -- drawing -----------------------------------------------------------------------------
    def on_resize(self, event: Resize) -> None:
        if self.follow:
            self.call_after_refresh(self._to_end)

    def _to_end(self) -> None:
        self._scroll(y=self.max_scroll_y)

    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's style walks the DOM; look it up once per paint, not once per line.
        self._base = self.rich_style
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width  # size.width includes the scrollbar
        base = self._base or self.rich_style
        buf = self.buffer
        row = int(self.scroll_y) + y
        if row >= len(buf.shown):
            return Strip.blank(width, base)
        pos, entry = buf.row(row)
        key = (id(entry), entry.flags, width, int(self.scroll_x), pos == self.cursor,
               buf.query, base, self._palette, self.tags, self.line_numbers, buf.tag_width)
        hit = self._drawn.get(key)
        if hit is not None:
            return hit[1]
        strip = self._draw(pos, entry, width, base)
        if len(self._drawn) > 4 * max(64, self.size.height):
            self._drawn.clear()
        self._drawn[key] = (entry, strip)
        return strip

    def _draw(self, pos: int, entry: Entry, width: int, base: Style) -> Strip:
        buf = self.buffer
        style = base
        if pos == self.cursor:
            style += self.get_component_rich_style("log-lines--cursor", partial=True)
        pal = self._palette
        dim = _style(pal.dim if pal else "dim")
        if entry.flags & MARKER:
            return Strip([Segment(" " + entry.text, style + dim + Style(italic=True))]
                         ).adjust_cell_length(width, style)
        segments = []
        if self.tags and buf.tag_width:
            segments.append(Segment(entry.tag.rjust(buf.tag_width) + " ",
                                    style + self._tag_style(entry)))
        if self.line_numbers:
            segments.append(Segment(str(entry.line_no).rjust(self._number_width()) + " ",
                                    style + dim))
        room = width - sum(len(s.text) for s in segments)
        segments += self._text(entry, style, int(self.scroll_x), room, dim)
        return Strip(segments).adjust_cell_length(width, style)

    def _tag_style(self, entry: Entry) -> Style:
        if entry.rank is None:
            return _style(f"bold {self._palette.info}" if self._palette else "bold")
        return _style(f"bold {self._colours[entry.rank % len(self._colours)]}")

    def _text(self, entry: Entry, style: Style, x: int, room: int, dim: Style
              ) -> list[Segment]:
        if room <= 0:
            return []
        pal = self._palette
        level = ""
        if pal is not None and entry.flags & ERROR:
            level = pal.bad
        elif pal is not None and entry.flags & WARNING:
            level = pal.warn
        line_style = style + _style(level)
        text = entry.text
        end = x + room
        out: list[Segment] = []
        at = x
        match = self.get_component_rich_style("log-lines--match", partial=True)
        for start, stop in self.buffer.spans(text):
            if stop <= x or start >= end:
                continue
            start, stop = max(start, x), min(stop, end)
            if start > at:
                out.append(Segment(text[at:start], line_style))
            out.append(Segment(text[start:stop], line_style + match))
            at = stop
        if at < min(end, len(text)):
            out.append(Segment(text[at:end], line_style))
        if len(text) > end and out:
            # The line goes on to the right (scroll with right/left): say so in its last cell.
            last = out[-1]
            out[-1] = Segment(last.text[:-1], last.style)
            out.append(Segment("…", style + dim))
        elif entry.flags & CUT:
            out.append(Segment(CUT_MARK, style + dim))
        return out

    # -- moving ----------------------------------------------------------------------------------
    def action_move(self, delta: int) -> None:
        if delta < 0:
            self.follow = False
        self._scroll(y=self.scroll_y + delta)

    def action_page(self, direction: int) -> None:
        if direction < 0:
            self.follow = False
        step = max(1, self.size.height - 1)
        self._scroll(y=self.scroll_y + direction * step)

    def action_top(self) -> None:
        self.follow = False
        self._scroll(y=0)

    def action_bottom(self) -> None:
        if self.follow:
            self._to_end()  # already following: the watcher will not fire
        self.follow = True

    def action_sideways(self, delta: int) -> None:
        x = max(0, min(self.scroll_x + delta, self.max_scroll_x))
        self._scroll(x=x)

    def watch_follow(self, follow: bool) -> None:
        if follow:
            self.cursor = None
            self._to_end()
            self.refresh()

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self.follow = False  # reading back: new lines must not pull the view away
