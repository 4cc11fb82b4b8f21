"""What a rollout-consistency run compares, and how. Pure; the API key never leaves this object
through repr or ``settings()``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlparse

from rltui.checks.params import default_of
from rltui.checks.rollout.params import APIS, DTYPES, PARAMS
from rltui.checks.urls import looks_like_url, url_problem
from rltui.redact import redact_url


class SpecError(ValueError):
    """A setting that cannot work (a usage error: exit code 2)."""


def is_url(text: str) -> bool:
    try:
        parsed = urlparse(text)
    except ValueError:  # http://[::1 - validate() says why
        return False
    return parsed.scheme in ("http", "https") and bool(parsed.netloc)


@dataclass(frozen=True)
class RolloutSpec:
    dataset: str
    reference: str                          # local HF model folder, or http(s) URL of an endpoint
    server: str                             # OpenAI-style base (.../v1) or a native /generate base
    model: str | None = None                # the server's model name (default: the only one)
    reference_model: str | None = None      # the same, for a URL reference
    api: str = default_of(PARAMS, "api")    # auto | completions | chat | generate
    reference_api: str = default_of(PARAMS, "reference_api")
    tokenizer: str | None = None            # default: the reference folder
    max_new_tokens: int = default_of(PARAMS, "max_new_tokens")
    limit: int | None = None
    concurrency: int = default_of(PARAMS, "concurrency")
    timeout_s: float = default_of(PARAMS, "timeout_s")  # per request
    reference_dtype: str = default_of(PARAMS, "reference_dtype")
    reference_device: str = default_of(PARAMS, "reference_device")  # auto|cpu|cuda[:N]
    max_consecutive_failures: int = 5       # connection failures/timeouts in a row -> stop
    api_key: str | None = field(default=None, repr=False)            # default OPENAI_API_KEY
    reference_api_key: str | None = field(default=None, repr=False)  # default: api_key

    def __repr__(self) -> str:  # the settings as reports show them: no key, no password
        shown = ", ".join(f"{k}={v!r}" for k, v in self.settings().items())
        return f"RolloutSpec({shown})"

    @property
    def reference_is_url(self) -> bool:
        return is_url(self.reference)

    def validate(self) -> None:
        """Raise SpecError for settings that cannot work, before anything starts."""
        problem = url_problem(self.server)
        if problem:
            raise SpecError(f"--server must be an http(s) URL such as http://127.0.0.1:8000/v1 "
                            f"(got {redact_url(self.server)!r}: {problem})")
        if looks_like_url(self.reference):  # meant as a URL: it must work as one
            problem = url_problem(self.reference)
            if problem:
                raise SpecError(f"--reference must be a local model folder or an http(s) URL "
                                f"(got {redact_url(self.reference)!r}: {problem})")
        if self.api not in APIS or self.reference_api not in APIS:
            raise SpecError(f"--api must be one of {', '.join(APIS)}")
        if self.reference_dtype not in DTYPES:
            raise SpecError(f"--reference-dtype must be one of {', '.join(DTYPES)}")
        if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", self.reference_device):
            raise SpecError("--reference-device must be auto, cpu, mps, cuda or cuda:N")
        if self.max_new_tokens < 1:
            raise SpecError("--max-new-tokens must be at least 1")
        if self.limit is not None and self.limit < 1:
            raise SpecError("--limit must be at least 1")
        if self.concurrency < 1:
            raise SpecError("--concurrency must be at least 1")
        if not self.timeout_s > 0:
            raise SpecError("--timeout must be more than 0 seconds")
        if self.max_consecutive_failures < 1:
            raise SpecError("max_consecutive_failures must be at least 1")
        if self.reference_is_url and not self.tokenizer:
            raise SpecError("a URL reference needs --tokenizer (a local tokenizer folder) to "
                            "build the token ids both sides get")

    def settings(self) -> dict:
        """The settings as recorded in reports: everything but the keys, which are only
        said to be set or not, and URLs without their passwords and key parameters."""
        shown_as_url = self.reference_is_url or looks_like_url(self.reference)
        reference = redact_url(self.reference) if shown_as_url else self.reference
        return {
            "dataset": self.dataset, "reference": reference, "server": redact_url(self.server),
            "model": self.model, "reference_model": self.reference_model, "api": self.api,
            "reference_api": self.reference_api, "tokenizer": self.tokenizer,
            "max_new_tokens": self.max_new_tokens, "limit": self.limit,
            "concurrency": self.concurrency, "timeout_s": self.timeout_s,
            "reference_dtype": self.reference_dtype,
            "reference_device": self.reference_device,
            "max_consecutive_failures": self.max_consecutive_failures,
            "api_key": "set" if self.api_key else "not set",
        }
