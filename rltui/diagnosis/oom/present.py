"""An OOM report's suggestions as people read them (pure): the current value, the proposed
value and the estimate, for the app's OOM screen and ``rltui oom``'s text alike.

A value is never shown as Python writes it (``None``, ``'half'``): a key the job's config does
not set reads "not set (default N)", one nobody could read says why, booleans read as the
config files write them.
"""

from __future__ import annotations

from typing import Any

from rltui import units
from rltui.diagnosis.oom.suggest import HALF
from rltui.diagnosis.oom.types import OomReport, Suggestion

# The generic advice (a framework rltui does not know) names a change in words, not a key.
GENERIC_PROPOSALS = {"half": "half the job's value", "on": "on"}


def value_text(value: Any) -> str:
    """A config value as YAML and Hydra overrides write it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def is_key(s: Suggestion) -> bool:
    """A key of the job's config, a flag of its command line (OpenRLHF's ``--name``) or a
    variable (a dotted path, ``env:NAME``), not advice in words ("micro batch size", "host
    offload")."""
    return "." in s.key or s.key.startswith(("env:", "--"))


def key_text(s: Suggestion) -> str:
    return s.key[4:] + " (environment)" if s.key.startswith("env:") else s.key


def current_text(s: Suggestion, config_read: bool) -> str:
    """The value the job runs with, or why it is not known. ``config_read``: a config file or
    command-line override was read (else nothing says what the job set)."""
    if s.key.startswith("env:"):
        return "not set" if s.current is None else value_text(s.current)
    if not is_key(s):
        return "see the job's config" if config_read else "unknown (config not read)"
    if s.current_is_default:
        if s.current is not None:
            return f"not set (default {value_text(s.current)})"
        return "not set (no default)" if config_read else "unknown (config not read)"
    return "null (set so in the config)" if s.current is None else value_text(s.current)


def proposed_text(s: Suggestion) -> str:
    if s.proposed == HALF:
        return "half the job's value"
    if not is_key(s) and isinstance(s.proposed, str):
        return GENERIC_PROPOSALS.get(s.proposed, s.proposed)
    return value_text(s.proposed)


def estimate_text(s: Suggestion) -> str:
    """What the model-shape estimate says the failing phase holds on one GPU, before -> after,
    or "" where there is no estimate (no model config)."""
    if s.need_before is None or s.need_after is None:
        return ""
    return f"{units.gib(s.need_before)} -> {units.gib(s.need_after)}"


def saves_text(s: Suggestion) -> str:
    return f"about {units.gib(s.effect_bytes)}" if s.effect_bytes else ""


def shortfall(r: OomReport) -> int | None:
    """Bytes the failed request lacked (requested minus free), when the error says both."""
    n = r.numbers
    if n.requested is None or n.free is None:
        return None
    short = n.requested - n.free
    return short if short > 0 else None


def config_text(r: OomReport) -> str:
    """Where the job's config came from, in one line."""
    if not r.config_sources:
        return "not read (give --job-config FILE)"
    return " + ".join(r.config_sources)


def has_estimate(r: OomReport) -> bool:
    return any(s.need_before is not None for s in r.suggestions) or bool(r.estimate)
