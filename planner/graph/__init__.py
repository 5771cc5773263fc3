"""An edge graph module as memory planning sees it: its tensors as a `Problem` (`extract`), the
signature ExecuTorch's helpers read (`signature`), the shared facts every lever reads (`facts`), a
plan written into its TensorSpecs (`offsets`) and ExecuTorch's storage-reuse check (`storage_reuse`)."""
