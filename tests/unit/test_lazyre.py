"""LazyPattern: a module-level regex compiled at its first use, behaving as the compiled one."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys

import pytest

import rltui
from rltui.parsing.lazyre import LazyPattern, every_pattern


def test_every_lazy_pattern_of_every_module_compiles():
    """A typo in a pattern would surface only when its rare line arrives: compile them all."""
    for info in pkgutil.walk_packages(rltui.__path__, "rltui."):
        if info.name.startswith(("rltui.parsing.", "rltui.frameworks", "rltui.diagnosis.")):
            importlib.import_module(info.name)
    patterns = every_pattern()
    assert len(patterns) > 50  # the parsers' patterns are registered
    for p in patterns:
        assert isinstance(p.compiled, re.Pattern), p


def test_it_is_not_compiled_before_its_first_use():
    code = ("import re\n"
            "seen, compile_ = [], re.compile\n"
            "re.compile = lambda p, flags=0: (seen.append(p), compile_(p, flags))[1]\n"
            "from rltui.parsing import oom\n"
            "print(sum('Tried to allocate' in str(p) for p in seen))\n"
            "oom._TRIED.search('x')\n"
            "oom._TRIED.search('y')\n"
            "print(sum('Tried to allocate' in str(p) for p in seen))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["0", "1"]  # not at import; once at the first use, never again


def _span(m):
    return m.span() if m else None


@pytest.mark.parametrize("source, flags, text", [
    (r"(?P<word>[a-z]+)(\d+)", 0, "xx abc123 de45"),
    (r"RANK (\d+)", re.I, "rank 3 and Rank 4"),
    (rb"\x80(.)", re.S, b"a\x80\nb\x80c"),
])
def test_it_answers_as_the_compiled_pattern(source, flags, text):
    lazy, real = LazyPattern(source, flags), re.compile(source, flags)
    assert lazy.pattern == real.pattern  # before the first use too
    assert lazy.search(text).group(0) == real.search(text).group(0)
    assert _span(lazy.match(text, 3)) == _span(real.match(text, 3))
    assert lazy.findall(text) == real.findall(text)
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in real.finditer(text)]
    empty = text[:0]
    assert lazy.sub(empty, text) == real.sub(empty, text)
    assert lazy.subn(empty, text, count=1) == real.subn(empty, text, count=1)
    assert lazy.split(text) == real.split(text)
    assert (lazy.flags, lazy.groups, lazy.groupindex) == (real.flags, real.groups,
                                                          real.groupindex)
    assert _span(lazy.fullmatch(text)) == _span(real.fullmatch(text))


def test_a_bad_pattern_fails_at_its_first_use_and_an_unknown_name_is_an_attribute_error():
    bad = LazyPattern(r"(unclosed")
    with pytest.raises(re.error):
        bad.search("x")
    with pytest.raises(AttributeError):
        LazyPattern("x").no_such_method  # noqa: B018
