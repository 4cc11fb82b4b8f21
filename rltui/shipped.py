"""The folders shipped beside the code (themes/, docs/): inside the installed wheel as
``rltui/<name>`` (hatch force-include), else at the top of the checkout this package was imported
from (run in place, or an editable install)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importlib.abc's name is deprecated from 3.12
    from importlib.resources.abc import Traversable  # novermin (3.11+, checkers only)


class NotShipped(LookupError):
    """Neither place holds the folder: a broken install. The message says where it looked."""


def shipped_folder(name: str) -> Traversable:
    inside = resources.files("rltui").joinpath(name)
    if inside.is_dir():
        return inside
    checkout = Path(__file__).resolve().parent.parent / name
    if checkout.is_dir():
        return checkout
    raise NotShipped(f"looked in {inside} and {checkout}")
