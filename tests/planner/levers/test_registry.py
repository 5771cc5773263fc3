"""The levers stage's registration: options objects and flat keywords mean the same levers."""

import pytest

from memplan.errors import PlanningError
from memplan.planner.levers.cat.lever import CatFusionLever, CatFusionOptions
from memplan.planner.levers.lever import Phase
from memplan.planner.levers.slice_noop.lever import SliceNoopLever, SliceNoopOptions
from memplan.planner.levers.state_in_place.lever import StateInPlaceLever
from memplan.planner.pass_ import PlannerPass
from memplan.planner.stages.run_levers import LEVERS, configured, switched_off


def test_defaults_switch_on_every_lever_in_the_order_they_run():
    levers = configured({})
    assert [type(lever) for lever in levers] == [StateInPlaceLever, SliceNoopLever, CatFusionLever]
    assert [lever.phase for lever in levers] == [Phase.GRAPH, Phase.PROBLEM, Phase.PROBLEM]
    assert [keyword for keyword, _, _ in LEVERS] == ["state_in_place", "slice_noop", "cat_fusion"]


def test_flat_keywords_set_the_same_options_as_an_options_object():
    flat = PlannerPass(
        solver="bestfit", cat_fusion_partial=True, cat_fusion_allow_growth=True, slice_noop=True
    )
    grouped = PlannerPass(
        solver="bestfit",
        cat_fusion=CatFusionOptions(partial=True, allow_growth=True),
        slice_noop=SliceNoopOptions(enabled=True),
    )
    assert flat.levers == grouped.levers
    cat = next(lever for lever in flat.levers if isinstance(lever, CatFusionLever))
    assert cat.options == CatFusionOptions(enabled=True, partial=True, allow_growth=True)
    assert any(isinstance(lever, SliceNoopLever) for lever in flat.levers)


def test_a_flat_keyword_overrides_the_field_of_an_options_object_and_false_switches_a_lever_off():
    levers = configured({"cat_fusion": CatFusionOptions(partial=True), "cat_fusion_partial": False})
    assert [lever.options for lever in levers if isinstance(lever, CatFusionLever)] == [CatFusionOptions()]
    assert not any(isinstance(lever, StateInPlaceLever) for lever in configured({"state_in_place": False}))
    assert switched_off(configured({"slice_noop": True})) == ["cat fusion", "slice no-ops"]


def test_a_lever_given_something_else_is_refused_naming_the_keyword():
    with pytest.raises(PlanningError, match="cat_fusion must be a bool or a CatFusionOptions"):
        PlannerPass(cat_fusion="yes")  # type: ignore[arg-type]


def test_the_front_door_names_every_levers_options_object():
    import memplan

    grouped = memplan.PlannerPass(
        solver="bestfit",
        cat_fusion=memplan.CatFusionOptions(partial=True),
        state_in_place=memplan.StateInPlaceOptions(enabled=False),
        slice_noop=memplan.SliceNoopOptions(enabled=True),
    )
    assert memplan.CatFusionOptions is CatFusionOptions and memplan.SliceNoopOptions is SliceNoopOptions
    assert grouped.levers == configured(
        {"cat_fusion_partial": True, "state_in_place": False, "slice_noop": True}
    )
    assert memplan.TilingOptions().max_extra_macs == 0.15  # the default limit on extra work
    assert {"CatFusionOptions", "StateInPlaceOptions", "SliceNoopOptions", "TilingOptions"} <= set(
        dir(memplan)
    )
