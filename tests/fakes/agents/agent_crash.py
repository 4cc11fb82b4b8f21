"""Kills its own process under concurrency: a run whose row has ``"crash": true`` waits until
every other run has finished, then sends itself SIGKILL (as the OOM killer would). Alone (the
single and sequential steps) it returns normally."""

import asyncio
import os
import signal

from fakechat import chat, prompt_of, score


class CrashAgent:
    in_flight = 0
    others = 0

    async def run(self, data, **extra_kwargs):
        crash = bool(data.get("crash"))
        CrashAgent.in_flight += 1
        CrashAgent.others += 0 if crash else 1
        try:
            concurrent = CrashAgent.in_flight > 1
            prompt = prompt_of(data)
            answer = await chat(prompt, **extra_kwargs)
            if crash and concurrent:
                while CrashAgent.others:
                    await asyncio.sleep(0.01)
                for _ in range(20):  # let the check report the finished runs first
                    await asyncio.sleep(0)
                os.kill(os.getpid(), signal.SIGKILL)
            return score(prompt, answer)
        finally:
            CrashAgent.in_flight -= 1
            CrashAgent.others -= 0 if crash else 1
