"""An edge graph module as memory planning sees it: its tensors as a `Problem` (`extract`), the
signature ExecuTorch's helpers read (`signature`), and the `mem_obj_id`s of a plan (`shared_slots`)."""
