"""The rank table's filter (``/``): what was typed, parsed once, then matched against each row.

Pure: no Textual, no I/O (the ``pure`` import contract holds it to that), so the grammar is
tested on its own. The words, separated by spaces, must all match (each narrows the rows):

- a rank set, as rltui prints them: ``3``, ``0-3,7`` (``rank:0-3`` says it outright);
- a state: a process state (``running``, ``sleeping``, ``disk-sleep``, ``zombie``...), how a
  departed rank left (``exited``, ``missing``), ``departed`` (any of those), ``live``,
  ``unknown`` (a lost node's rank) or ``stalled`` (named by a stall or hang symptom);
- a stack class: ``#2`` (its number on the compare screen) or ``class:NAME`` (where it waits);
- a node: ``node:NAME`` (its full or short host name);
- any other word: a node, a stack class's name or a role that holds it (any case).
"""

from __future__ import annotations

from dataclasses import dataclass

from rltui.rankset import expand

# Words read as a state rather than searched for: the process states psutil reports, how a
# departed rank left, and the rank table's own words.
PROCESS_STATES = frozenset({"running", "sleeping", "disk-sleep", "stopped", "tracing-stop",
                            "zombie", "dead", "idle", "waking", "parked"})
DEPARTED_STATES = frozenset({"exited", "missing"})
STATE_WORDS = PROCESS_STATES | DEPARTED_STATES | {"departed", "live", "unknown", "stalled"}
_RANK_CHARS = frozenset("0123456789,-")


class FilterError(ValueError):
    """What is wrong with the typed filter, in words for the input's border."""


@dataclass(frozen=True, slots=True)
class RowFacts:
    """What a row is filtered on; the pane fills one per row."""

    rank: int | None = None
    state: str = ""  # the process state, or how it left: exited | zombie | missing | unknown
    departed: bool = False
    node: str = ""
    stack_class: int | None = None  # 1-based, as "#1" on the compare screen
    stack_name: str = ""  # where the class waits: "all_reduce"
    stalled: bool = False
    role: str = ""


@dataclass(frozen=True, slots=True)
class Term:
    kind: str  # rank | state | class | node | word
    text: str = ""
    ranks: frozenset[int] = frozenset()
    number: int | None = None

    def matches(self, row: RowFacts) -> bool:
        if self.kind == "rank":
            return row.rank is not None and row.rank in self.ranks
        if self.kind == "state":
            return _state_matches(self.text, row)
        if self.kind == "class":
            if self.number is not None:
                return row.stack_class == self.number
            return self.text in row.stack_name.lower()
        if self.kind == "node":
            return _node_matches(self.text, row.node)
        return (self.text in row.node.lower() or self.text in row.stack_name.lower()
                or self.text == row.role.lower())


@dataclass(frozen=True, slots=True)
class RowFilter:
    text: str = ""
    terms: tuple[Term, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.terms)

    def matches(self, row: RowFacts) -> bool:
        return all(term.matches(row) for term in self.terms)


def parse(text: str) -> RowFilter:
    """The filter typed in ``text``; an empty text filters nothing. Raises FilterError."""
    return RowFilter(" ".join(text.split()), tuple(_term(word) for word in text.split()))


def _term(word: str) -> Term:
    lowered = word.lower()
    prefix, sep, rest = lowered.partition(":")
    if sep and prefix in ("rank", "ranks", "state", "class", "node"):
        if not rest:
            raise FilterError(f"{prefix}: needs a value after the colon")
        if prefix in ("rank", "ranks"):
            return _ranks(rest)
        if prefix == "state":
            if rest not in STATE_WORDS:
                raise FilterError(f"unknown state {rest!r}; one of: "
                                  + ", ".join(sorted(STATE_WORDS)))
            return Term("state", rest)
        if prefix == "class":
            return _class(rest)
        return Term("node", rest)
    if set(lowered) <= _RANK_CHARS and any(c.isdigit() for c in lowered):
        return _ranks(lowered)
    if lowered.startswith("#"):
        return _class(lowered[1:])
    if lowered in STATE_WORDS:
        return Term("state", lowered)
    return Term("word", lowered)


def _ranks(text: str) -> Term:
    try:
        ranks = expand(text)
    except ValueError:
        raise FilterError(f"not a rank set: {text!r} (e.g. 0-3,7)") from None
    return Term("rank", text, ranks=frozenset(ranks))


def _class(text: str) -> Term:
    number = text.removeprefix("#")
    if number.isdigit():
        if int(number) < 1:
            raise FilterError("stack classes are numbered from #1")
        return Term("class", number, number=int(number))
    if not text:
        raise FilterError("# needs a class number: #1 is the largest class")
    return Term("class", text)


def _state_matches(word: str, row: RowFacts) -> bool:
    if word == "stalled":
        return row.stalled
    if word == "departed":
        return row.departed
    if word == "live":
        return not row.departed and row.state != "unknown"
    return row.state == word


def _node_matches(name: str, node: str) -> bool:
    node = node.lower()
    return node == name or node.split(".", 1)[0] == name
