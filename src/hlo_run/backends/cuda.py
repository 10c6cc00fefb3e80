"""The cuda platform: a manifest compiled with `--target cuda`, run on an NVIDIA GPU.

Where it sits: behind `hlo-run --platform cuda`; everything CUDA is imported here, lazily, so
that hlo-run works without the `gpu` extra. The driver API comes from cuda-bindings
(`cuda.bindings.driver`): one primary context, the legacy default stream, `cuMemAlloc` per
allocation, PTX linked into a cubin for the device with nvJitLink (`cuModuleLoadData` of the PTX
as a fallback), `cuLaunchKernel` with one pointer per kernel argument. A Triton kernel (a GEMM
fusion) is linked from its PTX like the others, the code `kernel_check` checked (its cubin in
the manifest is Triton's own build, not what runs), for the PTX's `a` target (sm_90a, wgmma),
and gets null pointers for the scratch parameters Triton appends. GemmThunks call cuBLAS
(`hlo_run.cublas`; one with a cuBLASLt epilogue `hlo_run.cublas_lt`), CudnnConvolutionThunks
cuDNN's graph API (`hlo_run.cudnn_runner`: plans built once per graph shape on a handle on this
stream; a plan needing more workspace than the call's scratch gets a device buffer kept for such
plans). Per-thunk times come from CUDA events around
each thunk.

Without a GPU, a driver or the packages, `unavailable_reason` says why in one line and hlo-run
exits 1.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

from hlo_common.errors import HloError
from hlo_common.manifest.manifest import ManifestKernel, parse_shape_text
from hlo_common.manifest.cudnn_thunks import CudnnConvolutionThunk
from hlo_common.manifest.thunks import GemmThunk, KernelThunk
from hlo_run.backends import Backend, Executable, Program
from hlo_run.compile_hook import manifest_for
from hlo_run.manifest_runtime import Device, ManifestExecutable


class CudaError(HloError):
    """A CUDA driver call that failed (names the call and the error)."""


def check(result: tuple, what: str) -> Any:
    """Unpack a cuda-bindings result `(err, *values)`; raise CudaError unless err is success."""
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        from cuda.bindings import driver

        name = driver.cuGetErrorName(err)[1]
        text = name.decode() if isinstance(name, bytes) else str(err)
        raise CudaError(f"{what} failed: {text}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _unavailable() -> str | None:
    try:
        from cuda.bindings import driver
    except ImportError:
        return "it needs the `gpu` extra (pip install 'hlo-toolchain[gpu]': cuda-bindings, nvJitLink, cuBLAS)"
    try:
        err = driver.cuInit(0)[0]
    except Exception:  # noqa: BLE001 - a missing driver library raises rather than returns
        return "no NVIDIA driver found (libcuda.so is not installed on this machine)"
    if int(err) != 0:
        return f"cuInit failed ({driver.cuGetErrorName(err)[1].decode()}): no usable GPU"
    err, count = driver.cuDeviceGetCount()
    if int(err) != 0 or count == 0:
        return "no CUDA device found"
    return None


class CudaDevice(Device):
    name = "cuda"

    def __init__(self, gpu: int = 0) -> None:
        """The device on GPU `gpu` (several devices: each MPI rank takes its own, hlo_run.nccl_runtime)."""
        from cuda.bindings import driver

        self.driver = driver
        check(driver.cuInit(0), "cuInit")
        self.device = check(driver.cuDeviceGet(gpu), "cuDeviceGet")
        self.context = check(driver.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        attr = driver.CUdevice_attribute
        self.cc = (check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                                     self.device), "cuDeviceGetAttribute"),
                   check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                                     self.device), "cuDeviceGetAttribute"))
        self.stream = driver.CUstream(0)
        self.modules: list[Any] = []
        self._blas = None
        self._blas_lt = None  # cuBLASLt, for GemmThunks with an epilogue (hlo_run.cublas_lt)
        self._cudnn = None  # hlo_run.cudnn_runner.CudnnConvRunner, made on the first cuDNN thunk
        self._cudnn_workspace: tuple[Any, int] | None = None  # (device buffer, bytes)

    # -- memory ---------------------------------------------------------------------------------
    def allocate(self, size: int, alignment: int) -> Any:
        return check(self.driver.cuMemAlloc(max(size, 1)), "cuMemAlloc")  # 256-byte aligned

    def address(self, buffer: Any) -> int:
        return int(buffer)

    def release(self, buffer: Any) -> None:
        check(self.driver.cuMemFree(buffer), "cuMemFree")

    def write(self, buffer: Any, offset: int, data: bytes) -> None:
        check(self.driver.cuMemcpyHtoD(int(buffer) + offset, data, len(data)), "cuMemcpyHtoD")

    def read(self, buffer: Any, offset: int, size: int) -> bytes:
        out = bytearray(size)
        check(self.driver.cuMemcpyDtoH(out, int(buffer) + offset, size), "cuMemcpyDtoH")
        return bytes(out)

    def copy(self, dst: int, src: int, size: int) -> None:
        check(self.driver.cuMemcpyDtoDAsync(dst, src, size, self.stream), "cuMemcpyDtoDAsync")

    def memset32(self, dst: int, size: int, value: int) -> None:
        if value == 0 and (size % 4 or dst % 4):
            check(self.driver.cuMemsetD8Async(dst, 0, size, self.stream), "cuMemsetD8Async")
            return
        check(self.driver.cuMemsetD32Async(dst, value, size // 4, self.stream), "cuMemsetD32Async")

    def close(self) -> None:
        for blas in (self._blas, self._blas_lt):
            if blas is not None:
                blas.close()
        self._blas = self._blas_lt = None
        if self._cudnn_workspace is not None:
            self.release(self._cudnn_workspace[0])
            self._cudnn_workspace = None
        for module in self.modules:
            check(self.driver.cuModuleUnload(module), "cuModuleUnload")
        self.modules = []
        if self.context is not None:
            check(self.driver.cuDevicePrimaryCtxRelease(self.device), "cuDevicePrimaryCtxRelease")
            self.context = None

    def synchronize(self) -> None:
        check(self.driver.cuCtxSynchronize(), "cuCtxSynchronize")

    def timer(self):
        d = self.driver
        start, end = (check(d.cuEventCreate(0), "cuEventCreate") for _ in range(2))
        check(d.cuEventRecord(start, self.stream), "cuEventRecord")

        def elapsed() -> float:
            check(d.cuEventRecord(end, self.stream), "cuEventRecord")
            check(d.cuEventSynchronize(end), "cuEventSynchronize")
            ms = check(d.cuEventElapsedTime(start, end), "cuEventElapsedTime")
            d.cuEventDestroy(start)
            d.cuEventDestroy(end)
            return ms / 1e3

        return elapsed

    # -- kernels ----------------------------------------------------------------------------------
    def load_kernel(self, kernel: ManifestKernel) -> Any:
        image = self._cubin(kernel) or kernel.ptx.encode() + b"\0"
        module = check(self.driver.cuModuleLoadData(image), f"cuModuleLoadData({kernel.name})")
        self.modules.append(module)
        function = check(self.driver.cuModuleGetFunction(module, kernel.name.encode()),
                         f"cuModuleGetFunction({kernel.name})")
        dynamic = kernel.shared_bytes if ".extern .shared" in kernel.ptx else 0
        if dynamic > 48 * 1024:
            attr = self.driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(self.driver.cuFuncSetAttribute(function, attr, dynamic), "cuFuncSetAttribute")
        return function, dynamic, kernel.scratch_params

    def _cubin(self, kernel: ManifestKernel) -> bytes | None:
        """PTX -> cubin for this device with nvJitLink, or None when nvJitLink is not installed."""
        try:
            from cuda.bindings import nvjitlink
        except ImportError:
            return None
        arch = f"-arch=sm_{self.cc[0]}{self.cc[1]}"
        target = re.search(r"^\.target\s+sm_\d+([af])\b", kernel.ptx, re.M)
        if target and kernel.num_warps is not None:  # Triton's sm_90a PTX (wgmma) links for sm_90a only
            arch += target.group(1)
        handle = nvjitlink.create(1, [arch])
        try:
            data = kernel.ptx.encode()
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), kernel.name)
            nvjitlink.complete(handle)
            cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
            nvjitlink.get_linked_cubin(handle, cubin)
            return bytes(cubin)
        except Exception as exc:  # noqa: BLE001 - nvJitLink reports through its log
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            nvjitlink.get_error_log(handle, log)
            first = log.decode(errors="replace").strip().splitlines()
            reason = first[0] if first else exc
            raise CudaError(f"kernel {kernel.name}: nvJitLink {arch} failed: {reason}") from None
        finally:
            nvjitlink.destroy(handle)

    def launch(self, handle: Any, thunk: KernelThunk, pointers: list[int]) -> None:
        function, dynamic, scratch = handle
        values = [ctypes.c_void_p(p) for p in pointers] + [ctypes.c_void_p(0) for _ in range(scratch)]
        params = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
        check(self.driver.cuLaunchKernel(function, *thunk.grid, *thunk.block, dynamic, self.stream,
                                         ctypes.addressof(params), 0),
              f"cuLaunchKernel({thunk.kernel}, grid {thunk.grid}, block {thunk.block})")

    def cudnn_convolution(self, thunk: CudnnConvolutionThunk, pointers: dict[str, int],
                          workspace: int) -> None:
        from hlo_common.gpu.cudnn_graph import ConvGraph
        from hlo_run.cudnn_runner import CudnnConvRunner, make_handle

        if self._cudnn is None:
            self._cudnn = CudnnConvRunner(make_handle(int(self.stream)), self._cudnn_scratch)
        self._cudnn.run(ConvGraph.from_json(thunk.graph), pointers, workspace)

    def _cudnn_scratch(self, size: int) -> int:
        """A device buffer of at least `size` bytes for cuDNN workspaces, grown when too small."""
        if self._cudnn_workspace is None or self._cudnn_workspace[1] < size:
            if self._cudnn_workspace is not None:
                self.synchronize()  # a plan may still be using the old one
                self.release(self._cudnn_workspace[0])
            self._cudnn_workspace = (self.allocate(size, 256), size)
        return int(self._cudnn_workspace[0])

    def gemm(self, thunk: GemmThunk, pointers: dict[str, int]) -> None:
        c = pointers.get("c")
        if c is not None and c != pointers["output"]:
            self.copy(pointers["output"], c, thunk.output.size)
        if thunk.config.epilogue != "DEFAULT":  # one cublasLtMatmul: GEMM, bias and activation
            from hlo_run.cublas_lt import CublasLt

            if self._blas_lt is None:
                self._blas_lt = CublasLt(int(self.stream))
            bias = None
            if thunk.bias is not None:  # the bias has the result's element type (gemm_config)
                out_type = parse_shape_text(thunk.config.output_shape, "gemm").element_type
                bias = thunk.bias.size // out_type.byte_size
            workspace = thunk.workspace.size if thunk.workspace is not None else 0
            self._blas_lt.matmul(thunk.config, pointers, bias, workspace)
            return
        from hlo_run.cublas import Cublas

        if self._blas is None:
            self._blas = Cublas(int(self.stream))
        self._blas.gemm(thunk.config, pointers)


class CudaBackend(Backend):
    name = "cuda"

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return _unavailable()

    def load(self, program: Program) -> Executable:
        if program.on_ranks:  # one process per GPU, collectives through NCCL (hlo_run.nccl_runtime)
            from hlo_run.mpi_launch import host_executable
            from hlo_run.nccl_runtime import check_nccl

            check_nccl()
            return host_executable(program, "cuda")
        manifest = manifest_for(program, "cuda")
        return ManifestExecutable(manifest, CudaDevice(), program.name)
