"""State shared across the methods of one program.

The runtime gives all host-only methods of a program one set of arenas, so
state written through one method must be read back through another: every
mutated buffer FQN gets one offset in mem_id 2, in the single-instance and
the per-method dict forms alike.
"""

from __future__ import annotations

import pytest
from helpers.executorch_programs import assert_shared, tiny, write_read

from memplan import PlannerPass
from memplan.errors import SharedStatePolicyError
from memplan.experiments import zoo
from memplan.experiments.zoo import runtime
from memplan.planner.stages.shared_state import STATE_POOL
from memplan.problem import BufferKind
from memplan.validate import validate

_MODELS: dict[str, object] = {}


def model(name: str):
    if name not in _MODELS:
        _MODELS[name] = write_read() if name == "write_read" else zoo.get(name)
    return _MODELS[name]


def forms(names):
    return {
        "single": PlannerPass(solver="bestfit"),
        "dict": {name: PlannerPass(solver="bestfit") for name in names},
    }


@pytest.mark.parametrize("form", ["single", "dict"])
def test_state_written_by_one_method_is_read_by_another(form):
    m = model("write_read")
    pass_ = forms(m.methods)[form]
    et = runtime.lower(m, memory_planning_pass=pass_)
    runtime.check_outputs(m, et.buffer)  # write, noise, read, write, noise, read
    assert_shared(et, {"store.memory", "store.count"})
    passes = pass_.values() if isinstance(pass_, dict) else [pass_]
    layouts = {id(p.shared_state) for p in passes}
    assert len(layouts) == 1, "one layout for the whole program"


@pytest.mark.parametrize("form", ["single", "dict"])
@pytest.mark.parametrize("name", ["multi_method_cache", "encoder_decoder_cache"])
def test_zoo_stateful_programs(name, form):
    m = model(name)
    pass_ = forms(m.methods)[form]
    et = runtime.lower(m, memory_planning_pass=pass_)
    runtime.check_outputs(m, et.buffer)
    fqns = {fqn for method_fqns in runtime.mutable_buffers(m).values() for fqn in method_fqns}
    assert_shared(et, fqns)


def test_joint_problem_and_per_method_plans_include_the_state():
    m = model("write_read")
    pass_ = PlannerPass(solver="bestfit")
    runtime.lower(m, memory_planning_pass=pass_)
    layout = pass_.shared_state
    assert validate(layout.problem, layout.plan) == []
    assert set(layout.offsets) == {"store.count", "store.memory"}
    assert {s.buffers for s in layout.problem.same_offsets} == {
        tuple(f"{method}:{fqn}" for method in ("write", "read", "noise")) for fqn in layout.offsets
    }
    # Moving one copy of an FQN breaks the joint problem.
    moved = dict(layout.plan.offsets, **{"read:store.memory": layout.plan.offsets["read:store.memory"] + 16})
    broken = type(layout.plan)(moved, {STATE_POOL: layout.arena + 16}, "test")
    assert any(v.kind.value == "same_offset_broken" for v in validate(layout.problem, broken))
    for method, result in pass_.results.items():
        state = [b for b in result.problem.buffers if b.pool == STATE_POOL]
        assert {b.label for b in state} == set(layout.offsets), method
        assert all(b.kind is BufferKind.MUTABLE_STATE and b.offset == layout.offsets[b.label] for b in state)
        assert result.plan.arena_sizes[STATE_POOL] == layout.arena
        assert validate(result.problem, result.plan) == []


def test_same_instance_for_several_methods_and_repeated_run_multimethod():
    m = model("write_read")
    shared = PlannerPass(solver="bestfit")
    passes = {"write": shared, "read": shared, "noise": PlannerPass(solver="bestfit")}
    et = runtime.lower(m, memory_planning_pass=passes)  # run_multimethod runs 3 times
    assert all(len(sizes) == 3 for sizes in runtime.stock_arena_bytes(et).values())
    assert set(shared.results) == {"write", "read"}
    runtime.check_outputs(m, et.buffer)


def test_without_sharing_the_reader_never_sees_the_writes():
    """Why sharing is the default for multi-method programs."""
    m = model("write_read")
    et = runtime.lower(m, memory_planning_pass=PlannerPass(solver="bestfit", share_mutable_buffers=False))
    with pytest.raises(AssertionError, match=r"call 2 \(read\)"):
        runtime.check_outputs(m, et.buffer)


def test_mixing_shared_and_unshared_methods_is_refused():
    m = model("write_read")
    passes = {
        "write": PlannerPass(solver="bestfit", share_mutable_buffers=False),
        "read": PlannerPass(solver="bestfit", share_mutable_buffers=True),
        "noise": PlannerPass(solver="bestfit"),
    }
    with pytest.raises(SharedStatePolicyError, match="'write'.*share_mutable_buffers=False.*store.memory"):
        runtime.lower(m, memory_planning_pass=passes)


def test_a_single_method_keeps_its_state_in_arena_one():
    m = tiny("stateful")
    pass_ = PlannerPass(solver="bestfit")
    et = runtime.lower(m, memory_planning_pass=pass_)
    assert len(runtime.stock_arena_bytes(et)["forward"]) == 2
    assert pass_.shared_state is None
    state = [b for b in pass_.results["forward"].problem.buffers if b.kind is BufferKind.MUTABLE_STATE]
    assert [b.pool for b in state] == [1]
    runtime.check_outputs(m, et.buffer)


def test_sharing_refuses_tensors_an_earlier_pass_moved_to_other_arenas():
    class MoveToArena3(PlannerPass):
        def run(self, graph_module, graph_signature=None):
            for node in graph_module.graph.nodes:
                if node.name == "aten_mul_tensor":
                    node.meta["spec"].mem_id = 3
            return super().run(graph_module, graph_signature)

    with pytest.raises(SharedStatePolicyError, match=r"aten_mul_tensor \(mem_id 3\)"):
        runtime.lower(model("write_read"), memory_planning_pass=MoveToArena3(solver="bestfit"))


def test_a_method_left_to_the_stock_pass_must_not_touch_shared_state():
    m = model("write_read")
    # "noise" has no state: ExecuTorch's default pass may plan it.
    passes = {"write": PlannerPass(solver="bestfit"), "read": PlannerPass(solver="bestfit")}
    et = runtime.lower(m, memory_planning_pass=passes)
    runtime.check_outputs(m, et.buffer)
    # "read" reads the state: without a PlannerPass it would read a constant.
    with pytest.raises(SharedStatePolicyError, match=r"'read' was planned by another pass.*store.memory"):
        runtime.lower(m, memory_planning_pass={"write": PlannerPass(solver="bestfit")})
