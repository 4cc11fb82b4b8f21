"""YAML settings: defaults, paths, errors that name file, line and key, and save_theme."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltui.config import (
    THEMES,
    Cadence,
    ConfigError,
    PySpy,
    Settings,
    config_path,
    load,
    parse,
    save_theme,
)
from rltui.diagnosis.thresholds import Thresholds

FULL = """\
theme: light            # a comment
history: 120

cadence:
  gpus: 2
  procs: 0.25
  ui: 1.0

thresholds:
  gpu_idle_pct: 3.5
  gpu_busy_pct: 60
  gpu_idle_sustain_s: 45.0
  rank_exit_grace_s: 0

pyspy:
  path: /opt/py-spy
  interval: 0
  nonblocking: false
  native: yes
  timeout: 2.5
  max_concurrent: 3
"""


def test_every_setting_is_read():
    s = parse(FULL, "cfg.yaml")
    assert s == Settings(
        theme="light", history=120,
        cadence=Cadence(gpus=2.0, procs=0.25, ui=1.0),
        thresholds=Thresholds(gpu_idle_pct=3.5, gpu_busy_pct=60.0, gpu_idle_sustain_s=45.0,
                              rank_exit_grace_s=0.0),
        pyspy=PySpy(path="/opt/py-spy", interval=0.0, nonblocking=False, native=True,
                    timeout=2.5, max_concurrent=3),
        path="cfg.yaml",
    )
    assert isinstance(s.cadence.gpus, float)
    assert isinstance(s.thresholds.gpu_busy_pct, float)


@pytest.mark.parametrize("text", [
    "",
    "# only a comment\n",
    "---\n",
    "~\n",
])
def test_empty_file_gives_the_defaults(text):
    s = parse(text, "c.yaml")
    assert s == Settings(path="c.yaml")


def test_empty_section_gives_its_defaults():
    s = parse("thresholds:\ncadence: ~\n", "c.yaml")
    assert s.thresholds == Thresholds() and s.cadence == Cadence()


def test_partial_section_keeps_other_defaults():
    s = parse("thresholds:\n  gpu_idle_pct: 1\n", "c.yaml")
    assert s.thresholds == Thresholds(gpu_idle_pct=1.0)


def test_quoted_string_is_kept_as_written():
    assert parse("pyspy:\n  path: 'yes'\n").pyspy.path == "yes"


@pytest.mark.parametrize(("text", "line", "fragments"), [
    pytest.param("theme: dark\ncolour: red\n", 2, ["unknown key 'colour'", "known: theme"],
                 id="unknown-top-level-key"),
    pytest.param("theme: dark\nthresholds:\n  gpu_idle_pct: 5\n  gpu_idel_sustain_s: 3\n", 4,
                 ["unknown key 'thresholds.gpu_idel_sustain_s'", "gpu_idle_sustain_s"],
                 id="unknown-nested-key"),
    pytest.param("pyspy:\n  bogus: 1\n", 2, ["unknown key 'pyspy.bogus'"],
                 id="unknown-pyspy-key"),
    pytest.param("cadence:\n  ui: 1\n  nope: 2\n", 3, ["unknown key 'cadence.nope'"],
                 id="unknown-cadence-key"),
    pytest.param("\n\nthresholds:\n  gpu_idle_pct: lots\n", 4,
                 ["thresholds.gpu_idle_pct: expected a float, got 'lots'"], id="wrong-type-float"),
    pytest.param("thresholds:\n  gpu_idle_pct: '5'\n", 2,
                 ["thresholds.gpu_idle_pct: expected a float"], id="quoted-number"),
    pytest.param("thresholds:\n  gpu_idle_pct: true\n", 2,
                 ["thresholds.gpu_idle_pct: expected a float"], id="bool-for-float"),
    pytest.param("thresholds:\n  gpu_idle_pct: [1, 2]\n", 2,
                 ["thresholds.gpu_idle_pct: expected a float, got a list"], id="list-for-float"),
    pytest.param("history: 12.5\n", 1, ["history: expected a int"], id="float-for-int"),
    pytest.param("history: many\n", 1, ["history: expected a int"], id="text-for-int"),
    pytest.param("pyspy:\n  max_concurrent: 2.5\n", 2, ["pyspy.max_concurrent: expected a int"],
                 id="float-for-nested-int"),
    pytest.param("pyspy:\n  nonblocking: 1\n", 2, ["pyspy.nonblocking: expected a bool"],
                 id="int-for-bool"),
    pytest.param("pyspy:\n  path: 12\n", 2, ["pyspy.path: expected a str"], id="int-for-str"),
    pytest.param("theme:\n  name: dark\n", 2, ["theme: expected a str, got a mapping"],
                 id="mapping-for-theme"),
    pytest.param("thresholds: 5\n", 1, ["thresholds: expected a mapping"],
                 id="scalar-for-section"),
    pytest.param("cadence:\n  - 1\n", 2, ["cadence: expected a mapping"], id="list-for-section"),
    pytest.param("cadence:\n  gpus: -1\n", 2, ["cadence.gpus: must not be negative, got -1"],
                 id="negative-float"),
    pytest.param("thresholds:\n  rank_exit_grace_s: -0.5\n", 2,
                 ["thresholds.rank_exit_grace_s: must not be negative"], id="negative-threshold"),
    pytest.param("pyspy:\n  max_concurrent: -3\n", 2,
                 ["pyspy.max_concurrent: must not be negative"],
                 id="negative-int"),
    pytest.param("history: 5\n", 1, ["history: must be at least 10"], id="history-too-small"),
    pytest.param("theme: neon\n", 1, ["theme: unknown theme 'neon'", "dark, light, colorblind"],
                 id="unknown-theme"),
    pytest.param("theme: dark\nhistory: [1\n", 3, ["not valid YAML"], id="invalid-yaml"),
    pytest.param("theme: dark\n  history: 5\n", 2, ["not valid YAML"], id="bad-indent"),
    pytest.param("- theme\n- dark\n", 1, ["the top level must be a mapping"], id="list-top-level"),
    pytest.param("\njust text\n", 2, ["the top level must be a mapping"], id="scalar-top-level"),
])
def test_errors_name_the_file_and_the_line(text, line, fragments):
    with pytest.raises(ConfigError) as err:
        parse(text, "my/config.yaml")
    message = str(err.value)
    assert message.startswith(f"my/config.yaml line {line}: "), message
    for fragment in fragments:
        assert fragment in message


def test_invalid_character_names_the_line():
    with pytest.raises(ConfigError, match=r"^my/config.yaml line 2: not valid YAML"):
        parse("theme: dark\nhistory: \x07\n", "my/config.yaml")


@pytest.mark.parametrize("text", ["? [a, b]\n: 1\n", "thresholds:\n  ? [a]\n  : 1\n"])
def test_non_scalar_key_is_a_config_error(text):
    with pytest.raises(ConfigError, match=r"^c.yaml line \d+: "):
        parse(text, "c.yaml")


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


# -- loading from disk -----------------------------------------------------------------------

def test_load_missing_file_gives_the_defaults(tmp_path):
    assert load(tmp_path / "nope.yaml") == Settings()


def test_load_names_the_real_file(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("theme: colorblind\n", encoding="utf-8")
    s = load(path)
    assert s.theme == "colorblind" and s.path == str(path)
    path.write_text("theme: colorblind\nbogus: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path} line 2: unknown key 'bogus'"):
        load(path)


def test_load_unreadable_file_is_a_config_error(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"theme: \xff\xfe\n")
    with pytest.raises(ConfigError, match="cannot read"):
        load(path)


# -- config_path -----------------------------------------------------------------------------

@pytest.mark.parametrize(("env", "expected"), [
    ({"RLTUI_CONFIG": "/etc/rltui.yaml", "XDG_CONFIG_HOME": "/x", "HOME": "/h"},
     "/etc/rltui.yaml"),
    ({"RLTUI_CONFIG": "", "XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/rltui/config.yaml"),
    ({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}, "/x/rltui/config.yaml"),
    ({"XDG_CONFIG_HOME": "", "HOME": "/h"}, "/h/.config/rltui/config.yaml"),
    ({"HOME": "/h"}, "/h/.config/rltui/config.yaml"),
])
def test_config_path_resolution(env, expected):
    assert config_path(env) == Path(expected)


def test_rltui_config_expands_the_user(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_path({"RLTUI_CONFIG": "~/c.yaml"}) == tmp_path / "c.yaml"


def test_config_path_reads_the_process_environment_by_default(monkeypatch, tmp_path):
    monkeypatch.setenv("RLTUI_CONFIG", str(tmp_path / "from-env.yaml"))
    assert config_path() == tmp_path / "from-env.yaml"


# -- save_theme ------------------------------------------------------------------------------

COMMENTED = """\
# my rltui settings
theme: dark   # picked in the app
history: 300  # keep more

thresholds:
  # tuned for our cluster
  gpu_idle_pct: 2
"""


def test_save_theme_rewrites_only_the_theme_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    assert save_theme("light", path) == path
    after = path.read_text(encoding="utf-8")
    before_lines, after_lines = COMMENTED.splitlines(), after.splitlines()
    assert len(after_lines) == len(before_lines)
    changed = [i for i, (b, a) in enumerate(zip(before_lines, after_lines)) if b != a]
    assert changed == [1]
    assert after_lines[1].startswith("theme: light")
    assert load(path).theme == "light"
    assert load(path).thresholds.gpu_idle_pct == 2.0
    assert not (tmp_path / "config.yaml.tmp").exists()


def test_save_theme_keeps_a_comment_on_the_theme_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(COMMENTED, encoding="utf-8")
    save_theme("light", path)
    assert path.read_text(encoding="utf-8").splitlines()[1] == "theme: light   # picked in the app"


def test_save_theme_leaves_nested_and_commented_theme_keys_alone(tmp_path):
    path = tmp_path / "config.yaml"
    text = "# theme: light\nhistory: 20\n"
    path.write_text(text, encoding="utf-8")
    save_theme("colorblind", path)
    assert path.read_text(encoding="utf-8") == text + "theme: colorblind\n"


@pytest.mark.parametrize(("before", "after"), [
    ("history: 20\n", "history: 20\ntheme: light\n"),
    ("history: 20", "history: 20\ntheme: light\n"),  # no final newline
    ("", "theme: light\n"),
])
def test_save_theme_appends_when_there_is_no_theme_line(tmp_path, before, after):
    path = tmp_path / "config.yaml"
    path.write_text(before, encoding="utf-8")
    save_theme("light", path)
    assert path.read_text(encoding="utf-8") == after


def test_save_theme_creates_the_file_and_its_folder(tmp_path):
    path = tmp_path / "deep" / "rltui" / "config.yaml"
    save_theme("colorblind", path)
    assert path.read_text(encoding="utf-8") == "theme: colorblind\n"
    assert load(path).theme == "colorblind"


def test_save_theme_uses_config_path_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("RLTUI_CONFIG", str(tmp_path / "c.yaml"))
    assert save_theme("dark") == tmp_path / "c.yaml"
    assert (tmp_path / "c.yaml").read_text(encoding="utf-8") == "theme: dark\n"


def test_save_theme_refuses_an_unknown_theme(tmp_path):
    path = tmp_path / "config.yaml"
    with pytest.raises(ValueError, match="neon"):
        save_theme("neon", path)
    assert not path.exists()


@pytest.mark.parametrize("theme", THEMES)
def test_every_theme_round_trips(tmp_path, theme):
    path = tmp_path / "config.yaml"
    save_theme(theme, path)
    assert load(path).theme == theme
