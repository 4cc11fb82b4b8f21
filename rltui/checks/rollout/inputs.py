"""The token ids of each sample, built once with the reference tokenizer and then sent to both
sides. transformers is imported inside the functions (rltui --help must not pay for it).

- ``input_ids`` in the dataset are used as they are;
- ``messages`` are rendered with the tokenizer's chat template (``add_generation_prompt=True``)
  and the text is encoded without adding special tokens (the template writes its own, as vLLM
  and SGLang do for chat requests);
- a ``prompt`` is encoded as is, with the tokenizer's usual special tokens (what a server does
  to a text prompt), or, for the chat API, wrapped as one user message first.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rltui.checks.dataset import Sample


class TokenizerError(Exception):
    """The tokenizer cannot be loaded (a usage error)."""


@dataclass(frozen=True)
class PreparedSample:
    sample: Sample
    input_ids: tuple[int, ...]
    text: str                           # the same input as text, for servers that refuse ids
    messages: tuple[dict, ...] | None   # for the chat API
    how: str                            # given | chat template | encoded prompt


def load_tokenizer(path: str) -> Any:
    folder = Path(path)
    if not folder.is_dir():
        raise TokenizerError(f"tokenizer folder {path!r} does not exist (the reference model "
                             "folder, or --tokenizer)")
    try:
        from transformers import AutoTokenizer
        # local only: a mistyped folder must not turn into a download from the Hub
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except ImportError as exc:
        raise TokenizerError(f"the rollout check needs transformers ({exc}); install "
                             "rltui[rollout]") from None
    except Exception as exc:  # noqa: BLE001 - any loader failure is the user's folder
        raise TokenizerError(f"cannot load a tokenizer from {path!r}: "
                             f"{type(exc).__name__}: {exc}") from None


def eos_ids(tokenizer: Any, generation_config: Any = None) -> tuple[int, ...]:
    """Every id that ends a generation: the generation config's (one or a list) and the
    tokenizer's."""
    ids: list[int] = []
    for value in (getattr(generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.append(value)
        elif isinstance(value, (list, tuple)):
            ids.extend(v for v in value if isinstance(v, int))
    return tuple(dict.fromkeys(ids))


def token_text(tokenizer: Any, token_id: int) -> str:
    try:
        return tokenizer.decode([token_id], skip_special_tokens=False)
    except Exception:  # noqa: BLE001 - an id outside the vocabulary still gets a row
        return f"<id {token_id}>"


def prepare(sample: Sample, tokenizer: Any, *, chat: bool = False) -> PreparedSample:
    """The ids of one sample. Raises ValueError with the reason when it cannot be built (the
    sample is then listed as skipped)."""
    messages = sample.messages
    if chat and messages is None:
        if sample.input_ids is not None and sample.prompt is None:
            raise ValueError("only input_ids given, and a chat endpoint takes messages")
        messages = ({"role": "user", "content": sample.prompt},)
    if sample.input_ids is not None:
        ids = sample.input_ids
        if chat:
            raise ValueError("input_ids given, but a chat endpoint re-templates the messages; "
                             "use --api completions or generate to send the ids")
        return PreparedSample(sample, ids, tokenizer.decode(list(ids), skip_special_tokens=False),
                              None, "given")
    if messages is not None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the sample has messages but the tokenizer has no chat template")
        try:
            text = tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                 add_generation_prompt=True)
        except Exception as exc:  # noqa: BLE001 - a template error names the sample, not a crash
            raise ValueError(f"the chat template failed: {type(exc).__name__}: {exc}") from None
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return PreparedSample(sample, tuple(ids), text, tuple(messages), "chat template")
    ids = tokenizer(sample.prompt)["input_ids"]
    if not ids:
        raise ValueError("the prompt encodes to no tokens")
    return PreparedSample(sample, tuple(ids), sample.prompt, None, "encoded prompt")
