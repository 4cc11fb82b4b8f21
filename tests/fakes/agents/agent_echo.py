"""Workflows that pass: the reward is 1.0 when the server echoes the prompt back.

``EchoAgent`` returns a float, ``DictAgent`` a dict of rewards. ``KeyInErrorAgent`` fails with
the API key in its message, ``SecretsInErrorAgent`` with every value it was given (kwargs,
constructor arguments, the base URL's password), bare: the check must never show a secret.
"""

import sys
from urllib.parse import unquote, urlsplit

from fakechat import chat, prompt_of, score


class EchoAgent:
    async def run(self, data, **extra_kwargs):
        prompt = prompt_of(data)
        answer = await chat(prompt, **extra_kwargs)
        return score(prompt, answer)


class DictAgent:
    def __init__(self, weight=1.0):
        self.weight = weight

    async def run(self, data, **extra_kwargs):
        prompt = prompt_of(data)
        answer = await chat(prompt, **extra_kwargs)
        return {"correct": score(prompt, answer) * self.weight, "length": len(answer)}


class KeyInErrorAgent:
    async def run(self, data, **extra_kwargs):
        raise PermissionError(f"login refused for key {extra_kwargs.get('api_key')}")


class SecretsInErrorAgent:
    def __init__(self, **init_kwargs):
        self.init_kwargs = init_kwargs

    async def run(self, data, **extra_kwargs):
        values = [str(v) for v in (*extra_kwargs.values(), *self.init_kwargs.values())]
        password = urlsplit(extra_kwargs.get("base_url") or "").password
        if password:
            values.append(unquote(password))
        print("given:", *values, file=sys.stderr)
        raise PermissionError("refused: " + " ".join(values))
