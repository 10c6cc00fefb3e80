"""A GEMM fusion's epilogue (and its operands' elementwise prologue) as one compiled loop.

Where it sits: `host_gemm_direct.DirectPlan` runs the epilogue of a GEMM fusion (the dot's rounding
to its type and the elementwise ops after it, up to the root) on every block of rows the host GEMM
finishes, on the thread that computed it. With the interpreter's handlers that is one numpy pass
and one temporary array per op; on the bench's bf16 MLP block (a bf16 dot rounded, then a bf16 bias
added and rounded) the handlers took 2.8 ms of CPU on its 4M-element product. When every
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

The same loop computes a dot operand that is a chain of such ops (`prologue_chains`: a layer
norm's scale and shift of the activations, which the transformer layer's two first GEMM fusions
hold): one pass instead of one numpy pass and temporary per op, split over the host threads when
it is large (`run_parallel`).
"""

from __future__ import annotations

import numpy as np

from hlo_common.hlo.ir import HloInstruction

class CompiledEpilogue:
    """The epilogue ops as region_jit's (opcode, operand refs, rounds, table) tuples over the
    sources: input 0 the head's f32 sums, then each side operand (by instruction id) and table."""

    def __init__(self, sources: list, ops: tuple, root_dtype: str):
        self.sources, self.ops, self.root_dtype = sources, ops, root_dtype
        self._functions: dict[tuple, object] = {}

    @staticmethod
    def build(head: HloInstruction | None, members: list, root: HloInstruction) -> CompiledEpilogue | None:
        """The compiled form of rounding `head` to its type (when there is a head: the dot, whose
        f32 sums are input 0) and then running `members` (in order, ending at `root`), or None
        when an op or type is not one region_jit compiles. Every other operand is a side input."""
        from hlo_common.interpreter import narrow_jit, region_jit

        if not region_jit.ENABLED or not narrow_jit.available():
            return None
        if head is not None and head.shape.element_type.name not in _KINDS \
                or root.shape.element_type.name not in _KINDS:
            return None
        sources: list = [("head",)] if head is not None else []
        ops: list = []
        refs: dict[int, tuple] = {}
        if head is not None:
            refs[id(head)] = ("i", 0)
            if head.shape.element_type.name == "bf16":  # the dot's f32 sums rounded to its type
                ops.append(("convert", (("i", 0),), True, -1))
                refs[id(head)] = ("m", 0)
        for e in members:
            if not _add_op(e, sources, ops, refs):
                return None
        if not ops or refs.get(id(root), ("i",))[0] != "m":
            return None
        return CompiledEpilogue(sources, tuple(ops), root.shape.element_type.name)

    def run(self, head_rows: np.ndarray | None, sides: dict[int, np.ndarray], out_rows: np.ndarray) -> bool:
        """Compute the root's rows into `out_rows` (2-d: rows x columns, like every block); False
        when a block's layout is not one the loop reads (nothing is written then)."""
        fn_args = self._bind(head_rows, sides, out_rows)
        if fn_args is None:
            return False
        fn, args, _ = fn_args
        # The head and the output may be the same rows (an f32 fusion writes its output buffer):
        # each element is read before it is written, at the same index, so the loop is unaffected.
        fn(*args, out_rows.ctypes.data, *out_rows.shape)
        return True

    def run_parallel(self, sides: dict[int, np.ndarray], out: np.ndarray) -> bool:
        """`run` without a head over the 2-d `out`, its rows split over the host threads (the
        rows of a FULL or ROW input move with them); False when not done."""
        fn_args = self._bind(None, sides, out)
        if fn_args is None:
            return False
        fn, args, kinds = fn_args
        rows, cols = out.shape
        size = out.dtype.itemsize
        steps = [(st * _BYTES[dtype] if kind == "row" else cols * _BYTES[dtype] if kind == "full" else 0)
                 for (kind, dtype), st in zip(kinds, args[1::2])]
        # blocks of about 1M elements: the loop runs ~10 elements a ns, a range handed to a thread
        # costs ~10 us, so smaller operands (a 512 x 512 activation: 20 us) run in one call
        per = max(1, -(-(1 << 20) // max(cols, 1)))

        def block(lo: int, hi: int) -> None:
            r0, r1 = lo * per, min(rows, hi * per)
            moved = [v for base, row, step in zip(args[0::2], args[1::2], steps)
                     for v in (base + r0 * step, row)]
            fn(*moved, out.ctypes.data + r0 * cols * size, r1 - r0, cols)

        from hlo_run.host_kernel import run_ranges, threads_for

        run_ranges("a GEMM fusion's prologue", block, -(-rows // per), threads_for(out.nbytes * 2))
        return True

    def _bind(self, head_rows, sides, out_rows):
        """(the compiled loop, its input arguments, their kinds) for these blocks, or None."""
        from hlo_common.interpreter import region_jit
        from hlo_common.interpreter.region_kernels import bf16_table

        if not out_rows.flags.c_contiguous or _dtype(out_rows) != self.root_dtype or out_rows.ndim != 2:
            return None
        kinds, args = [], []
        if head_rows is not None:
            if head_rows.dtype != np.float32 or not head_rows.flags.c_contiguous:
                return None
            kinds, args = [(region_jit.FULL, "f32")], [head_rows.ctypes.data, 0]
        for source in self.sources[len(kinds):]:
            if source[0] == "table":
                kinds.append(("table", "u32"))
                args += [bf16_table(source[1]).ctypes.data, 0]
                continue
            form = _form(sides[source[1]], out_rows.shape)
            if form is None:
                return None
            kinds.append(form[:2])
            args += form[2:]
        key = tuple(kinds)
        fn = self._functions.get(key)
        if fn is None:
            ir = region_jit.loop_ir(key, self.ops, ((len(self.ops) - 1, self.root_dtype),))
            fn = self._functions[key] = region_jit.compiled(ir, len(kinds), 1) or False
        return None if fn is False else (fn, args, key)


_KINDS = frozenset({"f32", "bf16"})
_BYTES = {"f32": 4, "bf16": 2, "u32": 4}


def _add_op(e: HloInstruction, sources: list, ops: list, refs: dict) -> bool:
    """Append member `e` to `ops` (its operands not yet known become side sources); False when
    region_jit does not compile it."""
    from hlo_common.interpreter import region_jit
    from hlo_common.interpreter.region_kernels import TABLED

    if not region_jit.compilable(e):
        return False
    tabled = e.opcode in TABLED and e.shape.element_type.name == "bf16"
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
    # a bf16 value is rounded after each op, as the region's member kernels round it (a table
    # holds rounded values already)
    ops.append((e.opcode, tuple(operand_refs), e.shape.element_type.name == "bf16" and not tabled, table))
    refs[id(e)] = ("m", len(ops) - 1)
    return True


def prologue_chains(prologue: list, dot: HloInstruction) -> dict[int, tuple]:
    """{id(dot operand): (its CompiledEpilogue, the chain's members in order)} for each dot operand
    computed by region ops of the operand's shape (a layer norm's scale and shift of the
    activations): the operand and, walking back, every such op whose users are all in the chain.
    The chain's other operands (parameters, broadcasts) are side inputs, evaluated before it."""
    order = {id(i): k for k, i in enumerate(prologue)}
    chains: dict[int, tuple] = {}
    for end in dot.operands:
        if id(end) not in order or id(end) in chains or not _compilable(end, end.shape.dims):
            continue
        members, stack = {id(end): end}, [end]
        while stack:
            for o in stack.pop().operands:
                if id(o) in order and id(o) not in members and _compilable(o, end.shape.dims) \
                        and all(id(u) in members for u in o.users):
                    members[id(o)] = o
                    stack.append(o)
        chain = sorted(members.values(), key=lambda i: order[id(i)])
        compiled = CompiledEpilogue.build(None, chain, end)
        if compiled is not None:
            chains[id(end)] = (compiled, chain)
    return chains


def _compilable(e: HloInstruction, dims) -> bool:
    from hlo_common.interpreter import region_jit

    return e.shape.dims == dims and len(dims) > 0 and region_jit.compilable(e)


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


__all__ = ["CompiledEpilogue", "prologue_chains"]
