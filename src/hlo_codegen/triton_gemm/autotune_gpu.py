"""The timer of `hlo-codegen --autotune` on the cuda platform (`autotuner.Timer`), as XLA's
GemmFusionAutotuner profiles candidates (`xla/service/gpu/autotuning/gemm_fusion_autotuner.cc`):
each Triton candidate is compiled, launched on the fusion's buffers and timed with CUDA events;
the cuBLAS candidate is the fusion dissolved (dot as a cuBLAS GemmThunk, the rest as kernels),
compiled by hlo-codegen and run by `hlo-run --platform cuda`, whose per-thunk profile is summed.

Where it sits: hlo-codegen, under `autotuner.autotune_module`. It needs a GPU and the `gpu` extra
(cuda-bindings): without them `GpuTimer()` is a one-line error saying so. Only runnable with a
GPU: this project's checks run without one, so beyond that error this file is exercised on a GPU
only (the search around it is tested with a timer of the tests' own). Split-k candidates are
hlo-opt's to make (they rewrite the fusion).
"""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloInstruction

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


class GpuTimer:
    """`autotuner.Timer` on device 0: Triton candidates with CUDA events, cuBLAS through hlo-run."""

    def __init__(self) -> None:
        reason = gpu_unavailable()
        if reason is not None:
            raise HloError(f"--autotune times tile configs on a GPU, and this machine has none usable: "
                           f"{reason} (compile with the default configs, or "
                           "--xla_gpu_load_autotune_results_from FILE)")
        self.gpu = _Gpu()

    def device_key(self, arch: str) -> str:
        """XLA's cache-key string of this GPU (`autotune.xla_device_key`), from the driver's
        attributes as XLA's CUDA executor reads them: clock in kHz, memory bandwidth as twice the
        memory clock times the bus width; the cuDNN version where its library loads."""
        from dataclasses import replace

        from hlo_common.gpu.device import device_for_arch

        from hlo_codegen.triton_gemm.autotune import DNN_VERSION, xla_device_key

        d, attr = self.gpu.d, self.gpu.d.CUdevice_attribute

        def get(name: str) -> int:
            return int(_check(d.cuDeviceGetAttribute(getattr(attr, f"CU_DEVICE_ATTRIBUTE_{name}"),
                                                     self.gpu.device), name))

        bandwidth = 2 * get("MEMORY_CLOCK_RATE") * 1e3 * get("GLOBAL_MEMORY_BUS_WIDTH") / 8
        device = replace(device_for_arch(arch), core_count=get("MULTIPROCESSOR_COUNT"),
                         clock_rate_ghz=get("CLOCK_RATE") / 1e6, l2_cache_size=get("L2_CACHE_SIZE"),
                         memory_bandwidth=bandwidth,
                         compute_capability_major=get("COMPUTE_CAPABILITY_MAJOR"),
                         compute_capability_minor=get("COMPUTE_CAPABILITY_MINOR"))
        return xla_device_key(device, _cudnn_version() or DNN_VERSION)

    def seconds(self, fusion: HloInstruction, candidates: list, arch: str) -> list[float]:
        from hlo_codegen.triton_gemm.autotune import CUBLAS
        from hlo_codegen.triton_gemm.compile import compile_kernels
        from hlo_codegen.triton_gemm.source import kernel_source

        configs = [c for c in candidates if c != CUBLAS]
        sources = [kernel_source(fusion, c, f"candidate_{k}") for k, c in enumerate(configs)]
        pointers = [self.gpu.buffer(o.shape.byte_size()) for o in (*fusion.operands, fusion)]
        try:
            timed = iter([self.gpu.seconds(k, pointers) for k in compile_kernels(sources, arch)])
        finally:
            for p in pointers:
                self.gpu.d.cuMemFree(p)
        return [cublas_seconds(fusion, arch) if c == CUBLAS else next(timed) for c in candidates]


def _cudnn_version() -> str | None:
    """cuDNN's version as XLA prints it (9.8.0), when its library loads."""
    for name in ("libcudnn.so.9", "libcudnn.so"):
        try:
            version = int(ctypes.CDLL(name).cudnnGetVersion())
        except (OSError, AttributeError):
            continue
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return None


def fusion_module_text(fusion: HloInstruction) -> str:
    """The fused computation as a module of its own (XLA's ExtractComputationIntoNewModule)."""
    from hlo_common.hlo.printer import print_computation

    body = fusion.fused_computation()
    called, todo = [], list(body.instructions)
    while todo:
        for comp in todo.pop().called_computations():
            if comp not in called:
                called.append(comp)
                todo.extend(comp.instructions)
    texts = [print_computation(c, False) for c in reversed(called)]
    texts.append(f"ENTRY {print_computation(body, False)}")
    return "HloModule gemm_fusion_cublas\n\n" + "\n\n".join(texts) + "\n"


def cublas_seconds(fusion: HloInstruction, arch: str) -> float:
    """The fusion's computation with its dot on cuBLAS, as XLA's CublasGemmAutotuneExtractor
    makes it (hlo-opt with Triton GEMMs off: the GEMM rewrite and fusion), compiled and run
    REPEATS times by hlo-run on the GPU: the sum of its thunks' times in the last run."""
    with tempfile.TemporaryDirectory() as tmp:
        hlo, opt, manifest = (Path(tmp) / name for name in ("fusion.hlo", "opt.hlo", "fusion.json"))
        hlo.write_text(fusion_module_text(fusion))
        steps = [["hlo_opt.cli", "--xla_gpu_enable_triton_gemm", "false", "-o", str(opt), str(hlo)],
                 ["hlo_codegen.cli", "--no-cache", "--arch", arch, "-o", str(manifest), str(opt)],
                 ["hlo_run.cli", "--platform", "cuda", "--reference-platform", "none", "--iterations",
                  str(REPEATS), str(manifest)]]
        for step in steps:
            done = subprocess.run([sys.executable, "-m", *step], capture_output=True, text=True)
            if done.returncode != 0:
                raise HloError(f"--autotune: the cuBLAS candidate of %{fusion.name} failed in {step[0]}: "
                               f"{done.stderr.strip()[-200:]}")
    seconds = profile_seconds(done.stderr)
    if seconds is None:
        raise HloError(f"--autotune: hlo-run gave no profile for the cuBLAS candidate of %{fusion.name}")
    return seconds


def profile_seconds(stderr: str) -> float | None:
    """The sum of hlo-run's `last run, per step:` lines (milliseconds each), in seconds."""
    if "last run, per step:" not in stderr:
        return None
    steps = stderr.split("last run, per step:", 1)[1]
    times = [float(m.group(1)) for m in re.finditer(r"^\s+\S.*?\s([0-9.]+) ms$", steps, re.M)]
    return sum(times) / 1e3 if times else None


__all__ = ["GpuTimer", "cublas_seconds", "fusion_module_text", "gpu_unavailable", "profile_seconds"]
