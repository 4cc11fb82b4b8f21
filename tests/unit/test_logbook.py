"""LogBook: the fold of log readings into per-file state and one bounded, numbered tail.

Values are built directly (LogPoll, LogUpdate, StepRecord, LogEvent); every time is explicit.
"""

from __future__ import annotations

import pytest

from rltui import model
from rltui.logbook import MAX_EVENTS, RECENT_STEPS, LogBook
from rltui.model import LogEvent, LogLine, LogPoll, LogUpdate, Reading, StepRecord
from rltui.snapshot import Tracker

T0 = 1_000_000.0


def step(n, line_no, arrival=T0, time=None, total=None):
    return StepRecord(step=n, line_no=line_no, arrival=arrival, time=time, total=total)


def event(line_no, end_line=None, kind="traceback", arrival=T0):
    return LogEvent(kind=kind, line_no=line_no, end_line=end_line or line_no, arrival=arrival,
                    summary=f"{kind} at {line_no}")


def lines(first, last, rank=None):
    return tuple(LogLine(n, f"line {n}", rank=rank) for n in range(first, last + 1))


def update(path="/logs/a.log", **kw):
    kw.setdefault("status", model.OK)
    return LogUpdate(path=path, **kw)


def poll(*updates, unmatched=()):
    return LogPoll(files=tuple(updates), unmatched=tuple(unmatched))


def book_with(*updates, max_lines=None):
    book = LogBook() if max_lines is None else LogBook(max_lines=max_lines)
    for u in updates:
        book.apply(poll(u))
    return book


def state(book, path="/logs/a.log"):
    return {s.path: s for s in book.states()}[path]


# -- steps -------------------------------------------------------------------------------------

def test_steps_seen_last_step_and_total():
    book = book_with(
        update(format="areal", lines=lines(1, 3),
               steps=(step(1, 1, T0, total=10), step(2, 2, T0 + 5, total=10))),
        update(steps=(step(3, 7, T0 + 10, time=T0 + 9),)))
    s = state(book)
    assert s.format == "areal"  # a later update's "unknown" does not erase it
    assert s.steps_seen == 3
    assert s.last_step == 3
    assert s.last_step_time == T0 + 9  # the line's own time when it has one
    assert s.last_step_arrival == T0 + 10
    assert s.total_steps == 10  # kept from earlier steps when a later one does not say
    assert [r.step for r in s.recent_steps] == [1, 2, 3]


def test_the_last_step_is_the_last_in_file_order_not_the_latest_stamp():
    # A clock stepped back (or a time-of-day stamp wrapped at midnight): the later line is
    # still the last step; its stamp says when it claims to have run.
    book = book_with(update(steps=(step(110, 5, T0 + 50, time=T0 + 86_000),)),
                     update(steps=(step(120, 6, T0 + 60, time=T0 + 100),)))
    s = state(book)
    assert s.steps_seen == 2
    assert s.last_step == 120 and s.last_step_time == T0 + 100


def test_recent_steps_are_bounded_but_every_step_is_counted():
    many = tuple(step(i, i, T0 + i) for i in range(RECENT_STEPS + 36))
    s = state(book_with(update(steps=many)))
    assert s.steps_seen == RECENT_STEPS + 36
    assert len(s.recent_steps) == RECENT_STEPS
    assert s.recent_steps[0].step == 36 and s.recent_steps[-1].step == RECENT_STEPS + 35
    assert s.last_step == RECENT_STEPS + 35


def test_a_file_without_steps_has_none():
    s = state(book_with(update(lines=lines(1, 4))))
    assert s.steps_seen == 0
    assert s.last_step is None and s.last_step_time is None and s.total_steps is None
    assert s.lines_seen == 4


# -- events ------------------------------------------------------------------------------------

def test_events_are_bounded_keeping_the_newest():
    book = LogBook()
    for i in range(MAX_EVENTS + 50):
        book.apply(poll(update(events=(event(i + 1, arrival=T0 + i),))))
    s = state(book)
    assert len(s.events) == MAX_EVENTS
    assert s.events[0].line_no == 51
    assert s.events[-1].line_no == MAX_EVENTS + 50


def test_events_of_one_update_are_kept_in_order():
    s = state(book_with(update(events=(event(3), event(9, 12, kind="cuda-oom")))))
    assert [(e.kind, e.line_no, e.end_line) for e in s.events] == [
        ("traceback", 3, 3), ("cuda-oom", 9, 12)]


# -- the merged tail and its sequence numbers ----------------------------------------------------

def test_lines_carry_increasing_seq_across_files_and_the_file_rank():
    book = book_with(update("/logs/a.log", rank=2, lines=lines(1, 2)),
                     update("/logs/b.log", lines=lines(1, 1, rank=7)))
    got = [(t.seq, t.path, t.rank, t.line.line_no) for t in book.lines()]
    assert got == [(1, "/logs/a.log", 2, 1), (2, "/logs/a.log", 2, 2), (3, "/logs/b.log", 7, 1)]
    assert book.seq == 3


def test_a_line_prefix_rank_wins_over_the_file_rank():
    book = book_with(update(rank=2, lines=(LogLine(1, "x", rank=5), LogLine(2, "y"))))
    assert [t.rank for t in book.lines()] == [5, 2]


def test_lines_since_is_incremental():
    book = LogBook()
    assert book.lines_since(0) == []
    book.apply(poll(update(lines=lines(1, 3))))
    first = book.lines_since(0)
    assert [t.seq for t in first] == [1, 2, 3]
    assert book.lines_since(first[-1].seq) == []
    book.apply(poll(update(lines=lines(4, 5))))
    assert [(t.seq, t.line.line_no) for t in book.lines_since(3)] == [(4, 4), (5, 5)]
    assert [t.seq for t in book.lines_since(4)] == [5]
    assert book.lines_since(5) == [] and book.lines_since(99) == []


def test_lines_since_a_seq_older_than_the_kept_window_gives_all_kept():
    book = book_with(update(lines=lines(1, 8)), max_lines=5)
    kept = book.lines()
    assert [t.seq for t in kept] == [4, 5, 6, 7, 8]
    assert book.lines_since(0) == kept
    assert book.lines_since(2) == kept
    assert book.lines_since(3) == kept  # exactly the one before the window
    assert [t.seq for t in book.lines_since(6)] == [7, 8]


@pytest.mark.parametrize("seen", range(12))
def test_lines_since_never_repeats_or_skips_a_kept_line(seen):
    book = LogBook(max_lines=4)
    for k in range(5):
        book.apply(poll(update(lines=lines(2 * k + 1, 2 * k + 2))))
    got = [t.seq for t in book.lines_since(seen)]
    kept = [t.seq for t in book.lines()]
    assert got == [s for s in kept if s > seen]


# -- reset (rotation, truncation) ----------------------------------------------------------------

def test_reset_restarts_line_numbers_but_keeps_steps_and_events():
    book = book_with(update(lines=lines(1, 40), steps=(step(7, 30, T0 + 100),),
                            events=(event(35),)))
    book.apply(poll(update(reset=True, lines=lines(1, 3), steps=(step(1, 2, T0 + 5),))))
    s = state(book)
    assert s.lines_seen == 40 + 3  # every generation counts
    assert s.steps_seen == 2
    # the new file's step is the last one even though its time is earlier (a new run's clock)
    assert s.last_step == 1
    assert [e.line_no for e in s.events] == [35]
    assert [r.step for r in s.recent_steps] == [7, 1]


def test_reset_keeps_the_lines_of_earlier_generations_and_counts_truncations():
    book = book_with(update(lines=lines(1, 9)))
    book.apply(poll(update(truncated=True)))
    book.apply(poll(update(reset=True)))
    assert state(book).lines_seen == 9
    assert state(book).truncations == 1
    book.apply(poll(update(lines=lines(1, 4))))
    assert state(book).lines_seen == 9 + 4


# -- line_shift (huge files opened from their end) -----------------------------------------------

def test_line_shift_moves_earlier_numbers_of_that_file_only():
    book = LogBook()
    book.apply(poll(
        update("/logs/a.log", line_base_known=False, lines=lines(1, 3),
               steps=(step(1, 2, T0),), events=(event(1, 3),)),
        update("/logs/b.log", lines=lines(1, 3), steps=(step(9, 2, T0),), events=(event(1, 3),)),
    ))
    before_b = state(book, "/logs/b.log")
    book.apply(poll(update("/logs/a.log", line_shift=1000, lines=lines(1004, 1005))))
    a, b = state(book, "/logs/a.log"), state(book, "/logs/b.log")
    assert a.line_base_known
    assert [r.line_no for r in a.recent_steps] == [1002]
    assert [(e.line_no, e.end_line) for e in a.events] == [(1001, 1003)]
    assert a.lines_seen == 1005
    assert b == before_b
    by_file = {}
    for t in book.lines():
        by_file.setdefault(t.path, []).append(t.line.line_no)
    # this update's own lines were already absolute: not shifted twice
    assert by_file["/logs/a.log"] == [1001, 1002, 1003, 1004, 1005]
    assert by_file["/logs/b.log"] == [1, 2, 3]
    assert [t.seq for t in book.lines()] == list(range(1, 9))  # numbering of the tail kept


def test_line_shift_moves_the_last_step_and_keeps_the_tail_bound():
    book = book_with(update(line_base_known=False, lines=lines(1, 6), steps=(step(3, 5, T0),)),
                     max_lines=4)
    book.apply(poll(update(line_shift=50)))
    s = state(book)
    assert s.recent_steps[-1].line_no == 55
    assert s.lines_seen == 56
    assert [t.line.line_no for t in book.lines()] == [53, 54, 55, 56]
    book.apply(poll(update(lines=lines(57, 58))))
    assert len(book.lines()) == 4  # still bounded after the rebuild


def test_line_base_known_follows_the_latest_update():
    book = book_with(update(line_base_known=False, lines=lines(1, 2)))
    assert not state(book).line_base_known
    book.apply(poll(update(line_shift=10)))
    assert state(book).line_base_known


# -- who writes the file -------------------------------------------------------------------------

def test_rank_and_pid_are_kept_when_a_later_update_lacks_them():
    book = book_with(update(rank=3, pid=4242, lines=lines(1, 1)),
                     update(lines=lines(2, 2)))
    s = state(book)
    assert (s.rank, s.pid) == (3, 4242)
    assert [t.rank for t in book.lines()] == [3, 3]
    book.apply(poll(update(rank=5, pid=77)))
    s = state(book)
    assert (s.rank, s.pid) == (5, 77)


def test_status_and_message_follow_the_latest_update():
    book = book_with(update(lines=lines(1, 1)),
                     update(status=model.UNAVAILABLE, message="deleted; waiting for it"))
    s = state(book)
    assert (s.status, s.message) == (model.UNAVAILABLE, "deleted; waiting for it")
    assert s.lines_seen == 1


def test_last_line_arrival_is_the_newest_step_or_event_arrival():
    book = book_with(update(steps=(step(1, 1, T0 + 3),), events=(event(2, arrival=T0 + 7),)))
    assert state(book).last_line_arrival == T0 + 7
    book.apply(poll(update(events=(event(3, arrival=T0 + 1),))))
    assert state(book).last_line_arrival == T0 + 7  # never goes back


def test_lines_alone_do_not_invent_an_arrival_of_zero():
    s = state(book_with(update(lines=lines(1, 3))))
    assert s.last_line_arrival != 0.0


def test_states_are_sorted_by_path_and_unmatched_follow_the_latest_poll():
    book = LogBook()
    book.apply(poll(update("/z.log"), update("/a.log"), unmatched=["/x/*.log"]))
    assert [s.path for s in book.states()] == ["/a.log", "/z.log"]
    assert book.unmatched == ("/x/*.log",)
    book.apply(poll(update("/z.log")))
    assert book.unmatched == ()


# -- the snapshot fold ----------------------------------------------------------------------------

def test_tracker_puts_logs_unmatched_and_now_source_in_the_snapshot():
    tracker = Tracker()
    tracker.now_source = "--now 2026-03-01T12:00:00"
    tracker.apply(Reading("logs", T0, model.OK,
                          poll(update(rank=1, steps=(step(4, 9, T0),)), unmatched=["/nope*"])))
    snap = tracker.snapshot(T0 + 1)
    assert snap.logs == tracker.logbook.states()
    assert snap.logs[0].last_step == 4 and snap.logs[0].rank == 1
    assert snap.unmatched_logs == ("/nope*",)
    assert snap.now_source == "--now 2026-03-01T12:00:00"


def test_a_failed_logs_reading_keeps_what_was_known():
    tracker = Tracker()
    tracker.apply(Reading("logs", T0, model.OK, poll(update(steps=(step(4, 9, T0),)))))
    tracker.apply(Reading("logs", T0 + 2, model.ERROR, None, message="cannot list log files"))
    snap = tracker.snapshot(T0 + 3)
    assert snap.logs[0].last_step == 4
    assert snap.source("logs").status == model.ERROR


def test_tails_give_the_last_lines_of_every_file_oldest_first():
    book = LogBook()
    book.apply(LogPoll(files=(
        LogUpdate(path="a.log", status="ok", lines=tuple(LogLine(i, f"a{i}") for i in range(1, 6))),
        LogUpdate(path="b.log", status="ok", lines=(LogLine(1, "b1"),)),
        LogUpdate(path="c.log", status="ok"),
    )), 1.0)
    assert book.tails(3) == {"a.log": ["a3", "a4", "a5"], "b.log": ["b1"], "c.log": []}
