"""safeopen's path walk and permission arithmetic, on real files (no second user needed)."""

from __future__ import annotations

import os
import stat

import pytest

from rltui.sources import safeopen


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f.log").write_text("hello\n")
    os.symlink("b", tmp_path / "a" / "to_b")  # relative, to a folder
    os.symlink("../a/to_b/f.log", tmp_path / "a" / "chain")  # relative, through another link
    os.symlink(tmp_path / "a" / "chain", tmp_path / "abs")  # absolute, to a link
    os.symlink("loop2", tmp_path / "loop1")
    os.symlink("loop1", tmp_path / "loop2")
    return tmp_path


@pytest.mark.parametrize("name, links", [
    ("a/b/f.log", 0), ("a/to_b/f.log", 1), ("a/chain", 2), ("abs", 3),
    ("a/to_b/../b/./f.log", 1)])
def test_the_walk_ends_where_the_kernel_does_and_names_every_link(tree, name, links):
    real, found = safeopen.resolve(str(tree / name))
    assert real == os.path.realpath(tree / name)
    assert len(found) == links
    assert all(stat.S_ISLNK(st.st_mode) for _, st in found)


def test_a_link_loop_is_an_error_not_a_hang(tree):
    with pytest.raises(OSError):
        safeopen.resolve(str(tree / "loop1"))


def test_a_fifo_a_device_a_folder_and_proc_are_refused(tree):
    os.mkfifo(tree / "fifo")
    for path, why in ((tree / "fifo", "FIFO"), ("/dev/null", "character device"),
                      (tree / "a", "folder"), ("/proc/self/status", "kernel")):
        with pytest.raises(safeopen.Refused, match=why):
            safeopen.read_bytes(path)


def test_a_file_is_read_through_links_of_the_user_running(tree):
    assert safeopen.read_bytes(tree / "abs") == b"hello\n"
    assert safeopen.read_bytes(tree / "abs", 2) == b"he"


def _st(mode: int, uid: int, gid: int) -> os.stat_result:
    return os.stat_result((mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))


@pytest.mark.parametrize("mode, uid, gid, groups, may", [
    (0o600, 1000, 1000, {1000}, True),  # owner
    (0o600, 2000, 1000, {1000}, False),  # group bits empty
    (0o640, 2000, 1000, {1000}, True),  # group
    (0o604, 2000, 1000, {1000}, False),  # in the group: the group bits decide, not others'
    (0o604, 2000, 3000, {1000}, True),  # others
    (0o000, 2000, 3000, {1000}, False),
])
def test_read_permission_follows_owner_then_group_then_others(mode, uid, gid, groups, may):
    assert safeopen._may(1000, groups, _st(stat.S_IFREG | mode, uid, gid), 4) is may


def test_root_may_read_anything():
    assert safeopen._may(0, set(), _st(stat.S_IFREG, 1, 1), 4)


@pytest.mark.parametrize("swap", ["file", "link"])
def test_a_file_swapped_between_the_check_and_the_open_is_refused(tree, monkeypatch, swap):
    checked = safeopen.check

    def racing(path):  # another user's swap lands just after the check
        real, st = checked(path)
        other = tree / "swap"
        if swap == "file":
            other.write_text("someone else's\n")
        else:
            os.symlink("/etc/hostname", other)
        os.replace(other, real)
        return real, st

    monkeypatch.setattr(safeopen, "check", racing)
    with pytest.raises(OSError) as caught:  # ELOOP from O_NOFOLLOW, or the inode differs
        safeopen.read_bytes(tree / "a" / "b" / "f.log")
    assert swap == "link" or "changed while being opened" in str(caught.value)
