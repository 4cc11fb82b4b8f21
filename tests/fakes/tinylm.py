"""A tiny Qwen2 causal LM built on the spot: random weights, a locally trained byte-level BPE.

Nothing is downloaded. The rollout-consistency tests serve this model with real servers and load
it locally, so two things matter more than realism:

- Text round-trips exactly. The tokenizer is a Qwen2-style byte-level BPE (the same regex
  pre-tokenizer, byte-level alphabet and decoder ``Qwen2Tokenizer`` rebuilds on load: transformers
  loads any ``qwen2`` model's tokenizer with that class, whatever tokenizer.json says) trained on a
  small fixed vocabulary, every word merged into one token. Byte-level BPE is lossless, so
  ``decode(encode(text)) == text`` for any text.
- The model only produces tokens that re-encode to themselves. Its output is drawn from
  ``PRODUCIBLE``: space-prefixed words and punctuation, and bare digits (the Qwen regex splits
  ``" 5"`` into a space and a digit, so a space-prefixed digit is never one token). Any sequence of
  those decodes to text that encodes back to the same ids, so a server that only speaks text
  still gives tokens comparable with the reference's. Every other embedding row (special tokens,
  the byte alphabet, bare words, partial merges) is zero; with tied embeddings its logit is
  exactly 0 while the best producible token's is positive, so greedy decoding never emits it.
  No end-of-sequence token is ever produced either: generation always runs to
  ``max_new_tokens``.

``perturb`` multiplies every weight by ``1 + perturb * N(0, 1)`` (seeded), a relative change of
that size that keeps the zero rows zero: large values change the greedy tokens, tiny ones only
move the log-probs.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [PAD, IM_START, IM_END]

DIGITS = [str(d) for d in range(10)]
WORDS = (
    "the a is are what how many plus minus times equals answer question number cat dog bird "
    "apple red blue green big small and or not yes no one two three four five sum of to in on "
    "it you we count add think step so then first next last user assistant system hello please "
    "thanks by legs has color sky"
).split()
PUNCTUATION = [".", ",", "?", "!", ":", "+", "-", "=", "(", ")"]
VOCAB_WORDS = DIGITS + WORDS + PUNCTUATION
# Byte-level spelling of the tokens the model may produce ("\u0120" is the byte-level space).
PRODUCIBLE = ["\u0120" + w for w in WORDS + PUNCTUATION] + DIGITS

# Qwen2Tokenizer's pre-tokenizer regex, so that our tokenizer.json and the one transformers
# rebuilds from it split text identically.
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
    r"""\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Qwen-style ChatML; eos is <|im_end|>.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

HIDDEN = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
INTERMEDIATE = 128
# Big enough that logits are peaked and the greedy choice has clear margins (a tiny perturbation
# then keeps the tokens), small enough that outputs are not one token repeated.
INIT_STD = 0.35


def _train_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=4096, min_frequency=1, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    # Each word bare and after a space, so both spellings become single tokens.
    corpus = [piece for word in VOCAB_WORDS for piece in (word, " " + word)]
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def _hf_tokenizer(tok):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token=PAD, unk_token=None,
        additional_special_tokens=[IM_START], clean_up_tokenization_spaces=False,
        chat_template=CHAT_TEMPLATE, model_max_length=1024,
    )


def _init_weights(model, seed: int, producible_ids: list[int]) -> None:
    """Fill every parameter from our own generator, independent of transformers' init scheme."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=gen) * INIT_STD)
        embedding = model.get_input_embeddings().weight
        keep = torch.zeros(embedding.shape[0], dtype=torch.bool)
        keep[producible_ids] = True
        embedding[~keep] = 0.0


def _perturb(model, seed: int, perturb: float) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed * 7919 + 104729)
    with torch.no_grad():
        for _, param in sorted(model.named_parameters(), key=lambda item: item[0]):
            param.mul_(1.0 + perturb * torch.randn(param.shape, generator=gen))


def build_tiny_model(
    folder: Path, *, seed: int = 0, perturb: float = 0.0, dtype: str = "float32"
) -> Path:
    """Build and save the tiny model and its tokenizer into ``folder``; return ``folder``."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _hf_tokenizer(_train_tokenizer())
    producible_ids = tokenizer.convert_tokens_to_ids(PRODUCIBLE)
    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
        max_position_embeddings=1024, tie_word_embeddings=True, rms_norm_eps=1e-6,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch_dtype = getattr(torch, dtype)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    _init_weights(model, seed, producible_ids)
    if perturb > 0:
        _perturb(model, seed, perturb)
    model = model.to(torch_dtype)
    model.config.dtype = torch_dtype
    model.generation_config = GenerationConfig(
        do_sample=False, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    # Name the class transformers uses for qwen2 anyway (it overrides the saved class name).
    config_path = folder / "tokenizer_config.json"
    tokenizer_config = json.loads(config_path.read_text(encoding="utf-8"))
    tokenizer_config["tokenizer_class"] = "Qwen2Tokenizer"
    config_path.write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    return folder


# A few prompts in the vocabulary; the answers are what a trained model would say, not what this
# random one says: both sides of a comparison score equally badly, which is all the check needs.
_QUESTIONS = [
    ("what is 2 plus 3 ?", "5"),
    ("how many legs has a dog ?", "four"),
    ("count to five : one two three", "four"),
    ("is the apple red ?", "yes"),
    ("what is 9 minus 4 ?", "5"),
    ("the cat and the dog are big .", "yes"),
    ("add 1 and 1 , then add 2 .", "4"),
    ("what color is the sky ?", "blue"),
    ("think step by step : 3 times 3 =", "9"),
    ("is the bird blue or green ?", "blue"),
]


def sample_dataset(path: Path, n: int = 8) -> Path:
    """Write ``n`` JSONL samples: ``prompt`` and ``messages`` lines, one ``input_ids`` line (the
    third), each with an ``answer``. Deterministic: same ``n``, same bytes."""
    tok = _train_tokenizer()
    known = set(VOCAB_WORDS)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for index in range(n):
        question, answer = _QUESTIONS[index % len(_QUESTIONS)]
        assert set(question.split()) <= known, question
        if index == 2:
            ids = _chat_ids(tok, [{"role": "user", "content": question}])
            record = {"input_ids": ids, "answer": answer}
        elif index % 2 == 0:
            record = {"prompt": question, "answer": answer}
        else:
            messages = [{"role": "user", "content": question}]
            if index % 4 == 3:
                messages.insert(0, {"role": "system", "content": "think step by step ."})
            record = {"messages": messages, "answer": answer}
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _chat_ids(tok, messages: list[dict]) -> list[int]:
    """The chat template applied by hand (no jinja): the ids apply_chat_template gives."""
    text = "".join(
        f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages
    ) + f"{IM_START}assistant\n"
    return tok.encode(text).ids


@dataclass
class Generation:
    """One generation: output ids, the chosen tokens' log-probs, the top alternatives per step
    (``(token_id, logprob)``, best first), and whether it ended on the end-of-sequence token."""

    prompt_ids: list[int]
    ids: list[int]
    logprobs: list[float]
    top: list[list[tuple[int, float]]]
    stopped: bool


class InputError(ValueError):
    """A prompt the model cannot take (the servers answer it with a 400)."""


class LocalModel:
    """A saved model folder loaded with transformers (float32, CPU), for the test servers.

    Log-probs are ``log_softmax`` of the raw logits at the chosen token (what vLLM and SGLang
    report by default). One generation at a time: a lock around the model.
    """

    def __init__(self, folder: Path) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        self._lock = threading.Lock()
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        self.eos_id = self.tokenizer.eos_token_id
        self.max_len = self.model.config.max_position_embeddings

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text)["input_ids"])

    def chat_ids(self, messages: list[dict]) -> list[int]:
        text = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                  tokenize=False)
        # Engines tokenize the rendered chat prompt without adding special tokens again.
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id], skip_special_tokens=False)

    def generate(self, prompt_ids: list[int], max_new_tokens: int, temperature: float = 0.0,
                 top_p: float | None = None, top_n: int = 0) -> Generation:
        """Greedy when ``temperature`` is 0, else sampled; ``top_n`` alternatives per step."""
        torch = self._torch
        from transformers import GenerationConfig

        vocab = self.model.config.vocab_size
        bad = [t for t in prompt_ids if not 0 <= t < vocab]
        if not prompt_ids or bad:
            raise InputError(f"Token id {bad[0]} is out of vocabulary" if bad
                             else "The prompt is empty")
        if len(prompt_ids) + max_new_tokens > self.max_len:
            raise InputError(f"This model's maximum context length is {self.max_len} tokens. "
                             f"However, you requested {len(prompt_ids) + max_new_tokens} tokens")
        if max_new_tokens == 0:
            return Generation(prompt_ids, [], [], [], False)
        sample = temperature > 0
        config = GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=sample,
            temperature=temperature if sample else None, top_p=top_p if sample else None,
            eos_token_id=self.eos_id, pad_token_id=self.tokenizer.pad_token_id,
            output_logits=True, return_dict_in_generate=True,
        )
        with self._lock, torch.no_grad():
            out = self.model.generate(
                torch.tensor([prompt_ids]), generation_config=config,
                attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
            )
        ids = out.sequences[0, len(prompt_ids):].tolist()
        logprobs, top = [], []
        for step, token_id in zip(out.logits, ids):
            dist = torch.log_softmax(step[0].float(), dim=-1)
            logprobs.append(float(dist[token_id]))
            values, indices = torch.topk(dist, max(top_n, 1))
            top.append([(int(i), float(v)) for i, v in zip(indices, values)])
        stopped = bool(ids) and ids[-1] == self.eos_id
        return Generation(prompt_ids, ids, logprobs, top, stopped)
