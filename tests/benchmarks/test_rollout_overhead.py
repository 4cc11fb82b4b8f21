"""rollout-check's own cost per request next to the server's time, at 64 requests in flight.

The server is the engine server of tests/fakes in its own process, ``--fast`` (no model: a
fixed answer with log-probs) with a fixed delay per request, so the server's time is known and
the ideal rate is ``concurrency / delay``. In the same run, against the same server:

- ``openai``: a plain asyncio loop of ``AsyncOpenAI.completions.create`` (token-id prompt,
  log-probs, vLLM's extra fields), 64 at a time: the baseline;
- ``rltui client``: rltui's endpoint client (request building, HTTP, reading the answer into
  token ids and log-probs, the refusal checks), 64 at a time;
- ``rltui run``: the whole check, ``run(spec)``, with a second fast server as the reference
  (two requests per sample, at once), 64 samples at a time: dataset, tokenising, both sides,
  comparison, answers, progress. Counted in samples (each at least one delay long); its set-up
  (tokenizer, both model lists) is timed apart.

Reported: requests (or samples) per second, the share of the ideal rate, and the client CPU
time per request (rltui's own overhead; the server's time is the delay). Run:
``python -m pytest tests/benchmarks/test_rollout_overhead.py --benchmark-only -s``
or, without pytest: ``python tests/benchmarks/test_rollout_overhead.py``.
``python tests/benchmarks/test_rollout_overhead.py --interleave N`` runs the openai loop and
rltui's client alternately N times each in one process, against one server, and reports the
median client CPU per request of each: on a machine where other work comes and goes, the two
then meet the same conditions.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # script mode
    sys.path.insert(0, str(ROOT))

CONCURRENCY = 64
REQUESTS = 640
# the server's time per request; RLTUI_BENCH_DELAY_S changes it (with a short delay on a small
# machine the client and server processes compete for the CPU)
DELAY_S = float(os.environ.get("RLTUI_BENCH_DELAY_S", "0.1"))
MAX_NEW = 16
PROMPT = "what is 2 plus 3 ?"


class FastServer:
    """``python -m tests.fakes.engine_server FOLDER --fast --delay-s D`` in its own process."""

    def __init__(self, folder: Path, delay_s: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.engine_server", str(folder), "--fast",
             "--delay-s", str(delay_s), "--served-model-name", "bench"],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()  # blocks until it serves
        if not line.startswith("engine-server ready "):
            self.close()
            raise RuntimeError(f"engine server did not start: {line!r}")
        self.url = line.split()[-1]
        self.v1 = self.url + "/v1"

    def close(self) -> None:
        self.process.stdin.close()  # the server's way to stop
        self.process.wait(timeout=30)


def measure(fn, n: int, unit: str = "requests") -> dict:
    """``n`` units (requests, or samples of the whole check) at CONCURRENCY at once; each
    takes at least DELAY_S, so the ideal rate is CONCURRENCY / DELAY_S units per second. A
    number returned by ``fn`` is its set-up time, reported apart and left out of the rate."""
    cpu, start = time.process_time(), time.perf_counter()
    setup = fn() or 0.0
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    ideal = CONCURRENCY / DELAY_S
    return {"unit": unit, "count": n, "wall_s": wall, "setup_s": setup,
            "per_s": n / (wall - setup), "share_of_ideal": n / (wall - setup) / ideal,
            "client_cpu_ms_each": 1000 * cpu / n}


def openai_loop(server: FastServer, ids: list[int], n: int) -> None:
    from openai import AsyncOpenAI

    async def main() -> None:
        client = AsyncOpenAI(base_url=server.v1, api_key="none", max_retries=0, timeout=60)
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one() -> None:
            async with sem:
                # the request rltui sends: the same fields, so the same bytes to serialise
                out = await client.completions.create(
                    model="bench", prompt=ids, max_tokens=MAX_NEW, temperature=0, top_p=1,
                    frequency_penalty=0, presence_penalty=0, logprobs=1,
                    extra_body={"return_tokens_as_token_ids": True, "return_token_ids": True,
                                "ignore_eos": False, "repetition_penalty": 1, "top_k": -1,
                                "min_p": 0})
                assert len(out.choices[0].logprobs.tokens) == MAX_NEW

        await asyncio.gather(*(one() for _ in range(n)))
        await client.close()

    asyncio.run(main())


def rltui_client(server: FastServer, folder: Path, n: int) -> None:
    from rltui.checks.dataset import Sample
    from rltui.checks.rollout.endpoints import Endpoint
    from rltui.checks.rollout.inputs import load_tokenizer, prepare
    from rltui.checks.rollout.verify import refusal

    tok = load_tokenizer(str(folder))
    ps = prepare(Sample(index=0, line=1, prompt=PROMPT), tok)

    async def main() -> None:
        ep = Endpoint(server.v1, role="server", api="auto", model=None, api_key=None,
                      timeout_s=60, max_new_tokens=MAX_NEW, concurrency=CONCURRENCY,
                      retokenise=lambda t: tok(t, add_special_tokens=False)["input_ids"])
        await ep.open()
        await ep.generate(ps)  # settles the request form, outside the timing
        sem = asyncio.Semaphore(CONCURRENCY)

        async def one() -> None:
            async with sem:
                out = await ep.generate(ps)
                assert len(out.generation.token_ids) == MAX_NEW
                assert refusal("server", out.generation, prompt_len=len(ps.input_ids),
                               max_new_tokens=MAX_NEW, greedy_violation=out.greedy_violation) \
                    is None

        await asyncio.gather(*(one() for _ in range(n)))
        await ep.close()

    asyncio.run(main())


def rltui_run(server: FastServer, reference: FastServer, folder: Path, dataset: Path) -> float:
    """The whole check; returns its set-up time (dataset, tokenizer, both model lists) until
    the first sample is sent."""
    from rltui.checks.rollout import RolloutSpec, run

    start, marks = time.perf_counter(), []

    def progress(p) -> None:
        if p.message == "sending" and not marks:
            marks.append(time.perf_counter() - start)

    report = run(RolloutSpec(dataset=str(dataset), reference=reference.v1, server=server.v1,
                             tokenizer=str(folder), max_new_tokens=MAX_NEW,
                             concurrency=CONCURRENCY), progress=progress)
    assert report.agreement_rate == 1.0 and not report.partial, report.to_text()
    return marks[0]


class Bench:
    def __init__(self, base: Path) -> None:
        from tests.fakes.tinylm import build_tiny_model

        self.folder = build_tiny_model(base / "model")
        self.dataset = base / "d.jsonl"
        self.dataset.write_text("".join(json.dumps({"prompt": f"{PROMPT} {i % 10}"}) + "\n"
                                        for i in range(REQUESTS // 2)))
        self.server = FastServer(self.folder, DELAY_S)
        self.reference = FastServer(self.folder, DELAY_S)
        from rltui.checks.rollout.inputs import load_tokenizer
        self.ids = load_tokenizer(str(self.folder))(PROMPT)["input_ids"]
        # warm both paths (imports, connections) before timing
        openai_loop(self.server, self.ids, CONCURRENCY)
        rltui_client(self.server, self.folder, CONCURRENCY)

    def measure_all(self) -> dict:
        return {
            "openai": measure(lambda: openai_loop(self.server, self.ids, REQUESTS), REQUESTS),
            "rltui client": measure(lambda: rltui_client(self.server, self.folder, REQUESTS),
                                    REQUESTS),
            # one request to each server per sample, both at once
            "rltui run": measure(lambda: rltui_run(self.server, self.reference, self.folder,
                                                   self.dataset), REQUESTS // 2, "samples"),
        }

    def close(self) -> None:
        self.server.close()
        self.reference.close()


def summary(results: dict) -> str:
    lines = [f"{CONCURRENCY} in flight, server delay {DELAY_S * 1000:.0f} ms (ideal "
             f"{CONCURRENCY / DELAY_S:.0f}/s):"]
    for name, r in results.items():
        one = r["unit"][:-1]
        setup = f", after {r['setup_s']:.2f} s set-up" if r["setup_s"] else ""
        lines.append(f"  {name:13s} {r['count']} {r['unit']}: {r['per_s']:7.1f} {r['unit']}/s "
                     f"({100 * r['share_of_ideal']:.0f}% of ideal{setup}), client CPU "
                     f"{r['client_cpu_ms_each']:.2f} ms/{one}")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    b = Bench(tmp_path_factory.mktemp("rollout-bench"))
    yield b
    b.close()


def test_rollout_client_overhead_against_openai(benchmark, bench):
    results = {}

    def once() -> None:
        results.update(bench.measure_all())

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(results)
    print("\n" + summary(results))
    # sanity, not a timing goal: every path answered every request
    assert set(results) == {"openai", "rltui client", "rltui run"}


def interleaved(b: Bench, rounds: int) -> str:
    import statistics
    paths = {"openai": lambda: openai_loop(b.server, b.ids, REQUESTS),
             "rltui client": lambda: rltui_client(b.server, b.folder, REQUESTS)}
    cpu: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, fn in paths.items():
            cpu[name].append(measure(fn, REQUESTS)["client_cpu_ms_each"])
    lines = [f"{CONCURRENCY} in flight, server delay {DELAY_S * 1000:.0f} ms, {rounds} "
             "interleaved rounds, client CPU per request:"]
    for name, values in cpu.items():
        lines.append(f"  {name:13s} median {statistics.median(values):.2f} ms "
                     f"({' '.join(f'{v:.2f}' for v in values)})")
    return "\n".join(lines)


def main() -> None:
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--interleave", type=int, default=0, metavar="N")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        b = Bench(Path(tmp))
        try:
            print(interleaved(b, args.interleave) if args.interleave
                  else summary(b.measure_all()))
        finally:
            b.close()


if __name__ == "__main__":
    main()
