"""A training job's config from text (pure): Hydra overrides, YAML files, where the config lives.

verl composes its config with Hydra: a YAML file (``--config-path`` / ``--config-name``, default
``ppo_trainer``) plus ``key=value`` overrides on the command line. AReaL reads one YAML file
(``--config X.yaml``) and takes the same override syntax for the rest of its command line.
This module parses those pieces; reading the files is the caller's job
(``rltui.sources.jobconfig``). Documented in docs/job-config.md.

Override values follow Hydra's override grammar (hydra/grammar/OverrideLexer.g4), not YAML:
``1e-6`` is a float here (PyYAML would read a string), ``[a,b]`` a list, ``'x y'`` a string,
``null`` None; ``a,b`` is a multirun sweep, which a single run cannot hold.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from rltui.frameworks import by_name, config_frameworks, framework_in_cmdline
from rltui.parsing.lazyre import LazyPattern

Override = tuple[str, str, Any]  # (op, dotted key, value)

# Operations (the prefix Hydra uses): "set" key=v, "add" +key=v, "force" ++key=v, "delete" ~key.
OPS = ("set", "add", "force", "delete")
# The config name a Hydra app loads when none is given and its framework names none (verl's
# packaged ppo_trainer, the only Hydra framework known; see rltui.frameworks).
HYDRA_DEFAULT_CONFIG = "ppo_trainer"
VERL_DEFAULT_CONFIG = HYDRA_DEFAULT_CONFIG  # the old name, kept for importers

# Hydra's own flags that take a value (the next argument when not written flag=value).
_HYDRA_VALUE_FLAGS = frozenset({
    "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
    "--cfg", "-c", "--package", "-p", "--experimental-rerun",
})
# Other launchers' flags whose value is never an override (AReaL's --config; torchrun's).
_OTHER_VALUE_FLAGS = frozenset({
    "--config", "--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank",
    "--node-rank", "--master_addr", "--master-addr", "--master_port", "--master-port",
    "--rdzv_endpoint", "--rdzv-endpoint", "--rdzv_backend", "--rdzv-backend", "--rdzv_id",
    "--rdzv-id",
})
_PYTHON_VALUE_FLAGS = frozenset({"-X", "-W", "-Q"})

# A key: dotted names (segments may be unsigned integers: list.0); a config group choice uses
# "/" or "@" (db=mysql, hydra/launcher=basic, actor@actor_rollout_ref.actor=megatron_actor).
_SEGMENT = r"(?:[A-Za-z_][A-Za-z0-9_\-]*|0|[1-9][0-9]*)"
_KEY_RE = LazyPattern(rf"^{_SEGMENT}(?:\.{_SEGMENT})*$")
_GROUP_RE = LazyPattern(r"^[A-Za-z_][\w\-]*(?:/[\w\-]+)*(?:@[\w.\-:]*)?$")

_INT_RE = LazyPattern(r"^[+-]?(?:0|[1-9](?:_?[0-9])*)$")
_DIGITS = r"(?:0|[1-9](?:_?[0-9])*)"
_POINT = rf"(?:{_DIGITS}\.|{_DIGITS}?\.[0-9](?:_?[0-9])*)"
_FLOAT_RE = LazyPattern(
    rf"^[+-]?(?:{_POINT}|(?:{_DIGITS}|{_POINT})[eE][+-]?{_DIGITS}|[Ii][Nn][Ff]|[Nn][Aa][Nn])$")
_BOOL = {"true": True, "false": False}
_CASTS = ("int", "float", "str", "bool", "json_str")
_SWEEP_FUNCS = ("choice", "range", "interval", "glob", "sort", "shuffle", "tag", "extend_list")


MAX_NESTING = 32  # brackets, braces and casts in one override value: far past any real one


class _BadValue(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ConfigLocation:
    """Where a command line says the job's config is. Paths are as written (relative to the
    job's working directory, or for Hydra's --config-path possibly to the script's folder)."""

    framework: str = "unknown"  # what the command line alone says (see detect_framework)
    config_dir: str | None = None  # verl: --config-path (Hydra)
    config_name: str | None = None  # verl: --config-name, or the default "ppo_trainer"
    name_is_default: bool = False  # config_name was not on the command line
    config_file: str | None = None  # AReaL: --config X.yaml
    search_dirs: tuple[str, ...] = ()  # Hydra --config-dir (extra places to look)
    script: str | None = None  # the Python file run, when one is named (Hydra's base folder)
    overrides: tuple[str, ...] = ()  # the override arguments, as written


# -- command lines --------------------------------------------------------------------------------

def _program_start(args: Sequence[str]) -> int:
    """Index of the first argument after the program: after ``-m module`` or ``script.py``.
    Everything before (the interpreter, its flags, ``VAR=value`` environment prefixes) is not
    the program's. 0 when no interpreter is seen (the arguments are the program's own)."""
    i = 0
    n = len(args)
    while i < n:
        a = args[i]
        if a == "-m" and i + 1 < n:
            return i + 2
        if a.startswith("-m") and len(a) > 2 and not a.startswith("--"):
            return i + 1  # python -mverl.trainer.main_ppo
        if a in _PYTHON_VALUE_FLAGS:
            i += 2
            continue
        if a.endswith(".py") and not a.startswith("-") and "=" not in a:
            return i + 1
        i += 1
    return 0


def _flag_name(arg: str) -> str:
    return arg.split("=", 1)[0]


def _program_args(args: Sequence[str]) -> Iterator[tuple[int, str]]:
    """(index, argument) of the program's arguments that are not flags or flag values."""
    i = _program_start(args)
    n = len(args)
    while i < n:
        a = args[i]
        if a.startswith("-") and not a.startswith("--") and len(a) > 1 and a[1:2].isdigit():
            yield i, a  # "-1" is no flag; never an override either (no "=")
        elif a.startswith("-") and a != "-":
            if "=" not in a and (a in _HYDRA_VALUE_FLAGS or a in _OTHER_VALUE_FLAGS):
                i += 1  # skip the flag's value
        else:
            yield i, a
        i += 1


def _looks_like_override(arg: str) -> bool:
    if arg.startswith("~"):
        return True
    if "=" not in arg:
        return False
    key = arg.split("=", 1)[0].lstrip("+")
    return bool(key) and not any(c in key for c in " \t\"'")


def parse_overrides(args: Sequence[str]) -> tuple[list[Override], list[str]]:
    """Hydra-style overrides in a command line: ``key=value``, ``+key=value`` (add),
    ``++key=value`` (add or replace), ``~key`` / ``~key=value`` (delete).

    Returns ([(op, dotted key, value)], problems). Flags, their values, the interpreter, the
    module or script and positional arguments are skipped. A config group choice (a key with
    ``/`` or ``@``), a sweep (``a,b``) or a sweep function is reported, not returned.
    """
    out: list[Override] = []
    problems: list[str] = []
    for _, arg in _program_args(args):
        if not _looks_like_override(arg):
            continue
        parsed, problem = _parse_one(arg)
        if problem:
            problems.append(problem)
        if parsed is not None:
            out.append(parsed)
    return out, problems


def _parse_one(arg: str) -> tuple[Override | None, str]:
    if arg.startswith("~"):
        op, rest = "delete", arg[1:]
    elif arg.startswith("++"):
        op, rest = "force", arg[2:]
    elif arg.startswith("+"):
        op, rest = "add", arg[1:]
    else:
        op, rest = "set", arg
    key, has_value, raw = rest.partition("=")
    key = key.strip()
    if not _KEY_RE.match(key):
        if _GROUP_RE.match(key):
            return None, (f"override {arg!r}: a config group choice; rltui does not compose "
                          "config groups, the value was not applied")
        return None, f"override {arg!r}: {key!r} is not a config key"
    if op == "delete" and not has_value:
        return (op, key, None), ""
    try:
        value = parse_value(raw)
    except _BadValue as exc:
        return None, f"override {arg!r}: {exc}"
    return (op, key, value), ""


def parse_value(raw: str) -> Any:
    """One override value as Hydra reads it. Raises ValueError (with the reason) for a sweep,
    a sweep function, or unbalanced brackets and quotes."""
    text = raw.strip()
    if text == "":
        return ""  # key= sets the empty string
    parts = _split_top(text, ",")
    if len(parts) > 1:
        raise _BadValue("a sweep (comma-separated values) only runs under --multirun; "
                        "quote the value if the comma belongs to it")
    return _element(text)


def _split_top(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside brackets, braces, parentheses, quotes and ${...}."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = 0
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\" and i + 1 < len(text):
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "\\" and i + 1 < len(text):
            i += 2  # an escaped character (\, in unquoted strings)
            continue
        elif c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
            if depth < 0:
                raise _BadValue(f"unbalanced {c!r}")
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    if quote:
        raise _BadValue("unterminated quote")
    if depth != 0:
        raise _BadValue("unbalanced brackets")
    parts.append(text[start:])
    return parts


def _element(text: str, depth: int = 0) -> Any:
    if depth > MAX_NESTING:
        # any process's command line is read (the OOM advice): a hostile one nested thousands
        # deep would exceed Python's recursion limit, each level re-reading the text
        raise _BadValue(f"nested deeper than {MAX_NESTING} levels")
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1].strip()
        if not inner:
            return []
        return [_element(p, depth + 1) for p in _split_top(inner, ",")]
    if text.startswith("{") and text.endswith("}"):
        inner = text[1:-1].strip()
        out: dict[Any, Any] = {}
        if not inner:
            return out
        for item in _split_top(inner, ","):
            k, sep, v = _partition_top(item, ":")
            if not sep:
                raise _BadValue(f"dictionary item {item.strip()!r} has no ':'")
            out[_primitive(k.strip())] = _element(v, depth + 1)
        return out
    m = re.match(r"^([A-Za-z_]\w*)\s*\((.*)\)$", text, re.DOTALL)
    if m and not text.startswith(("'", '"')):
        name, inner = m.group(1), m.group(2)
        if name in _SWEEP_FUNCS:
            raise _BadValue(f"{name}(...) is a sweep; a single run cannot hold it")
        if name in _CASTS:
            return _cast(name, _element(inner, depth + 1) if inner.strip() else "")
    return _primitive(text)


def _partition_top(text: str, sep: str) -> tuple[str, str, str]:
    depth = 0
    quote = ""
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "[{(":
            depth += 1
        elif c in "]})":
            depth -= 1
        elif c == sep and depth == 0:
            return text[:i], sep, text[i + 1:]
    return text, "", ""


def _cast(name: str, value: Any) -> Any:
    try:
        if name == "int":
            return int(float(value)) if isinstance(value, str) else int(value)
        if name == "float":
            return float(value)
        if name == "bool":
            if isinstance(value, str):
                low = value.lower()
                if low in _BOOL:
                    return _BOOL[low]
                raise _BadValue(f"bool({value!r}) is not a boolean")
            return bool(value)
        return value if isinstance(value, str) else _to_text(value)
    except (TypeError, ValueError, OverflowError) as exc:  # int(float("inf")) overflows
        raise _BadValue(f"{name}({str(value)[:40]!r}): {exc}") from None


def _to_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _primitive(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] in "'\"" and text[-1] == text[0]:
        return _unquote(text)
    if _INT_RE.match(text) and len(text) <= 4000:  # past Python's int() digit limit: a string
        return int(text.replace("_", ""))
    if _FLOAT_RE.match(text):
        return float(text.replace("_", ""))
    low = text.lower()
    if low in _BOOL:
        return _BOOL[low]
    if low == "null":
        return None
    if any(q in text for q in "'\"") and _is_concatenation(text):
        return "".join(_unquote(p) if p[:1] in "'\"" else p for p in _quoted_parts(text))
    # An unquoted string: \\, \, and "\ " are escapes.
    return re.sub(r"\\([\\, \t])", r"\1", text)


def _quoted_parts(text: str) -> list[str]:
    return [p for p in re.findall(r"'(?:\\'|[^'])*'|\"(?:\\\"|[^\"])*\"|[^'\"]+", text) if p]


def _is_concatenation(text: str) -> bool:
    return "".join(_quoted_parts(text)) == text


def _unquote(text: str) -> str:
    """Inside quotes only an escaped quote is special, and backslashes right before the
    closing quote come in escaped pairs (Hydra's rule)."""
    quote = text[0]
    body = text[1:-1].replace("\\" + quote, quote)
    tail = len(body) - len(body.rstrip("\\"))
    if tail >= 2:
        body = body[:len(body) - tail] + "\\" * (tail // 2)
    return body


# -- applying --------------------------------------------------------------------------------------

def apply_overrides(values: Mapping[str, Any], overrides: Sequence[Override]) -> dict:
    """A new nested dict: ``values`` with the overrides applied in order (the input is never
    changed). ``set``/``add``/``force`` create missing parents; ``delete`` of a missing key is a
    no-op (Hydra would refuse it; rltui reads what it can). A ``delete`` with a value removes the
    key only when the value matches, as Hydra does."""
    out = copy.deepcopy(_plain(values))
    for op, key, value in overrides:
        parts = key.split(".")
        if op == "delete":
            node = _walk(out, parts[:-1], create=False)
            if isinstance(node, dict) and parts[-1] in node \
                    and (value is None or node[parts[-1]] == value):
                del node[parts[-1]]
            continue
        node = _walk(out, parts[:-1], create=True)
        node[parts[-1]] = copy.deepcopy(value)
    return out


def _plain(values: Mapping[str, Any]) -> dict:
    """Mappings (even read-only ones) as dicts, recursively."""
    if isinstance(values, Mapping):
        return {k: _plain(v) if isinstance(v, Mapping) else v for k, v in values.items()}
    return {}


def _walk(node: dict, parts: Sequence[str], create: bool) -> dict | None:
    for part in parts:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            if not create:
                return None
            nxt = node[part] = {}
        node = nxt
    return node


def get_path(values: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """(found, value) of a dotted key in nested mappings."""
    node: Any = values
    for part in key.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict:
    """OmegaConf-style merge: mappings merge key by key, anything else in ``top`` replaces."""
    out = copy.deepcopy(_plain(base))
    for k, v in top.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(_plain(v) if isinstance(v, Mapping) else v)
    return out


# -- YAML ------------------------------------------------------------------------------------------

# Flow collections ([...], {...}) nested deeper than this are refused before YAML reads them: the
# parser recurses per level, and 20,000 levels took a second to end in RecursionError.
MAX_FLOW_DEPTH = 100
_BRACKETS = LazyPattern(r"[\[\]{}]")


def too_deep(text: str, limit: int = MAX_FLOW_DEPTH) -> bool:
    """Whether brackets nest deeper than ``limit`` anywhere in ``text`` (quotes not looked at:
    no real config nests a hundred brackets, quoted or not)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for m in _BRACKETS.finditer(text):
        depth = depth + 1 if m.group() in "[{" else max(0, depth - 1)
        if depth > limit:
            return True
    return False


def parse_yaml_config(text: str, source: str) -> tuple[dict, list[str]]:
    """A config file's mapping; a bad file gives ({}, [problem naming the file and line])."""
    if too_deep(text):
        return {}, [f"{source}: nested too deeply to read (more than {MAX_FLOW_DEPTH} levels)"]
    try:
        data = yaml.safe_load(text)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        return {}, [f"{source} line {line}: not valid YAML: {exc.reason}"]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return {}, [f"{source}{where}: not valid YAML: {problem}"]
    except RecursionError:
        return {}, [f"{source}: nested too deeply to read"]
    except ValueError:  # an integer past Python's int() digit limit (PyYAML's own int())
        return {}, [f"{source}: holds a number too long to read (over 4300 digits)"]
    if data is None:
        return {}, [f"{source}: empty config"]
    if not isinstance(data, dict):
        kind = type(data).__name__
        return {}, [f"{source}: the top level is a {kind}, not a mapping of settings"]
    return {str(k) if not isinstance(k, str) else k: v for k, v in data.items()}, []


def defaults_list(values: Mapping[str, Any]) -> tuple[list[tuple[str | None, str | None, str]],
                                                      list[str]]:
    """A Hydra ``defaults:`` list as (group, package, name) entries in order; ``_self_`` is
    (None, None, "_self_"). ``- ppo_trainer`` is (None, None, "ppo_trainer");
    ``- actor@actor_rollout_ref.actor: dp_actor`` is ("actor", "actor_rollout_ref.actor",
    "dp_actor"); ``override``/``optional`` prefixes are dropped. Problems for what is not an
    entry."""
    raw = values.get("defaults")
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"defaults is a {type(raw).__name__}, not a list"]
    out: list[tuple[str | None, str | None, str]] = []
    problems: list[str] = []
    for item in raw:
        if isinstance(item, str):
            out.append((None, None, item))
        elif isinstance(item, dict) and len(item) == 1:
            (k, v), = item.items()
            k = str(k).strip()
            for prefix in ("override ", "optional "):
                if k.startswith(prefix):
                    k = k[len(prefix):].strip()
            group, _, package = k.partition("@")
            if v is None:
                continue  # "group: null" removes the group
            if not isinstance(v, str):
                problems.append(f"defaults entry {item!r}: a list of options is not supported")
                continue
            out.append((group, package or None, v))
        else:
            problems.append(f"defaults entry {item!r} not understood")
    return out, problems


# -- framework and locations ----------------------------------------------------------------------

def detect_framework(cmdline: Sequence[str], values: Mapping[str, Any]) -> str:
    """The job's framework (a name of ``rltui.frameworks.config_frameworks()``) or unknown:
    from the program the command line runs, else from the config's top-level keys (each
    framework's ``ConfigFacts``: keys only it has, then keys nested under a section, then a
    set of keys it has together)."""
    found = framework_in_cmdline(cmdline)
    if found != "unknown":
        return found
    if not isinstance(values, Mapping):
        return "unknown"
    known = [f for f in config_frameworks() if f.config is not None]
    for f in known:
        if any(k in values for k in f.config.top_keys):
            return f.name
    for f in known:
        for section, keys in f.config.nested_keys:
            inner = values.get(section)
            if isinstance(inner, Mapping) and any(k in inner for k in keys):
                return f.name
    for f in known:
        if f.config.all_keys and all(k in values for k in f.config.all_keys):
            return f.name
    return "unknown"


def default_config_name(framework: str) -> str | None:
    """The config Hydra loads when the command line names none (the framework's packaged
    one), or None for a framework that does not compose its config with Hydra."""
    fw = by_name(framework)
    return fw.config.default_config_name if fw is not None and fw.config is not None else None


def _flag_value(args: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last flag among ``names`` (``--flag v`` or ``--flag=v``)."""
    found: str | None = None
    for i, a in enumerate(args):
        name = _flag_name(a)
        if name in names:
            if "=" in a:
                found = a.split("=", 1)[1]
            elif i + 1 < len(args):
                found = args[i + 1]
    return found


def _flag_values(args: Sequence[str], names: Sequence[str]) -> list[str]:
    out = []
    for i, a in enumerate(args):
        if _flag_name(a) in names:
            if "=" in a:
                out.append(a.split("=", 1)[1])
            elif i + 1 < len(args):
                out.append(args[i + 1])
    return out


def config_locations(cmdline: Sequence[str]) -> ConfigLocation:
    """Where the command line says the config is, and its override arguments as written."""
    args = list(cmdline)
    framework = detect_framework(args, {})
    start = _program_start(args)
    program = args[start:]
    script = next((a for a in args[:start] if a.endswith(".py") and not a.startswith("-")), None)
    overrides = tuple(a for _, a in _program_args(args) if _looks_like_override(a))
    config_dir = _flag_value(program, ("--config-path", "-cp"))
    config_name = _flag_value(program, ("--config-name", "-cn"))
    config_file = _flag_value(program, ("--config",))
    search_dirs = tuple(_flag_values(program, ("--config-dir", "-cd")))
    if script is None:
        # AReaL runs `python -m areal.launcher.local path/to/train.py --config x.yaml`.
        script = next((a for a in program if a.endswith(".py") and not a.startswith("-")
                       and "=" not in a), None)
    name_is_default = False
    packaged = default_config_name(framework)
    if config_name is None and (packaged is not None or config_dir is not None) \
            and config_file is None:
        config_name = packaged or HYDRA_DEFAULT_CONFIG
        name_is_default = True
    return ConfigLocation(framework=framework, config_dir=config_dir, config_name=config_name,
                          name_is_default=name_is_default, config_file=config_file,
                          search_dirs=search_dirs, script=script, overrides=overrides)


def hydra_config_file(name: str) -> str:
    """Hydra's config name to a file name: "ppo_trainer" -> "ppo_trainer.yaml"."""
    return name if name.endswith((".yaml", ".yml")) else name + ".yaml"
