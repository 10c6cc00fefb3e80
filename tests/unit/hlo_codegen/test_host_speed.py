"""The host backend's speed machinery must not change results: the JIT cache (same IR, same
function; different IR, different function), optimization levels by launch size, block ranges
split over threads, kernel-IR vectors kept as scalar lanes and the parallel thread loops LLVM
vectorizes. Expected values come from numpy, or from another code path (level 0 vs 2, one
thread vs several) that must agree bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

from hlo_codegen.kernel_ir import Buffer, IRBuilder, Kernel, parse_kernel
from hlo_codegen.llvm import lower_to_host, lower_to_nvptx
from hlo_codegen.llvm.host import MAX_PARALLEL_PHASES
from hlo_run import host_kernel
from hlo_run.host_kernel import compile_host_module, load_host_kernel, opt_level_for

# Four blocks of 32 threads; each thread loads 4 floats as one vector, applies tanh lane by lane
# (an unrolled loop: constant lane indices) and stores the vector.
UNROLLED = """
#map0 = (th_x, bl_x) -> (), domain: th_x in [0, 31], bl_x in [0, 3]
#map1 = (th_x, bl_x) -> (th_x * 4 + bl_x * 128), domain: th_x in [0, 31], bl_x in [0, 3]
#map2 = (th_x, bl_x)[s] -> (s), domain: th_x in [0, 31], bl_x in [0, 3], s in [0, 3]
kernel @vec_tanh grid = [4, 1, 1] block = [32, 1, 1] {
  param @arg0 : f32[512]
  param @arg1 : f32[512] written
  %th_x = thread_id {dim = x, range = [0, 31]} : index
  %bl_x = block_id {dim = x, range = [0, 3]} : index
  loop #map0 (%th_x, %bl_x) -> () {
    %0 = apply_indexing #map1 %th_x, %bl_x : index
    %1 = load @arg0 %0 {align = 16} : vector<4xf32>
    %2 = constant {value = 0} : vector<4xf32>
    %v = loop #map2 (%th_x, %bl_x)[%s] -> (%i) iter_args(%acc = %2) attributes {unroll = true} : vector<4xf32> {
      %3 = vector.extract %1, %i : f32
      %4 = tanh %3 : f32
      %5 = vector.insert %4, %acc, %i : vector<4xf32>
      yield %5
    }
    store @arg1 %v, %0 {align = 16}
    yield
  }
}
"""

# The same with a rolled lane loop (lane indices are loop values, the vector is a loop-carried
# value) and a constraint that skips the last two lanes of each block's last thread (the vector
# passes through a conditional): those elements keep the initial -1.
ROLLED = UNROLLED.replace("@vec_tanh", "@vec_exp").replace("tanh %3", "exp %3") \
    .replace(" attributes {unroll = true}", "").replace("{value = 0}", "{value = -1.0}") \
    .replace("s in [0, 3]\n", "s in [0, 3], th_x * 4 + s in [0, 125]\n")


def _inputs() -> np.ndarray:
    return np.random.default_rng(5).uniform(-6, 6, 512).astype(np.float32)


def _close_to(got: np.ndarray, want64: np.ndarray) -> None:
    """Within one f32 ulp of the float64 value (math.py rounds an f64 result once)."""
    want = want64.astype(np.float32)
    ulp = np.spacing(np.abs(want))
    assert np.all(np.abs(got.astype(np.float64) - want.astype(np.float64)) <= ulp), (got, want)


@pytest.mark.parametrize("text", [UNROLLED, ROLLED], ids=["unrolled", "rolled"])
def test_vectors_become_lanes_on_the_host_only(text: str) -> None:
    kernel = parse_kernel(text)
    host, nvptx = lower_to_host(kernel), lower_to_nvptx(kernel)
    assert "<4 x" not in host  # no vector-typed instruction: the loop vectorizer may take the loop
    assert "llvm.loop.parallel_accesses" in host and "!llvm.access.group" in host
    assert "<4 x float>" in nvptx and "access.group" not in nvptx


@pytest.mark.parametrize("opt_level", [0, 2])
def test_lanes_kernels_compute_the_right_values(opt_level: int) -> None:
    x = _inputs()
    out = np.zeros_like(x)
    kernel = parse_kernel(UNROLLED)
    load_host_kernel(lower_to_host(kernel), kernel.name, opt_level)([x, out], 4)
    _close_to(out, np.tanh(x.astype(np.float64)))
    out2 = np.zeros_like(x)
    kernel = parse_kernel(ROLLED)
    load_host_kernel(lower_to_host(kernel), kernel.name, opt_level)([x, out2], 4)
    skipped = (np.arange(512) % 128) >= 126
    assert np.all(out2[skipped] == -1.0)
    _close_to(out2[~skipped], np.exp(x[~skipped].astype(np.float64)))


def test_optimization_levels_and_threads_agree_bit_for_bit() -> None:
    kernel = parse_kernel(UNROLLED)
    ir = lower_to_host(kernel)
    x = np.random.default_rng(9).standard_normal(512).astype(np.float32) * 4
    outs = []
    for level, threads in [(0, 1), (2, 1), (2, 3), (2, None)]:
        out = np.zeros_like(x)
        load_host_kernel(ir, kernel.name, level)([x, out], 4, threads)
        outs.append(out)
    for other in outs[1:]:
        np.testing.assert_array_equal(other.view(np.uint32), outs[0].view(np.uint32))


def test_launch_by_address_matches_the_array_call() -> None:
    kernel = parse_kernel(UNROLLED)
    k = load_host_kernel(lower_to_host(kernel), kernel.name)
    x = _inputs()
    a, b = np.zeros_like(x), np.zeros_like(x)
    k([x, a], 4, threads=1)
    k.launch([x.ctypes.data, b.ctypes.data], 4, nbytes=x.nbytes + b.nbytes)  # small: on this thread
    np.testing.assert_array_equal(a, b)
    b[:] = 0
    k.launch([x.ctypes.data, b.ctypes.data], 4, threads=4)  # one block per thread
    np.testing.assert_array_equal(a, b)


def test_jit_cache_same_ir_same_function_different_ir_different() -> None:
    one = lower_to_host(parse_kernel(UNROLLED))
    two = lower_to_host(parse_kernel(ROLLED.replace("@vec_exp", "@vec_tanh")))
    assert compile_host_module(one) is compile_host_module(one)
    assert load_host_kernel(one, "vec_tanh").address == load_host_kernel(one, "vec_tanh").address
    assert compile_host_module(two) is not compile_host_module(one)
    assert load_host_kernel(two, "vec_tanh").address != load_host_kernel(one, "vec_tanh").address
    assert compile_host_module(one, 0) is not compile_host_module(one, 2)  # the level is in the key
    x = _inputs()
    a, b = np.zeros_like(x), np.zeros_like(x)
    load_host_kernel(one, "vec_tanh")([x, a], 4)
    load_host_kernel(two, "vec_tanh")([x, b], 4)
    assert not np.array_equal(a, b)  # really two different functions
    before = compile_host_module(one)
    host_kernel.clear_cache()
    assert compile_host_module(one) is not before


def test_optimization_level_and_threads_by_launch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    assert opt_level_for(None) == 2
    assert opt_level_for(host_kernel.SMALL_BYTES) == 0
    assert opt_level_for(host_kernel.SMALL_BYTES + 1) == 2
    monkeypatch.setattr(host_kernel, "DEFAULT_THREADS", 16)
    per = host_kernel.BYTES_PER_THREAD
    assert [host_kernel.threads_for(w) for w in (None, 1, per - 1, 2 * per, 3 * per - 1, 100 * per)] \
        == [16, 1, 1, 2, 2, 16]


def _barrier_kernel(phases: int) -> Kernel:
    """`phases` phases, each adding 1 to every element (thread t owns element t)."""
    k = Kernel(f"phases_{phases}", (2, 1, 1), (16, 1, 1))
    k.buffers.append(Buffer("arg0", "param", "s32", 16, written=True))
    b = IRBuilder(k)
    th = b.thread_id("x", 16)
    for p in range(phases):
        if p:
            b.sync_threads()
        b.store("arg0", b.binary("addi", b.load("arg0", th, "i32"), b.constant(1, "i32")), th)
    return k


def test_only_kernels_with_few_phases_get_parallel_loops() -> None:
    few, many = _barrier_kernel(MAX_PARALLEL_PHASES), _barrier_kernel(MAX_PARALLEL_PHASES + 1)
    assert lower_to_host(few).count("llvm.loop.parallel_accesses") == MAX_PARALLEL_PHASES
    assert "parallel_accesses" not in lower_to_host(many)
    for k, n in ((few, MAX_PARALLEL_PHASES), (many, MAX_PARALLEL_PHASES + 1)):
        out = np.zeros(16, np.int32)
        load_host_kernel(lower_to_host(k), k.name)([out], 1)
        assert list(out) == [n] * 16


def test_a_forked_child_gets_its_own_thread_pool() -> None:
    import multiprocessing

    kernel = parse_kernel(UNROLLED)
    k = load_host_kernel(lower_to_host(kernel), kernel.name)
    x = _inputs()
    want = np.zeros_like(x)
    k([x, want], 4, threads=2)  # the parent's pool exists now
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_run_in_child, (x,)).get(timeout=60)  # hangs with the parent's pool
    np.testing.assert_array_equal(got, want)


def _run_in_child(x: np.ndarray) -> np.ndarray:
    kernel = parse_kernel(UNROLLED)
    out = np.zeros_like(x)
    load_host_kernel(lower_to_host(kernel), kernel.name)([x, out], 4, threads=2)
    return out


# Blocks of 32 x 2 x 2 threads; each thread loads one float, and after a barrier (the value is
# carried across it in a per-thread array) stores it transposed: out[x * 4 + y * 2 + z].
NESTED = """
#map0 = (th_x, th_y, th_z, bl_x) -> (th_x + th_y * 32 + th_z * 64 + bl_x * 128), domain: th_x in [0, 31], th_y in [0, 1], th_z in [0, 1], bl_x in [0, 3]
#map1 = (th_x, th_y, th_z, bl_x) -> (th_x * 4 + th_y * 2 + th_z + bl_x * 128), domain: th_x in [0, 31], th_y in [0, 1], th_z in [0, 1], bl_x in [0, 3]
kernel @nested grid = [4, 1, 1] block = [32, 2, 2] {
  param @arg0 : f32[512]
  param @arg1 : f32[512] written
  %th_x = thread_id {dim = x, range = [0, 31]} : index
  %th_y = thread_id {dim = y, range = [0, 1]} : index
  %th_z = thread_id {dim = z, range = [0, 1]} : index
  %bl_x = block_id {dim = x, range = [0, 3]} : index
  %0 = apply_indexing #map0 %th_x, %th_y, %th_z, %bl_x : index
  %1 = load @arg0 %0 : f32
  sync_threads
  %2 = apply_indexing #map1 %th_x, %th_y, %th_z, %bl_x : index
  store @arg1 %1, %2
}
"""


def test_a_multi_dimensional_block_loops_over_x_innermost() -> None:
    """Thread phases of a 32 x 2 x 2 block are a loop over (y, z) around a loop over x (x is then
    the vectorized induction variable); every thread still gets its own x, y and z."""
    kernel = parse_kernel(NESTED)
    ir = lower_to_host(kernel)
    assert "tx_loop" in ir and "tyz_loop" in ir
    x = np.arange(512, dtype=np.float32)
    out = np.full(512, -1, np.float32)
    load_host_kernel(ir, "nested")([x, out], 4)
    want = x.reshape(4, 2, 2, 32).transpose(0, 3, 2, 1).reshape(-1)  # [bl, z, y, x] -> [bl, x, y, z]
    np.testing.assert_array_equal(out, want)
