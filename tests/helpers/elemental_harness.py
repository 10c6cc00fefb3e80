"""Shared harness of the emitter/lowering tests: run a fusion through the emitters and the host
JIT and compare with the reference interpreter (like XLA's `*_test_correctness`).

Buffers follow the kernel ABI: flat 1-D, physical (layout) order, sub-byte types with an E(n)
layout packed low bits first. Comparison is run_hlo_module's: an element fails only when it
exceeds both the absolute and the relative bound (f32/f64 1e-4, bf16/f16/f8 2e-2, integers and
pred exact, NaN equals NaN). Its own tests: tests/unit/hlo_codegen/elemental/test_elemental_harness.py.
"""

from __future__ import annotations

import numpy as np

from hlo_codegen.emitters import emit_kernel, wrap_computation_in_fusion
from hlo_codegen.emitters.base import _is_packed
from hlo_codegen.kernel_ir import Kernel, parse_kernel, print_kernel
from hlo_codegen.llvm import lower_to_host
from hlo_run.host_kernel import load_host_kernel
from hlo_common.interpreter.evaluator import Evaluator
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape import Shape

TOLERANCE = {"f32": 1e-4, "f64": 1e-4, "c64": 1e-4, "c128": 1e-4}


def fusion_of(text: str) -> HloInstruction:
    """The entry root fusion of `text`, or a kLoop fusion wrapped around a bare computation."""
    module = parse_module(text)
    root = module.entry.root
    if root.opcode == "fusion":
        return root
    return wrap_computation_in_fusion(module, module.entry)


def random_args(fusion: HloInstruction, seed: int = 0, scale: float = 1.0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for op in fusion.operands:
        s = op.shape
        et = s.element_type
        if et.is_float:
            a = rng.standard_normal(s.dims) * scale
        elif et.is_complex:
            a = rng.standard_normal(s.dims) + 1j * rng.standard_normal(s.dims)
        elif et.is_pred:
            a = rng.integers(0, 2, s.dims)
        else:
            lo = -(1 << (et.bits - 1)) if et.kind == "signed" else 0
            hi = (1 << (et.bits - 1)) if et.kind == "signed" else (1 << et.bits)
            a = rng.integers(max(lo, -1000), min(hi, 1000), s.dims)
        out.append(np.asarray(a).astype(et.np_dtype))
    return out


def to_buffer(array: np.ndarray, shape: Shape) -> np.ndarray:
    """The kernel-ABI buffer of a logical array: physical order, packed if the layout says so."""
    a = np.asarray(array).astype(shape.element_type.np_dtype)
    if a.ndim > 1:
        a = np.transpose(a, list(reversed(shape.minor_to_major)))
    flat = np.ascontiguousarray(a).reshape(-1)
    if not _is_packed(shape):
        return flat
    bits = shape.element_type.bits
    per = 8 // bits
    codes = flat.view(np.uint8).astype(np.uint16) & ((1 << bits) - 1)
    codes = np.concatenate([codes, np.zeros((-len(codes)) % per, np.uint16)]).reshape(-1, per)
    return (codes << (np.arange(per, dtype=np.uint16) * bits)).sum(axis=1).astype(np.uint8)


def from_buffer(buffer: np.ndarray, shape: Shape) -> np.ndarray:
    et = shape.element_type
    flat = buffer
    if _is_packed(shape):
        per = 8 // et.bits
        codes = (buffer[:, None] >> (np.arange(per, dtype=np.uint8) * et.bits)) & ((1 << et.bits) - 1)
        flat = codes.reshape(-1)[:shape.num_elements].astype(np.uint8).view(et.np_dtype)
    phys = [shape.dims[d] for d in reversed(shape.minor_to_major)]
    a = flat.reshape(tuple(phys))
    if shape.rank > 1:
        a = np.transpose(a, np.argsort(list(reversed(shape.minor_to_major))))
    return np.array(a, order="C")


def output_shapes(fusion: HloInstruction) -> list[Shape]:
    return [s for _, s in fusion.shape.leaf_shapes()]


def run_on_host(fusion: HloInstruction, args: list[np.ndarray], kernel: Kernel | None = None,
                threads: int = 1, argument_ids: list | None = None) -> list[np.ndarray]:
    """Emit (unless given), lower, JIT and run the fusion; its outputs as logical arrays.

    With `argument_ids`, arguments with equal ids share one buffer (the operand's data)."""
    kernel = kernel or emit_kernel(fusion, argument_ids=argument_ids)
    compiled = load_host_kernel(lower_to_host(kernel), kernel.name)
    shapes = output_shapes(fusion)
    ids = list(argument_ids) if argument_ids is not None else list(range(len(args) + len(shapes)))
    buffers = [to_buffer(a, op.shape) for a, op in zip(args, fusion.operands)]
    buffers += [np.zeros_like(to_buffer(np.zeros(s.dims, s.element_type.np_dtype), s)) for s in shapes]
    by_id: dict = {}
    for b, i in zip(buffers, ids):
        by_id.setdefault(i, b)
    order = list(dict.fromkeys(ids))
    assert len(order) == len(kernel.params)
    compiled([by_id[i] for i in order], kernel.num_blocks, threads)
    return [from_buffer(by_id[i], s) for i, s in zip(ids[len(args):], shapes)]


def reference(fusion: HloInstruction, args: list[np.ndarray]) -> list[np.ndarray]:
    """The interpreter's outputs, tuple leaves flattened in order."""
    def leaves(v):
        return [x for item in v for x in leaves(item)] if isinstance(v, tuple) else [np.asarray(v)]

    return leaves(Evaluator().call_fusion(fusion, args))


def assert_close(got: np.ndarray, want: np.ndarray, shape: Shape, tol: float | None = None,
                 what: str = "") -> None:
    et = shape.element_type
    assert got.shape == want.shape, what
    if not (et.is_float or et.is_complex):
        bad = np.nonzero(got.reshape(-1) != want.reshape(-1))[0]
        assert bad.size == 0, f"{what}: {bad.size} of {got.size} differ, first at {bad[:5]}: " \
                              f"{got.reshape(-1)[bad[:5]]} vs {want.reshape(-1)[bad[:5]]}"
        return
    tol = tol if tol is not None else TOLERANCE.get(et.name, 2e-2)
    g = got.astype(np.complex128 if et.is_complex else np.float64).reshape(-1)
    w = want.astype(np.complex128 if et.is_complex else np.float64).reshape(-1)
    both_nan = np.isnan(g) & np.isnan(w)
    same = (g == w) | both_nan
    with np.errstate(invalid="ignore"):
        err = np.abs(g - w)
        bad = ~same & ~((err <= tol) | (err <= tol * np.abs(w)))
    idx = np.nonzero(bad)[0]
    first = idx[:5]
    assert idx.size == 0, f"{what}: {idx.size} of {g.size} differ, first at {first}: {g[first]} vs {w[first]}"


def check_fusion(text_or_fusion, args: list[np.ndarray] | None = None, seed: int = 0,
                 tol: float | None = None, round_trip: bool = True) -> Kernel:
    """Emit the fusion, check the kernel text round-trips, run it and compare with the interpreter."""
    fusion = fusion_of(text_or_fusion) if isinstance(text_or_fusion, str) else text_or_fusion
    kernel = emit_kernel(fusion)
    if round_trip:
        text = print_kernel(kernel)
        assert print_kernel(parse_kernel(text)) == text
    args = args if args is not None else random_args(fusion, seed)
    got = run_on_host(fusion, args, kernel)
    want = reference(fusion, args)
    for k, (g, w, s) in enumerate(zip(got, want, output_shapes(fusion))):
        assert_close(g, w, s, tol, f"output {k} of %{fusion.name}")
    return kernel


# The seed's GELU example (a kLoop fusion of a bf16 tensor of shape `dims`).
GELU = """
gelu {
  %param = bf16[{dims}] parameter(0)
  %constant_0 = bf16[] constant(0.5)
  %bcast_0 = bf16[{dims}] broadcast(bf16[] %constant_0), dimensions={}
  %constant_1 = bf16[] constant(1)
  %bcast_1 = bf16[{dims}] broadcast(bf16[] %constant_1), dimensions={}
  %constant_2 = bf16[] constant(0.79785)
  %bcast_2 = bf16[{dims}] broadcast(bf16[] %constant_2), dimensions={}
  %constant_3 = bf16[] constant(0.044708)
  %bcast_3 = bf16[{dims}] broadcast(bf16[] %constant_3), dimensions={}
  %square = bf16[{dims}] multiply(%param, %param)
  %cube = bf16[{dims}] multiply(%square, %param)
  %multiply_3 = bf16[{dims}] multiply(%cube, %bcast_3)
  %add_1 = bf16[{dims}] add(%param, %multiply_3)
  %multiply_2 = bf16[{dims}] multiply(%add_1, %bcast_2)
  %tanh_0 = bf16[{dims}] tanh(%multiply_2)
  %add_0 = bf16[{dims}] add(%tanh_0, %bcast_1)
  %multiply_1 = bf16[{dims}] multiply(%add_0, %bcast_0)
  ROOT %multiply_0 = bf16[{dims}] multiply(%param, %multiply_1)
}
ENTRY main {
  %param = bf16[{dims}] parameter(0)
  ROOT fusion = bf16[{dims}] fusion(%param), kind=kLoop, calls=gelu
}
"""


def gelu(dims: str) -> str:
    return GELU.replace("{dims}", dims)


# -- cases shared by the elemental tests and the PTX tests --
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-30, 3.0e38, 100.0]


def tuple_fusion(params: list[str], ops: list[tuple[str, str]]) -> str:
    """A fusion computation with parameters `params` (types) and a tuple of `ops` (shape, expr)."""
    lines = [f"  p{i} = {t} parameter({i})" for i, t in enumerate(params)]
    names = []
    for k, (shape, expr) in enumerate(ops):
        lines.append(f"  r{k} = {shape} {expr}")
        names.append(f"r{k}")
    shapes = ", ".join(s for s, _ in ops)
    lines.append(f"  ROOT t = ({shapes}) tuple({', '.join(names)})")
    return "f {\n" + "\n".join(lines) + "\n}\n"


def int_array(dtype, values) -> np.ndarray:
    return np.array(values, dtype=np.int64).astype(dtype)
