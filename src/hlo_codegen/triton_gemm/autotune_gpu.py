"""`hlo-codegen --autotune FILE`: the tile config of every GEMM fusion timed on the GPU, as XLA's
GemmFusionAutotuner does (`xla/service/gpu/autotuning/gemm_fusion_autotuner.cc`): each candidate
config the device can run is compiled with Triton, launched on the fusion's buffers and timed
with CUDA events; the fastest becomes the fusion's config, and all of them are written to FILE
as XLA's AutotuneResults text proto, which `--xla_gpu_load_autotune_results_from` reads back on
a machine without a GPU.

Where it sits: hlo-codegen's CLI, before the compile. It needs a GPU and the `gpu` extra
(cuda-bindings): without them it is a one-line error saying so. Only runnable with a GPU: this
project's checks run without one, so this file is not exercised by its tests beyond that error.
cuBLAS is not among the candidates here (XLA also times cuBLAS and keeps a cuBLAS call when it
wins); split-k candidates are hlo-opt's to make (they rewrite the fusion).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from hlo_common.errors import HloError
from hlo_common.gpu.device import device_for_arch
from hlo_common.hlo.ir import HloModule

# (block_m, block_n, block_k, num_stages, num_warps): a part of XLA's search space for Hopper
CANDIDATES = [(16, 16, 64, 1, 2), (32, 32, 32, 3, 4), (64, 32, 32, 3, 4), (64, 64, 32, 3, 4),
              (64, 64, 64, 3, 4), (128, 64, 32, 3, 4), (64, 128, 32, 3, 4), (128, 128, 32, 3, 8),
              (128, 128, 64, 3, 8), (128, 256, 64, 3, 8), (256, 128, 64, 3, 8)]
REPEATS = 10


def gpu_unavailable() -> str | None:
    try:
        from cuda.bindings import driver
    except ImportError:
        return "the `gpu` extra (cuda-bindings) is not installed"
    try:
        if int(driver.cuInit(0)[0]) != 0 or driver.cuDeviceGetCount()[1] == 0:
            return "no CUDA device found"
    except Exception:  # noqa: BLE001 - no driver library
        return "no NVIDIA driver found"
    return None


def _check(result, what: str):
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise HloError(f"--autotune: {what} failed ({err})")
    return values[0] if len(values) == 1 else tuple(values)


class _Gpu:
    """The primary context of device 0, device buffers and timed launches."""

    def __init__(self) -> None:
        from cuda.bindings import driver

        self.d = driver
        self.device = _check(driver.cuDeviceGet(0), "cuDeviceGet")
        _check(driver.cuCtxSetCurrent(_check(driver.cuDevicePrimaryCtxRetain(self.device), "ctx")), "ctx")
        self.stream = driver.CUstream(0)

    def buffer(self, size: int) -> int:
        ptr = _check(self.d.cuMemAlloc(max(size, 1)), "cuMemAlloc")
        _check(self.d.cuMemsetD8(ptr, 0, max(size, 1)), "cuMemsetD8")
        return int(ptr)

    def seconds(self, kernel, pointers: list[int]) -> float:
        d = self.d
        module = _check(d.cuModuleLoadData(kernel.cubin), f"cuModuleLoadData({kernel.name})")
        function = _check(d.cuModuleGetFunction(module, kernel.name.encode()), "cuModuleGetFunction")
        if kernel.shared_bytes > 48 * 1024:
            attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            _check(d.cuFuncSetAttribute(function, attr, kernel.shared_bytes), "cuFuncSetAttribute")
        values = [ctypes.c_void_p(p) for p in pointers] + [ctypes.c_void_p(0)] * kernel.scratch_params
        params = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
        block = (32 * kernel.num_warps, 1, 1)

        def launch() -> None:
            _check(d.cuLaunchKernel(function, *kernel.grid, *block, kernel.shared_bytes, self.stream,
                                    ctypes.addressof(params), 0), f"cuLaunchKernel({kernel.name})")

        launch()  # warm-up
        start, end = (_check(d.cuEventCreate(0), "cuEventCreate") for _ in range(2))
        _check(d.cuEventRecord(start, self.stream), "cuEventRecord")
        for _ in range(REPEATS):
            launch()
        _check(d.cuEventRecord(end, self.stream), "cuEventRecord")
        _check(d.cuEventSynchronize(end), "cuEventSynchronize")
        ms = _check(d.cuEventElapsedTime(start, end), "cuEventElapsedTime")
        _check(d.cuModuleUnload(module), "cuModuleUnload")
        return ms / 1e3 / REPEATS


def _tune(gpu: _Gpu, fusion, arch: str, device) -> tuple[dict, float] | None:
    from hlo_codegen.triton_gemm.compile import compile_kernels
    from hlo_codegen.triton_gemm.config import check_config
    from hlo_codegen.triton_gemm.program import Unsupported
    from hlo_codegen.triton_gemm.source import kernel_source

    configs, sources = [], []
    for bm, bn, bk, stages, warps in CANDIDATES:
        config = {"block_m": bm, "block_n": bn, "block_k": bk, "split_k": 1, "num_stages": stages,
                  "num_warps": warps}
        try:
            check_config(fusion, config, device)
            sources.append(kernel_source(fusion, config, f"candidate_{len(sources)}"))
        except (HloError, Unsupported):
            continue
        configs.append(config)
    if not sources:
        return None
    pointers = [gpu.buffer(o.shape.byte_size()) for o in (*fusion.operands, fusion)]
    times = [gpu.seconds(k, pointers) for k in compile_kernels(sources, arch)]
    for p in pointers:
        gpu.d.cuMemFree(p)
    best = min(range(len(times)), key=times.__getitem__)
    return configs[best], times[best]


def autotune_module(module: HloModule, arch: str, out_path: str) -> None:
    """Time the candidates of every GEMM fusion, apply the fastest, write the results file."""
    from hlo_codegen.triton_gemm.autotune import canonical_text, format_entry, set_config
    from hlo_common.passes._support import global_computations
    from hlo_common.passes.triton_gemm_fallback import is_triton_gemm_fusion

    reason = gpu_unavailable()
    if reason is not None:
        raise HloError(f"--autotune times tile configs on a GPU, and this machine has none usable: "
                       f"{reason} (compile with the default configs, or "
                       "--xla_gpu_load_autotune_results_from FILE)")
    device, gpu, entries = device_for_arch(arch), _Gpu(), []
    cc = arch.removeprefix("sm_").rstrip("af")
    for comp in global_computations(module):
        for fusion in [i for i in comp.instructions if is_triton_gemm_fusion(i)]:
            found = _tune(gpu, fusion, arch, device)
            if found is None:
                continue
            config, seconds = found
            set_config(fusion, config)
            hlo = canonical_text(fusion.fused_computation())
            entries.append(format_entry(f"CUDA: {cc[:-1]}.{cc[-1]}", hlo, config, seconds))
    tmp = Path(f"{out_path}.{os.getpid()}.tmp")
    tmp.write_text("version: 3\n" + "".join(entries))
    os.replace(tmp, out_path)  # whole or not at all


__all__ = ["CANDIDATES", "autotune_module", "gpu_unavailable"]
