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
- fft, sort with rank > 1, TopK, MoveToHost/MoveToDevice: default layouts; triangular-solve:
  the two minor dims swapped (Fortran order); all-gather / reduce-scatter / all-to-all: the
  gathered / scattered / split dim most major; bitcast-convert that changes rank: the changed
  dim most minor;
- reduce: when the reduced elements number at least 32, the operand takes the layout that makes
  it a row reduction (reduced dims most minor), unless something else constrains it.

Declines nothing; modules whose bitcasts, fusions and library calls already carry layouts keep
those layouts (XLA would reject bitcasts here). Returns whether any layout changed or copy was
added.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloComputation, HloInstruction, HloModule
from hlo_common.hlo.shape import Shape
from hlo_opt.layout_constraints import LayoutAssignment
from hlo_opt.layout_util import (
    default_m2m, matrix_layout_ok, move_dim_to_major, with_major_to_minor, with_minor_to_major,
)
from hlo_common.hlo_pass.pass_base import HloPass, register_pass

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


class _GpuLayoutAssignment(LayoutAssignment):
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
        if target == TOPK_TARGET:
            self.set_instruction_layout(cc, cc.shape.with_default_layouts())
        elif target in MEMORY_PLACEMENT_TARGETS and cc.operands and cc.shape.is_array:
            self.set_operand_layout(cc, 0, default_m2m(cc.operands[0].shape.rank))
            self.set_instruction_layout(cc, cc.shape.with_default_layouts())

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
class GpuLayoutAssignment(HloPass):
    """Assigns layouts to every value (GPU constraints), inserting copies where uses disagree."""

    name = "layout-assignment"

    def run(self, module: HloModule) -> bool:
        return _GpuLayoutAssignment(module).run()
