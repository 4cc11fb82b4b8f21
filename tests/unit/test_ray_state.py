"""rltui.remote.ray's pure parts on answers captured from a real Ray 2.60 dashboard
(tests/data/ray/README.md): ``--ray`` addresses, the state API's JSON -> per-node processes,
ranks, GPUs and dump targets, node labels, and the worker tracebacks -> stack rounds shaped as
rltui's own py-spy source shapes them."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from rltui.model import DENIED, ERROR, OK, UNAVAILABLE, ProcInfo, StackPoll
from rltui.remote.ray.address import AddressError, parse_address
from rltui.remote.ray.client import (
    BAD_JSON,
    HTTP,
    TIMEOUT_REMEDY,
    DashboardClient,
    DashboardError,
    unwrap_list,
)
from rltui.remote.ray.stacks import (
    EXITED,
    PROFILING_OFF,
    PROFILING_REMEDY,
    dump_of,
    dumped,
    failed_dump,
    failure_summary,
    round_reading,
    traceback_command,
    traceback_params,
)
from rltui.remote.ray.stacks import TIMEOUT_REMEDY as STACK_TIMEOUT_REMEDY
from rltui.remote.ray.state import (
    IDLE_ROLE,
    BadAnswer,
    RayNode,
    assign_labels,
    gpu_reading,
    name_rank,
    node_states,
    read_nodes,
    runtime_env_vars,
)
from rltui.serialize import reading_to_data
from tests.importcheck import forbidden_loaded

DATA = Path(__file__).resolve().parent.parent / "data" / "ray"
SECRET = "sk-rltui-test-secret-0123456789"  # tests/fakes/ray_driver.py put it in the env


def rows(name: str) -> list:
    return json.loads((DATA / name).read_text())["data"]["result"]["result"]


def summary(name: str) -> list:
    return json.loads((DATA / name).read_text())["data"]["summary"]


def cluster(prefix: str, with_summary: bool = True):
    nodes = read_nodes(rows(f"{prefix}_nodes.json"))
    return nodes, node_states(nodes, rows(f"{prefix}_actors.json"), rows(f"{prefix}_workers.json"),
                              summary(f"{prefix}_summary.json") if with_summary else None)


def by_pid(procs) -> dict[int, ProcInfo]:
    return {p.pid: p for p in procs}


# -- addresses -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, url, label", [
    ("head", "http://head:8265", "head:8265"),
    ("head:8265", "http://head:8265", "head:8265"),
    ("10.0.0.5:9000", "http://10.0.0.5:9000", "10.0.0.5:9000"),
    ("http://127.0.0.1:8265", "http://127.0.0.1:8265", "127.0.0.1:8265"),
    ("http://head:8265/#/overview", "http://head:8265", "head:8265"),  # the UI's own link
    ("https://ray.example.com/ray/", "https://ray.example.com:443/ray", "ray.example.com:443"),
    ("http://head", "http://head:80", "head:80"),  # a URL keeps its scheme's port
    ("[fe80::1]:8265", "http://[fe80::1]:8265", "[fe80::1]:8265"),
    ("fe80::1", "http://[fe80::1]:8265", "[fe80::1]:8265"),
    ("  head:8265 ", "http://head:8265", "head:8265"),
    # a proxy's prefix is kept, percent-encoded: no space in the request line, no brace in
    # the stack command
    ("https://proxy.example.com/my ray/{x}/", "https://proxy.example.com:443/my%20ray/%7Bx%7D",
     "proxy.example.com:443"),
    ("http://head/a%20b/", "http://head:80/a%20b", "head:80"),  # escaped already: kept
])
def test_addresses_accepted(text, url, label):
    address = parse_address(text)
    assert (address.url, address.label) == (url, label)


@pytest.mark.parametrize("text, said", [
    ("head:6379", "port of Ray's GCS"),
    ("http://10.0.0.5:6379", "port of Ray's GCS"),
    ("ray://head:10001", "Ray Client address"),
    ("head:10001", "Ray Client port"),
    ("auto", "'auto' lets ray.init"),
    ("", "no Ray address given"),
    ("head:0", "port must be a number"),
    ("head:99999", "port must be a number"),
    ("head:http", "port must be a number"),
    ("ftp://head:8265", "http or https"),
    ("http://:8265", "no host name"),
    ("http://exa mple:8265", "no host name"),
])
def test_addresses_refused_with_what_to_give(text, said):
    with pytest.raises(AddressError) as caught:
        parse_address(text)
    assert said in str(caught.value)
    assert isinstance(caught.value, ValueError)  # the CLI reports ValueErrors as usage errors


def test_gcs_port_points_at_the_dashboard_port():
    with pytest.raises(AddressError, match=r"--ray HEAD:8265"):
        parse_address("head:6379")


def test_credentials_in_the_address_are_not_echoed():
    with pytest.raises(AddressError) as caught:
        parse_address("http://admin:hunter2@head:8265")
    assert "hunter2" not in str(caught.value)


# -- processes, ranks, targets ---------------------------------------------------------------------

def test_actors_have_verl_ranks_from_their_runtime_env():
    nodes, states = cluster("mismatch")
    (state,) = states.values()
    procs = by_pid(state.procs.procs)
    trainers = sorted((p for p in procs.values() if p.role == "Trainer"), key=lambda p: p.rank)
    assert [(p.rank, p.world_size, p.local_rank, p.local_world_size) for p in trainers] == [
        (0, 3, 0, 3), (1, 3, 1, 3), (2, 3, 2, 3)]
    assert [p.name for p in trainers] == ["rtxTrainer_0:0", "rtxTrainer_0:1", "rtxTrainer_0:2"]
    assert [p.pid for p in trainers] == [25372, 25373, 25600]
    # the debug settings the playbook asks about are shown; nothing else of the env
    assert all(p.debug_env == (("NCCL_DEBUG", "INFO"),) for p in trainers)
    assert state.procs.how.startswith("Ray state API")


def test_other_workers_roles_and_what_a_round_dumps():
    _, states = cluster("mismatch")
    (state,) = states.values()
    procs = by_pid(state.procs.procs)
    assert (procs[25256].role, procs[25256].name, procs[25256].rank) == ("Sleeper", "victim", None)
    assert (procs[25234].role, procs[25234].rank) == ("driver", None)
    assert procs[25257].role == IDLE_ROLE  # the agent says it runs nothing
    assert sorted(procs) == [25234, 25256, 25257, 25372, 25373, 25600]
    # actors and the driver are dumped, the idle pooled worker is not
    assert sorted(t.pid for t in state.targets) == [25234, 25256, 25372, 25373, 25600]
    assert all(p.create_time and p.create_time > 1.7e9 for p in procs.values())


def test_secrets_in_the_runtime_env_never_reach_a_reading():
    assert SECRET in (DATA / "mismatch_actors.json").read_text()  # it is there to be hidden
    _, states = cluster("mismatch")
    (state,) = states.values()
    from rltui.model import Reading
    data = json.dumps(reading_to_data(Reading("procs", 0.0, OK, state.procs)))
    assert SECRET not in data and "WANDB_API_KEY" not in data


def test_workers_the_agent_has_not_reported_are_listed_but_not_dumped():
    nodes, states = cluster("two_nodes")
    assert [n.name for n in nodes] == ["10.201.50.1", "10.201.50.2"]
    head, remote = (states[n.node_id] for n in nodes)
    # the summary came before the agents listed their workers: no idle/busy known
    unknown = [p for p in head.procs.procs if p.role == ""]
    assert [p.pid for p in unknown] == [23067]
    assert 23067 not in {t.pid for t in head.targets}
    assert [(t.pid, t.role, t.name) for t in remote.targets] == [
        (110, "Sleeper", "sleeper-10.201.50.2")]
    assert (head.hostname, remote.hostname) == ("node-a", "ray-b")


def test_without_the_summary_actors_are_still_listed_and_dumped():
    _, states = cluster("mismatch", with_summary=False)
    (state,) = states.values()
    assert state.gpus is None
    assert {t.pid for t in state.targets} == {25234, 25256, 25372, 25373, 25600}
    assert by_pid(state.procs.procs)[25257].role == ""  # idle or not: unknown


def test_a_dead_node_has_no_processes_and_keeps_rays_reason():
    nodes, states = cluster("node_dead")
    dead = [n for n in nodes if not n.alive]
    assert [(n.name, n.state) for n in dead] == [("10.201.50.2", "DEAD")]
    assert dead[0].message == ("Unexpected termination: health check failed due to missing too "
                               "many heartbeats")
    # its worker is still listed alive by the state API, but a dead node has no readings
    assert dead[0].node_id not in states
    assert [s.node.name for s in states.values()] == ["10.201.50.1"]


def test_a_live_actor_the_worker_list_missed_is_still_a_process():
    nodes = read_nodes(rows("mismatch_nodes.json"))
    workers = [w for w in rows("mismatch_workers.json") if w["pid"] != 25372]
    states = node_states(nodes, rows("mismatch_actors.json"), workers, None)
    (state,) = states.values()
    assert by_pid(state.procs.procs)[25372].rank == 0
    assert 25372 in {t.pid for t in state.targets}


@pytest.mark.parametrize("env, want", [
    ('{"env_vars": {"RANK": "3"}}', {"RANK": "3"}),
    ({"env_vars": {"RANK": "3", "N": 4}}, {"RANK": "3"}),  # non-strings are not env values
    ('{"env_vars": {"RANK": "<redacted>"}}', {"RANK": "<redacted>"}),
    ("<redacted>", {}),  # the dashboard hid it whole
    ("", {}), (None, {}), ("{}", {}), ('{"pip": ["x"]}', {}),
    ("[" * 100_000, {}),  # nested beyond Python's parser: RecursionError, caught
])
def test_runtime_env_vars(env, want):
    assert runtime_env_vars(env) == want


def test_a_redacted_rank_falls_back_to_the_actor_name():
    actors = rows("mismatch_actors.json")
    for a in actors:
        a["serialized_runtime_env"] = json.dumps({"env_vars": {"RANK": "<redacted>"}})
        if a["name"] == "rtxTrainer_0:1":
            a["name"] = "policy_rank_7"
    states = node_states(read_nodes(rows("mismatch_nodes.json")), actors,
                         rows("mismatch_workers.json"), None)
    (state,) = states.values()
    ranks = {p.name: p.rank for p in state.procs.procs}
    assert ranks["policy_rank_7"] == 7
    assert ranks["rtxTrainer_0:0"] is None  # verl's name holds no global rank


@pytest.mark.parametrize("name, rank", [
    ("policy_rank3", 3), ("Worker(rank=12)", 12), ("rank-0", 0), ("RANK_5", 5),
    ("rtxTrainer_0:1", None), ("prank9", None), ("rank1_rank2", None), ("", None),
])
def test_name_rank(name, rank):
    assert name_rank(name) == rank


# -- labels ----------------------------------------------------------------------------------------

def node(node_id: str, name: str, *, state: str = "ALIVE", head: bool = False) -> RayNode:
    return RayNode(node_id=node_id, name=name, ip=name, state=state, head=head)


def test_labels_are_node_names_head_first_and_never_change():
    first = assign_labels({}, [node("b2", "10.0.0.12"), node("a1", "10.0.0.9"),
                               node("h0", "10.0.0.30", head=True)])
    assert list(first.values()) == ["10.0.0.30", "10.0.0.9", "10.0.0.12"]  # natural order
    again = assign_labels(first, [node("b2", "10.0.0.12"), node("c3", "10.0.0.2")])
    assert again == {"c3": "10.0.0.2"}  # only the new node; known ones keep theirs


def test_a_second_node_of_one_name_gets_its_id():
    known = assign_labels({}, [node("aaaaaa11", "10.0.0.5")])
    later = assign_labels(known, [node("aaaaaa11", "10.0.0.5", state="DEAD"),
                                  node("bbbbbb22", "10.0.0.5")])  # restarted on one address
    assert later == {"bbbbbb22": "10.0.0.5#bbbbbb"}


def test_a_node_dead_when_first_seen_gets_no_label():
    nodes = read_nodes(rows("node_dead_nodes.json"))
    assert list(assign_labels({}, nodes).values()) == ["10.201.50.1"]


# -- GPUs (written from Ray's GpuUtilizationInfo schema: no GPU was at hand to capture) ------------

def with_gpus(gpus: list) -> list:
    entries = summary("mismatch_summary.json")
    entries[0]["gpus"] = gpus
    return entries


GPU = {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-2b1c",
       "utilizationGpu": 97.0, "memoryUsed": 61440.0, "memoryTotal": 81559.0,
       "powerMw": 612000, "temperatureC": 71,
       "processesPids": [{"pid": 25373, "gpuMemoryUsage": 61000, "gpuUtilization": None}]}


@pytest.mark.parametrize("procs", [
    GPU["processesPids"],  # as the dashboard answers
    {"25373": GPU["processesPids"][0]},  # as Ray's agent keeps them
])
def test_gpus_and_the_gpu_of_each_worker(procs):
    gpu = dict(GPU, processesPids=procs)
    idle = {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0a0a",
            "utilizationGpu": None, "memoryUsed": 0, "memoryTotal": 81559.0,
            "processesPids": None}
    nodes = read_nodes(rows("mismatch_nodes.json"))
    (state,) = node_states(nodes, rows("mismatch_actors.json"), rows("mismatch_workers.json"),
                           with_gpus([gpu, idle])).values()
    assert [g.index for g in state.gpus.gpus] == [0, 1]
    busy = state.gpus.gpus[1]
    assert (busy.util, busy.mem_used, busy.mem_total) == (97.0, 61440 << 20, 81559 << 20)
    assert (busy.power_w, busy.temperature_c) == (612.0, 71)
    assert [(p.pid, p.used_memory) for p in busy.processes] == [(25373, 61000 << 20)]
    assert state.gpus.gpus[0].util is None  # not reported stays unknown, never 0
    procs_by_pid = by_pid(state.procs.procs)
    assert (procs_by_pid[25373].gpu_index, procs_by_pid[25373].gpu_from) == (1, "nvml")
    assert procs_by_pid[25372].gpu_index is None


def test_a_node_without_gpus_reports_an_empty_list():
    (state,) = cluster("mismatch")[1].values()
    assert state.gpus is not None and state.gpus.gpus == ()
    reading = gpu_reading(state, "", 5.0)
    assert (reading.source, reading.status, reading.timestamp) == ("gpus", UNAVAILABLE, 5.0)
    assert reading.message == "Ray's dashboard agent reports no GPUs on this node"


def test_the_gpus_reading_says_why_there_are_none():
    (state,) = cluster("mismatch", with_summary=False)[1].values()
    assert gpu_reading(state, "HTTP 500", 1.0).message == (
        "Ray's node summary could not be read: HTTP 500")
    assert gpu_reading(state, "", 1.0).message == (
        "Ray's dashboard agent on this node has not reported yet")
    nodes = read_nodes(rows("mismatch_nodes.json"))
    (state,) = node_states(nodes, rows("mismatch_actors.json"), rows("mismatch_workers.json"),
                           with_gpus([GPU])).values()
    reading = gpu_reading(state, "", 1.0)
    assert reading.status == OK and reading.payload is state.gpus


@pytest.mark.parametrize("field, value", [
    ("memoryUsed", "inf"), ("memoryUsed", "nan"), ("memoryTotal", "-Infinity"),
    ("memoryUsed", float("inf")), ("memoryUsed", float("nan")), ("memoryUsed", "1e400"),
    ("memoryTotal", 10**400), ("utilizationGpu", "NaN"), ("powerMw", 1e300),
    ("temperatureC", float("-inf")),
])
def test_a_number_that_is_none_is_a_bad_answer_not_a_crash(field, value):
    """A hostile or broken agent's numbers never reach int() (OverflowError, ValueError): the
    feed reads the summary as an answer it cannot take (tests/integration/test_ray_feed.py)."""
    nodes = read_nodes(rows("mismatch_nodes.json"))
    with pytest.raises(BadAnswer) as caught:
        node_states(nodes, rows("mismatch_actors.json"), rows("mismatch_workers.json"),
                    with_gpus([dict(GPU, **{field: value})]))
    assert isinstance(caught.value, ValueError)
    assert str(caught.value).startswith(f"{field} ")
    assert str(caught.value).endswith(", which is no finite number in range")


@pytest.mark.parametrize("value", ["inf", float("nan"), "1e999"])
def test_hostile_numbers_in_a_process_of_a_gpu_and_in_a_task_count(value):
    nodes = read_nodes(rows("mismatch_nodes.json"))
    proc = [{"pid": 25373, "gpuMemoryUsage": value}]
    with pytest.raises(BadAnswer, match="gpuMemoryUsage "):
        node_states(nodes, rows("mismatch_actors.json"), rows("mismatch_workers.json"),
                    with_gpus([dict(GPU, processesPids=proc)]))
    entries = summary("mismatch_summary.json")
    for stats in entries[0]["raylet"]["coreWorkersStats"]:
        stats["numRunningTasks"] = value
    with pytest.raises(BadAnswer, match="numRunningTasks "):
        node_states(nodes, rows("mismatch_actors.json"), rows("mismatch_workers.json"), entries)


def test_numbers_as_strings_are_still_read():
    gpu = dict(GPU, memoryUsed="61440", utilizationGpu="97.5", temperatureC="junk")
    nodes = read_nodes(rows("mismatch_nodes.json"))
    (state,) = node_states(nodes, rows("mismatch_actors.json"), rows("mismatch_workers.json"),
                           with_gpus([gpu])).values()
    (sample,) = state.gpus.gpus
    assert (sample.mem_used, sample.util, sample.temperature_c) == (61440 << 20, 97.5, None)


# -- the state API's envelope ----------------------------------------------------------------------

def test_unwrap_list_says_when_the_list_is_partial():
    data = json.loads((DATA / "mismatch_workers.json").read_text())
    listed, note = unwrap_list(data, "workers", "h:1")
    assert len(listed) == 6 and note == ""
    data["data"]["result"]["total"] = 12000
    data["data"]["result"]["partial_failure_warning"] = "raylet 10.0.0.7 did not answer\nmore"
    _, note = unwrap_list(data, "workers", "h:1")
    assert note == ("6 of 12000 workers listed (the state API's limit); raylet 10.0.0.7 did not "
                    "answer")


@pytest.mark.parametrize("data, kind, said", [
    ({"result": False, "msg": "limit too big", "data": {"result": None}}, HTTP, "limit too big"),
    ([1, 2], BAD_JSON, "not a state API answer"),
    ({"result": True, "data": {"result": {"result": "x"}}}, BAD_JSON, "no list of nodes"),
])
def test_unwrap_list_refuses_what_is_not_a_list(data, kind, said):
    with pytest.raises(DashboardError) as caught:
        unwrap_list(data, "nodes", "h:1")
    assert caught.value.kind == kind and said in caught.value.message


class _Answers(DashboardClient):
    """A client whose GETs answer from a dict, without a network (path -> status, body)."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        super().__init__(parse_address("h:8265"), timeout=1)
        self.answers = answers

    def get(self, path, params=(), timeout=None):
        status, body = self.answers.get(path, (404, "404: Not Found"))
        return status, "application/json", body


DEEP = "[" * 200_000 + "]" * 200_000  # far deeper than Python's recursion limit


@pytest.mark.parametrize("answers", [
    {"/api/v0/nodes": (200, DEEP)},
    {"/api/v0/nodes": (200, '{"data": ' * 50_000 + "1" + "}" * 50_000)},
    # a 404 makes the client ask /api/version; a 500 reads the envelope's msg: both deep
    {"/api/version": (200, DEEP)},
    {"/api/v0/nodes": (500, DEEP)},
])
def test_json_nested_too_deeply_is_a_clear_error_not_a_recursion_error(answers):
    with pytest.raises(DashboardError) as caught:
        _Answers(answers).state_list("nodes")
    assert caught.value.kind in (BAD_JSON, HTTP, "not-ray")
    if answers.get("/api/v0/nodes", (0,))[0] == 200:
        assert caught.value.kind == BAD_JSON
        assert caught.value.message == ("h:8265 answered /api/v0/nodes with JSON nested too "
                                        "deeply to read: not a Ray dashboard's answer")
    assert len(caught.value.message) < 400  # the body is not in the message


def test_timeout_remedies_name_the_option_that_sets_the_timeout():
    assert "--connect-timeout" in TIMEOUT_REMEDY and "--connect-timeout" in STACK_TIMEOUT_REMEDY
    late = failed_dump(ProcInfo(pid=8, rank=1), "timeout", "no answer in 10 s", stamp=5.0)
    reading = round_reading([late], started=5.0, finished=6.0, trigger="periodic",
                            command=traceback_command("http://h:8265", "ab", ""))
    assert reading.remedy == STACK_TIMEOUT_REMEDY


# -- stacks ----------------------------------------------------------------------------------------

RANK2 = ProcInfo(pid=25600, rank=2, role="Trainer")
CMD = "curl -sSg 'http://h:8265/worker/traceback?node_id=ab&pid={pid}&native=0&subprocesses=0'"


def test_a_traceback_is_parsed_by_rltuis_py_spy_parser():
    text = (DATA / "traceback_rank2.txt").read_text()
    dump = dump_of(RANK2, 200, text, stamp=100.0, duration=0.08)
    assert (dump.pid, dump.rank, dump.status, dump.source) == (25600, 2, OK, "live")
    assert (dump.timestamp, dump.duration) == (100.0, 0.08)
    main = dump.threads[0]
    assert (main.name, main.status) == ("MainThread", "idle")
    # Ray wraps every actor method call in a tracing helper: it is in the stack as it is
    assert [f.name for f in main.frames[:5]] == [
        "all_gather", "_exception_logger.<locals>.wrapper", "Trainer.log_metrics",
        "_inject_tracing_into_class.<locals>.span_wrapper.<locals>._resume_span",
        "Trainer.train_step"]
    assert (main.frames[0].filename, main.frames[0].line) == (
        "torch/distributed/distributed_c10d.py", 4287)
    assert dump.command == "ray::Trainer.train_step"
    # the HTTP body is whole: a missing final newline must not cut the last frame
    cut = dump_of(RANK2, 200, text.rstrip("\n"), stamp=100.0, duration=0.08)
    assert cut.threads == dump.threads


def test_a_worker_gone_before_its_dump_is_exited_not_an_error():
    text = (DATA / "traceback_gone.txt").read_text()
    assert failure_summary(text) == ("Failed to get process executable name. Check that the "
                                     "process is running. (No such file or directory (os error "
                                     "2))")
    dump = dump_of(RANK2, 500, text, stamp=1.0, duration=0.1)
    assert dump.status == EXITED and "Check that the process is running" in dump.message
    assert dump.threads == ()


@pytest.mark.parametrize("status, text, state, said", [
    (500, "Failed to execute `x`.\n=== stderr ===\nError: Permission denied (os error 13)\n",
     DENIED, "ptrace refused"),
    (500, "Failed to execute `x`.\n=== stderr ===\nError: Timed out\n", ERROR, "Timed out"),
    (500, "", ERROR, "HTTP 500 without a reason"),
    (404, "404: Not Found", ERROR, "no /worker/traceback"),
    (200, "<html>hi</html>", ERROR, "not a py-spy dump"),
])
def test_traceback_failures(status, text, state, said):
    dump = dump_of(RANK2, status, text, stamp=1.0, duration=0.1)
    assert dump.status == state and said in dump.message


def test_profiling_off_is_one_state_with_the_remedy():
    text = (DATA / "traceback_profiling_off.txt").read_text()
    dumps = [dump_of(ProcInfo(pid=p, rank=r), 403, text, stamp=1.0, duration=0.0)
             for p, r in ((10, 0), (11, 1))]
    assert {d.status for d in dumps} == {PROFILING_OFF}
    reading = round_reading(dumps, started=1.0, finished=2.0, trigger="on-demand", command=CMD)
    assert (reading.source, reading.status, reading.payload) == ("stacks", UNAVAILABLE, None)
    assert reading.remedy == PROFILING_REMEDY
    assert "RAY_DASHBOARD_ENABLE_PROFILING=1" in PROFILING_REMEDY
    assert dumped(reading) == (False, reading.message)


def test_a_round_is_shaped_like_the_py_spy_sources_round():
    good = dump_of(RANK2, 200, (DATA / "traceback_rank2.txt").read_text(), stamp=5.0,
                   duration=0.1)
    gone = dump_of(ProcInfo(pid=7, rank=None), 500, (DATA / "traceback_gone.txt").read_text(),
                   stamp=5.0, duration=0.1)
    late = failed_dump(ProcInfo(pid=8, rank=1), "timeout", "no answer in 10 s", stamp=5.0)
    reading = round_reading([good, gone, late], started=5.0, finished=6.5, trigger="periodic",
                            command=CMD)
    assert (reading.source, reading.status, reading.timestamp) == ("stacks", OK, 6.5)
    assert reading.message == "dumped 1 of 3 workers; 1 exited before the dump, 1 timed out"
    poll = reading.payload
    assert isinstance(poll, StackPoll)
    assert (poll.started, poll.finished, poll.trigger, poll.nonblocking, poll.command) == (
        5.0, 6.5, "periodic", False, CMD)
    assert [d.pid for d in poll.dumps] == [25600, 7, 8]
    # the payload round-trips through the recording format like the py-spy source's
    assert reading_to_data(reading)["payload"]["dumps"][0]["rank"] == 2
    assert set(StackPoll.__struct_fields__) >= {"dumps", "started", "finished", "trigger"}
    assert dumped(reading) == (True, reading.message)


def test_an_empty_node_is_an_ok_round():
    reading = round_reading([], started=1.0, finished=1.0, trigger="on-demand", command=CMD)
    assert reading.status == OK and reading.payload.dumps == ()


NODE_ID = "8f2c1a" * 9 + "ab"  # a Ray node id: 56 hex digits


@pytest.mark.parametrize("address", [
    "head:8265", "[fe80::1]:8265", "https://ray.example.com/ray/",
    "http://proxy.example.com/it's {a} $(rm -rf ~)/ray",  # quotes, braces, a subshell
])
def test_the_stack_command_is_a_shell_line_with_a_pid_placeholder(address):
    """The incident report pastes ``command.format(pid=...)`` into its commands: that must be
    one valid shell line asking the dashboard exactly what rltui asks it."""
    base = parse_address(address).url
    command = traceback_command(base, NODE_ID, "10.0.0.5")
    assert command.count("{") == command.count("}") == 1 and "{pid}" in command
    line = command.format(pid=12345)
    argv = shlex.split(line)
    assert argv[:2] == ["curl", "-sSg"] and len(argv) == 3
    url = urlsplit(argv[2])
    assert f"{url.scheme}://{url.netloc}" == base[:len(f"{url.scheme}://{url.netloc}")]
    assert url.path.endswith("/worker/traceback")
    assert parse_qsl(url.query) == traceback_params(NODE_ID, "10.0.0.5", 12345) == [
        ("node_id", NODE_ID), ("ip", "10.0.0.5"), ("pid", "12345"), ("native", "0"),
        ("subprocesses", "0")]


def test_the_stack_command_is_valid_for_a_posix_shell():
    command = traceback_command(parse_address("http://p/it's {a} $(x)/ray").url, NODE_ID, "")
    line = command.format(pid=7)
    # sh -c 'printf "%s\n" ARGS' shows what the shell would hand curl: no expansion happened
    out = subprocess.run(["sh", "-c", "printf '%s\n' " + line.split(" ", 1)[1]],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["-sSg", shlex.split(line)[2]]
    assert "pid=7&" in out[1] and "ip=" not in out[1]  # no ip known: not sent


def test_the_stack_command_holds_no_credentials():
    command = traceback_command("http://head:8265/sk-" + "a" * 30, NODE_ID, "")
    assert "sk-" + "a" * 30 not in command


# -- layering --------------------------------------------------------------------------------------

def _imported(module: str, attribute: str = "") -> list[str]:
    """The modules a fresh interpreter holds after importing ``module`` (and reading
    ``attribute`` of it)."""
    code = ("import sys, json, importlib\n"
            f"m = importlib.import_module({module!r})\n"
            f"getattr(m, {attribute!r}) if {attribute!r} else None\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_rltui_never_imports_ray():
    """``pip install rltui`` has no Ray: the whole package, the feed included, reads the
    dashboard over HTTP."""
    loaded = _imported("rltui.remote.ray", "RayFeed")
    assert "rltui.remote.ray.feed" in loaded  # the feed was imported, lazily
    assert [m for m in ("ray", "httpx", "requests", "psutil", "textual") if m in loaded] == []


# The outside world: the network, threads, processes, the UI, Ray.
IMPURE = ("urllib.request", "http.client", "socket", "threading", "subprocess", "psutil",
          "textual", "ray")


@pytest.mark.parametrize("module", ["rltui.remote.ray.state", "rltui.remote.ray.stacks",
                                    "rltui.remote.ray.address"])
def test_the_parsers_stay_pure_each_on_its_own(module):
    """Each pure module, imported alone in a fresh interpreter (the package's __init__ runs
    first: it must not import the feed), imports nothing of the outside world."""
    assert forbidden_loaded([module], list(IMPURE)) == []
    loaded = _imported(module)
    assert "rltui.remote.ray.feed" not in loaded and "rltui.remote.ray.client" not in loaded
