"""Entry arguments the host platform reads in place instead of copying (hlo-run's host).

Where it sits: `ManifestExecutable` asks its device whether it borrows arguments (the host does:
its memory is the process's); for a program's read-only parameter allocations, those that no
thunk writes and that are not live out (XLA gives an entry parameter its own allocation, shared
with an output only when aliased or donated), `borrowed_buffer` hands back the caller's numpy
array itself as the buffer when its bytes already are the physical layout: right dtype and
dims, default (row-major) layout, C-contiguous, the allocation's size and alignment. A run then
skips one copy of each large argument (a 16 MiB input costs about 1 ms to copy, as much as a
memory-bound kernel reading it). Anything else is copied as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlo_common.hlo.shape import Shape
from hlo_common.manifest.layout_bytes import array_over
from hlo_common.manifest.manifest import Allocation, Manifest
from hlo_common.manifest.thunks import (
    ConditionalThunk, ConvolutionThunk, CopyThunk, GemmFusionThunk, GemmThunk, KernelThunk, MemsetThunk,
    RngGetAndUpdateStateThunk, SequentialThunk, WhileThunk, walk,
)


def _written_slices(thunk) -> list:
    """The slices a thunk may write (every slice of a thunk kind not named here)."""
    if isinstance(thunk, KernelThunk):
        return [a.slice for a in thunk.args if a.written]
    if isinstance(thunk, GemmThunk):
        return [s for s in (thunk.output, thunk.workspace) if s is not None]
    if isinstance(thunk, (ConvolutionThunk, GemmFusionThunk)):
        return [thunk.output]
    if isinstance(thunk, (CopyThunk, MemsetThunk, RngGetAndUpdateStateThunk)):
        return [thunk.destination]
    if isinstance(thunk, (SequentialThunk, WhileThunk, ConditionalThunk)):
        return []  # their predicates are written by the kernels of their sequences
    return list(thunk.slices())


def read_only_parameters(manifest: Manifest) -> set[int]:
    """Indices of the parameter allocations no thunk writes and no output lives in."""
    written = {s.allocation for t in walk(manifest.thunks) for s in _written_slices(t)}
    return {a.index for a in manifest.allocations
            if a.kind == "parameter" and not a.maybe_live_out and a.index not in written}


def borrowed_buffer(value: Any, shape: Shape, alloc: Allocation) -> np.ndarray | None:
    """A uint8 view of `value`'s memory to use as the allocation's buffer, or None (copy it)."""
    if not isinstance(value, np.ndarray) or alloc.size == 0 or not shape.is_array:
        return None
    if (value.dtype != shape.element_type.np_dtype or value.shape != tuple(shape.dims)
            or not value.flags.c_contiguous or value.nbytes != alloc.size
            or value.ctypes.data % max(1, alloc.alignment)):
        return None
    raw = value.reshape(-1).view(np.uint8)
    view = array_over(raw, shape)  # a copy unless the layout is the plain row-major one
    return raw if view.base is not None and np.shares_memory(view, value) else None
