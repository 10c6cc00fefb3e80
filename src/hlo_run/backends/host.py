"""The host platform: a manifest compiled with `--target host`, run on the CPU.

Where it sits: behind `hlo-run --platform host`. Device memory is numpy byte buffers (aligned to
the allocation's alignment); kernels are the manifest's LLVM IR, JIT-compiled by
`hlo_run.host_kernel` and run block by block; GemmThunks use `hlo_run.host_gemm` (the
interpreter's dot semantics), ConvolutionThunks `hlo_run.host_conv` (its convolution's), both
computing with the host's own f32 GEMM and convolution (`hlo_run.host_blas`); copies and
memsets are `ctypes.memmove` / numpy fills. A module on several devices runs one MPI rank per
device (`hlo_run.mpi_launch`, `hlo_run.mpi_runtime`). A program
given as HLO text is compiled first by `hlo-codegen --target host` (`hlo_run.compile_hook`).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from hlo_common.manifest.layout_bytes import array_over, write_array_into
from hlo_common.manifest.manifest import ManifestKernel, Manifest
from hlo_common.manifest.thunks import ConvolutionThunk, GemmFusionThunk, GemmThunk, KernelThunk
from hlo_run.backends import Backend, Executable, Program
from hlo_run.compile_hook import manifest_for
from hlo_run.manifest_runtime import Device, ManifestExecutable


def _view(address: int, size: int) -> np.ndarray:
    """A writable uint8 view of `size` bytes of host memory at `address`."""
    if size == 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))


GUARD_BYTES = 256
GUARD_PATTERN = 0xA5
_EMPTY = np.zeros(1, np.uint8)  # stands for a zero-sized argument (the kernel never touches it)


class HostDevice(Device):
    name = "host"
    borrows_arguments = True  # read-only arguments are used in place (hlo_run.argument_borrowing)

    def __init__(self, guard_bytes: int = GUARD_BYTES):
        self.guard_bytes = guard_bytes
        self.guards: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # address -> (before, after)
        self.launch_bytes: dict[str, int] = {}  # kernel -> bytes of its largest launch's arguments

    def prepare(self, manifest: Manifest) -> None:
        """Note each kernel's largest launch (argument bytes): it picks the JIT's optimization level."""
        from hlo_common.manifest.thunks import walk

        for t in walk(manifest.thunks):
            if isinstance(t, KernelThunk):
                nbytes = sum(a.slice.size for a in t.args)
                self.launch_bytes[t.kernel] = max(nbytes, self.launch_bytes.get(t.kernel, 0))

    def allocate(self, size: int, alignment: int) -> np.ndarray:
        """Aligned memory with `guard_bytes` of a known pattern on both sides, so that a kernel
        writing past its buffers is caught (`check_guards`) instead of corrupting the heap."""
        g = self.guard_bytes
        raw = np.empty(size + alignment + 2 * g, dtype=np.uint8)
        start = g + (-(raw.ctypes.data + g)) % alignment
        buffer = raw[start:start + max(size, 1)]  # the view keeps `raw` alive
        if g:
            before, after = raw[start - g:start], raw[start + max(size, 1):start + max(size, 1) + g]
            before[:] = GUARD_PATTERN
            after[:] = GUARD_PATTERN
            self.guards[buffer.ctypes.data] = (before, after)
        return buffer

    def running(self):
        """numpy's BLAS on one thread for the whole run (as the interpreter's handlers, the GEMM
        fusions' prologues and host GEMMs want it), set once: each of them setting it again found it
        set, where each set OpenBLAS's thread count and back (2-40 us a GEMM fusion)."""
        from hlo_common.interpreter import blas

        return blas.single_threaded()

    def release(self, buffer: np.ndarray) -> None:
        self.guards.pop(buffer.ctypes.data, None)

    def check_guards(self, addresses) -> str | None:
        """A description of the first damaged guard among these buffer addresses, or None."""
        for address in addresses:
            guard = self.guards.get(address)
            if guard is None:
                continue
            for where, zone in zip(("before", "after"), guard):
                if (zone != GUARD_PATTERN).any():
                    return f"wrote outside its buffers ({where} the buffer at 0x{address:x})"
        return None

    def address(self, buffer: np.ndarray) -> int:
        return buffer.ctypes.data

    def write(self, buffer: np.ndarray, offset: int, data: bytes) -> None:
        buffer[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)

    def read(self, buffer: np.ndarray, offset: int, size: int) -> bytes:
        return buffer[offset:offset + size].tobytes()

    def write_array(self, buffer: np.ndarray, value, shape) -> None:
        write_array_into(buffer, value, shape)  # one copy: no bytes object in between

    def read_array(self, buffer: np.ndarray, offset: int, size: int, shape, own: bool) -> np.ndarray:
        """A view of the run's buffer where the layout allows (each run allocates afresh, so the
        result keeps its memory), else a copy."""
        out = array_over(buffer[offset:offset + size], shape)
        return out.copy() if own and out.base is not None else out

    def load_kernel(self, kernel: ManifestKernel) -> Any:
        from hlo_run.host_kernel import load_host_kernel, opt_level_for

        level = opt_level_for(self.launch_bytes.get(kernel.name))  # small kernels JIT at level 0, faster
        return load_host_kernel(kernel.llvm_ir, kernel.name, level)

    def launch(self, handle: Any, thunk: KernelThunk, pointers: list[int]) -> None:
        blocks = _volume(thunk.grid)
        empty = _EMPTY.ctypes.data
        handle.launch([p if a.slice.size else empty for p, a in zip(pointers, thunk.args)], blocks,
                      nbytes=sum(a.slice.size for a in thunk.args))

    def gemm(self, thunk: GemmThunk, pointers: dict[str, int]) -> None:
        from hlo_run.host_gemm import run_gemm

        cfg = thunk.config
        shapes = _gemm_shapes(cfg, thunk.bias.size if thunk.bias else 0)
        sizes = {"lhs": thunk.lhs.size, "rhs": thunk.rhs.size, "c": thunk.c and thunk.c.size,
                 "bias": thunk.bias and thunk.bias.size}
        values = {role: array_over(_view(pointers[role], sizes[role]), shapes[role])
                  for role in ("lhs", "rhs", "c", "bias") if role in pointers}
        out_bytes = _view(pointers["output"], thunk.output.size)
        target = array_over(out_bytes, shapes["output"])  # a view of the buffer where the layout allows
        from hlo_common.interpreter import blas

        with blas.single_threaded():  # as the interpreter: spinning BLAS threads on busy cores cost 10x
            out = run_gemm(cfg, shapes["output"], values["lhs"], values["rhs"], values.get("c"),
                           values.get("bias"), out=target if target.base is not None else None)
        if out is not target:
            write_array_into(out_bytes, out, shapes["output"])

    def convolution(self, thunk: ConvolutionThunk, pointers: dict[str, int]) -> None:
        from hlo_run.host_conv import run_convolution

        cfg = thunk.config
        lhs = array_over(_view(pointers["input"], thunk.input.size), _shape(cfg.input_shape))
        rhs = array_over(_view(pointers["filter"], thunk.filter.size), _shape(cfg.filter_shape))
        run_convolution(cfg, _shape(cfg.output_shape), lhs, rhs, _view(pointers["output"], thunk.output.size),
                        thunk.profile_annotation)

    def gemm_fusion(self, thunk: GemmFusionThunk, operands: list[int], output: int) -> None:
        from hlo_run.host_gemm_fusion import run_gemm_fusion

        values = [array_over(_view(p, s.size), _shape(t))
                  for p, s, t in zip(operands, thunk.operands, thunk.operand_shapes)]
        out_shape = _shape(thunk.output_shape)
        out_bytes = _view(output, thunk.output.size)
        target = array_over(out_bytes, out_shape)  # a view of the buffer where the layout allows
        out = run_gemm_fusion(thunk.computation, thunk.profile_annotation, values,
                              out=target if target.base is not None else None)
        if out is not target:
            write_array_into(out_bytes, out, out_shape)

    def copy(self, dst: int, src: int, size: int) -> None:
        ctypes.memmove(dst, src, size)

    def memset32(self, dst: int, size: int, value: int) -> None:
        if value == 0:
            ctypes.memset(dst, 0, size)
            return
        pattern = np.full(size // 4, value, dtype="<u4")
        ctypes.memmove(dst, pattern.ctypes.data, size)


def _volume(dims) -> int:
    return dims[0] * dims[1] * dims[2]


_SHAPE_CACHE: dict[str, Any] = {}


def _shape(text: str):
    """A manifest shape text, parsed once."""
    from hlo_common.manifest.manifest import parse_shape_text

    s = _SHAPE_CACHE.get(text)
    if s is None:
        s = _SHAPE_CACHE[text] = parse_shape_text(text, "thunk")
    return s


def _gemm_shapes(cfg, bias_bytes: int = 0) -> dict[str, Any]:
    """The shapes the host reads a GemmThunk's buffers with; the bias is a flat vector in memory
    order (its buffer's element count), which `run_gemm` adds along the output's minor elements."""
    shape = _shape
    out = shape(cfg.output_shape)
    bias = out.with_dims((bias_bytes // max(1, out.element_type.byte_size),)) if out.is_array else out
    return {"lhs": shape(cfg.lhs_shape), "rhs": shape(cfg.rhs_shape), "output": out, "c": out, "bias": bias}


class HostBackend(Backend):
    name = "host"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        import importlib.util

        if importlib.util.find_spec("llvmlite") is None:
            return "it needs llvmlite to JIT-compile kernels (pip install llvmlite)"
        return None

    def load(self, program: Program) -> Executable:
        if program.on_ranks:  # one MPI rank per device (hlo_run.mpi_launch)
            from hlo_run.mpi_launch import host_executable

            return host_executable(program)
        manifest = manifest_for(program, "host")
        return ManifestExecutable(manifest, HostDevice(), program.name)

