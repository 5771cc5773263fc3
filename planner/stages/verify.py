"""The verify stage: ExecuTorch's checks of a written plan, its storage-reuse check in O(n log n).

`verify_method` runs what stock's pass runs after planning: the storage-reuse
check (unless the algorithm's translation waives it) and `Verifier`'s graph
input/output check as is.

`Verifier.verify_storage_reuse` (exir/memory_planning.py) compares every pair
of planned specs and formats an error message for each pair it looks at, so a
method of 3,000 tensors costs it about a minute. `verify_storage_reuse` here
accepts and rejects exactly what that method does, on the same specs
(`collect_specs_from_nodes` with the Verifier's arguments):

- either every spec has a `mem_obj_id` or none has;
- two specs in one `mem_id` need an integer `mem_offset >= 0` each;
- two specs whose byte ranges `[mem_offset, mem_offset + allocated_memory)`
  overlap in one `mem_id` (a spec of 0 bytes overlaps nothing) must have the
  same `mem_obj_id`. Equal ids along every overlapping pair means one id per
  maximal run of overlapping ranges, which a sort by offset finds;
- two such specs whose inclusive lifetimes also overlap (unless
  `allow_lifetime_and_storage_overlap`) must be related by the storage-base
  chain: one is the other's `storage_base`, or its base's base, and so on.
  A sweep over time finds the overlapping ranges live at each start, with a
  max-segment tree over ranges sorted by offset, in O((n + k) log n) for k
  chain-related overlaps (the only ones a valid plan has).

Errors are `StorageReuseError`s naming both tensors.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Iterable, Sequence

import torch
from executorch.exir.memory_planning import Verifier, collect_specs_from_nodes
from executorch.exir.tensor import TensorSpec
from torch.export.exported_program import ExportGraphSignature

from memplan.errors import ProblemError


class StorageReuseError(ProblemError):
    """A written plan that ExecuTorch's `Verifier.verify_storage_reuse` rejects; names both tensors."""


def verify_method(
    graph_module: torch.fx.GraphModule,
    signature: ExportGraphSignature | None,
    flags: tuple[bool, bool, bool],
    *,
    storage_reuse: bool,
    allow_lifetime_and_storage_overlap: bool,
) -> None:
    """ExecuTorch's checks of the written plan; `flags` are (alloc_graph_input, alloc_graph_output,
    alloc_mutable_buffers). An algorithm run as given keeps its mem_obj_ids, and a translation may
    waive the storage-reuse check (`storage_reuse` False)."""
    alloc_input, alloc_output, alloc_mutable = flags
    if storage_reuse:
        verify_storage_reuse(
            graph_module,
            signature,
            alloc_graph_input=alloc_input,
            alloc_graph_output=alloc_output,
            alloc_mutable_buffers=alloc_mutable,
            allow_lifetime_and_storage_overlap=allow_lifetime_and_storage_overlap,
        )
    Verifier(graph_module, alloc_input, alloc_output, alloc_mutable, signature).verify_graph_input_output()


def verify_storage_reuse(
    graph_module: torch.fx.GraphModule,
    graph_signature: ExportGraphSignature | None,
    *,
    alloc_graph_input: bool,
    alloc_graph_output: bool,
    alloc_mutable_buffers: bool,
    allow_lifetime_and_storage_overlap: bool = False,
) -> None:
    """Raise `StorageReuseError` where ExecuTorch's `Verifier.verify_storage_reuse` raises."""
    specs = list(
        collect_specs_from_nodes(
            graph_module.graph.nodes,
            graph_signature,
            ignore_const=True,
            ignore_graph_input=not alloc_graph_input,
            ignore_graph_output=not alloc_graph_output,
            ignore_mutable_buffers=not alloc_mutable_buffers,
            do_assertion=False,
            ignore_out_var_node=False,
            dedup=True,
        )
    )
    check_specs(specs, allow_lifetime_and_storage_overlap, _names(graph_module))


def check_specs(
    specs: Sequence[TensorSpec],
    allow_lifetime_and_storage_overlap: bool = False,
    names: dict[int, str] | None = None,
) -> None:
    """The checks of `verify_storage_reuse` on a list of distinct specs."""
    names = names or {}

    def who(spec: TensorSpec) -> str:
        return names.get(id(spec), "an unnamed tensor")

    if len(specs) < 2:
        return
    with_id = [s for s in specs if s.mem_obj_id is not None]
    if with_id and len(with_id) < len(specs):
        without = next(s for s in specs if s.mem_obj_id is None)
        raise StorageReuseError(
            f"{who(with_id[0])} has mem_obj_id {with_id[0].mem_obj_id} but {who(without)} has none;"
            " specs must agree on whether mem_obj_id is defined"
        )
    by_pool: dict[object, list[TensorSpec]] = defaultdict(list)
    for spec in specs:
        by_pool[spec.mem_id].append(spec)
    for pool, members in by_pool.items():
        if len(members) < 2:
            continue
        for spec in members:
            if not isinstance(spec.mem_offset, int) or spec.mem_offset < 0:
                raise StorageReuseError(
                    f"{who(spec)} in mem_id {pool} has no valid mem_offset ({spec.mem_offset!r})"
                )
        ranges = sorted(
            ((s.mem_offset, s.mem_offset + s.allocated_memory, i) for i, s in enumerate(members)),
        )
        ranges = [r for r in ranges if r[1] > r[0]]  # 0 bytes overlap nothing
        _check_mem_obj_ids(pool, members, ranges, who)
        if not allow_lifetime_and_storage_overlap:
            _check_lifetimes(pool, members, ranges, who)


def _check_mem_obj_ids(
    pool: object, members: list[TensorSpec], ranges: list[tuple[int, int, int]], who
) -> None:
    """One mem_obj_id per maximal run of overlapping byte ranges."""
    top, first = -1, None
    for lo, hi, i in ranges:
        spec = members[i]
        if first is None or lo >= top:
            first, top = spec, hi
            continue
        top = max(top, hi)
        if spec.mem_obj_id != first.mem_obj_id:
            raise StorageReuseError(
                f"{who(spec)} (mem_obj_id {spec.mem_obj_id}) shares bytes of mem_id {pool} with tensors of"
                f" mem_obj_id {first.mem_obj_id} (first {who(first)}): overlapping storage needs one mem_obj_id"
            )


def _check_lifetimes(
    pool: object, members: list[TensorSpec], ranges: list[tuple[int, int, int]], who
) -> None:
    """No two specs live at once in overlapping bytes unless one backs the other's storage."""
    n = len(ranges)
    if n < 2:
        return
    los = [lo for lo, _, _ in ranges]
    his = [hi for _, hi, _ in ranges]
    timed = []
    reach = -1  # the highest hi of the ranges before p
    for p, (_, _, i) in enumerate(ranges):
        life = members[i].lifetime
        if life[0] is None or life[1] is None:
            if reach > los[p] or (p + 1 < n and los[p + 1] < his[p]):
                raise StorageReuseError(
                    f"{who(members[i])} shares bytes of mem_id {pool} with another tensor but has no lifetime"
                )
        elif life[0] <= life[1]:  # an empty lifetime overlaps nothing
            timed.append((life[0], life[1], p))
        reach = max(reach, his[p])
    timed.sort()
    tree = _MaxTree(n)
    live: list[tuple[int, int]] = []  # (end, position)
    for start, end, p in timed:
        while live and live[0][0] < start:
            tree.set(heapq.heappop(live)[1], -1)
        # Positions are sorted by lo: those up to the last lo < hi, with a hi above lo, overlap.
        last = _last_below(los, his[p])
        for q in tree.above(last, los[p]):
            a, b = members[ranges[p][2]], members[ranges[q][2]]
            if not _chained(a, b, who):
                raise StorageReuseError(
                    f"{who(a)} and {who(b)} overlap in mem_id {pool} (bytes [{los[p]}, {his[p]}) and"
                    f" [{los[q]}, {his[q]}), lifetimes {a.lifetime} and {b.lifetime}) and neither backs"
                    " the other's storage"
                )
        tree.set(p, his[p])
        heapq.heappush(live, (end, p))


def _last_below(los: list[int], value: int) -> int:
    """The last position whose lo is below `value` (-1 if none)."""
    lo, hi = 0, len(los)
    while lo < hi:
        mid = (lo + hi) // 2
        if los[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def _chained(a: TensorSpec, b: TensorSpec, who) -> bool:
    """Whether one spec is in the other's storage-base chain (each chain includes the spec)."""
    return a in _chain(b, who) or b in _chain(a, who)


def _chain(spec: TensorSpec, who) -> set[TensorSpec]:
    seen: set[TensorSpec] = set()
    root = spec
    while root is not None:
        if root in seen:
            raise StorageReuseError(f"{who(spec)}: circular storage_base chain")
        seen.add(root)
        root = root.storage_base
    return seen


class _MaxTree:
    """Max over positions 0..n-1 (-1 = empty), listing the positions <= last holding more than a value."""

    def __init__(self, n: int) -> None:
        self.size = 1
        while self.size < n:
            self.size *= 2
        self.max = [-1] * (2 * self.size)

    def set(self, position: int, value: int) -> None:
        node = position + self.size
        self.max[node] = value
        node //= 2
        while node:
            self.max[node] = max(self.max[2 * node], self.max[2 * node + 1])
            node //= 2

    def above(self, last: int, value: int) -> Iterable[int]:
        """Positions in [0, last] whose value is > `value` (exclusive: byte ranges are half-open)."""
        if last < 0:
            return
        stack = [(1, 0, self.size - 1)]
        while stack:
            node, lo, hi = stack.pop()
            if lo > last or self.max[node] <= value:
                continue
            if lo == hi:
                yield lo
                continue
            mid = (lo + hi) // 2
            stack.append((2 * node + 1, mid + 1, hi))
            stack.append((2 * node, lo, mid))


def _names(graph_module: torch.fx.GraphModule) -> dict[int, str]:
    """id(spec) -> the first node carrying it (for messages)."""
    found: dict[int, str] = {}
    for node in graph_module.graph.nodes:
        spec = node.meta.get("spec")
        for s in spec if isinstance(spec, (list, tuple)) else (spec,):
            if isinstance(s, TensorSpec):
                found.setdefault(id(s), node.name)
    return found
