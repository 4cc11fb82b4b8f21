"""The reference side as a local HF transformers model: greedy ``generate`` one sample at a time,
with the log-prob of each chosen token taken from the raw logits (``output_logits``: before any
logits processor, as an engine reports them).

Its methods block; the runner calls them in one worker thread (torch releases the GIL during
the forward pass, so the requests to the server overlap with it). torch and transformers are
imported inside the methods.
"""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

from rltui.checks.rollout.compare import Generation
from rltui.checks.rollout.inputs import PreparedSample

# Generation settings that change greedy output, and their neutral values: the reference runs
# with these, and a model whose generation_config.json sets another value gets a limit line.
# The server is sent neutral values for the ones it can be told (endpoints.py: NEUTRAL, and
# frequency_penalty 0, which transformers serve reads as repetition_penalty 1); the others,
# applied by a server that reads the model's config, can still make it differ.
NEUTRAL = {"repetition_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_repetition_penalty": 1.0,
           "min_new_tokens": None, "min_length": 0, "bad_words_ids": None,
           "suppress_tokens": None, "begin_suppress_tokens": None, "forced_bos_token_id": None,
           "forced_eos_token_id": None, "sequence_bias": None, "length_penalty": 1.0}


class ReferenceError(Exception):
    """The reference model cannot be loaded or run."""


class HFReference:
    def __init__(self, path: str, tokenizer: Any, *, dtype: str = "float32",
                 device: str = "auto", max_new_tokens: int = 256,
                 stop: threading.Event | None = None):
        self.path, self.dtype, self.max_new_tokens = path, dtype, max_new_tokens
        self.device = device
        self.tokenizer = tokenizer
        self._stop = stop or threading.Event()
        self.model: Any = None
        self.config: Any = None
        self.notes: list[str] = []
        self.load_s: float | None = None

    def load(self) -> None:
        if not Path(self.path).is_dir():
            raise ReferenceError(f"reference model folder {self.path!r} does not exist (give a "
                                 "local HF model folder or an http(s) URL)")
        start = time.perf_counter()
        try:
            import torch
            from transformers import AutoModelForCausalLM
        except ImportError as exc:
            raise ReferenceError(f"a local reference needs torch and transformers ({exc}); "
                                 "install rltui[rollout]") from None
        dtype = "auto" if self.dtype == "auto" else getattr(torch, self.dtype)
        from transformers.utils import logging as hf_logging
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a loading bar would draw over the app's screen
        try:
            model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype,
                                                         local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any loader failure is the user's folder
            raise ReferenceError(f"cannot load the reference model from {self.path!r}: "
                                 f"{type(exc).__name__}: {exc}") from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        device = self.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            model = model.to(device)
        except Exception as exc:  # noqa: BLE001 - no such device, out of memory
            raise ReferenceError(f"cannot put the reference model on {device}: "
                                 f"{type(exc).__name__}: {exc}") from None
        self.device = device
        model.eval()
        self.model = model
        self.config = self._greedy_config(model.generation_config)
        self.load_s = time.perf_counter() - start

    def _greedy_config(self, base: Any) -> Any:
        config = copy.deepcopy(base)
        changed = []
        for name, neutral in NEUTRAL.items():
            value = getattr(config, name, neutral)
            if value is not None and value != neutral:
                changed.append(f"{name}={value!r}")
            setattr(config, name, neutral)
        config.do_sample = False
        config.num_beams = 1
        # neutral values: greedy ignores them, and leaving the model's sampling values would
        # make transformers warn on every call
        config.temperature, config.top_p, config.top_k = 1.0, 1.0, None
        config.max_new_tokens = self.max_new_tokens
        config.max_length = None
        config.output_logits = True
        config.return_dict_in_generate = True
        if config.pad_token_id is None:
            eos = config.eos_token_id
            config.pad_token_id = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
        if changed:
            self.notes.append(
                "the model's generation_config.json sets " + ", ".join(changed) + "; the "
                "reference ignores them (plain greedy). The server was sent repetition_penalty "
                "1 (or frequency_penalty 0, which transformers serve reads as "
                "repetition_penalty 1), top_k -1 and min_p 0; a server that refused those (see "
                "its line here) or applies the other settings from the model's config will "
                "differ")
        return config

    def sent(self) -> dict:
        return {"endpoint": "transformers generate", "path": self.path, "dtype": self.dtype,
                "device": self.device,
                "do_sample": False, "num_beams": 1, "max_new_tokens": self.max_new_tokens,
                "repetition_penalty": 1.0, "logprobs": "log_softmax of the raw logits"}

    @property
    def eos_token_id(self) -> Any:
        return self.config.eos_token_id if self.config is not None else None

    def generate(self, ps: PreparedSample) -> Generation:
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        stop = self._stop

        class StopWhenAsked(StoppingCriteria):
            # lets a cancelled run end the current sample at the next token
            def __call__(self, input_ids, scores, **kwargs):
                return torch.full((input_ids.shape[0],), stop.is_set(), dtype=torch.bool)

        ids = torch.tensor([list(ps.input_ids)], dtype=torch.long, device=self.model.device)
        start = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids),
                generation_config=self.config,
                stopping_criteria=StoppingCriteriaList([StopWhenAsked()]))
        latency = time.perf_counter() - start
        new = out.sequences[0, ids.shape[1]:].tolist()
        logprobs = []
        for step, token in zip(out.logits, new):
            row = torch.log_softmax(step[0].float(), dim=-1)
            logprobs.append(float(row[token]))
        eos = self.eos_token_id
        eos_set = set(eos) if isinstance(eos, (list, tuple)) else {eos}
        if new and new[-1] in eos_set:
            finish = "stop"
        elif len(new) >= self.max_new_tokens:
            finish = "length"
        else:
            finish = "stop" if not stop.is_set() else "cancelled"
        # the reference's text: special tokens dropped, as servers return it
        text = self._decode(new, eos_set)
        return Generation(token_ids=tuple(new), text=text, logprobs=tuple(logprobs),
                          finish_reason=finish, prompt_tokens=len(ps.input_ids),
                          latency_s=latency)

    def _decode(self, new: list[int], eos_set: set) -> str:
        body = new[:-1] if new and new[-1] in eos_set else new
        return self.tokenizer.decode(body, skip_special_tokens=True)
