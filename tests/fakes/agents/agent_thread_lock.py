"""Deadlocks under concurrency by blocking the event loop: a ``threading.Lock`` held across an
``await``. One run at a time is fine; the second concurrent run calls ``acquire`` in the loop
thread while the first waits for its reply, and nothing can ever run again."""

import threading

from fakechat import chat, prompt_of, score

_LOCK = threading.Lock()


class ThreadLockAgent:
    async def run(self, data, **extra_kwargs):
        prompt = prompt_of(data)
        with _LOCK:  # the bug: a thread lock in async code
            answer = await chat(prompt, **extra_kwargs)
        return score(prompt, answer)
