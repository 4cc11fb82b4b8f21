"""Read a server's answer into a Generation. Pure: JSON in, values out.

Formats (as the servers document them):

- OpenAI ``/v1/completions``: ``choices[0].text``, ``finish_reason``, ``logprobs`` with parallel
  lists ``tokens``, ``token_logprobs``, ``top_logprobs`` (a dict per position). vLLM with
  ``return_tokens_as_token_ids`` writes each token as ``token_id:N``; with ``return_token_ids``
  it adds the output ids as ``choices[0].token_ids`` (both endpoints).
- OpenAI ``/v1/chat/completions``: ``choices[0].message.content`` and ``logprobs.content``, a list
  of ``{token, logprob, top_logprobs: [{token, logprob}]}``.
- SGLang ``/generate``: ``text``, ``output_ids``, ``meta_info`` with ``prompt_tokens``,
  ``completion_tokens``, ``finish_reason`` (``{"type": "stop" | "length" | "abort", ...}``),
  ``output_token_logprobs`` (``[logprob, token_id, text]`` per token) and, with
  ``top_logprobs_num``, ``output_top_logprobs`` (a list of such triples per position).

Every reader returns ``(Generation, greedy_violation)``; the violation names the first position
where the chosen token was not the server's own most likely one (the server did not decode
greedily), when the server gave its top log-probs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rltui.checks.rollout.compare import Generation
from rltui.model import replace

# How far below the best alternative a chosen token's log-prob may be and still count as the
# argmax (rounding in the server's own log-softmax).
GREEDY_TOLERANCE = 1e-3

Retokenise = Callable[[str], list[int]]


class BadResponse(Exception):
    """The answer does not have the documented shape."""


def _finite(value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return -math.inf
    return x if not math.isnan(x) else -math.inf


def _token_id(token: Any) -> int | None:
    if isinstance(token, str) and token.startswith("token_id:"):
        try:
            return int(token[len("token_id:"):])
        except ValueError:
            return None
    return None


def _violation(chosen: list[float], best: list[float | None]) -> str | None:
    for i, (lp, top) in enumerate(zip(chosen, best)):
        if top is not None and math.isfinite(lp) and lp < top - GREEDY_TOLERANCE:
            return (f"token {i} was not the server's most likely token (log-prob {lp:.4f}, best "
                    f"{top:.4f}): the server did not decode greedily")
    return None


def _from_text(text: str, retokenise: Retokenise, **kw: Any) -> Generation:
    return Generation(token_ids=tuple(retokenise(text)), text=text, tokens_from_text=True, **kw)


def _usage_prompt_tokens(data: dict) -> int | None:
    usage = data.get("usage")
    value = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) else None


def _choice(data: Any) -> dict:
    if not isinstance(data, dict):
        raise BadResponse(f"expected a JSON object, got {type(data).__name__}")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BadResponse("no choices in the answer")
    return choices[0]


def _assemble(text: str, tokens: list, lps: list[float], best: list[float | None],
              retokenise: Retokenise, **kw: Any) -> tuple[Generation, str | None]:
    ids = [_token_id(t) for t in tokens]
    violation = _violation(lps, best)
    if tokens and all(i is not None for i in ids):
        return Generation(token_ids=tuple(ids), text=text, logprobs=tuple(lps), **kw), violation
    # Token strings that are not ids cannot be mapped back reliably (they are decoded pieces),
    # so the text is re-tokenised and the log-probs kept for reference only.
    gen = _from_text(text, retokenise, logprobs=tuple(lps) if lps else None, **kw)
    return gen, violation


def _with_token_ids(read):
    """vLLM's ``return_token_ids`` puts the output ids in ``choices[0].token_ids``: when
    present they win over anything read from the log-probs or the text."""
    def reader(data: Any, retokenise: Retokenise) -> tuple[Generation, str | None]:
        gen, violation = read(data, retokenise)
        ids = _choice(data).get("token_ids")
        if not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
            return gen, violation
        ids = tuple(ids)
        if ids == gen.token_ids and not gen.tokens_from_text:
            return gen, violation
        aligned = gen.logprobs is not None and len(gen.logprobs) == len(ids) and (
            gen.tokens_from_text or gen.token_ids == ids)
        return replace(gen, token_ids=ids, tokens_from_text=False,
                       logprobs=gen.logprobs if aligned else None), violation
    reader.__name__ = read.__name__
    reader.__doc__ = read.__doc__
    return reader


@_with_token_ids
def read_completion(data: Any, retokenise: Retokenise) -> tuple[Generation, str | None]:
    choice = _choice(data)
    text = choice.get("text")
    if not isinstance(text, str):
        raise BadResponse("choices[0].text is missing")
    kw = {"finish_reason": choice.get("finish_reason"),
          "prompt_tokens": _usage_prompt_tokens(data)}
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not isinstance(lp.get("tokens"), list):
        return _from_text(text, retokenise, **kw), None
    tokens = lp["tokens"]
    lps = [_finite(x) for x in (lp.get("token_logprobs") or [])]
    if len(lps) != len(tokens):
        return _from_text(text, retokenise, **kw), None
    best: list[float | None] = []
    for top in lp.get("top_logprobs") or [None] * len(tokens):
        values = [_finite(v) for v in top.values()] if isinstance(top, dict) and top else []
        best.append(max(values) if values else None)
    return _assemble(text, tokens, lps, best, retokenise, **kw)


@_with_token_ids
def read_chat(data: Any, retokenise: Retokenise) -> tuple[Generation, str | None]:
    choice = _choice(data)
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    if not isinstance(text, str):
        raise BadResponse("choices[0].message.content is missing")
    kw = {"finish_reason": choice.get("finish_reason"),
          "prompt_tokens": _usage_prompt_tokens(data)}
    lp = choice.get("logprobs")
    content = lp.get("content") if isinstance(lp, dict) else None
    if not isinstance(content, list) or not all(isinstance(c, dict) for c in content):
        return _from_text(text, retokenise, **kw), None
    tokens = [c.get("token") for c in content]
    lps = [_finite(c.get("logprob")) for c in content]
    best: list[float | None] = []
    for c in content:
        top = c.get("top_logprobs")
        values = [_finite(t.get("logprob")) for t in top if isinstance(t, dict)] \
            if isinstance(top, list) else []
        best.append(max(values) if values else None)
    return _assemble(text, tokens, lps, best, retokenise, **kw)


def _sglang_finish(meta: dict) -> str | None:
    reason = meta.get("finish_reason")
    if isinstance(reason, dict):
        reason = reason.get("type")
    return reason if isinstance(reason, str) else None


def read_generate(data: Any, retokenise: Retokenise) -> tuple[Generation, str | None]:
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise BadResponse("no 'text' in the /generate answer")
    text = data["text"]
    meta = data.get("meta_info") if isinstance(data.get("meta_info"), dict) else {}
    if meta.get("finish_reason") and _sglang_finish(meta) == "abort":
        raise BadResponse(f"the server aborted the request: {meta.get('finish_reason')}")
    prompt_tokens = meta.get("prompt_tokens")
    kw = {"finish_reason": _sglang_finish(meta),
          "prompt_tokens": prompt_tokens if isinstance(prompt_tokens, int) else None}
    triples = meta.get("output_token_logprobs")
    lps: list[float] | None = None
    ids: list[int] | None = None
    if isinstance(triples, list) and triples and all(
            isinstance(t, (list, tuple)) and len(t) >= 2 for t in triples):
        lps = [_finite(t[0]) for t in triples]
        ids = [t[1] if isinstance(t[1], int) else -1 for t in triples]
    output_ids = data.get("output_ids")
    if isinstance(output_ids, list) and all(isinstance(i, int) for i in output_ids):
        if ids is not None and ids != output_ids:
            lps = None  # not aligned with the ids: keep the ids, drop the scores
        ids = output_ids
    if ids is None or any(i < 0 for i in ids):
        return _from_text(text, retokenise, **kw), None
    best: list[float | None] = []
    for top in meta.get("output_top_logprobs") or []:
        values = [_finite(t[0]) for t in top if isinstance(t, (list, tuple)) and t] \
            if isinstance(top, list) else []
        best.append(max(values) if values else None)
    violation = _violation(lps or [], best)
    return Generation(token_ids=tuple(ids), text=text,
                      logprobs=tuple(lps) if lps is not None and len(lps) == len(ids) else None,
                      **kw), violation


READERS = {"completions": read_completion, "chat": read_chat, "generate": read_generate}
