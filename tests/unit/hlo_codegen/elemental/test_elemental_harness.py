"""The emitter/lowering tests' shared harness (tests/helpers/elemental_harness.py) checked on its own:
buffers in physical layout order (packed sub-byte types low bits first) and run_hlo_module's
both-bounds comparison."""

from __future__ import annotations

import numpy as np
import pytest

from elemental_harness import assert_close, from_buffer, fusion_of, random_args, to_buffer
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape import Shape


@pytest.mark.parametrize("layout,etype", [("{1,0}", "f32"), ("{0,1}", "s32"), ("{0:E(4)}", "s4"),
                                          ("{0:E(2)}", "u2")])
def test_buffers_round_trip(layout: str, etype: str) -> None:
    dims = "[5,3]" if layout.count(",") else "[11]"
    shape = parse_module(f"ENTRY e {{ ROOT p = {etype}{dims}{layout} parameter(0) }}").entry.root.shape
    a = random_args(fusion_of(f"f {{ p = {etype}{dims}{layout} parameter(0) ROOT n = {etype}{dims}{layout} "
                              f"copy(p) }}"))[0]
    buf = to_buffer(a, shape)
    assert buf.ndim == 1 and buf.size == shape.byte_size() // max(1, shape.element_type.bits // 8)
    assert np.array_equal(from_buffer(buf, shape).view(np.uint8), a.view(np.uint8))


def test_packed_buffer_is_low_bits_first() -> None:
    shape = parse_module("ENTRY e { ROOT p = s4[3]{0:E(4)} parameter(0) }").entry.root.shape
    import ml_dtypes

    buf = to_buffer(np.array([1, -2, 3], ml_dtypes.int4), shape)
    assert list(buf) == [0xE1, 0x03]


def test_assert_close_uses_both_bounds() -> None:
    shape = Shape.array("f32", (3,))
    assert_close(np.array([1.0, 1e6, np.nan], np.float32), np.array([1.00005, 1e6 + 50, np.nan], np.float32),
                 shape)
    with pytest.raises(AssertionError):
        assert_close(np.array([1.0], np.float32), np.array([1.01], np.float32), shape)
