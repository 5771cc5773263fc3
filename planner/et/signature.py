"""A graph signature whose derived maps are computed once.

`ExportGraphSignature.inputs_to_buffers` (and its siblings) rebuild a dict
from every input spec on each access, and ExecuTorch's planning helpers
(`_is_mutable_buffer`, called per node by `update_all_tensors_lifetime`,
`collect_specs_from_nodes`, `get_graph_input_tensors`, ...) access them per
node: 1.3 M generator steps and ~1.5 s on a 30-layer Llama. Within one run of
the pass the specs do not change, so the pass hands those helpers a
`FrozenSignature` over the same spec objects instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property

from torch.export.exported_program import ExportGraphSignature


class FrozenSignature(ExportGraphSignature):
    """`ExportGraphSignature` with the maps the planner reads cached; valid while no spec is renamed."""

    @cached_property
    def inputs_to_buffers(self) -> Mapping[str, str]:  # type: ignore[override]
        return ExportGraphSignature.inputs_to_buffers.fget(self)  # type: ignore[attr-defined]

    @cached_property
    def buffers_to_mutate(self) -> Mapping[str, str]:  # type: ignore[override]
        return ExportGraphSignature.buffers_to_mutate.fget(self)  # type: ignore[attr-defined]

    @cached_property
    def user_inputs_to_mutate(self) -> Mapping[str, str]:  # type: ignore[override]
        return ExportGraphSignature.user_inputs_to_mutate.fget(self)  # type: ignore[attr-defined]

    @cached_property
    def inputs_to_parameters(self) -> Mapping[str, str]:  # type: ignore[override]
        return ExportGraphSignature.inputs_to_parameters.fget(self)  # type: ignore[attr-defined]


def frozen(signature: ExportGraphSignature | None) -> ExportGraphSignature | None:
    """A `FrozenSignature` sharing `signature`'s spec objects (the spec lists are copied, not the specs).

    Make a new one after anything renames a spec (cat fusion renames outputs).
    """
    if signature is None or isinstance(signature, FrozenSignature):
        return signature
    return FrozenSignature(input_specs=list(signature.input_specs), output_specs=list(signature.output_specs))
