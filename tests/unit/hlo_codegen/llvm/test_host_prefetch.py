"""Prefetching the next block's range of an input in host kernels (hlo_codegen/llvm/host_prefetch.py):
which inputs qualify (read-only, under the size rule, block b's first phase reading exactly one
range [first + b * stride, + length) of it, a later phase to overlap), where the prefetch goes
(after the first phase, before the second), and that it changes no result.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from elemental_harness import check_fusion, fusion_of, random_args, run_on_host
from hlo_codegen.emitters import emit_kernel
from hlo_codegen.kernel_ir import parse_kernel
from hlo_codegen.llvm import host, host_prefetch, lower_to_host
from hlo_codegen.llvm.host import _phases
from hlo_codegen.llvm.host_prefetch import PrefetchedInput, prefetched_inputs
from hlo_run.host_kernel import load_host_kernel

# Eight blocks of 32 threads; block b reads arg0[128 b, 128 b + 128) (four loads a thread), sums
# each thread's four into shared memory, then (after the barrier) thread t writes its sum plus
# its neighbour's.
ROWS = """
#map0 = (th_x, bl_x) -> (bl_x * 128 + th_x), domain: th_x in [0, 31], bl_x in [0, 7]
#map1 = (th_x, bl_x) -> (bl_x * 32 + th_x), domain: th_x in [0, 31], bl_x in [0, 7]
#map2 = (th_x) -> ((th_x + 1) mod 32), domain: th_x in [0, 31]
kernel @rows grid = [8, 1, 1] block = [32, 1, 1] {
  param @arg0 : f32[1024]
  param @arg1 : f32[256] written
  shared @shm : f32[32]
  %th_x = thread_id {dim = x, range = [0, 31]} : index
  %bl_x = block_id {dim = x, range = [0, 7]} : index
  %c32 = constant {value = 32} : index
  %c64 = constant {value = 64} : index
  %c96 = constant {value = 96} : index
  %0 = apply_indexing #map0 %th_x, %bl_x : index
  %1 = load @arg0 %0 : f32
  %2 = addi %0, %c32 : index
  %3 = load @arg0 %2 : f32
  %4 = addi %0, %c64 : index
  %5 = load @arg0 %4 : f32
  %6 = addi %0, %c96 : index
  %7 = load @arg0 %6 : f32
  %8 = addf %1, %3 : f32
  %9 = addf %8, %5 : f32
  %10 = addf %9, %7 : f32
  store @shm %10, %th_x
  sync_threads
  %11 = load @shm %th_x : f32
  %12 = apply_indexing #map2 %th_x : index
  %13 = load @shm %12 : f32
  %14 = addf %11, %13 : f32
  %15 = apply_indexing #map1 %th_x, %bl_x : index
  store @arg1 %14, %15
}
"""


def _prefetched(text: str) -> list[PrefetchedInput]:
    """What host.py's lowering of `text` prefetches."""
    kernel = parse_kernel(text)
    phases = _phases(kernel)
    return prefetched_inputs(kernel, phases, any(map(host._heavy_math, phases[1:])))


def test_an_input_each_block_reads_one_range_of_in_its_first_phase_is_prefetched(monkeypatch) -> None:
    assert _prefetched(ROWS) == [PrefetchedInput("arg0", 0, 128, 128, 4)]
    strided = ROWS.replace("(bl_x * 128 + th_x)", "(th_x * 32 + bl_x)")
    assert _prefetched(strided) == []  # block 0 reads 0, 32, 64, ...: not one range
    sparse = ROWS.replace("(bl_x * 128 + th_x)", "(bl_x * 10000000000 + th_x * 100000000)")
    assert _prefetched(sparse) == []  # 128 reads over a span of 3.1e9 elements: decided at once
    gappy = ROWS.replace("%c96 = constant {value = 96}", "%c96 = constant {value = 100}")
    assert _prefetched(gappy) == []  # a hole in the range, and past it
    one_phase = ROWS.replace("  sync_threads\n", "")
    assert _prefetched(one_phase) == []  # nothing after the read to overlap it with
    written = ROWS.replace("param @arg0 : f32[1024]", "param @arg0 : f32[1024] written")
    assert _prefetched(written) == []
    monkeypatch.setattr(host_prefetch, "MIN_RANGE_BYTES", 1024)  # a block reads 512 bytes
    assert _prefetched(ROWS) == []  # a short range is the hardware prefetcher's job


def test_large_inputs_are_prefetched_only_where_long_math_follows(monkeypatch) -> None:
    """Over the size rule, a kernel of adds (bound by memory) is left alone; one whose second
    phase computes an exp (bound by its arithmetic) is not."""
    monkeypatch.setattr(host_prefetch, "STREAM_MIN_BYTES", 4096)  # arg0 is 4 KiB
    assert _prefetched(ROWS) == []
    assert "llvm.prefetch" not in lower_to_host(parse_kernel(ROWS))
    heavy = ROWS.replace("  %14 = addf %11, %13 : f32\n",
                         "  %e = exp %13 : f32\n  %14 = addf %11, %e : f32\n")
    assert _prefetched(heavy) == [PrefetchedInput("arg0", 0, 128, 128, 4)]
    assert "llvm.prefetch" in lower_to_host(parse_kernel(heavy))
    early = ROWS.replace("  %10 = addf %9, %7 : f32\n", "  %e = exp %7 : f32\n  %10 = addf %9, %e : f32\n")
    assert _prefetched(early) == []  # the exp is in the first phase, with the reads


def test_the_prefetch_follows_the_first_phase() -> None:
    """The lines of block blk + 1's range (512 bytes: 9 prefetches, one more than its lines for a
    range that does not start on one), after the first phase's thread loop, before the second's."""
    ir = lower_to_host(parse_kernel(ROWS))
    assert ir.count("call void @llvm.prefetch.p0") == 1
    first_exit, prefetch, second = (ir.index(s) for s in ("t_exit:", "prefetch_loop:", "t_loop.1:"))
    assert first_exit < prefetch < second
    assert re.search(r"icmp sle i64 %[\w.]+, 8\n", ir[prefetch:second])  # lines 0..8


@pytest.mark.parametrize("threads", [1, 2])
def test_results_are_those_without_the_prefetch(monkeypatch, threads: int) -> None:
    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    outs = []
    for enabled in (True, False):
        if not enabled:
            monkeypatch.setattr(host, "prefetched_inputs", lambda *args: [])
        ir = lower_to_host(parse_kernel(ROWS))
        assert ("llvm.prefetch" in ir) == enabled
        out = np.zeros(256, np.float32)
        load_host_kernel(ir, "rows")([x, out], 8, threads=threads)
        outs.append(out)
    sums = x.reshape(8, 4, 32).sum(axis=1, dtype=np.float32)
    np.testing.assert_allclose(outs[0], (sums + np.roll(sums, -1, axis=1)).reshape(-1), rtol=1e-6)
    np.testing.assert_array_equal(outs[0], outs[1])


SOFTMAX_BF16 = """
region_max {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT m = bf16[] maximum(a, b)
}
region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  p = bf16[96,1024]{1,0} parameter(0)
  ninf = bf16[] constant(-inf)
  mx = bf16[96]{0} reduce(p, ninf), dimensions={1}, to_apply=region_max
  bm = bf16[96,1024]{1,0} broadcast(mx), dimensions={0}
  d = bf16[96,1024]{1,0} subtract(p, bm)
  e = bf16[96,1024]{1,0} exponential(d)
  c = f32[96,1024]{1,0} convert(e)
  zero = f32[] constant(0)
  s = f32[96]{0} reduce(c, zero), dimensions={1}, to_apply=region_add
  bs = f32[96,1024]{1,0} broadcast(s), dimensions={0}
  q = f32[96,1024]{1,0} divide(c, bs)
  ROOT r = bf16[96,1024]{1,0} convert(q)
}
ENTRY main {
  p = bf16[96,1024]{1,0} parameter(0)
  ROOT f = bf16[96,1024]{1,0} fusion(p), kind=kCustom, calls=fused,
    backend_config={"fusion_backend_config":{"kind":"__norm"}}
}
"""


def test_the_softmax_emitters_rows_are_prefetched_and_match_the_interpreter(monkeypatch) -> None:
    """The bench's bf16 softmax in small: each block's row (2 KiB) prefetched by the block before;
    the kernel against the interpreter, and bit for bit against itself without the prefetch."""
    fusion = fusion_of(SOFTMAX_BF16)
    kernel = emit_kernel(fusion)
    assert [(p.first, p.stride, p.length, p.esize) for p in prefetched_inputs(kernel, _phases(kernel))] == \
        [(0, 1024, 1024, 2)]
    check_fusion(SOFTMAX_BF16)
    args = random_args(fusion, 1)
    with_prefetch = run_on_host(fusion, args, kernel, threads=2)
    monkeypatch.setattr(host, "prefetched_inputs", lambda *args: [])
    without = run_on_host(fusion, args, kernel, threads=2)
    np.testing.assert_array_equal(with_prefetch[0].view(np.uint16), without[0].view(np.uint16))
