"""Emitted kernels run on a real GPU (cuda-bindings' driver API) and compared with the reference
interpreter / the numpy model of warp shuffles. Marked `gpu`: skipped, with the reason, when no
CUDA device can be used (the default CI has none).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from hlo_codegen.emitters import emit_kernel
from hlo_codegen.llvm import lower_to_nvptx
from hlo_codegen.ptx import compile_to_ptx, ptx_to_cubin
from elemental_harness import (
    SPECIAL, assert_close, fusion_of, gelu, int_array, output_shapes, random_args, reference, to_buffer,
    tuple_fusion,
)
from shuffle_reduction import BLOCKS, THREADS, emulate, reduction_kernel

pytestmark = pytest.mark.gpu


@functools.lru_cache(maxsize=None)
def _driver():
    """The driver module with a current context, or a skip reason."""
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None, "cuda-bindings is not installed"
    try:
        status = cu.cuInit(0)[0]
    except Exception as err:  # noqa: BLE001 - no driver library: cuda-bindings raises its own types
        return None, f"no usable CUDA driver ({type(err).__name__})"
    if status != cu.CUresult.CUDA_SUCCESS:
        return None, f"no usable CUDA driver ({status})"
    err, dev = cu.cuDeviceGet(0)
    if err != cu.CUresult.CUDA_SUCCESS:
        return None, "no CUDA device"
    _, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    cu.cuCtxSetCurrent(ctx)
    _, major = cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
    _, minor = cu.cuDeviceGetAttribute(cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
    return (cu, f"sm_{major}{minor}"), ""


def _check(result):
    from cuda.bindings import driver as cu

    err = result[0] if isinstance(result, tuple) else result
    assert err == cu.CUresult.CUDA_SUCCESS, err
    return result[1] if isinstance(result, tuple) and len(result) > 1 else None


def launch(kernel, buffers: list[np.ndarray], use_libdevice: bool | None = None) -> list[np.ndarray]:
    """Compile `kernel` for this GPU, run it over copies of `buffers`, return them afterwards."""
    env, reason = _driver()
    if env is None:
        pytest.skip(reason)
    cu, arch = env
    cubin = ptx_to_cubin(compile_to_ptx(lower_to_nvptx(kernel, use_libdevice=use_libdevice), arch), arch)
    module = _check(cu.cuModuleLoadData(cubin))
    fn = _check(cu.cuModuleGetFunction(module, kernel.name.encode()))
    ptrs = []
    for b in buffers:
        p = _check(cu.cuMemAlloc(max(1, b.nbytes)))
        _check(cu.cuMemcpyHtoD(p, b.ctypes.data, b.nbytes))
        ptrs.append(p)
    values = [np.array([int(p)], np.uint64) for p in ptrs]
    args = np.array([v.ctypes.data for v in values], np.uint64)
    _check(cu.cuLaunchKernel(fn, *kernel.grid, *kernel.block, 0, 0, args.ctypes.data, 0))
    _check(cu.cuCtxSynchronize())
    out = []
    for b, p in zip(buffers, ptrs):
        o = np.empty_like(b)
        _check(cu.cuMemcpyDtoH(o.ctypes.data, p, b.nbytes))
        _check(cu.cuMemFree(p))
        out.append(o)
    _check(cu.cuModuleUnload(module))
    return out


def run_fusion(text: str, args=None, tol=None, use_libdevice=None) -> None:
    fusion = fusion_of(text)
    kernel = emit_kernel(fusion)
    args = args if args is not None else random_args(fusion, 5)
    shapes = output_shapes(fusion)
    ins = [to_buffer(a, op.shape) for a, op in zip(args, fusion.operands)]
    outs = [np.zeros_like(to_buffer(np.zeros(s.dims, s.element_type.np_dtype), s)) for s in shapes]
    got = launch(kernel, ins + outs, use_libdevice)[len(ins):]
    for k, (g, w, s) in enumerate(zip(got, reference(fusion, args), shapes)):
        assert_close(g, to_buffer(w, s), s, tol, f"output {k}")


@pytest.mark.parametrize("etype", ["f32", "s32"])
def test_shuffle_and_barriers_on_the_gpu(etype: str) -> None:
    x = (np.random.default_rng(3).standard_normal(THREADS * BLOCKS) * 100).astype(
        np.float32 if etype == "f32" else np.int32)
    _, lanes, totals = launch(reduction_kernel(etype), [x, np.zeros_like(x), np.zeros(BLOCKS, x.dtype)])
    want_lanes, want_totals = emulate(x)
    np.testing.assert_array_equal(lanes, want_lanes)
    np.testing.assert_array_equal(totals, want_totals)


def test_gelu_bit_identical_to_the_interpreter() -> None:
    run_fusion(gelu("2,64,4096"), tol=0.0)


@pytest.mark.parametrize("use_libdevice", [True, False])
def test_float_edge_semantics(use_libdevice: bool) -> None:
    n = len(SPECIAL) ** 2
    a, b = np.meshgrid(np.array(SPECIAL), np.array(SPECIAL))
    t = f"f32[{n}]"
    ops = [(t, f"{op}(p0, p1)") for op in ("maximum", "minimum", "remainder", "power", "atan2", "divide")]
    ops += [(f"s32[{n}]", "convert(p0)"), (f"u8[{n}]", "convert(p0)"), (f"bf16[{n}]", "convert(p0)"),
            (f"f8e4m3fn[{n}]", "convert(p0)"), (t, "tanh(p0)"), (t, "exponential(p1)")]
    with np.errstate(all="ignore"):
        args = [a.reshape(-1).astype(np.float32), b.reshape(-1).astype(np.float32)]
        run_fusion(tuple_fusion([t, t], ops), args, use_libdevice=use_libdevice)


@pytest.mark.parametrize("etype,dtype", [("u64", np.uint64), ("s8", np.int8)])
def test_integer_edge_semantics(etype: str, dtype) -> None:
    info = np.iinfo(dtype)
    edge = sorted({0, 1, 2, 7, int(info.max), int(info.min), 2 ** 32 + 1 if info.max > 2 ** 33 else 3})
    a, b = np.meshgrid(edge, edge)
    t = f"{etype}[{a.size}]"
    ops = [(t, f"{op}(p0, p1)") for op in ("divide", "remainder", "shift-left", "shift-right-logical",
                                            "shift-right-arithmetic", "power")]
    ops += [(t, "popcnt(p0)"), (t, "count-leading-zeros(p0)")]
    run_fusion(tuple_fusion([t, t], ops), [int_array(dtype, a.reshape(-1)), int_array(dtype, b.reshape(-1))], tol=0.0)
