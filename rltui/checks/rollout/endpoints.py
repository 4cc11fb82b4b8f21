"""An inference server as one side of the comparison: OpenAI ``/v1/completions`` or
``/v1/chat/completions``, or a native ``/generate`` (SGLang's request shape).

The request form is settled on the first sample by trying the most exact form first and
stepping down when the server refuses it with 400/422 (each step is said in ``limits``):

- completions: a token-id prompt with log-probs, vLLM's ``return_tokens_as_token_ids`` and the
  neutral sampling fields; then without the vLLM-only fields; then without the neutral fields;
  then the same input as text (re-tokenised by the server), in the same order; last, text
  without log-probs;
- chat: messages with log-probs, token ids out (vLLM) and the neutral fields; then without the
  vLLM-only fields; then without the neutral fields; then without log-probs;
- generate: ``input_ids`` with ``return_logprob`` and ``top_logprobs_num``, then plain, then
  ``text``.

Greedy everywhere: temperature 0, top_p 1, the same max new tokens, EOS not ignored, and zero
frequency and presence penalties (standard OpenAI fields; ``transformers serve`` turns
``frequency_penalty`` 0 into ``repetition_penalty`` 1). vLLM (``--generation-config auto``, its
default) and SGLang fill every sampling field a request leaves out from the model's
``generation_config.json`` (Qwen2.5-Instruct: ``repetition_penalty`` 1.05, ``top_k`` 20), so the
neutral values of the fields they add to OpenAI's are sent too: ``repetition_penalty`` 1,
``top_k`` -1, ``min_p`` 0. A server that refuses them gets the request without them, and
``limits`` says its greedy output then rests on the server's defaults.

The OpenAI routes go through the openai SDK: OpenAI's own fields as its arguments, the others
(the neutral fields, vLLM's) in ``extra_body``; ``/generate`` through the HTTP client
(httpclient.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from rltui.checks.rollout.compare import Generation
from rltui.checks.rollout.httpclient import (
    EndpointError,
    auth_message,
    make_http_client,
    make_openai_client,
    request_json,
    sdk_json,
    secrets_of,
    server_urls,
)
from rltui.checks.rollout.inputs import PreparedSample
from rltui.checks.rollout.responses import READERS, BadResponse
from rltui.model import replace
from rltui.redact import redact_url

# Sent with every OpenAI-style request: standard fields every server takes.
GREEDY = {"temperature": 0.0, "top_p": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
# The neutral values of the sampling fields vLLM and SGLang add to OpenAI's; without them they
# apply the model's generation_config.json. A strict OpenAI server refuses them (422/400).
NEUTRAL = {"repetition_penalty": 1.0, "top_k": -1, "min_p": 0.0}
# SGLang's native sampling_params take all of them.
NATIVE = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0,
          "repetition_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}
# The fields the openai SDK takes as arguments, per API; the rest of a body goes in extra_body.
_STANDARD = frozenset(("model", "max_tokens", "n", "stream", *GREEDY))
SDK_FIELDS = {"completions": _STANDARD | {"prompt", "logprobs"},
              "chat": _STANDARD | {"messages", "logprobs", "top_logprobs"}}


@dataclass(frozen=True)
class Form:
    """One way of asking: ids or text, log-probs or not, vLLM's extra fields or not, the
    neutral sampling fields (``NEUTRAL``) or not."""
    ids: bool
    logprobs: bool
    vllm: bool
    neutral: bool = True

    def describe(self, api: str) -> str:
        what = {"completions": "token-id prompt" if self.ids else "text prompt",
                "chat": "messages",
                "generate": "input_ids" if self.ids else "text"}[api]
        out = what + (", log-probs" if self.logprobs else "") + (
            ", token ids out" if self.vllm else "")
        return out if self.neutral or api == "generate" else out + ", no neutral sampling fields"


def _openai_forms(ids: bool) -> list[Form]:
    return [Form(ids, True, True), Form(ids, True, False), Form(ids, True, False, False)]


FORMS = {
    "completions": _openai_forms(True) + _openai_forms(False)
    + [Form(False, False, False), Form(False, False, False, False)],
    "chat": [Form(False, True, True), Form(False, True, False), Form(False, True, False, False),
             Form(False, False, False), Form(False, False, False, False)],
    "generate": [Form(True, True, False), Form(True, False, False), Form(False, True, False),
                 Form(False, False, False)],
}


@dataclass(frozen=True)
class Outcome:
    generation: Generation
    greedy_violation: str | None


class Endpoint:
    """One server. ``role`` is "server" (the candidate) or "reference" and only names it in
    messages. Use ``await open()`` first and ``await close()`` at the end."""

    def __init__(self, url: str, *, role: str, api: str, model: str | None,
                 api_key: str | None, timeout_s: float, max_new_tokens: int,
                 concurrency: int, retokenise: Any):
        self.url, self.role, self.api, self.model = url, role, api, model
        self.shown_url = redact_url(url)  # for messages and reports: no password, no key
        self.model_given = model is not None
        self._key = api_key
        # hidden in every message from the server: it may echo the key, or what the URL
        # carried (a password, a key in the query string)
        self._secrets = secrets_of(url, api_key)
        self.timeout_s, self.max_new_tokens = timeout_s, max_new_tokens
        self.urls = server_urls(url)
        self._retokenise = retokenise
        self._concurrency = concurrency
        self._client: Any = None           # the HTTP client (httpclient.make_http_client)
        self._sdk: Any = None              # AsyncOpenAI on it, for the OpenAI routes
        self._sdk_headers: dict = {}
        self._form: Form | None = None
        self._settle = asyncio.Lock()
        self._refusals: list[tuple[Form, str]] = []
        self.observed: set[str] = set()    # facts learnt from answers (no ids, no log-probs...)

    def __repr__(self) -> str:  # never the key
        return (f"Endpoint({self.role}, {self.shown_url!r}, api={self.api!r}, "
                f"model={self.model!r})")

    # ----- life cycle -----

    async def open(self) -> None:
        """Connect, resolve the API and the model name. Raises EndpointError (auth, model,
        connection) with a message for the user."""
        self._client = make_http_client(self.urls, self._key, timeout_s=self.timeout_s,
                                        concurrency=self._concurrency)
        if self.api == "auto" and self.urls.native_generate:
            self.api = "generate"
        if self.api == "generate":
            await self._probe_native()
            return
        self._sdk, self._sdk_headers = make_openai_client(self._client, self.urls.v1, self._key,
                                                          timeout_s=self.timeout_s)
        try:
            listing = await sdk_json(
                lambda: self._sdk.models.with_streaming_response.list(
                    extra_headers=self._sdk_headers),
                self.urls.v1 + "/models", timeout_s=self.timeout_s, secret=self._secrets,
                role=self.role)
        except EndpointError as exc:
            if exc.status in (404, 405) and self.api == "auto":
                self.api = "generate"    # a native server without the OpenAI routes
                await self._probe_native()
                return
            if exc.status in (404, 405) and self.model:
                return                   # no /v1/models, but the user named the model
            raise
        names = [m.get("id") for m in (listing.get("data") or []) if isinstance(m, dict)] \
            if isinstance(listing, dict) else []
        names = [n for n in names if isinstance(n, str)]
        self.model = self._pick_model(names)
        if self.api == "auto":
            self.api = "completions"

    def _pick_model(self, names: list[str]) -> str:
        listed = ", ".join(repr(n) for n in names) or "none"
        flag = "--model" if self.role == "server" else "--reference-model"
        if self.model:
            if names and self.model not in names:
                raise EndpointError("model", f"the {self.role} at {self.shown_url} does not know "
                                             "model "
                                             f"{self.model!r}; /v1/models lists: {listed}")
            return self.model
        if len(names) == 1:
            return names[0]
        if not names:
            raise EndpointError("model", f"the {self.role} at {self.shown_url} lists no models; "
                                         f"name one with {flag}")
        raise EndpointError("model", f"the {self.role} at {self.shown_url} serves several models "
                                     f"({listed}); choose one with {flag}")

    async def _probe_native(self) -> None:
        """A native server has no model list; one cheap GET tells whether it is up and
        whether it wants a key (any other answer, even 404, means it is there)."""
        try:
            await self._get(self.urls.root + "/health")
        except EndpointError as exc:
            if exc.kind in ("connection", "auth", "timeout"):
                raise

    async def close(self) -> None:
        # the SDK client does not own the HTTP client it was given: closed here
        self._sdk = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _get(self, url: str) -> Any:
        return await request_json(self._client, "GET", url, timeout_s=self.timeout_s,
                                  secret=self._secrets, role=self.role)

    # ----- requests -----

    def _body(self, form: Form, ps: PreparedSample) -> tuple[str, dict]:
        n = self.max_new_tokens
        if self.api == "generate":
            sampling = {**NATIVE, "max_new_tokens": n, "ignore_eos": False}
            body: dict[str, Any] = {"sampling_params": sampling}
            if form.ids:
                body["input_ids"] = list(ps.input_ids)
            else:
                body["text"] = ps.text
            if form.logprobs:
                body.update(return_logprob=True, top_logprobs_num=1)
            return self.urls.generate, body
        body = {"model": self.model, "max_tokens": n, **GREEDY, "n": 1, "stream": False}
        if form.neutral:
            body.update(NEUTRAL)
        if self.api == "chat":
            body["messages"] = [dict(m) for m in ps.messages or ()]
            if form.logprobs:
                body.update(logprobs=True, top_logprobs=1)
            path = "/chat/completions"
        else:
            body["prompt"] = list(ps.input_ids) if form.ids else ps.text
            if form.logprobs:
                body["logprobs"] = 1
            path = "/completions"
        if form.vllm:
            body.update(return_tokens_as_token_ids=True, return_token_ids=True,
                        ignore_eos=False)
        return self.urls.v1 + path, body

    def _send(self, url: str, body: dict) -> Any:
        """The SDK call for an OpenAI-style body: its own fields as arguments, the others in
        ``extra_body``."""
        known = SDK_FIELDS[self.api]
        args = {k: v for k, v in body.items() if k in known}
        extra = {k: v for k, v in body.items() if k not in known}
        resource = self._sdk.chat.completions if self.api == "chat" else self._sdk.completions
        return resource.with_streaming_response.create(**args, extra_body=extra or None,
                                                       extra_headers=self._sdk_headers)

    async def _ask(self, form: Form, ps: PreparedSample) -> Outcome:
        url, body = self._body(form, ps)
        start = time.perf_counter()
        if self.api == "generate":
            data = await request_json(self._client, "POST", url, timeout_s=self.timeout_s,
                                      secret=self._secrets, role=self.role, body=body)
        else:
            data = await sdk_json(lambda: self._send(url, body), url, timeout_s=self.timeout_s,
                                  secret=self._secrets, role=self.role)
        latency = time.perf_counter() - start
        try:
            gen, violation = READERS[self.api](data, self._retokenise)
        except BadResponse as exc:
            raise EndpointError("protocol", f"{self.role} answer not understood: {exc}") from None
        self._observe(gen)
        return Outcome(replace(gen, latency_s=latency), violation)

    def _observe(self, gen: Generation) -> None:
        if gen.tokens_from_text:
            self.observed.add("no-ids")
        if gen.logprobs is None:
            self.observed.add("no-logprobs")
        if gen.prompt_tokens is None:
            self.observed.add("no-prompt-tokens")

    async def generate(self, ps: PreparedSample) -> Outcome:
        """Greedy generation for one sample; EndpointError when it fails."""
        if self._client is None:
            raise EndpointError("protocol", f"the {self.role} endpoint is not open")
        if self._form is None:
            async with self._settle:
                if self._form is None:
                    return await self._first(ps)
        return await self._ask(self._form, ps)

    async def _first(self, ps: PreparedSample) -> Outcome:
        """Try the forms in order; the first one the server takes is used from then on."""
        refusals = []
        for form in FORMS[self.api]:
            try:
                outcome = await self._ask(form, ps)
            except EndpointError as exc:
                if exc.kind == "http" and exc.status in (400, 422):
                    refusals.append((form, f"{form.describe(self.api)}: {exc}"))
                    continue
                raise
            self._form = form
            self._refusals = refusals
            return outcome
        raise EndpointError("refused", f"the {self.role} refused every request form: "
                                       + " | ".join(r for _, r in refusals))

    # ----- what the server could not do -----

    @property
    def form(self) -> str | None:
        return self._form.describe(self.api) if self._form else None

    def sent(self) -> dict:
        """The sampling settings sent, for the report (no prompt, no key, no password)."""
        out: dict[str, Any] = {"endpoint": self.api, "url": self.shown_url, "model": self.model,
                               "form": self.form}
        if self.api == "generate":
            out.update(NATIVE, max_new_tokens=self.max_new_tokens, ignore_eos=False)
            out["model"] = None  # a native request names no model
            return out
        out.update(GREEDY, max_tokens=self.max_new_tokens)
        if self._form is None or self._form.neutral:
            out.update(NEUTRAL)
        if self._form and self._form.vllm:
            out["ignore_eos"] = False
        return out

    def limits(self) -> list[str]:
        who = f"the {self.role} ({self.shown_url})"
        out: list[str] = []
        form = self._form
        if self.urls.credentials and self._key:
            out.append(f"{who}: the user-info of the URL (user:password@) was not sent: the "
                       "API key goes in the one Authorization header (Basic auth from the URL "
                       "is used only without an API key)")
        if self.api == "generate" and self.model_given:
            flag = "--model" if self.role == "server" else "--reference-model"
            out.append(f"{flag} {self.model!r} was not used: a native /generate request names "
                       "no model, the server answers with the one it serves")
        if form and not form.ids and self.api != "chat":
            # the refusal of an id form says why (the others may only be about extra fields)
            why = next((r for f, r in reversed(self._refusals) if f.ids), None) or \
                (self._refusals[-1][1] if self._refusals else "refused")
            out.append(f"{who} did not take token ids ({why}); the input went as text and the "
                       "server tokenised it again: the input is verified only by the prompt "
                       "token count it reports (samples where it differs are refused)")
        if form and not form.neutral and self.api != "generate":
            why = next((r for f, r in reversed(self._refusals)
                        if f.neutral and (f.ids, f.logprobs) == (form.ids, form.logprobs)),
                       "refused")
            fields = ", ".join(f"{k} {v:g}" for k, v in NEUTRAL.items())
            out.append(f"{who} refused the neutral sampling fields ({fields}: {why}); only "
                       "temperature 0, top_p 1 and zero frequency/presence penalties were sent, "
                       "so its greedy output rests on the server's own defaults: a server that "
                       "applies the model's generation_config.json (vLLM's --generation-config "
                       "auto, SGLang) adds the repetition penalty set there")
        if self.api == "chat":
            out.append(f"{who} is a chat endpoint: it applies its own chat template to the "
                       "messages; the input is verified only by the prompt token count it "
                       "reports")
        if "no-prompt-tokens" in self.observed:
            out.append(f"{who} reports no usage.prompt_tokens for some samples: that their "
                       "input was the same could not be verified")
        if "no-ids" in self.observed:
            out.append(f"{who} returns no output token ids: its text was re-tokenised with the "
                       "reference tokenizer; samples match when the texts are equal (white "
                       "space around them ignored) and a divergence is placed in the "
                       "reference's tokens")
        if "no-logprobs" in self.observed:
            out.append(f"{who} returns no log-probs: no log-prob comparison, and greedy "
                       "decoding could not be verified")
        return out


__all__ = ["Endpoint", "EndpointError", "Outcome", "auth_message"]
