"""The small async OpenAI-style chat client the sample agents share (standard library only).

One connection per request, like a client without a pool. Raises ``ConnectionError`` when the
server is down or hangs up, ``RuntimeError`` on an HTTP error status.
"""

from __future__ import annotations

import asyncio
import json
import os
from urllib.parse import urlsplit


def endpoint(kwargs: dict) -> tuple[str, int, str]:
    url = kwargs.get("base_url") or os.environ.get("OPENAI_BASE_URL")
    if not url:
        raise ValueError("no base_url and no OPENAI_BASE_URL")
    parts = urlsplit(url)
    return parts.hostname, parts.port or 80, parts.path.rstrip("/")


def request_bytes(host: str, path: str, api_key: str | None, body: dict) -> bytes:
    data = json.dumps(body).encode()
    auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n{auth}Connection: close\r\n\r\n").encode() + data


def parse_response(raw: bytes) -> str:
    head, _, body = raw.partition(b"\r\n\r\n")
    if not head:
        raise ConnectionError("the server closed the connection without answering")
    status = int(head.split(b" ", 2)[1])
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
    return json.loads(body)["choices"][0]["message"]["content"]


def chat_body(prompt: str, kwargs: dict) -> dict:
    return {"model": kwargs.get("model", "echo"), "temperature": kwargs.get("temperature", 1.0),
            "messages": [{"role": "user", "content": prompt}]}


async def chat(prompt: str, **kwargs) -> str:
    """The assistant's answer to ``prompt`` (kwargs: base_url, api_key, model, temperature)."""
    host, port, path = endpoint(kwargs)
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(request_bytes(host, path + "/chat/completions", kwargs.get("api_key"),
                                   chat_body(prompt, kwargs)))
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    return parse_response(raw)


def prompt_of(data: dict) -> str:
    if "prompt" in data:
        return str(data["prompt"])
    return str(data["messages"][-1]["content"])


def score(prompt: str, answer: str) -> float:
    """1.0 when the server echoed this prompt back (the fake server always does)."""
    return 1.0 if answer == f"echo: {prompt}" else 0.0
