"""Token-level comparison of two greedy generations of the same input. Pure.

Both sides are trimmed of a final end-of-sequence token first: some servers list the EOS they
stopped on among the output tokens and some do not, and a side that only returns text never
shows it. The finish reason keeps the information (``stop`` or ``length``).

Log-probs are compared on the shared prefix: the tokens before the first divergence, where both
sides scored the same token after the same context. verl's rollout-vs-actor metric
(``training/rollout_probs_diff_mean``, volcengine/verl ``verl/utils/debug/metrics.py``) is the
mean of ``|exp(logp_rollout) - exp(logp_actor)|`` over response tokens, and its FAQ calls a mean
below 0.005 normal and above 0.01 an inference precision problem; the verdict here uses the
same quantity. The mean and max of ``|delta log p|`` are reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

NORMAL_BELOW = 0.005
PROBLEM_ABOVE = 0.01

USUAL_CAUSES = (
    "bf16/fp16 on one side and fp32 on the other (compare with --reference-dtype matching "
    "the server's dtype)",
    "different attention kernels or CUDA graphs in the engine (flash/paged attention, fused "
    "ops, chunked prefill)",
    "a tokenizer or chat-template mismatch between the two sides (look at refused samples and "
    "divergences at index 0)",
    "sampling parameters the server did not honour (a repetition penalty or top-k from the "
    "model's generation_config, a temperature floor)",
    "a different model revision, weights or quantisation on the server",
)


@dataclass(frozen=True)
class Generation:
    """What one side produced for one sample."""
    token_ids: tuple[int, ...]
    text: str
    logprobs: tuple[float, ...] | None = None     # one per token id, when the side gives them
    finish_reason: str | None = None              # stop | length | None (unknown)
    prompt_tokens: int | None = None              # as the side reported it, when it does
    tokens_from_text: bool = False                # ids re-tokenised from the side's text
    latency_s: float | None = None


@dataclass(frozen=True)
class TokenRef:
    id: int
    text: str

    def to_json(self) -> dict:
        return {"id": self.id, "text": self.text}


@dataclass(frozen=True)
class Divergence:
    """Where the two outputs part. A side that ended there has ``None`` and its finish reason."""
    index: int
    reference: TokenRef | None
    candidate: TokenRef | None
    reference_end: str | None = None
    candidate_end: str | None = None

    def describe(self) -> str:
        def side(tok: TokenRef | None, end: str | None) -> str:
            return repr(tok.text) + f" (id {tok.id})" if tok else f"<end: {end or 'unknown'}>"
        return (f"token {self.index}: reference {side(self.reference, self.reference_end)}, "
                f"candidate {side(self.candidate, self.candidate_end)}")

    def to_json(self) -> dict:
        return {"index": self.index,
                "reference": self.reference.to_json() if self.reference else None,
                "candidate": self.candidate.to_json() if self.candidate else None,
                "reference_end": self.reference_end, "candidate_end": self.candidate_end}


@dataclass(frozen=True)
class LogprobStats:
    tokens: int
    mean: float           # mean |delta log p|
    max: float            # max |delta log p|
    prob_mean: float      # mean |delta p| (verl's rollout_probs_diff_mean)
    prob_max: float

    @property
    def sum(self) -> float:
        return self.mean * self.tokens

    @property
    def prob_sum(self) -> float:
        return self.prob_mean * self.tokens

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "mean": self.mean, "max": self.max,
                "prob_mean": self.prob_mean, "prob_max": self.prob_max}


@dataclass(frozen=True)
class Comparison:
    match: bool
    basis: str                              # "token ids" or "text"
    divergence: Divergence | None
    reference_tokens: int
    candidate_tokens: int
    logprob: LogprobStats | None
    logprob_missing: str | None = None      # why there is no log-prob comparison


def trim_eos(gen: Generation, eos_ids: Iterable[int]) -> tuple[tuple[int, ...],
                                                               tuple[float, ...] | None]:
    """Drop one final EOS token (and its log-prob)."""
    ids, lps = gen.token_ids, gen.logprobs
    if ids and ids[-1] in set(eos_ids):
        ids = ids[:-1]
        if lps is not None and len(lps) == len(gen.token_ids):
            lps = lps[:-1]
    return ids, lps


def first_difference(a: tuple[int, ...], b: tuple[int, ...]) -> int | None:
    """Index of the first differing position, or of the end of the shorter one; None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def logprob_stats(ref: tuple[float, ...], cand: tuple[float, ...], n: int) -> LogprobStats | None:
    """|delta| over the first n positions (skipping positions where either side is not finite:
    a -inf log-prob says the token was impossible, which the divergence already reports)."""
    deltas, pdeltas = [], []
    for a, b in zip(ref[:n], cand[:n]):
        if math.isfinite(a) and math.isfinite(b):
            deltas.append(abs(a - b))
            pdeltas.append(abs(math.exp(a) - math.exp(b)))
    if not deltas:
        return None
    return LogprobStats(tokens=len(deltas), mean=sum(deltas) / len(deltas), max=max(deltas),
                        prob_mean=sum(pdeltas) / len(pdeltas), prob_max=max(pdeltas))


def restore_leading_space(reference_text: str, candidate_text: str) -> str:
    """A chat endpoint may strip its content; give the candidate back the reference's leading
    white space so that re-tokenising it lines up with the reference's first token."""
    lead = reference_text[: len(reference_text) - len(reference_text.lstrip())]
    if lead and candidate_text == candidate_text.lstrip():
        return lead + candidate_text
    return candidate_text


def compare(reference: Generation, candidate: Generation, *, eos_ids: Iterable[int] = (),
            token_text: Callable[[int], str] = str,
            encode: Callable[[str], list[int]] | None = None) -> Comparison:
    """Compare two generations of the same input. ``token_text`` turns an id into its text for
    the divergence (the reference tokenizer's decode of one id); ``encode`` (the same
    tokenizer, no special tokens) re-tokenises a candidate known only by its text."""
    eos = tuple(eos_ids)
    ref_ids, ref_lp = trim_eos(reference, eos)
    cand_ids, cand_lp = trim_eos(candidate, eos)
    at = first_difference(ref_ids, cand_ids)
    basis = "token ids"
    match = at is None
    divergence = None
    if candidate.tokens_from_text or reference.tokens_from_text:
        # Re-tokenising a text need not give back the ids that produced it, and a chat
        # endpoint may strip its content: equal texts (white space around them aside) match,
        # and a divergence is placed by re-tokenising the candidate's text.
        basis = "text"
        match = reference.text.strip() == candidate.text.strip()
        if not match and encode is not None and candidate.tokens_from_text:
            cand_ids = tuple(encode(restore_leading_space(reference.text, candidate.text)))
            at = first_difference(ref_ids, cand_ids)
            if at is None:  # the texts differ only in white space the tokens do not show
                at = min(len(ref_ids), len(cand_ids))
    if not match and at is not None:
        def tok(ids: tuple[int, ...]) -> TokenRef | None:
            return TokenRef(ids[at], token_text(ids[at])) if at < len(ids) else None
        r, c = tok(ref_ids), tok(cand_ids)
        divergence = Divergence(at, r, c, None if r else reference.finish_reason,
                                None if c else candidate.finish_reason)
    shared = len(ref_ids) if at is None else at
    stats, missing = None, None
    if ref_lp is None or cand_lp is None:
        side = " and ".join(n for n, lp in (("reference", ref_lp), ("candidate", cand_lp))
                            if lp is None)
        missing = f"no log-probs from the {side}"
    elif candidate.tokens_from_text or reference.tokens_from_text:
        missing = "token ids re-tokenised from text; log-probs cannot be aligned"
    elif len(ref_lp) < min(shared, len(ref_ids)) or len(cand_lp) < min(shared, len(cand_ids)):
        missing = "fewer log-probs than tokens"
    elif shared == 0:
        missing = "no shared prefix (the outputs differ from the first token)"
    else:
        stats = logprob_stats(ref_lp, cand_lp, shared)
        if stats is None:
            missing = "no finite log-probs on the shared prefix"
    return Comparison(match=match, basis=basis, divergence=divergence,
                      reference_tokens=len(ref_ids), candidate_tokens=len(cand_ids),
                      logprob=stats, logprob_missing=missing)


def verdict(prob_mean: float) -> str:
    """verl's reading of the mean probability difference."""
    if prob_mean < NORMAL_BELOW:
        return "normal"
    if prob_mean > PROBLEM_ABOVE:
        return "precision-problem"
    return "elevated"


@dataclass(frozen=True)
class LogprobSummary:
    tokens: int
    samples: int
    mean: float
    max: float
    prob_mean: float
    prob_max: float

    @property
    def verdict(self) -> str:
        return verdict(self.prob_mean)


def summarise(stats: Iterable[LogprobStats | None]) -> LogprobSummary | None:
    """Token-weighted over all samples (as verl's masked mean over a batch)."""
    present = [s for s in stats if s is not None and s.tokens]
    if not present:
        return None
    tokens = sum(s.tokens for s in present)
    return LogprobSummary(tokens=tokens, samples=len(present),
                          mean=sum(s.sum for s in present) / tokens,
                          max=max(s.max for s in present),
                          prob_mean=sum(s.prob_sum for s in present) / tokens,
                          prob_max=max(s.prob_max for s in present))
