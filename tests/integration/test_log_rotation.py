"""Rotation under a real writer: every step line written is counted once by the log source.

A child Python process writes fixed-length step lines (``step:00000042 loss:0.5000``: every line
the same length, so the byte before any line start is a newline in every generation) and rotates
its log the three ways logs are rotated: rename (Python's ``RotatingFileHandler``: rename, then
the writer opens a new file), create (logrotate's default: rename and create an empty file; the
writer goes on writing to the old file until told to reopen it), copytruncate (logrotate copies
the file, then truncates it in place; the writer, in append mode, goes on). It answers each
command on a pipe once the bytes are written, so every step of the test is ordered by that
answer, never by sleeping. Bursts after a truncation are often longer than the file was: the
truncated file is then larger than the offset already read, the case one byte could not tell.

Run as a script, it prints the numbers for docs/reliability.md:
    python tests/integration/test_log_rotation.py
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from rltui.sources.logs import LogSource  # noqa: E402

WRITER = r"""
import json, os, shutil, sys
path = sys.argv[1]
fd = None
written = 0
def reopen():
    global fd
    if fd is not None:
        os.close(fd)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
def shift():
    k = 1
    while os.path.exists(f"{path}.{k}"):
        k += 1
    for i in range(k - 1, 0, -1):
        os.rename(f"{path}.{i}", f"{path}.{i + 1}")
reopen()
for raw in sys.stdin:
    cmd = json.loads(raw)
    op = cmd["op"]
    if op == "burst":  # one write per line, as a logger flushes each line
        for _ in range(cmd["n"]):
            written += 1
            os.write(fd, f"step:{written:08d} loss:0.5000\n".encode())
    elif op == "rename":  # RotatingFileHandler
        shift()
        os.rename(path, path + ".1")
        reopen()
    elif op == "create":  # logrotate create: the writer reopens later (postrotate)
        shift()
        os.rename(path, path + ".1")
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
    elif op == "reopen":
        reopen()
    elif op == "copy":  # logrotate copytruncate, first half
        shift()
        shutil.copyfile(path, path + ".1")
    elif op == "truncate":  # ... second half
        os.ftruncate(fd, 0)
    sys.stdout.write(json.dumps({"written": written}) + "\n")
    sys.stdout.flush()
"""


class Writer:
    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.written = 0

    def do(self, op: str, **args) -> None:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the writer died on {op}"
        self.written = json.loads(answer)["written"]

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class Counter:
    """Polls the log source and keeps every step number it reports, and its truncations."""

    def __init__(self, pattern: str) -> None:
        self.source = LogSource([pattern])
        self.steps: list[int] = []
        self.truncations = 0
        self.messages: list[str] = []

    def poll(self) -> None:
        for update in self.source.poll().payload.files:
            self.steps.extend(s.step for s in update.steps)
            self.truncations += update.truncated
            if update.message:
                self.messages.append(update.message)


def run(mode: str, pattern: str, rounds: int = 40, seed: int = 15) -> dict:
    """Write and rotate ``rounds`` times; what was written and what the source counted."""
    rng = random.Random(seed)
    folder = Path(tempfile.mkdtemp(prefix="rltui-rotation-"))
    writer = Writer(folder / "train.log")
    counter = Counter(str(folder / pattern))
    made = 0
    since = 0  # lines in the current generation
    try:
        for _ in range(rounds):
            n = rng.randint(1, 300)
            writer.do("burst", n=n)
            since += n
            counter.poll()
            n = rng.randint(0, 50)
            writer.do("burst", n=n)  # not read before the rotation
            since += n
            if mode == "rename":
                writer.do("rename")
            elif mode == "create":
                writer.do("create")
                writer.do("burst", n=rng.randint(0, 50))  # still to the old file
                if rng.random() < 0.5:
                    counter.poll()  # the new file is there, the writer has not moved yet
                    writer.do("burst", n=rng.randint(0, 50))
                writer.do("reopen")
            else:
                writer.do("copy")
                if rng.random() < 0.3:
                    counter.poll()  # the copy is there; the original not truncated yet
                writer.do("truncate")
                made += 1
            # Often more than the file held: the truncated file grows past the offset read.
            n = rng.randint(since, since + 100) if rng.random() < 0.6 else rng.randint(1, 50)
            writer.do("burst", n=n)
            since = n
            counter.poll()
        for _ in range(3):  # the ends of files and a rotated file's last lines
            counter.poll()
    finally:
        writer.stop()
        counter.source.close()
    return {"mode": mode, "glob": pattern, "written": writer.written,
            "counted": len(counter.steps), "distinct": len(set(counter.steps)),
            "truncations": made, "noticed": counter.truncations, "steps": counter.steps,
            "messages": counter.messages}


@pytest.mark.parametrize("mode", ["rename", "create", "copytruncate"])
def test_a_glob_over_rotated_names_counts_every_step_once(mode):
    got = run(mode, "train.log*")
    assert sorted(got["steps"]) == list(range(1, got["written"] + 1)), (
        f"{got['written']} written, {got['counted']} counted, {got['distinct']} distinct")
    assert got["noticed"] == got["truncations"]


@pytest.mark.parametrize("mode", ["rename", "create", "copytruncate"])
def test_one_name_counts_no_step_twice_and_notices_every_truncation(mode):
    got = run(mode, "train.log")
    assert got["counted"] == got["distinct"]  # nothing read twice
    assert got["noticed"] == got["truncations"]
    if mode == "copytruncate":
        assert got["truncations"] == 40
        assert sum("truncated" in m for m in got["messages"]) == got["truncations"]
    else:
        # Only the old file's last lines can be missed with one name: the tail leaves a
        # renamed file once it is read to its end and a new one has the name.
        assert got["steps"] == sorted(got["steps"])
    if mode == "rename":
        assert got["counted"] == got["written"]


if __name__ == "__main__":
    for pattern in ("train.log*", "train.log"):
        for mode in ("rename", "create", "copytruncate"):
            got = run(mode, pattern)
            print(f"{pattern:<11} {mode:<13} written {got['written']:>6}  counted "
                  f"{got['counted']:>6}  distinct {got['distinct']:>6}  truncations "
                  f"{got['truncations']:>3}  noticed {got['noticed']:>3}  notices "
                  f"{sum('truncated' in m for m in got['messages']):>3}")
