"""memplan as a Cadence memory-planning algorithm (memplan.planner.algorithms.cadence).

Cadence's own memory-pass tests (the copy inside the executorch wheel) run with
`MemplanCadenceAlgo` in place of Cadence's algorithms; plans under several
memories honour sizes, per-memory alignment and relative placement, pass
memplan's validator and are never worse than Cadence's two algorithms, whose
in-algorithm runs give exactly the bytes of Cadence's own flow.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import sys
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from memplan import PlannerPass
from memplan.errors import ExtractionError, InfeasibleError, MemplanError
from memplan.planner.algorithms.cadence.importable import cadence_passes_importable
from memplan.planner.algorithms.translation import Translation
from memplan.validate import check_plan

cadence_passes_importable()

from executorch.backends.cadence.aot import compiler  # noqa: E402
from executorch.backends.cadence.aot import memory_planning as cadence_planning  # noqa: E402
from executorch.backends.cadence.aot.utils import MemoryConfig  # noqa: E402

from memplan.planner.algorithms.cadence.algo import MemplanCadenceAlgo  # noqa: E402

WHEEL_TESTS = Path(cadence_planning.__file__).parent / "tests" / "test_memory_passes.py"


@pytest.fixture(autouse=True)
def quiet_cadence() -> Iterator[None]:
    """Cadence's flow logs every op and memory table at INFO."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@contextlib.contextmanager
def cadence_algorithms(factory: Callable[..., list[MemplanCadenceAlgo]]) -> Iterator[None]:
    """`CadenceMemoryPlanning` picks its algorithm from `factory(...)` inside the block.

    Restored from the class `__dict__`: monkeypatch reads a staticmethod as a bare function and
    would restore it as an instance method, breaking every later Cadence lowering.
    """
    cls = cadence_planning.CadenceMemoryPlanning
    original = vars(cls)["get_mem_algos"]
    cls.get_mem_algos = staticmethod(factory)  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.get_mem_algos = original  # type: ignore[method-assign]


def run_wheel_tests(
    algorithms: list[MemplanCadenceAlgo] | None, monkeypatch: pytest.MonkeyPatch
) -> unittest.TestResult:
    """Cadence's test_memory_passes.py, with every Cadence algorithm it builds replaced when `algorithms`
    collects `MemplanCadenceAlgo`s (CadenceMemoryPlanning's choices and the tests' direct constructions)."""
    spec = importlib.util.spec_from_file_location("cadence_test_memory_passes", WHEEL_TESTS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its models are looked up by module name
    spec.loader.exec_module(module)
    if algorithms is not None:

        def memplan_algo(memory_config: MemoryConfig, *args: object, **kwargs: object) -> MemplanCadenceAlgo:
            algo = MemplanCadenceAlgo(memory_config, *args, time_limit_s=0.5, **kwargs)  # type: ignore[arg-type]
            algorithms.append(algo)
            return algo

        def mem_algos(*args: object) -> list[MemplanCadenceAlgo]:
            return [memplan_algo(*args), memplan_algo(*args)]  # type: ignore[arg-type]

        monkeypatch.setattr(module, "PositionBasedGreedyWithHierarchy", memplan_algo)
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    result = unittest.TestResult()
    with cadence_algorithms(mem_algos) if algorithms is not None else contextlib.nullcontext():
        suite.run(result)
    result.testsRun_expected = suite.countTestCases()  # type: ignore[attr-defined]
    return result


def test_cadence_memory_pass_tests_pass_with_memplans_algorithm(monkeypatch):
    algorithms: list[MemplanCadenceAlgo] = []
    result = run_wheel_tests(algorithms, monkeypatch)
    problems = [f"{t.id()}: {err.splitlines()[-1]}" for t, err in [*result.failures, *result.errors]]
    assert not problems, "\n".join(problems)
    assert not result.skipped and result.testsRun == result.testsRun_expected > 0  # type: ignore[attr-defined]
    planned = [r for a in algorithms for r in a.results]
    assert planned, "memplan's algorithm never planned: the swap did not take"
    for r in planned:  # every plan it wrote passes memplan's validator on its own problem
        check_plan(r.cadence.problem, r.plan)


@pytest.mark.slow
def test_every_cadence_test_passing_with_cadences_algorithms_passes_with_memplans(monkeypatch):
    stock = run_wheel_tests(None, monkeypatch)
    failing_stock = {t.id() for t, _ in [*stock.failures, *stock.errors, *stock.skipped]}
    with_memplan = run_wheel_tests([], monkeypatch)
    failing_memplan = {
        t.id() for t, _ in [*with_memplan.failures, *with_memplan.errors, *with_memplan.skipped]
    }
    assert stock.testsRun == with_memplan.testsRun > 0
    assert failing_memplan <= failing_stock


class CatSlice(torch.nn.Module):
    """A cat whose output is sliced and selected: Cadence makes all three no-ops (placement constraints)."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        joined = torch.cat([x + 1, y * 2], dim=0)
        return joined[1:5] * 3 + joined[0]


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 10), torch.nn.ReLU(), torch.nn.Linear(10, 20))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


PROGRAMS = {
    "cat_slice": (CatSlice(), (torch.randn(4, 6), torch.randn(3, 6))),
    "mlp": (Mlp().eval(), (torch.ones(3, 16),)),
}


def lower(name: str, memory_config: MemoryConfig, mem_algo: int, algo: MemplanCadenceAlgo | None = None):
    """The program through Cadence's flow with Cadence's algorithm `mem_algo`, or with `algo`."""
    model, inputs = PROGRAMS[name]
    with cadence_algorithms(lambda *a: [algo, algo]) if algo is not None else contextlib.nullcontext():
        return compiler.export_to_executorch_gen_etrecord(
            copy.deepcopy(model), inputs, mem_algo=mem_algo, memory_config=memory_config
        )


TWO_MEMORIES = MemoryConfig([96, 4096], [16, 64])
THREE_MEMORIES = MemoryConfig([64, 128, 4096], [16, 48, 64])


@pytest.mark.parametrize(
    ("name", "config"),
    [
        pytest.param("cat_slice", THREE_MEMORIES, id="cat_slice-3 memories"),
        pytest.param("cat_slice", TWO_MEMORIES, id="cat_slice-2 memories", marks=pytest.mark.slow),
        pytest.param("mlp", TWO_MEMORIES, id="mlp-2 memories", marks=pytest.mark.slow),
        pytest.param("mlp", THREE_MEMORIES, id="mlp-3 memories", marks=pytest.mark.slow),
    ],
)
def test_never_worse_than_cadences_algorithms_which_it_reproduces(name, config):
    algo = MemplanCadenceAlgo(config, time_limit_s=1.0)
    program = lower(name, config, 0, algo)
    (result,) = algo.results
    candidates = {c.source: c for c in algo.attempts[-1]}
    best = min(c.score for c in algo.attempts[-1] if c.plan is not None)
    chosen = next(c for c in algo.attempts[-1] if c.source == result.chosen)
    assert chosen.score == best
    for mem_algo, source in enumerate(("position_greedy", "greedy_heuristic")):
        baseline = candidates[source]
        assert baseline.plan is not None and chosen.score <= baseline.score
        stock = lower(name, config, mem_algo).executorch_program.execution_plan[0].non_const_buffer_sizes
        assert list(stock[1:]) == [baseline.plan.arena_sizes.get(m, 0) for m in range(1, len(stock))]
    written = program.executorch_program.execution_plan[0].non_const_buffer_sizes
    assert list(written[1:]) == result.bytes_per_memory()
    assert all(used <= size for used, size in zip(written[1:], config.memory_sizes))


def test_beats_cadence_where_a_slow_memorys_alignment_wastes_bytes():
    """The MLP's tensors do not fit memory 1; in memory 2 (alignment 64) Cadence leaves a 64-byte hole."""
    algo = MemplanCadenceAlgo(TWO_MEMORIES, time_limit_s=1.0)
    lower("mlp", TWO_MEMORIES, 0, algo)
    scores = {c.source: c.score for c in algo.attempts[-1] if c.plan is not None}
    chosen = algo.results[-1]
    assert chosen.plan.arena_size < min(scores["position_greedy"][1], scores["greedy_heuristic"][1])


def test_plans_honour_alignment_sizes_and_relative_placement():
    algo = MemplanCadenceAlgo(THREE_MEMORIES, time_limit_s=1.0)
    lower("cat_slice", THREE_MEMORIES, 0, algo)
    (result,) = algo.results
    problem, plan = result.cadence.problem, result.plan
    check_plan(problem, plan)
    alignment = dict(enumerate(THREE_MEMORIES.memory_alignments or [], start=1))
    for buffer_id in result.cadence.roots:
        spec = result.cadence.spec_of[buffer_id]
        assert spec.mem_offset % alignment[spec.mem_id] == 0
    assert problem.groups, "the cat and slice no-ops became contiguous groups"
    for group in problem.groups:
        parent = result.cadence.spec_of[group.parent]
        for member, offset in group.members:
            spec = result.cadence.spec_of[member]
            assert (spec.mem_id, spec.mem_offset) == (parent.mem_id, parent.mem_offset + offset)
    for used, size in zip(result.bytes_per_memory(), THREE_MEMORIES.memory_sizes):
        assert used <= size


def test_mismatched_memory_alignments_are_named():
    with pytest.raises(ExtractionError, match="2 memory sizes but 1 alignments"):
        MemplanCadenceAlgo(MemoryConfig([100, 200], [16]))


def test_memories_too_small_for_any_algorithm_raise_a_memplan_error():
    config = MemoryConfig([32, 32], [16, 16])
    algo = MemplanCadenceAlgo(config, time_limit_s=0.5)
    with pytest.raises(InfeasibleError, match="no plan fits the Cadence memories") as caught:
        lower("mlp", config, 0, algo)
    assert isinstance(caught.value, MemplanError)
    assert {c.source for c in algo.attempts[-1]} >= {"memplan", "position_greedy", "greedy_heuristic"}
    assert all(c.plan is None for c in algo.attempts[-1])


class RecordingPlannerPass(PlannerPass):
    """PlannerPass standing in for Cadence's MemoryPlanningPass, remembering every instance."""

    made: list[PlannerPass] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        RecordingPlannerPass.made.append(self)


@pytest.mark.parametrize("mem_algo", [0, 1], ids=["position_greedy", "greedy_heuristic"])
def test_planner_pass_given_a_cadence_algorithm_honours_its_constraints(mem_algo, monkeypatch):
    """CadenceMemoryPlanning's MemoryPlanningPass as PlannerPass: Cadence's algorithm is translated, the
    plan is memplan's or Cadence's (whichever is better), validated against every Cadence constraint."""
    RecordingPlannerPass.made = []
    monkeypatch.setattr(cadence_planning, "MemoryPlanningPass", RecordingPlannerPass)
    program = lower("cat_slice", THREE_MEMORIES, mem_algo)
    (pass_,) = RecordingPlannerPass.made
    assert isinstance(pass_.algorithm.translation, Translation), pass_.algorithm.translation
    result = pass_.results["forward"]
    assert "translated" in result.note, result.note
    problem, plan = result.problem, result.plan
    check_plan(problem, plan)
    assert [b.capacity for b in problem.banks] == THREE_MEMORIES.memory_sizes
    assert problem.groups, "the cat and slice no-ops became contiguous groups"
    alignment = dict(enumerate(THREE_MEMORIES.memory_alignments or [], start=1))
    for buffer in problem.buffers:
        spec = result.specs[buffer.id]
        if problem.root_of(buffer.id)[0] == buffer.id:
            assert spec.mem_offset % alignment[spec.mem_id] == 0
    for group in problem.groups:
        parent = result.specs[group.parent]
        for member, offset in group.members:
            spec = result.specs[member]
            assert (spec.mem_id, spec.mem_offset) == (parent.mem_id, parent.mem_offset + offset)
    written = program.executorch_program.execution_plan[0].non_const_buffer_sizes
    assert all(used <= size for used, size in zip(written[1:], THREE_MEMORIES.memory_sizes))
