"""Scenario folders: recorded readings played back in order (``rltui replay``, tests).

A scenario folder holds ``scenario.json`` (``schema_version``, host, job, description, the
source cadences) and ``readings.jsonl``, one reading per line in time order. The format is
documented in docs/scenarios.md. ``Player`` is a pure clock: the app tells it how much wall time
passed, it hands back the readings that fall into that span, so pause, step and speed are just
arithmetic and tests can drive it without waiting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from rltui.model import Reading
from rltui.serialize import reading_from_json

SCHEMA_VERSION = 1
META_FILE = "scenario.json"
READINGS_FILE = "readings.jsonl"


# Bounds on a scenario's numbers: a reading's time stamp is POSIX seconds before the year 10000
# (datetime's range; 1e300 crashed the replay), a source's interval at most a day.
MAX_TIME = 253402300799.0
MAX_INTERVAL = 86400.0


class ScenarioError(ValueError):
    """A scenario folder that cannot be played; the message says why and where."""


class Scenario(msgspec.Struct, frozen=True):
    path: str
    meta: dict[str, Any]
    readings: tuple[Reading, ...]
    warnings: tuple[str, ...] = ()

    @property
    def host(self) -> str:
        return str(self.meta.get("host", ""))

    @property
    def job(self) -> str:
        return str(self.meta.get("job", ""))

    @property
    def start(self) -> float:
        return self.readings[0].timestamp if self.readings else 0.0

    @property
    def end(self) -> float:
        return self.readings[-1].timestamp if self.readings else 0.0

    def intervals(self) -> dict[str, float]:
        sources = self.meta.get("sources") or {}
        out = {}
        for name, spec in sources.items():
            value = spec.get("interval") if isinstance(spec, dict) else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and 0 < value <= MAX_INTERVAL:  # not NaN, inf, 1e300 or a huge int
                out[name] = float(value)
        return out


def load(path: str | Path) -> Scenario:
    folder = Path(path)
    if not folder.is_dir():
        raise ScenarioError(f"{folder}: not a scenario folder (no such directory)")
    meta_path = folder / META_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScenarioError(f"{folder}: not a scenario folder ({META_FILE} is missing)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScenarioError(f"{meta_path}: unreadable: {exc}") from None
    except RecursionError:
        raise ScenarioError(f"{meta_path}: unreadable: JSON nested too deeply") from None
    if not isinstance(meta, dict):
        raise ScenarioError(f"{meta_path}: must hold a JSON object")
    version = meta.get("schema_version")
    if version != SCHEMA_VERSION:
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise ScenarioError(f"{meta_path}: schema_version {version} is newer than this rltui "
                                f"reads ({SCHEMA_VERSION}); upgrade rltui to replay it")
        raise ScenarioError(f"{meta_path}: unknown schema_version {version!r} "
                            f"(this rltui reads {SCHEMA_VERSION})")
    readings, warnings = _read_readings(folder / READINGS_FILE)
    readings.sort(key=lambda r: r.timestamp)  # stable: equal times keep file order
    return Scenario(str(folder), meta, tuple(readings), tuple(warnings))


def _read_readings(path: Path) -> tuple[list[Reading], list[str]]:
    readings: list[Reading] = []
    bad: list[str] = []
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: missing") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: unreadable: {exc}") from None
    with handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                reading = reading_from_json(raw, f"line {number}")
                if not 0 <= reading.timestamp <= MAX_TIME:  # NaN fails this too
                    raise ValueError(f"time stamp {reading.timestamp!r} is not a time "
                                     "(POSIX seconds up to the year 9999)")
                readings.append(reading)
            except RecursionError:
                bad.append(f"line {number}: JSON nested too deeply")
            except (ValueError, UnicodeDecodeError) as exc:
                # A recording cut by a crash ends in half a line; a damaged one has bad lines in
                # the middle. Either way keep what is good and say what was skipped.
                bad.append(f"line {number}: {str(exc)[:160]}")
    if bad and not readings:
        raise ScenarioError(f"{path}: no valid readings ({bad[0]})")
    warnings = []
    if bad:
        warnings.append(f"{path.name}: skipped {len(bad)} bad line(s), first {bad[0]}")
    return readings, warnings


@dataclass
class Player:
    """Hands out a scenario's readings as playback time advances."""

    scenario: Scenario
    speed: float = 1.0
    paused: bool = False
    _index: int = 0
    position: float = field(default=0.0)  # seconds since the scenario's first reading

    SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 64.0)

    @property
    def now(self) -> float:
        """Scenario time: what "now" means for diagnosis during playback."""
        return self.scenario.start + self.position

    @property
    def finished(self) -> bool:
        return self._index >= len(self.scenario.readings)

    @property
    def duration(self) -> float:
        return self.scenario.end - self.scenario.start

    def advance(self, wall_seconds: float) -> list[Reading]:
        if self.paused or self.finished:
            return []
        return self._to(self.position + max(0.0, wall_seconds) * self.speed)

    def step(self, seconds: float = 1.0) -> list[Reading]:
        """Move on by ``seconds`` of scenario time, paused or not."""
        return self._to(self.position + seconds)

    def to_end(self) -> list[Reading]:
        return self._to(self.duration)

    def faster(self) -> float:
        self.speed = next((s for s in self.SPEEDS if s > self.speed), self.speed)
        return self.speed

    def slower(self) -> float:
        self.speed = next((s for s in reversed(self.SPEEDS) if s < self.speed), self.speed)
        return self.speed

    def _to(self, position: float) -> list[Reading]:
        self.position = min(position, self.duration)
        limit = self.scenario.start + self.position
        readings = self.scenario.readings
        start = self._index
        while self._index < len(readings) and readings[self._index].timestamp <= limit:
            self._index += 1
        return list(readings[start:self._index])
