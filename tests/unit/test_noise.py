"""strip_noise and level_of over the wrappers real logs carry (see docs/log-formats.md)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.parsing import noise
from rltui.parsing.noise import Cleaned, level_of, strip_noise

E = "\x1b"

# raw line -> (text, rank, actor, repeated)
CASES = [
    # plain lines pass through untouched
    ("step:1 - actor/pg_loss:0.1", ("step:1 - actor/pg_loss:0.1", None, None, None)),
    ("", ("", None, None, None)),
    ("    return forward_call(*args, **kwargs)", ("    return forward_call(*args, **kwargs)", None, None, None)),
    # line ends: LF and CRLF are not part of the text; a bare CR at the end is a CRLF remnant
    ("hello\n", ("hello", None, None, None)),
    ("hello\r\n", ("hello", None, None, None)),
    ("hello\r", ("hello", None, None, None)),
    # ANSI: colours, between fields, 256/true colour, OSC titles and hyperlinks, cut sequences
    (f"{E}[31mred{E}[0m", ("red", None, None, None)),
    (f"[titan] 2026-03-01 12:00:00,000 - root - INFO - {E}[31mstep:  5  {E}[32mloss:  7.1234  {E}[39m",
     ("[titan] 2026-03-01 12:00:00,000 - root - INFO - step:  5  loss:  7.1234  ", None, None, None)),
    (f"{E}[1;38;2;180;140;80m(AReaL){E}[0m {E}[92m20260521-18:37:16.123 x{E}[0m",
     ("(AReaL) 20260521-18:37:16.123 x", None, None, None)),
    (f"{E}]0;my title{E}\\text", ("text", None, None, None)),
    (f"{E}]8;;https://example.org{E}\\link{E}]8;;{E}\\", ("link", None, None, None)),
    (f"{E}]0;bell-ended\x07text", ("text", None, None, None)),
    (f"cut here {E}[3", ("cut here ", None, None, None)),
    (f"{E}(Bdec charset", ("dec charset", None, None, None)),
    (f"{E}[2K{E}[1Gcleared", ("cleared", None, None, None)),
    # torchrun prefixes: no space after the colon, indentation kept
    ("[rank3]:RuntimeError: boom", ("RuntimeError: boom", 3, None, None)),
    ('[default0]:  File "train.py", line 9, in <module>', ('  File "train.py", line 9, in <module>', 0, None, None)),
    ("[rank118]:[E603 17:48:01.005271823 ProcessGroupNCCL.cpp:632] [Rank 118] Watchdog",
     ("[E603 17:48:01.005271823 ProcessGroupNCCL.cpp:632] [Rank 118] Watchdog", 118, None, None)),
    # Ray prefixes, coloured or not, with ip, a bare pid, daemons
    ("(WorkerDict pid=123) hello", ("hello", None, "WorkerDict", None)),
    (f"{E}[36m(TaskRunner pid=2213){E}[0m step:1 - a:1", ("step:1 - a:1", None, "TaskRunner", None)),
    ("(TaskRunner pid=123, ip=10.0.0.1) hi", ("hi", None, "TaskRunner", None)),
    ("(pid=4242) task output", ("task output", None, "pid=4242", None)),
    ("(raylet) [2026-05-21 18:40:02,001 E 12 12] worker died", ("[2026-05-21 18:40:02,001 E 12 12] worker died", None, "raylet", None)),
    ("(raylet, ip=10.0.0.2) x", ("x", None, "raylet", None)),
    # Ray deduplication suffix
    ("(WorkerDict pid=9) INFO reset prefix cache [repeated 7x across cluster]",
     ("INFO reset prefix cache", None, "WorkerDict", 7)),
    ("warned [repeated 12x across cluster] ", ("warned", None, None, 12)),
    # AReaL merged.log: "[role]" padded to 10 columns; longer roles are not padded
    ("[main]    (AReaL) 20260521-18:37:16.123 StatsLogger INFO: x",
     ("(AReaL) 20260521-18:37:16.123 StatsLogger INFO: x", None, "main", None)),
    ("[rollout] (AReaL) x", ("(AReaL) x", None, "rollout", None)),
    ("[actor]     File \"x.py\", line 1", ("  File \"x.py\", line 1", None, "actor", None)),
    ("[llm_server-0]INFO:     127.0.0.1 - POST", ("INFO:     127.0.0.1 - POST", None, "llm_server-0", None)),
    # ...and tags that only look like it stay
    ("[titan] 2026-03-01 12:00:00,000 - root - INFO - x", ("[titan] 2026-03-01 12:00:00,000 - root - INFO - x", None, None, None)),
    ("[AReaL] 20260521-18:37:16.123 RLTrainer INFO: x", ("[AReaL] 20260521-18:37:16.123 RLTrainer INFO: x", None, None, None)),
    ("(AReaL) 20260521-18:37:16.123 x", ("(AReaL) 20260521-18:37:16.123 x", None, None, None)),
    ("[Rank 0] message", ("[Rank 0] message", None, None, None)),
    ("[INFO]    message", ("[INFO]    message", None, None, None)),
    ("[ProcessGroupNCCL]: x", ("[ProcessGroupNCCL]: x", None, None, None)),
    ("[2026-05-21 18:40:02] x", ("[2026-05-21 18:40:02] x", None, None, None)),
    # tqdm: only the final redraw shows; blank redraws (tqdm's clear) are skipped
    (" 10%|#  \r 20%|## \r 30%|###", (" 30%|###", None, None, None)),
    ("  5%|5 | 1/20\r                    \r{'loss': 1.0, 'epoch': 0.1}", ("{'loss': 1.0, 'epoch': 0.1}", None, None, None)),
    ("\r\r\r", ("", None, None, None)),
    # prefixes combine, in any order; the innermost actor wins
    ("[actor]   (WorkerDict pid=9) [rank2]:hello", ("hello", 2, "WorkerDict", None)),
    ("[rank1]:(WorkerDict pid=9) hi", ("hi", 1, "WorkerDict", None)),
    ("[rank0]: 10%|#  \r 20%|## \r 30%|###\r\n", (" 30%|###", 0, None, None)),
    (f"[main]    {E}[36m(TaskRunner pid=1){E}[0m step:3 - x:1 [repeated 2x across cluster]",
     ("step:3 - x:1", None, "TaskRunner", 2)),
]


@pytest.mark.parametrize("raw,expected", CASES, ids=[repr(c[0][:40]) for c in CASES])
def test_strip_noise(raw, expected):
    cleaned = strip_noise(raw)
    assert (cleaned.text, cleaned.rank, cleaned.actor, cleaned.repeated) == expected


def test_cleaned_is_frozen():
    cleaned = strip_noise("x")
    assert isinstance(cleaned, Cleaned)
    with pytest.raises(AttributeError):
        cleaned.text = "y"  # type: ignore[misc]


def test_huge_line_is_handled():
    garbage = ("\x1b[31m" + "x" * 1000 + "\r") * 1000  # ~1 MB of colour and redraws
    cleaned = strip_noise(garbage)
    assert cleaned.text == "x" * 1000
    assert level_of("ERROR " + "y" * 1_000_000) == "error"
    assert level_of("y" * 1_000_000 + " ERROR") == ""  # level words are looked for near the start


LEVELS = [
    ("ERROR 08-13 19:25:45 ppo_trainer.py:547] failed", "error"),
    ("[titan] 2026-03-01 12:00:00,000 - root - ERROR - boom", "error"),
    ("(AReaL) 20260521-18:37:16.123 RLTrainer CRITICAL: x", "error"),
    ("F0521 fatal? no: FATAL signal", "error"),
    ("Traceback (most recent call last):", "error"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "error"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 13.91 GiB.", "error"),
    ("ray.exceptions.RayTaskError(ValueError): ray::WorkerDict.fit() boom", "error"),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "error"),
    ("ValueError: No available memory for the cache blocks.", "error"),
    ("AssertionError", "error"),
    ("[E603 17:48:01.005271823 ProcessGroupNCCL.cpp:632] [Rank 118] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=2398459, OpType=ALLREDUCE) ran for 1800068 milliseconds before timing out.", "error"),
    ("E0521 18:30:00.123 4242 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9)", "error"),
    ("W0521 18:30:00.123000 4242 torch/distributed/run.py:792] Setting OMP_NUM_THREADS", "warning"),
    ("WARNING 08-13 19:25:45 vllm.py:1] slow", "warning"),
    ("[W521 18:30:04.511 ProcessGroupNCCL.cpp:4561] using GPU 1 to perform barrier", "warning"),
    ("[W socket.cpp:697] [c10d] The client socket has failed to connect", "warning"),
    ("/x/checkpoint.py:87: UserWarning: None of the inputs have requires_grad=True.", "warning"),
    ("WARNING:root:Generation was truncated", "warning"),
    ("    raise RuntimeError(msg)", ""),
    ("step:1 - critic/vf_error:0.1 - actor/pg_loss:-0.005", ""),
    ("  File \"/x/errors.py\", line 12, in wrapper", ""),
    ("0 errors, 0 warnings", ""),
    ("", ""),
]


@pytest.mark.parametrize("text,level", LEVELS, ids=[repr(t[:40]) for t, _ in LEVELS])
def test_level_of(text, level):
    assert level_of(text) == level


# -- never crash ---------------------------------------------------------------------------

any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400)
wrapped = st.builds(
    lambda pre, body, post: pre + body + post,
    st.sampled_from(["", "[rank7]:", "[default1]:", "(WorkerDict pid=1) ", "[main]    ", "\x1b[31m", "(", "[", "\r"]),
    any_text,
    st.sampled_from(["", "\r", "\r\n", " [repeated 3x across cluster]", "\x1b[", "\x1b]0;t"]),
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(any_text, wrapped))
def test_strip_noise_and_level_never_raise(text):
    cleaned = strip_noise(text)
    assert isinstance(cleaned.text, str)
    assert "\x1b" not in cleaned.text and "\r" not in cleaned.text
    assert level_of(cleaned.text) in ("error", "warning", "")
    assert level_of(text) in ("error", "warning", "")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_never_raise(data):
    text = data.decode("utf-8", errors="replace")
    assert level_of(strip_noise(text).text) in ("error", "warning", "")


@settings(max_examples=200, deadline=None)
@given(any_text)
def test_stripping_is_idempotent_on_plain_text(text):
    # Text without escapes, CRs or wrapper-like prefixes is never changed (a carrier's prefix,
    # docker compose's "svc-1  | ", a time stamp, pdsh's "10.0.0.7: ", is taken off by design).
    plain = text.replace("\x1b", "").replace("\x9b", "").replace("\r", "").replace("\n", "")
    if plain[:1] in ("[", "(") or plain.endswith("]"):
        return
    if any(rx.match(plain) for rx in (noise._COMPOSE, noise._CARRIER_STAMP, noise._PDSH)) or \
            plain.startswith("localhost: "):
        return
    assert strip_noise(plain).text == plain
