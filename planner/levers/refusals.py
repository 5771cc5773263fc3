"""Why a lever leaves an instruction alone: one vocabulary for every lever.

Cat fusion, slice no-ops and state in place refuse for the same few reasons
(the bytes come from a graph input or a delegate, an op writes them in place,
they are pinned, the layout does not match ...), so a reason has one code
wherever it is given; reports, sweeps and docs read `Refusal.value`. A code
only one lever gives says so in its comment.
"""

from __future__ import annotations

from enum import Enum


class Refusal(str, Enum):
    """Why a lever keeps an instruction (a cat, a slice, a write-back copy) or one of its tensors."""

    # The layout: a copy that is more than moving bytes.
    INNER_DIM = "inner_dim"  # over a dim with a leading dim > 1: the bytes interleave, no contiguous run
    STEP = "step"  # slice: a step other than 1 skips bytes
    DTYPE_MISMATCH = "dtype_mismatch"  # the copy converts the dtype (cat promotes, copy_ converts)
    SHAPE_MISMATCH = "shape_mismatch"  # state: copy_ broadcasts
    NOT_CONTIGUOUS = "not_contiguous"  # a tensor not in the default dim order
    DIM_ORDER_MISMATCH = "dim_order_mismatch"  # state: copy_ changes the memory layout
    DYNAMIC_SHAPE = "dynamic_shape"  # the real size is only known at run time
    DYNAMIC_OFFSET = "dynamic_offset"  # slice: where the output starts is only known at run time
    # Who writes the bytes.
    GRAPH_INPUT = "graph_input"  # filled by the caller, not by an op of this method
    CONSTANT = "constant"  # parameter, buffer read here, lifted constant: lives in the program
    MUTABLE_BUFFER = "mutable_buffer"  # state that must keep its own place across calls
    DELEGATE_OUTPUT = "delegate_output"  # a backend writes them into memory of its own choosing
    CONTROL_FLOW_OUTPUT = "control_flow_output"  # written by a submodule planned on its own
    NOT_AN_OUT_OP = "not_an_out_op"  # not produced by an op writing into its planned out buffer
    VIEW_OF_OTHER_SIZE = "view_of_other_size"  # a view whose base has a different byte size
    INPUT_SOURCE = "input_source"  # slice: the input's bytes come from one of the sources above
    # Where the tensors are planned.
    OUTPUT_NOT_PLANNED = (
        "output_not_planned"  # no planned buffer (a graph output with alloc_graph_output=False)
    )
    INPUT_NOT_PLANNED = "input_not_planned"  # no planned buffer (unplanned graph output, dynamic)
    STATE_NOT_PLANNED = "state_not_planned"  # state: alloc_mutable_buffers=False, the runtime owns it
    GRAPH_OUTPUT = "graph_output"  # slice: the caller reads the output's own buffer
    OUTPUT_PINNED = "output_pinned"  # fixed offset, in a same-offset set, or inside another tensor
    INPUT_PINNED = "input_pinned"  # fixed offset, storage alias, or a member of another placed region
    POOL_MISMATCH = "pool_mismatch"  # cat: input and output were assigned different mem_ids
    MISALIGNED = "misaligned"  # the offset inside the region breaks the alignment
    DUPLICATE_INPUT = "duplicate_input"  # cat: the same bytes cannot sit at two offsets
    ALIAS_NOT_NESTED = "alias_not_nested"  # cat: the region over the inputs straddles another placed tensor
    OVERLAPS_SLICE = "overlaps_slice"  # slice: overlaps another no-op output of the input without nesting
    # Other writers and readers of the same bytes.
    OUTPUT_WRITTEN_IN_PLACE = "output_written_in_place"  # an in-place op on the output would change the input
    INPUT_WRITTEN_IN_PLACE = "input_written_in_place"  # an in-place op on the input would change the output
    STATE_READ_LATER = (
        "state_read_later"  # cat: a piece would overwrite a state before its old value's last read
    )
    OLD_VALUE_READ_LATER = (
        "old_value_read_later"  # state: a node reads the old state after the producer starts
    )
    KERNEL_NOT_ALIAS_SAFE = (
        "kernel_not_alias_safe"  # state: the producer reads the state; its kernel may not alias it
    )
    NEW_VALUE_IS_INPUT = (
        "new_value_is_input"  # state: a placeholder (user input, parameter, constant, other state)
    )
    NEW_VALUE_IS_VIEW = "new_value_is_view"  # state: a view of another tensor's bytes
    NEW_VALUE_SHARED = "new_value_shared"  # state: also written back into another buffer
    NEW_VALUE_IS_GRAPH_OUTPUT = (
        "new_value_is_graph_output"  # state: the caller may supply (or keep) its memory
    )
    NEW_VALUE_WRITTEN_IN_PLACE = (
        "new_value_written_in_place"  # state: an in-place op changes it after it is made
    )
    STATE_WRITTEN_IN_PLACE = "state_written_in_place"  # state: another op also writes the state
    USER_INPUT_MUTATION = "user_input_mutation"  # state: the caller's input tensor, not state of the program
    # What the plan says.
    ARENA_GREW = "arena_grew"  # placing it made the arena (or its lower bound) larger
    TRAFFIC_GREW = (
        "traffic_grew"  # cat: under a memory map, the fused plan moved more bytes through slow banks
    )
