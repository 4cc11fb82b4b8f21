"""A passing workflow written the usual way, with the openai client (base_url and api_key from
the extra kwargs, as the trainer passes them)."""

from openai import AsyncOpenAI

from fakechat import prompt_of, score


class OpenAIAgent:
    def __init__(self):
        self.client = None

    async def run(self, data, **extra_kwargs):
        if self.client is None:  # one client per process, shared by all runs
            self.client = AsyncOpenAI(base_url=extra_kwargs.get("base_url"),
                                      api_key=extra_kwargs.get("api_key") or "EMPTY",
                                      max_retries=0)
        prompt = prompt_of(data)
        reply = await self.client.chat.completions.create(
            model=extra_kwargs.get("model", "echo"), temperature=extra_kwargs["temperature"],
            messages=[{"role": "user", "content": prompt}])
        return score(prompt, reply.choices[0].message.content)
