"""Arrays <-> the bytes of a device buffer, in the shape's physical (minor-to-major) layout.

Used where host values meet device memory: hlo-codegen writes constants into the manifest this
way, hlo-run binds arguments and reads results this way. A buffer holds the elements in memory
order: the most minor dimension of the layout varies fastest (`f32[2,3]{0,1}` is column-major).
Elements are little-endian; pred takes one byte; sub-byte integer and float types take one byte
per element (unless a packing `E(n)` layout asks for less, which is refused).

    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> s = Shape.array("f32", (2, 3), (0, 1))
    >>> np.frombuffer(array_to_bytes(a, s), np.float32)
    array([0., 3., 1., 4., 2., 5.], dtype=float32)
    >>> bool((bytes_to_array(array_to_bytes(a, s), s) == a).all())
    True
"""

from __future__ import annotations

import numpy as np

from hlo_common.errors import HloError
from hlo_common.shape import Shape


def _physical_perm(shape: Shape) -> list[int]:
    return list(reversed(shape.minor_to_major))


def _check(shape: Shape) -> None:
    if not shape.is_array:
        raise HloError(f"{shape} is not an array shape")
    et = shape.element_type
    if et.bits < 8 and shape.layout is not None and shape.layout.element_size_in_bits not in (0, 8):
        raise HloError(f"{shape}: packed sub-byte layouts are not supported")


def array_to_bytes(value, shape: Shape) -> bytes:
    """The buffer bytes of a logical array `value` (any array-like) with `shape`."""
    _check(shape)
    arr = np.asarray(value, dtype=shape.element_type.np_dtype)
    if arr.shape != tuple(shape.dims):
        arr = np.broadcast_to(arr, shape.dims)
    physical = np.transpose(arr, _physical_perm(shape)) if shape.rank > 1 else arr
    return np.ascontiguousarray(physical).tobytes()


def bytes_to_array(data, shape: Shape) -> np.ndarray:
    """The logical array held by buffer bytes `data` (bytes, memoryview or a uint8 array)."""
    _check(shape)
    dtype = shape.element_type.np_dtype
    count = shape.num_elements
    flat = np.frombuffer(data, dtype=dtype, count=count)
    perm = _physical_perm(shape)
    physical = flat.reshape([shape.dims[d] for d in perm])
    if shape.rank > 1:
        return np.ascontiguousarray(np.transpose(physical, np.argsort(perm)))
    return physical.copy()
