"""The registry's contracts: fallbacks are entries, a solver with fallbacks is a solver, no module
imports the package back, one default solver, and proofs decided on typed fields."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from memplan import solvers
from memplan.errors import InfeasibleError, UnknownSolverError
from memplan.generate import pigeonholes, random_problem
from memplan.peak_bound import lower_bound
from memplan.plan import Outcome
from memplan.problem import Buffer, Gap, Problem
from memplan.solvers.contract import SolverEntry
from memplan.solvers.fallback import WithFallback
from memplan.validate import validate

SOLVERS_DIR = Path(solvers.__file__).parent


def test_no_solver_module_imports_the_solvers_package_back() -> None:
    """Submodules may import each other (`from memplan.solvers.exact import canonical`), never the package's names."""
    for path in sorted(SOLVERS_DIR.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert all(alias.name != "memplan.solvers" for alias in node.names), path.name
            elif isinstance(node, ast.ImportFrom) and node.module == "memplan.solvers":
                names = [a.name for a in node.names if not (SOLVERS_DIR / f"{a.name}.py").is_file()]
                assert not names, f"{path.name} imports {names} from the memplan.solvers package"


def test_fallbacks_and_banked_counterparts_are_the_registered_entries_themselves() -> None:
    for spec in solvers.SOLVERS.values():
        linked = [*spec.fallback, *spec.bank_fallback, *([spec.banked] if spec.banked else [])]
        for other in linked:
            assert isinstance(other, SolverEntry) and solvers.entry(other.name) is other, (spec.name, other)
    assert [e.name for e in solvers.entry("cpsat").fallback] == ["bestfit", "greedy"]
    assert solvers.for_memory_map("bestfit") is solvers.entry("banked_bestfit")
    assert solvers.for_memory_map("cpsat") is solvers.entry("cpsat")


def test_a_solver_with_fallbacks_is_called_like_a_solver_and_keeps_the_smallest_plan() -> None:
    problem = random_problem(40, seed=11)
    spec = solvers.entry("bestfit")
    composed = WithFallback(spec)(problem, spec.make_params({}), time_limit_s=None)
    assert validate(problem, composed) == []
    assert composed.offsets == solvers.solve(problem, "bestfit", fallback=True).offsets
    alone = {name: solvers.solve(problem, name).arena_size for name in ("bestfit", "greedy")}
    assert composed.arena_size == min(alone.values())


def test_solve_runs_the_default_solver_when_not_told() -> None:
    assert inspect.signature(solvers.solve).parameters["solver"].default == solvers.DEFAULT_SOLVER
    plan = solvers.solve(Problem((Buffer("a", 0, 2, 8), Buffer("b", 1, 3, 8))))
    assert plan.solver == solvers.DEFAULT_SOLVER and plan.arena_size == 16 and plan.proven_optimal


GAPPED = Problem((Buffer("w", 0, 4, 10, gaps=(Gap(1, 3, (6, 10)),)), Buffer("v", 1, 3, 6)), capacity=10)
EXACT = Problem((Buffer("a", 0, 2, 8), Buffer("b", 1, 3, 8)), capacity=10)


@pytest.mark.parametrize("proven", [True, False])
def test_solve_withdraws_a_proof_by_its_flag_not_its_message(monkeypatch, proven: bool) -> None:
    """A problem planned with more bytes than it uses cannot carry a proof; an exact one keeps its flag.
    The message says nothing either way, so only the typed field can decide."""

    def refuse(problem, params, *, time_limit_s=None):
        raise InfeasibleError("no plan", proven=proven)

    monkeypatch.setattr(SolverEntry, "load", lambda entry: refuse)
    with pytest.raises(InfeasibleError) as gapped:
        solvers.solve(GAPPED, "bestfit")
    assert not gapped.value.proven
    if proven:
        assert "not proven infeasible" in "\n".join(
            [str(gapped.value), *getattr(gapped.value, "__notes__", [])]
        )
    with pytest.raises(InfeasibleError) as exact:
        solvers.solve(EXACT, "bestfit")
    assert exact.value.proven is proven


@pytest.mark.parametrize("reproducible", [False, True])
def test_cpsat_flags_its_infeasibility_proofs_in_both_modes(reproducible: bool) -> None:
    """pigeonholes(4, 2): bound 14, optimum 18, so capacity 17 is refused by search, not by the bound."""
    with pytest.raises(InfeasibleError, match="proven that no plan fits") as err:
        solvers.solve(
            pigeonholes(buffers=4, holes=2), "cpsat", time_limit_s=30, capacity=17, reproducible=reproducible
        )
    assert err.value.proven


def test_reproducible_outcomes_say_what_the_search_did() -> None:
    problem = random_problem(40, seed=7, alignment=(1, 16))
    bound = lower_bound(problem)
    for decompose in (True, False):  # the part's outcome, and the whole's made from it
        decided = solvers.solve(
            problem, "cpsat", time_limit_s=1, capacity=bound + 100, reproducible=True, decompose=decompose
        )
        assert decided.outcome is Outcome.FEASIBLE and bound < decided.arena_size <= bound + 100
        minimised = solvers.solve(problem, "cpsat", time_limit_s=1, reproducible=True, decompose=decompose)
        assert minimised.outcome is Outcome.TIME_LIMIT and not minimised.proven_optimal, minimised.status
        assert minimised.arena_size > bound


def test_one_mapping_with_a_form_per_entry_gives_every_list_of_names() -> None:
    assert solvers.available() == ["greedy", "bestfit", "skyline", "cpsat", "milp"]
    assert solvers.available(banks=True) == ["banked_greedy", "banked_bestfit", "cpsat"]
    assert solvers.reproducible_solvers() == [
        "greedy",
        "bestfit",
        "skyline",
        "cpsat",
        "banked_greedy",
        "banked_bestfit",
        "shared_objects",
    ]
    assert {e.form for e in solvers.SOLVERS.values()} == set(solvers.Form)
    assert all(solvers.entry(name) is e for name, e in solvers.SOLVERS.items())
    assert [n for n in solvers.SOLVERS if solvers.makes_shared_objects(n)] == ["shared_objects"]
    assert not solvers.makes_shared_objects("no such solver")
    with pytest.raises(UnknownSolverError, match="memory maps also banked_greedy, banked_bestfit"):
        solvers.entry("no such solver")
