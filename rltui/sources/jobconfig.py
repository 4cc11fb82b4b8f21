"""Load a training job's config: the YAML file(s) plus the overrides of its command line.

verl (Hydra): ``--config-path DIR --config-name NAME`` (default ``ppo_trainer``), the file's
``defaults:`` list followed where its files are found, then ``key=value`` overrides. AReaL:
``--config FILE.yaml`` then overrides. A path given by the user replaces the command line's file
(its overrides still apply). Nothing here raises for a missing, unreadable, oversized or bad
file: each becomes a line in ``JobConfig.problems``. Documented in docs/job-config.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rltui.diagnosis.oom.types import JobConfig
from rltui.parsing.jobconfig import (
    VERL_DEFAULT_CONFIG,
    ConfigLocation,
    apply_overrides,
    config_locations,
    deep_merge,
    defaults_list,
    detect_framework,
    hydra_config_file,
    parse_overrides,
    parse_yaml_config,
)
from rltui.sources import safeopen

MAX_CONFIG_BYTES = 4 << 20  # a job config is a few KiB; anything this big is not one
MAX_DEFAULTS_DEPTH = 8  # nested defaults lists followed at most this deep
_HYDRA_ONLY = ("defaults", "hydra")  # Hydra's own keys, not the job's


def read_config_file(path: Path) -> tuple[dict | None, str]:
    """(mapping, "") or (None, problem). A bad YAML file gives ({}, problem with its line)."""
    try:
        if path.is_dir():
            return None, f"{path}: a folder, not a config file"
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            return None, f"{path}: {size} bytes, larger than 4 MiB; not read as a config"
        raw = safeopen.read_bytes(path, MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        return None, f"{path}: not found"
    except safeopen.Refused as exc:
        return None, f"{path}: {exc.strerror}"
    except PermissionError:
        return None, f"{path}: permission denied"
    except OSError as exc:
        return None, f"{path}: cannot read: {exc.strerror or exc}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        return None, f"{path} line {line}: not UTF-8 text"
    values, problems = parse_yaml_config(text, str(path))
    return values, problems[0] if problems else ""


def _base(cwd: str | None) -> Path:
    try:
        return Path(cwd).expanduser() if cwd else Path.cwd()
    except OSError:
        return Path(".")


def _under(base: Path, path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else base / p


def _hydra_candidates(loc: ConfigLocation, base: Path) -> list[Path]:
    """Where Hydra would look for the named config: --config-path against the working folder
    and against the script's folder (Hydra's base for a relative path), then --config-dir."""
    name = hydra_config_file(loc.config_name or VERL_DEFAULT_CONFIG)
    dirs: list[Path] = []
    if loc.config_dir is not None:
        cfg = Path(loc.config_dir).expanduser()
        if cfg.is_absolute():
            dirs.append(cfg)
        else:
            dirs.append(base / cfg)
            if loc.script:
                dirs.append(_under(base, loc.script).parent / cfg)
    dirs += [_under(base, d) for d in loc.search_dirs]
    seen: list[Path] = []
    for d in dirs:
        p = d / name
        if p not in seen:
            seen.append(p)
    return seen


class _Composer:
    """Follows a Hydra ``defaults:`` list through the files it can find (bounded depth)."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.sources: list[str] = []

    def compose(self, values: dict, here: Path, search: Sequence[Path], depth: int = 0,
                seen: tuple[Path, ...] = ()) -> dict:
        entries, problems = defaults_list(values)
        self.problems += [f"{here}: {p}" for p in problems]
        own = {k: v for k, v in values.items() if k not in _HYDRA_ONLY}
        if not entries:
            return own
        if not any(name == "_self_" and group is None for group, _, name in entries):
            entries = [*entries, (None, None, "_self_")]
        out: dict = {}
        for group, package, name in entries:
            if group is None and name == "_self_":
                out = deep_merge(out, own)
                continue
            if depth >= MAX_DEFAULTS_DEPTH:
                self.problems.append(f"{here}: defaults nested deeper than "
                                     f"{MAX_DEFAULTS_DEPTH}; {name} not followed")
                continue
            loaded = self._load_entry(group, name, here, search, depth, seen)
            if loaded is None:
                continue
            target = _package(group, package)
            out = deep_merge(out, _nest(target, loaded) if target else loaded)
        return out

    def _load_entry(self, group: str | None, name: str, here: Path, search: Sequence[Path],
                    depth: int, seen: tuple[Path, ...]) -> dict | None:
        rel = Path(group or "") / hydra_config_file(name)
        dirs = [here.parent, *search]
        tried: list[Path] = []
        for d in dirs:
            p = d / rel
            if p in tried:
                continue
            tried.append(p)
            if p in seen:
                self.problems.append(f"{here}: defaults entry {name} includes itself; skipped")
                return None
            if not p.is_file():
                continue
            values, problem = read_config_file(p)
            if problem:
                self.problems.append(problem)
            if values is None:
                return None
            self.sources.append(str(p))
            return self.compose(values, p, search, depth + 1, (*seen, p))
        if group is None and name == VERL_DEFAULT_CONFIG:
            self.problems.append(f"{here}: defaults entry {name} is verl's packaged config, not "
                                 "found beside it; keys it does not set take verl's documented "
                                 "defaults")
        else:
            where = ", ".join(str(p) for p in tried)
            self.problems.append(f"{here}: defaults entry {(group + '/') if group else ''}{name} "
                                 f"not found (looked for {where}); its keys are missing")
        return None


def _package(group: str | None, package: str | None) -> str:
    """Where a defaults entry's content goes: its @package, else its group's path."""
    if package is not None:
        if package in ("_global_", ""):
            return ""
        if package == "_here_":
            return (group or "").replace("/", ".")
        return package.removeprefix("_global_.")
    return (group or "").replace("/", ".")


def _nest(dotted: str, values: dict) -> dict:
    out: Any = values
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return out


def load_job_config(cmdline: Sequence[str] | None = None, config_path: str | None = None,
                    cwd: str | None = None) -> JobConfig:
    """The job's effective config. ``cmdline``: the job's command line (the driver's is best:
    verl and AReaL put the overrides there); ``config_path``: a config file named by the user
    (replaces the one the command line names); ``cwd``: the job's working folder, against which
    relative paths resolve (default: this process's)."""
    args = [str(a) for a in (cmdline or ())]
    base = _base(cwd)
    loc = config_locations(args)
    problems: list[str] = []
    sources: list[str] = []
    values: dict = {}
    file: Path | None = None

    if config_path:
        file = _under(base, config_path)
    elif loc.config_file:
        file = _under(base, loc.config_file)
    elif loc.config_name is not None:
        candidates = _hydra_candidates(loc, base)
        file = next((p for p in candidates if p.is_file()), None)
        if file is None:
            name = loc.config_name
            looked = (f"looked for {', '.join(str(p) for p in candidates)}" if candidates
                      else "the command line gives no --config-path and verl's packaged "
                           "config is not read")
            tail = ("; keys the overrides do not set take verl's documented defaults"
                    if loc.framework == "verl" else "")
            problems.append(f"config {name} not found ({looked}){tail}")
    elif args:
        problems.append("the command line names no config file (--config, --config-path/"
                        "--config-name); only its overrides were read")
    else:
        problems.append("no command line and no config file: nothing to read")

    if file is not None:
        read, problem = read_config_file(file)
        if problem:
            problems.append(problem)
        if read is not None:
            sources.append(str(file))
            composer = _Composer()
            search = [_under(base, d) for d in loc.search_dirs]
            values = composer.compose(read, file, search, 0, (file,))
            problems += composer.problems
            sources += composer.sources

    applied: list[str] = []
    overrides = []
    for arg in loc.overrides:
        parsed, trouble = parse_overrides([arg])
        problems += trouble
        if parsed:
            overrides += parsed
            applied.append(arg)
    if overrides:
        values = apply_overrides(values, overrides)
        sources.append(f"command line ({len(applied)} override{'s' if len(applied) != 1 else ''})")

    framework = detect_framework(args, values)
    if framework == "unknown" and (values or args):
        problems.append("framework not recognised from the command line or the config keys")
    return JobConfig(framework=framework, values=values, sources=tuple(sources),
                     overrides=tuple(applied), problems=tuple(_dedupe(problems)))


def _dedupe(items: Sequence[str]) -> list[str]:
    out: list[str] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out

