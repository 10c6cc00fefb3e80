"""Module docstring examples, error paths and small API guarantees of hlo_codegen.indexing."""

from __future__ import annotations

import doctest
import importlib

import pytest

from hlo_codegen.indexing import (
    OUTPUT_TO_INPUT, IndexingError, compute_output_to_input_indexing, fusion_output_to_input_indexing,
)
from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import OPCODES, is_elementwise
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape import Shape

MODULES = ["affine", "canonical", "simplify", "interval", "indexing_map", "serialization",
           "shape_indexing", "operand_indexing", "op_indexing", "fusion_indexing", "thread_indexing"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"hlo_codegen.indexing.{name}")
    failures, _ = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failures == 0


def test_malformed_instruction_raises_indexing_error_naming_it():
    p = HloInstruction("p", "parameter", Shape.array("f32", (4,)))
    s = HloInstruction("my_slice", "slice", Shape.array("f32", (2,)), [p])
    with pytest.raises(IndexingError) as err:
        compute_output_to_input_indexing(s)
    assert "%my_slice" in str(err.value) and "slice" in str(err.value)
    assert isinstance(err.value, HloError)


def test_every_elementwise_opcode_has_identity_maps():
    for name, op in OPCODES.items():
        if not is_elementwise(name):
            continue
        shape = Shape.array("f32", (3, 2))
        operands = [HloInstruction(f"p{i}", "parameter", shape) for i in range(op.arity or 2)]
        indexing = compute_output_to_input_indexing(HloInstruction("x", name, shape, operands))
        assert [str(m) for g in indexing.indexing_maps for m in (oi.map for oi in g)] == [
            "(d0, d1) -> (d0, d1), domain: d0 in [0, 2], d1 in [0, 1]"] * len(operands), name
    assert {"broadcast", "reshape", "bitcast", "transpose", "slice", "reverse", "pad", "concatenate",
            "iota", "dynamic-slice", "dynamic-update-slice", "gather", "reduce", "reduce-window",
            "dot", "fusion"} <= set(OUTPUT_TO_INPUT)


def test_non_canonical_gather_is_undefined():
    m = parse_module("""ENTRY e { p = f32[5,6] parameter(0)
      i = s32[3] parameter(1)
      ROOT g = f32[3,6] gather(p, i), offset_dims={1}, collapsed_slice_dims={0},
        start_index_map={0}, index_vector_dim=1, slice_sizes={1,6} }""")
    indexing = compute_output_to_input_indexing(m.entry.root)
    assert indexing.to_string() == "operand id = 0 unknown indexing operand id = 1 unknown indexing"


def test_multi_output_fusion_picks_the_root_of_each_output():
    m = parse_module("""f { p0 = f32[4,6] parameter(0)
      t = f32[6,4] transpose(p0), dimensions={1,0}
      n = f32[4,6] negate(p0)
      ROOT out = (f32[6,4], f32[4,6]) tuple(t, n) }
    ENTRY e { p = f32[4,6] parameter(0)
      ROOT r = (f32[6,4], f32[4,6]) fusion(p), kind=kLoop, calls=f }""")
    fusion = m.entry.root
    assert [str(x) for x in fusion_output_to_input_indexing(fusion, 0).maps(0)] == [
        "(d0, d1) -> (d1, d0), domain: d0 in [0, 5], d1 in [0, 3]"]
    assert [str(x) for x in fusion_output_to_input_indexing(fusion, 1).maps(0)] == [
        "(d0, d1) -> (d0, d1), domain: d0 in [0, 3], d1 in [0, 5]"]
