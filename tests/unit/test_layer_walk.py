"""A spec's walk through ``lmikit validate`` seldom goes back to a stage it has left: each
derived fact is decided once, by the planner or the resolve step, and read downstream.
``tests/unit/layer_walk.py`` says what counts as a climb."""

from __future__ import annotations

import pytest

from lmikit import load_spec
from lmikit.planner._startup import weights_source
from tests.conftest import DEFAULT_SPEC, EXAMPLE_SPECS
from tests.unit.layer_walk import count, listing, trace, walk

CLIMBS_AT_MOST = 0  # the worst example spec today; only ever lowered


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.name)
def test_validate_climbs_back_to_an_earlier_stage_at_most_the_ratchet(path):
    _, climbs = walk(path)
    assert count(climbs) <= CLIMBS_AT_MOST, listing(climbs)


def test_the_ratchet_is_the_worst_walk_of_the_examples():
    """Lower CLIMBS_AT_MOST when a change removes climbs, so it cannot creep back up."""
    assert max(count(walk(path)[1]) for path in EXAMPLE_SPECS) == CLIMBS_AT_MOST


def test_walk_counts_a_renderer_calling_the_planner():
    spec = load_spec(DEFAULT_SPEC)
    namespace = {"__name__": "lmikit.render._planted", "weights_source": weights_source}
    exec("def render(spec):\n    return weights_source(spec)\n", namespace)
    assert trace(namespace["render"], spec)[1] == {
        ("lmikit.render._planted", weights_source.__module__): {"weights_source"}}


def test_walk_does_not_count_reading_the_spec():
    namespace = {"__name__": "lmikit.render._planted"}
    exec("def render(spec):\n    return spec.lora_enabled\n", namespace)
    assert trace(namespace["render"], load_spec(DEFAULT_SPEC))[1] == {}
