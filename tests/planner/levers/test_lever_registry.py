"""The lever registry: options objects and flat keywords mean the same levers, and `PlannerPass`'s
written-out lever keywords are exactly the ones the registry derives."""

import inspect

import pytest

from memplan.errors import PlanningError
from memplan.planner.levers.cat.lever import CatFusionLever, CatFusionOptions
from memplan.planner.levers.elementwise_in_place.lever import ElementwiseInPlaceLever
from memplan.planner.levers.lever import Phase
from memplan.planner.levers.registry import LEVERS, configured, keywords, lever_arguments
from memplan.planner.levers.reorder.lever import ReorderLever
from memplan.planner.levers.slice_noop.lever import SliceNoopLever, SliceNoopOptions
from memplan.planner.levers.state_in_place.lever import StateInPlaceLever
from memplan.planner.pass_ import PlannerPass
from memplan.planner.stages.run_levers import switched_off


def test_defaults_switch_on_every_lever_in_the_order_they_run():
    levers = configured({})
    assert [type(lever) for lever in levers] == [StateInPlaceLever, SliceNoopLever, CatFusionLever]
    assert [lever.phase for lever in levers] == [Phase.GRAPH, Phase.PROBLEM, Phase.PROBLEM]
    assert [type(lever) for lever in configured({"reorder": True})][0] is ReorderLever  # first, when on
    order = ["reorder", "state_in_place", "elementwise_in_place", "slice_noop", "cat_fusion"]
    assert [lever.keyword for lever in LEVERS] == order


def test_tiling_switches_reorder_and_elementwise_in_place_on_unless_told_otherwise():
    """A tiled graph needs its band order back after lowering (planner.levers.reorder.exported), and
    the tiling search counts on elementwise outputs written over their inputs."""
    kinds = lambda planner: [type(lever) for lever in planner.levers]  # noqa: E731
    for lever, keyword in ((ReorderLever, "reorder"), (ElementwiseInPlaceLever, "elementwise_in_place")):
        assert lever not in kinds(PlannerPass())
        assert lever in kinds(PlannerPass(tiling=True))
        assert lever not in kinds(PlannerPass(tiling=True, **{keyword: False}))
        assert lever not in kinds(PlannerPass(tiling=False))
    assert kinds(PlannerPass(tiling=True))[0] is ReorderLever


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


STOCK = ("self", "memory_planning_algo", "allow_lifetime_and_storage_overlap", "alloc_graph_input")
STOCK += ("alloc_graph_output", "alloc_mutable_buffers", "share_mutable_buffers", "alignment")
NOT_LEVERS = ("solver", "time_limit_s", "solver_options", "capacity", "memory_map", "tiling")


def test_the_pass_takes_exactly_the_keywords_the_registry_derives():
    parameters = inspect.signature(PlannerPass.__init__).parameters
    lever_keywords = [name for name in parameters if name not in STOCK + NOT_LEVERS]
    assert sorted(lever_keywords) == sorted(
        keywords()
    )  # a lever registered without its keyword, or vice versa
    assert keywords() == [
        "reorder",
        "state_in_place",
        "elementwise_in_place",
        "slice_noop",
        "cat_fusion",
        "cat_fusion_relax_alignment",
        "cat_fusion_partial",
        "cat_fusion_allow_growth",
    ]
    for lever in (
        LEVERS
    ):  # on by default (reorder, elementwise in place: None, on exactly with tiling); a field keyword
        # left at None keeps its value
        if lever in (ReorderLever, ElementwiseInPlaceLever):
            assert parameters[lever.keyword].default is None and not lever.options_type().enabled
        else:
            assert parameters[lever.keyword].default is lever.options_type().enabled is True
        assert all(
            parameters[name].default is None for name in keywords() if name.startswith(f"{lever.keyword}_")
        )


def test_a_registered_keyword_missing_from_the_arguments_is_named():
    with pytest.raises(PlanningError, match="registered without a PlannerPass keyword: cat_fusion_partial"):
        lever_arguments({name: None for name in keywords() if name != "cat_fusion_partial"})
