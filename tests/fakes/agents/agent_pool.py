"""Fails above some concurrency: a client with a fixed pool of connection slots that raises
instead of waiting when all are taken (as a pool without a wait timeout does)."""

from fakechat import chat, prompt_of, score


class PoolExhausted(ConnectionError):
    pass


class PoolAgent:
    slots = 4  # the client's max_connections
    in_use = 0

    async def run(self, data, **extra_kwargs):
        if PoolAgent.in_use >= PoolAgent.slots:
            raise PoolExhausted(f"connection pool exhausted ({PoolAgent.slots} in use)")
        PoolAgent.in_use += 1
        try:
            prompt = prompt_of(data)
            answer = await chat(prompt, **extra_kwargs)
        finally:
            PoolAgent.in_use -= 1
        return score(prompt, answer)
