"""A cancel that arrives while the worker's last lines still wait in the queue: the report knows
the step the worker had started (CI once read ``partial_reason`` "cancelled" with no step because
Ctrl-C came between the worker writing "step" and the runner reading it)."""

from __future__ import annotations

import collections
import queue
import subprocess
import sys
import threading

from rltui.checks.workflow.process import EOF
from rltui.checks.workflow.runner import Check
from rltui.checks.workflow.spec import WorkflowSpec


class SleepingWorker:
    """A real process standing in for the worker; its lines are whatever the test queued."""

    def __init__(self, lines):
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        self.lines: queue.Queue = queue.Queue()
        for line in lines:
            self.lines.put(line)
        self.stderr = collections.deque()
        self.killed = False

    def kill(self):
        self.killed = True
        self.proc.kill()
        self.proc.wait()

    def how_it_ended(self):
        return "killed by signal SIGKILL"


def check_cancelled():
    cancel = threading.Event()
    cancel.set()
    return Check(WorkflowSpec(target="m:A", prompt="hi", probe_server=False), None, cancel)


def test_the_step_the_worker_started_before_the_cancel_is_the_one_cut_short():
    check = check_cancelled()
    worker = SleepingWorker([{"event": "hello", "pid": 1}, {"event": "loaded"},
                             {"event": "step", "step": "single"}])
    ending = check._drive(worker)
    check._close_step(worker, ending, ["single"])
    assert ending == "cancelled" and worker.killed
    assert check.report.partial_reason == "cancelled during the single step"
    assert [(r.step, r.status) for r in [check.report.single]] == [("single", "unfinished")]


def test_an_end_already_queued_is_left_for_the_next_reader():
    check = check_cancelled()
    worker = SleepingWorker([{"event": "loaded"}, EOF])
    try:
        assert check._drive(worker) == "cancelled"
        assert worker.lines.get_nowait() is EOF
    finally:
        if worker.proc.poll() is None:
            worker.kill()
