"""Slice, select and split as no-ops: an output that is a contiguous run of its input is placed inside
the input and its copy removed (`analysis` decides into `decisions`' records, `rewrite` removes,
`report` counts, `lever` is the lever protocol's face)."""
