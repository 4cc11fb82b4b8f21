"""Is a side's answer comparable at all? Pure.

A comparison with different inputs or different sampling means nothing, so a sample is refused
(listed, not compared) when a side's own report shows either: a prompt token count other than
the reference tokenizer's, a chosen token that was not the side's most likely one, or more (or,
stopping for length, fewer) tokens than ``max_new_tokens``.
"""

from __future__ import annotations

from rltui.checks.rollout.compare import Generation


def refusal(side: str, gen: Generation, *, prompt_len: int, max_new_tokens: int,
            greedy_violation: str | None = None) -> str | None:
    """Why ``side``'s generation cannot be compared, or None."""
    if gen.prompt_tokens is not None and gen.prompt_tokens != prompt_len:
        return (f"the {side} counted {gen.prompt_tokens} prompt tokens where the reference "
                f"tokenizer built {prompt_len}: the inputs differ")
    if greedy_violation:
        return f"the {side}: {greedy_violation}"
    if gen.tokens_from_text:
        return None  # a re-tokenised length says nothing about the server's own count
    n = len(gen.token_ids)
    if n > max_new_tokens:
        return (f"the {side} generated {n} tokens, more than max_new_tokens {max_new_tokens}: "
                "it did not honour the limit")
    if gen.finish_reason == "length" and n < max_new_tokens:
        return (f"the {side} stopped for length after {n} of {max_new_tokens} tokens: it did "
                "not honour the limit")
    return None
