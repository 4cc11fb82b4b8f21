"""Write readings to a scenario folder as they arrive (``rltui record``).

Each reading is one JSON line, flushed at once, so a recording killed mid-way still replays up
to its last whole line. Secrets never reach the file: every string of a reading (log lines,
thread names, command lines, messages) passes ``rltui.scrub`` on its way in.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

from rltui import __version__
from rltui.model import Reading
from rltui.scrub import scrub
from rltui.serialize import reading_to_data
from rltui.sources.replay import META_FILE, READINGS_FILE, SCHEMA_VERSION


class Recorder:
    def __init__(self, out_dir: str | Path, host: str = "", job: str = "",
                 intervals: dict[str, float] | None = None, description: str = "") -> None:
        self.path = Path(out_dir)
        if self.path.exists() and any(self.path.iterdir()):
            raise FileExistsError(f"{self.path}: exists and is not empty; choose a new folder")
        self.path.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "created": time.time(),
            "writer": f"rltui {__version__}",
            "host": host,
            "job": job,
            "description": description,
            "sources": {name: {"interval": s} for name, s in (intervals or {}).items()},
        }
        (self.path / META_FILE).write_text(json.dumps(scrub(meta), indent=2) + "\n", encoding="utf-8")
        self._out: IO[str] | None = (self.path / READINGS_FILE).open("w", encoding="utf-8")
        self.count = 0

    def write(self, reading: Reading) -> None:
        if self._out is None:
            return
        self._out.write(json.dumps(scrub(reading_to_data(reading)), separators=(",", ":")) + "\n")
        self._out.flush()
        self.count += 1

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
