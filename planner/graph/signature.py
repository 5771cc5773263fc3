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

from functools import cached_property

from torch.export.exported_program import ExportGraphSignature


def _computed_once(name: str) -> cached_property:
    """`ExportGraphSignature.<name>`, computed on first read and kept."""
    return cached_property(getattr(ExportGraphSignature, name).fget)


class FrozenSignature(ExportGraphSignature):
    """`ExportGraphSignature` with the maps the planner reads cached; valid while no spec is renamed."""

    inputs_to_buffers = _computed_once("inputs_to_buffers")  # type: ignore[assignment]
    buffers_to_mutate = _computed_once("buffers_to_mutate")  # type: ignore[assignment]
    user_inputs_to_mutate = _computed_once("user_inputs_to_mutate")  # type: ignore[assignment]
    inputs_to_parameters = _computed_once("inputs_to_parameters")  # type: ignore[assignment]


def frozen(signature: ExportGraphSignature | None) -> ExportGraphSignature | None:
    """A `FrozenSignature` sharing `signature`'s spec objects (the spec lists are copied, not the specs).

    Make a new one after anything renames a spec (cat fusion renames outputs).
    """
    if signature is None or isinstance(signature, FrozenSignature):
        return signature
    return FrozenSignature(input_specs=list(signature.input_specs), output_specs=list(signature.output_specs))
