"""Settings from YAML: defaults, the XDG path, RLTUI_CONFIG, and errors that name key and line.

The schema is declared once, here: every key is a field of the dataclasses below (its name, type
and default) with its documentation in the field's metadata (``setting``); the thresholds are
``rltui.diagnosis.thresholds.Thresholds``, documented in ``THRESHOLD_DOCS``. ``SCHEMA`` lists
every key; the parser reads keys, types and the known keys of every error from it, and
``settings_yaml`` writes the "Every setting" block of docs/configuration.md from it (a test holds
the page to it). Unknown keys are errors (a typo silently ignored is a threshold silently not
applied). The file is never rewritten wholesale: remembering the theme edits or appends the
single ``theme:`` line so the user's comments survive.
"""

from __future__ import annotations

import os
import re
import typing
from dataclasses import MISSING, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rltui.diagnosis.thresholds import Thresholds
from rltui.model import LOG_FORMATS

if TYPE_CHECKING:
    import yaml

THEMES = ("dark", "light", "colorblind")  # shipped; the user's own: themes_dir (docs/themes.md)
THEME_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # a theme file's name, less .yaml


# Bounds on what a config file may hold (docs/configuration.md): a larger file is no settings
# file (a 50 MB one took 49 s to reject), and no setting needs a number past 10**15.
MAX_CONFIG_BYTES = 1 << 20
MAX_NUMBER = 10**15


class ConfigError(ValueError):
    """A bad config file; the message names the file, line and key."""


def setting(default: Any = MISSING, doc: str = "", *, factory: Any = MISSING,
            example: str = "") -> Any:
    """A field that is a key of the config file: its default and its line of documentation
    (``example``: YAML the documentation shows in place of the default)."""
    metadata = {"doc": doc, "example": example}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, slots=True)
class Cadence:
    gpus: float = setting(1.0, "NVML poll")
    procs: float = setting(1.0, "process and rank scan")
    logs: float = setting(1.0, "read new lines of the followed logs")
    ui: float = setting(1.0, "snapshot + diagnosis + screen update")


@dataclass(frozen=True, slots=True)
class PySpy:
    path: str = setting("py-spy", "the py-spy executable (found on PATH or beside rltui's "
                                  "Python)")
    interval: float = setting(10.0, "periodic dumps every N seconds; 0 turns them off (`d` "
                                    "still works)")
    nonblocking: bool = setting(True, "periodic dumps never pause the job (`d` always pauses, "
                                      "per process)")
    native: bool = setting(False, "include C/C++ frames")
    timeout: float = setting(10.0, "per process")
    max_concurrent: int = setting(8, "dumps running at once")


@dataclass(frozen=True, slots=True)
class CustomParserSpec:
    """A user-defined step parser: a regex with named groups (``step`` required)."""

    name: str
    regex: str
    metrics: tuple[tuple[str, str], ...] = ()  # regex group -> metric name


_PARSER_EXAMPLE = """\
  - name: my-trainer
    regex: 'iter (?P<step>\\d+)/(?P<total>\\d+) loss=(?P<l>[-0-9.e]+)'
    metrics: {l: loss}   # regex group -> metric (loss, reward, entropy, grad_norm,
                         # step_time, throughput, response_length, rollout_probs_diff)
"""


# What logs.format may be: auto, or a format the step reader knows by name.
LOG_FORMAT_CHOICES = ("auto", *(f for f in LOG_FORMATS if f not in ("custom", "unknown")))


@dataclass(frozen=True, slots=True)
class Logs:
    paths: tuple[str, ...] = setting((), "extra log files or globs, followed like --log (see "
                                         "docs/logs.md)")
    format: str = setting("auto", "step-line format for every file: "
                                  + ", ".join(LOG_FORMAT_CHOICES))
    parsers: tuple[CustomParserSpec, ...] = setting(
        (), "your own step lines, tried before the built-in formats", example=_PARSER_EXAMPLE)
    completion_patterns: tuple[str, ...] = setting((), 'regexes of extra "training finished" '
                                                       "banners")


@dataclass(frozen=True, slots=True)
class Settings:
    theme: str = setting("dark", " | ".join(THEMES) + " (colorblind: Okabe-Ito, no red/green "
                                                   "pairs) | yours (themes.md)")
    history: int = setting(600, "snapshots kept for sustained checks and sparklines (at least "
                                "10)")
    cadence: Cadence = setting(factory=Cadence, doc="seconds")
    thresholds: Thresholds = setting(factory=Thresholds)
    pyspy: PySpy = setting(factory=PySpy, doc="stack dumps (docs/stacks.md, "
                                              "docs/stack-dumps.md)")
    logs: Logs = setting(factory=Logs)
    path: str | None = None  # where these settings came from (None: defaults); not a key


# The thresholds are the diagnosis's (rltui.diagnosis.thresholds); their documentation is here.
THRESHOLD_DOCS = {
    "gpu_idle_pct": "a GPU at or below this utilisation is idle",
    "gpu_busy_pct": "a GPU at or above this utilisation is busy",
    "gpu_idle_sustain_s": "gpu-idle-vs-busy must hold this long",
    "rank_exit_grace_s": "rank-exited waits this long after a rank disappears",
    "stall_factor": "steps-stalled: no step for stall_factor x the median step time...",
    "stall_floor_s": "...and at least this long",
    "stack_sample_gap_s": "hang-*: py-spy rounds this far apart count as separate samples",
    "gpu_mem_warn_pct": "colour: GPU memory",
    "gpu_temp_warn_c": "colour: GPU temperature",
    "cpu_busy_pct": "colour: a rank's CPU use",
    "stale_after_intervals": "header: a source is stale after this many missed cadences",
}


@dataclass(frozen=True, slots=True)
class Key:
    """One key of the config file. ``name`` is dotted (``cadence.gpus``); ``type`` is the field's
    type (float, int, bool, str, a tuple, or a section's dataclass)."""

    name: str
    type: Any
    default: Any
    doc: str
    example: str = ""

    @property
    def section(self) -> bool:
        return is_dataclass(self.type)


def _keys(cls: type, prefix: str = "") -> list[Key]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        if "doc" not in f.metadata and cls is not Thresholds:
            continue  # not a key (Settings.path)
        default = f.default if f.default_factory is MISSING else f.default_factory()
        doc = THRESHOLD_DOCS.get(f.name, "") if cls is Thresholds else f.metadata["doc"]
        key = Key(prefix + f.name, hints[f.name], default, doc,
                  f.metadata.get("example", ""))
        out.append(key)
        if key.section:
            out += _keys(key.type, key.name + ".")
    return out


SCHEMA: tuple[Key, ...] = tuple(_keys(Settings))
_TYPES = {key.name: key.type for key in SCHEMA}


def _known(prefix: str) -> list[str]:
    """The keys directly under ``prefix`` ("" for the top level, "cadence." ...), in order."""
    return [k.name[len(prefix):] for k in SCHEMA
            if k.name.startswith(prefix) and "." not in k.name[len(prefix):]]


# Sections of plain settings (numbers, flags, strings), read by _section alone.
_SECTIONS = {k.name: k.type for k in SCHEMA
             if k.section and "." not in k.name
             and all(_TYPES[f"{k.name}.{n}"] in (float, int, bool, str)
                     for n in _known(k.name + "."))}


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[]" if not value else "[" + ", ".join(map(_yaml_value, value)) + "]"
    return str(value)


def settings_yaml() -> str:
    """The "Every setting" block of docs/configuration.md: every key of ``SCHEMA`` with its
    default and its documentation, a section's keys under it, comments aligned per section."""
    blocks: list[list[tuple[str, str]]] = [[]]  # (YAML, comment) lines, a block per section
    for key in SCHEMA:
        depth = key.name.count(".")
        indent, leaf = "  " * depth, key.name.rsplit(".", 1)[-1]
        if key.section:
            blocks.append([(f"{leaf}:", key.doc)])
        elif key.example:
            blocks[-1].append((f"{indent}{leaf}:", key.doc))
            blocks[-1] += [(f"{indent}{line}", "") for line in key.example.splitlines()]
        else:
            blocks[-1].append((f"{indent}{leaf}: {_yaml_value(key.default)}", key.doc))
    out = []
    for block in blocks:
        column = max([23, *(len(text) + 1 for text, doc in block if doc)])
        out += [f"{text:<{column}}# {doc}" if doc else text for text, doc in block]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def config_path(env: dict[str, str] | None = None) -> Path:
    """RLTUI_CONFIG if set, else $XDG_CONFIG_HOME/rltui/config.yaml (~/.config by default)."""
    env = os.environ if env is None else env
    if env.get("RLTUI_CONFIG"):
        return Path(env["RLTUI_CONFIG"]).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".config")
    return Path(base) / "rltui" / "config.yaml"


def themes_dir(path: Path) -> Path:
    """The user's theme files: ``themes/`` beside the config file ``path``."""
    return path.parent / "themes"


def theme_names(path: Path | None = None) -> tuple[str, ...]:
    """The shipped themes, then the user's (``themes_dir(path)/NAME.yaml``), by name."""
    try:
        mine = sorted(p.stem for p in themes_dir(path or config_path()).glob("*.yaml"))
    except OSError:
        mine = []
    return (*THEMES, *(n for n in mine if n not in THEMES and THEME_NAME.fullmatch(n)))


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
    return parse(text, str(path), themes=theme_names(path))


def parse(text: str, name: str = "<config>", themes: tuple[str, ...] = THEMES) -> Settings:
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
            value = _scalar(value_node, _TYPES[key], name, key)
            if value not in themes:
                raise ConfigError(f"{name} line {line}: theme: unknown theme {value!r} "
                                  f"(one of {', '.join(themes)})")
            settings = replace(settings, theme=value)
        elif key == "logs":
            settings = replace(settings, logs=_logs(value_node, name))
        elif key == "history":
            value = _scalar(value_node, _TYPES[key], name, key)
            if value < 10:
                raise ConfigError(f"{name} line {line}: history: must be at least 10")
            settings = replace(settings, history=value)
        else:
            # the keys of their own first, then the sections of plain settings
            known = ", ".join([*(k for k in _known("") if k not in _SECTIONS), *_SECTIONS])
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
            known = LOG_FORMAT_CHOICES
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
            raise ConfigError(f"{name} line {line}: unknown key 'logs.{key}' (known: "
                              f"{', '.join(_known('logs.'))})")
    return logs


_PARSER_KEYS = tuple(f.name for f in fields(CustomParserSpec))


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
        unknown = set(fields_) - set(_PARSER_KEYS)
        if unknown:
            raise ConfigError(f"{name} line {line}: logs.parsers: unknown key "
                              f"{sorted(unknown)[0]!r} (known: {', '.join(_PARSER_KEYS)})")
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
    types = {key: _TYPES[f"{section}.{key}"] for key in _known(section + ".")}
    values: dict[str, Any] = {}
    for key_node, value_node in _pairs(node, name, f"{section}."):
        key = key_node.value
        dotted = f"{section}.{key}"
        if key not in types:
            raise ConfigError(f"{name} line {key_node.start_mark.line + 1}: unknown key "
                              f"{dotted!r} (known: {', '.join(types)})")
        want = types[key]
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
    path = path or config_path()
    if theme not in theme_names(path):
        raise ValueError(f"unknown theme {theme!r}")
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
