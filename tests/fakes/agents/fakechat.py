"""The chat client the sample agents share: the openai SDK, as a workflow usually calls its
model. One ``AsyncOpenAI`` per base URL and key in the process, shared by every run, without
retries (a failure shows as it happened). A server that is down or hangs up raises
``openai.APIConnectionError`` (its cause: the HTTP client's error), an HTTP error status one of
``openai.APIStatusError``'s kinds (``AuthenticationError`` for 401, ...).

``endpoint`` and ``chat_body`` are for a workflow that sends its own request (agent_sync_http).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from openai import AsyncOpenAI

# imported with the module (the check's load step), not on a run's first call: the resource
# modules are a large part of the SDK's import time
from openai.resources.chat import completions as _chat_completions  # noqa: F401

_clients: dict[tuple[str, str], AsyncOpenAI] = {}


def base_url(kwargs: dict) -> str:
    url = kwargs.get("base_url") or os.environ.get("OPENAI_BASE_URL")
    if not url:
        raise ValueError("no base_url and no OPENAI_BASE_URL")
    return url


def endpoint(kwargs: dict) -> tuple[str, int, str]:
    parts = urlsplit(base_url(kwargs))
    return parts.hostname, parts.port or 80, parts.path.rstrip("/")


def client(kwargs: dict) -> AsyncOpenAI:
    url = base_url(kwargs)
    key = kwargs.get("api_key") or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    if (url, key) not in _clients:
        _clients[url, key] = AsyncOpenAI(base_url=url, api_key=key, max_retries=0)
    return _clients[url, key]


def chat_body(prompt: str, kwargs: dict) -> dict:
    return {"model": kwargs.get("model", "echo"), "temperature": kwargs.get("temperature", 1.0),
            "messages": [{"role": "user", "content": prompt}]}


async def chat(prompt: str, **kwargs) -> str:
    """The assistant's answer to ``prompt`` (kwargs: base_url, api_key, model, temperature)."""
    reply = await client(kwargs).chat.completions.create(**chat_body(prompt, kwargs))
    return reply.choices[0].message.content


def prompt_of(data: dict) -> str:
    if "prompt" in data:
        return str(data["prompt"])
    return str(data["messages"][-1]["content"])


def score(prompt: str, answer: str) -> float:
    """1.0 when the server echoed this prompt back (the fake server always does)."""
    return 1.0 if answer == f"echo: {prompt}" else 0.0
