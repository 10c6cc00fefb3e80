"""BatchNormExpander ("batchnorm_expander"): batch-norm-training, -inference and -grad become
elementwise arithmetic and reductions over every dimension but the feature one.

Runs in the `optimization` pipeline (XLA:GPU rewrites all three kinds, which is this pass's
default). With N the element count per feature (from get-dimension-size, so dynamic shapes work),
mean = sum(x) / N and var = sum(x^2) / N - mean^2:

    training:  ((x - mean) * rsqrt(var + eps) * scale + offset, mean, var)
    inference: x * (scale * rsqrt(var + eps)) + (offset - mean * scale * rsqrt(var + eps))
    grad:      (scale * rsqrt(var + eps) / N * (N * dy - sum(dy) - (x - mean) * sum(dy * (x - mean))
                / (var + eps)),  sum(dy * (x - mean)) * rsqrt(var + eps),  sum(dy))

Feature-shaped values are broadcast along `feature_index`; epsilon is converted to the operand's
type; the reductions use an add computation in that type. Options `rewrite_training_op`,
`rewrite_inference_op`, `rewrite_grad_op` leave a kind alone when False. Fusion computations are
not visited.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.hlo_creation_utils import non_fusion_computations, scalar_computation
from hlo_opt.deferred_removal import DeferredRemoval
from hlo_common.hlo_pass.pass_base import HloPass, register_pass


class _Builder:
    """Adds the expansion of one batch-norm instruction next to it, with its metadata."""

    def __init__(self, bn: HloInstruction, reducers: dict):
        self.bn = bn
        self.comp: HloComputation = bn.parent
        self.x = bn.operands[0]
        self.shape = self.x.shape
        self.et = self.shape.element_type
        self.feature = bn.attrs["feature_index"]
        self.reduce_dims = tuple(i for i in range(self.shape.rank) if i != self.feature)
        self.reducers = reducers

    def add(self, opcode: str, operands, shape: Shape | None = None, attrs=None, **fields) -> HloInstruction:
        instr = self.comp.add_new_instruction(opcode, operands, shape, attrs, **fields)
        instr.metadata = list(self.bn.metadata)
        return instr

    def scalar(self, value: float) -> HloInstruction:
        import numpy as np

        literal = np.asarray(value).astype(self.et.np_dtype)
        return self.add("constant", [], Shape.array(self.et, ()), literal=literal)

    def broadcast(self, value: HloInstruction, dims: tuple[int, ...] | None = None,
                  to: Shape | None = None) -> HloInstruction:
        to = to or self.shape
        dims = (self.feature,) if dims is None else dims
        return self.add("broadcast", [value], Shape.array(self.et, to.dims), {"dimensions": dims})

    def sum(self, value: HloInstruction, zero: HloInstruction) -> HloInstruction:
        key = (id(self.comp.parent), self.et.name)
        if key not in self.reducers:
            self.reducers[key] = scalar_computation(self.comp.parent, "add", self.et, before=self.comp,
                                                    name="scalar_add_computation")
        return self.add("reduce", [value, zero], attrs={"dimensions": self.reduce_dims,
                                                         "to_apply": self.reducers[key]})

    def elements_per_feature(self) -> HloInstruction:
        s32 = Shape.array("s32", ())
        import numpy as np

        count = self.add("constant", [], s32, literal=np.int32(1))
        for i in self.reduce_dims:
            size = self.add("get-dimension-size", [self.x], s32, {"dimensions": (i,)})
            count = self.add("multiply", [size, count])
        return self.add("convert", [count], Shape.array(self.et, ()))

    def op(self, opcode: str, *operands: HloInstruction) -> HloInstruction:
        return self.add(opcode, list(operands))


def expand_training(b: _Builder) -> HloInstruction:
    x, scale, offset = b.bn.operands
    zero = b.scalar(0.0)
    eps = b.broadcast(b.scalar(b.bn.attrs["epsilon"]), ())
    n = b.elements_per_feature()
    feature_shape = scale.shape
    mean = b.op("divide", b.sum(x, zero), b.broadcast(n, (), feature_shape))
    square_mean = b.op("divide", b.sum(b.op("multiply", x, x), zero), b.broadcast(n, (), feature_shape))
    var = b.op("subtract", square_mean, b.op("multiply", mean, mean))
    rsqrt = b.op("rsqrt", b.op("add", b.broadcast(var), eps))
    normalized = b.op("multiply", b.op("subtract", x, b.broadcast(mean)), rsqrt)
    out = b.op("add", b.op("multiply", normalized, b.broadcast(scale)), b.broadcast(offset))
    return b.op("tuple", out, mean, var)


def expand_inference(b: _Builder) -> HloInstruction:
    x, scale, offset, mean, var = b.bn.operands
    eps = b.broadcast(b.scalar(b.bn.attrs["epsilon"]), (), scale.shape)
    true_scale = b.op("multiply", scale, b.op("rsqrt", b.op("add", var, eps)))
    true_shift = b.op("subtract", offset, b.op("multiply", mean, true_scale))
    return b.op("add", b.op("multiply", x, b.broadcast(true_scale)), b.broadcast(true_shift))


def expand_grad(b: _Builder) -> HloInstruction:
    x, scale, mean, var, dy = b.bn.operands
    feature_shape = scale.shape
    n = b.elements_per_feature()
    zero = b.scalar(0.0)
    eps_scalar = b.scalar(b.bn.attrs["epsilon"])
    eps_x, eps_f = b.broadcast(eps_scalar, ()), b.broadcast(eps_scalar, (), feature_shape)
    var_b = b.broadcast(var)
    rsqrt_b = b.op("rsqrt", b.op("add", var_b, eps_x))
    rsqrt_f = b.op("rsqrt", b.op("add", var, eps_f))
    centered = b.op("subtract", x, b.broadcast(mean))
    sum_dy_centered = b.sum(b.op("multiply", dy, centered), zero)
    grad_offset = b.sum(dy, zero)
    grad_scale = b.op("multiply", sum_dy_centered, rsqrt_f)
    i2 = b.broadcast(grad_offset)
    i5 = b.op("divide", b.op("multiply", b.broadcast(sum_dy_centered), centered), b.op("add", var_b, eps_x))
    factor = b.op("divide", b.op("multiply", b.broadcast(scale), rsqrt_b), b.broadcast(n, ()))
    i1 = b.op("multiply", dy, b.broadcast(n, ()))
    i6 = b.op("subtract", b.op("subtract", i1, i2), i5)
    return b.op("tuple", b.op("multiply", factor, i6), grad_scale, grad_offset)


_EXPANSIONS = {
    "batch-norm-training": ("rewrite_training_op", expand_training),
    "batch-norm-inference": ("rewrite_inference_op", expand_inference),
    "batch-norm-grad": ("rewrite_grad_op", expand_grad),
}


@register_pass
@dataclass
class BatchNormExpander(HloPass):
    """Expands batch-norm-training/-inference/-grad into arithmetic and reductions."""

    name = "batchnorm_expander"
    rewrite_training_op: bool = True
    rewrite_inference_op: bool = True
    rewrite_grad_op: bool = True
    _reducers: dict = field(default_factory=dict, repr=False)

    def run(self, module: HloModule) -> bool:
        self._reducers = {}
        targets = [i for c in non_fusion_computations(module) for i in c.post_order()
                   if i.opcode in _EXPANSIONS and getattr(self, _EXPANSIONS[i.opcode][0])]
        removal = DeferredRemoval()
        for bn in targets:
            expanded = _EXPANSIONS[bn.opcode][1](_Builder(bn, self._reducers))
            removal.replace(bn, expanded)
        removal.finish()
        return bool(targets)
