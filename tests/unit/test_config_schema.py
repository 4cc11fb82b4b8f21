"""The config schema declared once (rltui.config.SCHEMA): the documentation is the schema's, the
parser reads its keys and types from it, and its error messages are the ones it always gave."""

from __future__ import annotations

import re
from dataclasses import fields, replace
from pathlib import Path

import pytest
import yaml

from rltui.config import (
    SCHEMA,
    THRESHOLD_DOCS,
    ConfigError,
    Logs,
    Settings,
    parse,
    settings_yaml,
)
from rltui.diagnosis.thresholds import Thresholds

PAGE = Path(__file__).parents[2] / "docs" / "configuration.md"
REGENERATE = 'python -c "from rltui.config import settings_yaml; print(settings_yaml())"'


def _documented_block(page: str) -> str:
    match = re.search(r"## Every setting\n.*?```yaml\n(.*?)```", page, re.DOTALL)
    assert match, "docs/configuration.md has no yaml block under '## Every setting'"
    return match.group(1)


def _dotted(mapping: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in mapping.items():
        out.add(prefix + key)
        if isinstance(value, dict):
            out |= _dotted(value, f"{prefix}{key}.")
    return out


def docs_problems(page: str) -> list[str]:
    """What the page says otherwise than the schema: keys documented and not in the schema,
    keys of the schema not documented, and any other difference from the generated block."""
    block = _documented_block(page)
    documented = _dotted(yaml.safe_load(block) or {})
    schema = {key.name for key in SCHEMA}
    problems = [f"documented, not in the schema: {k}" for k in sorted(documented - schema)]
    problems += [f"in the schema, not documented: {k}" for k in sorted(schema - documented)]
    if not problems and block != settings_yaml():
        problems.append("the block differs from the schema's text")
    return problems


def test_the_page_documents_the_schema():
    problems = docs_problems(PAGE.read_text(encoding="utf-8"))
    assert not problems, f"{problems}; the block is generated: {REGENERATE}"


def test_the_check_sees_a_key_added_or_removed():
    page = PAGE.read_text(encoding="utf-8")
    assert docs_problems(page.replace("  native: false", "  native: false\n  colour: red")) \
        == ["documented, not in the schema: pyspy.colour"]
    assert docs_problems(re.sub(r"\n  stall_floor_s:[^\n]*", "", page)) \
        == ["in the schema, not documented: thresholds.stall_floor_s"]
    assert docs_problems(page.replace("# NVML poll", "# NVML")) \
        == ["the block differs from the schema's text"]


def test_every_key_has_its_documentation():
    for key in SCHEMA:
        assert key.doc or key.section, key.name
    assert set(THRESHOLD_DOCS) == set(Thresholds.names())


def test_the_schema_is_the_settings_dataclasses():
    names = {key.name for key in SCHEMA}
    assert {f.name for f in fields(Settings)} - {"path"} == {n for n in names if "." not in n}
    assert {f"thresholds.{n}" for n in Thresholds.names()} <= names
    for key in SCHEMA:
        if "." in key.name:
            section, leaf = key.name.split(".")
            assert getattr(getattr(Settings(), section), leaf) == key.default, key.name


def test_the_documented_settings_are_the_defaults():
    """The generated block, read as a config file, gives the defaults (and its example parser):
    every key of the schema is read by the parser, with the type the schema gives."""
    settings = parse(settings_yaml(), "docs")
    (example,) = settings.logs.parsers
    assert example.name == "my-trainer" and example.metrics == (("l", "loss"),)
    assert settings == replace(Settings(path="docs"), logs=Logs(parsers=(example,)))


# Every message below is what rltui printed for that file before the schema was declared
# in one place (the parser's refactoring must not change a character of them).
MESSAGES = [
    ('theme: dark\ncolour: red\n',
     "my/config.yaml line 2: unknown key 'colour' (known: theme, history, logs, cadence, thresholds, pyspy)"),
    ('theme: dark\nthresholds:\n  gpu_idle_pct: 5\n  gpu_idel_sustain_s: 3\n',
     "my/config.yaml line 4: unknown key 'thresholds.gpu_idel_sustain_s' (known: gpu_idle_pct, gpu_busy_pct, gpu_idle_sustain_s, rank_exit_grace_s, stall_factor, stall_floor_s, stack_sample_gap_s, gpu_mem_warn_pct, gpu_temp_warn_c, cpu_busy_pct, stale_after_intervals)"),
    ('pyspy:\n  bogus: 1\n',
     "my/config.yaml line 2: unknown key 'pyspy.bogus' (known: path, interval, nonblocking, native, timeout, max_concurrent)"),
    ('cadence:\n  ui: 1\n  nope: 2\n',
     "my/config.yaml line 3: unknown key 'cadence.nope' (known: gpus, procs, logs, ui)"),
    ('\n\nthresholds:\n  gpu_idle_pct: lots\n',
     "my/config.yaml line 4: thresholds.gpu_idle_pct: expected a float, got 'lots'"),
    ("thresholds:\n  gpu_idle_pct: '5'\n",
     "my/config.yaml line 2: thresholds.gpu_idle_pct: expected a float, got '5'"),
    ('thresholds:\n  gpu_idle_pct: true\n',
     "my/config.yaml line 2: thresholds.gpu_idle_pct: expected a float, got 'true'"),
    ('thresholds:\n  gpu_idle_pct: [1, 2]\n',
     'my/config.yaml line 2: thresholds.gpu_idle_pct: expected a float, got a list'),
    ('thresholds:\n  gpu_idle_pct: {a: 1}\n',
     'my/config.yaml line 2: thresholds.gpu_idle_pct: expected a float, got a mapping'),
    ('thresholds:\n  gpu_idle_pct: .nan\n',
     'my/config.yaml line 2: thresholds.gpu_idle_pct: must be a finite number'),
    ('thresholds:\n  gpu_idle_pct: .inf\n',
     'my/config.yaml line 2: thresholds.gpu_idle_pct: .inf is too large (at most 1e+15)'),
    ('thresholds:\n  gpu_idle_pct: 1e16\n',
     "my/config.yaml line 2: thresholds.gpu_idle_pct: expected a float, got '1e16'"),
    ('history: 12.5\n',
     "my/config.yaml line 1: history: expected a int, got '12.5'"),
    ('history: many\n',
     "my/config.yaml line 1: history: expected a int, got 'many'"),
    ('history: 10000000000000000\n',
     'my/config.yaml line 1: history: 10000000000000000 is too large (at most 1e+15)'),
    ('history: 99999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999999\n',
     "my/config.yaml line 1: history: expected a int, got '9999999999999999999999999999999999999999'..."),
    ('pyspy:\n  max_concurrent: 2.5\n',
     "my/config.yaml line 2: pyspy.max_concurrent: expected a int, got '2.5'"),
    ('pyspy:\n  nonblocking: 1\n',
     "my/config.yaml line 2: pyspy.nonblocking: expected a bool, got '1'"),
    ('pyspy:\n  path: 12\n',
     "my/config.yaml line 2: pyspy.path: expected a str, got '12'"),
    ('pyspy:\n  path: [a]\n',
     'my/config.yaml line 2: pyspy.path: expected a str, got a list'),
    ('theme:\n  name: dark\n',
     'my/config.yaml line 2: theme: expected a str, got a mapping'),
    ('thresholds: 5\n',
     'my/config.yaml line 1: thresholds: expected a mapping of settings'),
    ('cadence:\n  - 1\n',
     'my/config.yaml line 2: cadence: expected a mapping of settings'),
    ('cadence:\n  gpus: -1\n',
     'my/config.yaml line 2: cadence.gpus: must not be negative, got -1.0'),
    ('thresholds:\n  rank_exit_grace_s: -0.5\n',
     'my/config.yaml line 2: thresholds.rank_exit_grace_s: must not be negative, got -0.5'),
    ('pyspy:\n  max_concurrent: -3\n',
     'my/config.yaml line 2: pyspy.max_concurrent: must not be negative, got -3'),
    ('history: 5\n',
     'my/config.yaml line 1: history: must be at least 10'),
    ('theme: neon\n',
     "my/config.yaml line 1: theme: unknown theme 'neon' (one of dark, light, colorblind)"),
    ('theme: 3\n',
     "my/config.yaml line 1: theme: expected a str, got '3'"),
    ('theme: dark\nhistory: [1\n',
     "my/config.yaml line 3: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    ('theme: dark\n  history: 5\n',
     'my/config.yaml line 2: not valid YAML: mapping values are not allowed here'),
    ('- theme\n- dark\n',
     'my/config.yaml line 1: the top level must be a mapping of settings'),
    ('\njust text\n',
     'my/config.yaml line 2: the top level must be a mapping of settings'),
    ('theme: dark\nhistory: \x07\n',
     'my/config.yaml line 2: not valid YAML: special characters are not allowed (character 7)'),
    ('? [a, b]\n: 1\n',
     'my/config.yaml line 1: keys must be plain names'),
    ('thresholds:\n  ? [a]\n  : 1\n',
     'my/config.yaml line 2: keys must be plain names'),
    ('theme: dark\ntheme: light\n',
     'my/config.yaml line 2: theme is given twice (first on line 1)'),
    ('cadence:\n  gpus: 1\n  gpus: 2\n',
     'my/config.yaml line 3: cadence.gpus is given twice (first on line 2)'),
    ('a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n',
     'my/config.yaml: not valid YAML: nested too deeply (more than 100 levels)'),
    ('logs: 5\n',
     'my/config.yaml line 1: logs: expected a mapping'),
    ('logs:\n  - a\n',
     'my/config.yaml line 2: logs: expected a mapping'),
    ('logs:\n  bogus: 1\n',
     "my/config.yaml line 2: unknown key 'logs.bogus' (known: paths, format, parsers, completion_patterns)"),
    ('logs:\n  paths: a.log\n',
     'my/config.yaml line 2: logs.paths: expected a list'),
    ('logs:\n  paths: [1]\n',
     "my/config.yaml line 2: logs.paths: expected a str, got '1'"),
    ('logs:\n  paths: [[a]]\n',
     'my/config.yaml line 2: logs.paths: expected a str, got a list'),
    ('logs:\n  format: nope\n',
     "my/config.yaml line 2: logs.format: unknown format 'nope' (one of auto, verl, areal, openrlhf, torchtitan, megatron, deepspeed, hf)"),
    ('logs:\n  format: custom\n',
     "my/config.yaml line 2: logs.format: unknown format 'custom' (one of auto, verl, areal, openrlhf, torchtitan, megatron, deepspeed, hf)"),
    ('logs:\n  format: [a]\n',
     'my/config.yaml line 2: logs.format: expected a str, got a list'),
    ("logs:\n  completion_patterns: ['(']\n",
     "my/config.yaml line 2: logs.completion_patterns: regex '(' does not compile: missing ), unterminated subpattern at position 0"),
    ('logs:\n  completion_patterns: x\n',
     'my/config.yaml line 2: logs.completion_patterns: expected a list'),
    ('logs:\n  parsers: x\n',
     'my/config.yaml line 2: logs.parsers: expected a list of {name, regex, metrics}'),
    ('logs:\n  parsers:\n    - x\n',
     'my/config.yaml line 3: logs.parsers: each parser is a mapping with name, regex and optional metrics'),
    ('logs:\n  parsers:\n    - name: a\n',
     'my/config.yaml line 3: logs.parsers: a parser needs a name and a regex'),
    ('logs:\n  parsers:\n    - name: a\n      regex: b\n      other: 1\n',
     "my/config.yaml line 3: logs.parsers: unknown key 'other' (known: name, regex, metrics)"),
    ("logs:\n  parsers:\n    - name: a\n      regex: '('\n",
     "my/config.yaml line 4: parser 'a': regex '(' does not compile: missing ), unterminated subpattern at position 0"),
    ("logs:\n  parsers:\n    - name: a\n      regex: 'x'\n",
     "my/config.yaml line 4: parser 'a': regex 'x' has no (?P<step>...) group"),
    ("logs:\n  parsers:\n    - name: a\n      regex: '(?P<step>\\d+)'\n      metrics: [a]\n",
     "my/config.yaml line 5: parser 'a': metrics: expected a mapping of regex group -> metric name"),
    ("logs:\n  parsers:\n    - name: a\n      regex: '(?P<step>\\d+)'\n      metrics: {l: 5}\n",
     "my/config.yaml line 5: metrics.l: expected a str, got '5'"),
    ("logs:\n  parsers:\n    - name: a\n      regex: '(?P<step>\\d+)'\n      metrics: {l: loss, l: reward}\n",
     'my/config.yaml line 5: logs.parsers[a].metrics.l is given twice (first on line 5)'),
    ("logs:\n  parsers:\n    - name: a\n      regex: '(?P<step>\\d+)'\n      metrics: {x: loss}\n",
     "my/config.yaml line 3: log parser 'a' (regex '(?P<step>\\\\d+)'): metrics names group 'x', which the regex lacks"),
    ("logs:\n  parsers:\n    - name: a\n      regex: '(?P<step>\\d+) (?P<l>\\S+)'\n      metrics: {l: nonsense}\n",
     "my/config.yaml line 3: log parser 'a' (regex '(?P<step>\\\\d+) (?P<l>\\\\S+)'): 'nonsense' is not a metric rltui knows (one of loss, reward, entropy, grad_norm, step_time, throughput, response_length, rollout_probs_diff)"),
    ("logs:\n  parsers:\n    - name: 5\n      regex: 'x'\n",
     "my/config.yaml line 3: logs.parsers.name: expected a str, got '5'"),
    ('logs:\n  parsers:\n    - name: a\n      regex: [x]\n',
     'my/config.yaml line 4: logs.parsers[a].regex: expected a str, got a list'),
    ('logs:\n  paths: [a]\n  paths: [b]\n',
     'my/config.yaml line 3: logs.paths is given twice (first on line 2)'),
    ('thresholds:\n  gpu_idle_pct: 5\n  gpu_idle_pct: 6\n',
     'my/config.yaml line 3: thresholds.gpu_idle_pct is given twice (first on line 2)'),
    ('cadence: []\n',
     'my/config.yaml line 1: cadence: expected a mapping of settings'),
    ('pyspy:\n  timeout: 1e15\n',
     "my/config.yaml line 2: pyspy.timeout: expected a float, got '1e15'"),
    ('pyspy:\n  timeout: -1e16\n',
     "my/config.yaml line 2: pyspy.timeout: expected a float, got '-1e16'"),
    ('history: -5\n',
     'my/config.yaml line 1: history: must be at least 10'),
    ('history: true\n',
     "my/config.yaml line 1: history: expected a int, got 'true'"),
    ('theme: "dark"\nhistory: \'100\'\n',
     "my/config.yaml line 2: history: expected a int, got '100'"),
]


@pytest.mark.parametrize(("text", "message"), MESSAGES, ids=range(len(MESSAGES)))
def test_error_messages_are_exactly_as_before(text, message):
    with pytest.raises(ConfigError) as err:
        parse(text, "my/config.yaml")
    assert str(err.value) == message
