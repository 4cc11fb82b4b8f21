"""JSONL datasets for the checks: one JSON object a line, bad lines skipped with a reason. Pure
apart from reading the file; no third-party imports.

Two readers share the file handling, the line splitting and the error messages:

* ``read_objects(path)`` gives every line that is a JSON object, as it is. The workflow check
  uses it: each object is the ``data`` dict its ``run`` gets, whatever its keys.
* ``load_dataset(path)`` builds on it and gives ``Sample``s, for checks that need a prompt. A
  sample has ``prompt`` (a string) or ``messages`` (a chat list of
  ``{"role": str, "content": str | list}``) or ``input_ids`` (a list of non-negative ints, used
  as is) or several of them, and optionally ``answer`` (the expected answer, any scalar; kept as
  text). Other keys are kept in ``Sample.extra``, and ``Sample.data`` rebuilds the whole object;
  the rollout check uses neither.

A line that is not JSON or not an object (and, for samples, one with none of ``prompt``,
``messages`` and ``input_ids`` or a wrong type) is *skipped* and listed with its line number; it
does not stop the run. Only a file with nothing usable left is an error (``DatasetError``).
Blank lines are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class DatasetError(Exception):
    """The dataset cannot be used at all (missing, unreadable, no valid sample)."""


@dataclass(frozen=True)
class Sample:
    index: int                      # position among the valid samples, from 0
    line: int                       # line number in the file, from 1
    prompt: str | None = None
    messages: tuple[dict, ...] | None = None
    answer: str | None = None
    input_ids: tuple[int, ...] | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def data(self) -> dict:
        """The line's object as it was."""
        out = dict(self.extra)
        if self.prompt is not None:
            out["prompt"] = self.prompt
        if self.messages is not None:
            out["messages"] = [dict(m) for m in self.messages]
        if self.answer is not None:
            out["answer"] = self.answer
        if self.input_ids is not None:
            out["input_ids"] = list(self.input_ids)
        return out


@dataclass(frozen=True)
class SkippedLine:
    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass(frozen=True)
class Dataset:
    path: str
    samples: tuple[Sample, ...]
    skipped: tuple[SkippedLine, ...]
    truncated: bool = False         # --limit cut it short


Rows = list[tuple[int, dict]]       # (line number, the line's object)


def parse_object(text: str, line: int) -> dict | SkippedLine:
    """One line of the file: its JSON object, or why it is skipped."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return SkippedLine(line, f"not JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(obj, dict):
        return SkippedLine(line, f"a JSON {type(obj).__name__}, not an object")
    return obj


def _check_messages(value: Any) -> str | None:
    if not isinstance(value, list) or not value:
        return "'messages' must be a non-empty list of {role, content} objects"
    for i, msg in enumerate(value):
        if not isinstance(msg, dict):
            return f"'messages'[{i}] is not an object"
        if not isinstance(msg.get("role"), str):
            return f"'messages'[{i}] has no string 'role'"
        content = msg.get("content")
        if not isinstance(content, (str, list)) and content is not None:
            return f"'messages'[{i}].content must be a string or a list of parts"
    return None


def _answer_text(value: Any) -> str | None | bool:
    """The expected answer as text; False when the type makes no sense for an answer."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, int, float)):
        return str(value)
    return False


def sample_from(obj: dict, line: int, index: int) -> Sample | SkippedLine:
    """A line's object as a Sample, or why it is skipped."""
    prompt, messages = obj.get("prompt"), obj.get("messages")
    if prompt is None and messages is None and obj.get("input_ids") is None:
        return SkippedLine(line, "has none of 'prompt', 'messages' and 'input_ids'")
    if prompt is not None and not isinstance(prompt, str):
        return SkippedLine(line, f"'prompt' must be a string, not {type(prompt).__name__}")
    if messages is not None:
        problem = _check_messages(messages)
        if problem:
            return SkippedLine(line, problem)
    answer = _answer_text(obj.get("answer"))
    if answer is False:
        return SkippedLine(line, "'answer' must be a string or a number")
    ids = obj.get("input_ids")
    if ids is not None:
        if (not isinstance(ids, list) or not ids
                or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                           for t in ids)):
            return SkippedLine(line, "'input_ids' must be a non-empty list of non-negative ints")
        ids = tuple(ids)
    extra = {k: v for k, v in obj.items()
             if k not in ("prompt", "messages", "answer", "input_ids")}
    return Sample(index=index, line=line, prompt=prompt,
                  messages=tuple(messages) if messages is not None else None,
                  answer=answer, input_ids=ids, extra=extra)


def parse_line(text: str, line: int, index: int) -> Sample | SkippedLine:
    """One line of the file: a Sample, or why it is skipped."""
    obj = parse_object(text, line)
    return obj if isinstance(obj, SkippedLine) else sample_from(obj, line, index)


def _objects(lines: list[str], limit: int | None = None) -> tuple[Rows, list[SkippedLine]]:
    """The objects of numbered lines; stops before the first non-blank line past ``limit``."""
    rows: Rows = []
    skipped: list[SkippedLine] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        if limit is not None and len(rows) >= limit:
            break
        parsed = parse_object(text, number)
        if isinstance(parsed, SkippedLine):
            skipped.append(parsed)
        else:
            rows.append((number, parsed))
    return rows, skipped


def _samples(rows: Rows, skipped: list[SkippedLine],
             limit: int | None) -> tuple[list[Sample], list[SkippedLine], bool]:
    """Samples from the objects, at most ``limit``. Lines after the last sample kept do not
    count as skipped when the limit cut the file there (they were never looked at)."""
    last_line = max([line for line, _ in rows] + [s.line for s in skipped], default=0)
    samples: list[Sample] = []
    skipped = list(skipped)
    for line, obj in rows:
        if limit is not None and len(samples) >= limit:
            break
        parsed = sample_from(obj, line, len(samples))
        if isinstance(parsed, SkippedLine):
            skipped.append(parsed)
        else:
            samples.append(parsed)
    truncated = False
    if limit is not None and len(samples) >= limit:
        cut = samples[-1].line
        truncated = last_line > cut
        skipped = [s for s in skipped if s.line < cut]
    return samples, sorted(skipped, key=lambda s: s.line), truncated


def _read_lines(p: Path) -> list[str]:
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"dataset {str(p)!r} does not exist") from None
    except IsADirectoryError:
        raise DatasetError(f"dataset {str(p)!r} is a folder, not a JSONL file") from None
    except OSError as exc:
        raise DatasetError(f"cannot read dataset {str(p)!r}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"dataset {str(p)!r} is not UTF-8 text (byte {exc.start})") from None
    # split on newlines only: str.splitlines would also cut at U+2028 inside a JSON string
    return [ln.rstrip("\r") for ln in text.split("\n")]


def _nothing_usable(p: Path, skipped: list[SkippedLine]) -> DatasetError:
    """The error for a file with no usable line; it names the first skipped lines, so the user
    sees why."""
    if not skipped:
        return DatasetError(f"dataset {str(p)!r} holds no samples (empty file)")
    shown = "; ".join(str(s) for s in skipped[:3])
    more = f" (and {len(skipped) - 3} more)" if len(skipped) > 3 else ""
    return DatasetError(f"dataset {str(p)!r} holds no valid sample: {shown}{more}")


def read_objects(path: str | Path, limit: int | None = None) -> tuple[Rows, list[SkippedLine]]:
    """Every line of a JSONL file that is a JSON object, as ``(line number, object)``, and the
    lines skipped. With ``limit``, stops after that many objects (later lines are not read as
    JSON, nor listed as skipped). Raises DatasetError when the file cannot be read or holds no
    object."""
    p = Path(path).expanduser()
    rows, skipped = _objects(_read_lines(p), limit)
    if not rows:
        raise _nothing_usable(p, skipped)
    return rows, skipped


def load_dataset(path: str | Path, limit: int | None = None) -> Dataset:
    """Read a JSONL file as samples. Raises DatasetError when it cannot be read or holds no valid
    sample."""
    if limit is not None and limit < 1:
        raise DatasetError(f"--limit must be at least 1 (got {limit})")
    p = Path(path).expanduser()
    rows, skipped = read_objects(p)
    samples, skipped, truncated = _samples(rows, skipped, limit)
    if not samples:
        raise _nothing_usable(p, skipped)
    return Dataset(path=str(p), samples=tuple(samples), skipped=tuple(skipped),
                   truncated=truncated)
