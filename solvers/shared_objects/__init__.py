"""The shared-objects form (`Problem.shared_objects`): every tensor at offset 0 of an object, as
ExecuTorch's Vulkan-style plans; the best of several packings, exact per pool where small."""
