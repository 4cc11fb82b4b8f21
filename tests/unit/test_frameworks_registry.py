"""The framework registry: its table in docs/frameworks.md, its lookups, its layering, and
process_role on real titles."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from rltui.frameworks import (
    CAPABILITIES,
    FRAMEWORKS,
    ProcessRole,
    by_name,
    config_frameworks,
    format_names,
    process_role,
    step_formats,
)
from rltui.model import LOG_FORMATS
from rltui.parsing import frameworks as parsers

DOC = Path(__file__).resolve().parents[2] / "docs" / "frameworks.md"


def _doc_table() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("| framework | label | kind |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_doc_table_matches_the_registry():
    head = DOC.read_text(encoding="utf-8")
    assert "| framework | label | kind | " + " | ".join(CAPABILITIES) + " |" in head
    rows = _doc_table()
    assert [r[0].strip("`") for r in rows] == [f.name for f in FRAMEWORKS]
    for row, fw in zip(rows, FRAMEWORKS):
        assert row[1] == fw.label and row[2] == fw.kind
        have = {c for c, cell in zip(CAPABILITIES, row[3:]) if cell == "yes"}
        assert have == set(fw.capabilities()), fw.name


def test_names_are_unique_and_looked_up():
    names = [f.name for f in FRAMEWORKS]
    assert len(names) == len(set(names))
    for f in FRAMEWORKS:
        assert by_name(f.name) is f
    assert by_name("nope") is None


def test_formats_match_the_model_and_the_parsers():
    assert set(format_names()) | {"custom", "unknown"} == set(LOG_FORMATS)
    for fmt in step_formats():
        assert fmt.markers and fmt.source
        assert fmt.parser in parsers.DETECTORS
        assert fmt.parser in parsers.PARSERS or fmt.parser in ("hf", "areal")


def test_config_frameworks_are_the_rl_ones():
    assert {f.name for f in config_frameworks()} == {"verl", "areal", "openrlhf"}


def test_the_package_imports_only_the_standard_library_and_the_model():
    code = ("import sys; import rltui.frameworks; "
            "print(sorted(m for m in sys.modules if m.startswith('rltui')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(eval(out))  # noqa: S307 - our own repr of a list of names
    assert all(m == "rltui" or m == "rltui.model" or m.startswith("rltui.frameworks")
               for m in loaded), loaded
    for path in (DOC.parents[1] / "rltui" / "frameworks").glob("*.py"):
        for m in re.finditer(r"^(?:from|import) (\S+)", path.read_text(), re.M):
            mod = m.group(1)
            assert not mod.startswith("rltui") or mod.startswith(("rltui.frameworks",
                                                                   "rltui.model")), (path, mod)


@pytest.mark.parametrize("title, want", [
    ("sglang::scheduler_DP1_TP3", ProcessRole("sglang", "scheduler", 3, 1, 3, None)),
    ("sglang::scheduler_TP0", ProcessRole("sglang", "scheduler", 0, None, 0, None)),
    ("sglang::scheduler", ProcessRole("sglang", "scheduler")),
    ("sglang::detokenizer", ProcessRole("sglang", "detokenizer")),
    ("VLLM::EngineCore", ProcessRole("vllm", "EngineCore")),
    ("VLLM::Worker_TP0", ProcessRole("vllm", "Worker", 0, None, 0, None)),
    ("VLLM::Worker_DP1_PP0_TP3", ProcessRole("vllm", "Worker", 3, 1, 3, 0)),
    ("ray::WorkerDict", ProcessRole("verl", "worker")),
    ("ray::TaskRunner", ProcessRole("verl", "driver")),
    ("ray::IDLE", ProcessRole("ray", "idle")),
    ("ray::IDLE_SpillWorker", ProcessRole("ray", "idle")),
    # Ray's own services beside a job (titles seen on a Ray 2.60 node)
    ("ray::DashboardAgent", ProcessRole("ray", "service")),
    ("ray::RuntimeEnvAgent", ProcessRole("ray", "service")),
    ("ray::JobSupervisor", ProcessRole("ray", "JobSupervisor")),
    ("ray::WorkerDict.actor_rollout_compute_ref_log_prob()",
     ProcessRole("verl", "actor_rollout")),
    ("(TaskRunner pid=2213, ip=10.0.0.1)", ProcessRole("verl", "driver")),
    ("WorkerDict", ProcessRole("verl", "worker")),
    ("ray::LLMRayActor", ProcessRole("openrlhf", "LLMRayActor")),
    ("ray::MyActor.run()", ProcessRole("ray", "MyActor")),
])
def test_process_role(title, want):
    assert process_role(title) == want


@pytest.mark.parametrize("text", ["", "python3 train.py", "x" * 100_000, "X" * 100_000, "ray::",
                                  "[[[", "worker", None], ids=range(8))
def test_process_role_of_anything_else(text):
    assert process_role(text) is None
