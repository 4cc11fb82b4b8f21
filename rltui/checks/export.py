"""Writing a check's report to files (the screen's export; the CLI has --markdown and
--json-out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def export_report(report: Any, folder: Path, stem: str) -> list[Path]:
    """Write ``report`` as ``<stem>-<time>.md`` and ``.json`` into ``folder``; a second export
    within the same second gets a new name instead of overwriting the first. Both pass
    ``rltui.scrub``: secrets hidden, control characters escaped in the markdown."""
    import json
    import time
    folder.mkdir(parents=True, exist_ok=True)
    base = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    name, n = base, 1
    while (folder / f"{name}.md").exists() or (folder / f"{name}.json").exists():
        n += 1
        name = f"{base}-{n}"
    markdown, data = folder / f"{name}.md", folder / f"{name}.json"
    from rltui.scrub import outgoing_text, scrub
    markdown.write_text(outgoing_text(report.to_markdown()), encoding="utf-8")
    data.write_text(json.dumps(scrub(report.to_json()), indent=2) + "\n", encoding="utf-8")
    return [markdown, data]
