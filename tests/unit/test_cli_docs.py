"""`rltui docs [TOPIC]` prints the pages shipped with rltui; `rltui demo --help` names the
default scenario and every scenario; no help text points at a docs/ path, which exists only in
a checkout. (The wheel carries the pages: tests/integration/test_wheel.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rltui import cli
from rltui.cli.common import EXIT_OK, EXIT_USAGE
from rltui.cli.docs import docs_folder, topics
from rltui.demo.scenarios import SCENARIOS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_in_a_checkout_the_pages_are_the_docs_folder():
    assert Path(str(docs_folder())) == DOCS
    assert list(topics()) == sorted(p.stem for p in DOCS.glob("*.md"))


def test_no_topic_lists_every_page_with_its_title(capsys):
    code, out, err = run(capsys, "docs")
    assert code == EXIT_OK and err == ""
    lines = out.splitlines()
    assert "rltui docs TOPIC" in lines[0]
    listed = {line.split()[0]: line.split(None, 1)[1] for line in lines[1:]}
    assert set(listed) == {p.stem for p in DOCS.glob("*.md")}
    assert listed["getting-started"] == "Getting started"
    assert listed["themes"] == "Themes"


@pytest.mark.parametrize("name", ["screen", "screen.md", "docs/screen.md"])
def test_a_topic_prints_its_page_as_it_is(capsys, name):
    code, out, err = run(capsys, "docs", name)
    assert code == EXIT_OK and err == ""
    assert out == (DOCS / "screen.md").read_text(encoding="utf-8")


def test_an_unknown_topic_says_so_lists_the_topics_and_exits_2(capsys):
    code, out, err = run(capsys, "docs", "no-such-page")
    assert code == EXIT_USAGE and out == ""
    assert err.startswith("rltui: error: no docs topic 'no-such-page'; topics: ")
    assert "getting-started" in err and "screen" in err


def test_demo_help_names_the_default_scenario_and_every_scenario(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit) as exit_:
        cli.main(["demo", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "(default: healthy;" in out
    assert "healthy (default): All ranks train" in out
    for name in SCENARIOS:
        assert re.search(rf"^  {re.escape(name)}( \(default\))?: ", out, re.M), name


def _helps(parser) -> list[str]:
    """Every help text of the parser and its sub-commands, the checks' and the agent's too."""
    import argparse
    texts = [parser.description or "", parser.epilog or ""]
    for action in parser._actions:
        texts.append(action.help or "")
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                later = getattr(action, "_later", {}).get(name)
                if later is not None:  # the flags the agent and the checks add when chosen
                    import importlib
                    module, function = later[1].split(":")
                    getattr(importlib.import_module(module), function)(sub)
                texts += _helps(sub)
    return texts


def test_no_help_text_points_at_a_path_of_the_checkout():
    texts = _helps(cli.build_parser())
    assert any("rltui docs getting-started" in t for t in texts)
    wrong = [t for t in texts if re.search(r"docs/[\w-]+\.md", t)]
    assert wrong == []
