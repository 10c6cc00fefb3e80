"""The computation partitioner: the seed's examples (log read through a transpose; slice and pad of
an add), XLA's loop tests (two users with consistent indexing stay together; the slice chain is
cut at every add so nothing is recomputed), tuple roots, concatenate and gather cuts, forced
roots, and what emission does with the partition (functions per subgraph, calls across).
"""

from __future__ import annotations

import pytest

from hlo_codegen.emitters import emit_kernel
from hlo_codegen.partitioner import partition_computation, sanitize_name
from hlo_common.hlo.parser import parse_module


def partition(text: str, is_root=None):
    module = parse_module(text)
    comp = module.entry
    return partition_computation(comp, is_root), comp


def groups(p) -> list[tuple[list[str], list[str]]]:
    """(instruction names, root names) per subgraph, in the partition's order (operands first)."""
    return [([i.name for i in s.instructions], [r.name for r in s.roots]) for s in p.subgraphs]


def test_log_read_at_two_indexings_is_its_own_function() -> None:
    p, comp = partition("""f {
      p0 = f32[8,8] parameter(0)
      l = f32[8,8] log(p0)
      t = f32[8,8] transpose(l), dimensions={1,0}
      ROOT a = f32[8,8] add(l, t)
    }""")
    assert groups(p) == [(["l"], ["l"]), (["t", "a"], ["a"])]
    assert p.root_subgraph.name == "f_a" and p.find_subgraph(comp.instruction("l")).name == "f_l"


def test_slice_and_pad_of_an_add() -> None:
    p, _ = partition("""f {
      p0 = f32[10] parameter(0)
      p1 = f32[] parameter(1)
      a = f32[10] add(p0, p0)
      s = f32[8] slice(a), slice={[1:9]}
      q = f32[8] pad(a, p1), padding=0_-2
      ROOT m = f32[8] multiply(s, q)
    }""")
    assert groups(p) == [(["a"], ["a"]), (["s", "q", "m"], ["m"])]


def test_consistent_users_stay_together() -> None:
    p, _ = partition("""f {
      p0 = f32[2] parameter(0)
      p1 = f32[2] parameter(1)
      add = f32[2] add(p0, p1)
      sub = f32[2] subtract(p0, p1)
      mul = f32[2] multiply(add, sub)
      div = f32[2] divide(add, sub)
      ROOT atan2 = f32[2] atan2(mul, div)
    }""")
    assert groups(p) == [(["add", "sub", "mul", "div", "atan2"], ["atan2"])]


def test_slice_chain_is_cut_at_each_add() -> None:
    lines = ["p = f32[6] parameter(0)"]
    prev = "p"
    for k, n in enumerate((5, 4, 3, 2)):
        lines += [f"s{k}a = f32[{n}] slice({prev}), slice={{[0:{n}]}}",
                  f"s{k}b = f32[{n}] slice({prev}), slice={{[1:{n + 1}]}}",
                  f"{'ROOT ' if n == 2 else ''}add{k} = f32[{n}] add(s{k}a, s{k}b)"]
        prev = f"add{k}"
    p, _ = partition("f {\n" + "\n".join(lines) + "\n}")
    assert [r for _, r in groups(p)] == [["add0"], ["add1"], ["add2"], ["add3"]]


def test_tuple_root_and_multi_root_subgraphs() -> None:
    p, _ = partition("""f {
      p0 = f64[8] parameter(0)
      p1 = f64[8] parameter(1)
      mn = f64[8] minimum(p0, p1)
      mx = f64[8] maximum(p0, p1)
      bc = f64[2,4] bitcast(mx)
      ROOT t = (f64[8], f64[2,4]) tuple(mn, bc)
    }""")
    assert groups(p) == [(["mn", "mx", "bc", "t"], ["t"])]
    assert p.root_subgraph.index_shape.dims == (8,)


def test_concatenate_and_gather_index_users_cut() -> None:
    p, _ = partition("""f {
      p0 = f32[4] parameter(0)
      e = f32[4] exponential(p0)
      ROOT c = f32[8] concatenate(e, p0), dimensions={0}
    }""")
    assert groups(p) == [(["e"], ["e"]), (["c"], ["c"])]
    p, _ = partition("""f {
      p0 = f32[30,20] parameter(0)
      p1 = s32[10,2] parameter(1)
      i = s32[10,2] negate(p1)
      ROOT g = f32[10,4,8] gather(p0, i), offset_dims={1,2}, collapsed_slice_dims={},
          start_index_map={0,1}, index_vector_dim=1, slice_sizes={4,8}
    }""")
    assert groups(p) == [(["i"], ["i"]), (["g"], ["g"])]


def test_forced_roots() -> None:
    text = """f {
      p0 = f32[4] parameter(0)
      e = f32[4] exponential(p0)
      ROOT n = f32[4] negate(e)
    }"""
    assert len(partition(text)[0].subgraphs) == 1
    p, _ = partition(text, lambda i: i.name == "e")
    assert groups(p) == [(["e"], ["e"]), (["n"], ["n"])]


def test_to_string() -> None:
    p, _ = partition("f { p0 = f32[4] parameter(0) ROOT n = f32[4] negate(p0) }")
    want = "PartitionedComputation f:\n  SUBGRAPH f_n {\n    ROOT n = f32[4]{0} negate(p0)\n  }"
    assert p.to_string() == want


@pytest.mark.parametrize("name,want", [("fusion.3", "fusion_3"), ("add-1", "add_1"), ("0x", "_0x")])
def test_sanitize_name(name: str, want: str) -> None:
    assert sanitize_name(name) == want


def test_functions_called_twice_stay_functions() -> None:
    module = parse_module("""
    f {
      p0 = f32[8] parameter(0)
      l = f32[8] log(p0)
      r = f32[8] reverse(l), dimensions={0}
      ROOT a = f32[8] add(l, r)
    }
    ENTRY e { p = f32[8] parameter(0) ROOT r = f32[8] fusion(p), kind=kLoop, calls=f }""")
    kernel = emit_kernel(module.entry.root)
    assert [f.name for f in kernel.functions] == ["f_l"]
    from hlo_codegen.kernel_ir import print_kernel

    assert print_kernel(kernel).count("call @f_l") == 2
