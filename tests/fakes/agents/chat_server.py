"""A tiny OpenAI-style chat server on 127.0.0.1, standard library asyncio only.

``python chat_server.py [--port 0] [--api-key KEY]`` prints ``listening http://127.0.0.1:PORT/v1``
once it accepts connections. ``POST /v1/chat/completions`` answers ``echo: <last user message>``;
a model name ``NAME@SECONDS`` (``echo@0.5``) delays the answer by SECONDS, which is how tests hold
many requests in flight at once. ``GET /v1/models`` lists ``echo``. With ``--api-key`` every
request needs ``Authorization: Bearer KEY`` (401 otherwise). With ``--log-requests`` it prints
``request METHOD PATH`` as each request arrives (before any delay), for tests that wait on it.
HTTP/1.1 with keep-alive, so real clients (httpx, openai) work too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}


def reply_text(messages: list) -> str:
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    if isinstance(last, list):  # content parts
        last = " ".join(p.get("text", "") for p in last if isinstance(p, dict))
    return f"echo: {last}"


def completion(body: dict) -> dict:
    model = str(body.get("model", "echo"))
    text = reply_text(body.get("messages") or [])
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(text.split()),
                      "total_tokens": 1 + len(text.split())}}


def delay_of(model: str) -> float:
    _, _, tail = model.partition("@")
    try:
        return max(0.0, float(tail)) if tail else 0.0
    except ValueError:
        return 0.0


class Server:
    def __init__(self, api_key: str | None, log_requests: bool = False) -> None:
        self.api_key = api_key
        self.log_requests = log_requests

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:] if line)}
                length = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(length) if length else b""
                if self.log_requests:
                    print(f"request {method} {path}", flush=True)
                status, payload = await self.route(method, path.split("?")[0], headers, raw)
                data = json.dumps(payload).encode()
                keep = headers.get("connection", "").lower() != "close"
                writer.write(f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
                             f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                             f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
                             .encode() + data)
                await writer.drain()
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()

    async def route(self, method: str, path: str, headers: dict, raw: bytes) -> tuple:
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {"error": {"message": "invalid api key", "type": "auth"}}
        if method == "GET" and path.rstrip("/").endswith("/models"):
            return 200, {"object": "list", "data": [{"id": "echo", "object": "model"}]}
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {method} {path}"}}
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return 400, {"error": {"message": "body is not JSON"}}
        if body.get("stream"):
            return 400, {"error": {"message": "streaming is not supported here"}}
        delay = delay_of(str(body.get("model", "")))
        if delay:
            await asyncio.sleep(delay)
        return 200, completion(body)


async def serve(port: int, api_key: str | None, log_requests: bool = False) -> None:
    server = await asyncio.start_server(Server(api_key, log_requests).handle, "127.0.0.1", port,
                                        backlog=1024)
    bound = server.sockets[0].getsockname()[1]
    print(f"listening http://127.0.0.1:{bound}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--api-key")
    p.add_argument("--log-requests", action="store_true")
    args = p.parse_args()
    try:
        asyncio.run(serve(args.port, args.api_key, args.log_requests))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
