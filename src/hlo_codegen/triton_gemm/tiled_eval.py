"""A GEMM fusion's tiled program run tile by tile in numpy, with the index arithmetic of the
Triton kernel `source.py` writes: each program instance loads its operand tiles at the same
element offsets under the same masks, accumulates over K in steps of block_k, applies the
epilogue and stores its masked tile. Comparing the result with the interpreter checks the
tiling (strides, ragged edges, split-k batches, epilogue inputs) without a GPU.

Where it sits: hlo_codegen.triton_gemm (package docstring); used by the tests.

    >>> out = evaluate_tiled(tiled_program(fusion), config, operand_arrays)   # doctest: +SKIP
    (logical arrays in, the fusion's logical result out)
"""

from __future__ import annotations

import numpy as np

from hlo_codegen.triton_gemm.config import padded
from hlo_codegen.triton_gemm.program import Operand, SideInput, TiledProgram
from hlo_codegen.triton_gemm.source import grid, k_tile, tiles_m, tiles_n
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.shape import Shape

_UNARY = {"negate": np.negative, "exponential": np.exp, "log": np.log, "sqrt": np.sqrt,
          "rsqrt": lambda x: 1 / np.sqrt(x), "abs": np.abs, "tanh": np.tanh, "copy": lambda x: x}
_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
           "maximum": np.maximum, "minimum": np.minimum}


def _dtype(etype: str) -> np.dtype:
    return PRIMITIVE_TYPES[etype].np_dtype


def physical(value: np.ndarray, shape: Shape) -> np.ndarray:
    """The array's elements in memory order (its layout's major-to-minor transpose, flattened)."""
    return np.ascontiguousarray(np.transpose(value, tuple(reversed(shape.minor_to_major)))).reshape(-1)


def _wide(etype: str) -> np.dtype:
    """The type an op of `etype` computes in: f32 for narrow floats, as the kernel does."""
    t = PRIMITIVE_TYPES[etype]
    return np.dtype(np.float32) if t.is_float and t.bits < 32 else t.np_dtype


def _load(flat: np.ndarray, op: Operand, b: list[int], rows: np.ndarray, cols: np.ndarray, mask: np.ndarray,
          row_stride: int, col_stride: int) -> np.ndarray:
    offsets = op.base + sum(i * s for i, s in zip(b, op.batch)) + rows * row_stride + cols * col_stride
    x = flat[np.where(mask, offsets, 0)]
    for t in op.converts:
        x = x.astype(np.float32).astype(_dtype(t)) if PRIMITIVE_TYPES[t].is_float else x.astype(_dtype(t))
    return np.where(mask, x, np.zeros((), x.dtype))


def _side(s: SideInput, flats: list[np.ndarray], index: dict[int, np.ndarray], mask: np.ndarray):
    if s.param is None:
        return np.asarray(s.value, _dtype(s.etype))
    offsets = sum((index[d] * st for d, st in s.dims), np.zeros_like(mask, dtype=np.int64))
    return flats[s.param][np.where(mask, offsets, 0)]


def _program(p: TiledProgram, config: dict, flats: list[np.ndarray], out: np.ndarray, pid: int) -> None:
    """Program instance `pid`, as the kernel computes it (`source._prologue`, `source.render`)."""
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    gm, gn = tiles_m(p, config), tiles_n(p, config)
    pid_b, pid_m, pid_n = pid // (gm * gn), (pid // gn) % gm, pid % gn
    b = [pid_b // int(np.prod(p.batch_sizes[j + 1:], dtype=np.int64)) % size
         for j, size in enumerate(p.batch_sizes)]
    rm, rn = pid_m * bm + np.arange(padded(bm)), pid_n * bn + np.arange(padded(bn))
    ok_m = (np.arange(padded(bm)) < bm) & (rm < p.m)
    ok_n = (np.arange(padded(bn)) < bn) & (rn < p.n)
    acc_t = _dtype(p.acc_type)
    acc = np.zeros((rm.size, rn.size), acc_t)
    pk = k_tile(p, config)
    for k0 in range(0, p.k, bk):
        kk = k0 + np.arange(pk)
        ok_k = (np.arange(pk) < bk) & (kk < p.k)
        a = _load(flats[p.lhs.param], p.lhs, b, rm[:, None], kk[None, :], ok_m[:, None] & ok_k[None, :],
                  p.lhs.free, p.lhs.contracting)
        x = _load(flats[p.rhs.param], p.rhs, b, kk[:, None], rn[None, :], ok_k[:, None] & ok_n[None, :],
                  p.rhs.contracting, p.rhs.free)
        acc += a.astype(acc_t) @ x.astype(acc_t)
    mask = ok_m[:, None] & ok_n[None, :]
    v = acc.astype(_dtype(p.dot_type))
    index = {p.rank - 1: rn[None, :], p.rank - 2: rm[:, None]}
    for j, i in enumerate(b):
        index[j] = np.full((1, 1), i)
    for op in p.epilogue:
        v = _epilogue_op(op, v, flats, index, mask)
    offsets = sum(index[d] * s for d, s in enumerate(p.out_strides))
    out[np.broadcast_to(offsets, mask.shape)[mask]] = np.broadcast_to(v, mask.shape)[mask]


def _epilogue_op(op, v, flats, index, mask):
    args = [v if a == "acc" else _side(a, flats, index, mask) for a in op.args]
    if op.opcode == "convert":
        if np.dtype(args[0].dtype).itemsize == 1:
            return args[0].astype(np.float32).astype(_dtype(op.etype))
        return args[0].astype(_dtype(op.etype))
    wide = _wide(op.etype)
    fn = _UNARY.get(op.opcode) or _BINARY[op.opcode]
    return np.asarray(fn(*[np.asarray(x).astype(wide) for x in args])).astype(_dtype(op.etype))


def evaluate_tiled(p: TiledProgram, config: dict, operands: list[np.ndarray], operand_shapes: list[Shape],
                   out_shape: Shape) -> np.ndarray:
    """The fusion's result, computed program instance by program instance over the kernel's grid."""
    from hlo_common.interpreter import blas

    flats = [physical(np.asarray(v), s) for v, s in zip(operands, operand_shapes)]
    out = np.zeros(out_shape.num_elements, _dtype(p.out_type))
    with blas.single_threaded():  # one BLAS thread, as the interpreter
        for pid in range(grid(p, config)[0]):
            _program(p, config, flats, out, pid)
    major_to_minor = tuple(reversed(out_shape.minor_to_major))
    physical_dims = [out_shape.dims[d] for d in major_to_minor]
    return np.transpose(out.reshape(physical_dims), np.argsort(major_to_minor))


__all__ = ["evaluate_tiled", "physical"]
