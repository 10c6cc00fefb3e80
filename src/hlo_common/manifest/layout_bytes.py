"""Arrays <-> the bytes of a device buffer, in the shape's physical (minor-to-major) layout.

Used where host values meet device memory: hlo-codegen writes constants into the manifest this
way, hlo-run binds arguments and reads results this way. A buffer holds the elements in memory
order: the most minor dimension of the layout varies fastest (`f32[2,3]{0,1}` is column-major).
Elements are little-endian; pred takes one byte; sub-byte integer and float types take one byte
per element, unless an `E(n)` layout packs them 8/n to a byte, the first element in the low bits
(as XLA and the emitters do).

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
from hlo_common.hlo.shape import Shape


def _physical_perm(shape: Shape) -> list[int]:
    return list(reversed(shape.minor_to_major))


def _packed_bits(shape: Shape) -> int:
    """The bits per element of a packed sub-byte layout (`s4[8]{0:E(4)}` -> 4), else 0."""
    if not shape.is_array:
        raise HloError(f"{shape} is not an array shape")
    et = shape.element_type
    size = shape.layout.element_size_in_bits if shape.layout is not None else 0
    if et.bits >= 8 or size in (0, 8):
        return 0
    if size != et.bits or 8 % size:
        raise HloError(f"{shape}: {size}-bit packing of {et.name} is not supported")
    return size


def _pack(physical: np.ndarray, bits: int) -> bytes:
    """Sub-byte elements packed 8/bits to a byte, the first in the low bits."""
    codes = _codes(physical) & ((1 << bits) - 1)
    per = 8 // bits
    codes = np.concatenate([codes, np.zeros(-len(codes) % per, np.uint8)])
    out = np.zeros(len(codes) // per, np.uint8)
    for k in range(per):
        out |= codes[k::per] << np.uint8(k * bits)
    return out.tobytes()


def _codes(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "iub" or values.dtype.name.startswith(("int", "uint")):
        return values.astype(np.int8).view(np.uint8).reshape(-1)
    return values.view(np.uint8).reshape(-1)


def _unpack(data, shape: Shape, bits: int) -> np.ndarray:
    per, mask = 8 // bits, (1 << bits) - 1
    raw = np.frombuffer(data, np.uint8, count=-(-shape.num_elements // per))
    codes = np.stack([(raw >> np.uint8(k * bits)) & np.uint8(mask) for k in range(per)], axis=1).reshape(-1)
    codes = codes[:shape.num_elements]
    dtype = shape.element_type.np_dtype
    if shape.element_type.is_float:
        return codes.view(dtype)
    if shape.element_type.kind == "signed":
        signed = codes.astype(np.int8)
        signed = np.where(signed >= (1 << (bits - 1)), signed - (1 << bits), signed).astype(np.int8)
        return signed.astype(dtype)
    return codes.astype(dtype)


def array_to_bytes(value, shape: Shape) -> bytes:
    """The buffer bytes of a logical array `value` (any array-like) with `shape`."""
    bits = _packed_bits(shape)
    arr = np.asarray(value, dtype=shape.element_type.np_dtype)
    if arr.shape != tuple(shape.dims):
        arr = np.broadcast_to(arr, shape.dims)
    physical = np.ascontiguousarray(np.transpose(arr, _physical_perm(shape)) if shape.rank > 1 else arr)
    return _pack(physical, bits) if bits else physical.tobytes()


def bytes_to_array(data, shape: Shape) -> np.ndarray:
    """The logical array held by buffer bytes `data` (bytes, memoryview or a uint8 array)."""
    bits = _packed_bits(shape)
    dtype = shape.element_type.np_dtype
    count = shape.num_elements
    flat = _unpack(data, shape, bits) if bits else np.frombuffer(data, dtype=dtype, count=count)
    perm = _physical_perm(shape)
    physical = flat.reshape([shape.dims[d] for d in perm])
    if shape.rank > 1:
        return np.ascontiguousarray(np.transpose(physical, np.argsort(perm)))
    return physical.copy()


def write_array_into(dest: np.ndarray, value, shape: Shape) -> None:
    """Write the logical array `value` into `dest`, a writable uint8 array over a buffer's bytes,
    in the physical layout: what `array_to_bytes` gives, copied once instead of twice."""
    bits = _packed_bits(shape)
    if bits:
        data = array_to_bytes(value, shape)
        dest[:len(data)] = np.frombuffer(data, np.uint8)
        return
    dtype = shape.element_type.np_dtype
    perm = _physical_perm(shape)
    count = shape.num_elements * dtype.itemsize
    target = dest[:count].view(dtype).reshape([shape.dims[d] for d in perm])
    arr = np.asarray(value, dtype=dtype)
    if arr.shape != tuple(shape.dims):
        arr = np.broadcast_to(arr, shape.dims)
    np.copyto(target, np.transpose(arr, perm) if shape.rank > 1 else arr)


def array_over(data: np.ndarray, shape: Shape) -> np.ndarray:
    """The logical array held by `data` (a uint8 array over a buffer's bytes): a view of it where
    the layout is the default one, else a copy (as `bytes_to_array`)."""
    if _packed_bits(shape) or list(shape.minor_to_major) != list(range(shape.rank - 1, -1, -1)):
        return bytes_to_array(data, shape)
    dtype = shape.element_type.np_dtype
    return data[:shape.num_elements * dtype.itemsize].view(dtype).reshape(shape.dims)
