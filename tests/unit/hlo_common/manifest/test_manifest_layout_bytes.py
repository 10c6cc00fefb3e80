"""Arrays <-> buffer bytes in physical layout order (what constants in a manifest and hlo-run's
arguments and results go through), checked against hand-computed byte sequences."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.errors import HloError
from hlo_common.manifest.layout_bytes import array_to_bytes, bytes_to_array
from hlo_common.hlo.parser_scanner import Scanner


def shape(text: str):
    return Scanner(text, "test").shape()


def test_minor_to_major_decides_the_byte_order():
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    assert array_to_bytes(a, shape("s16[2,3]{1,0}")) == bytes([0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0])
    assert array_to_bytes(a, shape("s16[2,3]{0,1}")) == bytes([0, 0, 3, 0, 1, 0, 4, 0, 2, 0, 5, 0])
    b = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    data = array_to_bytes(b, shape("u8[2,3,4]{1,2,0}"))  # dim 1 fastest, then 2, then 0
    assert list(data[:6]) == [0, 4, 8, 1, 5, 9]
    for layout in ("{2,1,0}", "{0,1,2}", "{1,0,2}", "{2,0,1}"):
        s = shape(f"u8[2,3,4]{layout}")
        assert np.array_equal(bytes_to_array(array_to_bytes(b, s), s), b)


def test_pred_bf16_and_scalars():
    assert array_to_bytes(np.array([True, False, True]), shape("pred[3]")) == b"\x01\x00\x01"
    x = np.array([1.0, -2.0], dtype=ml_dtypes.bfloat16)
    assert array_to_bytes(x, shape("bf16[2]")) == bytes([0x80, 0x3F, 0x00, 0xC0])
    assert bytes_to_array(b"\x07\x00\x00\x00", shape("s32[]")) == 7


def test_packed_sub_byte_layouts_put_the_first_element_in_the_low_bits():
    s4 = np.array([-8, 7, -1, 0, 3], dtype=ml_dtypes.int4)
    s = shape("s4[5]{0:E(4)}")
    assert array_to_bytes(s4, s) == bytes([0x78, 0x0F, 0x03])
    assert np.array_equal(bytes_to_array(bytes([0x78, 0x0F, 0x03]), s), s4)
    u2 = np.array([1, 2, 3, 0, 3], dtype=ml_dtypes.uint2)
    assert array_to_bytes(u2, shape("u2[5]{0:E(2)}")) == bytes([0b00111001, 0b11])
    unpacked = shape("s4[5]")  # without E(4): one byte per element
    assert len(array_to_bytes(s4, unpacked)) == 5


def test_packing_that_does_not_fit_is_refused():
    with pytest.raises(HloError, match="2-bit packing of s4"):
        array_to_bytes(np.zeros(4, ml_dtypes.int4), shape("s4[4]{0:E(2)}"))
