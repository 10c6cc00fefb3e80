"""Helpers of the hero-emitter tests (reduction, scatter, sort, windows, linalg, DUS, ...).

Built on the elemental harness (`elemental_harness`: kernel-ABI buffers, the host run, the
interpreter reference, run_hlo_module's comparison). Additions:

- `index_aware_args`: random inputs whose integers mostly land inside the fusion's dimensions
  (a few just outside), so gathers, scatters and dynamic slices hit real positions, both in and
  out of bounds, and duplicates happen;
- `check`: emit (optionally with `argument_ids`, i.e. aliased buffers), round-trip the kernel
  text, run on the host, compare with the interpreter, and link the PTX for sm_90 when
  cuda.bindings (nvJitLink) is importable.
"""

from __future__ import annotations

import functools

import numpy as np

from elemental_harness import (  # noqa: F401  (re-exported for the tests)
    assert_close, fusion_of, output_shapes, reference, run_on_host,
)
from hlo_codegen.emitters import emit_kernel, emitter_kind
from hlo_codegen.kernel_ir import Kernel, parse_kernel, print_kernel
from hlo_common.hlo.ir import HloInstruction


def entry_arguments(module, seed: int = 0, int_range: tuple[int, int] = (-100, 100)) -> list[np.ndarray]:
    """Arguments for a module's entry: standard normal floats, integers uniform in `int_range`."""
    rng = np.random.default_rng(seed)
    out = []
    for p in module.entry.parameters:
        s = p.shape
        if s.element_type.is_float:
            out.append(rng.standard_normal(s.dims).astype(s.element_type.np_dtype))
        else:
            out.append(rng.integers(*int_range, s.dims).astype(s.element_type.np_dtype))
    return out


def index_aware_args(fusion: HloInstruction, seed: int = 0) -> list[np.ndarray]:
    """Random operands: floats ~N(0,1), integers in [-2, largest dimension + 2] (clipped to the type)."""
    rng = np.random.default_rng(seed)
    shapes = [op.shape for op in fusion.operands] + output_shapes(fusion)
    hi = max([d for s in shapes if s.is_array for d in s.dims] + [4])
    out = []
    for op in fusion.operands:
        s = op.shape
        et = s.element_type
        if et.is_float:
            a = rng.standard_normal(s.dims)
        elif et.is_complex:
            a = rng.standard_normal(s.dims) + 1j * rng.standard_normal(s.dims)
        elif et.is_pred:
            a = rng.integers(0, 2, s.dims)
        else:
            lo_type = -(1 << (et.bits - 1)) if et.kind == "signed" else 0
            hi_type = (1 << (et.bits - 1)) - 1 if et.kind == "signed" else (1 << et.bits) - 1
            a = rng.integers(max(-2, lo_type), min(hi + 2, hi_type) + 1, s.dims)
        out.append(np.asarray(a).astype(et.np_dtype))
    return out


def distinct_indices(scatter: HloInstruction, indices: np.ndarray, seed: int = 1) -> np.ndarray:
    """Start indices for a `unique_indices=true` scatter that keep its promise: distinct values
    spaced by the largest update window extent, so no two windows touch the same element (a few
    land out of bounds, below zero)."""
    updates = scatter.operands[(len(scatter.operands) + 1) // 2].shape
    window = [updates.dims[d] for d in scatter.attrs.get("update_window_dims") or ()]
    spacing = max(window + [1])
    perm = np.random.default_rng(seed).permutation(indices.size) * spacing - spacing
    return perm.reshape(indices.shape).astype(indices.dtype)


@functools.lru_cache(maxsize=None)
def nvjitlink_available() -> bool:
    try:
        import cuda.bindings.nvjitlink  # noqa: F401
    except ImportError:
        return False
    return True


def link_ptx(kernel: Kernel, arch: str = "sm_90") -> str:
    """Lower to NVPTX, compile to PTX and link a cubin with nvJitLink (the check raises on errors)."""
    from hlo_codegen.llvm import lower_to_nvptx
    from hlo_codegen.ptx import compile_to_ptx, ptx_to_cubin

    ptx = compile_to_ptx(lower_to_nvptx(kernel), arch)
    ptx_to_cubin(ptx, arch)
    return ptx


def check(text_or_fusion, kind: str | None = None, args: list[np.ndarray] | None = None, seed: int = 0,
          argument_ids: list | None = None, tol: float | None = None, ptx: bool = True) -> Kernel:
    """Emit, round-trip, run on the host and compare with the interpreter; link the PTX."""
    fusion = fusion_of(text_or_fusion) if isinstance(text_or_fusion, str) else text_or_fusion
    if kind is not None:
        assert emitter_kind(fusion)[0] == kind
    kernel = emit_kernel(fusion, argument_ids=argument_ids)
    text = print_kernel(kernel)
    assert print_kernel(parse_kernel(text)) == text
    args = args if args is not None else index_aware_args(fusion, seed)
    want = reference(fusion, args)
    got = run_on_host(fusion, [a.copy() for a in args], kernel, argument_ids=argument_ids)
    for k, (g, w, s) in enumerate(zip(got, want, output_shapes(fusion))):
        assert_close(g, w, s, tol, f"output {k} of %{fusion.name}")
    if ptx and nvjitlink_available():
        link_ptx(kernel)
    return kernel


class CudaRunner:
    """Runs kernels on a real GPU through hlo-run's CudaDevice (kernel-ABI buffers, as the host)."""

    def __init__(self):
        from hlo_run.backends.cuda import CudaDevice

        self.device = CudaDevice()

    def run(self, fusion: HloInstruction, args: list[np.ndarray], kernel: Kernel,
            argument_ids: list | None = None) -> list[np.ndarray]:
        from types import SimpleNamespace

        from elemental_harness import from_buffer, to_buffer
        from hlo_common.manifest.manifest import ManifestKernel

        ptx = link_ptx(kernel, f"sm_{self.device.cc[0]}{self.device.cc[1]}")
        record = ManifestKernel(kernel.name, tuple(kernel.grid), tuple(kernel.block),
                                kernel.shared_memory_bytes, len(kernel.params), ptx=ptx)
        handle = self.device.load_kernel(record)
        shapes = output_shapes(fusion)
        ids = list(argument_ids) if argument_ids is not None else list(range(len(args) + len(shapes)))
        host = [to_buffer(a, op.shape) for a, op in zip(args, fusion.operands)]
        host += [np.zeros_like(to_buffer(np.zeros(s.dims, s.element_type.np_dtype), s)) for s in shapes]
        by_id: dict = {}
        for buf, i in zip(host, ids):
            by_id.setdefault(i, buf)
        order = list(dict.fromkeys(ids))
        device = {i: self.device.allocate(by_id[i].nbytes, 256) for i in order}
        try:
            for i in order:
                if by_id[i].nbytes:
                    self.device.write(device[i], 0, by_id[i].tobytes())
            thunk = SimpleNamespace(kernel=kernel.name, grid=tuple(kernel.grid), block=tuple(kernel.block))
            self.device.launch(handle, thunk, [self.device.address(device[i]) for i in order])
            self.device.synchronize()
            out = []
            for i, s in zip(ids[len(args):], shapes):
                data = self.device.read(device[i], 0, by_id[i].nbytes) if by_id[i].nbytes else b""
                out.append(from_buffer(np.frombuffer(data, by_id[i].dtype).copy(), s))
            return out
        finally:
            for buf in device.values():
                self.device.release(buf)
