"""`planner.stages.verify` accepts and rejects exactly what ExecuTorch's `Verifier.verify_storage_reuse` does.

Each planned program is corrupted at random (offsets moved onto other
tensors, mem_obj_ids swapped or dropped, lifetimes widened or removed,
storage-base links added, pools changed) and both checkers judge every
corruption.
"""

from __future__ import annotations

import random

import pytest
from executorch.exir.error import InternalError
from executorch.exir.memory_planning import Verifier, collect_specs_from_nodes
from executorch.exir.tensor import TensorSpec
from helpers.executorch_programs import tiny

from memplan.experiments import zoo
from memplan.experiments.zoo import runtime
from memplan.planner.pass_ import PlannerPass
from memplan.planner.stages.verify import StorageReuseError, check_specs, verify_storage_reuse

FIELDS = ("mem_id", "mem_offset", "mem_obj_id", "lifetime", "storage_base", "storage_base_offset")


class Capture(PlannerPass):
    """PlannerPass that keeps every planned graph with the Verifier's flags."""

    def __init__(self, **kwargs) -> None:
        super().__init__(solver="bestfit", **kwargs)
        self.graphs: list = []

    def run(self, graph_module, graph_signature=None):
        result = super().run(graph_module, graph_signature)
        self.graphs.append((graph_module, graph_signature))
        return result


def _planned(model) -> list:
    capture = Capture()
    runtime.lower(model, memory_planning_pass=capture)
    return capture.graphs


def _specs(graph_module, graph_signature) -> list[TensorSpec]:
    return list(
        collect_specs_from_nodes(
            graph_module.graph.nodes,
            graph_signature,
            ignore_const=True,
            do_assertion=False,
            ignore_out_var_node=False,
            dedup=True,
        )
    )


def _executorch_accepts(graph_module, graph_signature) -> bool:
    try:
        Verifier(graph_module, True, True, True, graph_signature).verify_storage_reuse()
    except (InternalError, AssertionError):
        return False
    return True


def _ours_accepts(graph_module, graph_signature) -> bool:
    try:
        verify_storage_reuse(
            graph_module,
            graph_signature,
            alloc_graph_input=True,
            alloc_graph_output=True,
            alloc_mutable_buffers=True,
        )
    except StorageReuseError:
        return False
    return True


def _corrupt(rng: random.Random, specs: list[TensorSpec]) -> None:
    a, b = rng.sample(specs, 2)
    kind = rng.randrange(9)
    if kind == 0:
        a.mem_offset, a.mem_id = b.mem_offset, b.mem_id
    elif kind == 1:
        a.mem_offset, a.mem_id = b.mem_offset, b.mem_id
        a.mem_obj_id = b.mem_obj_id
    elif kind == 2:
        a.mem_offset = max(0, (a.mem_offset or 0) + rng.choice((-64, -16, 16, 64, 256)))
    elif kind == 3:
        a.mem_obj_id = b.mem_obj_id
    elif kind == 4:
        a.mem_obj_id = None
    elif kind == 5:
        a.lifetime = [0, 10_000] if rng.random() < 0.7 else [None, None]
    elif kind == 6:
        a.mem_offset, a.mem_id, a.mem_obj_id = b.mem_offset, b.mem_id, b.mem_obj_id
        a.storage_base, a.storage_base_offset = b, 0
    elif kind == 7:
        a.mem_offset = rng.choice((None, -16))
    else:
        a.mem_id = (a.mem_id or 1) + 1


CASES = ["chain", "stateful", "zero_size", "reinplace", "dynamic", "cond"]


@pytest.mark.parametrize("name", CASES)
def test_same_verdict_as_executorch_on_corrupted_plans(name):
    graphs = _planned(tiny(name))
    rng = random.Random(0)
    verdicts = set()
    for graph_module, graph_signature in graphs:
        assert _ours_accepts(graph_module, graph_signature)
        specs = _specs(graph_module, graph_signature)
        if len(specs) < 2:
            continue
        saved = [(s, {f: getattr(s, f) for f in FIELDS}) for s in specs]
        for _ in range(60):
            for _ in range(rng.choice((1, 1, 2))):
                _corrupt(rng, specs)
            theirs = _executorch_accepts(graph_module, graph_signature)
            assert _ours_accepts(graph_module, graph_signature) == theirs
            verdicts.add(theirs)
            for s, fields in saved:
                for f, v in fields.items():
                    setattr(s, f, list(v) if f == "lifetime" else v)
    assert verdicts == {True, False}  # both outcomes were exercised


def test_unet_cat_fusion_chains_are_accepted_and_sibling_overlap_rejected():
    """Fused cats put inputs inside their output (a storage-base chain): allowed; siblings: not."""
    graphs = _planned(zoo.get("unet"))
    graph_module, graph_signature = graphs[0]
    specs = _specs(graph_module, graph_signature)
    children = [s for s in specs if s.storage_base is not None]
    assert children, "cat fusion should have linked inputs to their cat output"
    assert _ours_accepts(graph_module, graph_signature) and _executorch_accepts(graph_module, graph_signature)
    base = children[0].storage_base
    siblings = [s for s in children if s.storage_base is base]
    if len(siblings) >= 2:
        first, second = siblings[:2]
        second.mem_offset = first.mem_offset
        second.lifetime = list(first.lifetime)
        assert not _executorch_accepts(graph_module, graph_signature)
        assert not _ours_accepts(graph_module, graph_signature)


def _spec(
    offset: int, size: int, life: tuple[int, int], obj: int, base: TensorSpec | None = None
) -> TensorSpec:
    import torch

    spec = TensorSpec(torch.float32, [size // 4])
    spec.mem_id, spec.mem_offset, spec.mem_obj_id = 1, offset, obj
    spec.lifetime = list(life)
    spec.storage_base = base
    return spec


def test_check_specs_names_both_tensors():
    a = _spec(0, 64, (0, 3), 0)
    b = _spec(32, 64, (2, 5), 0)
    with pytest.raises(StorageReuseError, match="b and a overlap"):
        check_specs([a, b], names={id(a): "a", id(b): "b"})
    check_specs([a, b], allow_lifetime_and_storage_overlap=True)
    b.lifetime = [4, 5]
    check_specs([a, b])
    b.mem_obj_id = 1
    with pytest.raises(StorageReuseError, match="one mem_obj_id"):
        check_specs([a, b])


def test_a_chain_three_deep_may_overlap_but_cousins_may_not():
    root = _spec(0, 256, (0, 9), 0)
    mid = _spec(0, 128, (0, 9), 0, root)
    leaf = _spec(0, 64, (0, 9), 0, mid)
    check_specs([root, mid, leaf])
    cousin = _spec(32, 64, (0, 9), 0, root)
    with pytest.raises(StorageReuseError, match="neither backs"):
        check_specs([root, mid, leaf, cousin])
