"""Bank traffic as the emitted program counts it: predicted exactly, and never worse than BankedGreedy.

The measure (memplan.planner.memory.instruction_traffic): the bytes of every kernel and delegate
call's tensor arguments, by the arena they live in. The pass predicts it from
the graph before emission (`MethodResult.traffic`); under a memory map it keeps
memplan's plan only when its traffic cost (slow-bank bytes, weighted) is no
more than ExecuTorch's BankedGreedy's on the same tensors.
"""

from __future__ import annotations

import pytest
from executorch.exir.banked_memory_planning import Bank, BankedGreedy, TargetMemoryMap
from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite
from executorch.exir.passes import MemoryPlanningPass
from helpers.executorch_programs import tiny

from memplan import PlannerPass
from memplan.experiments import zoo
from memplan.experiments.zoo import runtime
from memplan.peak_bound import lower_bound
from memplan.planner.levers.refusals import Refusal
from memplan.planner.memory.instruction_traffic import emitted_traffic

SLOW = pytest.mark.slow
ROOMY = 16 << 20


def two_banks(fast: int) -> TargetMemoryMap:
    return TargetMemoryMap([Bank("sram", fast, 1), Bank("dram", ROOMY, 2)])


def nonzero(moved: dict[int, int]) -> dict[int, int]:
    return {pool: n for pool, n in moved.items() if n}


def bound(model: zoo.ZooModel) -> int:
    planner = PlannerPass(time_limit_s=1, cat_fusion=False)
    runtime.lower(model, memory_planning_pass=planner)
    return max(lower_bound(r.problem) for r in planner.results.values())


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("cat_seed", {"memory_map": two_banks(512)}),  # a fused cat's instruction is gone
        ("multi_method_cache", {"memory_map": two_banks(1024)}),  # state shared by three methods
        ("chain", {}),  # no map: the count is per arena all the same
        pytest.param("cat_seed", {"memory_map": two_banks(512), "slice_noop": True}, marks=SLOW),
        pytest.param("lstm", {"memory_map": two_banks(8192)}, marks=SLOW),
        pytest.param("mlp_xnnpack", {"memory_map": two_banks(256)}, marks=SLOW),  # delegate calls
    ],
)
def test_the_pass_predicts_the_emitted_programs_traffic_exactly(name: str, options: dict) -> None:
    model = tiny(name) if name in ("chain", "mlp_xnnpack") else zoo.get(name)
    planner = PlannerPass(time_limit_s=1, **options)
    program = runtime.lower(model, memory_planning_pass=planner)
    emitted = emitted_traffic(program.executorch_program)
    assert set(emitted) == set(planner.results)
    for method, result in planner.results.items():
        assert nonzero(result.traffic) == nonzero(emitted[method]), method
        assert sum(emitted[method].values()) > 0
    runtime.check_outputs(model, program.buffer)


def stock_banked(model: zoo.ZooModel, memory_map: TargetMemoryMap) -> dict[int, int]:
    """The emitted traffic of ExecuTorch's own pass with BankedGreedy over `memory_map`."""
    suite = MemoryPlanningAlgorithmSuite(algo_list=[BankedGreedy(memory_map)])
    program = runtime.lower(model, memory_planning_pass=MemoryPlanningPass(suite))
    (moved,) = emitted_traffic(program.executorch_program).values()
    return moved


@pytest.mark.parametrize(
    ("name", "fraction", "traffic_refuses_cats"),
    [
        ("densenet_block", 0.75, True),  # fusing its cats would move more bytes through dram
        pytest.param("densenet_block", 0.25, False, marks=SLOW),  # fused: fewer bytes in each bank
        pytest.param("lstm", 0.45, False, marks=SLOW),  # the case
        pytest.param("unet", 0.5, False, marks=SLOW),
        pytest.param("mobilenet_v1_025", 0.25, False, marks=SLOW),
    ],
)
def test_never_more_slow_bank_traffic_than_banked_greedy(
    name: str, fraction: float, traffic_refuses_cats: bool
) -> None:
    model = zoo.get(name)
    memory_map = two_banks(int(bound(model) * fraction))
    theirs = stock_banked(model, memory_map)
    for cat_fusion in (True, False):
        planner = PlannerPass(time_limit_s=2, memory_map=memory_map, cat_fusion=cat_fusion)
        program = runtime.lower(model, memory_planning_pass=planner)
        (mine,) = emitted_traffic(program.executorch_program).values()
        assert mine.get(2, 0) <= theirs.get(2, 0), (cat_fusion, mine, theirs)
        if not cat_fusion:  # the same instructions: as much in the fast bank, at least
            assert mine.get(1, 0) >= theirs.get(1, 0), (mine, theirs)
        else:
            report = planner.results["forward"].cat_report
            assert report is not None
            refused = {reason for d in report.decisions for reason in d.reasons}
            assert (Refusal.TRAFFIC_GREW in refused) == traffic_refuses_cats, refused
        runtime.check_outputs(model, program.buffer)
