"""spmd-partitioning on small modules: cases of XLA's xla/service/spmd/spmd_partitioner_test.cc
(named after them; the HLO is theirs, the expected tree the one their EXPECT_THAT checks, written
for ours where it differs, with the reason) and a few of our own for the dot strategies. Each
case is also run: the partitioned module on N interpreter devices from random global arguments
must give what the unpartitioned module gives on one device."""

from __future__ import annotations

import re

import numpy as np
import pytest
from spmd_testlib import collective_opcodes, partition, run_global

from hlo_common.hlo.parser import parse_module


def _match(instr, pattern: str) -> bool:
    return _Pattern(pattern).matches(instr)


class _Pattern:
    """`copy(dynamic-slice(parameter, *, *))`: opcode, then operand patterns; `*` is anything,
    an opcode without parentheses takes any operands; `op:f32[2,3]` also checks the shape."""

    def __init__(self, text: str):
        self.tokens = re.findall(r"[\w\-\*]+(?::[a-z0-9]+\[[\d,]*\])?|[(),]", text)
        self.pos = 0
        self.tree = self._node()

    def _node(self):
        head = self.tokens[self.pos]
        self.pos += 1
        children = None
        if self.pos < len(self.tokens) and self.tokens[self.pos] == "(":
            self.pos += 1
            children = []
            while self.tokens[self.pos] != ")":
                if self.tokens[self.pos] == ",":
                    self.pos += 1
                    continue
                children.append(self._node())
            self.pos += 1
        return head, children

    def matches(self, instr, node=None) -> bool:
        (head, children) = node or self.tree
        if head == "*":
            return True
        op, _, shape = head.partition(":")
        if instr.opcode != op or (shape and instr.shape.to_string(print_layout=False) != shape):
            return False
        if children is None:
            return True
        return len(children) == len(instr.operands) and all(
            self.matches(o, c) for o, c in zip(instr.operands, children))


CASES = {
    # XLA: Copy(Reshape(Transpose(AllToAll(Reshape(Parameter))))), s32[8,1]; ours transposes the
    # split piece to the front before the all-to-all (an array all-to-all on dim 0)
    "TiledToTiledEven": (2, """HloModule module
ENTRY entry {
  %param= s32[8,2]{1,0} parameter(0), sharding={devices=[2,1]0,1}
  ROOT %copy = s32[8,2]{1,0} copy(%param), sharding={devices=[1,2]0,1}
}""", "copy:s32[8,1](reshape(transpose(all-to-all(transpose(reshape(parameter))))))", ["all-to-all"]),
    "BroadcastOnlyNewDimsSharded": (2, """HloModule module
ENTRY entry {
  constant = f32[4,3]{1,0} constant({{1,1,1},{1,1,1},{1,1,1},{1,1,1}}), sharding={replicated}
  ROOT broadcast = f32[3,4,3]{2,1,0} broadcast(constant), dimensions={1,2}, sharding={devices=[2,1,1]0,1}
}""", "broadcast:f32[2,4,3](constant)", []),  # 3 over 2: XLA's padded tile of 2 rows, as its test
    "BroadcastOnlyOldDimsSharded": (2, """HloModule module
ENTRY entry {
  constant = f32[4,3]{1,0} constant({{1,1,1},{1,1,1},{1,1,1},{1,1,1}}), sharding={replicated}
  ROOT broadcast = f32[4,4,3]{2,1,0} broadcast(constant), dimensions={1,2}, sharding={devices=[1,2,1]0,1}
}""", "broadcast:f32[4,2,3](dynamic-slice(constant, reshape, constant))", []),
    "BroadcastBothOldAndNewDimsSharded": (4, """HloModule module
ENTRY entry {
  constant = f32[4,3]{1,0} constant({{1,1,1},{1,1,1},{1,1,1},{1,1,1}}), sharding={replicated}
  ROOT broadcast = f32[4,4,3]{2,1,0} broadcast(constant), dimensions={1,2},
    sharding={devices=[2,2,1]0,1,2,3}
}""", "broadcast:f32[2,2,3](dynamic-slice:f32[2,3](constant, reshape, constant))", []),
    # XLA's f32[4,3] made f32[4,4]: its 3 columns split in 2 are uneven (not supported yet)
    "BroadcastBothOldAndNewDimsShardedPartiallySharded": (8, """HloModule module
ENTRY entry {
  param = f32[4,4] parameter(0), sharding={devices=[1,2,4]0,1,4,5,2,3,6,7 last_tile_dim_replicate}
  ROOT broadcast = f32[4,4,4] broadcast(param), dimensions={1,2},
    sharding={devices=[2,1,2,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}
}""", "broadcast:f32[2,4,2](parameter:f32[4,2])", []),
    "BroadcastPropagateTiledSharding": (2, """HloModule module
ENTRY entry {
  constant = f32[4,3]{1,0} constant({{1,1,1},{1,4,1},{1,3,1},{1,2,1}}), sharding={devices=[2,1]0,1}
  ROOT broadcast = f32[4,4,3]{2,1,0} broadcast(constant), dimensions={1,2}, sharding={devices=[1,2,1]0,1}
}""", "broadcast:f32[4,2,3](dynamic-slice(constant, reshape, constant))", []),
    # XLA's f32[4,32,32,128] cut to f32[4,32,32,8] to keep the run small
    "TiledToTiledReduceOutputReshard": (2, """HloModule module
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add = f32[] add(a, b)
}
ENTRY entry {
  %param0 = f32[4,32,32,8] parameter(0)
  %param0.copy = f32[4,32,32,8] copy(%param0), sharding={devices=[1,2,1,1]0,1}
  %constant.1 = f32[] constant(0), sharding={replicated}
  ROOT %reduce = f32[8] reduce(%param0.copy, %constant.1), dimensions={0,1,2},
    to_apply=%sum, sharding={devices=[2]0,1}
}""", "dynamic-slice:f32[4](all-reduce:f32[8](reduce(copy:f32[4,16,32,8](dynamic-slice(parameter, constant, "
          "reshape, constant, constant)), constant)), reshape)", ["all-reduce"]),
    "GetTupleElementTiled": (2, """HloModule module
ENTRY entry {
  param.0 = (f32[2,3]{1,0}, u32[2,3]{1,0}) parameter(0), sharding={{replicated}, {replicated}}
  gte.0 = f32[2,3]{1,0} get-tuple-element(param.0), index=0, sharding={devices=[2,1]0,1}
  gte.1 = u32[2,3]{1,0} get-tuple-element(param.0), index=1, sharding={devices=[2,1]0,1}
  ROOT %tuple = (f32[2,3]{1,0}, u32[2,3]{1,0}) tuple(gte.0, gte.1),
    sharding={{devices=[2,1]0,1},{devices=[2,1]0,1}}
}""", "tuple(dynamic-slice:f32[1,3](get-tuple-element(parameter), reshape, constant), "
          "dynamic-slice:u32[1,3](get-tuple-element(parameter), reshape, constant))", []),
    # XLA: all-reduce of a select on partition-id (device 0 alone holds a maximal constant); a
    # constant is on every device here, so the tile is sliced from it directly
    "SingleDeviceToTiled": (2, """HloModule module
ENTRY entry {
  %constant = s32[2,3]{1,0} constant({{1,1,1},{1,1,1}}), sharding={maximal device=0}
  ROOT %copy = s32[2,3]{1,0} copy(%constant), sharding={devices=[2,1]1,0}
}""", "copy:s32[1,3](dynamic-slice(constant, reshape, constant))", []),
    # xla/tools/tests/data/spmd.hlo (XLA's run_hlo_module test data): the rhs split along its
    # non-contracting dim, the output along the same dim: local dots, no communication (its 39296
    # rhs rows cut to 392 to keep the run small)
    "ToolsSpmdHlo": (2, """HloModule module
ENTRY entry {
  %lhs = f32[24,64] parameter(0)
  %lhs.copy = f32[24,64] copy(%lhs), sharding={replicated}
  %rhs = f32[392,64] parameter(1)
  %rhs.copy = f32[392,64] copy(%rhs), sharding={devices=[2,1]0,1}
  ROOT %dot = f32[24,392] dot(%lhs.copy, %rhs.copy), lhs_contracting_dims={1}, rhs_contracting_dims={1},
    sharding={devices=[1,2]0,1}
}""", "dot:f32[24,196](copy(parameter), copy(dynamic-slice(parameter, reshape, constant)))", []),
    # ours: both operands split along the contraction: local dot, all-reduce of the partial sums
    "DotContractingSplit": (4, """HloModule module
ENTRY entry {
  a = f32[8,16] parameter(0), sharding={devices=[1,4]<=[4]}
  b = f32[16,6] parameter(1), sharding={devices=[4,1]<=[4]}
  ROOT d = f32[8,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}""", "all-reduce:f32[8,6](dot:f32[8,6](parameter:f32[8,4], parameter:f32[4,6]))", ["all-reduce"]),
    # ours: batch split on both operands and the output: no communication
    "DotBatchSplit": (2, """HloModule module
ENTRY entry {
  a = f32[4,3,5] parameter(0), sharding={devices=[2,1,1]0,1}
  b = f32[4,5,2] parameter(1), sharding={devices=[2,1,1]0,1}
  ROOT d = f32[4,3,2] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_contracting_dims={1}, sharding={devices=[2,1,1]0,1}
}""", "dot:f32[2,3,2](parameter, parameter)", []),
    # ours: 2-D mesh, lhs rows over one axis and rhs columns over the other: each device computes
    # its output tile with no communication
    "DotNonContractingBothSides": (4, """HloModule module
ENTRY entry {
  a = f32[8,6] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  b = f32[6,4] parameter(1), sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  ROOT d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    sharding={devices=[2,2]<=[4]}
}""", "dot:f32[4,2](parameter:f32[4,6], parameter:f32[6,2])", []),
    # ours: transpose of a row-split matrix is column-split, propagated without communication
    "TransposePropagates": (2, """HloModule module
ENTRY entry {
  a = f32[4,6] parameter(0), sharding={devices=[2,1]0,1}
  t = f32[6,4] transpose(a), dimensions={1,0}
  ROOT n = f32[6,4] negate(t), sharding={devices=[1,2]0,1}
}""", "negate:f32[6,2](transpose(parameter))", []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_partitioned_tree_and_numbers(name):
    n, text, pattern, collectives = CASES[name]
    module = partition(text, n, name)
    root = module.entry.root
    assert _match(root, pattern), f"{root.name}: {module.entry.root}\n" + "\n".join(
        str(i.opcode) + " " + i.shape.to_string(print_layout=False) for i in module.entry.instructions)
    assert collective_opcodes(module) == collectives
    _check_numbers(text, module, n)


def _check_numbers(text: str, module, n: int) -> None:
    from hlo_common.interpreter.evaluator import Evaluator

    original = parse_module(text, "original")
    rng = np.random.default_rng(7)

    def random(shape):
        if shape.is_tuple:
            return tuple(random(s) for s in shape.tuple_shapes)
        return (rng.standard_normal(shape.dims) * 4).astype(shape.element_type.np_dtype)

    args = [random(p.shape) for p in sorted(original.entry.parameters, key=lambda p: p.parameter_number)]
    expected = Evaluator().evaluate(original, list(args))
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    got = run_global(module, args, n, [np.shape(e) for e in expected])
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_reduce_scatter_creator_turns_the_sharded_contraction_into_a_reduce_scatter():
    """A contraction split 4 ways whose result is wanted split by rows: the partitioner writes
    all-reduce + dynamic-slice, reduce-scatter-creator one reduce-scatter (as XLA:GPU's pipeline)."""
    text = """HloModule module
ENTRY entry {
  a = f32[16,16] parameter(0), sharding={devices=[1,4]<=[4]}
  b = f32[16,6] parameter(1), sharding={devices=[4,1]<=[4]}
  d = f32[16,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
  ROOT n = f32[16,6] negate(d), sharding={devices=[4,1]<=[4]}
}"""
    before = partition(text, 4, "rs")
    assert collective_opcodes(before) == ["all-reduce"]
    module = partition(text, 4, "rs", passes=("sharding-propagation", "spmd-partitioning", "dce",
                                              "reduce-scatter-creator", "dce"))
    assert collective_opcodes(module) == ["reduce-scatter"]
    assert _match(module.entry.root, "negate:f32[4,6](reduce-scatter:f32[4,6](dot:f32[16,6]))")
    _check_numbers(text, module, 4)
