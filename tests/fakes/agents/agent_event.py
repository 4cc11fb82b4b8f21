"""Deadlocks only when more than one run is in flight, without blocking the loop: the first run
"warms a shared cache" under an ``asyncio.Lock``; later runs that find the lock taken wait for
an ``asyncio.Event`` that the first run forgets to set. Alone, a run never waits."""

import asyncio

from fakechat import chat, prompt_of, score


class SharedCacheAgent:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.ready = asyncio.Event()

    async def run(self, data, **extra_kwargs):
        prompt = prompt_of(data)
        if self.lock.locked():
            await self.ready.wait()  # the bug: nobody ever sets it
        async with self.lock:
            answer = await chat(prompt, **extra_kwargs)
        return score(prompt, answer)
