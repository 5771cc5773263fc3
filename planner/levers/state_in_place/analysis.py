"""Decide, for every write-back `copy_` of a method, whether the new value can be written in place.

Functionalization turns an in-place state update (`k_cache[:, :, pos] = k`)
into an op that writes a full-size new value (`index_put.out(k_cache, ...,
out=new)`) plus a write-back `copy_(k_cache, new)` that ExecuTorch emits at
the end of the graph. The new value then lives from its op to the end, and
its bytes are copied once per call. This module looks at what the graph
does and decides each write-back (nothing here touches the graph;
`planner.levers.state_in_place.rewrite` carries the decisions out):

* IN_PLACE: the new value gets the state's own storage (the same
  TensorSpec), so its producer writes the state where it lives and the copy
  goes. Legal only when no reader of the old value runs after the producer
  starts (the producer itself may read it only through an argument its
  kernel may alias, `planner.levers.state_in_place.kernels`), shape, dtype and dim order
  match, and the value is written by a plain out-variant op of this method
  (not a delegate, a control-flow op, an input, a view, or an op with
  several outputs), is not also a graph output or another write-back's
  value, and nothing writes the state or the value in place.
* MOVED: the copy must stay, but it moves to right after the last node
  that reads the old value or writes the new one, and later readers of the
  new value read the state instead (same bytes from then on), so the new
  value's life ends early.
* KEPT: the copy stays at the end.

Every decision that is not IN_PLACE names its reasons (`Refusal`) and
the nodes behind them.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import cast

import torch
from executorch.exir import memory
from executorch.exir.delegate import executorch_call_delegate
from executorch.exir.operator.convert import get_out_args_from_opoverload, unwrap_op_overload
from executorch.exir.schema import TensorShapeDynamism
from executorch.exir.tensor import TensorSpec, num_bytes_from_shape_and_dtype
from torch.export.exported_program import ExportGraphSignature
from torch.utils._pytree import tree_flatten

from memplan.planner.compat import is_inplace_node, is_out_var_node
from memplan.planner.levers.refusals import Refusal
from memplan.planner.levers.state_in_place.kernels import alias_safe_args

_CONTROL_FLOW = (
    torch.ops.higher_order.cond,
    torch.ops.higher_order.map_impl,
    torch.ops.higher_order.while_loop,
    torch.ops.higher_order.scan,
)


class StateStatus(str, Enum):
    IN_PLACE = "in_place"  # the producer writes the state where it lives; the copy is removed
    MOVED = "moved"  # the copy stays, moved up to right after the last reader of the old value
    KEPT = "kept"  # the copy stays at the end of the method


# Reasons for which the copy stays where it is: moving it would change what the program does.
_UNMOVABLE = frozenset(
    {Refusal.STATE_WRITTEN_IN_PLACE, Refusal.USER_INPUT_MUTATION, Refusal.STATE_NOT_PLANNED}
)


@dataclass(frozen=True)
class WriteBack:
    """One write-back `copy_(state, value)` and what becomes of it.

    `moved_after` is the node a MOVED copy now follows; `redirected` are the
    readers of the value that read the state instead once the copy is done.
    """

    copy: str  # node name of the copy_
    state: str  # node name of the state's placeholder
    fqn: str  # buffer FQN (or user input name)
    value: str  # node name of the new value
    producer: str  # node that writes the value's bytes ("" if none)
    nbytes: int  # bytes the copy moves per call
    status: StateStatus
    reasons: tuple[Refusal, ...] = ()
    detail: str = ""
    moved_after: str = ""
    redirected: tuple[str, ...] = ()

    @property
    def copy_bytes_removed(self) -> int:
        """Bytes no longer copied per call."""
        return self.nbytes if self.status is StateStatus.IN_PLACE else 0


def is_write_back(node: torch.fx.Node) -> bool:
    """True for the `copy_(placeholder, value)` that ExecuTorch inserts for a mutated buffer or input."""
    return (
        node.op == "call_function"
        and node.target == torch.ops.aten.copy_.default
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].op == "placeholder"
        and any(user.op == "output" for user in node.users)
    )


def analyze(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    *,
    state_planned: bool = True,
) -> list[WriteBack]:
    """Decide every write-back of the graph (in graph order).

    `state_planned` is False when ExecuTorch does not plan mutable buffers
    (`alloc_mutable_buffers=False`): the state's memory then comes from the
    runtime and nothing may be placed in it.
    """
    if not any(is_write_back(n) for n in graph_module.graph.nodes):
        return []  # no state is written back: skip indexing the graph
    return _Analyzer(graph_module, graph_signature, state_planned).run()


class _Analyzer:
    def __init__(
        self, gm: torch.fx.GraphModule, signature: ExportGraphSignature | None, state_planned: bool
    ) -> None:
        self.signature = signature
        self.state_planned = state_planned
        self.nodes = list(gm.graph.nodes)
        self.index = {n: i for i, n in enumerate(self.nodes)}
        self.copies = [n for n in self.nodes if is_write_back(n)]
        self.output = next(n for n in reversed(self.nodes) if n.op == "output")
        # Who reads / writes each node, indexed once: scanning the graph per write-back is
        # quadratic in the layers of an LLM (two caches per layer).
        self.read_by: dict[torch.fx.Node, list[torch.fx.Node]] = defaultdict(list)
        self.written_by: dict[torch.fx.Node, list[torch.fx.Node]] = defaultdict(list)
        for node in self.nodes:
            if not (node.op == "call_function" and node.target is memory.view):
                for arg in node.all_input_nodes:
                    self.read_by[arg].append(node)
            for arg in dict.fromkeys(_written_args(node)):
                self.written_by[arg].append(node)

    def run(self) -> list[WriteBack]:
        return [self._decide(copy) for copy in self.copies]

    # -- one write-back ------------------------------------------------------------------
    def _decide(self, copy: torch.fx.Node) -> WriteBack:
        state, value = cast(torch.fx.Node, copy.args[0]), copy.args[1]
        known = self._fqn(state)
        reasons: list[tuple[Refusal, str]] = []
        if known is None:
            reasons.append((Refusal.USER_INPUT_MUTATION, f"{state.name} is a user input"))
            fqn = state.name
        else:
            fqn = known
        if known is not None and not self.state_planned:
            reasons.append((Refusal.STATE_NOT_PLANNED, f"{fqn} is not memory planned"))
        state_aliases = self._aliases(state, stop=copy)
        for writer in self._writers(state_aliases, exclude=copy):
            reasons.append((Refusal.STATE_WRITTEN_IN_PLACE, f"{writer.name} writes {fqn} in place"))
        spec: TensorSpec = state.meta["spec"]
        nbytes = num_bytes_from_shape_and_dtype(torch.Size(spec.shape), spec.dtype)
        if not isinstance(value, torch.fx.Node) or not isinstance(value.meta.get("spec"), TensorSpec):
            reasons.append((Refusal.NOT_AN_OUT_OP, f"{fqn} is set from a non-tensor value"))
            return self._refused(copy, state, fqn, value, None, nbytes, reasons)

        producer, why = self._producer(value)
        if why is not None:
            reasons.append(why)
        reasons += _layout_mismatches(value.meta["spec"], spec)
        value_aliases = self._aliases(_storage_root(value), stop=copy)
        reasons += self._value_escapes(copy, value, value_aliases)
        for writer in self._writers(value_aliases, exclude=None):
            reasons.append(
                (Refusal.NEW_VALUE_WRITTEN_IN_PLACE, f"{writer.name} writes {value.name} in place")
            )
        if producer is not None:
            readers = self._readers(state_aliases, exclude=copy)
            late = [r for r in readers if self.index[r] > self.index[producer]]
            if late:
                names = ", ".join(r.name for r in late[:5])
                reasons.append(
                    (Refusal.OLD_VALUE_READ_LATER, f"{names} read(s) {fqn} after {producer.name} starts")
                )
            if producer in readers and why is None:  # a plain out-variant op: its kernel decides
                reasons += self._unsafe_reads(producer, state, state_aliases, fqn)
        if reasons:
            return self._refused(copy, state, fqn, value, producer, nbytes, reasons)
        assert producer is not None, "without a refusal an op writes the new value"
        return WriteBack(copy.name, state.name, fqn, value.name, producer.name, nbytes, StateStatus.IN_PLACE)

    def _refused(
        self,
        copy: torch.fx.Node,
        state: torch.fx.Node,
        fqn: str,
        value: object,
        producer: torch.fx.Node | None,
        nbytes: int,
        reasons: list[tuple[Refusal, str]],
    ) -> WriteBack:
        codes = tuple(dict.fromkeys(r for r, _ in reasons))
        detail = "; ".join(d for _, d in reasons)
        name = value.name if isinstance(value, torch.fx.Node) else repr(value)
        made_by = producer.name if producer is not None else ""
        status, after = StateStatus.KEPT, ""
        redirected: tuple[str, ...] = ()
        if isinstance(value, torch.fx.Node) and not (set(codes) & _UNMOVABLE):
            anchor = self._move_anchor(copy, state, value)
            if anchor is not None:
                status, after = StateStatus.MOVED, anchor.name
                same_layout = not _layout_mismatches(value.meta["spec"], state.meta["spec"])
                if same_layout and value.op != "placeholder":
                    redirected = tuple(r.name for r in self._redirectable(value, anchor, copy))
        return WriteBack(
            copy.name, state.name, fqn, name, made_by, nbytes, status, codes, detail, after, redirected
        )

    # -- the new value ---------------------------------------------------------------------
    def _producer(self, value: torch.fx.Node) -> tuple[torch.fx.Node | None, tuple[Refusal, str] | None]:
        """The node writing the value's bytes, and why it cannot write them into the state (or None)."""
        if value.op == "placeholder":
            return None, (Refusal.NEW_VALUE_IS_INPUT, f"{value.name} is an input of the method")
        if value.op != "call_function":
            return None, (Refusal.NOT_AN_OUT_OP, f"{value.name} is a {value.op} node")
        if value.target is memory.view:
            return value, (Refusal.NEW_VALUE_IS_VIEW, f"{value.name} is a view of {value.args[0]}")
        if value.target is operator.getitem:
            source = cast(torch.fx.Node, value.args[0])
            if source.target is executorch_call_delegate:
                return source, (
                    Refusal.DELEGATE_OUTPUT,
                    f"{value.name} comes from delegate {source.name}",
                )
            if source.target in _CONTROL_FLOW:
                return source, (Refusal.CONTROL_FLOW_OUTPUT, f"{value.name} comes from {source.name}")
            return source, (
                Refusal.NOT_AN_OUT_OP,
                f"{value.name} is one of several outputs of {source.name}",
            )
        if value.target is executorch_call_delegate:
            return value, (Refusal.DELEGATE_OUTPUT, f"{value.name} is a delegate call")
        if value.target in _CONTROL_FLOW:
            return value, (Refusal.CONTROL_FLOW_OUTPUT, f"{value.name} is a control-flow op")
        if is_inplace_node(value) or not is_out_var_node(value):
            return value, (Refusal.NOT_AN_OUT_OP, f"{value.name} ({value.target}) writes no out buffer")
        outs = get_out_args_from_opoverload(unwrap_op_overload(value.target))
        alloc = value.kwargs.get(outs[0]) if len(outs) == 1 else None
        if not isinstance(alloc, torch.fx.Node) or alloc.meta.get("spec") is not value.meta["spec"]:
            return value, (
                Refusal.NOT_AN_OUT_OP,
                f"{value.name} has no memory.alloc out= node of its own",
            )
        return value, None

    def _value_escapes(
        self, copy: torch.fx.Node, value: torch.fx.Node, aliases: set[torch.fx.Node]
    ) -> list[tuple[Refusal, str]]:
        """The value must reach only this write-back: not another one, not the caller."""
        found = []
        for other in self.copies:
            if other is not copy and other.args[1] in aliases:
                found.append((Refusal.NEW_VALUE_SHARED, f"{other.name} also writes {value.name} back"))
        if any(arg in aliases for arg in self.output.all_input_nodes):
            found.append((Refusal.NEW_VALUE_IS_GRAPH_OUTPUT, f"{value.name} is returned to the caller"))
        return found

    def _unsafe_reads(
        self, producer: torch.fx.Node, state: torch.fx.Node, aliases: set[torch.fx.Node], fqn: str
    ) -> list[tuple[Refusal, str]]:
        """The producer reads the old state: only allowed through arguments its kernel may alias."""
        op = unwrap_op_overload(producer.target)
        safe = alias_safe_args(op)
        found = []
        for i, arg in enumerate(op._schema.arguments):
            given = producer.args[i] if i < len(producer.args) and not arg.kwarg_only else None
            if given is None:
                given = producer.kwargs.get(arg.name)
            for node in tree_flatten(given)[0]:
                if node not in aliases:
                    continue
                if node is not state:
                    found.append(
                        (
                            Refusal.KERNEL_NOT_ALIAS_SAFE,
                            f"{producer.name} reads a view of {fqn} as {arg.name}",
                        )
                    )
                elif arg.name not in safe:
                    found.append(
                        (
                            Refusal.KERNEL_NOT_ALIAS_SAFE,
                            f"{producer.name} ({op}) reads {fqn} as {arg.name!r}, which its kernel"
                            " is not known to allow out= to alias",
                        )
                    )
        return found

    # -- moving a copy that stays -----------------------------------------------------------
    def _move_anchor(
        self, copy: torch.fx.Node, state: torch.fx.Node, value: torch.fx.Node
    ) -> torch.fx.Node | None:
        """The node the copy can follow: the last one reading the old state or writing the value.

        None when that is already the node just before the copy.
        """
        last = value
        for node in self._readers(self._aliases(state, stop=copy), exclude=copy):
            last = max(last, node, key=self.index.__getitem__)
        for node in self._writers(self._aliases(_storage_root(value), stop=copy), exclude=None):
            last = max(last, node, key=self.index.__getitem__)
        if self.index[last] >= self.index[copy] - 1:
            return None
        return last

    def _redirectable(
        self, value: torch.fx.Node, anchor: torch.fx.Node, copy: torch.fx.Node
    ) -> list[torch.fx.Node]:
        """Readers of the value after the moved copy that can read the state instead.

        The output node (the caller may keep what it returns) and other
        write-backs keep reading the value, also through a view.
        """
        after = self.index[anchor]
        return [
            user
            for user in value.users
            if self.index[user] > after
            and user is not copy
            and user.op != "output"
            and not is_write_back(user)
            and not (user.target is memory.view and self._view_escapes(user, copy))
        ]

    def _view_escapes(self, view: torch.fx.Node, copy: torch.fx.Node) -> bool:
        """True if the output node or a write-back reads `view` (or a view of it)."""
        readers = self._readers(self._aliases(view, stop=copy), exclude=copy)
        return any(r.op == "output" or is_write_back(r) for r in readers)

    # -- graph facts -----------------------------------------------------------------------------
    def _fqn(self, placeholder: torch.fx.Node) -> str | None:
        sig = self.signature
        target = str(placeholder.target)
        if sig is None or target not in sig.inputs_to_buffers:
            return None
        return sig.inputs_to_buffers[target]

    def _aliases(self, node: torch.fx.Node, stop: torch.fx.Node) -> set[torch.fx.Node]:
        """`node` and every node sharing its bytes: views of it and in-place ops' results on it."""
        found, todo = {node}, [node]
        while todo:
            current = todo.pop()
            for user in current.users:
                if user is stop or user in found:
                    continue
                is_view = (
                    user.op == "call_function" and user.target is memory.view and user.args[0] is current
                )
                if is_view or (is_inplace_node(user) and user.args and user.args[0] is current):
                    found.add(user)
                    todo.append(user)
        return found

    def _readers(self, aliases: set[torch.fx.Node], exclude: torch.fx.Node) -> list[torch.fx.Node]:
        """Nodes other than views that take one of `aliases` as an argument (the output node included)."""
        return self._in_order(self.read_by, aliases, exclude)

    def _writers(self, aliases: set[torch.fx.Node], exclude: torch.fx.Node | None) -> list[torch.fx.Node]:
        """Nodes other than `exclude` that write one of `aliases` in place (not through out=)."""
        return self._in_order(self.written_by, aliases, exclude)

    def _in_order(
        self,
        table: dict[torch.fx.Node, list[torch.fx.Node]],
        aliases: set[torch.fx.Node],
        exclude: torch.fx.Node | None,
    ) -> list[torch.fx.Node]:
        """The nodes `table` lists for any of `aliases`, once each, in graph order, without `exclude`."""
        found = {node for alias in aliases for node in table.get(alias, ()) if node is not exclude}
        return sorted(found, key=self.index.__getitem__)


# -- helpers ---------------------------------------------------------------------------


def _layout_mismatches(value: TensorSpec, state: TensorSpec) -> list[tuple[Refusal, str]]:
    found = []
    if value.dtype != state.dtype:
        found.append((Refusal.DTYPE_MISMATCH, f"{value.dtype} into {state.dtype}"))
    if tuple(value.shape) != tuple(state.shape):
        found.append((Refusal.SHAPE_MISMATCH, f"shape {list(value.shape)} into {list(state.shape)}"))
    elif tuple(value.dim_order) != tuple(state.dim_order):
        found.append(
            (
                Refusal.DIM_ORDER_MISMATCH,
                f"dim order {tuple(value.dim_order)} into {tuple(state.dim_order)}",
            )
        )
    if (
        TensorShapeDynamism.STATIC != value.shape_dynamism
        or state.shape_dynamism != TensorShapeDynamism.STATIC
    ):
        found.append((Refusal.DYNAMIC_SHAPE, "dynamic shape"))
    return found


def _storage_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node owning `node`'s bytes: through views and in-place results to their base."""
    while node.op == "call_function" and node.args and isinstance(node.args[0], torch.fx.Node):
        if node.target is not memory.view and not is_inplace_node(node):
            break
        node = node.args[0]
    return node


def _written_args(node: torch.fx.Node) -> Iterable[torch.fx.Node]:
    """The tensors a node writes in place (mutable schema arguments other than out=)."""
    if node.op != "call_function":
        return []
    try:
        op = unwrap_op_overload(node.target)
    except TypeError:
        return []
    schema = getattr(op, "_schema", None)
    if schema is None:
        return []
    out_args = set(get_out_args_from_opoverload(op)) if is_out_var_node(node) else set()
    written = []
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or not arg.alias_info.is_write or arg.name in out_args:
            continue
        given = node.args[i] if i < len(node.args) and not arg.kwarg_only else node.kwargs.get(arg.name)
        written += [v for v in tree_flatten(given)[0] if isinstance(v, torch.fx.Node)]
    return written
