"""The rollout check's settings, each declared once (rltui.checks.params): the spec's field
and default, the ``rltui rollout-check`` flag and help, the check form's field. Imports only
rltui.checks.params: ``rltui --help`` reads it."""

from __future__ import annotations

from rltui.checks.params import FLAG, FLOAT, INT, MORE, Form, Param

APIS = ("auto", "completions", "chat", "generate")
DTYPES = ("float32", "bfloat16", "float16", "auto")

# Every setting of the check, once: the spec field, the flag (in --help's order), the form.
PARAMS = (
    Param("dataset", "--dataset", required=True, metavar="FILE",
          help="JSONL: one sample a line with 'prompt', 'messages' or 'input_ids', optional "
               "'answer'",
          form=Form("dataset", "e.g. prompts.jsonl (prompt or messages, optional answer)",
                    help="JSONL: prompt or messages, optional answer and input_ids")),
    Param("reference", "--reference", required=True, metavar="MODEL_PATH_OR_URL",
          help="a local HF model folder (greedy transformers generate), or the http(s) URL of "
               "a second endpoint",
          form=Form("reference", "an HF model folder, or a URL, e.g. http://host:8001/v1",
                    help="a local HF transformers model (greedy) or a second endpoint")),
    Param("server", "--server", required=True, metavar="URL",
          help="the inference server: OpenAI-style base URL (http://127.0.0.1:8000/v1) or a "
               "native .../generate",
          form=Form("server", "e.g. http://127.0.0.1:8000/v1",
                    help="the inference server: OpenAI-style base URL, or a native /generate "
                         "base")),
    Param("model", "--model", metavar="NAME",
          help="the server's name for the model (default: the only one it lists)",
          form=Form("model", "default: the only model the server lists")),
    Param("max_new_tokens", "--max-new-tokens", INT, 256, metavar="N",
          help="greedy tokens per sample on both sides (default {default})",
          form=Form("max new tokens", prefill=True)),
    Param("limit", "--limit", INT, metavar="N", help="the first N samples only",
          form=Form("limit", "default: all samples")),
    Param("concurrency", "--concurrency", INT, 8, metavar="N",
          help="samples in flight at once, one request each to the server (default {default})",
          form=Form("concurrency", prefill=True)),
    Param("json", "--json", FLAG, help="print the report as JSON", spec=False),
    Param("api", "--api", choices=APIS, default="auto", group=MORE,
          help="the server endpoint (default {default}: /v1/completions with token ids, or "
               "/generate for a native URL); chat re-templates the messages",
          form=Form("api", "default: {default}; or "
                    + " | ".join(a for a in APIS if a != "auto"), prefill=True)),
    Param("tokenizer", "--tokenizer", metavar="PATH", group=MORE,
          help="the tokenizer that builds the token ids (default: the reference folder; "
               "required with a URL reference)",
          form=Form("tokenizer", "default: the reference folder",
                    help="needed when the reference is a URL: the ids both sides get")),
    Param("reference_model", "--reference-model", metavar="NAME", group=MORE,
          help="the model name at a URL reference (default: the only one listed)"),
    Param("reference_api", "--reference-api", choices=APIS, default="auto", group=MORE,
          help="the endpoint of a URL reference (default {default})"),
    Param("reference_dtype", "--reference-dtype", choices=DTYPES, default="float32", group=MORE,
          help="dtype of a local reference model (default {default})"),
    Param("reference_device", "--reference-device", default="auto", metavar="DEVICE",
          group=MORE,
          help="where a local reference model runs: auto (a GPU when there is one), cpu, cuda "
               "or cuda:N"),
    Param("api_key", "--api-key", metavar="KEY", group=MORE,
          help="the server's API key (default: OPENAI_API_KEY; prefer the variable, a flag "
               "shows in the process list). Never printed",
          form=Form("api key", "default: OPENAI_API_KEY", secret=True,
                    help="never shown, logged or exported")),
    Param("reference_api_key", "--reference-api-key", metavar="KEY", group=MORE,
          help="the key for a URL reference (default: the server's key)"),
    Param("timeout_s", "--timeout", FLOAT, 120.0, metavar="SECONDS", group=MORE,
          help="per request (default {default})",
          form=Form("timeout s", "default: {default} s per request", key="timeout",
                    said_as="timeout")),
    Param("markdown", "--markdown", metavar="FILE", group=MORE,
          help="also write the report as markdown", spec=False),
    Param("json_out", "--json-out", metavar="FILE", group=MORE,
          help="also write the JSON report to FILE", spec=False),
)
