"""What the workflow check hides in everything the worker says, and where those secrets come
from: the API key, secret-named values of ``--kwargs`` and ``--init-kwargs``, and what the base
URL carries. Runs in rltui's process only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

from rltui.checks.workflow.spec import WorkflowSpec
from rltui.redact import hide_secrets, is_secret_name, url_secrets


class Scrubber:
    """Hides the given secrets (verbatim) and secret-looking values in everything the worker
    says. Secrets shorter than 4 characters are left to the value patterns: replacing every
    ``ab`` in a report would make it unreadable and hide nothing worth hiding."""

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self.secrets = tuple(secrets)

    def text(self, value: str) -> str:
        return hide_secrets(value, self.secrets)

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, list):
            return [self(v) for v in obj]
        if isinstance(obj, dict):
            return {k: self(v) for k, v in obj.items()}
        return obj


def secrets_of(spec: WorkflowSpec) -> list[str]:
    """What must never show: the API key, every string under a secret-looking name
    (``is_secret_name``: ``api_key``, ``hf_token``, ``password``) anywhere in ``--kwargs`` and
    ``--init-kwargs``, and the password in the base URL. A workflow that puts one of them in an
    error message, bare, would otherwise have it printed."""
    found = [spec.resolved_api_key()]

    def walk(value: Any, name: str | None) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, key if isinstance(key, str) else name)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, name)
        elif isinstance(value, str) and name and is_secret_name(name):
            found.append(value)

    walk(spec.extra_kwargs, None)
    walk(spec.init_kwargs, None)
    url = spec.resolved_base_url()
    if isinstance(url, str):
        found += [s for secret in url_secrets(url) for s in (secret, unquote(secret))]
    return [s for s in found if isinstance(s, str) and s]

