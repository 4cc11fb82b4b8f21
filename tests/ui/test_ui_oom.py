"""The OOM screen (`m`): the job's config found from its ranks' command line (a verl GRPO run
over fixtures/configs/verl, its model path naming fixtures/models/qwen2-7b) or given as
--job-config/--model-config, and a screen that can be acted on: the framework, each change's
key as verl names it with its current and proposed value, the estimate before and after, and
the patch, which `y` copies."""

from __future__ import annotations

from pathlib import Path

from rltui.diagnosis.oom.types import OomReport
from rltui.model import replace
from rltui.ui.screens.oom import OomScreen, no_patch
from tests.fakes.scenarios import FIXTURES, QWEN2_7B, VERL_CONFIG
from tests.ui.helpers import plain, record_notes, until_idle

LOG_PROB_KEY = "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"


async def open_triage(app, pilot) -> OomScreen:
    """Play the recording to its end (the OOM is in it), press m, wait for the triage."""
    await pilot.press("e")
    await until_idle(pilot, lambda: app.check_action("oom_triage", ()), "the m key")
    await pilot.press("m")
    await until_idle(pilot, lambda: isinstance(app.screen, OomScreen), "the OOM screen")
    return app.screen


def shown(screen: OomScreen) -> str:
    """What the screen's widgets hold, as plain text (wide: nothing wraps)."""
    return "".join(plain(widget.content) for widget in screen.query(".text-scroll Static"))


async def test_the_config_is_found_from_the_job_command_line(replay_app):
    app = replay_app("with_logs_verl", paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(app, pilot)
        r = screen.report
        assert r.framework == "verl"
        assert str(VERL_CONFIG / "ppo_trainer_min.yaml") in r.config_sources
        text = shown(screen)
        assert "Framework  verl" in text
        assert "Key (as verl names it)" in text
        # the command line sets the micro batch to 8: a number, halved to a number
        row = next(line for line in text.splitlines() if LOG_PROB_KEY in line
                   and "=" not in line)
        assert row.split()[2:4] == ["8", "4"], row
        # the model path of the command line is a local folder: an estimate before and after
        first = r.suggestions[0]
        assert first.need_before is not None and first.need_after < first.need_before
        assert "GiB -> " in row
        assert f"{LOG_PROB_KEY}=4" in screen.patch
        assert "None" not in text and "'half'" not in text


async def test_job_and_model_config_options_replace_what_the_command_line_says(replay_app):
    """The with_logs ranks run `python train.py --config ppo.yaml` (no such file): without the
    options the triage knows no framework and says so in words; with them it reads verl."""
    app = replay_app("with_logs", paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(app, pilot)
        text = shown(screen)
        assert screen.report.framework == "unknown"
        assert "unknown (config not read)" in text and "half the job's value" in text
        assert "None" not in text and "'half'" not in text
        assert "No patch" in text and "--model-config" in text
        # no config read: give one; a config read whose values the changes cannot start from
        # (null keys) is not told to give --job-config again
        assert "give --job-config FILE" in no_patch(screen.report)
        read = no_patch(replace(screen.report, framework="verl",
                                config_sources=("/jobs/ppo.yaml",)))
        assert "--job-config" not in read and "null" in read

    app = replay_app("with_logs", paused=True,
                     job_config=str(VERL_CONFIG / "ppo_trainer_min.yaml"),
                     model_config=str(QWEN2_7B))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_triage(app, pilot)
        r = screen.report
        assert r.framework == "verl" and r.estimate is not None
        text = shown(screen)
        # the file leaves the micro batch null (verl requires it set): not a number to halve
        assert "null (set so in the config)" in text or "not set" in text
        # gpu_memory_utilization is 0.5 in the file: concrete values
        util = next(s for s in r.suggestions if s.key.endswith("gpu_memory_utilization"))
        assert (util.current, util.proposed) == (0.5, 0.3)
        assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.3" in screen.patch


async def test_y_copies_the_patch(replay_app):
    app = replay_app("with_logs_verl", paused=True)
    clipboard: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.copy_sink = None  # OSC 52 alone: what reaches the clipboard is what is checked
        app.copy_to_clipboard = clipboard.append
        notes = record_notes(app)
        screen = await open_triage(app, pilot)
        await pilot.press("y")
        await until_idle(pilot, lambda: notes, "the copy's notice")
        assert clipboard == [screen.patch]
        assert clipboard[0].splitlines()[1] == f"{LOG_PROB_KEY}=4"
        assert "the OOM patch" in notes[-1]


def relative_paths(report: OomReport, root: Path) -> OomReport:
    """The report with the checkout's path taken off its file names: the snapshot is the same
    in every checkout."""
    def cut(text: str) -> str:
        return text.replace(f"{root}/", "")
    return replace(report, config_sources=tuple(map(cut, report.config_sources)),
                   notes=tuple(map(cut, report.notes)))


def test_no_patch_says_why_for_a_framework_rltui_writes_no_patch_for():
    """A LlamaFactory job whose config was read (its batch size is in it): rltui writes
    patches in verl's and AReaL's forms only. 'No patch' says so, not that the config left the
    values null, nor to give --job-config (given or not, there would be none)."""
    from rltui.diagnosis.oom.report import triage
    from rltui.diagnosis.oom.types import JobConfig
    from rltui.model import LogEvent
    event = LogEvent("cuda-oom", 1, 1, 0.0, "oom",
                     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    for sources in (("train.yaml",), ()):
        report = triage(event, [], JobConfig(framework="llamafactory", sources=sources, values={
            "per_device_train_batch_size": 8}))
        assert report.patch == ""
        text = no_patch(report)
        assert "null" not in text and "--job-config" not in text
        assert "verl" in text and "AReaL" in text


def test_oom_screen_snapshot(snap_compare, replay_app):
    """120x40: the triage of the with_logs_verl recording (rank 2's CUDA OOM on GPU 2, a verl
    GRPO command line naming fixtures/configs/verl and the Qwen2-7B config). Must be visible:
    the title "OOM triage: unknown (low confidence), verl"; "Framework verl"; "Config
    configs/verl/ppo_trainer_min.yaml + command line (33 overrides)"; the error "tried to
    allocate 2.00 GiB; 1.05 GiB free of 79.10 GiB; short by 0.95 GiB"; the changes table headed
    "Key (as verl names it)  Current  Proposed  Estimate" with
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu 8 -> 4, the actor's
    ppo_micro_batch_size_per_gpu 8 -> 4 and rollout.gpu_memory_utilization 0.6 -> 0.4, each with
    "GiB -> ... GiB"; the patch in a rounded box titled "Patch (y copies it)" holding the
    "# append to the python3 -m verl.trainer.main_ppo command line:" header and the two
    override lines; below, why and trade-off of each change; the footer "esc Close y Copy"."""
    app = replay_app("with_logs_verl", paused=True)
    reporter = app.oom_reporter
    app.oom_reporter = lambda snap, lines: relative_paths(reporter(snap, lines), FIXTURES)

    async def run_before(pilot) -> None:
        await open_triage(app, pilot)
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=(120, 40))
