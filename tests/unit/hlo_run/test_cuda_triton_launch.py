"""hlo-run's cuda backend with a Triton GEMM kernel, without a GPU: the device's own
`load_kernel` links the kernel's PTX for sm_90a with nvJitLink (the `a` target wgmma needs) and
`launch` passes one pointer per buffer argument and a null pointer per Triton scratch parameter,
on the thunk's grid and block with Triton's shared memory, to a stand-in of the CUDA driver that
records what it is given. On a GPU (`gpu` mark) XLA's own GEMM modules run on the cuda platform
and match the interpreter."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_codegen.triton_gemm.compile import triton_available
from hlo_common.hlo.parser import parse_module
from hlo_common.manifest.thunks import KernelThunk, walk

TRITON = Path(__file__).resolve().parents[3] / "testdata" / "triton"
pytestmark = pytest.mark.skipif(not triton_available(), reason="the Triton GEMM emitter needs .[triton]")


class _Driver:
    """The few driver calls load_kernel and launch make, recorded."""

    class CUfunction_attribute:
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

    def __init__(self, count: int):
        self.count, self.loaded, self.launches = count, [], []

    def cuModuleLoadData(self, image):
        self.loaded.append(bytes(image))
        return 0, "module"

    def cuModuleGetFunction(self, module, name):
        return 0, name

    def cuFuncSetAttribute(self, function, attr, value):
        return (0,)

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        slots = (ctypes.c_void_p * self.count).from_address(params)
        values = [ctypes.c_void_p.from_address(a).value for a in slots]
        self.launches.append((function, (gx, gy, gz), (bx, by, bz), shared, values))
        return (0,)


def test_the_cuda_backend_links_and_launches_a_triton_kernel():
    pytest.importorskip("cuda.bindings.nvjitlink")
    from hlo_run.backends.cuda import CudaDevice

    module = parse_module((TRITON / "mlp_bf16.xla_gpu.hlo").read_text(), "mlp")
    manifest = compile_module(module, CompileOptions(target="cuda", arch="sm_90", jobs=1)).manifest
    thunk = next(t for t in walk(manifest.thunks) if isinstance(t, KernelThunk)
                 and manifest.kernels[t.kernel].num_warps is not None)
    kernel = manifest.kernels[thunk.kernel]
    device = CudaDevice.__new__(CudaDevice)
    device.driver, device.cc, device.stream, device.modules = _Driver(kernel.num_params + 2), (9, 0), 0, []
    handle = device.load_kernel(kernel)
    assert device.driver.loaded[0][:4] == b"\x7fELF"  # nvJitLink's cubin of the PTX for sm_90a
    pointers = [0x1000 * (i + 1) for i in range(len(thunk.args))]
    device.launch(handle, thunk, pointers)
    (function, grid, block, shared, values), = device.driver.launches
    assert function == kernel.name.encode() and grid == thunk.grid == kernel.grid
    assert block == (32 * kernel.num_warps, 1, 1) and shared == kernel.shared_bytes > 0
    assert values == pointers + [None, None]  # Triton's global and profile scratch: null
