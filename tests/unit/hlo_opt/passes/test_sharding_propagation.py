"""sharding-propagation: user annotations stay as written, every other entry instruction gets a
sharding carried forward and backward (xla/service/sharding_propagation.cc), and the Shardy
attributes jax writes import to the shardings XLA's text has."""

from __future__ import annotations

import pytest

from hlo_common.hlo.parser import parse_module
from hlo_common.hlo_pass.pass_base import PASS_REGISTRY
from hlo_opt.passes import load_all_passes


def _propagate(text: str, n: int):
    load_all_passes()
    module = parse_module(text, "m")
    module.set_header_attr("num_partitions", str(n))
    PASS_REGISTRY["sdy-round-trip-import"]().run(module)
    PASS_REGISTRY["sharding-propagation"]().run(module)
    return {i.name: str(i.sharding) for i in module.entry.instructions}


def test_forward_through_elementwise_transpose_reshape_and_reduce():
    got = _propagate("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[8,6] parameter(0), sharding={devices=[4,1]<=[4]}
  e = f32[8,6] exponential(p)
  t = f32[6,8] transpose(e), dimensions={1,0}
  r = f32[6,2,4] reshape(t)
  z = f32[] constant(0)
  s = f32[6,2] reduce(r, z), dimensions={2}, to_apply=add
  ROOT c = f32[6,2] copy(s)
}""", 4)
    assert got["e"] == "{devices=[4,1]<=[4]}"
    assert got["t"] == "{devices=[1,4]<=[4]}"
    # the 8 columns split 4 ways: the reshape's major part (2) cannot hold 4 tiles, so the tiling
    # does not pass and the reshape is replicated
    assert got["r"] == "{replicated}"
    assert got["c"] == "{replicated}"  # an unannotated root is replicated (as jax's default)


def test_backward_from_an_annotated_user_into_broadcast_and_constant():
    """q is first replicated by the forward sweep from p; the user's split refines it."""
    got = _propagate("""HloModule m
ENTRY e {
  k = f32[] constant(2)
  b = f32[8,4] broadcast(k), dimensions={}
  p = f32[4] parameter(0), sharding={replicated}
  q = f32[8,4] broadcast(p), dimensions={1}
  a = f32[8,4] add(b, q)
  ROOT n = f32[8,4] negate(a), sharding={devices=[2,1]0,1}
}""", 2)
    # written as XLA prints the shardings it makes: an iota
    assert got["a"] == got["b"] == got["q"] == "{devices=[2,1]<=[2]}"
    assert got["p"] == "{replicated}" and got["k"] == "{replicated}"


def test_user_annotations_are_never_changed():
    got = _propagate("""HloModule m
ENTRY e {
  p = f32[8,4] parameter(0), sharding={devices=[2,1]0,1}
  s = f32[8,4] custom-call(p), custom_call_target="Sharding", sharding={devices=[1,2]0,1}
  ROOT n = f32[8,4] negate(s), sharding={devices=[2,1]0,1}
}""", 2)
    assert got == {"p": "{devices=[2,1]0,1}", "s": "{devices=[1,2]0,1}", "n": "{devices=[2,1]0,1}"}


def test_dot_output_from_both_operands_on_a_2d_mesh():
    got = _propagate("""HloModule m
ENTRY e {
  a = f32[8,6] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  b = f32[6,4] parameter(1), sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  d = f32[8,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[8,4] copy(d), sharding={replicated}
}""", 4)
    assert got["d"] == "{devices=[2,2]<=[4]}"


def test_single_partition_leaves_the_module_alone():
    got = _propagate("""HloModule m
ENTRY e {
  p = f32[8] parameter(0), sharding={devices=[2]0,1}
  ROOT n = f32[8] negate(p)
}""", 1)
    assert got == {"p": "{devices=[2]0,1}", "n": "None"}


@pytest.mark.parametrize("sdy, expected", [
    ('[{"x"}, {}]', "{devices=[4,1]<=[4]}"),
    ('[{}, {"x"}]', "{devices=[1,4]<=[4]}"),
    ('[{"x":(1)2}, {"x":(2)2}]', "{devices=[2,2]<=[4]}"),    # sub-axes: the major and minor halves
    ('[{"x":(2)2}, {}]', "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"),
    ('[{}, {}]', "{replicated}"),
])
def test_shardy_attributes_import(sdy, expected):
    text = ('HloModule m, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=4]>}}\n'
            'ENTRY e {\n  p = f32[8,8] parameter(0)\n'
            '  ROOT r = f32[8,8] custom-call(p), custom_call_target="xla.sdy.FuncResultSharding", '
            'custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding='
            '"#sdy.sharding_per_value<[<@mesh, ' + sdy.replace('"', '\\"') + '>]>"}\n}\n')
    load_all_passes()
    module = parse_module(text, "m")
    PASS_REGISTRY["sdy-round-trip-import"]().run(module)
    root = module.entry.root
    assert root.attrs["custom_call_target"] == "Sharding" and "custom_call_has_side_effect" not in root.attrs
    assert str(root.sharding) == expected
