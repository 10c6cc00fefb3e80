"""Streamed outputs of host kernels (hlo_codegen/llvm/host_stream.py): which outputs qualify (each
block writes one contiguous range, each element once, from its last phase, and never reads it),
and that the staged copy with non-temporal stores, or plain ones on an unaligned output, gives
the values of the direct stores. The size rule is lowered to 0 where a test needs small arrays.
"""

from __future__ import annotations

import numpy as np
import pytest

from elemental_harness import check_fusion, fusion_of
from hlo_codegen.emitters import emit_kernel
from hlo_codegen.kernel_ir import parse_kernel
from hlo_codegen.llvm import host_stream, lower_to_host
from hlo_codegen.llvm.host import _phases
from hlo_codegen.llvm.host_stream import StreamedOutput, streamed_outputs
from hlo_run.host_kernel import load_host_kernel

# Four blocks of 32 threads; block b writes out[64 b, 64 b + 64) as x * 2 (two stores a thread).
ROWS = """
#map0 = (th_x, bl_x) -> (bl_x * 64 + th_x), domain: th_x in [0, 31], bl_x in [0, 3]
#map1 = (th_x, bl_x) -> (bl_x * 64 + th_x + 32), domain: th_x in [0, 31], bl_x in [0, 3]
kernel @rows grid = [4, 1, 1] block = [32, 1, 1] {
  param @arg0 : f32[256]
  param @arg1 : f32[256] written
  %th_x = thread_id {dim = x, range = [0, 31]} : index
  %bl_x = block_id {dim = x, range = [0, 3]} : index
  %two = constant {value = 2.0} : f32
  %0 = apply_indexing #map0 %th_x, %bl_x : index
  %1 = load @arg0 %0 : f32
  %2 = mulf %1, %two : f32
  store @arg1 %2, %0
  %3 = apply_indexing #map1 %th_x, %bl_x : index
  %4 = load @arg0 %3 : f32
  %5 = mulf %4, %two : f32
  store @arg1 %5, %3
}
"""


@pytest.fixture
def no_size_rule(monkeypatch):
    monkeypatch.setattr(host_stream, "STREAM_MIN_BYTES", 0)


def _streams(text: str) -> list[StreamedOutput]:
    kernel = parse_kernel(text)
    return streamed_outputs(kernel, _phases(kernel))


def test_an_output_each_block_writes_one_range_of_is_streamed(no_size_rule) -> None:
    assert _streams(ROWS) == [StreamedOutput("arg1", 0, 64, 64, 4)]
    strided = ROWS.replace("(bl_x * 64 + th_x)", "(th_x * 8 + bl_x)").replace(
        "(bl_x * 64 + th_x + 32)", "(th_x * 8 + bl_x + 4)")
    assert _streams(strided) == []  # block 0 writes 0, 4, 8, ...: not one range
    overlapping = ROWS.replace("(bl_x * 64 + th_x + 32)", "(bl_x * 64 + th_x + 16)")
    assert _streams(overlapping) == []  # some elements twice, the last 16 never
    read_back = ROWS.replace("%4 = load @arg0 %3", "%4 = load @arg1 %0")
    assert _streams(read_back) == []  # the kernel reads its output


def test_a_kernel_without_ops_streams_nothing(no_size_rule) -> None:
    empty = "kernel @nothing grid = [1, 1, 1] block = [32, 1, 1] {\n  param @arg0 : f32[64] written\n}\n"
    assert _streams(empty) == []
    assert "!nontemporal" not in lower_to_host(parse_kernel(empty))


def test_outputs_under_the_size_rule_keep_direct_stores() -> None:
    assert _streams(ROWS) == []
    assert "!nontemporal" not in lower_to_host(parse_kernel(ROWS))


@pytest.mark.parametrize("misalign", [0, 4])
def test_staged_copy_gives_the_direct_stores_values(no_size_rule, misalign: int) -> None:
    """Aligned, the copy is non-temporal; 4 bytes off a 32-byte boundary, plain stores."""
    ir = lower_to_host(parse_kernel(ROWS))
    assert ir.count("!nontemporal") == 1 and "fence seq_cst" in ir
    x = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    raw = np.full(256 + 64, -1, np.float32)
    start = (-raw.ctypes.data % 32) // 4 + misalign // 4
    out = raw[start:start + 256]
    for threads in (1, 2):
        out[:] = 0
        load_host_kernel(ir, "rows")([x, out], 4, threads=threads)
        np.testing.assert_array_equal(out, x * 2)
        assert (raw[:start] == -1).all() and (raw[start + 256:] == -1).all()


SOFTMAX = """
region_max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
region_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  p = f32[64,256]{1,0} parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[64]{0} reduce(p, ninf), dimensions={1}, to_apply=region_max
  bm = f32[64,256]{1,0} broadcast(mx), dimensions={0}
  d = f32[64,256]{1,0} subtract(p, bm)
  e = f32[64,256]{1,0} exponential(d)
  zero = f32[] constant(0)
  s = f32[64]{0} reduce(e, zero), dimensions={1}, to_apply=region_add
  bs = f32[64,256]{1,0} broadcast(s), dimensions={0}
  ROOT r = f32[64,256]{1,0} divide(e, bs)
}
ENTRY main {
  p = f32[64,256]{1,0} parameter(0)
  ROOT f = f32[64,256]{1,0} fusion(p), kind=kCustom, calls=fused, backend_config={"fusion_backend_config":{"kind":"__norm"}}
}
"""

TRANSPOSE = """
fused {
  p = f32[64,128]{1,0} parameter(0)
  t = f32[128,64]{1,0} transpose(p), dimensions={1,0}
  ROOT n = f32[128,64]{1,0} negate(t)
}
ENTRY main {
  p = f32[64,128]{1,0} parameter(0)
  ROOT f = f32[128,64]{1,0} fusion(p), kind=kInput, calls=fused
}
"""

LOOP = """
fused {
  p = f32[96,512]{1,0} parameter(0)
  e = f32[96,512]{1,0} exponential(p)
  ROOT n = f32[96,512]{1,0} negate(e)
}
ENTRY main {
  p = f32[96,512]{1,0} parameter(0)
  ROOT f = f32[96,512]{1,0} fusion(p), kind=kLoop, calls=fused
}
"""


@pytest.mark.parametrize("text,streams", [(SOFTMAX, True), (TRANSPOSE, False), (LOOP, None)],
                         ids=["softmax", "transpose", "loop"])
def test_emitted_kernels_with_the_size_rule_lifted(no_size_rule, text: str, streams) -> None:
    """Real emitters' kernels, every output that qualifies streamed, against the interpreter:
    the softmax's rows are its blocks' ranges, a transpose's tiles are not (None: either way)."""
    kernel = emit_kernel(fusion_of(text))
    found = streamed_outputs(kernel, _phases(kernel))
    if streams is not None:
        assert bool(found) == streams
    check_fusion(text)
