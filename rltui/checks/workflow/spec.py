"""What to check: the workflow, the dataset, the RL batch shape and the limits. Standard library
only (``rltui --help`` imports the CLI, which imports this).

The shape follows the trainer: ``local_bs = global_bs // rollout_dp_size`` prompts per rollout
process, each run ``group_size`` times, all at once (256 / 4 = 64 prompts x 8 = 512 runs by
default, AReaL's example).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rltui.checks.dataset import DatasetError, read_objects
from rltui.checks.params import default_of
from rltui.checks.urls import url_problem
from rltui.checks.workflow.params import PARAMS
from rltui.redact import REDACTED, is_secret_name, redact_url, scrub_text

TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class SpecError(ValueError):
    """Input the user can fix (a bad shape, a dataset with no usable line); exit code 2."""


@dataclass
class WorkflowSpec:
    """One workflow check. ``rows`` (already loaded) wins over ``dataset`` (a JSONL file: each
    line that is a JSON object is a row, the others are skipped and listed) and ``prompt`` (one
    row ``{"prompt": ..., "messages": [...]}``). ``base_url``/``api_key`` None
    mean OPENAI_BASE_URL / OPENAI_API_KEY. The key is never printed: it is left out of repr and
    of every report; repr also hides the base URL's password and secret-named kwargs."""

    target: str
    dataset: str | None = None
    prompt: str | None = None
    rows: list | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    global_bs: int = default_of(PARAMS, "global_bs")
    group_size: int = default_of(PARAMS, "group_size")
    rollout_dp_size: int = default_of(PARAMS, "rollout_dp_size")
    timeout: float = default_of(PARAMS, "timeout")
    paths: tuple = default_of(PARAMS, "paths")
    extra_kwargs: dict = field(default_factory=dict)
    init_kwargs: dict = field(default_factory=dict)
    concurrency: int | None = None
    force: bool = default_of(PARAMS, "force")
    sequential_prompts: int = default_of(PARAMS, "sequential_prompts")
    loop_block_s: float = default_of(PARAMS, "loop_block_s")
    startup_timeout: float = default_of(PARAMS, "startup_timeout")
    silence_s: float = 15.0
    python: str | None = None
    probe_server: bool = default_of(PARAMS, "probe_server")

    def __repr__(self) -> str:
        shown = []
        for name in self.__dataclass_fields__:
            if name == "api_key":
                continue
            value = getattr(self, name)
            if name == "base_url" and isinstance(value, str):
                value = redact_url(value)
            elif name in ("extra_kwargs", "init_kwargs"):
                value = _hide_secrets(value)
            shown.append(f"{name}={value!r}")
        return f"WorkflowSpec({', '.join(shown)})"

    @property
    def local_bs(self) -> int:
        return self.global_bs // self.rollout_dp_size

    @property
    def requested(self) -> int:
        return self.local_bs * self.group_size

    def resolved_base_url(self) -> str | None:
        return self.base_url if self.base_url is not None else os.environ.get("OPENAI_BASE_URL")

    def resolved_api_key(self) -> str | None:
        return self.api_key if self.api_key is not None else os.environ.get("OPENAI_API_KEY")

    def resolved_paths(self) -> list[str]:
        return [str(Path(p).expanduser().resolve()) for p in (self.paths or (os.getcwd(),))]


def _hide_secrets(value: Any, name: str | None = None) -> Any:
    """``value`` as repr may show it: everything under a secret-looking name (``api_key``,
    ``hf_token``, ``Authorization``) is REDACTED, at any depth; other strings are scrubbed."""
    if name is not None and is_secret_name(name):
        return REDACTED
    if isinstance(value, dict):
        return {k: _hide_secrets(v, k if isinstance(k, str) else name) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_hide_secrets(v, name) for v in value)
    return scrub_text(value) if isinstance(value, str) else value


def validate(spec: WorkflowSpec) -> None:
    """Raise SpecError for a spec that cannot run; the message names the flag."""
    if not TARGET.match(spec.target or ""):
        raise SpecError(f"workflow {spec.target!r}: expected module:Class, e.g. "
                        "my_agent.workflow:MathAgent")
    base_url = spec.resolved_base_url()
    if base_url:
        # an http(s) URL that does not parse, or has no host or a bad port; another scheme is
        # left to the workflow (the probe says it cannot test it)
        problem = url_problem(base_url, http_only=False)
        if problem:
            flag = "--base-url" if spec.base_url is not None else "OPENAI_BASE_URL"
            raise SpecError(f"{flag} {redact_url(base_url)!r}: not a usable URL ({problem})")
    for name in ("global_bs", "group_size", "rollout_dp_size"):
        value = getattr(spec, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise SpecError(f"--{name.replace('_', '-')} {value!r}: must be a positive integer")
    if spec.global_bs % spec.rollout_dp_size:
        raise SpecError(f"--global-bs {spec.global_bs} is not divisible by --rollout-dp-size "
                        f"{spec.rollout_dp_size}: each rollout process gets "
                        "global_bs // rollout_dp_size prompts")
    if spec.concurrency is not None and spec.concurrency <= 0:
        raise SpecError(f"--concurrency {spec.concurrency}: must be positive")
    for name in ("timeout", "loop_block_s", "startup_timeout", "silence_s"):
        value = getattr(spec, name)
        if not isinstance(value, (int, float)) or not value > 0:
            flag = {"loop_block_s": "--loop-block"}.get(name, "--" + name.replace("_", "-"))
            raise SpecError(f"{flag} {value!r}: must be a positive number of seconds")
    if spec.sequential_prompts < 0:
        raise SpecError("sequential_prompts must not be negative")
    for name in ("extra_kwargs", "init_kwargs"):
        value = getattr(spec, name)
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise SpecError(f"{name}: expected a JSON object")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{name}: not JSON data: {exc}") from None
    for path in spec.paths:
        if not Path(path).expanduser().is_dir():
            raise SpecError(f"--path {path}: not a folder")
    if spec.rows is None and spec.dataset is None and spec.prompt is None:
        raise SpecError("no data: give --data FILE (JSONL, one dict per line) or --prompt TEXT")


def parse_json_object(text: str, flag: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{flag}: not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(value, dict):
        raise SpecError(f"{flag}: expected a JSON object, got {type(value).__name__}")
    return value


def load_rows(spec: WorkflowSpec) -> tuple[list[dict], list]:
    """The dataset rows the check draws its prompts from (at most ``local_bs``: the rest would
    not be used), and the dataset lines skipped (``SkippedLine``: not JSON, not an object)."""
    if spec.rows is not None:
        if not isinstance(spec.rows, list) or not spec.rows \
                or not all(isinstance(r, dict) for r in spec.rows):
            raise SpecError("rows: expected a non-empty list of dicts")
        try:
            json.dumps(spec.rows)  # they travel to the worker as JSON
        except (TypeError, ValueError) as exc:
            raise SpecError(f"rows: not JSON data: {exc}") from None
        return list(spec.rows), []
    if spec.dataset is not None:
        try:
            rows, skipped = read_objects(spec.dataset, limit=spec.local_bs)
        except DatasetError as exc:
            raise SpecError(str(exc)) from None
        return [obj for _, obj in rows], skipped
    return [{"prompt": spec.prompt, "messages": [{"role": "user", "content": spec.prompt}]}], []


def batch_rows(rows: list[dict], local_bs: int) -> tuple[list[dict], str | None]:
    """The ``local_bs`` prompts of one rollout batch; a short dataset repeats (with a note)."""
    if len(rows) >= local_bs:
        return rows[:local_bs], None
    batch = [rows[i % len(rows)] for i in range(local_bs)]
    return batch, (f"the dataset has {len(rows)} row(s); they repeat to fill local_bs="
                   f"{local_bs} prompts")


def run_kwargs(spec: WorkflowSpec) -> dict[str, Any]:
    """The extra_kwargs every run gets: base_url and api_key (when known), temperature 0 so that
    sequential and concurrent results can be compared, then the user's --kwargs."""
    kwargs: dict[str, Any] = {}
    base_url = spec.resolved_base_url()
    if base_url:
        kwargs["base_url"] = base_url
    api_key = spec.resolved_api_key()
    if api_key:
        kwargs["api_key"] = api_key
    kwargs["temperature"] = 0
    kwargs.update(spec.extra_kwargs)
    return kwargs
