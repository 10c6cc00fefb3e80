"""Loop fusions whose roots differ in size, and shapes the loop emitter must refuse cleanly.

XLA's input-slices fusions (several slices of one concatenate) and the loop fallback of
multi-output triton fusions (a reduce next to its input, a slice next to the sliced value) have
roots of different element counts; one loop over the first output cannot index them, so the loop
emitter gives each size its own thread loop. Expected values come from numpy (written out
below) and from the reference interpreter through `check` (a separate code path); `check` also
links the PTX for sm_90 when nvJitLink is importable.
"""

from __future__ import annotations

import numpy as np
import pytest

from emitter_testlib import check
from elemental_harness import fusion_of, random_args, run_on_host
from hlo_codegen.emitters import emit_kernel
from hlo_codegen.emitters.loop import LoopFusion
from hlo_codegen.indexing.affine import dim
from hlo_common.errors import HloError


def test_input_slices_of_a_concatenate() -> None:
    """XLA's fused_slice test: three slices (one empty) of concat(mul, add)."""
    fusion = fusion_of("""f {
      a = f32[64] parameter(0)
      b = f32[64] parameter(1)
      c = f32[63] parameter(2)
      d = f32[63] parameter(3)
      m = f32[64] multiply(a, b)
      s = f32[63] add(c, d)
      cat = f32[127] concatenate(m, s), dimensions={0}
      sl1 = f32[64] slice(cat), slice={[0:64]}
      sl2 = f32[63] slice(cat), slice={[64:127]}
      sl3 = f32[0] slice(cat), slice={[127:127]}
      ROOT t = (f32[64], f32[63], f32[0]) tuple(sl1, sl2, sl3)
    }""")
    assert len(LoopFusion(fusion).groups) == 3
    args = random_args(fusion)
    got = run_on_host(fusion, args, emit_kernel(fusion))
    cat = np.concatenate([args[0] * args[1], args[2] + args[3]])
    np.testing.assert_allclose(got[0], cat[:64], rtol=1e-6)
    np.testing.assert_allclose(got[1], cat[64:], rtol=1e-6)
    assert got[2].shape == (0,)
    check(fusion)


def test_input_slices_with_a_layout() -> None:
    """XLA's input_slices emitter test: two 4-d slices of one operand in layout {2,1,0,3}."""
    fusion = fusion_of("""f {
      p = f32[2,4,5,7]{2,1,0,3} parameter(0)
      sl0 = f32[1,3,3,5]{2,1,0,3} slice(p), slice={[0:1], [1:4], [0:3], [2:7]}
      sl1 = f32[1,2,3,5]{2,1,0,3} slice(p), slice={[0:1], [0:2], [0:3], [2:7]}
      ROOT t = (f32[1,3,3,5]{2,1,0,3}, f32[1,2,3,5]{2,1,0,3}) tuple(sl0, sl1)
    }""")
    args = random_args(fusion)
    got = run_on_host(fusion, args, emit_kernel(fusion))
    np.testing.assert_array_equal(got[0], args[0][0:1, 1:4, 0:3, 2:7])
    np.testing.assert_array_equal(got[1], args[0][0:1, 0:2, 0:3, 2:7])
    check(fusion)


def test_reduce_next_to_its_input() -> None:
    """Triton's bitcast_reduce_stride1 test as a loop fusion: the abs feeds a small reduce and is
    itself an output four times larger (the subgraph call used to get the reduce's indices)."""
    fusion = fusion_of("""f {
      p = f32[64] parameter(0)
      a = f32[64] abs(p)
      bc = f32[4,4,4] bitcast(a)
      z = f32[] constant(0)
      r = f32[4,4] reduce(bc, z), dimensions={1}, to_apply={
        x = f32[] parameter(0)
        y = f32[] parameter(1)
        ROOT m = f32[] maximum(x, y) }
      ROOT t = (f32[4,4], f32[64]) tuple(r, a)
    }""")
    args = random_args(fusion)
    got = run_on_host(fusion, args, emit_kernel(fusion))
    np.testing.assert_array_equal(got[1], np.abs(args[0]))
    np.testing.assert_array_equal(got[0], np.maximum(np.abs(args[0]).reshape(4, 4, 4).max(axis=1), 0))
    check(fusion)


def test_slice_next_to_the_sliced_value_and_same_size_roots() -> None:
    """Three sizes, one of them holding four roots of different dims and layouts (written at
    one physical position); the launch covers the largest."""
    fusion = fusion_of("""f {
      p = f32[64] parameter(0)
      q = s32[7,9] parameter(1)
      a = f32[64] abs(p)
      s = f32[63] slice(a), slice={[0:63]}
      n = f32[63] negate(s)
      c = s32[7,9]{0,1} copy(q)
      bq = s32[63] bitcast(q)
      bc = f32[2,64]{0,1} broadcast(a), dimensions={1}
      ROOT t = (f32[63], f32[64], s32[7,9]{0,1}, s32[63], s32[7,9], f32[2,64]{0,1}) tuple(n, a, c, bq, q, bc)
    }""")
    assert [len(g) for g in LoopFusion(fusion).groups] == [4, 1, 1]
    args = random_args(fusion)
    got = run_on_host(fusion, args, emit_kernel(fusion))
    np.testing.assert_array_equal(got[0], -np.abs(args[0][:63]))
    np.testing.assert_array_equal(got[1], np.abs(args[0]))
    np.testing.assert_array_equal(got[2], args[1])
    np.testing.assert_array_equal(got[3], args[1].reshape(-1))
    np.testing.assert_array_equal(got[4], args[1])
    np.testing.assert_array_equal(got[5], np.broadcast_to(np.abs(args[0]), (2, 64)))
    check(fusion)


def test_tuple_of_different_sizes_is_an_elemental_error() -> None:
    """The elemental tuple rule names the root no index of the first output reaches."""
    from hlo_codegen.elemental import ElementalEmitter, ElementalError
    from hlo_codegen.kernel_ir.builder import IRBuilder
    from hlo_codegen.kernel_ir.ir import Kernel

    fusion = fusion_of("""f {
      p = f32[8] parameter(0)
      s = f32[4] slice(p), slice={[0:4]}
      ROOT t = (f32[4], f32[8]) tuple(s, p)
    }""")
    kernel = Kernel("k", (1, 1, 1), (1, 1, 1))
    elemental = ElementalEmitter(kernel, fusion.fused_computation(), {0: "arg0"})
    b = IRBuilder(kernel)
    with pytest.raises(ElementalError, match="%p has f32\\[8\\]"):
        elemental.call_root(b, [b.index(0)])


def test_dynamic_shapes_are_refused_with_a_project_error() -> None:
    """A dynamic dimension (-1) used to reach the thread map as `mod -1` (a ValueError)."""
    fusion = fusion_of("f { p = f32[?,784] parameter(0) ROOT a = f32[?,784] abs(p) }")
    with pytest.raises(HloError, match="dynamic shape"):
        emit_kernel(fusion)
    for bad in (lambda: dim(0) % -1, lambda: dim(0).floordiv(0)):
        with pytest.raises(HloError, match="divisor"):
            bad()
        with pytest.raises(ValueError):  # still what existing `except ValueError` handlers catch
            bad()
