"""CPU time of the outgoing scrub (secrets hidden, control characters escaped) on one
adversarial log line of each shape the patterns look for, at 40 KB, 128 KB and 1 MB.

    python tests/benchmarks/redact_cpu.py [--sizes 40000,128000,1000000]

Prints one line of JSON per shape: {shape: {size: cpu seconds}}, this process's CPU time
(``time.process_time``), so that other work on the machine does not count. Before the scrubber
was made linear a 40 KB run of word characters took about 40 s and 1 MB hours.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rltui.scrub import outgoing_text  # noqa: E402
from tests.unit.test_redact_linear import SHAPES  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="40000,128000,1000000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    worst = {n: 0.0 for n in sizes}
    for shape, unit in SHAPES.items():
        row = {}
        for n in sizes:
            line = (unit * (n // len(unit) + 1))[:n]
            start = time.process_time()
            outgoing_text(line)
            row[n] = round(time.process_time() - start, 4)
            worst[n] = max(worst[n], row[n])
        print(json.dumps({shape: row}))
    print(json.dumps({"worst": worst}))


if __name__ == "__main__":
    main()
