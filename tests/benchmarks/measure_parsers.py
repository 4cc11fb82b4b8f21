"""Per parser of outside text: inputs tried, crashes, and the slowest input's CPU time
(docs/reliability.md). Every token of every real line of tests/unit/test_fuzz_parsers.py in
turn becomes a run of N characters (its own character, 'a', '1', ' '), plus 1 MB lines.

    python tests/benchmarks/measure_parsers.py [N]
"""

from __future__ import annotations

import re
import sys
import time

sys.path.insert(0, "tests/unit")
from test_fuzz_parsers import ALLOWED, LINES, PARSERS  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
TOKEN = re.compile(r"\d+|[A-Za-z_]+|\s+|[^\w\s]")


def inputs():
    for line in LINES:
        for m in TOKEN.finditer(line):
            for run in {m.group()[0], "a", "1", " "}:
                yield line[:m.start()] + run * N + line[m.end():]
    for run in ("a", "1", " ", "x."):
        yield "step:1 - " + run * ((1 << 20) // len(run))


def main() -> None:
    texts = list(inputs())
    print(f"{'parser':36} {'inputs':>7} {'crashes':>7} {'slowest s':>9}  slowest input")
    for name, parse in PARSERS.items():
        crashes, worst, worst_text = 0, 0.0, ""
        for text in texts:
            start = time.process_time()
            try:
                parse(text)
            except ALLOWED:
                pass
            except Exception:  # noqa: BLE001 - counted, that is the point
                crashes += 1
            spent = time.process_time() - start
            if spent > worst:
                worst, worst_text = spent, text
        shown = re.sub(r"(.)\1{20,}", lambda m: f"{m.group(1)!r}*{len(m.group(0))}", worst_text)
        print(f"{name:36} {len(texts):7} {crashes:7} {worst:9.3f}  {shown[:60]!r}")


if __name__ == "__main__":
    main()
