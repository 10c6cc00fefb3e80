"""A Triton GEMM fusion as Triton source: `kernel_source(fusion, config)` writes its tiled program
(`program.py`) as a Triton kernel and says how to launch it, or raises Unsupported (the fusion
keeps the elemental kernel).

Where it sits: hlo_codegen.triton_gemm (package docstring); `compile.py` compiles the text,
`tiled_eval.py` runs the same program in numpy. The kernel is specialized to the fusion's
shapes, as XLA's are: every size and stride is a literal. Grid: XLA's, one program per output
tile on x (batch x ceil(M/BM) x ceil(N/BN)); tiles under tl.dot's 16 (XLA's default 16 x 8) are
computed padded to 16 with the rows past the config's tile masked off.

    acc = zeros((BM, BN), f32)                          # s32 for integer dots, f64 for f64
    for k0 in range(0, K, BK):
        a = load(lhs tile [BM, BK]) -> converts          # masked: ragged M, N and K read zeros
        b = load(rhs tile [BK, BN]) -> converts
        acc += dot(a, b)
    v = epilogue(acc rounded to the dot's type)         # elementwise ops, broadcast side inputs
    store(v, masked)
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_codegen.triton_gemm.config import padded
from hlo_codegen.triton_gemm.program import Operand, SideInput, TiledProgram, Unsupported, tiled_program
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
HELPERS = '''@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)

'''


@dataclass(frozen=True)
class KernelSource:
    """The kernel's text, its name, Triton's signature of its arguments (the fusion's operands in
    order, then the output), the grid, and the config it was written for."""

    text: str
    name: str
    signature: dict[str, str]
    grid: tuple[int, int, int]
    config: dict


def _index(d: int, rank: int) -> str:
    """The index expression of dim d of the dot's result inside the program's tile."""
    return "rn[None, :]" if d == rank - 1 else "rm[:, None]" if d == rank - 2 else f"pb{d}"


def _batch_offset(op: Operand) -> str:
    """The element offset of the program's batch (and a slice's start) in the operand."""
    return " + ".join([str(op.base)] + [f"pb{j} * {s}" for j, s in enumerate(op.batch) if s])


def k_tile(p: TiledProgram, config: dict) -> int:
    """The K side the kernel computes with: tl.dot takes K >= 32 for 8-bit tiles, else >= 16."""
    tiles = [(o.converts or (o.param_type,))[-1] for o in (p.lhs, p.rhs)]
    eight_bit = any(t in ("s8", "u8") or t.startswith("f8") for t in tiles)
    return max(padded(config["block_k"]), 32 if eight_bit else 16)


def _load(op: Operand, tile: str, mask: str) -> list[str]:
    lines = [f"        mask = {mask}",
             f"        x = tl.load(p{op.param} + {_batch_offset(op)} + {tile}, mask=mask)"]
    source = op.param_type
    for t in op.converts:  # f8 goes through f32 (Triton has no direct f8 <-> bf16 conversion)
        via = ".to(tl.float32)" if source.startswith("f8") or t.startswith("f8") else ""
        lines.append(f"        x = x{via}.to({TL_TYPES[t]})")
        source = t
    lines.append("        x = tl.where(mask, x, tl.zeros_like(x))")  # ragged edges add zeros
    return lines


def _side(s: SideInput, rank: int) -> str:
    if s.param is None:
        return f"tl.full((1, 1), {s.value!r}, {TL_TYPES[s.etype]})"
    offset = " + ".join(f"{_index(d, rank)} * {st}" for d, st in s.dims) or "0"
    return f"tl.load(p{s.param} + {offset}, mask=mask_mn, other=0)"


def _op(opcode: str, etype: str, args: list[str]) -> str:
    t = TL_TYPES[etype]
    if opcode == "convert":
        return f"{args[0]}.to({t})"
    if opcode in UNARY:
        x = f"{args[0]}.to(tl.float32)" if etype in ("bf16", "f16") else args[0]
        return f"({UNARY[opcode].format(x)}).to({t})"
    return f"({BINARY[opcode].format(*args)}).to({t})"


def kernel_source(fusion: HloInstruction, config: dict, name: str | None = None) -> KernelSource:
    """The Triton kernel of a GEMM fusion for a config with block_m, block_n, block_k."""
    try:
        p = tiled_program(fusion)
        kernel = name or "triton_" + "".join(c if c.isalnum() else "_" for c in fusion.name)
        return KernelSource(render(p, config, kernel), kernel, _signature(p), grid(p, config), dict(config))
    except KeyError as exc:  # a type or opcode without a Triton spelling here
        raise Unsupported(f"no Triton spelling for {exc.args[0]}") from None


def grid(p: TiledProgram, config: dict) -> tuple[int, int, int]:
    """XLA's launch grid: one program per output tile, on x (`blocks: {tiles, 1, 1}`)."""
    return (tiles_m(p, config) * tiles_n(p, config) * p.batch, 1, 1)


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def tiles_m(p: TiledProgram, config: dict) -> int:
    return -(-p.m // config["block_m"])


def tiles_n(p: TiledProgram, config: dict) -> int:
    return -(-p.n // config["block_n"])


def _signature(p: TiledProgram) -> dict[str, str]:
    signature = {f"p{i}": POINTER_TYPES.get(t) for i, t in enumerate(p.operand_types)}
    signature["out"] = POINTER_TYPES.get(p.out_type)
    if any(t is None for t in signature.values()):
        raise Unsupported("an operand type Triton has no pointer for")
    return signature


def _prologue(p: TiledProgram, config: dict) -> list[str]:
    """Program id -> (batch, tile row, tile column), batch-major then row-major as XLA orders the
    output tiles; the rows, columns and K indices of the (padded) tiles with their masks."""
    bm, bn, bk = config["block_m"], config["block_n"], config["block_k"]
    pm, pn, pk = padded(bm), padded(bn), k_tile(p, config)
    gm, gn = tiles_m(p, config), tiles_n(p, config)
    batch = [f"    pb{j} = pid_b // {_prod(p.batch_sizes[j + 1:])} % {size}"
             for j, size in enumerate(p.batch_sizes)]
    return ["    pid = tl.program_id(0)", f"    pid_b = pid // {gm * gn}",
            f"    pid_m = (pid // {gn}) % {gm}", f"    pid_n = pid % {gn}", *batch,
            f"    rm = pid_m * {bm} + tl.arange(0, {pm})", f"    rn = pid_n * {bn} + tl.arange(0, {pn})",
            f"    ok_m = (tl.arange(0, {pm}) < {bm}) & (rm < {p.m})",
            f"    ok_n = (tl.arange(0, {pn}) < {bn}) & (rn < {p.n})",
            f"    acc = tl.zeros(({pm}, {pn}), dtype={TL_TYPES[p.acc_type]})",
            f"    for k0 in range(0, {p.k}, {bk}):", f"        kk = k0 + tl.arange(0, {pk})",
            f"        ok_k = (tl.arange(0, {pk}) < {bk}) & (kk < {p.k})"]


def render(p: TiledProgram, config: dict, kernel: str) -> str:
    acc_t = TL_TYPES[p.acc_type]
    params = [f"p{i}" for i in range(len(p.operand_types))] + ["out"]
    tile_type = (p.lhs.converts or (p.lhs.param_type,))[-1]  # what tl.dot multiplies
    precision = ', input_precision="ieee"' if tile_type in ("f32", "f64") else ""  # not tf32
    lines = [f"@triton.jit\ndef {kernel}({', '.join(params)}):"] + _prologue(p, config)
    lines += _load(p.lhs, f"rm[:, None] * {p.lhs.free} + kk[None, :] * {p.lhs.contracting}",
                   "ok_m[:, None] & ok_k[None, :]")
    lines += ["        a = x"]
    lines += _load(p.rhs, f"kk[:, None] * {p.rhs.contracting} + rn[None, :] * {p.rhs.free}",
                   "ok_k[:, None] & ok_n[None, :]")
    lines += [f"        acc += tl.dot(a, x, out_dtype={acc_t}{precision})",
              "    mask_mn = ok_m[:, None] & ok_n[None, :]",
              f"    v = acc.to({TL_TYPES[p.dot_type]})"]
    for op in p.epilogue:
        args = ["v" if a == "acc" else _side(a, p.rank) for a in op.args]
        lines.append(f"    v = {_op(op.opcode, op.etype, args)}")
    offset = " + ".join(f"{_index(d, p.rank)} * {s}" for d, s in enumerate(p.out_strides))
    lines.append(f"    tl.store(out + {offset}, v, mask=mask_mn)")
    return "import triton\nimport triton.language as tl\n\n\n" + HELPERS + "\n".join(lines) + "\n"


__all__ = ["KernelSource", "Unsupported", "grid", "kernel_source", "k_tile", "render", "tiles_m", "tiles_n"]
