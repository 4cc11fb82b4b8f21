"""``rltui docs [TOPIC]``: the documentation, wherever rltui is installed.

The pages are the markdown files of ``docs/`` at the top of the source tree, packed into the
wheel as ``rltui/docs/`` (pyproject.toml's force-include, as the themes are), so help can say
``rltui docs TOPIC`` and mean a page the user has: a path such as ``docs/oom.md`` exists only
in a checkout. Printed as they are (markdown is plain text); ``| less`` pages them.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rltui.cli.common import EXIT_OK, UsageError

if TYPE_CHECKING:  # annotations only: importlib.abc's name is deprecated from 3.12
    from importlib.resources.abc import Traversable  # novermin (3.11+, checkers only)

SUFFIX = ".md"


def docs_folder() -> Traversable:
    """The shipped pages: ``rltui/docs`` in an installed wheel, else the ``docs/`` folder at
    the top of the checkout this package was imported from (run in place or editable)."""
    from rltui.shipped import NotShipped, shipped_folder
    try:
        return shipped_folder("docs")
    except NotShipped as exc:
        raise UsageError(f"the documentation is missing ({exc}): a broken install") from None


def topics(folder: Traversable | None = None) -> dict[str, Traversable]:
    """Every page by its topic (the file name without ``.md``), sorted."""
    folder = docs_folder() if folder is None else folder
    pages = {p.name[:-len(SUFFIX)]: p for p in folder.iterdir()
             if p.name.endswith(SUFFIX) and p.is_file()}
    return dict(sorted(pages.items()))


def title(page: Traversable) -> str:
    """The page's first heading, without the ``#``: what the listing shows beside the topic."""
    with page.open("r", encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return ""


def listing(pages: dict[str, Traversable]) -> str:
    width = max(len(t) for t in pages)
    rows = [f"  {topic:{width}}  {title(page)}" for topic, page in pages.items()]
    return ("Topics (rltui docs TOPIC prints one; start with getting-started):\n"
            + "\n".join(rows))


def cmd_docs(args: argparse.Namespace) -> int:
    pages = topics()
    if args.topic is None:
        print(listing(pages))
        return EXIT_OK
    # "oom.md" and "docs/oom.md" name the page too: that is how help used to point at them
    topic = args.topic.rsplit("/", 1)[-1]
    topic = topic[:-len(SUFFIX)] if topic.endswith(SUFFIX) else topic
    page = pages.get(topic)
    if page is None:
        raise UsageError(f"no docs topic {args.topic!r}; topics: {', '.join(pages)}")
    sys.stdout.write(page.read_text(encoding="utf-8"))
    return EXIT_OK
