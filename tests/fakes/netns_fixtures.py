"""pytest fixtures for the multi-host tests: ``cluster`` (network namespaces with sshd, torn
down after the test), skipped with the reason where this machine cannot make them."""

from __future__ import annotations

import pytest

from tests.fakes.netns import Cluster, missing


@pytest.fixture(scope="module")
def netns_ok() -> None:
    reason = missing()
    if reason:
        pytest.skip(f"multi-host tests need network namespaces and sshd: {reason}")


@pytest.fixture
def cluster(netns_ok, tmp_path):
    with Cluster(tmp_path / "net") as made:
        yield made
