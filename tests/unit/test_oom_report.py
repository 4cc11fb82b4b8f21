"""Which OOM the report is about, and its JSON."""

from rltui.diagnosis.oom.report import find_oom
from rltui.model import LogEvent, LogFileState, NodeSnapshot


def oom(line: int, arrival: float = 5.0, time=None) -> LogEvent:
    return LogEvent(kind="cuda-oom", line_no=line, end_line=line + 3, arrival=arrival,
                    summary=f"oom at {line}", time=time)


def test_the_latest_oom_wins_a_tie_of_one_read_by_its_line():
    log = LogFileState(path="r0.log", events=(oom(3), oom(31)))
    _, event = find_oom(NodeSnapshot(timestamp=10.0, logs=(log,)))
    assert event.line_no == 31


def test_a_later_read_wins_across_files_and_other_events_do_not_count():
    a = LogFileState(path="a.log", events=(oom(50, arrival=5.0),))
    b = LogFileState(path="b.log", events=(oom(2, arrival=7.0),
                                          LogEvent("traceback", 9, 12, 8.0, "x")))
    log, event = find_oom(NodeSnapshot(timestamp=10.0, logs=(a, b)))
    assert log.path == "b.log" and event.line_no == 2
    assert find_oom(NodeSnapshot(timestamp=1.0)) is None
