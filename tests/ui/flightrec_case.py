"""A 4-rank cross-group ordering deadlock as rltui reads it: py-spy dumps and Flight Recorder
dumps shaped like the ones the gloo job ``tests/integration/torchjobs/fr_cross_group.py``
writes, read by the same parsers and diagnosis as ``rltui stacks DIR --flight-recorder GLOB``.

Every rank's Python stack is the same (``all_reduce`` <- ``Trainer.reduce_in`` <-
``Trainer.train_step``, same lines): the stacks alone read pattern C. The Flight Recorder
tells the sides apart: ranks 0,1 wait in all_reduce #4 of the default group (``default_pg``),
ranks 2,3 in all_reduce #4 of group 1, each side having completed #1-#3 of both groups. So it
decides pattern B (``cross-group-order``), and in each group the other side is behind.
"""

from __future__ import annotations

import json

from rltui.diagnosis.flightrec import analyse, apply, stack_ops
from rltui.diagnosis.stacks import StackReport, classify
from rltui.model import FrPoll
from rltui.parsing.flightrec import read_dump
from rltui.parsing.pyspy import read_folder_entries

WRITTEN = 1_760_000_000.0  # when the dumps were taken (POSIX seconds)
WAITED_S = 12  # how long the pending collectives had waited then
SITE = "/opt/job/trainer.py"
TORCH = "/opt/venv/lib/python3.11/site-packages/torch/distributed"
PIDS = (41207, 41208, 41209, 41210)


def pyspy_text(rank: int) -> str:
    """``py-spy dump --pid`` of one rank (py-spy 0.4, CPython 3.11)."""
    return f"""Process {PIDS[rank]}: /opt/venv/bin/python3.11 {SITE}
Python v3.11.7 (/usr/bin/python3.11)

Thread {PIDS[rank]} (idle): "MainThread"
    all_reduce ({TORCH}/distributed_c10d.py:2806)
    wrapper ({TORCH}/c10d_logger.py:81)
    Trainer.reduce_in ({SITE}:36)
    Trainer.train_step ({SITE}:50)
    Trainer.train ({SITE}:54)
    main ({SITE}:60)
    <module> ({SITE}:64)
"""


def _record(rid: int, group: str, desc: str, seq: int, done: bool) -> dict:
    created = int((WRITTEN - WAITED_S - (6 - rid) * 0.5) * 1e9)
    return {
        "record_id": rid, "pg_id": int(group), "process_group": [group, desc],
        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq,
        "profiling_name": "gloo:all_reduce", "time_created_ns": created,
        "input_sizes": [[4]], "input_dtypes": ["Float"], "output_sizes": [[4]],
        "output_dtypes": ["Float"], "state": "completed" if done else "scheduled",
        "time_discovered_started_ns": None, "time_discovered_completed_ns": None,
        "retired": done, "timeout_ms": 600000, "is_p2p": False,
        "frames": [{"name": "all_reduce", "filename": f"{TORCH}/distributed_c10d.py",
                    "line": 2806},
                   {"name": "wrapper", "filename": f"{TORCH}/c10d_logger.py", "line": 81},
                   {"name": "reduce_in", "filename": SITE, "line": 36},
                   {"name": "train_step", "filename": SITE, "line": 50}],
    }


def fr_json(rank: int) -> bytes:
    """One rank's Flight Recorder dump as JSON (``_dump_fr_trace_json`` with frames): steps
    1-3 done in both groups, then the first collective of step 4 pending in the group the rank
    enters first (the default group for ranks 0,1, group 1 for ranks 2,3)."""
    groups = [("0", "default_pg"), ("1", "undefined")]
    entries, rid = [], 0
    for seq in (1, 2, 3):
        for g, d in groups:
            entries.append(_record(rid, g, d, seq, True))
            rid += 1
    first = groups[0] if rank < 2 else groups[1]
    entries.append(_record(rid, *first, 4, False))
    status = {g: {"last_enqueued_collective": 4 if g == first[0] else 3,
                  "last_started_collective": 4 if g == first[0] else 3,
                  "last_completed_collective": 3} for g, _ in groups}
    doc = {"version": "2.10", "pg_config": {g: {"name": g, "desc": d, "ranks": "[0, 1, 2, 3]"}
                                            for g, d in groups},
           "pg_status": status, "entries": entries}
    return json.dumps(doc).encode()


def cross_group_report() -> StackReport:
    """What ``rltui stacks DIR --flight-recorder 'fr_trace_rank_*'`` shows for the hang."""
    dumps, problems = read_folder_entries([(f"rank{r}.txt", pyspy_text(r)) for r in range(4)])
    assert not problems, problems
    report = classify(dumps)
    fr = [d for r in range(4)
          for d in read_dump(fr_json(r), f"/shared/fr/fr_trace_rank_{r}", written=WRITTEN)]
    fa = analyse(FrPoll(dumps=tuple(fr)), expected_ranks=range(4),
                 stack_ops=stack_ops(report))
    return apply(report, fa)
