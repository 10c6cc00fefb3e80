"""The tiled program of a Triton GEMM fusion: what each program instance of the kernel reads and
computes, as data. `source.py` writes it as a Triton kernel, `tiled_eval.py` runs it tile by tile
in numpy with the same index arithmetic (the check of the tiling without a GPU).

Where it sits: hlo_codegen.triton_gemm (package docstring). A program instance (pid_m, pid_n,
pid_b) covers rows rm = pid_m*BM + [0, BM) and columns rn = pid_n*BN + [0, BN) of the dot's
[M, N] result for batch index pid_b. A dot operand is read at element offset
`pid_b*batch + row*free + k*contracting` of its parameter's buffer (strides of its physical
layout, through transposes and bitcasts), its converts applied to the loaded tile; an epilogue
side input at the sum of (result index of dim d) * stride over its (d, stride) pairs.

What it takes (else Unsupported): one dot with one contracting dim, any number of batch dims
and one free dim per operand; operands that are fusion parameters seen through converts,
transposes, broadcasts (stride 0 along the dims they add), slices (a start offset and a step)
and bitcasts (a transpose in disguise maps dims; a physically no-op reshape, e.g. split-k's,
addresses the parameter's bytes with its own strides); an epilogue of elementwise ops whose
other inputs are scalar constants, parameters of the result's shape or broadcasts of
parameters, ending at the root or at bitcasts of it. Copying reshapes in the prologue are not
taken.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.gpu.ir_emission_utils import reshape_is_bitcast
from hlo_common.hlo.ir import HloInstruction

UNARY_OPS = frozenset({"negate", "exponential", "log", "sqrt", "rsqrt", "abs", "tanh", "copy"})
BINARY_OPS = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum"})


class Unsupported(Exception):
    """The fusion has something the Triton GEMM kernel does not take yet (the message says what)."""


@dataclass(frozen=True)
class Operand:
    """A dot operand: the parameter read, the element offset of its [0, 0] (a slice's start),
    element strides of each batch dim (in the dot's batch order), of its free and contracting
    dim (0 along a broadcast dim), the parameter's type and the converts applied to the loaded
    tile, in order."""

    param: int
    base: int
    batch: tuple[int, ...]
    free: int
    contracting: int
    param_type: str
    converts: tuple[str, ...]


@dataclass(frozen=True)
class SideInput:
    """An epilogue op's other input: a scalar constant (`value`), or parameter `param` read at
    the sum of index(d) * stride over `dims` ((result dim, element stride) pairs)."""

    etype: str
    value: float | int | None = None
    param: int | None = None
    dims: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class EpilogueOp:
    opcode: str
    etype: str
    args: tuple  # "acc" for the value on the chain, else a SideInput


@dataclass(frozen=True)
class TiledProgram:
    m: int
    n: int
    k: int
    batch_sizes: tuple[int, ...]  # the dot's batch dims, the result's leading dims
    lhs: Operand
    rhs: Operand
    acc_type: str  # s32, f64 or f32
    dot_type: str
    epilogue: tuple[EpilogueOp, ...]
    out_type: str
    out_strides: tuple[int, ...]  # of the result's dims in the output buffer (through a root bitcast)
    operand_types: tuple[str, ...]

    @property
    def batch(self) -> int:
        return _prod(self.batch_sizes)

    @property
    def rank(self) -> int:
        return len(self.batch_sizes) + 2


def strides(shape) -> list[int]:
    """Element strides of each logical dim in the shape's physical layout."""
    out, step = [0] * shape.rank, 1
    for d in shape.minor_to_major:
        out[d] = step
        step *= shape.dims[d]
    return out


def _etype(instr: HloInstruction) -> str:
    return instr.shape.element_type.name


def _is_bitcast(node: HloInstruction) -> bool:
    return node.opcode == "bitcast" or (node.opcode == "reshape" and
                                        reshape_is_bitcast(node.operands[0].shape, node.shape))


def _physical_dims(shape) -> list[int]:
    """The dims of size > 1, major to minor."""
    return [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]


def _step(node: HloInstruction, cur: list) -> list | None:
    """The operand's index of each dim as (dot operand dim or None, scale, offset), from the
    node's (`cur`); None for a bitcast that is not a transpose in disguise."""
    op = node.operands[0].shape
    new: list = [(None, 0, 0)] * op.rank
    if node.opcode == "transpose":
        for i, d in enumerate(node.attrs["dimensions"]):
            new[d] = cur[i]
    elif node.opcode == "broadcast":  # the dims it adds read the same elements: stride 0
        for j, d in enumerate(node.attrs["dimensions"]):
            new[j] = cur[d]
    elif node.opcode == "slice":
        for d, (start, _, step) in enumerate(_slice_bounds(node)):
            t, scale, offset = cur[d]
            new[d] = (t, scale * step, offset * step + start)
    else:  # a bitcast: dim for dim when both sides list the same sizes major to minor
        have, want = _physical_dims(node.shape), _physical_dims(op)
        if [node.shape.dims[d] for d in have] != [op.dims[d] for d in want]:
            return None
        for r, o in zip(have, want):
            new[o] = cur[r]
    return new


def _slice_bounds(node: HloInstruction) -> list[tuple[int, int, int]]:
    return [(int(start), int(limit), int(step)) for start, limit, step in node.attrs["slice"].dims]


def trace_operand(op: HloInstruction, batch: tuple, contracting: tuple) -> Operand:
    """Follow a dot operand to its parameter through converts, transposes, broadcasts, slices and
    bitcasts: the element offset of each operand dim in the parameter's buffer."""
    converts: list[str] = []
    cur = [(d, 1, 0) for d in range(op.shape.rank)]
    node, addressed = op, None  # addressed: a reshaping bitcast whose layout addresses the bytes
    while node.opcode != "parameter":
        if node.opcode == "convert":
            converts.insert(0, _etype(node))
        elif addressed is not None:
            if not _is_bitcast(node):
                raise Unsupported(f"{node.opcode} under a reshaping bitcast in the prologue")
        elif node.opcode in ("transpose", "broadcast", "slice") or _is_bitcast(node):
            new = _step(node, cur)
            if new is None:  # the same bytes: its strides read the parameter
                addressed = node
            else:
                cur = new
        else:
            raise Unsupported(f"{node.opcode} in the prologue")
        node = node.operands[0]
    if len(contracting) != 1:
        raise Unsupported("several contracting dims")
    free = [d for d in range(op.shape.rank) if d not in batch and d not in contracting]
    if len(free) != 1:
        raise Unsupported("several free dims on one operand")
    st = strides((addressed or node).shape)
    per_dim, base = [0] * op.shape.rank, sum(st[d] * cur[d][2] for d in range(len(cur)))
    for d, (t, scale, _) in enumerate(cur):
        if t is not None:
            per_dim[t] += st[d] * scale
    return Operand(node.parameter_number, base, tuple(per_dim[b] for b in batch), per_dim[free[0]],
                   per_dim[contracting[0]], _etype(node), tuple(converts))


def _reaches(node: HloInstruction, target: HloInstruction) -> bool:
    return node is target or any(_reaches(o, target) for o in node.operands)


def _side_input(node: HloInstruction, rank: int, to_dot: dict[int, int]) -> SideInput:
    """An epilogue op's other input; `to_dot` maps the op's dims (of size > 1) to the dot's."""
    if node.opcode == "broadcast" and node.operands[0].opcode == "constant":
        node = node.operands[0]
    if node.opcode == "constant" and node.shape.rank == 0:
        value = float(node.literal) if node.shape.element_type.is_float else int(node.literal)
        return SideInput(_etype(node), value=value)
    dims, param = list(range(rank)), node
    if node.opcode == "broadcast":
        dims, param = list(node.attrs["dimensions"]), node.operands[0]
    if param.opcode != "parameter" or len(dims) != param.shape.rank:
        raise Unsupported(f"{node.opcode} as an epilogue input")
    pairs = tuple((to_dot[d], st) for d, st in zip(dims, strides(param.shape)) if d in to_dot)
    return SideInput(_etype(param), param=param.parameter_number, dims=pairs)


def _relabel(node: HloInstruction) -> dict[int, int]:
    """A bitcast on the epilogue chain that only renames dims (XLA's swapped dot under a bitcast
    to the old [.., M, N] shape): node dim -> operand dim, for the dims of size > 1."""
    have, want = _physical_dims(node.shape), _physical_dims(node.operands[0].shape)
    if [node.shape.dims[d] for d in have] != [node.operands[0].shape.dims[d] for d in want]:
        raise Unsupported("a reshaping bitcast in the epilogue")
    return dict(zip(have, want))


def _epilogue(root: HloInstruction, dot: HloInstruction) -> tuple[tuple[EpilogueOp, ...], dict[int, int]]:
    """The ops from the dot up to `root` (each has exactly one operand on the chain), their side
    inputs addressed by the dot's result dims, and root dim -> dot dim (dims of size > 1)."""
    chain: list[tuple[HloInstruction, dict[int, int], HloInstruction]] = []
    node, to_node = root, {d: d for d in range(root.shape.rank) if root.shape.dims[d] != 1}
    while node is not dot:
        on_chain = [o for o in node.operands if _reaches(o, dot)]
        if len(on_chain) != 1:
            raise Unsupported("an epilogue op reads the dot twice")
        if _is_bitcast(node):
            step = _relabel(node)
            to_node = {r: step[d] for r, d in to_node.items()}
        elif node.opcode in UNARY_OPS or node.opcode in BINARY_OPS or node.opcode == "convert":
            chain.insert(0, (node, dict(to_node), on_chain[0]))
        else:
            raise Unsupported(f"{node.opcode} in the epilogue")
        node = on_chain[0]
    ops = []
    for op, root_to_op, below in chain:
        to_dot = {d: to_node[r] for r, d in root_to_op.items()}  # op dim -> dot dim
        args = tuple("acc" if o is below else _side_input(o, op.shape.rank, to_dot) for o in op.operands)
        ops.append(EpilogueOp(op.opcode, _etype(op), args))
    return tuple(ops), to_node


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _store_root(root: HloInstruction, dot: HloInstruction) -> HloInstruction:
    """The root below bitcasts of it (same bytes: the store addresses the buffer with the strides
    of the instruction under them)."""
    while root is not dot and _is_bitcast(root) and _is_bitcast(root.operands[0]):
        root = root.operands[0]
    if root is not dot and _is_bitcast(root) and root.operands[0].shape.dims == dot.shape.dims:
        root = root.operands[0]
    if not root.shape.is_array or _prod(root.shape.dims) != _prod(dot.shape.dims):
        raise Unsupported("the root is not the dot's shape")
    return root


def _out_strides(store: HloInstruction, to_dot: dict[int, int], rank: int) -> tuple[int, ...]:
    """Element strides of the dot's result dims in the output buffer: the stored instruction's
    strides, carried to the dot's dims through the epilogue's renaming bitcasts."""
    out, st = [0] * rank, strides(store.shape)
    for r, d in to_dot.items():
        out[d] = st[r]
    return tuple(out)


def tiled_program(fusion: HloInstruction) -> TiledProgram:
    """The tiled program of a Triton GEMM fusion (raises Unsupported)."""
    body = fusion.fused_computation()
    dots = [i for i in body.instructions if i.opcode == "dot"]
    if len(dots) != 1:
        raise Unsupported(f"{len(dots)} dots")
    dot = dots[0]
    root = _store_root(body.root, dot)
    epilogue, to_dot = _epilogue(root, dot)
    attr = lambda k: tuple(int(v) for v in dot.attrs.get(k, ()))  # noqa: E731
    lb, lc, rb, rc = (attr(k) for k in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
                                        "rhs_contracting_dims"))
    lhs, rhs = trace_operand(dot.operands[0], lb, lc), trace_operand(dot.operands[1], rb, rc)
    ldims = dot.operands[0].shape.dims
    dot_type = _etype(dot)
    acc = "s32" if not dot.shape.element_type.is_float else "f64" if dot_type == "f64" else "f32"
    return TiledProgram(
        m=_prod(s for d, s in enumerate(ldims) if d not in lb and d not in lc), k=ldims[lc[0]],
        n=_prod(s for d, s in enumerate(dot.operands[1].shape.dims) if d not in rb and d not in rc),
        batch_sizes=tuple(ldims[d] for d in lb), lhs=lhs, rhs=rhs, acc_type=acc,
        dot_type=dot_type, epilogue=epilogue, out_type=_etype(body.root),
        out_strides=_out_strides(root, to_dot, dot.shape.rank),
        operand_types=tuple(_etype(o) for o in fusion.operands))


__all__ = ["EpilogueOp", "Operand", "SideInput", "TiledProgram", "Unsupported", "strides", "tiled_program",
           "trace_operand"]
