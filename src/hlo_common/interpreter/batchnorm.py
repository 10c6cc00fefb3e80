"""Interpreter handlers for batch-norm-training, -inference and -grad.

XLA's GPU and CPU pipelines expand these (BatchNormExpander) before codegen; the interpreter
evaluates the same formulas directly, in f32 for the narrow float types (f64 for f64). Statistics
are over every dimension except `feature_index`; the variance is the biased (population) one.

    training:  y = (x - mean) * rsqrt(var + epsilon) * scale + offset  -> (y, mean, var)
    grad:      see `_batch_norm_grad`
"""

from __future__ import annotations

import numpy as np

from hlo_common.interpreter.numeric import unsupported
from hlo_common.interpreter.registry import register
from hlo_common.hlo.ir import HloInstruction


def _setup(instr: HloInstruction, x: np.ndarray):
    feature = int(instr.attrs.get("feature_index", 0))
    if not 0 <= feature < x.ndim:
        raise unsupported(instr, f"feature_index {feature} out of range for rank {x.ndim}")
    axes = tuple(d for d in range(x.ndim) if d != feature)
    wide = np.float64 if x.dtype == np.float64 else np.float32
    bshape = [1] * x.ndim
    bshape[feature] = x.shape[feature]

    def per_feature(v: np.ndarray) -> np.ndarray:
        return np.asarray(v).astype(wide).reshape(bshape)

    eps = wide(float(instr.attrs.get("epsilon", 0.0)))
    return axes, wide, per_feature, eps


@register("batch-norm-training")
def _batch_norm_training(instr: HloInstruction, operands, ev):
    x, scale, offset = operands
    axes, wide, per_feature, eps = _setup(instr, x)
    xw = x.astype(wide)
    mean = xw.mean(axis=axes, keepdims=True)
    var = np.square(xw - mean).mean(axis=axes, keepdims=True)
    y = (xw - mean) / np.sqrt(var + eps) * per_feature(scale) + per_feature(offset)
    dt = x.dtype
    return (y.astype(dt), mean.reshape(-1).astype(dt), var.reshape(-1).astype(dt))


@register("batch-norm-inference")
def _batch_norm_inference(instr: HloInstruction, operands, ev):
    x, scale, offset, mean, var = operands
    axes, wide, per_feature, eps = _setup(instr, x)
    y = (x.astype(wide) - per_feature(mean)) / np.sqrt(per_feature(var) + eps)
    return (y * per_feature(scale) + per_feature(offset)).astype(x.dtype)


@register("batch-norm-grad")
def _batch_norm_grad(instr: HloInstruction, operands, ev):
    """(grad_operand, grad_scale, grad_offset) given x, scale, mean, var and grad_output:

    grad_offset  = sum(dy)
    grad_scale   = sum(dy * (x - mean)) * rsqrt(var + eps)
    grad_operand = scale * rsqrt(var + eps)
                   * (dy - mean(dy) - (x - mean) * mean(dy * (x - mean)) / (var + eps))
    """
    x, scale, mean, var, dy = operands
    axes, wide, per_feature, eps = _setup(instr, x)
    xc = x.astype(wide) - per_feature(mean)
    dyw = dy.astype(wide)
    var_eps = per_feature(var) + eps
    rstd = 1 / np.sqrt(var_eps)
    sum_dy = dyw.sum(axis=axes, keepdims=True)
    sum_dy_xc = (dyw * xc).sum(axis=axes, keepdims=True)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    grad_x = per_feature(scale) * rstd * (dyw - sum_dy / count - xc * (sum_dy_xc / count) / var_eps)
    dt = x.dtype
    return (grad_x.astype(dt), (sum_dy_xc * rstd).reshape(-1).astype(dt), sum_dy.reshape(-1).astype(dt))
