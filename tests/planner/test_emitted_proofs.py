"""Issue 31, item 1: what `PlannerPass()` writes is checked against the program it emits.

`memplan replan` derives each method's lifetimes from the emitted instruction stream; re-planning a
file the pass wrote must find nothing smaller, and "proven optimal" stands only where the arena is
the emitted program's lower bound. Programs: caches written at one position (a stack, and a decoder
written the way Hugging Face's `StaticCache` writes them: `index_copy_` or slice assignment at the
cache position), the random stateful programs, and zoo models; each also runs equal to eager.
"""

from __future__ import annotations

import pytest
import torch
from hf_static_cache import cache_stack, static_cache_decoder
from random_programs import generate

from memplan.experiments import zoo
from memplan.experiments.zoo import ZooModel, runtime
from memplan.experiments.zoo.models.inception import inception_v3
from memplan.experiments.zoo.pte_check import ROUNDS, check_same_outputs
from memplan.planner.pass_ import PlannerPass
from memplan.planner.pte.program import read_program
from memplan.planner.pte.replan import replan


def planned(model: ZooModel, **options) -> tuple[bytes, PlannerPass]:
    """The model lowered by `PlannerPass(**options)`, checked against eager over every call."""
    pass_ = PlannerPass(**options)
    program = runtime.lower(model, memory_planning_pass=pass_)
    runtime.check_outputs(model, program.buffer)
    return program.buffer, pass_


def assert_replan_finds_nothing_smaller(data: bytes, pass_: PlannerPass, derivable: bool = True) -> None:
    """Re-planning the file saves nothing, and each proof the pass claims is the emitted program's
    lower bound. A method whose problem `replan` cannot derive from the file (`derivable=False`
    allows it: reading every file memplan writes is another change) has no proof to check, so the
    pass claims none."""
    emitted = read_program(data)
    for report in replan(data).methods:
        if emitted.methods[report.method].problem is None:
            assert not derivable, report.kept_because
            assert not pass_.results[report.method].plan.proven_optimal
            continue
        assert report.plan is None and "found nothing smaller" in report.kept_because, (
            f"{report.method}: replan {sum(report.before):,} -> {sum(report.after):,} B"
        )
    for method, result in pass_.results.items():
        bound = emitted.methods[method].lower_bound
        if result.plan.proven_optimal:
            assert result.plan.arena_size == bound == result.emitted_lower_bound, (method, result.plan, bound)


def test_a_stack_of_caches_written_at_one_position_keeps_no_copy_of_them_at_the_end():
    model = cache_stack(8, context=64)
    data, pass_ = planned(model)
    result = pass_.results["forward"]
    assert not any(b.id.startswith("output") for b in result.problem.buffers)
    caches = 8 * 2 * 64 * 16 * 4
    assert caches <= result.plan.arena_size < caches + caches // 8  # the caches, not twice them
    assert result.plan.proven_optimal and result.emitted_lower_bound == result.plan.arena_size
    assert_replan_finds_nothing_smaller(data, pass_)


@pytest.mark.parametrize("how", ["index_copy", "slice"])
def test_a_static_cache_decoder_planned_by_default_is_at_what_replan_reaches(how):
    model = static_cache_decoder(n_layers=2, how=how)
    data, pass_ = planned(model)
    [decision_statuses] = [{d.status.value for d in r.state_report.decisions} for r in pass_.results.values()]
    assert decision_statuses == {"in_place"}
    assert_replan_finds_nothing_smaller(data, pass_)


def test_a_decoder_whose_fused_qkv_split_leaves_dead_tensors_is_proven_at_its_emitted_bound():
    """Issue 36: a 2-layer decoder with `index_copy_` caches and one fused q/k/v projection. The slice
    no-op lever removes the split's copy, so the split's outputs are tensors no instruction names; the
    reader took them for live the whole method, over bytes the file rightly gives to others, and
    found no bound. They are dead: the bound is derived, equals the arena, and the proof stands."""
    model = static_cache_decoder(n_layers=2, fused_qkv=True, n_calls=4)
    data, pass_ = planned(model)  # == eager over the 4 decode steps
    result = pass_.results["forward"]
    emitted = read_program(data).methods["forward"]
    assert emitted.cannot == [] and len(emitted.dead) == 2 * 4  # per layer: the split's input and 3 parts
    dead = [t for t in emitted.tensors if t.value in emitted.dead]
    assert {t.role for t in dead} == {"unused"} and all("no instruction names it" in t.writer for t in dead)
    assert emitted.lower_bound == result.emitted_lower_bound == result.plan.arena_size
    assert result.plan.proven_optimal, result.plan
    assert_replan_finds_nothing_smaller(data, pass_)
    rewritten = replan(data, "bestfit", require_saving=False)  # every offset written again, the dead at 0
    assert rewritten.changed and check_same_outputs(data, rewritten.data, isolated=False) == ROUNDS


def test_a_plan_the_solver_did_not_prove_is_proven_when_its_arena_is_the_emitted_bound():
    """Issue 36: Inception-v3 (at 75x75, its smallest input; 299x299 behaves the same, slower) with
    CP-SAT cut short before it can compare the heuristic with its bound: the solver says "not proven",
    yet the arena is the emitted program's lower bound, so the plan is optimal by definition. The
    cats fused into the cat they feed (two per InceptionE block) leave tensors no instruction names:
    dead, so the bound is derived (at 299x299 the file overlaps them with live tensors)."""
    model = inception_v3(75)
    data, pass_ = planned(model, time_limit_s=1e-6, solver_options={"warm_start": False})
    result = pass_.results["forward"]
    emitted = read_program(data).methods["forward"]
    assert [t.shape for t in emitted.tensors if t.value in emitted.dead] == [(1, 768, 1, 1)] * 4
    assert result.plan.arena_size == result.emitted_lower_bound == emitted.lower_bound
    assert result.plan.proven_optimal and result.not_proven_because == ""
    assert "the emitted program's lower bound" in result.plan.status, result.plan.status
    assert "(solver: not proven" in result.plan.status  # what the solver itself concluded, kept
    assert result.plan.lower_bound == result.plan.arena_size


def test_a_random_program_planned_by_default_is_at_what_replan_reaches():
    data, pass_ = planned(generate(15).model())
    assert_replan_finds_nothing_smaller(data, pass_)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_random_programs_planned_by_default_are_at_what_replan_reaches(seed):
    data, pass_ = planned(generate(seed).model())
    assert_replan_finds_nothing_smaller(data, pass_, derivable=False)


ZOO = ["ds_cnn", "llama_decode", "qwen35_hybrid_decode", "lfm2_hybrid_decode", "lstm", "cat_seed"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO)
def test_more_zoo_models_planned_by_default_are_at_what_replan_reaches(name):
    data, pass_ = planned(zoo.get(name))
    assert_replan_finds_nothing_smaller(data, pass_)


def test_a_proof_the_emitted_program_does_not_bear_out_is_withdrawn_with_both_figures(monkeypatch):
    """With the write-backs' output specs left in the problem (as before the fix), the solver proves
    a plan the emitted program does not need: the pass withdraws that proof."""
    monkeypatch.setattr(
        "memplan.planner.levers.state_in_place.lever.outputs_name_the_state", lambda *args: None
    )
    model = cache_stack(4, context=32)
    data, pass_ = planned(model)
    result = pass_.results["forward"]
    bound = read_program(data).methods["forward"].lower_bound
    assert bound is not None and result.plan.arena_size > bound
    assert not result.plan.proven_optimal and result.emitted_lower_bound == bound
    assert (
        f"arena {result.plan.arena_size:,} B" in result.plan.status and f"{bound:,} B" in result.plan.status
    )
    assert replan(data).methods[0].plan is not None, "replan finds the bytes the problem wasted"


def test_the_output_specs_name_the_state_after_every_kind_of_write_back():
    """IN_PLACE (the output names the placeholder), MOVED and KEPT (the copy stays): the output node's
    spec entry of each is the state's TensorSpec, so no tensor of its own is planned for it."""

    class Three(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name in ("a", "b", "c"):
                self.register_buffer(f"cache_{name}", torch.zeros(4, 4))

        def forward(self, x):
            self.cache_a.add_(x)  # in place
            new_b = torch.sin(x)
            old_b = self.cache_b * 2  # read after new_b is made: the copy moves
            self.cache_b.copy_(new_b)
            self.cache_c.copy_(x)  # the value is an input: the copy stays
            return old_b + 1

    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    calls = [("forward", (torch.randn(4, 4),)) for _ in range(3)]
    model = ZooModel(
        "three",
        "three",
        {"forward": (Three().eval(), calls[0][1])},
        calls,
        backend_config={"passes": [InitializedMutableBufferPass(["cache"])]},
        convert_to_linear=False,
    )
    data, pass_ = planned(model, solver="bestfit")
    result = pass_.results["forward"]
    assert {d.status.value for d in result.state_report.decisions} >= {"in_place", "moved"}
    assert not any(b.id.startswith("output") for b in result.problem.buffers)
    assert_replan_finds_nothing_smaller(data, pass_)
