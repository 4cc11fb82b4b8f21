"""Which forbidden modules a set of rltui modules loads at run time, in a fresh interpreter.

The pure layers must not load the outside world (textual, rich, pynvml, psutil, subprocess).
What the libraries they are allowed to use load on their own does not count: on Python 3.10
msgspec imports uuid, whose platform module imports subprocess at the top (3.11 defers it), and
no rltui module runs it that way. The baseline is measured the same way, in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

# third-party packages the pure layers may import (pyproject's dependencies)
ALLOWED_LIBRARIES = ("msgspec",)

_WALK = (
    "import importlib, json, pkgutil, sys\n"
    "for name in {names!r}:\n"
    "    module = importlib.import_module(name)\n"
    "    if {walk!r}:\n"
    "        for info in pkgutil.walk_packages(getattr(module, '__path__', []), name + '.'):\n"
    # a workflow's worker runs as a child process and sets it up on import
    "            if not info.name.endswith(('.worker', '.__main__')):\n"
    "                importlib.import_module(info.name)\n"
    "print(json.dumps([m for m in {forbidden!r} if m in sys.modules]))\n"
)


def _loaded(names: Sequence[str], forbidden: Sequence[str], walk: bool, cwd: str | None) -> set:
    code = _WALK.format(names=list(names), walk=walk, forbidden=list(forbidden))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=cwd, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def forbidden_loaded(modules: Sequence[str], forbidden: Sequence[str], *, walk: bool = False,
                     cwd: str | None = None) -> list[str]:
    """The forbidden modules loaded by importing ``modules`` (with every submodule when
    ``walk``), less those the allowed libraries load by themselves."""
    baseline = _loaded(ALLOWED_LIBRARIES, forbidden, False, cwd)
    return sorted(_loaded(modules, forbidden, walk, cwd) - baseline)
