"""A GEMM fusion's epilogue as one compiled loop over each finished block of rows.

Where it sits: `host_gemm_direct.DirectPlan` runs the epilogue of a GEMM fusion (the dot's rounding
to its type and the elementwise ops after it, up to the root) on every block of rows the host GEMM
finishes, on the thread that computed it. With the interpreter's handlers that is one numpy pass
and one temporary array per op; on the bench's bf16 MLP block (a bf16 dot rounded, then a bf16 bias
added and rounded) the handlers took 2.8 ms of CPU for a 16-million-element product. When every
epilogue op is one the interpreter's compiled region runs also compile (`region_jit`: add,
subtract, multiply, divide, negate, abs, convert on f32 and bf16, and the bf16 functions it looks
up in tables), the chain becomes `region_jit.loop_ir`'s loop nest instead: each element is loaded
once, every op's value stays in a register, bf16 values are rounded after each op with the same
rounding, and only the root is stored, straight into the fusion's output rows.

The values are the handlers' bit for bit (region_jit's rule: the same IEEE operations in the same
order, no fast-math flags), except which NaN an op on two NaNs returns, which IEEE leaves open and
numpy's own loops already vary (tests/unit/hlo_run/test_host_gemm_direct.py compares the two on
random and special values).

    epi = CompiledEpilogue.build(head, epilogue, root)      # None: the handlers run
    epi.run(head_rows, sides, out_rows)                      # False: not done (the handlers run)

`head_rows` is the f32 block of the dot's sums, `sides` the blocks of the other operands (a
broadcast bias or scale is a view with zero strides: read as a row, a column vector or a scalar),
`out_rows` the block of the output; all for the same rows.
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction

_NO_ROUNDING = frozenset({"select"})  # region_kernels' ops whose value is an operand's


class CompiledEpilogue:
    """The epilogue ops as region_jit's (opcode, operand refs, rounds, table) tuples over the
    sources: input 0 the head's f32 sums, then each side operand (by instruction id) and table."""

    def __init__(self, sources: list, ops: tuple, root_dtype: str):
        self.sources, self.ops, self.root_dtype = sources, ops, root_dtype
        self._functions: dict[tuple, object] = {}

    @staticmethod
    def build(head: HloInstruction, epilogue: list, root: HloInstruction) -> CompiledEpilogue | None:
        """The compiled form of rounding `head` to its type and then running `epilogue` (in order,
        ending at `root`), or None when an op or type is not one region_jit compiles."""
        from hlo_common.interpreter import narrow_jit, region_jit
        from hlo_common.interpreter.region_kernels import TABLED

        if not region_jit.ENABLED or not narrow_jit.available():
            return None
        kinds = {"f32", "bf16"}
        if head.shape.element_type.name not in kinds or root.shape.element_type.name not in kinds:
            return None
        sources: list = [("head",)]
        ops: list = []
        refs: dict[int, tuple] = {id(head): ("i", 0)}
        if head.shape.element_type.name == "bf16":  # the dot's f32 sums rounded to its type
            ops.append(("convert", (("i", 0),), True, -1))
            refs[id(head)] = ("m", 0)
        for e in epilogue:
            et = e.shape.element_type.name
            tabled = e.opcode in TABLED and et == "bf16"
            if et not in kinds or not (e.opcode in region_jit.COMPILED_OPCODES or tabled) \
                    or any(o.shape.element_type.name not in kinds for o in e.operands):
                return None
            operand_refs = []
            for o in e.operands:
                if id(o) not in refs:
                    sources.append(("side", id(o)))
                    refs[id(o)] = ("i", len(sources) - 1)
                operand_refs.append(refs[id(o)])
            table = -1
            if tabled:
                sources.append(("table", e.opcode))
                table = len(sources) - 1
            ops.append((e.opcode, tuple(operand_refs), et == "bf16" and not tabled
                        and e.opcode not in _NO_ROUNDING, table))
            refs[id(e)] = ("m", len(ops) - 1)
        if not ops or refs.get(id(root), ("i",))[0] != "m":
            return None
        return CompiledEpilogue(sources, tuple(ops), root.shape.element_type.name)

    def run(self, head_rows: np.ndarray, sides: dict[int, np.ndarray], out_rows: np.ndarray) -> bool:
        """Compute the root's rows into `out_rows` (2-d: rows x columns, like every block); False
        when a block's layout is not one the loop reads (nothing is written then)."""
        from hlo_common.interpreter import region_jit
        from hlo_common.interpreter.region_kernels import bf16_table

        if head_rows.dtype != np.float32 or not head_rows.flags.c_contiguous \
                or not out_rows.flags.c_contiguous or _dtype(out_rows) != self.root_dtype:
            return False
        kinds, args = [(region_jit.FULL, "f32")], [head_rows.ctypes.data, 0]
        for source in self.sources[1:]:
            if source[0] == "table":
                kinds.append(("table", "u32"))
                args += [bf16_table(source[1]).ctypes.data, 0]
                continue
            form = _form(sides[source[1]], head_rows.shape)
            if form is None:
                return False
            kinds.append(form[:2])
            args += form[2:]
        key = tuple(kinds)
        fn = self._functions.get(key)
        if fn is None:
            ir = region_jit.loop_ir(key, self.ops, ((len(self.ops) - 1, self.root_dtype),))
            fn = self._functions[key] = region_jit.compiled(ir, len(kinds), 1) or False
        if fn is False:
            return False
        rows, cols = head_rows.shape
        # The head and the output may be the same rows (an f32 fusion writes its output buffer):
        # each element is read before it is written, at the same index, so the loop is unaffected.
        fn(*args, out_rows.ctypes.data, rows, cols)
        return True


def _dtype(x: np.ndarray) -> str | None:
    from hlo_common.interpreter import narrow

    return "f32" if x.dtype == np.float32 else "bf16" if x.dtype == narrow.BF16 else None


def _form(x: np.ndarray, shape: tuple[int, int]) -> tuple | None:
    """(kind, dtype, address, row stride in elements) of a side operand's block as the loop reads
    it: a full block (contiguous), a column vector (one value per row), a row of the columns (a
    bias along the last dim) or one value; None for any other layout."""
    from hlo_common.interpreter import region_jit

    dtype = _dtype(x)
    if dtype is None or x.shape != shape:
        return None
    size = x.dtype.itemsize
    s0, s1 = x.strides
    if x.flags.c_contiguous:
        return region_jit.FULL, dtype, x.ctypes.data, 0
    if s0 == 0 and s1 == 0:
        return region_jit.SCALAR, dtype, x.ctypes.data, 0
    if s0 == 0 and s1 == size:
        return region_jit.COL, dtype, x.ctypes.data, 0
    if s1 == 0 and s0 % size == 0 and s0 >= 0:
        return region_jit.ROW, dtype, x.ctypes.data, s0 // size
    return None


__all__ = ["CompiledEpilogue"]
