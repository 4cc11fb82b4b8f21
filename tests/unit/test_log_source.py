"""LogSource's file logic (globs, unmatched, dedupe, ranks, statuses) and how it hands tail
reads to the parsers (resets, line shifts, bulk history, idle flush), over small tmp files."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.model import DENIED, ERROR, OK, UNAVAILABLE, LogPoll
from rltui.sources import logs as logs_module
from rltui.sources.logs import BULK_LINES, IDLE_FLUSH_S, LogSource, rank_from_name
from rltui.sources.tail import FileTail


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def by_name(reading) -> dict:
    assert isinstance(reading.payload, LogPoll)
    return {os.path.basename(u.path): u for u in reading.payload.files}


def append(path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def append_bytes(path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def verl(step: int) -> str:
    return f"step:{step} - actor/pg_loss:0.{step} - critic/score/mean:0.5\n"


TRACEBACK = ("Traceback (most recent call last):\n"
             '  File "train.py", line 3, in <module>\n'
             "    main()\n"
             "RuntimeError: boom\n")


@pytest.mark.parametrize("name, rank", [
    ("rank3.log", 3), ("rank_3.log", 3), ("worker-rank-3.txt", 3), ("node0.rank12.out", 12),
    ("RANK-07.log", 7), ("rank3of8.log", 3), ("train_r3.log", None), ("local_rank3.log", None),
    ("local-rank-2.log", None), ("ranks.log", None), ("prank3.log", None), ("stdout.log", None),
    ("dir/rank9/out.log", None),
])
def test_rank_from_file_name(name, rank):
    assert rank_from_name(name) == rank


def test_globs_and_literal_paths_that_match_nothing_are_unmatched_until_they_do(tmp_path):
    pattern = str(tmp_path / "run" / "*.log")
    literal = str(tmp_path / "late.log")
    source = LogSource([pattern, literal])
    first = source.poll()
    assert first.status == UNAVAILABLE and first.payload.unmatched == (pattern, literal)
    assert first.payload.files == () and "no file matches" in first.message
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "sub.log").mkdir()  # a directory a glob matches is not a log
    (tmp_path / "run" / "rank1.log").write_text(verl(1))
    second = source.poll()
    assert second.status == OK and second.payload.unmatched == (literal,)
    files = by_name(second)
    assert list(files) == ["rank1.log"] and files["rank1.log"].rank == 1
    assert [s.step for s in files["rank1.log"].steps] == [1]
    (tmp_path / "late.log").write_text("hello\n")
    third = source.poll()
    assert third.payload.unmatched == () and set(by_name(third)) == {"rank1.log", "late.log"}
    assert [line.text for line in by_name(third)["late.log"].lines] == ["hello"]


def test_a_literal_directory_is_reported(tmp_path):
    reading = LogSource([str(tmp_path)]).poll()
    (update,) = reading.payload.files
    assert update.status == ERROR and "is a directory" in update.message
    assert reading.status == ERROR and "1 of 1 logs unreadable" in reading.message


def test_one_file_named_many_ways_is_followed_once(tmp_path):
    real = tmp_path / "out.log"
    real.write_text(verl(1))
    (tmp_path / "link.log").symlink_to(real)
    discovered = [(str(real), 5, 100), (str(real), 5, 100),  # its stdout and its stderr
                  (str(tmp_path / "link.log"), None, None)]
    source = LogSource([str(tmp_path / "*.log")], discover=lambda: discovered)
    (update,) = source.poll().payload.files
    assert update.path == str(real) and update.rank == 5 and update.pid == 100
    assert [s.step for s in update.steps] == [1]


def test_rank_comes_from_the_name_then_the_prefixes_then_discovery(tmp_path):
    (tmp_path / "rank2.log").write_text("[rank7]:hello\n")
    (tmp_path / "mostly.log").write_text("[rank4]:a\n" * 19 + "[rank1]:c\nplain\n")
    (tmp_path / "launcher.log").write_text("[rank4]:a\n[rank4]:b\n[rank1]:c\n")
    (tmp_path / "plain.log").write_text("no prefix\n")
    names = ("rank2.log", "mostly.log", "launcher.log", "plain.log")
    found = [(str(tmp_path / n), 9, 42) for n in names]
    files = by_name(LogSource(discover=lambda: found).poll())
    assert files["rank2.log"].rank == 2
    assert files["mostly.log"].rank == 4
    assert files["launcher.log"].rank == 9  # every rank's output: no prefix rank wins
    assert files["plain.log"].rank == 9 and files["plain.log"].pid == 42
    assert [ln.rank for ln in files["launcher.log"].lines] == [4, 4, 1]


def test_discovery_failure_is_a_note_not_a_crash(tmp_path):
    (tmp_path / "a.log").write_text("x\n")

    def broken():
        raise RuntimeError("procs gone")

    reading = LogSource([str(tmp_path / "a.log")], discover=broken).poll()
    assert reading.status == OK and "log discovery failed" in reading.message
    assert len(reading.payload.files) == 1


def test_some_files_failing_is_ok_with_a_summary(tmp_path):
    (tmp_path / "good.log").write_text("x\n")
    (tmp_path / "dir.log").mkdir()
    source = LogSource([str(tmp_path / "good.log"), str(tmp_path / "dir.log")],
                       discover=lambda: [(str(tmp_path / "gone.log"), 0, 1)])
    reading = source.poll()
    assert reading.status == OK
    assert reading.message.startswith("2 of 3 logs unreadable: dir.log: is a directory")
    assert "gone.log: no such file" in reading.message
    statuses = {n: u.status for n, u in by_name(reading).items()}
    assert statuses == {"good.log": OK, "dir.log": ERROR, "gone.log": UNAVAILABLE}


def test_every_file_failing_gives_their_status(tmp_path):
    found = [(str(tmp_path / "a.log"), 0, 1), (str(tmp_path / "b.log"), 1, 2)]
    reading = LogSource(discover=lambda: found).poll()
    assert reading.status == UNAVAILABLE and "2 of 2 logs unreadable" in reading.message


def test_only_the_last_lines_are_sent_but_every_line_is_parsed(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("".join(verl(k) for k in range(1, 301)))
    source = LogSource([str(path)], max_lines_per_file=50)
    (update,) = source.poll().payload.files
    assert [ln.line_no for ln in update.lines] == list(range(251, 301))
    assert [s.step for s in update.steps] == list(range(1, 301))
    assert [s.line_no for s in update.steps] == list(range(1, 301))
    assert update.format == "verl"


def test_levels_and_noise_on_shown_lines(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("[rank0]:\x1b[31mERROR something broke\x1b[0m\nWARNING: careful\nfine\n")
    (update,) = LogSource([str(path)]).poll().payload.files
    assert [(ln.text, ln.level, ln.rank) for ln in update.lines] == [
        ("ERROR something broke", "error", 0), ("WARNING: careful", "warning", None),
        ("fine", "", None)]


def test_a_long_history_is_scanned_for_steps_and_its_recent_events_kept(tmp_path):
    path = tmp_path / "train.log"
    filler = "INFO some chatter about the run\n"
    body = [TRACEBACK]  # deep in the history: older than the event window
    body += [filler] * (logs_module.HISTORY_EVENT_LINES + 10)
    body += [verl(k) + filler * 3 for k in range(1, 2001)]
    body += [TRACEBACK, verl(2001)]
    path.write_text("".join(body))
    n_lines = sum(chunk.count("\n") for chunk in body)
    assert n_lines > BULK_LINES
    source = LogSource([str(path)], max_lines_per_file=10)
    (update,) = source.poll().payload.files
    assert [s.step for s in update.steps] == list(range(1, 2002))
    assert update.steps[-1].line_no == n_lines
    first_step_line = 4 + logs_module.HISTORY_EVENT_LINES + 10 + 1
    assert update.steps[0].line_no == first_step_line
    assert [(e.kind, e.line_no) for e in update.events] == [("traceback", n_lines - 4)]
    assert len(update.lines) == 10 and update.lines[-1].line_no == n_lines
    append(path, verl(2002))  # the live path goes on from where the scan stopped
    (update,) = source.poll().payload.files
    assert [(s.step, s.line_no) for s in update.steps] == [(2002, n_lines + 1)]


def test_reset_recreates_the_parsers(tmp_path):
    path = tmp_path / "hf.log"
    # three logging steps (their epoch advances; the same dict twice is a copy, not a step)
    path.write_text("".join("{'loss': 1.0, 'grad_norm': 0.5, 'learning_rate': 1e-05, "
                            f"'epoch': 0.{k}}}\n" for k in (1, 2, 3)))
    source = LogSource([str(path)])
    (first,) = source.poll().payload.files
    assert [s.step for s in first.steps] == [1, 2, 3]  # HF steps are counted
    os.rename(path, tmp_path / "hf.log.1")
    path.write_text("{'loss': 0.9, 'grad_norm': 0.5, 'learning_rate': 1e-05, 'epoch': 0.2}\n")
    (ended,) = source.poll().payload.files
    assert not ended.reset and ended.steps == ()
    (new,) = source.poll().payload.files
    assert new.reset and [(s.step, s.line_no) for s in new.steps] == [(1, 1)]


def test_line_shift_makes_parsed_numbers_absolute(tmp_path):
    path = tmp_path / "big.log"
    lines = [f"INFO padding line number {k:06d}\n" for k in range(1, 20001)]
    lines[-3] = verl(7)
    path.write_text("".join(lines))
    source = LogSource([str(path)], history_bytes=4096, count_budget_bytes=1)
    (first,) = source.poll().payload.files
    assert not first.line_base_known and first.line_shift == 0
    window = len(first.lines)
    before = 20000 - window
    assert [(s.step, s.line_no) for s in first.steps] == [(7, window - 2)]  # window-relative
    append(path, TRACEBACK[:-len("RuntimeError: boom\n")])  # a traceback, still open
    (second,) = source.poll().payload.files  # counted at once (1 MiB per read at least)
    assert second.line_base_known and second.line_shift == before
    assert [ln.line_no for ln in second.lines] == [20001, 20002, 20003]
    append(path, "RuntimeError: boom\n" + verl(8))
    (third,) = source.poll().payload.files
    assert [(s.step, s.line_no) for s in third.steps] == [(8, 20005)]
    assert [(e.kind, e.line_no, e.end_line) for e in third.events] == [
        ("traceback", 20001, 20004)]


def test_a_quiet_file_gets_its_open_event_flushed(tmp_path):
    path = tmp_path / "rank0.log"
    path.write_text(verl(1) + TRACEBACK)
    clock = Clock()
    source = LogSource([str(path)], clock=clock)
    (first,) = source.poll().payload.files
    assert first.events == ()  # the traceback could still go on
    clock.t += IDLE_FLUSH_S / 2
    assert source.poll().payload.files[0].events == ()
    clock.t += IDLE_FLUSH_S
    (late,) = source.poll().payload.files
    assert [(e.kind, e.line_no, e.end_line) for e in late.events] == [("traceback", 2, 5)]
    clock.t += IDLE_FLUSH_S
    assert source.poll().payload.files[0].events == ()  # once


def test_a_log_nobody_writes_any_more_gives_its_last_event_at_once(tmp_path):
    path = tmp_path / "rank3.log"
    path.write_text(verl(1) + TRACEBACK)
    old = time.time() - 60
    os.utime(path, (old, old))  # the rank died a minute ago
    (update,) = LogSource([str(path)]).poll().payload.files
    assert [(e.kind, e.line_no, e.end_line) for e in update.events] == [("traceback", 2, 5)]


def test_rotation_closes_the_old_file_s_open_event(tmp_path):
    path = tmp_path / "rank0.log"
    path.write_text(verl(1) + TRACEBACK)
    source = LogSource([str(path)], clock=Clock())
    assert source.poll().payload.files[0].events == ()
    os.rename(path, tmp_path / "rank0.log.1")
    path.write_text(verl(2))
    (ended,) = source.poll().payload.files
    assert not ended.reset and [e.kind for e in ended.events] == ["traceback"]
    (new,) = source.poll().payload.files
    assert new.reset and new.events == () and [s.step for s in new.steps] == [2]


def test_a_parser_failure_is_that_file_s_error(tmp_path, monkeypatch):
    (tmp_path / "a.log").write_text("boom\n")
    (tmp_path / "b.log").write_text("fine\n")
    real = logs_module.strip_noise

    def picky(text):
        if text == "boom":
            raise ValueError("bad line")
        return real(text)

    monkeypatch.setattr(logs_module, "strip_noise", picky)
    files = by_name(LogSource([str(tmp_path / "*.log")]).poll())
    assert files["a.log"].status == ERROR and "bad line" in files["a.log"].message
    assert files["b.log"].status == OK


def test_bad_completion_pattern_fails_at_construction():
    with pytest.raises(ValueError, match="completion pattern"):
        LogSource(completion_patterns=["(unclosed"])


def test_close_closes_every_tail(tmp_path):
    (tmp_path / "a.log").write_text("x\n")
    source = LogSource([str(tmp_path / "a.log")])
    source.poll()
    source.close()
    assert all(entry.tail._fd is None for entry in source._files.values())


# -- FileTail windows, with the file written here ------------------------------------------------

def test_window_starting_exactly_at_a_line_start(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"".join(b"%07d\n" % k for k in range(1, 1001)))  # 8 bytes a line
    tail = FileTail(str(path), history_bytes=80)  # exactly 10 lines; the byte before is \n
    first = tail.read()
    assert first.lines == [(k, f"{990 + k:07d}", False) for k in range(1, 11)]
    assert tail.read().line_shift == 990


@pytest.mark.parametrize("max_line, first_no, shift", [
    (1 << 20, 1, 3),  # the end of the long line is found: the window starts at "c"
    (100, 2, 2),  # no line start near the window start: line 1 is the long line, never shown
])
def test_window_starting_inside_a_long_line(tmp_path, max_line, first_no, shift):
    path = tmp_path / "a.log"
    path.write_bytes(b"a\nb\n" + b"x" * 5000 + b"\nc\n")
    tail = FileTail(str(path), history_bytes=1000, max_line_bytes=max_line)
    first = tail.read()
    assert first.lines == [(first_no, "c", False)] and not first.line_base_known
    second = tail.read()
    assert second.line_shift == shift and second.line_base_known
    append(path, "d\n")
    assert tail.read().lines == [(5, "d", False)]  # a, b, the x line, c, d


def test_a_file_that_shrinks_mid_count_starts_over(tmp_path):
    path = tmp_path / "a.log"
    path.write_bytes(b"".join(b"%07d\n" % k for k in range(1, 1001)))
    tail = FileTail(str(path), history_bytes=80)
    tail.read()
    path.write_bytes(b"fresh\n")
    assert tail.read().ended
    again = tail.read()
    assert again.reset and again.lines == [(1, "fresh", False)] and again.line_base_known


def test_denied_is_a_state(tmp_path, monkeypatch):
    path = tmp_path / "a.log"
    path.write_text("x\n")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "open", refuse)
    read = FileTail(str(path)).read()
    assert read.status == DENIED and "permission denied" in read.message


ALPHABET = b"ab\n\r\x00\xff"


def _oracle(content: bytes, max_line: int) -> list[tuple[int, str, bool]]:
    """What a tail must hand out for ``content`` once the file has ended."""
    pieces = content.split(b"\n")
    if not pieces[-1]:
        pieces.pop()  # ends with a newline: no partial line
    out = []
    for no, raw in enumerate(pieces, 1):
        cut = len(raw) > max_line
        text = raw[:max_line].decode("utf-8", "replace").replace("\x00", "\ufffd")
        if not cut and text.endswith("\r"):
            text = text[:-1]
        out.append((no, text, cut))
    return out


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(max_size=40).map(
           lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b)), max_size=12),
       max_line=st.integers(1, 12), max_read=st.integers(1, 64))
def test_any_bytes_in_any_pieces_give_the_same_lines(tmp_path_factory, chunks, max_line,
                                                     max_read):
    path = tmp_path_factory.mktemp("prop") / "x.log"
    path.write_bytes(b"")
    tail = FileTail(str(path), max_line_bytes=max_line, max_read_bytes=max_read)
    got = list(tail.read().lines)
    for chunk in chunks:
        append_bytes(path, chunk)
        for _ in range(len(chunk) // max_read + 2):  # reads are bounded; enough to catch up
            got.extend(tail.read().lines)
    path.unlink()  # the file ends: a held partial line comes out
    end = tail.read()
    assert end.ended
    got.extend(end.lines)
    assert got == _oracle(b"".join(chunks), max_line)


def test_a_retargeted_link_is_followed_once_vetted_again_and_never_before(tmp_path,
                                                                          monkeypatch):
    """A log path's links are resolved every VET_AGAIN_S seconds, not every poll: until then
    the link reads the file it led to when it was vetted (never a target no one vetted), then
    the new one."""
    from rltui.sources import logs

    (tmp_path / "run1.log").write_text(verl(1))
    (tmp_path / "run2.log").write_text(verl(2))
    link = tmp_path / "latest.log"
    link.symlink_to(tmp_path / "run1.log")
    source = LogSource([str(link)])
    assert [u.path for u in source.poll().payload.files] == [str(tmp_path / "run1.log")]
    link.unlink()
    link.symlink_to(tmp_path / "run2.log")
    assert str(tmp_path / "run2.log") not in [u.path for u in source.poll().payload.files]
    monkeypatch.setattr(logs, "VET_AGAIN_S", 0.0)
    assert str(tmp_path / "run2.log") in [u.path for u in source.poll().payload.files]
