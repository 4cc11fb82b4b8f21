"""Step lines as they reach rltui from the field: hard-wrapped verl lines, per-rank copies,
progress bars, Megatron and DeepSpeed lines; the last step is the last in file order."""

from __future__ import annotations

from rltui.logbook import LogBook
from rltui.model import LogPoll, LogUpdate
from rltui.parsing.noise import strip_noise
from rltui.parsing.steps import StepReader, scan_steps


def fed(text: str, fmt: str = "auto"):
    reader = StepReader(fmt)
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        out += reader.feed(strip_noise(line).text, i, 1.7e9)
    return reader, out + reader.flush()


def both(text: str):
    """The live and the catch-up path must read the same steps."""
    reader, live = fed(text)
    scanned = scan_steps(text, "auto", 1, 1.7e9)
    assert [(s.step, s.line_no, s.metrics) for s in live] == \
        [(s.step, s.line_no, s.metrics) for s in scanned]
    return reader, live


def test_a_verl_line_wrapped_mid_key_is_joined():
    text = ("(TaskRunner pid=1) step:12 - actor/pg_loss:0.1 - timi\n"
            "ng_s/step:3.2 - critic/score/mean:0.5\n"
            "(TaskRunner pid=1) step:13 - actor/pg_loss:0.2 - timing_s/step:3.3\n")
    reader, steps = both(text)
    assert reader.format == "verl"
    assert [s.step for s in steps] == [12, 13]
    assert dict(steps[0].metrics) == {"loss": 0.1, "reward": 0.5, "step_time": 3.2}
    assert steps[0].line_no == 1


def test_a_verl_line_wrapped_over_several_lines_and_one_cut_for_good():
    text = "step:1 - actor/pg_loss:0.1 - tim\ning_s/st\nep:2.5\nstep:2 - actor/pg_loss:0.3 - ti\n"
    _, steps = both(text)
    assert [(s.step, dict(s.metrics).get("step_time")) for s in steps] == [(1, 2.5), (2, None)]


def test_a_wrapped_line_followed_by_ordinary_output_is_read_as_it_is():
    _, steps = both("step:5 - actor/pg_loss:0.1 - timi\n(WorkerDict pid=3) INFO hello world\n")
    assert [s.step for s in steps] == [5] and dict(steps[0].metrics) == {"loss": 0.1}


def test_torchtitan_steps_from_every_rank_count_once():
    line = "[rank{r}]:[titan] 2026-03-01 12:00:0{s},000 - root - INFO - step:  {s}  loss:  7.1"
    text = "\n".join(line.format(r=r, s=s) for s in (1, 2) for r in range(8)) + "\n"
    _, steps = both(text)
    assert [s.step for s in steps] == [1, 2]


def test_a_restart_from_a_checkpoint_is_read_again():
    text = "".join(f"step:{n} - actor/pg_loss:0.1\n" for n in [*range(1, 21), *range(11, 14)])
    _, steps = both(text)
    assert [s.step for s in steps][-4:] == [20, 11, 12, 13]


def test_megatron_iteration_line():
    text = (" [2024-05-01 12:00:00] iteration       10/    1000 | consumed samples: 1280 | elapsed "
            "time per iteration (ms): 1520.3 | learning rate: 1.5E-05 | lm loss: 7.123456E+00 | "
            "grad norm: 1.234 | number of skipped iterations:   0 |\n")
    reader, steps = both(text)
    assert reader.format == "megatron"
    (s,) = steps
    assert (s.step, s.total) == (10, 1000) and s.time is not None
    assert dict(s.metrics) == {"loss": 7.123456, "grad_norm": 1.234, "step_time": 1.5203}


def test_deepspeed_step_line():
    text = ("[2024-05-01 12:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, "
            "skipped=0, lr=[1.9e-05], mom=[(0.9, 0.95)]\n")
    reader, steps = both(text)
    assert reader.format == "deepspeed" and [s.step for s in steps] == [10]


def test_openrlhf_episode_bar_counts_global_steps():
    text = ("(ActorModelRayActor pid=5) Episode [2/3]:  10%|#   | 3/30 [02:11<19:41, 43.77s/it, "
            "policy_loss=0.0123, reward=0.5]\n"
            "(ActorModelRayActor pid=5) Episode [2/3]:  10%|#   | 3/30 [02:12<19:40, 43.80s/it]\n"
            "(ActorModelRayActor pid=5) Episode [2/3]:   0%|    | 0/30 [00:00<?, ?it/s]\n")
    reader, steps = both(text)
    assert reader.format == "openrlhf"
    (s,) = steps
    assert (s.step, s.total) == (33, 90)
    assert dict(s.metrics) == {"loss": 0.0123, "reward": 0.5, "step_time": 43.77}


def test_openrlhf_bars_are_ignored_once_global_step_lines_are_seen():
    text = ("INFO 08-13 19:25:45 ppo_trainer.py:547] Global step 50: {'policy_loss': 0.1}\n"
            "Episode [1/1]:  10%|#   | 1/30 [00:11<19:41, 43.77s/it]\n"
            "INFO 08-13 19:26:45 ppo_trainer.py:547] Global step 51: {'policy_loss': 0.1}\n")
    _, steps = both(text)
    assert [s.step for s in steps] == [50, 51]


def test_ms_swift_json_dict_carries_its_step():
    text = ('{"loss": 0.4, "grad_norm": 1.0, "learning_rate": 1e-05, "train_speed(iter/s)": 0.5, '
            '"epoch": 0.1, "global_step/max_steps": "7/70"}\n')
    reader, steps = both(text)
    assert reader.format == "hf"
    (s,) = steps
    assert (s.step, s.total, dict(s.metrics)["step_time"]) == (7, 70, 2.0)


def test_last_step_is_the_last_line_even_when_the_clock_wrapped():
    # A time-of-day log crossing midnight: step 120 is stamped before step 110.
    lines = [f"[titan] 2026-03-01 23:59:5{i},000 - root - INFO - step: {110 + i}  loss:  1.0"
             for i in range(10)]
    lines.append("[titan] 2026-03-01 00:00:01,000 - root - INFO - step: 120  loss:  1.0")
    steps = scan_steps("\n".join(lines) + "\n", "auto", 1, 1.7e9)
    book = LogBook()
    book.apply(LogPoll(files=(LogUpdate(path="a.log", status="ok", steps=tuple(steps)),)), 1.7e9)
    (state,) = book.states()
    assert steps[-1].step == 120 and state.last_step == 120
