"""Does a generated text contain the expected answer? Pure.

The rules, in order (the first that finds something decides):

1. ``\\boxed{...}`` (or ``\\fbox{...}``): the content of the last one, braces balanced;
2. a stated answer: the last ``the answer is X`` or ``#### X`` (GSM8K style); of ``X`` only
   its first clause counts (up to ``, ``, ``;``, ``!``, ``?``, `` because``...): "the answer is
   yes, of course" states "yes";
3. for a numeric expected answer, the last number in the text (``1,234`` is one number,
   ``1,2,3`` three);
4. otherwise, whether the normalised expected answer occurs in the normalised text as whole
   words: "no" is not found in "I do not know", nor "four" in "fourteen".

Normalising lower-cases, collapses white space, drops surrounding ``$``/``\\(``/``\\)``, quotes,
a trailing full stop, thousands separators (only in the ``1,234,567`` form) and
``\\text{}``/``\\mathrm{}`` wrappers. Numbers compare by value (``1,000`` = ``1000.0``,
``\\frac{1}{2}`` = ``0.5``, ``50%`` = ``50``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_STATED = re.compile(r"answer\s+is\s*:?\s*(.+?)(?:\.(?:\s|$)|\n|$)", re.IGNORECASE)
_HASHES = re.compile(r"####\s*(.+?)\s*(?:\n|$)")
# a number with thousands separators only in the 1,234 form; "1,2,3" is three numbers
_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|-?\d+(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_WRAPPERS = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\s*\{([^{}]*)\}")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*(-?[\d.]+)\s*\}\s*\{\s*(-?[\d.]+)\s*\}")
_THOUSANDS = re.compile(r"(?<!\d)(?<!\d,)\d{1,3}(?:,\d{3})+(?!\d|,\d)")
# where a stated answer's first clause ends: a comma or semicolon before a space, a sentence
# mark, or a word that starts a reason
_CLAUSE_END = re.compile(r"[,;](?=\s|$)|;|[!?](?=\s|$)|\s+(?:because|since|as|so|which)\b",
                         re.IGNORECASE)


@dataclass(frozen=True)
class AnswerMatch:
    match: bool
    extracted: str | None       # what was read from the text (None: substring rule)
    method: str                 # boxed | stated | last-number | substring | none


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...}, nested braces included; None if there is none or it
    is not closed (a generation cut at max tokens)."""
    found = None
    for m in _BOX_START.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            found = text[m.end():i - 1]
    return found


def stated_answer(text: str) -> str | None:
    """The last ``answer is X`` (its first clause) or ``#### X`` in the text."""
    candidates = [(m.start(), _CLAUSE_END.split(m.group(1), 1)[0])
                  for m in _STATED.finditer(text)]
    candidates += [(m.start(), m.group(1)) for m in _HASHES.finditer(text)]
    if not candidates:
        return None
    return max(candidates)[1].strip() or None


def normalise(text: str) -> str:
    s = text.strip()
    for _ in range(3):  # a few rounds peel nested wrappers: $\text{5}$
        before = s
        s = _WRAPPERS.sub(r"\1", s)
        s = s.strip().strip("$").strip()
        if s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2].strip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'`":
            s = s[1:-1].strip()
        s = s.rstrip(".").strip()
        if s == before:
            break
    s = _THOUSANDS.sub(lambda m: m.group().replace(",", ""), s)
    s = s.replace("\\!", "").replace("\\,", "")
    return " ".join(s.lower().split())


def as_number(text: str) -> Fraction | None:
    """The exact value of a text that is just a number (after normalising): ints, decimals,
    a/b, \\frac{a}{b}, a percent sign or a leading currency sign; None otherwise. Exact, so
    999999999 and 1000000000 stay different."""
    s = normalise(text)
    m = _FRAC.fullmatch(s)
    if m:
        parts = m.group(1), m.group(2)
    else:
        # commas left after normalise() are not thousands separators: not one number
        s = s.removesuffix("%").removesuffix("\\%").lstrip("$€£").strip()
        parts = tuple(s.split("/", 1)) if "/" in s else (s, "1")
    try:
        num, den = Fraction(parts[0].strip()), Fraction(parts[1].strip())
        return num / den
    except (ValueError, ZeroDivisionError):
        return None


def equivalent(found: str, expected: str) -> bool:
    a, b = normalise(found), normalise(expected)
    if a == b:
        return True
    x, y = as_number(found), as_number(expected)
    return x is not None and x == y


def last_number(text: str) -> str | None:
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def check_answer(text: str, expected: str) -> AnswerMatch:
    """Apply the rules above to one generated text."""
    for method, found in (("boxed", last_boxed(text)), ("stated", stated_answer(text))):
        if found is not None:
            return AnswerMatch(equivalent(found, expected), found, method)
    if as_number(expected) is not None:
        found = last_number(text)
        if found is None:
            return AnswerMatch(False, None, "none")
        return AnswerMatch(equivalent(found, expected), found, "last-number")
    return AnswerMatch(contains_words(normalise(text), normalise(expected)), None, "substring")


def contains_words(text: str, wanted: str) -> bool:
    """``wanted`` in ``text``, not inside a longer word: a word character at either end of
    ``wanted`` must not touch another one in ``text``."""
    if not wanted:
        return False
    pattern = re.escape(wanted)
    if re.match(r"\w", wanted):
        pattern = r"(?<!\w)" + pattern
    if re.search(r"\w$", wanted):
        pattern += r"(?!\w)"
    return re.search(pattern, text) is not None
