"""Sinking: each instruction moved to just before its first user when that lengthens no other lifetime.

Walked from the last instruction to the first, so an instruction's users already sit where they end
up. An instruction sinks together with the producers only it (or its chain) uses (a slice then its
quantize) when another instruction runs between them, so the bytes between them stay as short-lived as they were. A move is made only when

* every planned tensor the chain reads is read again at or after the new place anyway (or is not
  planned: a constant, an input the caller gives), so no lifetime grows while the chain's own
  outputs start later; and
* no instruction the chain passes writes a tensor the chain reads, reads one it writes, or writes
  something not known (`legality.writes`).

Every lifetime then is the same or shorter, in an order of the other instructions that is
unchanged, so no moment holds more live bytes than before. The lever also tries the order without
the lifetime rule (`RULES`) and keeps whichever has the lowest bound.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from memplan.planner.levers.graph_facts import view_base
from memplan.planner.levers.reorder.legality import (
    arg_nodes,
    instruction_of,
    is_instruction,
    movable,
    reads,
    specs_of,
    unit,
    writes,
)


@dataclass
class _Order:
    """The instruction order being rewritten, and what the moves read off the graph once."""

    nodes: list[torch.fx.Node]
    planned: set[int]  # id() of the planned TensorSpecs
    mutated: set[torch.fx.Node]
    pos: dict[torch.fx.Node, int] = field(init=False)
    carriers: dict[int, list[torch.fx.Node]] = field(init=False)  # spec id -> nodes holding its bytes
    _effects: dict[torch.fx.Node, tuple[set[int], set[int] | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pos = {n: i for i, n in enumerate(self.nodes)}
        self.carriers = defaultdict(list)
        for node in self.nodes:
            for spec in specs_of([view_base(node)]):
                self.carriers[id(spec)].append(node)

    def effects(self, node: torch.fx.Node) -> tuple[set[int], set[int] | None]:
        """(what `node` reads, what it writes or None), computed once."""
        if node not in self._effects:
            self._effects[node] = (reads(node), writes(node, self.mutated))
        return self._effects[node]

    def move(self, chain: list[torch.fx.Node], before: torch.fx.Node) -> None:
        members = set(chain)
        rest = [n for n in self.nodes if n not in members]
        at = rest.index(before)
        self.nodes = [*rest[:at], *chain, *rest[at:]]
        self.pos = {n: i for i, n in enumerate(self.nodes)}


RULES = ("no lifetime grows", "shared inputs may grow", "as late as possible")
"""The lifetime rules `sunk` can follow, strictest first."""


def sunk(
    nodes: Sequence[torch.fx.Node], planned: set[int], mutated: set[torch.fx.Node], rule: str = RULES[0]
) -> tuple[list[torch.fx.Node], list[str]]:
    """The new order of `nodes` and the names of the instructions moved (see the module docstring).

    The looser `rule`s may lengthen a tensor several readers share (a quantized image every band
    slices: each slice sunk to its band lengthens the image once and shortens every slice), or any
    tensor (every instruction as late as it may run); only the lever's bound check then says
    whether that pays."""
    order = _Order(list(nodes), planned, mutated)
    moved: list[str] = []
    for node in reversed(list(nodes)):
        if not movable(node, mutated):
            continue
        for chain in (_chain(node, order), sorted(unit(node), key=order.pos.__getitem__)):
            before = _first_user(chain, order)
            if before is None or order.pos[before] - order.pos[chain[0]] <= len(chain):
                break  # already just before its first user
            if _crosses_nothing(chain, before, order) and (
                rule == RULES[2] or _no_lifetime_grows(chain, before, order, rule == RULES[1])
            ):
                order.move(chain, before)
                moved += [n.name for n in chain if instruction_of(n) is n]
                break
    return order.nodes, list(dict.fromkeys(moved))


def _chain(node: torch.fx.Node, order: _Order) -> list[torch.fx.Node]:
    """`node`'s unit and the movable producers whose every user is in the chain, in current order."""
    members = set(unit(node))
    todo = [node]
    while todo:
        user = todo.pop()
        for arg in arg_nodes(user):
            producer = instruction_of(arg)
            if producer in members or not movable(producer, order.mutated):
                continue
            piece = unit(producer)
            if _apart(piece, user, order) and all(
                u in members for p in piece for u in p.users if u not in piece
            ):
                members.update(piece)
                todo.append(producer)
    return sorted(members, key=order.pos.__getitem__)


def _apart(piece: list[torch.fx.Node], user: torch.fx.Node, order: _Order) -> bool:
    """True if another instruction runs between `piece` and `user`'s unit: a producer already just
    before its user stays out of the chain (else a chain would swallow every single-user run of the
    graph and only ever move as one block)."""
    last = max(order.pos[p] for p in piece)
    first = min(order.pos[u] for u in unit(user))
    return any(is_instruction(n) for n in order.nodes[last + 1 : first])


def _first_user(chain: list[torch.fx.Node], order: _Order) -> torch.fx.Node | None:
    """Where the chain goes: before its first user's unit (the `memory.alloc`s it writes into come
    first, and passing them would start the user's output earlier)."""
    members = set(chain)
    users = [u for n in chain for u in n.users if u not in members]
    first = min(users, key=order.pos.__getitem__, default=None)
    if first is None:
        return None
    return min(unit(first), key=order.pos.__getitem__) if first.op == "call_function" else first


def _crosses_nothing(chain: list[torch.fx.Node], before: torch.fx.Node, order: _Order) -> bool:
    """True if no node the chain passes writes what it reads, reads what it writes, or writes the unknown."""
    members = set(chain)
    read: set[int] = set()
    written: set[int] = set()
    for node in order.nodes[order.pos[chain[0]] : order.pos[before]]:
        node_reads, node_writes = order.effects(node)
        if node in members:
            read |= node_reads
            written |= node_writes or set()
        elif node_writes is None or node_writes & read or node_reads & written:
            return False
    return True


def _no_lifetime_grows(
    chain: list[torch.fx.Node], before: torch.fx.Node, order: _Order, shared_may_grow: bool
) -> bool:
    """True if every planned tensor the chain reads from outside it is read at or after `before` anyway
    (`shared_may_grow`: or is read by another instruction too)."""
    members = set(chain)
    outside = {a for n in chain for a in arg_nodes(n) if a not in members}
    at = order.pos[before]
    for arg in outside:
        for spec in specs_of([view_base(arg)]):
            if id(spec) not in order.planned:
                continue
            readers = [u for c in order.carriers[id(spec)] for u in c.users if u not in members]
            if shared_may_grow and readers:
                continue
            if not any(order.pos[u] >= at for u in readers):
                return False
    return True
