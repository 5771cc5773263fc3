"""The registered levers, in the order they run, and the `PlannerPass` keywords derived from them.

A lever is registered by one line in `LEVERS`; its class names its keyword and options class
(`levers.lever.Lever`). The pass accepts `<keyword>` (a bool or the options object) and
`<keyword>_<field>` for every option field but `enabled` (e.g. `cat_fusion_partial`): `keywords()`
lists them, and `configured` turns the pass's arguments into the levers switched on.

Graph levers (reorder, then state in place, which places write-backs in the order that will run,
then elementwise in place, which needs the final order to know which input an instruction reads
last) decide and rewrite the method's graph before it is extracted; problem levers (slice no-ops, then
cat fusion: cats leave grouped slices alone) each decide on the problem the previous one left
(planner.stages.run_levers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from memplan.errors import PlanningError
from memplan.planner.levers.cat.lever import CatFusionLever
from memplan.planner.levers.elementwise_in_place.lever import ElementwiseInPlaceLever
from memplan.planner.levers.lever import Lever
from memplan.planner.levers.reorder.lever import ReorderLever
from memplan.planner.levers.slice_noop.lever import SliceNoopLever
from memplan.planner.levers.state_in_place.lever import StateInPlaceLever

LEVERS: tuple[type[Lever], ...] = (
    ReorderLever,
    StateInPlaceLever,
    ElementwiseInPlaceLever,
    SliceNoopLever,
    CatFusionLever,
)
"""Every lever, in the order they run."""


def field_keywords(lever: type[Lever]) -> list[str]:
    """`<keyword>_<field>` for each of `lever`'s option fields but `enabled`."""
    fields = dataclasses.fields(lever.options_type)
    return [f"{lever.keyword}_{f.name}" for f in fields if f.name != "enabled"]


def keywords() -> list[str]:
    """Every `PlannerPass` keyword the registered levers take, lever by lever."""
    return [name for lever in LEVERS for name in (lever.keyword, *field_keywords(lever))]


def lever_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The levers' keywords picked out of a call's arguments (`PlannerPass.__init__`'s `locals()`).

    A registered keyword missing from `arguments` is a lever registered without its `PlannerPass`
    keyword: an error here, so it cannot be silently ignored.
    """
    missing = [name for name in keywords() if name not in arguments]
    if missing:
        raise PlanningError(f"levers registered without a PlannerPass keyword: {', '.join(missing)}")
    return {name: arguments[name] for name in keywords()}


def configured(arguments: Mapping[str, Any]) -> tuple[Lever, ...]:
    """The levers switched on, in the order they run.

    `arguments[keyword]` is a lever's options object or a bool (`enabled`);
    `<keyword>_<field>` (e.g. `cat_fusion_partial`), when not None, sets one
    field of its options.
    """
    levers = []
    for lever in LEVERS:
        keyword, options_type = lever.keyword, lever.options_type
        value = arguments.get(keyword)
        options = value if isinstance(value, options_type) else options_type()
        if isinstance(value, bool):
            options = dataclasses.replace(options, enabled=value)
        elif value is not None and not isinstance(value, options_type):
            raise PlanningError(f"{keyword} must be a bool or a {options_type.__name__}, not {value!r}")
        flat = {
            f.name: arguments[f"{keyword}_{f.name}"]
            for f in dataclasses.fields(options_type)
            if arguments.get(f"{keyword}_{f.name}") is not None
        }
        options = dataclasses.replace(options, **flat)
        if options.enabled:
            levers.append(lever(options))
    return tuple(levers)
