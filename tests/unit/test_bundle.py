"""A bundle is frozen once built: derived bundles share its sources and its one close, and a
source a derived bundle no longer polls is still closed with it."""

from __future__ import annotations

import dataclasses

import pytest

from rltui.sources.bundle import Bundle, SourceSpec
from tests.fakes.sources import gpus_ok, procs_ok


def test_a_bundle_cannot_be_changed_after_it_is_built():
    bundle = Bundle(mode="live", host="h", specs=[SourceSpec(procs_ok(), 1.0)])
    with pytest.raises(dataclasses.FrozenInstanceError):
        bundle.host = "other"  # type: ignore[misc]
    assert isinstance(bundle.specs, tuple)


def test_sources_left_out_by_keeping_are_still_closed_once():
    gpus, procs = gpus_ok(), procs_ok()
    bundle = Bundle(mode="live", host="h", specs=[SourceSpec(gpus, 1.0), SourceSpec(procs, 1.0)])
    kept = bundle.keeping("procs")
    assert [s.source for s in kept.specs] == [procs]
    kept.close()
    bundle.close()  # shares the close: nothing twice
    assert (gpus.closed, procs.closed) == (1, 1)


def test_a_derived_bundle_keeps_the_original_unchanged():
    bundle = Bundle(mode="live", host="h", specs=[SourceSpec(procs_ok(), 1.0)])
    other = bundle.on_host("node07")
    assert (bundle.host, other.host) == ("h", "node07")
    assert other.specs == bundle.specs
