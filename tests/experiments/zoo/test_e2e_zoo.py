"""Every zoo model, planned by memplan, loads and runs in executorch.runtime.

For each (model, solver): outputs match eager PyTorch and the stock-planned
program, every plan is valid, the lower bound is at most the stock arena, and
best-fit / CP-SAT never need more bytes than stock. A few cheap combinations
run by default; the rest are marked slow.
"""

from __future__ import annotations

import pytest
from helpers.executorch_programs import assert_shared

from memplan import PlannerPass
from memplan.experiments import zoo
from memplan.experiments.bench.compare_stock import lower_bound_bytes, program_bytes
from memplan.experiments.zoo import runtime
from memplan.validate import validate

SOLVERS = ("greedy", "bestfit", "cpsat")
DEFAULT = {
    ("cat_seed", "greedy"),
    ("cat_seed", "bestfit"),
    ("ds_cnn", "bestfit"),
    ("deep_autoencoder", "cpsat"),
    ("encoder_decoder_cache", "cpsat"),
}  # XNNPACK and shared state also run by default in test_extract / test_multimethod
MILP_MODELS = ("cat_seed", "deep_autoencoder", "multi_method_cache", "ds_cnn")

_MODELS: dict[str, zoo.ZooModel] = {}
_STOCK: dict[str, tuple[object, list]] = {}


def model(name: str) -> zoo.ZooModel:
    if name not in _MODELS:
        _MODELS[name] = zoo.get(name)
    return _MODELS[name]


def stock(name: str):
    """(stock program, its outputs over the call sequence), once per model."""
    if name not in _STOCK:
        et = runtime.lower(model(name))
        _STOCK[name] = (et, runtime.run_pte(et.buffer, model(name).calls))
    return _STOCK[name]


def all_results(results):
    for result in results:
        yield result
        yield from all_results(result.submodules.values())


def check(name: str, solver: str, time_limit_s: float) -> PlannerPass:
    m = model(name)
    pass_ = PlannerPass(solver=solver, time_limit_s=time_limit_s)
    et = runtime.lower(m, memory_planning_pass=pass_)
    got = runtime.run_pte(et.buffer, m.calls)
    runtime.compare_outputs(m, got, runtime.eager_outputs(m))
    stock_et, stock_out = stock(name)
    runtime.compare_outputs(m, got, stock_out, atol=1e-6, rtol=1e-6)
    for result in all_results(pass_.results.values()):
        assert validate(result.problem, result.plan) == []
    stock_bytes = program_bytes(runtime.stock_arena_bytes(stock_et))
    assert lower_bound_bytes(pass_.results) <= stock_bytes
    if solver != "greedy":
        assert program_bytes(runtime.stock_arena_bytes(et)) <= stock_bytes
    if m.shared_state:
        assert_shared(et, {f for fqns in runtime.mutable_buffers(m).values() for f in fqns})
    return pass_


@pytest.mark.parametrize(
    "name,solver",
    [
        pytest.param(n, s, marks=() if (n, s) in DEFAULT else pytest.mark.slow, id=f"{n}-{s}")
        for n in zoo.names()
        for s in SOLVERS
    ],
)
def test_zoo_model_runs_with_memplan(name, solver):
    check(name, solver, time_limit_s=10)


@pytest.mark.slow
@pytest.mark.parametrize("name", MILP_MODELS)
def test_small_zoo_models_with_milp(name):
    pass_ = check(name, "milp", time_limit_s=60)
    assert all(r.plan.proven_optimal for r in all_results(pass_.results.values()))
