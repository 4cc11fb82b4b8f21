"""Session-scoped fixtures for the rollout-consistency tests: tiny models, a dataset, servers.

Everything is built in pytest's temporary folders and shared by the whole session: the models
take a fraction of a second to build, but each server loads torch and transformers, and
``transformers serve`` takes seconds to start. Servers start only when a test asks for them and
stop at the end of the session.
"""

from __future__ import annotations

import pytest

from tests.fakes.engine_server import EngineServer
from tests.fakes.hf_serve import HFServe
from tests.fakes.tinylm import build_tiny_model, sample_dataset

# Relative weight noise. PERTURBED changes the greedy tokens within the first 8 on every sample
# prompt. NUDGED keeps every greedy token (64 tokens, 20 prompts checked; 1e-4 already flips one
# of them at 64) and moves the chosen tokens' log-probs by a mean |delta| of about 1e-4, well
# inside verl's "normal" band. Both asserted in tests/integration/test_rollout_servers.py.
PERTURBED = 0.05
NUDGED = 1e-5


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_model_perturbed(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model-perturbed"), perturb=PERTURBED)


@pytest.fixture(scope="session")
def tiny_model_nudged(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model-nudged"), perturb=NUDGED)


@pytest.fixture(scope="session")
def rollout_dataset(tmp_path_factory):
    return sample_dataset(tmp_path_factory.mktemp("rollout-data") / "prompts.jsonl")


@pytest.fixture(scope="session")
def engine_server(tiny_model):
    with EngineServer(tiny_model) as server:
        yield server


@pytest.fixture(scope="session")
def engine_server_perturbed(tiny_model_perturbed):
    with EngineServer(tiny_model_perturbed) as server:
        yield server


@pytest.fixture(scope="session")
def hf_serve(tiny_model):
    with HFServe(tiny_model) as server:
        yield server


@pytest.fixture(scope="session")
def hf_serve_perturbed(tiny_model_perturbed):
    with HFServe(tiny_model_perturbed) as server:
        yield server
