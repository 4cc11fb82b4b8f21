"""Blocks the event loop without deadlocking: a synchronous HTTP call (urllib) inside
``async def run``. Every run finishes, but while one waits for its reply no other run moves."""

import json
import urllib.request

from fakechat import chat_body, endpoint, prompt_of, score


class SyncHttpAgent:
    async def run(self, data, **extra_kwargs):
        prompt = prompt_of(data)
        host, port, path = endpoint(extra_kwargs)
        request = urllib.request.Request(
            f"http://{host}:{port}{path}/chat/completions",
            data=json.dumps(chat_body(prompt, extra_kwargs)).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:  # the bug: sync I/O
            answer = json.load(reply)["choices"][0]["message"]["content"]
        return score(prompt, answer)
