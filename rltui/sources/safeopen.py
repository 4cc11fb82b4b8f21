"""Open a file rltui did not create, to read it as a log or a text, without reading for a user
what that user could not read.

rltui often runs as root, and the paths it reads (log globs, a process's stdout, source files
named in stacks, config files, a folder of saved stacks) live in folders other users write to.
Another user can plant ``ln -s /etc/shadow logs/rank1.log``; reading it would put the target in
an incident report meant for a ticket. So a path is resolved here one component at a time, and:

- every symbolic link met on the way must be owned by a user who could read the final file
  (its mode, owner and group against the link owner's uid and groups from the user database,
  computed from ``stat``; the process never changes its own uid). A link owned by root, or by
  the user rltui runs as, passes: that user could read the file anyway;
- the final file must be a regular file, and not one of ``/proc`` or ``/sys`` (their files look
  regular but are the kernel's): no device, FIFO (opening one could block), socket or folder;
- the file is opened by its resolved path with ``O_NOFOLLOW | O_NONBLOCK``, and the opened
  descriptor is ``fstat``-ed to be the very file checked: a link swapped in between is refused.

A refusal raises ``Refused``, a ``PermissionError`` whose ``strerror`` is a sentence for the
user, so callers that already turn an ``OSError`` into a state show why. ACLs are not read: a
link owner who could read the file only through an ACL is refused (never the other way round).
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat

MAX_LINKS = 40  # as the kernel's own limit on links in one lookup (ELOOP)
KERNEL_TREES = ("/proc", "/sys")

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class Refused(PermissionError):
    """A path rltui will not read; ``strerror`` says why, for the user."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(errno.EACCES, why, path)


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _groups(uid: int) -> set[int]:
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        return set()  # no such user: only the bits for others apply
    found = {user.pw_gid}
    try:
        found.update(os.getgrouplist(user.pw_name, user.pw_gid))
    except OSError:
        found.update(g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem)
    return found


def _may(uid: int, groups: set[int], st: os.stat_result, bit: int) -> bool:
    """Whether ``uid`` may read (bit 4) or search (bit 1) what ``st`` describes."""
    if uid == 0:
        return True
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == uid:
        return bool(mode & (bit << 6))
    if st.st_gid in groups:
        return bool(mode & (bit << 3))
    return bool(mode & bit)


def resolve(path: str) -> tuple[str, list[tuple[str, os.stat_result]]]:
    """The real path and every symbolic link met on the way to it (its path, its lstat)."""
    # Not abspath: it folds "link/.." by the text, where the kernel goes up from the target.
    pending = (path if path.startswith("/") else os.path.join(os.getcwd(), path)).split("/")
    resolved = "/"
    links: list[tuple[str, os.stat_result]] = []
    while pending:
        name = pending.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            resolved = os.path.dirname(resolved)
            continue
        here = os.path.join(resolved, name)
        st = os.lstat(here)
        if not stat.S_ISLNK(st.st_mode):
            resolved = here
            continue
        links.append((here, st))
        if len(links) > MAX_LINKS:
            raise OSError(errno.ELOOP, "too many levels of symbolic links", path)
        target = os.readlink(here)
        if target.startswith("/"):
            resolved = "/"
        pending[:0] = target.split("/")
    return resolved, links


_KERNEL_DEVICES: set[int] | None = None


def _kernel_devices() -> set[int]:
    """The devices of /proc and /sys, so a bind mount of either is known too."""
    global _KERNEL_DEVICES
    if _KERNEL_DEVICES is None:
        found = set()
        for top in KERNEL_TREES:
            try:
                found.add(os.stat(top).st_dev)
            except OSError:
                pass
        _KERNEL_DEVICES = found
    return _KERNEL_DEVICES


def kind(st: os.stat_result) -> str:
    for test, name in _KINDS:
        if test(st.st_mode):
            return name
    return "not a regular file"


def check(path: str) -> tuple[str, os.stat_result]:
    """The real path of a file it is safe to read for ``path``, and its stat; ``Refused``
    otherwise (``FileNotFoundError`` and other ``OSError`` as ``os.stat`` raises them)."""
    real, links = resolve(path)
    st = os.stat(real)
    if (any(real == top or real.startswith(top + "/") for top in KERNEL_TREES)
            or st.st_dev in _kernel_devices()):
        raise Refused(path, f"not followed: {real} is the kernel's (/proc, /sys), not a log")
    if not stat.S_ISREG(st.st_mode):
        raise Refused(path, f"not a regular file ({kind(st)})")
    me = os.geteuid()
    for link, link_st in links:
        owner = link_st.st_uid
        if owner in (0, me):
            continue
        groups = _groups(owner)
        folders = [real]
        while folders[-1] != "/":
            folders.append(os.path.dirname(folders[-1]))
        reach = all(_may(owner, groups, os.stat(d), 1) for d in folders[1:])
        if not (reach and _may(owner, groups, st, 4)):
            who = user_name(owner)
            raise Refused(path, f"not followed: a symlink owned by {who} ({link}) to a file "
                                f"{who} cannot read")
    return real, st


def open_fd(path: str) -> tuple[int, os.stat_result]:
    """An open read-only descriptor of the checked file, and its fstat."""
    real, st = check(path)
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (st.st_dev, st.st_ino):
            raise Refused(path, "not followed: it changed while being opened")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_bytes(path: str | os.PathLike, limit: int = -1) -> bytes:
    """The file's first ``limit`` bytes (all of it when negative), read safely."""
    fd, _ = open_fd(os.fspath(path))
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)
