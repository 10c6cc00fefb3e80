"""Shared helpers of the thunk / manifest / hlo-codegen CLI / hlo-run manifest tests.

`FakeKernelBackend` stands in for the emitters where a test is about thunks, not kernels: it
records each fusion it is asked for and returns one kernel taking every argument, with
placeholder code for both targets.
"""

from __future__ import annotations

from hlo_common.manifest import Kernel
from hlo_common.parser import parse_module
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_codegen.thunk_emitter import CompiledKernel


class FakeKernelBackend:
    def __init__(self):
        self.calls = []

    def compile(self, fusion, name, args):
        self.calls.append((fusion.name, name, list(args)))
        kernel = Kernel(name, (1, 1, 1), (128, 1, 1), 0, len(args), ptx=f"// {name}\n", llvm_ir=f"; {name}\n")
        return [CompiledKernel(kernel, tuple(range(len(args))), {"kernel_ir.txt": f"kernel {name}\n"})]


def compile_text(text: str, target: str = "host", backend=None):
    """Parse and compile `text` with the fake kernel backend (or `backend`)."""
    backend = backend if backend is not None else FakeKernelBackend()
    return compile_module(parse_module(text), CompileOptions(target=target), backend), backend
