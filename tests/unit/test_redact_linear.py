"""The scrubber stays linear on any line: one 40 KB run of word characters (a collapsed RL
sample, a hex dump) used to cost ~40 s of CPU (every pattern retried from each position of the
run), froze the agent's heartbeats and ``diagnose --report``; 128 KB took minutes.

Speed is measured as this process's CPU time (``time.process_time``), never wall-clock time
(other work shares the machine), and asserted two ways: the growth from n to 4n characters
must stay near 4x (quadratic would be 16x), and a 1 MB line must cost a few seconds at most
(quadratic cost hours), a bound generous enough for a slow, shared machine."""

from __future__ import annotations

import time

import pytest

from rltui.redact import is_secret_name, redact_argv, redact_url
from rltui.scrub import outgoing_text, scrub

# One shape per thing a pattern looks for: the runs each pattern's characters allow, and the
# prefixes that start a match but never finish one.
SHAPES = {
    "word run": "a",
    "hex dump": "0123456789abcdef",
    "upper run": "A",
    "camel": "aB",
    "dotted name": "a.",
    "dashed name": "a-",
    "name then colon": "a:",
    "name then spaces": "a ",
    "assign no value": "a=",
    "dash run": "-",
    "sk- prefixes": "sk-",
    "xox prefixes": "xoxb-",
    "hf prefixes": "hf_",
    "AKIA prefixes": "AKIA",
    "jwt halves": "eyJabcdefghij.",
    "schemes": "a://",
    "scheme user": "a://u:",
    "scheme path": "a://h/",
    "at signs": "a@",
    "bearer words": "Bearer ",
    "pem begins": "-----BEGIN RSA PRIVATE KEY-----",
    "short flags": "-k ",
    "secret flags": "--api-key ",
    "secret flags, prose": "--token or ",
    "url passwords": "https://u:p@h/",
    "assignments": "token=x ",
    "digits": "9",
    "control chars": "\x1b[",
}


def _line(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


def _cpu(fn, text: str) -> float:
    best = float("inf")
    for _ in range(3):  # the least of three: a context switch only ever adds
        start = time.process_time()
        fn(text)
        best = min(best, time.process_time() - start)
    return best


# outgoing_text is scrub_text then printable; scrub walks to scrub_text.
FUNCTIONS = {"outgoing_text": outgoing_text, "redact_url": redact_url,
             "scrub": lambda t: scrub({"k": [t]}),
             "redact_argv": lambda t: redact_argv(["--x", t, t]),
             "is_secret_name": is_secret_name}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_growth_is_linear(name, shape):
    fn, unit = FUNCTIONS[name], SHAPES[shape]
    small = _cpu(fn, _line(unit, 10_000))
    large = _cpu(fn, _line(unit, 40_000))
    # 4x the input: linear work is ~4x, quadratic 16x. A 2 ms floor keeps timer noise on
    # tiny costs from deciding.
    assert large <= 8 * max(small, 0.002), (name, shape, small, large)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_megabyte_line_costs_a_few_seconds_at_most(shape):
    # Before the fix a 40 KB line took ~40 s; a 1 MB line would take hours.
    line = _line(SHAPES[shape], 1_000_000)
    start = time.process_time()
    outgoing_text(line)
    assert time.process_time() - start < 5.0  # measured: under 0.6 s
