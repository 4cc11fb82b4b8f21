"""A tiny pure-Python process group with torch.distributed's names, for the demo job.

Every rank keeps one TCP connection to the store (``rltui.demo.store``), which matches the ranks'
collectives by sequence number and answers each rank once all have contributed. A rank that waits
for its peers is therefore blocked in a socket read inside the collective's own frame, exactly
where ``py-spy dump`` shows a real rank waiting in NCCL or gloo: the innermost Python frame is
``all_reduce`` / ``barrier`` / ``recv_object_list`` / ``destroy_process_group`` itself.

Tensors are lists of floats; objects must be JSON-serialisable. Nothing times out unless
``init_process_group(timeout=...)`` asks for it, like NCCL's 30-minute default is "forever" for
someone watching a hang.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

_HEADER = struct.Struct(">I")  # length of the JSON body that follows


class ReduceOp:
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


class DistStoreError(ConnectionError):
    """The store went away: the launcher is gone, so this rank should end too."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


def read_exact(sock: socket.socket, n: int, head: bytes = b"") -> bytes | None:
    """``n`` bytes (counting ``head``, already read), or None at end of stream."""
    data = bytearray(head)
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket, head: bytes = b"") -> dict[str, Any] | None:
    raw = read_exact(sock, _HEADER.size, head)
    if raw is None:
        return None
    (size,) = _HEADER.unpack(raw)
    body = read_exact(sock, size)
    return None if body is None else json.loads(body)


class ProcessGroup:
    def __init__(self, sock: socket.socket, rank: int, world_size: int):
        self.sock = sock
        self.rank = rank
        self.world_size = world_size
        self.wait_hook: Callable[[bool], None] | None = None

    def post(self, message: dict[str, Any]) -> None:
        """Send a request; the caller then blocks reading the reply in its own frame."""
        if self.wait_hook:
            self.wait_hook(True)
        try:
            self.sock.sendall(encode(message))
        except OSError as exc:
            raise DistStoreError(f"rank {self.rank}: lost the store: {exc}") from None

    def complete(self, head: bytes) -> Any:
        """Finish reading the reply whose first bytes the collective received."""
        reply = read_frame(self.sock, head) if head else None
        if reply is None:
            raise DistStoreError(f"rank {self.rank}: the store closed the connection")
        if self.wait_hook:
            self.wait_hook(False)
        return reply.get("data")


_group: ProcessGroup | None = None


def _default_group() -> ProcessGroup:
    if _group is None:
        raise RuntimeError("Default process group has not been initialized, "
                           "please make sure to call init_process_group.")
    return _group


def init_process_group(backend: str = "gloo", init_method: str = "env://",
                       rank: int | None = None, world_size: int | None = None,
                       timeout: float | None = None) -> None:
    """Connect to the store named by MASTER_ADDR/MASTER_PORT and wait for every rank."""
    global _group
    if init_method != "env://":
        raise ValueError("the demo process group supports init_method='env://' only")
    rank = int(os.environ["RANK"]) if rank is None else rank
    world_size = int(os.environ["WORLD_SIZE"]) if world_size is None else world_size
    address = (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]))
    deadline = time.monotonic() + 30.0
    while True:  # the store is normally up before any rank starts; retry briefly anyway
        try:
            sock = socket.create_connection(address, timeout=5.0)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    sock.settimeout(timeout)  # None: block forever, like a collective under NCCL's default
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _group = ProcessGroup(sock, rank, world_size)
    _group.sock.sendall(encode({"op": "hello", "rank": rank, "world_size": world_size,
                                "backend": backend}))
    barrier()  # rendezvous: nobody trains before everybody is connected


def is_initialized() -> bool:
    return _group is not None


def get_rank() -> int:
    return _default_group().rank


def get_world_size() -> int:
    return _default_group().world_size


def set_wait_hook(hook: Callable[[bool], None] | None) -> None:
    """``hook(True)`` before a rank blocks on its peers, ``hook(False)`` once answered."""
    _default_group().wait_hook = hook


# Each collective reads the reply header itself (MSG_WAITALL) so that a rank waiting on its peers
# sits in this frame, not in a helper: the innermost frame of a stack dump names the collective.

def all_reduce(tensor: list[float], op: str = ReduceOp.SUM, group: Any = None) -> None:
    pg = _default_group()
    pg.post({"op": "all_reduce", "reduce": op, "data": list(tensor)})
    head = pg.sock.recv(_HEADER.size, socket.MSG_WAITALL)
    tensor[:] = pg.complete(head)


def all_gather(tensor_list: list[Any], tensor: list[float], group: Any = None) -> None:
    pg = _default_group()
    pg.post({"op": "all_gather", "data": list(tensor)})
    head = pg.sock.recv(_HEADER.size, socket.MSG_WAITALL)
    tensor_list[:] = pg.complete(head)


def broadcast(tensor: list[float], src: int, group: Any = None) -> None:
    pg = _default_group()
    pg.post({"op": "broadcast", "src": src, "data": list(tensor)})
    head = pg.sock.recv(_HEADER.size, socket.MSG_WAITALL)
    tensor[:] = pg.complete(head)


def barrier(group: Any = None) -> None:
    pg = _default_group()
    pg.post({"op": "barrier"})
    head = pg.sock.recv(_HEADER.size, socket.MSG_WAITALL)
    pg.complete(head)


def send_object_list(object_list: list[Any], dst: int, group: Any = None) -> None:
    """Buffered by the store, so it returns at once (like an isend that was waited on)."""
    pg = _default_group()
    pg.post({"op": "send", "dst": dst, "data": list(object_list)})
    head = pg.sock.recv(_HEADER.size, socket.MSG_WAITALL)
    pg.complete(head)


def recv_object_list(object_list: list[Any], src: int, group: Any = None) -> int:
    pg = _default_group()
    pg.post({"op": "recv", "src": src})
    head = pg.sock.recv(_HEADER.size, socket.MSG_WAITALL)
    object_list[:] = pg.complete(head)
    return src


def destroy_process_group(group: Any = None) -> None:
    """Tear the group down; like a communicator abort, it needs every rank to take part."""
    global _group
    pg = _default_group()
    pg.post({"op": "destroy"})
    head = pg.sock.recv(_HEADER.size, socket.MSG_WAITALL)
    pg.complete(head)
    pg.sock.close()
    _group = None
