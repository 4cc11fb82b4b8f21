"""The demo's rendezvous store and collective "network", served from a thread of the launcher.

Collectives are matched like NCCL matches them: a rank's k-th collective meets every other rank's
k-th collective. Once all ranks have arrived, the result goes back to each of them, unless

- the ranks disagree on what the k-th collective is (operation or size): a real communicator
  hangs then (or corrupts data), so the store never answers (pattern B);
- it is the all_reduce the network is told to lose (``stall_at_all_reduce``, pattern C);
- a rank never arrives because it died or waits elsewhere: nobody is answered (pattern A).

Point-to-point sends are buffered; a receive waits until its sender's message exists. When the
launcher goes away its sockets close, every blocked rank reads end-of-stream and exits.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from dataclasses import dataclass, field
from typing import Any

from rltui.demo.dist import encode, read_frame

_REDUCE = {"sum": sum, "max": max, "min": min, "avg": lambda xs: sum(xs) / len(xs)}


@dataclass
class _Pending:
    op: str
    arrivals: dict[int, tuple[dict[str, Any], socket.socket]] = field(default_factory=dict)


class StoreServer:
    def __init__(self, world_size: int, host: str = "127.0.0.1", port: int = 0,
                 stall_at_all_reduce: int | None = None):
        self.world_size = world_size
        self.stall_at_all_reduce = stall_at_all_reduce
        self._lock = threading.Lock()
        self._next_seq: dict[int, int] = {}
        self._pending: dict[int, _Pending] = {}
        self._all_reduces = 0
        self._mailbox: dict[tuple[int, int], list[Any]] = {}
        self._receivers: dict[tuple[int, int], socket.socket] = {}
        self._conns: set[socket.socket] = set()
        self.hung: list[str] = []  # why collectives were left unanswered, for debugging
        store = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                store._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self._server.server_address[:2]

    @property
    def port(self) -> int:
        return self.address[1]

    def start(self) -> StoreServer:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.2,),
                                        name="rltui-demo-store", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop every connection, so a rank still blocked reads end-of-stream."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=2.0)
            self._thread = None
        self._server.server_close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    # --- one thread per rank connection -------------------------------------------------------

    def _serve(self, conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._conns.add(conn)
        rank = -1
        try:
            while True:
                message = read_frame(conn)
                if message is None:
                    return  # the rank exited; whoever waits for it keeps waiting, as in NCCL
                if message["op"] == "hello":
                    rank = int(message["rank"])
                    continue
                with self._lock:
                    self._handle(rank, message, conn)
        except (OSError, ValueError):
            return
        finally:
            with self._lock:
                self._conns.discard(conn)

    def _handle(self, rank: int, message: dict[str, Any], conn: socket.socket) -> None:
        op = message["op"]
        if op == "send":
            self._mailbox.setdefault((rank, int(message["dst"])), []).append(message["data"])
            self._reply(conn, None)
            self._deliver(rank, int(message["dst"]))
        elif op == "recv":
            self._receivers[(int(message["src"]), rank)] = conn
            self._deliver(int(message["src"]), rank)
        else:
            seq = self._next_seq.get(rank, 0)
            self._next_seq[rank] = seq + 1
            pending = self._pending.setdefault(seq, _Pending(op))
            pending.arrivals[rank] = (message, conn)
            if len(pending.arrivals) == self.world_size:
                del self._pending[seq]
                self._finish(seq, pending)

    def _deliver(self, src: int, dst: int) -> None:
        queue = self._mailbox.get((src, dst))
        conn = self._receivers.get((src, dst))
        if queue and conn is not None:
            del self._receivers[(src, dst)]
            self._reply(conn, queue.pop(0))

    def _finish(self, seq: int, pending: _Pending) -> None:
        messages = {r: m for r, (m, _) in pending.arrivals.items()}
        shapes = {(m["op"], m.get("reduce"), m.get("src"), len(m.get("data") or ()))
                  for m in messages.values()}
        if len(shapes) > 1:
            self.hung.append(f"collective #{seq}: ranks disagree: {sorted(map(str, shapes))}")
            return
        op = pending.op
        if op == "all_reduce":
            self._all_reduces += 1
            if self._all_reduces == self.stall_at_all_reduce:
                self.hung.append(f"collective #{seq}: all_reduce #{self._all_reduces} "
                                 "lost by the simulated network")
                return
            reduce = _REDUCE[messages[0].get("reduce", "sum")]
            columns = zip(*(messages[r]["data"] for r in sorted(messages)))
            result: Any = [reduce(list(col)) for col in columns]
        elif op == "all_gather":
            result = [messages[r]["data"] for r in sorted(messages)]
        elif op == "broadcast":
            result = messages[int(messages[0]["src"])]["data"]
        else:  # barrier, destroy
            result = None
        for _, conn in pending.arrivals.values():
            self._reply(conn, result)

    @staticmethod
    def _reply(conn: socket.socket, data: Any) -> None:
        try:
            conn.sendall(encode({"data": data}))
        except OSError:
            pass  # that rank is gone; the others still get their answer
