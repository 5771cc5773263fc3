"""PlannerPass as a drop-in MemoryPlanningPass: plans land in the TensorSpecs,
invalid or infeasible plans fail the export with node names, time-outs never
do worse than best-fit."""

from __future__ import annotations

import copy
import warnings

import pytest
from executorch.exir.memory_planning import get_node_tensor_specs
from executorch.exir.passes import MemoryPlanningPass
from helpers.executorch_programs import tiny

from memplan import PlannerPass, solvers
from memplan.arith import align_up
from memplan.errors import InfeasibleError, InvalidPlanError, ProblemError, UnknownSolverError
from memplan.experiments.zoo import runtime
from memplan.plan import Outcome
from memplan.planner.graph.extract import buffer_names
from memplan.planner.graph.shared_slots import shared_slots
from memplan.planner.stages.solver import Solver
from memplan.problem import Buffer, BufferKind, Problem
from memplan.solvers.contract import SolverEntry
from memplan.solvers.units import make_plan, units_of

_MODELS: dict[str, object] = {}


def model(name: str):
    if name not in _MODELS:
        _MODELS[name] = tiny(name)
    return _MODELS[name]


def specs_by_id_in_graph(et):
    gm = et.exported_program().graph_module
    sig = et.exported_program().graph_signature
    return {bid: spec for spec, (bid, _) in buffer_names(list(gm.graph.nodes), sig).items()}


def test_default_pass_is_cpsat_with_a_short_limit_and_beats_bestfit_or_ties():
    pass_ = PlannerPass()
    assert (pass_.algorithm.solver.name, pass_.algorithm.solver.time_limit_s) == ("cpsat", 5.0)
    et = runtime.lower(model("chain"), memory_planning_pass=pass_)
    result = pass_.results["forward"]
    bestfit = solvers.solve(result.problem, "bestfit")
    assert result.plan.arena_size <= bestfit.arena_size
    runtime.check_outputs(model("chain"), et.buffer)


def test_plan_is_written_into_every_spec():
    pass_ = PlannerPass(solver="bestfit")
    et = runtime.lower(model("stateful"), memory_planning_pass=pass_)
    result = pass_.results["forward"]
    for buf in result.problem.buffers:
        spec = result.specs[buf.id]
        assert (spec.mem_id, spec.mem_offset) == (buf.pool, result.plan.offsets[buf.id]), buf.id
        assert spec.mem_obj_id is not None
    assert result.buffer_sizes == [0, result.plan.arena_sizes[1]]
    assert runtime.stock_arena_bytes(et)["forward"] == result.buffer_sizes
    # Every tensor the program places sits where the plan put some buffer.
    placed = {(b.pool, result.plan.offsets[b.id]) for b in result.problem.buffers}
    (plan,) = et.executorch_program.execution_plan
    emitted = {
        (v.val.allocation_info.memory_id, v.val.allocation_info.memory_offset)
        for v in plan.values
        if getattr(v.val, "allocation_info", None) is not None
    }
    assert emitted and emitted <= placed
    runtime.check_outputs(model("stateful"), et.buffer)


def test_stock_sizes_are_what_executorch_plans():
    pass_ = PlannerPass(solver="greedy", state_in_place=False)  # the same program as stock
    runtime.lower(model("stateful"), memory_planning_pass=pass_)
    stock = runtime.stock_arena_bytes(runtime.lower(model("stateful")))["forward"]
    assert pass_.results["forward"].stock_sizes == stock


def test_mem_obj_ids_are_shared_exactly_by_overlapping_bytes():
    problem = Problem(
        (
            Buffer("a", 0, 2, 32),
            Buffer("b", 2, 4, 16),  # inside a's bytes
            Buffer("c", 4, 6, 32),  # overlaps b's bytes
            Buffer("d", 0, 6, 16),  # bytes of its own
            Buffer("e", 0, 6, 16, pool=2),
        )
    )
    slots = shared_slots(problem, {"a": 0, "b": 16, "c": 24, "d": 64, "e": 0})
    assert slots["a"] == slots["b"] == slots["c"]
    assert len({slots["a"], slots["d"], slots["e"]}) == 3


def _stack_everything(problem, params=None, *, time_limit_s=None):
    """A valid, wasteful plan: every unit on top of the previous one."""
    units = units_of(problem)
    offsets, top = [], 0
    for unit in units:
        top = align_up(top, unit.alignment)
        offsets.append(top if unit.fixed is None else unit.fixed)
        top += unit.size
    return make_plan(problem, units, offsets, "cpsat", 0.0, Outcome.TIME_LIMIT, status="time limit")


def _everything_at_zero(problem, params=None, *, time_limit_s=None):
    return make_plan(problem, units_of(problem), [0] * len(units_of(problem)), "cpsat", 0.0)


def _run_instead(monkeypatch, name: str, function) -> None:
    """The registered solver `name` runs `function` wherever it is loaded (`solve`, fallbacks)."""
    real = SolverEntry.load
    monkeypatch.setattr(SolverEntry, "load", lambda entry: function if entry.name == name else real(entry))


def test_time_out_never_returns_worse_than_bestfit(monkeypatch):
    _run_instead(monkeypatch, "cpsat", _stack_everything)
    pass_ = PlannerPass(solver="cpsat", time_limit_s=1)
    et = runtime.lower(model("chain"), memory_planning_pass=pass_)
    result = pass_.results["forward"]
    fallbacks = {name: solvers.solve(result.problem, name).arena_size for name in ("bestfit", "greedy")}
    assert result.plan.solver in fallbacks
    assert result.plan.arena_size == min(fallbacks.values())
    assert result.plan.arena_size < _stack_everything(result.problem).arena_size
    runtime.check_outputs(model("chain"), et.buffer)


def test_a_plan_the_validator_rejects_fails_the_export_naming_nodes(monkeypatch):
    _run_instead(monkeypatch, "cpsat", _everything_at_zero)
    with pytest.raises(InvalidPlanError) as err:
        runtime.lower(model("chain"), memory_planning_pass=PlannerPass(solver="cpsat"))
    message = "\n".join([str(err.value), *err.value.__notes__])
    assert "overlap" in message and "'forward'" in message
    assert "aten_relu_default" in message or "'x'" in message


class _Unvalidated(PlannerPass):
    """Hands an overlapping plan straight to apply_plan, skipping solve's validation."""

    def run(self, graph_module, graph_signature=None):
        self.graph_module = graph_module
        return super().run(graph_module, graph_signature)


def test_an_invalid_plan_never_reaches_a_tensor_spec(monkeypatch):
    monkeypatch.setattr(Solver, "solve", lambda self, problem, where: _everything_at_zero(problem))
    pass_ = _Unvalidated(solver="bestfit")
    with pytest.raises(ProblemError, match="overlap"):
        runtime.lower(model("chain"), memory_planning_pass=pass_)
    specs = [s for n in pass_.graph_module.graph.nodes for s in get_node_tensor_specs(n)]
    assert specs and all(s.mem_offset is None and s.mem_id is None for s in specs)


def test_infeasible_capacity_fails_naming_the_tensors():
    with pytest.raises(InfeasibleError) as err:
        runtime.lower(model("chain"), memory_planning_pass=PlannerPass(solver="bestfit", capacity=256))
    assert err.value.buffers
    assert any(name in str(err.value) for name in err.value.buffers)
    assert any("'forward'" in note for note in err.value.__notes__)  # the pass names the method


def test_unknown_solver_fails_at_construction():
    with pytest.raises(UnknownSolverError, match="unknown solver 'nope'"):
        PlannerPass(solver="nope")


def test_run_outside_to_executorch_names_methods_in_order():
    class Capture(MemoryPlanningPass):
        def run(self, graph_module, graph_signature=None):
            self.copies = [copy.deepcopy((graph_module, graph_signature)) for _ in range(2)]
            return super().run(graph_module, graph_signature)

    capture = Capture()
    runtime.lower(model("chain"), memory_planning_pass=capture)
    pass_ = PlannerPass(solver="bestfit")
    (gm1, sig1), (gm2, _) = capture.copies
    pass_.run(gm1, sig1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # PassBase.__call__ -> deprecated call()
        pass_(gm2)
    assert list(pass_.results) == ["forward", "method_1"]
    assert gm1.meta["non_const_buffer_sizes"] == gm2.meta["non_const_buffer_sizes"]


def test_mem_ids_set_by_an_earlier_pass_become_separate_pools():
    class SigmoidToArena3(PlannerPass):
        def run(self, graph_module, graph_signature=None):
            for node in graph_module.graph.nodes:
                if node.name == "aten_sigmoid_default":
                    node.meta["spec"].mem_id = 3
            return super().run(graph_module, graph_signature)

    pass_ = SigmoidToArena3(solver="bestfit")
    et = runtime.lower(model("chain"), memory_planning_pass=pass_)
    result = pass_.results["forward"]
    assert result.problem.buffer("aten_sigmoid_default").pool == 3
    assert result.problem.pools == [1, 3]
    sizes = runtime.stock_arena_bytes(et)["forward"]
    assert sizes == [0, result.plan.arena_sizes[1], 0, result.plan.arena_sizes[3]]
    assert specs_by_id_in_graph(et)["aten_sigmoid_default"].mem_id == 3
    runtime.check_outputs(model("chain"), et.buffer)


def test_bestfit_falls_back_to_executorch_greedy_when_that_packs_better(monkeypatch):
    _run_instead(monkeypatch, "bestfit", _stack_everything)
    problem = Problem((Buffer("a", 0, 2, 32), Buffer("b", 2, 4, 32), Buffer("c", 0, 4, 16)))
    plan = solvers.solve(problem, "bestfit", fallback=True)
    assert plan.solver == "greedy" and plan.arena_size == 48


def test_greedy_plans_around_submodule_reservations_like_executorch():
    pass_ = PlannerPass(solver="greedy", cat_fusion=False)
    et = runtime.lower(model("cond"), memory_planning_pass=pass_)
    result = pass_.results["forward"]
    (reserved,) = [b for b in result.problem.buffers if b.kind is BufferKind.SUBMODULE]
    assert min(off for bid, off in result.plan.offsets.items() if bid != reserved.id) >= reserved.size
    stock = runtime.stock_arena_bytes(runtime.lower(model("cond")))["forward"]
    assert result.buffer_sizes == stock
    runtime.check_outputs(model("cond"), et.buffer)
