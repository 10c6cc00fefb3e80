"""Helpers the shared passes (`hlo_common.passes`) have in common: which computations run as
kernels' callers (the global ones), and the physical order of an array's dimensions."""

from __future__ import annotations

from hlo_common.hlo.hlo_utils import GLOBAL_CONTROL_FLOW as CONTROL_FLOW
from hlo_common.hlo.hlo_utils import global_computations  # noqa: F401  (the passes import it from here)
from hlo_common.hlo.shape import Shape


def physical_order(shape: Shape) -> list[int]:
    """The non-degenerate dimensions of an array shape, major to minor in memory."""
    return [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
