"""Reading for a user what that user could not read: links another user plants in a log folder.

rltui runs as root here; a second, real user (``nobody``, through ``runuser``) plants symbolic
links in a folder everyone may write to, as a user of a shared training node could: to a file
only root may read, to a device, into /proc, to a file behind a folder it may not enter, and a
FIFO. None of them is read, each says why, and the link to a file that user may read is still
followed. Every reader of files rltui did not create is tried: the log source (and the agent's
``tail``), source lines, a job config, a folder of saved stacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from rltui.agent.lastlines import last_lines
from rltui.model import DENIED, ERROR, OK
from rltui.sources import safeopen
from rltui.sources.dumpfolder import _read_files
from rltui.sources.jobconfig import read_config_file
from rltui.sources.logs import LogSource
from rltui.sources.sourcelines import read_source

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"),
                       reason="needs root and runuser to act as a second user"),
]

SECRET = "TOPSECRET-not-for-a-ticket"


def as_nobody(*argv: str) -> None:
    subprocess.run(["runuser", "-u", "nobody", "--", *argv], check=True, timeout=60)


@pytest.fixture
def planted():
    shared = Path(tempfile.mkdtemp(prefix="rltui-planted-"))  # reachable by everyone
    try:
        shared.chmod(0o755)
        secret = shared / "root-only.txt"
        secret.write_text(f"{SECRET}\n")
        secret.chmod(0o600)
        public = shared / "public.log"
        public.write_text("step:1 - loss:1.0\nstep:2 - loss:0.9\n")
        public.chmod(0o644)
        private = shared / "private"  # a folder nobody may not enter, a readable file in it
        private.mkdir(mode=0o700)
        (private / "inner.log").write_text(f"{SECRET}\n")
        (private / "inner.log").chmod(0o644)
        logs = shared / "logs"
        logs.mkdir()
        logs.chmod(0o777)
        as_nobody("ln", "-s", str(secret), str(logs / "rank1.log"))
        as_nobody("ln", "-s", "/dev/zero", str(logs / "rank2.log"))
        as_nobody("ln", "-s", "/proc/self/status", str(logs / "rank3.log"))
        as_nobody("ln", "-s", str(public), str(logs / "rank4.log"))
        as_nobody("mkfifo", str(logs / "rank5.log"))
        as_nobody("ln", "-s", str(private / "inner.log"), str(logs / "rank6.log"))
        os.symlink(secret, logs / "rank7.log")  # root's own link: root may read it anyway
        yield logs
    finally:
        shutil.rmtree(shared)


def test_the_log_source_follows_only_links_their_owner_could_read(planted):
    source = LogSource([str(planted / "*.log")])
    try:
        poll = source.poll()  # a FIFO among the files must not block this
        # A refused link is listed under its own name, a followed one under its file's.
        by_name = {os.path.basename(u.path): u for u in poll.payload.files}
        by_rank = {k: by_name[name] for k, name in (
            (1, "rank1.log"), (2, "rank2.log"), (3, "rank3.log"), (4, "public.log"),
            (5, "rank5.log"), (6, "rank6.log"), (7, "root-only.txt"))}
        text = "\n".join(line.text for u in poll.payload.files for line in u.lines)
        paths = source.paths()
    finally:
        source.close()
    nobody_cannot = "not followed: a symlink owned by nobody"
    assert by_rank[1].status == DENIED and nobody_cannot in by_rank[1].message
    assert "nobody cannot read" in by_rank[1].message and not by_rank[1].lines
    assert by_rank[2].status == ERROR and "character device" in by_rank[2].message
    assert by_rank[3].status == ERROR and "/proc" in by_rank[3].message
    assert by_rank[4].status == OK and [s.step for s in by_rank[4].steps] == [1, 2]
    assert by_rank[5].status == ERROR and "FIFO" in by_rank[5].message
    assert by_rank[6].status == DENIED and nobody_cannot in by_rank[6].message
    assert by_rank[7].status == OK  # root's own link
    # rank 7 is the secret read through root's link; nothing came through nobody's
    assert text.count(SECRET) == 1 and by_rank[7].lines[0].text == SECRET
    # the agent's tail is offered the followed files only
    real = {os.path.realpath(planted / f"rank{k}.log") for k in (4, 7)}
    assert set(paths) == real
    assert len(by_name) == 7


@pytest.mark.parametrize("name, why", [
    ("rank1.log", "a symlink owned by nobody"), ("rank2.log", "character device"),
    ("rank3.log", "/proc"), ("rank5.log", "FIFO"), ("rank6.log", "a symlink owned by nobody")])
def test_every_other_reader_refuses_the_same_files(planted, name, why):
    path = planted / name
    with pytest.raises(safeopen.Refused, match=why):
        safeopen.read_bytes(path)
    with pytest.raises(OSError, match=why):
        last_lines(str(path), 10, 1 << 16)
    assert read_source(str(path), 1, roots=[]) is None
    values, problem = read_config_file(path)
    assert values is None and why in problem


def test_a_folder_of_saved_stacks_says_which_files_it_refused(planted):
    files, problems = _read_files(planted)
    assert sorted(name for name, _ in files) == ["rank4.log", "rank7.log"]
    assert all(SECRET not in text for name, text in files if name != "rank7.log")
    refused = sorted(p.split(":")[0] for p in problems)
    assert refused == ["rank1.log", "rank2.log", "rank3.log", "rank5.log", "rank6.log"]


def test_a_link_its_owner_may_read_is_followed_by_every_reader(planted):
    path = planted / "rank4.log"
    assert safeopen.read_bytes(path).startswith(b"step:1")
    assert last_lines(str(path), 1, 1 << 16)[0] == ["step:2 - loss:0.9"]
