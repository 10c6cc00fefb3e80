"""The HLO patterns the cuBLAS GEMM rewriter (`hlo_opt.passes.cublas_gemm_rewriter`) folds into a
cuBLAS call, as XLA's matchers in `gemm_rewriter.cc` state them: a broadcast scalar (exact, or
within 128 epsilons of its type), the tanh-approximate GELU around a matmul, and the
OptionalBitcast(OptionalSlice(matmul)) a vector bias is added to. Matchers only: they read the
graph and build nothing.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction
from hlo_opt.matmul_utils import element_type, is_cublaslt

_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))
# 128 machine epsilons of the constant's type: how near a GELU constant must be (XLA's BcastConstScalarNear).
_NEAR_EPSILON = {"f16": 128 * 2.0 ** -10, "bf16": 128 * 2.0 ** -7, "f32": 128 * 2.0 ** -23,
                 "f64": 128 * 2.0 ** -52}


def scalar_constant(instr: HloInstruction) -> complex | None:
    if instr.opcode != "constant" or instr.literal is None or instr.shape.num_elements != 1:
        return None
    value = np.asarray(instr.literal).reshape(-1)[0]
    return complex(value) if np.iscomplexobj(value) else complex(float(value))


def is_broadcast_scalar(instr: HloInstruction, value: float, near: bool = False) -> bool:
    """broadcast(constant scalar) equal to `value` (or, with `near`, within 128 epsilons of its type)."""
    if instr.opcode != "broadcast":
        return False
    c = scalar_constant(instr.operands[0])
    if c is None or c.imag != 0:
        return False
    if not near:
        return c.real == value
    eps = _NEAR_EPSILON.get(element_type(instr))
    return eps is not None and abs(c.real - value) < abs(c.real + value) * eps


def both_orders(instr: HloInstruction):
    """The operand pairs of a commutative binary op, as XLA's *AnyOrder patterns try them."""
    a, b = instr.operands
    return ((a, b), (b, a))


def one_user(instr: HloInstruction) -> bool:
    return len(instr.users) == 1


def is_multiply_of(instr: HloInstruction, first, second) -> bool:
    """multiply(first', second') in either order, each side checked by a predicate."""
    return instr.opcode == "multiply" and any(first(a) and second(b) for a, b in both_orders(instr))


def is_approximate_gelu_cdf(cdf: HloInstruction, x: HloInstruction) -> bool:
    """cdf == 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x))), the inner products and
    sums used by nothing else (XLA's GELU pattern in GemmRewriter::HandleMultiply)."""
    def is_x(v):
        return v is x

    def cube(v):
        return one_user(v) and is_multiply_of(
            v, is_x, lambda w: one_user(w) and is_multiply_of(w, is_x, is_x))

    def scaled_cube(v):
        return one_user(v) and is_multiply_of(v, lambda w: is_broadcast_scalar(w, 0.044715, near=True), cube)

    def inner(v):
        return one_user(v) and v.opcode == "add" and any(
            is_x(a) and scaled_cube(b) for a, b in both_orders(v))

    def tanh_arg(v):
        return one_user(v) and is_multiply_of(
            v, lambda w: is_broadcast_scalar(w, _SQRT_2_OVER_PI, near=True), inner)

    def one_plus_tanh(v):
        return v.opcode == "add" and any(
            is_broadcast_scalar(a, 1.0) and b.opcode == "tanh" and one_user(b) and tanh_arg(b.operands[0])
            for a, b in both_orders(v))

    return is_multiply_of(cdf, lambda w: is_broadcast_scalar(w, 0.5), one_plus_tanh)


def vector_bias_operand(x: HloInstruction, bcast: HloInstruction):
    """(matmul, slice, bitcast) when x is OptionalBitcast(OptionalSlice(cuBLASLt matmul)), each
    with one user, and bcast a broadcast (XLA's vector-bias pattern in HandleAdd); else None."""
    if bcast.opcode != "broadcast" or not one_user(x):
        return None
    node, bitcast, slc = x, None, None
    if node.opcode == "bitcast":
        bitcast, node = node, node.operands[0]
        if not one_user(node):
            return None
    if node.opcode == "slice":
        slc, node = node, node.operands[0]
    if not is_cublaslt(node) or not node.shape.is_array or not one_user(node):
        return None
    return node, slc, bitcast
