"""Returns an invalid reward chosen by the row's ``kind``: ``string``, ``nan``, ``inf``,
``bool``, ``none``, ``dict_bad`` (a dict with a non-number), ``list``; anything else a float."""

from fakechat import chat, prompt_of, score

BAD = {"string": "1.0", "nan": float("nan"), "inf": float("inf"), "bool": True, "none": None,
       "dict_bad": {"correct": 1.0, "format": "yes"}, "list": [1.0]}


class BadRewardAgent:
    async def run(self, data, **extra_kwargs):
        prompt = prompt_of(data)
        answer = await chat(prompt, **extra_kwargs)
        kind = data.get("kind", "ok")
        return BAD[kind] if kind in BAD else score(prompt, answer)
