"""sharding-propagation through slice, pad, concatenate, dynamic-slice, dynamic-update-slice,
gather, scatter and convolution, forward (an annotated operand gives the result its sharding)
and backward (an annotated result gives an unannotated operand its sharding), as XLA's
sharding_propagation.cc carries them (`hlo_opt.spmd.window_rules`, `gather_dims`,
`conv_handlers`)."""

from __future__ import annotations

import pytest
from spmd_testlib import partition

ADD = """add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""

# name: (op line using %a (and %b, %i), the other parameters, a's shape, a's sharding,
#        the op's shape, the op's expected sharding)
FORWARD = {
    "slice": ("f32[8,4] slice(%a), slice={[2:10], [0:4]}", "", "f32[16,4]", "{devices=[2,1]0,1}",
              "{devices=[2,1]<=[2]}"),
    "pad": ("f32[20,4] pad(%a, %z), padding=2_2x0_0", "%z = f32[] constant(0)", "f32[16,4]",
            "{devices=[2,1]0,1}", "{devices=[2,1]<=[2]}"),
    "concatenate": ("f32[16,8] concatenate(%a, %b), dimensions={1}", "%b = f32[16,4] parameter(1)",
                    "f32[16,4]", "{devices=[2,1]0,1}", "{devices=[2,1]<=[2]}"),
    # the sliced dim replicates, the whole dim keeps its tiles
    "dynamic-slice": ("f32[4,4] dynamic-slice(%a, %z, %z), dynamic_slice_sizes={4,4}",
                      "%z = s32[] constant(1)", "f32[16,4]", "{devices=[2,2]<=[4]}",
                      "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    "gather-indices": (("f32[8,6] gather(%t, %a), offset_dims={1}, collapsed_slice_dims={0}, "
                        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}"),
                       "%t = f32[10,6] parameter(1)", "s32[8,1]", "{devices=[2,1]0,1}",
                       "{devices=[2,1]<=[2]}"),
    "gather-operand": (("f32[3,6] gather(%a, %i), offset_dims={1}, collapsed_slice_dims={0}, "
                        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}"),
                       "%i = s32[3,1] parameter(1)", "f32[10,6]", "{devices=[1,2]0,1}", "{devices=[1,2]<=[2]}"),
    "convolution": ("f32[4,6,6,5] convolution(%a, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
                    "%k = f32[3,3,3,5] parameter(1)", "f32[4,6,6,3]", "{devices=[2,1,1,1]0,1}",
                    "{devices=[2,1,1,1]<=[2]}"),
}


def _module(op, others, shape, sharding, root_sharding=None, param_sharding=True):
    root = f", sharding={root_sharding}" if root_sharding else ""
    param = f", sharding={sharding}" if param_sharding else ""
    return f"""HloModule m
{ADD}ENTRY e {{
  %a = {shape} parameter(0){param}
  {others}
  %op = {op}
  ROOT %r = {op.split(' ')[0]} negate(%op){root}
}}"""


def _sharding(module, name):
    return str(next(i for i in module.entry.instructions if i.name == name).sharding)


@pytest.mark.parametrize("name", sorted(FORWARD))
def test_forward(name):
    op, others, shape, sharding, expected = FORWARD[name]
    module = partition(_module(op, others, shape, sharding, root_sharding="{replicated}"), 4 if "2,2" in sharding
                       else 2, name, passes=("sharding-propagation",))
    assert _sharding(module, "op") == expected


BACKWARD = {
    # (op line, others, a's shape, the op's annotation, what %a (unannotated) gets)
    "slice": ("f32[8,4] slice(%c), slice={[2:10], [0:4]}", "f32[16,4]", "{devices=[2,1]0,1}", "{devices=[2,1]<=[2]}"),
    "pad": ("f32[20,4] pad(%c, %z), padding=2_2x0_0", "f32[16,4]", "{devices=[2,1]0,1}", "{devices=[2,1]<=[2]}"),
    "scatter-updates": (("f32[10,6] scatter(%t, %i, %c), update_window_dims={1}, inserted_window_dims={0}, "
                         "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add"),
                        "f32[3,6]", "{devices=[1,2]0,1}", "{devices=[1,2]<=[2]}"),
    "convolution-kernel": (("f32[4,6,6,6] convolution(%x, %c), window={size=3x3 pad=1_1x1_1}, "
                            "dim_labels=b01f_01io->b01f"), "f32[3,3,3,6]", "{devices=[1,1,1,2]0,1}",
                           "{devices=[1,1,1,2]<=[2]}"),
}


@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_backward(name):
    op, shape, annotated, expected = BACKWARD[name]
    text = f"""HloModule m
{ADD}ENTRY e {{
  %a = {shape} parameter(0), sharding={{replicated}}
  %c = {shape} exponential(%a)
  %z = f32[] constant(0)
  %t = f32[10,6] parameter(1), sharding={{replicated}}
  %i = s32[3,1] parameter(2), sharding={{replicated}}
  %x = f32[4,6,6,3] parameter(3), sharding={{replicated}}
  %op = {op}, sharding={annotated}
  ROOT %r = {op.split(' ')[0]} negate(%op), sharding={annotated}
}}"""
    module = partition(text, 2, name, passes=("sharding-propagation",))
    assert _sharding(module, "c") == expected


def test_a_dynamic_update_slice_keeps_its_operands_split_along_the_updated_dim():
    text = """HloModule m
ENTRY e {
  %cache = f32[2,16,3] parameter(0), sharding={devices=[1,4,1]<=[4]}
  %u = f32[2,1,3] parameter(1), sharding={replicated}
  %pos = s32[] parameter(2), sharding={replicated}
  %zero = s32[] constant(0)
  %dus = f32[2,16,3] dynamic-update-slice(%cache, %u, %zero, %pos, %zero)
  %e = f32[2,16,3] exponential(%dus)
  ROOT %r = f32[2,16,3] negate(%e), sharding={replicated}
}"""
    module = partition(text, 4, "dus", passes=("sharding-propagation",))
    assert _sharding(module, "dus") == "{devices=[1,4,1]<=[4]}"
    assert _sharding(module, "e") == "{devices=[1,4,1]<=[4]}"
