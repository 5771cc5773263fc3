"""Tiny ExecuTorch programs and recording passes for the planner tests.

Each tiny model is a `ZooModel`, so `experiments.zoo.runtime` lowers it (with any
planning pass), runs it in executorch.runtime and compares it with eager.
"""

from __future__ import annotations

import warnings

import torch
from executorch.exir.passes import MemoryPlanningPass
from torch import nn
from torch.export import Dim

from memplan.experiments.zoo import ZooModel, runtime
from memplan.planner.graph.extract import Extraction, buffer_names, extract
from memplan.planner.stages.shared_state import STATE_POOL


class Chain(nn.Module):
    """Elementwise ops, a cat and a reduction: a handful of activations."""

    def forward(self, x, y):
        a = torch.relu(x) + 1
        b = torch.sigmoid(y) * a
        return torch.cat([a, b]).sum(0), b


class Stateful(nn.Module):
    """A mutable buffer updated in place every call."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))

    def forward(self, x):
        y = torch.relu(x) + 1
        self.state.add_(y)
        return torch.cat([y, self.state]).sum(0)


class Cond(nn.Module):
    """torch.cond: both branches are planned as submodules and their bytes reserved."""

    def forward(self, x, y):
        def yes(x, y):
            return (torch.sin(x) + y).cos() * 2

        def no(x, y):
            return (torch.cos(x) - y).sin()

        z = torch.relu(x) * 3
        return torch.cond(x.sum() > 0, yes, no, (z, y)) + z


class Dynamic(nn.Module):
    def forward(self, x):
        return torch.cat([x.sin(), x.cos()]).relu() * 2


class ZeroSize(nn.Module):
    """Tensors of zero bytes next to ordinary ones."""

    def forward(self, x):
        e = x[:, 4:4] * 2
        return x + 1, e.relu(), torch.cat([x, e], 1) * 3


class Reinplace(nn.Module):
    """index_put becomes index_put_ under run_reinplace_pass; its result is read late."""

    def forward(self, x, idx, v):
        a = x * 2
        b = a.index_put((idx,), v)
        e = torch.tanh(torch.cos(torch.sin(b)) + 1) * 3
        return e * b


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x):
        return torch.sigmoid(self.net(x)) * 2


def _model(name: str, module: nn.Module, make, n_calls: int = 2, **kw) -> ZooModel:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = module.eval()
        example = make()
        calls = [("forward", example)] + [("forward", make()) for _ in range(n_calls - 1)]
    kw.setdefault("backend_config", {})
    kw.setdefault("convert_to_linear", False)
    return ZooModel(name, f"tiny test model {name}", {"forward": (module, example)}, calls, **kw)


def tiny(name: str) -> ZooModel:
    """A fresh tiny model by name (see `TINY`)."""
    if name == "chain":
        return _model(name, Chain(), lambda: (torch.randn(4, 8), torch.randn(4, 8)))
    if name == "stateful":
        return _model(name, Stateful(), lambda: (torch.randn(4, 8),), n_calls=3)
    if name == "cond":
        # The two calls take different branches.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            x, y = torch.randn(8, 16).abs(), torch.randn(8, 16)
        m = _model(name, Cond(), lambda: (x, y))
        m.calls = [("forward", (x, y)), ("forward", (-x, y))]
        return m
    if name == "dynamic":
        m = _model(name, Dynamic(), lambda: (torch.randn(4, 16),))
        m.dynamic_shapes = {"forward": ({0: Dim("n", min=1, max=10)},)}
        m.calls = [("forward", (torch.randn(n, 16),)) for n in (4, 1, 10)]
        return m
    if name == "zero_size":
        return _model(name, ZeroSize(), lambda: (torch.randn(4, 8),))
    if name == "reinplace":
        return _model(
            name,
            Reinplace(),
            lambda: (torch.randn(4, 8), torch.tensor([1, 2]), torch.randn(2, 8)),
            backend_config={"run_reinplace_pass": True},
        )
    if name == "mlp_xnnpack":
        return _model(name, Mlp(), lambda: (torch.randn(2, 16),), partitioner="xnnpack", atol=1e-3, rtol=1e-3)
    raise KeyError(name)


class Store(nn.Module):
    """State shared by the methods below (by FQN)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("memory", torch.zeros(4, 8))
        self.register_buffer("count", torch.zeros(1))


class Write(nn.Module):
    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def forward(self, x):
        self.store.memory.copy_(x)
        self.store.count.add_(1)
        return x.sum().reshape(1)


class Read(nn.Module):
    """Only reads the state: ExecuTorch sees a constant buffer here unless it is shared."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def forward(self):
        return self.store.memory.clone(), self.store.count.clone()


class Noise(nn.Module):
    """Stateless, with activations far larger than the state: it fills arena 1."""

    def forward(self, z):
        return ((z * 2 + 1).relu() - 3).sum().reshape(1)


def write_read() -> ZooModel:
    """Three methods of one program: write state, read it back, and a stateless one in between."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        store = Store()
        x1, x2, z = torch.randn(4, 8), torch.randn(4, 8), torch.randn(64, 64)
    methods = {"write": (Write(store), (x1,)), "read": (Read(store), ()), "noise": (Noise(), (z,))}
    calls = [("write", (x1,)), ("noise", (z,)), ("read", ()), ("write", (x2,)), ("noise", (z,)), ("read", ())]
    return ZooModel(
        "write_read",
        "write / read / noise methods sharing state by FQN",
        methods,
        calls,
        backend_config={},
        shared_state=True,
        memory_planning_config={"share_mutable_buffers": True},
        convert_to_linear=False,
    )


TINY = ["chain", "stateful", "cond", "dynamic", "zero_size", "reinplace", "mlp_xnnpack"]


class StockRecorder(MemoryPlanningPass):
    """ExecuTorch's own planning; records what it gave every tensor, by buffer id.

    `records[method][buffer id] = (inclusive lifetime, mem_id, mem_offset, bytes)`.
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.records: list[dict[str, tuple[tuple[int, int], int | None, int | None, int]]] = []
        self.buffer_sizes: list[list[int]] = []

    def run(self, graph_module, graph_signature=None):
        result = super().run(graph_module, graph_signature)
        names = buffer_names(list(graph_module.graph.nodes), graph_signature)
        self.records.append(
            {
                bid: (tuple(spec.lifetime), spec.mem_id, spec.mem_offset, spec.allocated_memory)
                for spec, (bid, _) in names.items()
                if spec.lifetime[0] is not None
            }
        )
        self.buffer_sizes.append(list(graph_module.meta["non_const_buffer_sizes"]))
        return result


class ExtractRecorder(MemoryPlanningPass):
    """Extracts each graph's problem (same flags), then lets ExecuTorch plan it."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.extractions: list[Extraction] = []

    def run(self, graph_module, graph_signature=None):
        self._set_alloc_node_spec(graph_module)
        self.extractions.append(
            extract(
                graph_module,
                graph_signature,
                alignment=self.alignment,
                alloc_graph_input=self.alloc_graph_input,
                alloc_graph_output=self.alloc_graph_output,
                alloc_mutable_buffers=self.alloc_mutable_buffers,
            )
        )
        # Alloc specs are set; a second `_set_alloc_node_spec` would fail on multi-output ops.
        self._set_alloc_node_spec = lambda gm: None
        try:
            return super().run(graph_module, graph_signature)
        finally:
            del self._set_alloc_node_spec


def state_offsets(et) -> dict[str, dict[str, tuple[int, int]]]:
    """Per method: buffer FQN -> (mem_id, mem_offset) of its placeholder, for planned buffers."""
    found = {}
    for method in et.methods:
        ep = et.exported_program(method)
        buffers = ep.graph_signature.inputs_to_buffers
        found[method] = {
            buffers[n.target]: (n.meta["spec"].mem_id, n.meta["spec"].mem_offset)
            for n in ep.graph_module.graph.nodes
            if n.op == "placeholder" and n.target in buffers and n.meta["spec"].mem_offset is not None
        }
    return found


def assert_shared(et, fqns: set[str]) -> None:
    offsets = state_offsets(et)
    arenas = {tuple(sizes[2:]) for sizes in runtime.stock_arena_bytes(et).values()}
    assert len(arenas) == 1, "every method appends the same state arena"
    layout: dict[str, tuple[int, int]] = {}
    for method, placed in offsets.items():
        for fqn, where in placed.items():
            assert where[0] == STATE_POOL, (method, fqn)
            assert layout.setdefault(fqn, where) == where, f"{fqn} moves between methods"
    assert set(layout) == fqns


class LinearChain(nn.Module):
    """Linears of changing widths; every other one followed by cumsum (a host op under XNNPACK)."""

    def __init__(self, widths: list[int]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths, widths[1:]))

    def forward(self, x):
        first = None
        for i, layer in enumerate(self.layers):
            x = layer(x)
            x = torch.cumsum(x, 1) if i % 2 == 0 else torch.relu(x)
            first = x if first is None else first
        return x + first.sum()


LINEAR_WIDTHS = [16, 48, 96, 96, 96]


def stock_pte(model: ZooModel) -> bytes:
    """The `.pte` bytes of `model` planned by ExecuTorch's stock pass."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return runtime.lower(model).buffer


class StateStore(nn.Module):
    """A buffer two methods share: `WriteState` writes it, `ReadState` reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4, 8))


class WriteState(nn.Module):
    def __init__(self, store: StateStore) -> None:
        super().__init__()
        self.store = store

    def forward(self, x):
        self.store.state.copy_(torch.tanh(x) * 2)
        return x.sum(dim=0)


class ReadState(nn.Module):
    def __init__(self, store: StateStore) -> None:
        super().__init__()
        self.store = store

    def forward(self, y):
        return torch.relu(self.store.state @ y) + 1
