"""`greedy(allow_overlapping_allocations=False)` and `BankedGreedy(..., False)` (Vulkan's planners) under PlannerPass.

The plans are memplan's (or the algorithm's own when memplan's is not better),
written so a consumer reading `mem_obj_id` as one allocation sees what
ExecuTorch would give it: every tensor at the base of its object, the tensors
of an object never live at the same time, objects never share a byte.
"""

from __future__ import annotations

import functools
from collections import defaultdict

import pytest
from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap
from executorch.exir.memory_planning import (
    MemoryPlanningAlgorithmSuite,
    Verifier,
    get_node_tensor_specs,
    greedy,
)
from executorch.exir.passes import MemoryPlanningPass
from helpers.executorch_programs import tiny
from random_programs import generate

from memplan import MemplanAlgorithm, PlannerPass
from memplan.experiments.zoo import runtime
from memplan.planner.algorithms.translate import translate
from memplan.planner.algorithms.translation import NO_FUSION, Translation, Untranslated

NO_OVERLAP = functools.partial(greedy, allow_overlapping_allocations=False)


def _suite(algorithm) -> MemoryPlanningAlgorithmSuite:
    return MemoryPlanningAlgorithmSuite(algo_list=[algorithm])


def _arenas(program) -> list[int]:
    return list(program.executorch_program.execution_plan[0].non_const_buffer_sizes)


def assert_objects(program) -> None:
    """What Vulkan relies on, read off the TensorSpecs of the program's graph: the tensors of one
    mem_obj_id start at its base and never live at the same time, objects never share a byte, and
    an alias (a tensor with a storage base) sits in its base's object."""
    graph_module = program.exported_program().graph_module
    specs = {id(s): s for node in graph_module.graph.nodes for s in get_node_tensor_specs(node)}
    planned = [s for s in specs.values() if s.mem_id is not None and not s.const and s.allocated_memory > 0]
    by_object = defaultdict(list)
    for spec in planned:
        if spec.storage_base is None:
            by_object[(spec.mem_id, spec.mem_obj_id)].append(spec)
        else:
            base = spec.storage_base
            assert (spec.mem_id, spec.mem_obj_id) == (base.mem_id, base.mem_obj_id)
    assert by_object
    extent: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (mem_id, _), group in by_object.items():
        assert len({s.mem_offset for s in group}) == 1, "an object's tensors start at its base"
        lifetimes = sorted(tuple(s.lifetime) for s in group)
        assert all(a[1] < b[0] for a, b in zip(lifetimes, lifetimes[1:])), "an object's tensors never meet"
        base = group[0].mem_offset
        extent[mem_id].append((base, base + max(s.allocated_memory for s in group)))
    for spans in extent.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "objects never share a byte"


def test_the_shared_objects_algorithms_are_translated():
    memory_map = TargetMemoryMap([Bank("sram", 1024, 1), Bank("dram", 1 << 20, 2)])
    one = translate(_suite(NO_OVERLAP))
    assert isinstance(one, Translation) and one.shared_objects and one.solver == "shared_objects"
    assert one.name == "MemoryPlanningAlgorithmSuite[greedy(allow_overlapping_allocations=False)]"
    banked = translate(_suite(BankedGreedy(memory_map, allow_overlapping_allocations=False)))
    assert isinstance(banked, Translation) and banked.shared_objects and banked.memory_map is memory_map
    assert "banked_greedy(allow_overlapping_allocations=False)" in banked.name
    mixed = translate(MemoryPlanningAlgorithmSuite([NO_OVERLAP, greedy]))
    assert isinstance(mixed, Untranslated) and "different problems" in mixed.reason


@pytest.mark.parametrize("name", ["chain", "cond", "zero_size", "stateful"])
def test_planned_as_objects_never_worse_and_runs_as_eager(name):
    model = tiny(name)
    stock = runtime.lower(model, memory_planning_pass=MemoryPlanningPass(_suite(NO_OVERLAP)))
    pass_ = PlannerPass(_suite(NO_OVERLAP), state_in_place=False)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)  # every call of the model, state carried over
    result = pass_.results["forward"]
    assert result.problem.shared_objects and "translated; memplan shared_objects" in result.note
    assert sum(_arenas(program)) <= sum(_arenas(stock))
    assert result.stock_sizes == _arenas(stock)  # memplan's replica of greedy(..., False), as reported
    assert_objects(program)
    assert_objects(stock)  # ExecuTorch's own plan has the structure the helper asserts
    graph_module = program.exported_program().graph_module
    Verifier(graph_module, True, True, True, None).verify_storage_reuse()


def test_cat_fusion_and_slice_noops_stay_off_with_the_reason():
    model = tiny("chain")  # a cat that cat fusion would remove
    pass_ = PlannerPass(_suite(NO_OVERLAP), slice_noop=True)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    result = pass_.results["forward"]
    assert result.cat_report is None and result.slice_noops is None
    assert f"(cat fusion and slice no-ops off: {NO_FUSION})" in result.note
    assert not result.problem.groups
    assert_objects(program)


def test_memplans_own_plan_is_written_when_it_is_better(monkeypatch):
    """With the algorithm's own plan set aside, memplan's packing is what is written (and no larger)."""
    from memplan.planner.stages import solve as solve_stage

    model = tiny("cond")
    pass_ = PlannerPass(_suite(NO_OVERLAP), state_in_place=False)
    seen = []
    real = solve_stage._reference

    def reference(given):
        seen.append(real(given))
        return "the algorithm's plan is left out here"

    monkeypatch.setattr(solve_stage, "_reference", reference)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    result = pass_.results["forward"]
    assert "its own plan was not kept" in result.note and result.plan.solver == "shared_objects"
    assert_objects(program)
    own = seen[-1]  # the submodules are planned first, the method itself last
    assert not isinstance(own, str) and result.plan.arena_size <= own.plan.arena_size


def test_banked_greedy_without_overlap_plans_objects_in_each_bank():
    model = tiny("cond")
    memory_map = TargetMemoryMap([Bank("sram", 1024, 1), Bank("dram", 1 << 20, 2)])
    algorithm = BankedGreedy(memory_map, allow_overlapping_allocations=False)
    stock = runtime.lower(model, memory_planning_pass=MemoryPlanningPass(_suite(algorithm)))
    pass_ = PlannerPass(_suite(algorithm), state_in_place=False)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    result = pass_.results["forward"]
    sizes = _arenas(program)
    assert len(sizes) == 3 and sizes[1] <= 1024 and len(_arenas(stock)) == 3
    assert result.problem.shared_objects and result.problem.banks and "translated" in result.note
    assert_objects(program)


def test_executorchs_own_test_of_the_flag_passes_with_planner_pass(monkeypatch):
    """The wheel's test of `allow_overlapping_allocations`, with `banked_memory_planning_pass` building a
    PlannerPass (as the executorch_tests harness patches it)."""
    from executorch.exir import banked_memory_planning
    from executorch.exir.tests import test_banked_memory_planning as wheel

    monkeypatch.setattr(banked_memory_planning, "MemoryPlanningPass", PlannerPass)
    case = wheel.TestUnsupportedConfigurations("test_allow_overlapping_allocations_reaches_the_planner")
    outcome = case.run()
    assert outcome is not None and outcome.wasSuccessful(), outcome.failures + outcome.errors
    built = banked_memory_planning.banked_memory_planning_pass(
        wheel.flat_map(), allow_overlapping_allocations=False
    )
    assert isinstance(built, PlannerPass) and built.algorithm.translation.shared_objects


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet8", "lstm"])
def test_zoo_models_where_memplan_beats_first_fit_run_as_eager(name):
    """On these the first fit of greedy(allow_overlapping_allocations=False) wastes 14-15 %: memplan's
    packing is written, runs as eager, and keeps the objects (test_memplans_own_plan_is_written_when_it_is_better
    is the default suite's cheaper stand-in)."""
    from memplan.experiments import zoo

    model = zoo.get(name)
    stock = runtime.lower(model, memory_planning_pass=MemoryPlanningPass(_suite(NO_OVERLAP)))
    pass_ = PlannerPass(_suite(NO_OVERLAP), state_in_place=False)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    result = pass_.results["forward"]
    assert sum(_arenas(program)) < sum(_arenas(stock)) and result.plan.solver == "shared_objects"
    assert_objects(program)


def test_memplans_solver_as_an_algorithm_plans_objects_in_the_stock_pass_too():
    """MemplanAlgorithm("shared_objects") in a suite of the stock pass (as Vulkan's preprocess builds
    one) and given to PlannerPass: the form is kept and the programs run as eager."""
    model = tiny("cond")
    algorithm = MemplanAlgorithm("shared_objects")
    stock = runtime.lower(model, memory_planning_pass=MemoryPlanningPass(_suite(algorithm)))
    runtime.check_outputs(model, stock.buffer)
    assert_objects(stock)
    assert sum(_arenas(stock)) <= sum(
        _arenas(runtime.lower(model, memory_planning_pass=MemoryPlanningPass(_suite(NO_OVERLAP))))
    )
    pass_ = PlannerPass(_suite(algorithm))
    assert isinstance(pass_.algorithm.translation, Translation) and pass_.algorithm.translation.shared_objects
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    assert pass_.results["forward"].problem.shared_objects
    assert_objects(program)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_random_stateful_programs_run_as_eager(seed):
    """tests/planner/random_programs.py's programs (state read and written, cats, slices, one or two
    methods sharing state), planned as objects with state in place on and off."""
    model = generate(seed).model()
    share = model.memory_planning_config.get("share_mutable_buffers")
    for state_in_place in (True, False):
        pass_ = PlannerPass(_suite(NO_OVERLAP), state_in_place=state_in_place, share_mutable_buffers=share)
        program = runtime.lower(model, memory_planning_pass=pass_)
        runtime.check_outputs(model, program.buffer)
        assert_objects(program)
