"""GpuLayoutAssignment ("layout-assignment"): gives every array value a layout, with the layout
constraints XLA's GPU backend adds (`xla/service/gpu/transforms/layout_assignment.cc`) on top of
the generic propagation in `hlo_opt.layout_constraints`.

Where it sits: pipeline "layout assignment", after flatten-call-graph; everything before it treats
layouts as absent, everything after it (reshape-decomposer, layout_normalization, the GEMM
rewriter, the emitters) reads them.

    ENTRY e {
      p = f32[8,16]{0,1} parameter(0)          entry layouts are fixed
      q = f32[8,16]{1,0} parameter(1)
      ROOT a = f32[8,16]{1,0} add(p, q)
    }
    becomes   %copy = f32[8,16]{1,0} copy(%p)   and   add(%copy, %q)

GPU constraints (mandatory unless said otherwise):
- dot: operands with batch dims, or several contracting / non-contracting dims, keep a layout
  cuBLAS can read as [batch][rows][cols] (their own, else the default, else batch-contracting-free
  major to minor); s8 x s8 -> s32 and f8 dots need contracting dims most minor; such dots (and
  any dot with batch dims or several free dims) get the layout a user asks for if cuBLAS can
  write it, else the default;
- transpose of a single-use dot: the dot's layout that makes the transpose a bitcast, if cuBLAS
  can write it;
- cuDNN convolution calls: input, filter and output (whichever operand or result plays each role)
  all NHWC or all NCHW by XLA's heuristic for the device (`cudnn_prefers_nhwc`), a side input as
  the output;
- fft, sort with rank > 1, TopK, MoveToHost/MoveToDevice: default layouts; triangular-solve:
  the two minor dims swapped (Fortran order); all-gather / reduce-scatter / all-to-all: the
  gathered / scattered / split dim most major; bitcast-convert that changes rank: the changed
  dim most minor;
- reduce: when the reduced elements number at least 32, the operand takes the layout that makes
  it a row reduction (reduced dims most minor), unless something else constrains it.

Declines nothing; modules whose bitcasts, fusions and library calls already carry layouts keep
those layouts (XLA would reject bitcasts here). Returns whether any layout changed or copy was
added.

Test knob `vary_layouts_seed` (None, the default, changes nothing): every dot's result takes a
seeded choice among the other layouts cuBLAS can write (those a user could ask for and XLA's
SetDotLayout would grant), and every convolution takes a seeded one of the two layout triples
XLA's cuDNN heuristic picks (NCHW or NHWC for input, filter and output), so that the passes after
this one meet results in layouts the corpus seldom has (tests/corpus/test_layout_corpus.py).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hlo_common.gpu.device import H100, DeviceDescription
from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_opt.layout_constraints import LayoutAssignment
from hlo_opt.layout_util import (
    default_m2m, matrix_layout_ok, move_dim_to_major, with_major_to_minor, with_minor_to_major,
)
from hlo_common.hlo_pass.pass_base import DevicePass, register_pass
from hlo_opt.cudnn_conv_utils import BACKWARD_FILTER, BACKWARD_INPUT, BIAS_ACTIVATION, is_cudnn_conv

TOPK_TARGET = "__gpu$TopK"
MEMORY_PLACEMENT_TARGETS = ("MoveToHost", "MoveToDevice")
_MINOR_CONTRACTING_F8 = frozenset({"f8e4m3fn", "f8e5m2fnuz"})
# XLA's GpuLayoutAssignment::PropagateReductionLayoutToOperand threshold (reduced elements).
ROW_REDUCTION_MIN_SIZE = 32


def dot_dims(dot: HloInstruction) -> tuple[tuple[int, ...], ...]:
    """(lhs batch, rhs batch, lhs contracting, rhs contracting)."""
    return tuple(tuple(int(v) for v in dot.attrs.get(k, ())) for k in
                 ("lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"))


def non_contracting_dims(rank: int, batch, contracting) -> tuple[int, ...]:
    return tuple(d for d in range(rank) if d not in batch and d not in contracting)


def dot_can_support_layout(dot: HloInstruction, shape: Shape) -> bool:
    """XLA's DotCanSupportShapeWithLayout: cuBLAS can write the dot's result in this layout."""
    lb, rb, lc, rc = dot_dims(dot)
    nb = len(lb)
    lhs_nc = dot.operands[0].shape.rank - len(lc) - nb
    rank = shape.rank
    return matrix_layout_ok(shape, tuple(range(nb)), tuple(range(nb, nb + lhs_nc)),
                            tuple(range(nb + lhs_nc, rank)))


def supported_dot_layouts(dot: HloInstruction) -> list[tuple[int, ...]]:
    """Every minor-to-major order of the dot's result that cuBLAS can write: the batch, lhs-free and
    rhs-free groups each contiguous and in order, in any group order DotCanSupportShapeWithLayout
    accepts (at most four)."""
    lb, _rb, lc, _rc = dot_dims(dot)
    nb, rank = len(lb), dot.shape.rank
    lhs_nc = dot.operands[0].shape.rank - len(lc) - nb
    groups = (tuple(range(nb)), tuple(range(nb, nb + lhs_nc)), tuple(range(nb + lhs_nc, rank)))
    out: list[tuple[int, ...]] = []
    for order in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (2, 0, 1), (1, 2, 0), (2, 1, 0)):
        m2m = tuple(reversed(sum((groups[g] for g in order), ())))
        if m2m not in out and dot_can_support_layout(dot, with_minor_to_major(dot.shape, m2m)):
            out.append(m2m)
    return out


def cudnn_conv_layouts(conv: HloInstruction, nhwc: bool) -> tuple[tuple[int, ...], ...]:
    """(input, filter, output) minor-to-major orders of XLA's kAllNHWC or kAllNCHW triple
    (StreamExecutorConvLayoutsToXlaLayouts): batch / output feature most major, then the feature
    dim and the spatial dims in order, the feature most minor for NHWC."""
    dn = conv.attrs["dim_labels"]

    def m2m(major: int, feature: int, spatial: tuple[int, ...]) -> tuple[int, ...]:
        rest = (*spatial, feature) if nhwc else (feature, *spatial)
        return tuple(reversed((major, *rest)))

    return (m2m(dn.input_batch, dn.input_feature, dn.input_spatial),
            m2m(dn.kernel_output_feature, dn.kernel_input_feature, dn.kernel_spatial),
            m2m(dn.output_batch, dn.output_feature, dn.output_spatial))


def cudnn_prefers_nhwc(call: HloInstruction, cc_major: int) -> bool:
    """XLA's HeuristicLayoutAssignment for CUDA: integer and f8 convolutions NHWC; from Hopper on,
    NHWC except f64 and 3D convolutions; before, NHWC only for 16-bit floats with a rank-4 result
    on Volta or later."""
    t = call.operands[0].shape.element_type
    if t.is_integer or t.name.startswith("f8"):
        return True
    if cc_major >= 9:
        return t.name != "f64" and len(call.attrs["dim_labels"].input_spatial) <= 2
    return t.name in ("f16", "bf16") and cc_major >= 7 and call.shape.tuple_shapes[0].rank == 4


class _GpuLayoutAssignment(LayoutAssignment):
    def __init__(self, module: HloModule, vary_layouts_seed: int | None = None, cc_major: int = 9):
        super().__init__(module)
        self.vary_layouts_seed = vary_layouts_seed
        self.cc_major = cc_major

    def _varied(self, instr: HloInstruction) -> random.Random | None:
        """The knob's generator for one dot or convolution (None when the knob is off); seeded by
        the instruction's name, so the choice does not depend on PYTHONHASHSEED."""
        if self.vary_layouts_seed is None:
            return None
        return random.Random(f"{self.vary_layouts_seed}/{instr.name}")

    def is_pinned(self, instr: HloInstruction) -> bool:
        """cuDNN convolution calls take the layouts `_cudnn_conv` gives them (XLA lays them out like
        any instruction); other library calls keep theirs."""
        if is_cudnn_conv(instr) and "operand_layout_constraints" not in instr.attrs:
            return False
        return super().is_pinned(instr)

    def instruction_can_change_layout(self, instr: HloInstruction) -> bool:
        if instr.opcode == "custom-call" and str(instr.attrs.get("custom_call_target", "")) in (
                TOPK_TARGET, *MEMORY_PLACEMENT_TARGETS):
            return False
        return super().instruction_can_change_layout(instr)

    def propagate_reduction_layout_to_operand(self, reduce: HloInstruction) -> bool:
        size = 1
        for d in reduce.attrs.get("dimensions", ()):
            size *= reduce.operands[0].shape.dims[d]
        return size >= ROW_REDUCTION_MIN_SIZE

    def add_backend_constraints(self, comp: HloComputation) -> None:
        for instr in reversed(comp.post_order()):
            handler = _BACKEND_CONSTRAINTS.get(instr.opcode)
            if handler is not None and not self.is_pinned(instr):
                handler(self, instr)

    # -- dots -------------------------------------------------------------------------------------
    def _dot(self, dot: HloInstruction) -> None:
        lb, rb, lc, rc = dot_dims(dot)
        lhs, rhs = dot.operands
        types = {lhs.shape.element_type.name, rhs.shape.element_type.name}
        s8_to_s32 = dot.shape.element_type.name == "s32" and types == {"s8"}
        fp8 = types <= _MINOR_CONTRACTING_F8
        nc = []
        for k, (op, batch, contracting) in enumerate(((lhs, lb, lc), (rhs, rb, rc))):
            free = non_contracting_dims(op.shape.rank, batch, contracting)
            nc.append(free)
            if s8_to_s32 or fp8:
                self._minor_contracting(dot, k, batch, contracting, free)
            elif batch or len(contracting) > 1 or len(free) > 1:
                self._dot_operand(dot, k, batch, contracting, free)
        rng = self._varied(dot)
        if rng is not None:
            default = default_m2m(dot.shape.rank)
            others = [m2m for m2m in supported_dot_layouts(dot) if m2m != default]
            if others:
                self.set_instruction_layout(dot, with_minor_to_major(dot.shape, rng.choice(others)))
                return
        if lb or len(nc[0]) > 1 or len(nc[1]) > 1:
            self._dot_layout(dot)

    def _dot_operand(self, dot: HloInstruction, k: int, batch, rows, cols) -> None:
        """XLA's SetDotOperandLayout: the existing layout, else the default, else forced."""
        shape = self.orig.get(id(dot.operands[k]), dot.operands[k].shape)
        if shape.is_array and matrix_layout_ok(shape, batch, rows, cols):
            self.set_operand_layout(dot, k, shape.minor_to_major)
            return
        default = default_m2m(shape.rank)
        if matrix_layout_ok(with_minor_to_major(shape, default), batch, rows, cols):
            self.set_operand_layout(dot, k, default)
            return
        self.set_operand_layout(dot, k, tuple(reversed(tuple(batch) + tuple(rows) + tuple(cols))))

    def _minor_contracting(self, dot: HloInstruction, k: int, batch, contracting, free) -> None:
        shape = self.orig.get(id(dot.operands[k]), dot.operands[k].shape)
        m2m = shape.minor_to_major
        minor = set(m2m[:len(contracting)])
        if minor <= set(contracting) and matrix_layout_ok(shape, batch, free, contracting):
            self.set_operand_layout(dot, k, m2m)
            return
        self.set_operand_layout(dot, k, tuple(reversed(tuple(batch) + tuple(free) + tuple(contracting))))

    def _dot_layout(self, dot: HloInstruction) -> None:
        """XLA's SetDotLayout: a layout a user asked for that cuBLAS can write, else the default."""
        for user in dot.users:
            for k, op in enumerate(user.operands):
                want = self.operand_constraint(user, k) if op is dot else None
                if want is not None and want.is_array and dot_can_support_layout(dot, want):
                    self.set_instruction_layout(dot, want)
                    return
        self.set_instruction_layout(dot, dot.shape.with_default_layouts())

    def _transpose(self, transpose: HloInstruction) -> None:
        dot = transpose.operands[0]
        if dot.opcode != "dot" or len(dot.users) > 1:
            return
        shape = with_major_to_minor(dot.shape, transpose.attrs["dimensions"])
        if dot_can_support_layout(dot, shape):
            self.set_operand_layout(transpose, 0, shape.minor_to_major)

    def _convolution(self, conv: HloInstruction) -> None:
        """Only with the knob: one of the cuDNN layout triples (XLA's AddBackendConstraintsTocuDNNConv)."""
        rng = self._varied(conv)
        if rng is None or not conv.shape.is_array:
            return
        lhs, rhs, out = cudnn_conv_layouts(conv, nhwc=rng.random() < 0.5)
        self.set_operand_layout(conv, 0, lhs)
        self.set_operand_layout(conv, 1, rhs)
        self.set_instruction_layout(conv, with_minor_to_major(conv.shape, out))

    # -- other library-backed ops ---------------------------------------------------------------
    def _fft(self, fft: HloInstruction) -> None:
        self.set_operand_layout(fft, 0, default_m2m(fft.operands[0].shape.rank))
        self.set_instruction_layout(fft, fft.shape.with_default_layouts())

    def _sort(self, sort: HloInstruction) -> None:
        if sort.operands[0].shape.rank <= 1:
            return
        for k, op in enumerate(sort.operands):
            self.set_operand_layout(sort, k, default_m2m(op.shape.rank))
        self.set_instruction_layout(sort, sort.shape.with_default_layouts())

    def _custom_call(self, cc: HloInstruction) -> None:
        target = str(cc.attrs.get("custom_call_target", ""))
        if is_cudnn_conv(cc) and cc.shape.is_tuple:
            self._cudnn_conv(cc)
        elif target == TOPK_TARGET:
            self.set_instruction_layout(cc, cc.shape.with_default_layouts())
        elif target in MEMORY_PLACEMENT_TARGETS and cc.operands and cc.shape.is_array:
            self.set_operand_layout(cc, 0, default_m2m(cc.operands[0].shape.rank))
            self.set_instruction_layout(cc, cc.shape.with_default_layouts())

    def _cudnn_conv(self, call: HloInstruction) -> None:
        """XLA's AddBackendConstraintsToDnnConvCustomCall: the heuristic's NCHW or NHWC triple on the
        input, filter and output, whichever operand or result plays each role; a side input
        takes the output's layout."""
        inp, ker, out = cudnn_conv_layouts(call, nhwc=cudnn_prefers_nhwc(call, self.cc_major))
        target = call.attrs["custom_call_target"]
        lhs, rhs, result = {BACKWARD_INPUT: (out, ker, inp), BACKWARD_FILTER: (inp, out, ker)}.get(
            target, (inp, ker, out))
        self.set_operand_layout(call, 0, lhs)
        self.set_operand_layout(call, 1, rhs)
        self.set_buffer(call, (0,), result, True)
        if target == BIAS_ACTIVATION and len(call.operands) == 4:
            self.set_operand_layout(call, 3, out)

    def _bitcast_convert(self, bc: HloInstruction) -> None:
        """Rank-changing bitcast-convert: the extra (last) dim most minor, so it is a no-op."""
        op, out = bc.operands[0].shape, bc.shape
        if op.rank == out.rank:
            return
        larger, smaller = (op, out) if op.rank > out.rank else (out, op)
        last = larger.rank - 1
        big_m2m = (last,) + tuple(d for d in default_m2m(larger.rank) if d != last)
        small_m2m = tuple(d for d in big_m2m if d != last)
        op_m2m, out_m2m = (big_m2m, small_m2m) if op.rank > out.rank else (small_m2m, big_m2m)
        self.set_operand_layout(bc, 0, op_m2m)
        self.set_instruction_layout(bc, with_minor_to_major(out, out_m2m))

    def _triangular_solve(self, ts: HloInstruction) -> None:
        def fortran(rank: int) -> tuple[int, ...]:
            m2m = list(default_m2m(rank))
            m2m[0], m2m[1] = m2m[1], m2m[0]
            return tuple(m2m)

        for k, op in enumerate(ts.operands):
            self.set_operand_layout(ts, k, fortran(op.shape.rank))
        self.set_instruction_layout(ts, with_minor_to_major(ts.shape, fortran(ts.shape.rank)))

    def _dim_most_major(self, instr: HloInstruction) -> None:
        if not instr.shape.is_array or not instr.attrs.get("dimensions"):
            return
        dim = int(instr.attrs["dimensions"][0])
        self.set_instruction_layout(instr, move_dim_to_major(instr.shape.with_default_layouts(), dim))


_BACKEND_CONSTRAINTS = {
    "dot": _GpuLayoutAssignment._dot,
    "convolution": _GpuLayoutAssignment._convolution,
    "transpose": _GpuLayoutAssignment._transpose,
    "fft": _GpuLayoutAssignment._fft,
    "sort": _GpuLayoutAssignment._sort,
    "custom-call": _GpuLayoutAssignment._custom_call,
    "bitcast-convert": _GpuLayoutAssignment._bitcast_convert,
    "triangular-solve": _GpuLayoutAssignment._triangular_solve,
    "all-gather": _GpuLayoutAssignment._dim_most_major,
    "reduce-scatter": _GpuLayoutAssignment._dim_most_major,
    "all-to-all": _GpuLayoutAssignment._dim_most_major,
}


@register_pass
@dataclass
class GpuLayoutAssignment(DevicePass):
    """Assigns layouts to every value (GPU constraints), inserting copies where uses disagree."""

    name = "layout-assignment"
    vary_layouts_seed: int | None = None  # test knob (module docstring); None: XLA's choices
    device: DeviceDescription | None = None  # the run's `--device` (cuDNN layouts); None: H100

    def run(self, module: HloModule) -> bool:
        cc_major = (self.device or H100).compute_capability_major
        return _GpuLayoutAssignment(module, self.vary_layouts_seed, cc_major).run()
