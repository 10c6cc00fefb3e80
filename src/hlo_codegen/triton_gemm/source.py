"""A Triton GEMM fusion as Triton source: `kernel_source(fusion, config)` gives the kernel text and
how to launch it, or raises Unsupported (the fusion keeps the elemental kernel).

Where it sits: hlo_codegen.triton_gemm (package docstring); `compile.py` compiles the text.

The kernel is specialized to the fusion's shapes, as XLA's are: every size and stride is a
literal. One program computes one block_m x block_n tile of the dot's [M, N] result for one
batch index (grid: ceil(M/block_m), ceil(N/block_n), batch):

    acc = zeros((BM, BN), f32)                          # s32 for integer dots
    for k0 in range(0, K, BK):
        a = load(lhs tile [BM, BK]) -> prologue (converts) # masked: ragged M, N and K read zeros
        b = load(rhs tile [BK, BN]) -> prologue
        acc += dot(a, b)
    x = epilogue(acc rounded to the dot's type)         # elementwise ops, broadcast side inputs
    store(x, masked)

What it takes (else Unsupported): a dot with one contracting dim, at most one batch dim and one
free dim per operand; operands that are fusion parameters seen through converts and transposes
(read through their physical strides); an epilogue of elementwise ops whose other inputs are
scalar constants, parameters of the result's shape, or broadcasts of parameters; the root that
chain's last op. Reshapes and bitcasts, slices and broadcasts in the prologue are not taken yet.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.hlo.ir import HloInstruction

TL_TYPES = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64",
            "s8": "tl.int8", "s16": "tl.int16", "s32": "tl.int32", "s64": "tl.int64", "pred": "tl.int1",
            "f8e4m3fn": "tl.float8e4nv", "f8e5m2": "tl.float8e5"}
POINTER_TYPES = {"f16": "*fp16", "bf16": "*bf16", "f32": "*fp32", "f64": "*fp64", "s8": "*i8", "s16": "*i16",
                 "s32": "*i32", "s64": "*i64", "pred": "*i1", "f8e4m3fn": "*fp8e4nv", "f8e5m2": "*fp8e5"}
UNARY = {"negate": "-({0})", "exponential": "tl.exp({0})", "log": "tl.log({0})", "sqrt": "tl.sqrt({0})",
         "rsqrt": "tl.rsqrt({0})", "abs": "tl.abs({0})", "tanh": "_tanh({0})", "copy": "{0}"}
BINARY = {"add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})",
          "divide": "({0} / {1})", "maximum": "tl.maximum({0}, {1})", "minimum": "tl.minimum({0}, {1})"}


class Unsupported(Exception):
    """The fusion has something the Triton source writer does not take yet (the message says what)."""


@dataclass(frozen=True)
class KernelSource:
    """The kernel's text, its name, Triton's signature of its arguments (the fusion's operands in
    order, then the output), the grid, and the config it was written for."""

    text: str
    name: str
    signature: dict[str, str]
    grid: tuple[int, int, int]
    config: dict


def _strides(shape) -> list[int]:
    """Element strides of each logical dim in the shape's physical layout."""
    strides = [0] * shape.rank
    step = 1
    for d in shape.minor_to_major:
        strides[d] = step
        step *= shape.dims[d]
    return strides


def _etype(instr: HloInstruction) -> str:
    return instr.shape.element_type.name


@dataclass
class _Operand:
    """A dot operand: the parameter it reads, its strides per dot dim (batch, free, contracting)
    and the converts applied to the loaded tile."""

    param: int
    batch: int
    free: int
    contracting: int
    converts: list[str]
    param_type: str


def _trace_operand(op: HloInstruction, batch: tuple, contracting: tuple) -> _Operand:
    """Follow a dot operand to its parameter through converts and transposes."""
    converts: list[str] = []
    dims = list(range(op.shape.rank))  # operand dim -> dim of the current instruction
    node = op
    while node.opcode != "parameter":
        if node.opcode == "convert":
            converts.insert(0, _etype(node))
        elif node.opcode == "transpose":
            perm = node.attrs["dimensions"]
            dims = [perm[d] for d in dims]
        else:
            raise Unsupported(f"{node.opcode} in the prologue")
        node = node.operands[0]
    if len(batch) > 1 or len(contracting) != 1:
        raise Unsupported("several batch or contracting dims")
    free = [d for d in range(op.shape.rank) if d not in batch and d not in contracting]
    if len(free) != 1:
        raise Unsupported("several free dims on one operand")
    strides = _strides(node.shape)
    return _Operand(node.parameter_number, strides[dims[batch[0]]] if batch else 0, strides[dims[free[0]]],
                    strides[dims[contracting[0]]], converts, _etype(node))


def _dot_of(fusion: HloInstruction) -> HloInstruction:
    dots = [i for i in fusion.fused_computation().instructions if i.opcode == "dot"]
    if len(dots) != 1:
        raise Unsupported(f"{len(dots)} dots")
    return dots[0]


def _epilogue_chain(root: HloInstruction, dot: HloInstruction) -> list[HloInstruction]:
    """The ops from the dot up to the root (each has exactly one operand on the chain)."""
    chain: list[HloInstruction] = []
    node = root
    while node is not dot:
        if node.opcode not in UNARY and node.opcode not in BINARY and node.opcode != "convert":
            raise Unsupported(f"{node.opcode} in the epilogue")
        on_chain = [o for o in node.operands if _reaches(o, dot)]
        if len(on_chain) != 1:
            raise Unsupported("an epilogue op reads the dot twice")
        chain.insert(0, node)
        node = on_chain[0]
    return chain


def _reaches(node: HloInstruction, target: HloInstruction) -> bool:
    return node is target or any(_reaches(o, target) for o in node.operands)


class _Writer:
    """The kernel text of one fusion, line by line."""

    def __init__(self, fusion: HloInstruction, config: dict):
        self.fusion, self.config = fusion, config
        self.dot = _dot_of(fusion)
        self.rank = self.dot.shape.rank
        self.lines: list[str] = []
        self.values: dict[int, str] = {}

    def index(self, d: int) -> str:
        """The index expression of dim d of the dot's result inside the program's tile."""
        if d == self.rank - 1:
            return "rn[None, :]"
        if d == self.rank - 2:
            return "rm[:, None]"
        return "pid_b"

    def side_input(self, node: HloInstruction) -> str:
        """A tile of an epilogue op's other input."""
        if node.opcode == "broadcast" and node.operands[0].opcode == "constant":
            node = node.operands[0]
        if node.opcode == "constant" and node.shape.rank == 0:
            value = float(node.literal) if node.shape.element_type.is_float else int(node.literal)
            return f"tl.full((1, 1), {value!r}, {TL_TYPES[_etype(node)]})"
        dims = list(range(self.rank))
        param = node
        if node.opcode == "broadcast":
            dims, param = list(node.attrs["dimensions"]), node.operands[0]
        if param.opcode != "parameter" or len(dims) != param.shape.rank:
            raise Unsupported(f"{node.opcode} as an epilogue input")
        strides = _strides(param.shape)
        offset = " + ".join(f"{self.index(d)} * {s}" for d, s in zip(dims, strides)) or "0"
        return f"tl.load(p{param.parameter_number} + {offset}, mask=mask_mn, other=0)"

    def op(self, instr: HloInstruction, args: list[str]) -> str:
        t = TL_TYPES[_etype(instr)]
        if instr.opcode == "convert":
            return f"{args[0]}.to({t})"
        narrow = instr.shape.element_type.is_float and instr.shape.element_type.bits < 32
        if instr.opcode in UNARY:
            x = f"{args[0]}.to(tl.float32)" if narrow else args[0]
            return f"({UNARY[instr.opcode].format(x)}).to({t})"
        return f"({BINARY[instr.opcode].format(*args)}).to({t})"


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def _load(op: _Operand, tile: str, mask: str) -> list[str]:
    lines = [f"        mask = {mask}",
             f"        x = tl.load(p{op.param} + pid_b * {op.batch} + {tile}, mask=mask)"]
    source = op.param_type
    for t in op.converts:  # f8 goes through f32 (Triton has no direct f8 <-> bf16 conversion)
        via = ".to(tl.float32)" if source.startswith("f8") or t.startswith("f8") else ""
        lines.append(f"        x = x{via}.to({TL_TYPES[t]})")
        source = t
    lines.append("        x = tl.where(mask, x, tl.zeros_like(x))")  # ragged edges add zeros
    return lines


HELPERS = '''@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)

'''


def kernel_source(fusion: HloInstruction, config: dict, name: str | None = None) -> KernelSource:
    """The Triton kernel of a GEMM fusion for a config with block_m, block_n, block_k."""
    try:
        return _kernel_source(fusion, config, name)
    except KeyError as exc:  # a type or opcode without a Triton spelling here
        raise Unsupported(f"no Triton spelling for {exc.args[0]}") from None


def _kernel_source(fusion: HloInstruction, config: dict, name: str | None) -> KernelSource:
    w = _Writer(fusion, config)
    dot, body = w.dot, fusion.fused_computation()
    attr = lambda k: tuple(int(v) for v in dot.attrs.get(k, ()))  # noqa: E731
    lb, lc, rb, rc = (attr(k) for k in ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims",
                                        "rhs_contracting_dims"))
    lhs, rhs = _trace_operand(dot.operands[0], lb, lc), _trace_operand(dot.operands[1], rb, rc)
    ldims = dot.operands[0].shape.dims
    m = _prod(s for d, s in enumerate(ldims) if d not in lb and d not in lc)
    k = ldims[lc[0]]
    n = _prod(s for d, s in enumerate(dot.operands[1].shape.dims) if d not in rb and d not in rc)
    batch = _prod(ldims[d] for d in lb)
    root = body.root
    if not root.shape.is_array or root.shape.rank != dot.shape.rank:
        raise Unsupported("the root is not the dot's shape")
    chain = _epilogue_chain(root, dot)
    integer = not dot.shape.element_type.is_float
    acc_t = "tl.int32" if integer else "tl.float64" if _etype(dot) == "f64" else "tl.float32"
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    kernel = name or "triton_" + "".join(c if c.isalnum() else "_" for c in fusion.name)
    params = [f"p{i}" for i in range(len(fusion.operands))] + ["out"]
    precision = "" if integer or _etype(dot.operands[0]) not in ("f32", "f64") else ', input_precision="ieee"'
    lines = [f"@triton.jit\ndef {kernel}({', '.join(params)}):",
             "    pid_m = tl.program_id(0)", "    pid_n = tl.program_id(1)", "    pid_b = tl.program_id(2)",
             f"    rm = pid_m * {bm} + tl.arange(0, {bm})", f"    rn = pid_n * {bn} + tl.arange(0, {bn})",
             f"    acc = tl.zeros(({bm}, {bn}), dtype={acc_t})",
             f"    for k0 in range(0, {k}, {bk}):", f"        kk = k0 + tl.arange(0, {bk})"]
    lines += _load(lhs, f"rm[:, None] * {lhs.free} + kk[None, :] * {lhs.contracting}",
                   f"(rm[:, None] < {m}) & (kk[None, :] < {k})")
    lines += ["        a = x"]
    lines += _load(rhs, f"kk[:, None] * {rhs.contracting} + rn[None, :] * {rhs.free}",
                   f"(kk[:, None] < {k}) & (rn[None, :] < {n})")
    lines += [f"        acc += tl.dot(a, x, out_dtype={acc_t}{precision})",
              f"    mask_mn = (rm[:, None] < {m}) & (rn[None, :] < {n})",
              f"    v = acc.to({TL_TYPES[_etype(dot)]})"]
    for instr in chain:
        args = ["v" if _reaches(o, dot) else w.side_input(o) for o in instr.operands]
        lines.append(f"    v = {w.op(instr, args)}")
    out_strides = _strides(root.shape)
    offset = " + ".join(f"{w.index(d)} * {s}" for d, s in enumerate(out_strides))
    lines.append(f"    tl.store(out + {offset}, v, mask=mask_mn)")
    text = "import triton\nimport triton.language as tl\n\n\n" + HELPERS + "\n".join(lines) + "\n"
    signature = {f"p{i}": POINTER_TYPES.get(_etype(o)) for i, o in enumerate(fusion.operands)}
    signature["out"] = POINTER_TYPES.get(_etype(root))
    if any(t is None for t in signature.values()):
        raise Unsupported("an operand type Triton has no pointer for")
    grid = (-(-m // bm), -(-n // bn), batch)
    return KernelSource(text, kernel, signature, grid, dict(config))


__all__ = ["KernelSource", "Unsupported", "kernel_source"]
