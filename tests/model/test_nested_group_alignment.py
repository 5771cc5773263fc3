"""Nested group members must stay aligned relative to the outermost parent.

Solvers align only the outermost parent (solvers.units), so a member whose
alignment holds inside its direct parent but not inside the root would get a
misaligned offset from every solver; the problem model refuses it up front.
"""

import pytest

from memplan.errors import ProblemError
from memplan.problem import Buffer, ContiguousGroup, Problem


def test_member_misaligned_inside_the_root_is_refused_by_name() -> None:
    buffers = (Buffer("root", 0, 2, 8), Buffer("mid", 0, 2, 4), Buffer("leaf", 0, 2, 2, alignment=2))
    groups = (ContiguousGroup("root", (("mid", 1),)), ContiguousGroup("mid", (("leaf", 0),)))
    with pytest.raises(ProblemError, match=r"'leaf' sits 1 bytes into its outermost parent 'root'"):
        Problem(buffers, groups)


def test_member_aligned_inside_the_root_is_accepted() -> None:
    buffers = (Buffer("root", 0, 2, 8), Buffer("mid", 0, 2, 4), Buffer("leaf", 0, 2, 2, alignment=2))
    groups = (ContiguousGroup("root", (("mid", 2),)), ContiguousGroup("mid", (("leaf", 0),)))
    assert Problem(buffers, groups).root_of("leaf") == ("root", 2)
