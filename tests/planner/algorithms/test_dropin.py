"""PlannerPass as a drop-in for MemoryPlanningPass: its signature, the algorithm given to it, memplan as an algorithm."""

from __future__ import annotations

import functools
import inspect

import pytest
from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite, greedy, naive
from executorch.exir.passes import MemoryPlanningPass
from helpers.executorch_programs import tiny

from memplan import PlannerPass
from memplan.errors import InvalidPlanError, PlanningError
from memplan.experiments.zoo import runtime
from memplan.planner.algorithms.memplan_algorithm import MemplanAlgorithm
from memplan.planner.algorithms.translate import translate
from memplan.planner.algorithms.translation import Translation, Untranslated, register_translator


def _arena(program) -> int:
    return sum(program.executorch_program.execution_plan[0].non_const_buffer_sizes)


def test_signature_starts_with_the_stock_one():
    stock = list(inspect.signature(MemoryPlanningPass.__init__).parameters)
    mine = list(inspect.signature(PlannerPass.__init__).parameters)
    assert mine[: len(stock)] == stock
    extra = [p for p in inspect.signature(PlannerPass.__init__).parameters.values()][len(stock) :]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in extra)


def test_positional_arguments_mean_what_they_mean_in_stock():
    suite = MemoryPlanningAlgorithmSuite(algo_list=[greedy])
    pass_ = PlannerPass(suite, True, False, alloc_graph_output=False)
    assert pass_.memory_planning_algo is suite
    assert pass_.memory_planning_algo.algo_list[0] is greedy
    assert pass_.allow_lifetime_and_storage_overlap is True
    assert (pass_.alloc_graph_input, pass_.alloc_graph_output) == (False, False)
    default = PlannerPass(solver="bestfit")
    assert isinstance(default.memory_planning_algo.algo_list[0], MemplanAlgorithm)
    assert default.memory_planning_algo.algo_list[0].solver == "bestfit"
    with pytest.raises(PlanningError, match="share_mutable_buffers"):
        PlannerPass(alloc_mutable_buffers=False, share_mutable_buffers=True)


def test_translations_of_executorch_algorithms():
    memory_map = TargetMemoryMap([Bank("sram", 1024, 1), Bank("dram", 1 << 20, 2)])
    assert translate(MemoryPlanningAlgorithmSuite([greedy, naive])) == Translation(
        "MemoryPlanningAlgorithmSuite[greedy, naive]"
    )
    banked = translate(MemoryPlanningAlgorithmSuite([BankedGreedy(memory_map)]))
    assert isinstance(banked, Translation) and banked.memory_map is memory_map
    unknown = translate(MemoryPlanningAlgorithmSuite([functools.partial(greedy, extra_padding=64)]))
    assert isinstance(unknown, Untranslated) and "no memplan translation" in unknown.reason
    mixed = translate(MemoryPlanningAlgorithmSuite([greedy, BankedGreedy(memory_map)]))
    assert isinstance(mixed, Untranslated) and "different problems" in mixed.reason
    own = translate(MemoryPlanningAlgorithmSuite([MemplanAlgorithm("skyline", 1.0)]))
    assert isinstance(own, Translation) and (own.solver, own.time_limit_s, own.reference) == (
        "skyline",
        1.0,
        False,
    )


def test_a_backend_registers_its_translator():
    class Mine:
        def __call__(self, alignment, specs, graph_module, graph_signature, extra_padding):
            raise AssertionError("a translated algorithm with reference=False is never run")

    register_translator(lambda algo: Translation("mine", reference=False) if isinstance(algo, Mine) else None)
    model = tiny("chain")
    pass_ = PlannerPass(Mine(), solver="bestfit")
    runtime.check_outputs(model, runtime.lower(model, memory_planning_pass=pass_).buffer)
    assert pass_.results["forward"].note == "mine: planned by memplan bestfit"


@pytest.mark.parametrize("algorithm", [greedy, naive])
def test_a_given_suite_is_planned_by_memplan_and_never_worse(algorithm):
    model = tiny("stateful")
    suite = MemoryPlanningAlgorithmSuite(algo_list=[algorithm])
    stock = _arena(runtime.lower(model, memory_planning_pass=MemoryPlanningPass(suite)))
    pass_ = PlannerPass(
        MemoryPlanningAlgorithmSuite(algo_list=[algorithm]), solver="bestfit", state_in_place=False
    )
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    assert _arena(program) <= stock
    assert "translated" in pass_.results["forward"].note
    if algorithm is naive:  # naive reuses nothing: memplan's plan must be strictly smaller here
        assert _arena(program) < stock


def _no_overlap(alignment, specs, graph_module, graph_signature, extra_padding):
    """ExecuTorch's Vulkan planner behind a function of its own, which no translator recognises."""
    return greedy(
        alignment, specs, graph_module, graph_signature, extra_padding, allow_overlapping_allocations=False
    )


def test_an_untranslated_algorithm_runs_as_given_and_is_validated():
    model = tiny("chain")
    no_overlap = _no_overlap
    stock = runtime.lower(
        model, memory_planning_pass=MemoryPlanningPass(MemoryPlanningAlgorithmSuite([no_overlap]))
    )
    pass_ = PlannerPass(MemoryPlanningAlgorithmSuite([no_overlap]), cat_fusion=False, state_in_place=False)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    assert _arena(program) == _arena(stock)
    assert "run as given" in pass_.results["forward"].note
    objects: dict[
        tuple[int, int], set[int]
    ] = {}  # its mem_obj_ids are kept: each object's tensors start at its base
    for spec in pass_.results["forward"].specs.values():
        objects.setdefault((spec.mem_id, spec.mem_obj_id), set()).add(spec.mem_offset)
    assert all(len(offsets) == 1 for offsets in objects.values())


def test_an_invalid_plan_of_an_untranslated_algorithm_is_refused():
    def everything_at_zero(alignment, specs, graph_module, graph_signature, extra_padding):
        for spec in specs:
            spec.mem_id, spec.mem_offset, spec.mem_obj_id = 1, 0, 0
        return [0, max(s.allocated_memory for s in specs)]

    with pytest.raises(InvalidPlanError, match="everything_at_zero"):
        runtime.lower(tiny("chain"), memory_planning_pass=PlannerPass(everything_at_zero))


def test_banked_greedy_is_translated_and_never_worse_in_traffic():
    model = tiny("chain")
    memory_map = TargetMemoryMap([Bank("sram", 256, 1), Bank("dram", 1 << 20, 2)])
    pass_ = PlannerPass(MemoryPlanningAlgorithmSuite([BankedGreedy(memory_map)]), solver="bestfit")
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    result = pass_.results["forward"]
    assert pass_.algorithm.memory_map is memory_map and "translated" in result.note
    sizes = program.executorch_program.execution_plan[0].non_const_buffer_sizes
    assert sizes[1] <= 256 and len(sizes) == 3


@pytest.mark.parametrize("name", ["stateful", "cond", "zero_size"])
def test_memplan_algorithm_in_the_stock_pass_runs_as_eager(name):
    model = tiny(name)
    suite = MemoryPlanningAlgorithmSuite(algo_list=[MemplanAlgorithm("bestfit"), greedy])
    program = runtime.lower(model, memory_planning_pass=MemoryPlanningPass(suite))
    runtime.check_outputs(model, program.buffer)
    alone = runtime.lower(
        model,
        memory_planning_pass=MemoryPlanningPass(MemoryPlanningAlgorithmSuite([MemplanAlgorithm("bestfit")])),
    )
    runtime.check_outputs(model, alone.buffer)
    greedy_only = runtime.lower(model)
    assert _arena(alone) <= _arena(greedy_only)
    assert _arena(program) == min(_arena(alone), _arena(greedy_only))
