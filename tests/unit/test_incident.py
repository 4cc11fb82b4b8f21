"""The incident report: what goes into incident.json and incident.md, and writing them."""

from __future__ import annotations

import json

import pytest

from rltui import incident
from rltui.diagnosis import diagnose
from rltui.diagnosis.stacks import classify
from rltui.model import (
    Frame,
    GpuSample,
    LogFileState,
    NodeSnapshot,
    ProcessDump,
    ProcInfo,
    StackPoll,
    ThreadStack,
)

DIST = "/opt/env/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def _dump(rank: int, op: str, line: int) -> ProcessDump:
    frames = (Frame(op, DIST, 2500), Frame("train_step", "/opt/job/train.py", line),
              Frame("main", "/opt/job/train.py", 90))
    return ProcessDump(pid=200 + rank, rank=rank, threads=(
        ThreadStack(1, "MainThread", "idle", frames),
        ThreadStack(2, "Thread-1", "idle", (Frame("wait", "threading.py", 320),))))


def _inputs(**kw) -> incident.ReportInputs:
    dumps = [_dump(0, "all_reduce", 40), _dump(1, "all_reduce", 40), _dump(2, "broadcast", 55)]
    poll = StackPoll(dumps=tuple(dumps), started=90.0, finished=90.5,
                     command="py-spy dump --pid {pid} --json --nonblocking")
    procs = tuple(ProcInfo(pid=200 + r, rank=r, gpu_index=r, cpu_percent=3.0, state="sleeping",
                           debug_env=(("NCCL_DEBUG", "INFO"), ("WANDB_API_KEY", "***")))
                  for r in range(3))
    gpus = tuple(GpuSample(index=r, name="H100", uuid=f"GPU-{r}", util=0.0, mem_used=2**30,
                           mem_total=80 * 2**30) for r in range(3))
    logs = (LogFileState(path="/var/log/job/rank0.log", rank=0, pid=200, steps_seen=12,
                         last_step=12, last_step_time=40.0),)
    snap = NodeSnapshot(timestamp=100.0, host="node-7", job="verl ppo", gpus=gpus, procs=procs,
                        logs=logs, stacks=(poll,))
    diag = diagnose(snap)
    base = dict(snapshot=snap, diagnosis=diag, stacks=classify([dumps]),
                log_tails={"/var/log/job/rank0.log": ["step 12 loss 0.3",
                                                      "token=abcdef0123456789abcdef"]},
                commands=["rltui diagnose --report out"] + incident.stack_commands(snap))
    base.update(kw)
    return incident.ReportInputs(**base)


def test_the_json_holds_every_section_the_ticket_needs():
    doc = incident.build(_inputs())
    assert doc["kind"] == "rltui-incident" and doc["schema"] == 1
    assert doc["host"] == "node-7"
    assert doc["stacks"]["pattern"] == "B"
    assert [c["ranks"] for c in doc["class_stacks"]] == ["0-1", "2"]
    # One full stack per class: the chosen thread, innermost first, every frame.
    assert [f["name"] for f in doc["class_stacks"][0]["frames"]] == [
        "all_reduce", "train_step", "main"]
    rank0 = doc["ranks"][0]
    assert rank0["stack_class"] == "#1" and rank0["gpu"]["util"] == 0.0
    assert rank0["last_step"] == 12 and rank0["last_step_age_s"] == 60.0
    assert doc["debug_env"] == {"ranks 0-2": {"NCCL_DEBUG": "INFO", "WANDB_API_KEY": "***"}}
    assert "py-spy dump --pid 202 --json --nonblocking" in doc["commands"]
    json.dumps(doc)  # plain JSON all the way down


def test_log_lines_are_scrubbed_of_secrets():
    doc = incident.build(_inputs())
    lines = doc["logs"][0]["last_lines"]
    assert lines[0] == "step 12 loss 0.3"
    assert "abcdef0123456789abcdef" not in lines[1]


def test_the_markdown_reads_in_order_with_one_stack_per_class():
    md = incident.to_markdown(incident.build(_inputs()))
    order = [md.index(h) for h in ("## Symptoms", "## Stacks", "## Ranks",
                                   "## Debug environment", "## Logs", "## Commands")]
    assert order == sorted(order)
    assert "hang-collective-mismatch" in md
    assert md.count("### Class #") == 2
    assert "    all_reduce (" in md and "train.py:40" in md
    assert "| 0 | 200 | sleeping |" in md


def test_without_stacks_or_logs_the_report_says_so():
    inputs = _inputs(stacks=None, log_tails={}, commands=[])
    md = incident.to_markdown(incident.build(inputs))
    assert "No py-spy dumps were taken." in md
    assert "No log files were followed." in md


def test_write_report_writes_both_files_and_replaces_an_old_one(tmp_path):
    doc = incident.build(_inputs())
    md, js = incident.write_report(tmp_path / "rep", doc)
    assert json.loads(js.read_text())["host"] == "node-7"
    assert md.read_text().startswith("# rltui incident report: node-7")
    incident.write_report(tmp_path / "rep", {**doc, "host": "node-8"})
    assert json.loads(js.read_text())["host"] == "node-8"
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == ["incident.json",
                                                                     "incident.md"]


def test_a_new_report_never_replaces_one_of_the_same_second(tmp_path, monkeypatch):
    """The app names report folders by the second: a second report in that second goes
    into ``NAME-2``, the first one kept whole."""
    doc = incident.build(_inputs())
    first, _ = incident.write_new_report(tmp_path / "reports" / "rep", doc)
    second, js = incident.write_new_report(tmp_path / "reports" / "rep", {**doc, "host": "n8"})
    assert first.parent.name == "rep" and second.parent.name == "rep-2"
    assert json.loads((first.parent / "incident.json").read_text())["host"] == "node-7"
    assert json.loads(js.read_text())["host"] == "n8"
    monkeypatch.setattr(incident, "MAX_SAME_NAME", 2)
    with pytest.raises(FileExistsError):
        incident.write_new_report(tmp_path / "reports" / "rep", doc)


def test_a_report_is_never_written_through_a_link_planted_in_its_folder(tmp_path):
    """``--report /tmp/incident``: a folder others can write in may hold links planted at the
    names the report writes (its temporary files too); the file they point at is left alone
    and the report written in the folder."""
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    for name in ("incident.md", "incident.json", "incident.md.tmp", "incident.json.tmp"):
        (shared / name).symlink_to(victim)
    md, js = incident.write_report(shared, incident.build(_inputs()))
    assert victim.read_text() == "mine\n"
    assert not md.is_symlink() and not js.is_symlink()
    assert md.read_text().startswith("# rltui incident report: node-7")
    assert sorted(p.name for p in shared.iterdir()) == ["incident.json", "incident.md"]


def test_a_new_report_is_never_written_through_a_link_of_its_name(tmp_path):
    """In a shared folder another user may plant a link named as the next report's folder:
    that name is passed over for one rltui creates."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "rep").symlink_to(elsewhere)
    md, _ = incident.write_new_report(tmp_path / "rep", incident.build(_inputs()))
    assert md.parent.name == "rep-2" and not md.parent.is_symlink()
    assert list(elsewhere.iterdir()) == []


def test_an_unwritable_folder_is_an_os_error_naming_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        incident.write_report(blocker / "rep", incident.build(_inputs()))


def test_default_folder_names_host_and_time_safely():
    name = incident.default_folder("gpu node/7", 0.0)
    assert name.startswith("rltui-incident-gpu_node_7-") and "/" not in name


def test_symptom_evidence_and_notes_are_scrubbed_too():
    from rltui.model import replace
    base = _inputs()
    leaky = replace(base.diagnosis.symptoms[0], evidence=(
        "rank 2's last error: HTTPError 401 for https://user:hunter2@hub.example/x",))
    diag = replace(base.diagnosis, symptoms=(leaky,),
                   notes=("logs: error: Authorization: Bearer abcdef0123456789abcdef",))
    doc = incident.build(replace(base, diagnosis=diag))
    text = json.dumps(doc)
    assert "hunter2" not in text and "abcdef0123456789abcdef" not in text


def test_saved_dumps_add_no_py_spy_command():
    from rltui.model import replace
    base = _inputs()
    poll = replace(base.snapshot.stacks[-1], command="saved dumps in dumps/", trigger="saved")
    assert incident.stack_commands(replace(base.snapshot, stacks=(poll,))) == []


def test_a_crashed_process_without_a_rank_is_listed_by_pid():
    crash = ProcessDump(pid=777, status="crashed", message="Fatal Python error: Aborted",
                        threads=_dump(0, "all_reduce", 40).threads)
    dumps = [ProcessDump(pid=p, threads=_dump(0, "all_reduce", 40).threads) for p in (5, 6)]
    md = incident.to_markdown(incident.build(_inputs(stacks=classify([*dumps, crash]))))
    assert "Missing from the dump (exited): pids 777" in md
    assert "Missing from the dump (exited): ranks" not in md


def test_a_class_s_full_stack_is_a_whole_one_when_its_first_rank_was_cut_short():
    # Rank 0's dump ends mid-line (its outer frames lost); it is counted with ranks 1-2, whose
    # stacks are whole: the class's full stack is one of theirs.
    from rltui.model import replace
    from rltui.parsing.pyspy import CUT
    whole = _dump(1, "all_reduce", 40)
    frames = whole.threads[0].frames
    cut = replace(_dump(0, "all_reduce", 40), threads=(
        ThreadStack(1, "MainThread", "idle", (*frames[:-1], Frame(CUT, "", 0))),))
    report = classify([cut, whole, replace(whole, pid=202, rank=2)])
    assert [c.members for c in report.classes] == [(0, 1, 2)]
    stack, = incident.build(_inputs(stacks=report))["class_stacks"]
    assert stack["member_rank"] == 1 and stack["frames"][-1]["name"] == "main"
