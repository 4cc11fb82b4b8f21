"""The job's config as the framework reads it: documented defaults, aliases, ``${...}``
interpolations and the framework's own start-up checks (pure).

OOM triage reads the job's config (``JobConfig``); a key the job does not set takes the
framework's documented default, flagged as a default. ``check`` runs the rules the framework
itself enforces at start (batch divisibility, micro batch settings, token budgets), so a
suggested change never yields a config the framework rejects. The facts (every default with
the file it comes from, the aliases, the check functions) live in the framework registry
(``rltui.frameworks``, one module per framework); docs/job-config.md lists them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rltui.diagnosis.oom.types import ConfigValue, JobConfig
from rltui.frameworks import Default, by_name, config_frameworks
from rltui.parsing.jobconfig import get_path

__all__ = ["ALIASES", "DEFAULTS", "Default", "canonical_key", "check", "documented_default",
           "effective"]

# Framework -> its documented defaults / its aliases, for every framework that has some.
DEFAULTS: dict[str, Mapping[str, Default]] = {
    f.name: f.config.defaults for f in config_frameworks() if f.config and f.config.defaults}
ALIASES: dict[str, Mapping[str, str]] = {
    f.name: f.config.aliases for f in config_frameworks() if f.config and f.config.aliases}

_MAX_DEPTH = 8
_WHOLE = re.compile(r"^\$\{([^${}]+)\}$")
_INNER = re.compile(r"\$\{([^${}]+)\}")


def canonical_key(framework: str, key: str) -> str:
    return ALIASES.get(framework, {}).get(key, key)


def documented_default(framework: str, key: str) -> Default | None:
    return DEFAULTS.get(framework, {}).get(canonical_key(framework, key))


def effective(config: JobConfig, key: str) -> ConfigValue:
    """The value the job runs with: from its config (after overrides), else the framework's
    documented default (``default=True``), else ``None`` (``default=True``: nothing known).
    Aliases resolve to the framework's own key (returned in ``ConfigValue.key``); ``${...}``
    interpolations resolve against the config and the defaults."""
    value, default, key = _lookup(config.framework, config.values, key, 0)
    return ConfigValue(key=key, value=value, default=default)


def _lookup(framework: str, values: Mapping[str, Any], key: str,
            depth: int) -> tuple[Any, bool, str]:
    canon = canonical_key(framework, key)
    found, value = get_path(values, canon)
    if not found and canon != key:
        found, value = get_path(values, key)  # written under the alias (AReaL would refuse it)
    default_entry = DEFAULTS.get(framework, {}).get(canon)
    is_default = not found
    if not found:
        value = default_entry.value if default_entry is not None else None
    value = _resolve(framework, values, canon, value, depth)
    if value is None and default_entry is not None and default_entry.fallback \
            and depth < _MAX_DEPTH:
        value = _lookup(framework, values, default_entry.fallback, depth + 1)[0]
    return value, is_default, canon


def _resolve(framework: str, values: Mapping[str, Any], key: str, value: Any, depth: int) -> Any:
    """``${a.b}``, ``${oc.select:a.b,default}`` and relative ``${.sibling}`` interpolations;
    inside a longer string each is replaced by its text. Unresolvable ones stay as written."""
    if not isinstance(value, str) or "${" not in value or depth >= _MAX_DEPTH:
        return value
    whole = _WHOLE.match(value)
    if whole:
        return _interpolate(framework, values, key, whole.group(1), depth, value)

    def text(m: re.Match) -> str:
        got = _interpolate(framework, values, key, m.group(1), depth, m.group(0))
        return m.group(0) if isinstance(got, str) and got == m.group(0) else _text(got)

    return _INNER.sub(text, value)


def _interpolate(framework: str, values: Mapping[str, Any], key: str, body: str, depth: int,
                 written: str) -> Any:
    body = body.strip()
    fallback_given = False
    fallback: Any = None
    if body.startswith("oc.select:"):
        body, sep, raw_default = body[len("oc.select:"):].partition(",")
        if sep:
            fallback_given = True
            fallback = _scalar(raw_default.strip())
    elif ":" in body:
        return written  # a resolver rltui does not know (oc.env, ...)
    target = _absolute(key, body.strip())
    if target is None:
        return written
    found_in_config, _ = get_path(values, target)
    known = found_in_config or target in DEFAULTS.get(framework, {})
    if not known:
        return fallback if fallback_given else written
    return _lookup(framework, values, target, depth + 1)[0]


def _absolute(key: str, ref: str) -> str | None:
    if not ref.startswith("."):
        return ref
    dots = len(ref) - len(ref.lstrip("."))
    parent = key.split(".")[:-1]
    up = dots - 1
    if up > len(parent):
        return None
    base = parent[:len(parent) - up] if up else parent
    rest = ref[dots:]
    return ".".join([*base, rest]) if rest else None


def _scalar(raw: str) -> Any:
    low = raw.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw.strip("'\"")


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- constraints ----------------------------------------------------------------------------------

def check(framework: str, values: Mapping[str, Any]) -> list[str]:
    """The framework's own start-up checks that a config fails, one sentence each naming the
    keys and values. Keys absent from ``values`` take their documented defaults. A rule whose
    inputs are unknown or not numbers is skipped (it cannot be decided)."""
    fw = by_name(framework)
    rules = fw.config.check if fw is not None and fw.config is not None else None
    if rules is None:
        return []
    return rules(lambda key: _lookup(framework, values, key, 0)[0])
