"""Settings from YAML: defaults, the XDG path, RLTUI_CONFIG, and errors that name key and line.

Every setting is documented in docs/configuration.md. Unknown keys are errors (a typo silently
ignored is a threshold silently not applied). The file is never rewritten wholesale: remembering
the theme edits or appends the single ``theme:`` line so the user's comments survive.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltui.diagnosis.thresholds import Thresholds
from rltui.model import LOG_FORMATS

if TYPE_CHECKING:
    import yaml

THEMES = ("dark", "light", "colorblind")


# Bounds on what a config file may hold (docs/configuration.md): a larger file is no settings
# file (a 50 MB one took 49 s to reject), and no setting needs a number past 10**15.
MAX_CONFIG_BYTES = 1 << 20
MAX_NUMBER = 10**15


class ConfigError(ValueError):
    """A bad config file; the message names the file, line and key."""


@dataclass(frozen=True, slots=True)
class Cadence:
    gpus: float = 1.0  # seconds between NVML polls
    procs: float = 1.0  # seconds between process scans
    logs: float = 1.0  # seconds between reads of the followed log files
    ui: float = 1.0  # seconds between snapshot/diagnosis updates of the screen


@dataclass(frozen=True, slots=True)
class PySpy:
    path: str = "py-spy"
    interval: float = 10.0  # periodic dumps every N seconds; 0 turns them off
    nonblocking: bool = True  # periodic dumps never pause the job
    native: bool = False
    timeout: float = 10.0  # per process
    max_concurrent: int = 8


@dataclass(frozen=True, slots=True)
class CustomParserSpec:
    """A user-defined step parser: a regex with named groups (``step`` required)."""

    name: str
    regex: str
    metrics: tuple[tuple[str, str], ...] = ()  # regex group -> metric name


@dataclass(frozen=True, slots=True)
class Logs:
    paths: tuple[str, ...] = ()  # extra log files or globs, followed like --log
    format: str = "auto"  # step format for every file: auto or one of the known formats
    parsers: tuple[CustomParserSpec, ...] = ()
    completion_patterns: tuple[str, ...] = ()  # regexes of extra "training finished" banners


@dataclass(frozen=True, slots=True)
class Settings:
    theme: str = "dark"
    history: int = 600  # snapshots kept for sustained checks and sparklines
    cadence: Cadence = field(default_factory=Cadence)
    thresholds: Thresholds = field(default_factory=Thresholds)
    pyspy: PySpy = field(default_factory=PySpy)
    logs: Logs = field(default_factory=Logs)
    path: str | None = None  # where these settings came from (None: defaults)


_SECTIONS = {"cadence": Cadence, "thresholds": Thresholds, "pyspy": PySpy}


def config_path(env: dict[str, str] | None = None) -> Path:
    """RLTUI_CONFIG if set, else $XDG_CONFIG_HOME/rltui/config.yaml (~/.config by default)."""
    env = os.environ if env is None else env
    if env.get("RLTUI_CONFIG"):
        return Path(env["RLTUI_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "rltui" / "config.yaml"


def load(path: Path | None = None) -> Settings:
    """Load settings; a missing file gives the defaults, a bad one raises ConfigError."""
    path = path or config_path()
    try:
        if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {path.stat().st_size:,} bytes; a config file holds at "
                              f"most {MAX_CONFIG_BYTES:,}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    return parse(text, str(path))


def parse(text: str, name: str = "<config>") -> Settings:
    import yaml  # PyYAML (~15 ms) only for a config file that exists
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{name}: {len(text):,} characters; a config file holds at most "
                          f"{MAX_CONFIG_BYTES:,}")
    from rltui.parsing.jobconfig import MAX_FLOW_DEPTH, too_deep
    if too_deep(text):
        raise ConfigError(f"{name}: not valid YAML: nested too deeply (more than "
                          f"{MAX_FLOW_DEPTH} levels)")
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ConfigError(f"{name}: not valid YAML: nested too deeply") from None
    except yaml.reader.ReaderError as exc:
        # Bad characters carry a position, not a mark.
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(f"{name} line {line}: not valid YAML: {exc.reason} "
                          f"(character {exc.character!r})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{name}{where}: not valid YAML: {problem}") from None
    if root is None or (isinstance(root, yaml.ScalarNode)
                        and root.tag == "tag:yaml.org,2002:null"):
        return Settings(path=name)
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{name} line {root.start_mark.line + 1}: the top level must be a "
                          "mapping of settings")
    settings = Settings(path=name)
    for key_node, value_node in _pairs(root, name, ""):
        key = key_node.value
        line = key_node.start_mark.line + 1
        if key in _SECTIONS:
            cls = _SECTIONS[key]
            section = _section(cls, value_node, name, key)
            settings = replace(settings, **{key: section})
        elif key == "theme":
            value = _scalar(value_node, str, name, key)
            if value not in THEMES:
                raise ConfigError(f"{name} line {line}: theme: unknown theme {value!r} "
                                  f"(one of {', '.join(THEMES)})")
            settings = replace(settings, theme=value)
        elif key == "logs":
            settings = replace(settings, logs=_logs(value_node, name))
        elif key == "history":
            value = _scalar(value_node, int, name, key)
            if value < 10:
                raise ConfigError(f"{name} line {line}: history: must be at least 10")
            settings = replace(settings, history=value)
        else:
            known = ", ".join(["theme", "history", "logs", *_SECTIONS])
            raise ConfigError(f"{name} line {line}: unknown key {key!r} (known: {known})")
    return settings


def _pairs(node: yaml.MappingNode, name: str, prefix: str) -> list[tuple[yaml.Node, yaml.Node]]:
    """The mapping's (key, value) nodes; keys must be plain names, each given once."""
    import yaml
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        line = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            raise ConfigError(f"{name} line {line}: keys must be plain names")
        if key_node.value in seen:
            raise ConfigError(f"{name} line {line}: {prefix}{key_node.value} is given twice "
                              f"(first on line {seen[key_node.value]})")
        seen[key_node.value] = line
    return node.value


def _string_list(node: yaml.Node, name: str, key: str) -> tuple[str, ...]:
    import yaml
    if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
        return ()
    if not isinstance(node, yaml.SequenceNode):
        raise ConfigError(f"{name} line {node.start_mark.line + 1}: {key}: expected a list")
    return tuple(_scalar(item, str, name, key) for item in node.value)


def _logs(node: yaml.Node, name: str) -> Logs:
    """The ``logs:`` section. Regexes are compiled here so a bad one is reported at start-up
    with the parser's name and the pattern, not when the first line arrives."""
    import re

    import yaml

    if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
        return Logs()
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{name} line {node.start_mark.line + 1}: logs: expected a mapping")
    logs = Logs()
    for key_node, value_node in _pairs(node, name, "logs."):
        key, line = key_node.value, key_node.start_mark.line + 1
        if key == "paths":
            logs = replace(logs, paths=_string_list(value_node, name, "logs.paths"))
        elif key == "format":
            fmt = _scalar(value_node, str, name, "logs.format")
            known = ("auto", *(f for f in LOG_FORMATS if f not in ("custom", "unknown")))
            if fmt not in known:
                raise ConfigError(f"{name} line {line}: logs.format: unknown format {fmt!r} "
                                  f"(one of {', '.join(known)})")
            logs = replace(logs, format=fmt)
        elif key == "completion_patterns":
            patterns = _string_list(value_node, name, "logs.completion_patterns")
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigError(f"{name} line {line}: logs.completion_patterns: regex "
                                      f"{pattern!r} does not compile: {exc}") from None
            logs = replace(logs, completion_patterns=patterns)
        elif key == "parsers":
            logs = replace(logs, parsers=_parsers(value_node, name))
        else:
            raise ConfigError(f"{name} line {line}: unknown key 'logs.{key}' (known: paths, "
                              "format, parsers, completion_patterns)")
    return logs


def _parsers(node: yaml.Node, name: str) -> tuple[CustomParserSpec, ...]:
    import re

    import yaml

    if not isinstance(node, yaml.SequenceNode):
        raise ConfigError(f"{name} line {node.start_mark.line + 1}: logs.parsers: expected a "
                          "list of {name, regex, metrics}")
    out = []
    for item in node.value:
        line = item.start_mark.line + 1
        if not isinstance(item, yaml.MappingNode):
            raise ConfigError(f"{name} line {line}: logs.parsers: each parser is a mapping "
                              "with name, regex and optional metrics")
        fields_: dict[str, yaml.Node] = {k.value: v for k, v in _pairs(item, name, "logs.parsers.")}
        unknown = set(fields_) - {"name", "regex", "metrics"}
        if unknown:
            raise ConfigError(f"{name} line {line}: logs.parsers: unknown key "
                              f"{sorted(unknown)[0]!r} (known: name, regex, metrics)")
        if "name" not in fields_ or "regex" not in fields_:
            raise ConfigError(f"{name} line {line}: logs.parsers: a parser needs a name and "
                              "a regex")
        pname = _scalar(fields_["name"], str, name, "logs.parsers.name")
        regex = _scalar(fields_["regex"], str, name, f"logs.parsers[{pname}].regex")
        try:
            compiled = re.compile(regex)
        except re.error as exc:
            raise ConfigError(f"{name} line {fields_['regex'].start_mark.line + 1}: parser "
                              f"{pname!r}: regex {regex!r} does not compile: {exc}") from None
        if "step" not in compiled.groupindex:
            raise ConfigError(f"{name} line {fields_['regex'].start_mark.line + 1}: parser "
                              f"{pname!r}: regex {regex!r} has no (?P<step>...) group")
        metrics: list[tuple[str, str]] = []
        if "metrics" in fields_:
            mnode = fields_["metrics"]
            if not isinstance(mnode, yaml.MappingNode):
                raise ConfigError(f"{name} line {mnode.start_mark.line + 1}: parser {pname!r}: "
                                  "metrics: expected a mapping of regex group -> metric name")
            for k, v in _pairs(mnode, name, f"logs.parsers[{pname}].metrics."):
                metrics.append((k.value, _scalar(v, str, name, f"metrics.{k.value}")))
        try:
            from rltui.parsing.steps import compile_custom
            compile_custom(pname, regex, dict(metrics))
        except ValueError as exc:
            raise ConfigError(f"{name} line {line}: {exc}") from None
        out.append(CustomParserSpec(pname, regex, tuple(metrics)))
    return tuple(out)


def _section(cls: type, node: yaml.Node, name: str, section: str) -> Any:
    import yaml
    if isinstance(node, yaml.ScalarNode) and node.value in ("", "~", "null"):
        return cls()
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(f"{name} line {node.start_mark.line + 1}: {section}: expected a "
                          "mapping of settings")
    types = {f.name: f.type for f in fields(cls)}
    values: dict[str, Any] = {}
    for key_node, value_node in _pairs(node, name, f"{section}."):
        key = key_node.value
        dotted = f"{section}.{key}"
        if key not in types:
            raise ConfigError(f"{name} line {key_node.start_mark.line + 1}: unknown key "
                              f"{dotted!r} (known: {', '.join(types)})")
        want = {"float": float, "int": int, "bool": bool, "str": str}[str(types[key])]
        value = _scalar(value_node, want, name, dotted)
        if want is float and (value != value or value in (float("inf"), float("-inf"))):
            raise ConfigError(f"{name} line {value_node.start_mark.line + 1}: {dotted}: must "
                              "be a finite number")
        if want in (int, float) and value < 0:
            raise ConfigError(f"{name} line {value_node.start_mark.line + 1}: {dotted}: must "
                              f"not be negative, got {value}")
        values[key] = value
    try:
        return cls(**values)
    except TypeError as exc:  # pragma: no cover - guarded by the checks above
        raise ConfigError(f"{name}: {section}: {exc}") from None


def _scalar(node: yaml.Node, want: type, name: str, key: str) -> Any:
    import yaml
    line = node.start_mark.line + 1
    if not isinstance(node, yaml.ScalarNode):
        raise ConfigError(f"{name} line {line}: {key}: expected a {want.__name__}, got a "
                          f"{'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}")
    try:
        value = yaml.safe_load(node.value) if node.style is None else node.value
    except (ValueError, yaml.YAMLError, RecursionError):
        # a 5000-digit integer passes Python's digit limit: no setting of ours anyway
        raise ConfigError(f"{name} line {line}: {key}: expected a {want.__name__}, got "
                          f"{node.value[:40]!r}{'...' if len(node.value) > 40 else ''}") from None
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
        raise ConfigError(f"{name} line {line}: {key}: expected a {want.__name__}, got "
                          f"{node.value!r}")
    if want in (int, float) and value == value and abs(value) > MAX_NUMBER:
        raise ConfigError(f"{name} line {line}: {key}: {node.value[:40]} is too large (at most "
                          f"{MAX_NUMBER:.0e})")
    return value


# The value of the top-level theme line; a trailing comment is left alone.
_THEME_LINE = re.compile(r"^(theme\s*:[ \t]*)([^#\r\n]*?)([ \t]+#[^\r\n]*)?$", re.MULTILINE)


def save_theme(theme: str, path: Path | None = None) -> Path:
    """Remember the theme: rewrite the top-level ``theme:`` line, or append one."""
    if theme not in THEMES:
        raise ValueError(f"unknown theme {theme!r}")
    path = path or config_path()
    try:
        if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path}: {path.stat().st_size:,} bytes; a config file holds at "
                              f"most {MAX_CONFIG_BYTES:,}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    if _THEME_LINE.search(text):
        text = _THEME_LINE.sub(lambda m: f"{m.group(1)}{theme}{m.group(3) or ''}", text, count=1)
    else:
        text = (text + ("\n" if text and not text.endswith("\n") else "")
                + f"theme: {theme}\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path
