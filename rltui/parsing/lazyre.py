"""Regular expressions compiled the first time they are used (pure, standard library only).

The parsers hold hundreds of module-level patterns, most of them for lines a given run never
meets (an OOM report, a watchdog timeout, a Ray memory table). Compiling them all at import was
a large part of rltui's start-up; ``LazyPattern`` defers each to its first use.

A ``LazyPattern`` reads like the compiled pattern: ``.match``, ``.search``, ``.fullmatch``,
``.sub``, ``.subn``, ``.split``, ``.findall``, ``.finditer``, ``.scanner``, ``.pattern``,
``.flags``, ``.groups``, ``.groupindex``; ``.compiled`` is the ``re.Pattern`` itself (for code
that needs a real one). The first use compiles it and keeps the compiled pattern's bound methods
on the object, so a later ``X.search(text)`` costs one attribute lookup more than on a compiled
pattern, nothing else. Patterns that every log line meets (the noise stripper's, the step
formats', the event reader's prefix) stay compiled at import: that lookup would be paid per
line (tests/benchmarks/test_step_parsing.py). A pattern that does not compile raises
``re.error`` at its first use; tests/unit/test_lazyre.py compiles every one of them.
"""

from __future__ import annotations

import re
from typing import Any

_FROM_COMPILED = ("match", "fullmatch", "search", "sub", "subn", "split", "findall", "finditer",
                  "scanner", "flags", "groups", "groupindex")

_every: list[LazyPattern] = []  # every LazyPattern made, for the test that compiles them all


class LazyPattern:
    """``re.compile(pattern, flags)``, done at the first use (see the module doc)."""

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        _every.append(self)

    def __getattr__(self, name: str) -> Any:
        # Called only for a name not yet on the object: before the first use, or a name the
        # compiled pattern does not have either.
        if name != "compiled" and name not in _FROM_COMPILED:
            raise AttributeError(name)
        compiled = re.compile(self.pattern, self._flags)
        attrs = self.__dict__
        for attr in _FROM_COMPILED:
            attrs[attr] = getattr(compiled, attr)
        attrs["compiled"] = compiled
        return attrs[name]

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}{f', {self._flags}' if self._flags else ''})"


def every_pattern() -> tuple[LazyPattern, ...]:
    """The LazyPatterns made so far (those of the modules imported)."""
    return tuple(_every)
