"""memplan's plan in Google's Model Explorer: node data for the graph ExecuTorch's adapter draws of a
`.pte` (`node_data`), validated against the adapter's own graph (`graph`)."""

from memplan.viz.model_explorer.node_data import (
    LIVE_BYTES,
    OVERLAYS,
    method_facts,
    node_id,
    overlays,
    require_explorer,
    write_overlays,
)

__all__ = [
    "LIVE_BYTES",
    "OVERLAYS",
    "method_facts",
    "node_id",
    "overlays",
    "require_explorer",
    "write_overlays",
]
