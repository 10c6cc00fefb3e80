"""hlo_common.gpu.hlo_fusion_analysis: emitter kinds, heroes, reduction dims, transpose detection, and
producer+consumer analyses equal to the analysis of the fusion actually built (written out)."""

from __future__ import annotations

import pytest

from hlo_common.gpu.hlo_fusion_analysis import FusionAnalysis, fusion_kind_for_emitter
from hlo_common.gpu.ir_emission_utils import find_non_trivial_hero, tiled_transpose_description
from hlo_common.gpu.reduction_utils import reduction_dimensions
from hlo_common.hlo.ir import parse_module

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"


def entry(text: str):
    return parse_module(ADD + text).entry


@pytest.mark.parametrize("shape,dims,is_row,expected", [
    ("f32[128,1024]{1,0}", "{1}", True, (1, 128, 1024)),
    ("f32[128,1024]{1,0}", "{0}", False, (1, 128, 1024)),
    ("f32[8,128,1024]{2,1,0}", "{0,2}", True, (8, 128, 1024)),
    ("f32[8,128,1024]{2,1,0}", "{1}", False, (8, 128, 1024)),
    ("f32[128,1024]{0,1}", "{1}", False, (1, 1024, 128)),   # physically a column reduction
    ("f32[64,32]{1,0}", "{0,1}", True, (1, 1, 2048)),
])
def test_reduction_dimensions(shape, dims, is_row, expected):
    c = entry(f"ENTRY e {{ p = {shape} parameter(0) z = f32[] constant(0)\n"
              f"  ROOT r = reduce(p, z), dimensions={dims}, to_apply=add }}")
    rd = reduction_dimensions(c.root)
    assert (rd.is_row, rd.dims) == (is_row, expected)


def test_kinds_of_lone_ops():
    c = entry("""ENTRY e { p = f32[128,1024] parameter(0) z = f32[] constant(0)
  r = f32[128] reduce(p, z), dimensions={1}, to_apply=add
  small = f32[128,3] parameter(1) rs = f32[128] reduce(small, z), dimensions={1}, to_apply=add
  t = f32[1024,128] transpose(p), dimensions={1,0}
  q = f32[8,32,64] parameter(2) tq = f32[64,32,8] transpose(q), dimensions={2,1,0}
  n = f32[128,1024] negate(p)
  c = f32[128,2048] concatenate(p, n), dimensions={1}
  ROOT tup = tuple(r, rs, t, tq, n, c) }""")
    kind = {n: FusionAnalysis.of_instruction(c.instruction(n)).emitter_kind
            for n in ("r", "rs", "t", "tq", "n", "c")}
    # rs: a row reduction of 3 elements is not faster than elemental code (32 % 3 != 0)
    # tq: both swapped dims (64 and 8) are too small for the tiled emitter (8 * 64 < 8192)
    assert kind == {"r": "reduction", "rs": "loop", "t": "transpose", "tq": "loop", "n": "loop",
                    "c": "concatenate"}
    assert fusion_kind_for_emitter(FusionAnalysis.of_instruction(c.instruction("r"))) == "kInput"
    assert fusion_kind_for_emitter(FusionAnalysis.of_instruction(c.instruction("n"))) == "kLoop"


def test_transpose_descriptions():
    c = entry("""ENTRY e { p = f32[64,128] parameter(0) t = f32[128,64] transpose(p), dimensions={1,0}
  h = f16[64,128] parameter(1) ht = f16[128,64] transpose(h), dimensions={1,0}
  q = f32[4,32,64,2] parameter(2) tq = f32[64,32,4,2] transpose(q), dimensions={2,1,0,3}
  b = f32[1,64,128] parameter(3) tb = f32[128,1,64] transpose(b), dimensions={2,0,1}
  ROOT tup = tuple(t, ht, tq, tb) }""")
    t = tiled_transpose_description(c.instruction("t"))
    assert (t.dimensions, t.permutation, t.shmem_usage, t.packed) == ((128, 64), (1, 0), 32 * 33 * 4, False)
    ht = tiled_transpose_description(c.instruction("ht"))
    assert ht.packed  # 16-bit: the packed (2 per 32-bit bank) emitter
    tq = tiled_transpose_description(c.instruction("tq"))
    assert (tq.dimensions, tq.permutation) == ((64, 32, 4, 2), (2, 1, 0, 3))
    # minor dim kept (2 x f32 = 64 bits), 8 bytes x min(32, 64) >= 128
    assert tq.shmem_usage == 32 * 33 * 32 * 2 // 8
    tb = tiled_transpose_description(c.instruction("tb"))  # unit dim dropped: a 2-D transpose
    assert (tb.dimensions, tb.permutation) == ((128, 64), (1, 0))


def test_heroes_through_elementwise_ops():
    c = parse_module(ADD + """
f { p = f32[64,128] parameter(0) t = f32[128,64] transpose(p), dimensions={1,0}
  q = f32[128,64] parameter(1) a = f32[128,64] add(t, q) ROOT n = f32[128,64] negate(a) }
g { p = f32[32,1024] parameter(0) z = f32[] constant(0) r = f32[32] reduce(p, z), dimensions={1}, to_apply=add
  ROOT e = f32[32] exponential(r) }
ENTRY e { x = f32[64,128] parameter(0) y = f32[128,64] parameter(1) w = f32[32,1024] parameter(2)
  ft = f32[128,64] fusion(x, y), kind=kInput, calls=f
  fr = f32[32] fusion(w), kind=kInput, calls=g
  ROOT tup = tuple(ft, fr) }""").entry
    ft = FusionAnalysis.of_fusion(c.instruction("ft"))
    assert ft.emitter_kind == "transpose" and ft.heroes[0].name == "t"
    fr = FusionAnalysis.of_fusion(c.instruction("fr"))
    assert fr.emitter_kind == "reduction" and fr.heroes[0].name == "r" and fr.roots[0].name == "e"
    # a reduce under an epilogue is a real hero only when the reduction is race free: it is
    assert find_non_trivial_hero(c.instruction("fr").fused_computation().root).name == "r"


def test_multi_root_reductions_must_be_compatible():
    c = parse_module(ADD + """
ok { p = f32[32,1024] parameter(0) z = f32[] constant(0)
  r = f32[32] reduce(p, z), dimensions={1}, to_apply=add
  e = f32[32,1024] exponential(p) r2 = f32[32] reduce(e, z), dimensions={1}, to_apply=add
  ROOT t = (f32[32], f32[32], f32[32,1024]) tuple(r, r2, e) }
bad { p = f32[32,1024] parameter(0) z = f32[] constant(0)
  r = f32[32] reduce(p, z), dimensions={1}, to_apply=add
  r2 = f32[1024] reduce(p, z), dimensions={0}, to_apply=add
  ROOT t = (f32[32], f32[1024]) tuple(r, r2) }
ENTRY e { x = f32[32,1024] parameter(0)
  a = (f32[32], f32[32], f32[32,1024]) fusion(x), kind=kInput, calls=ok
  b = (f32[32], f32[1024]) fusion(x), kind=kInput, calls=bad
  ROOT tup = tuple(a, b) }""").entry
    assert FusionAnalysis.of_fusion(c.instruction("a")).emitter_kind == "reduction"
    assert FusionAnalysis.of_fusion(c.instruction("b")).emitter_kind == "loop"  # row + column


def test_race_free_bound():
    c = entry("""ENTRY e { p = f32[4,40000] parameter(0) z = f32[] constant(0)
  r = f32[4] reduce(p, z), dimensions={1}, to_apply=add ROOT n = f32[4] negate(r) }""")
    from hlo_common.gpu.hlo_traversal import FusionAdaptor
    a = FusionAnalysis(FusionAdaptor.for_producer_consumer(c.instruction("r"), c.root))
    # 40000 > 1024 * 16 minor elements: not race free, so an epilogue makes it a loop fusion
    assert a.emitter_kind == "loop"
    assert FusionAnalysis.of_instruction(c.instruction("r")).emitter_kind == "reduction"


CASES = [
    # (unfused module, producer, consumer, the fusion written out)
    ("""ENTRY e { p = f32[128,1024] parameter(0) e = f32[128,1024] exponential(p) z = f32[] constant(0)
  ROOT r = f32[128] reduce(e, z), dimensions={1}, to_apply=add }""", "e", "r",
     """f { p = f32[128,1024] parameter(0) e = f32[128,1024] exponential(p) z = f32[] parameter(1)
  ROOT r = f32[128] reduce(e, z), dimensions={1}, to_apply=add }
ENTRY e { p = f32[128,1024] parameter(0) z = f32[] constant(0)
  ROOT fu = f32[128] fusion(p, z), kind=kInput, calls=f }"""),
    ("""g { q = f32[64,128] parameter(0) t = f32[128,64] transpose(q), dimensions={1,0} }
ENTRY e { p = f32[64,128] parameter(0) y = f32[128,64] parameter(1) n = f32[64,128] negate(p)
  ROOT fu = f32[128,64] fusion(n), kind=kInput, calls=g }""".replace(
        "dimensions={1,0} }", "dimensions={1,0} ROOT a = f32[128,64] abs(t) }"), "n", "fu",
     """f { p = f32[64,128] parameter(0) n = f32[64,128] negate(p)
  t = f32[128,64] transpose(n), dimensions={1,0}
  ROOT a = f32[128,64] abs(t) }
ENTRY e { p = f32[64,128] parameter(0) ROOT fu = f32[128,64] fusion(p), kind=kInput, calls=f }"""),
    ("""ENTRY e { p = f32[100,200] parameter(0) q = f32[100,300] parameter(1) n = f32[100,200] negate(p)
  ROOT c = f32[100,500] concatenate(n, q), dimensions={1} }""", "n", "c",
     """f { p = f32[100,200] parameter(0) q = f32[100,300] parameter(1) n = f32[100,200] negate(p)
  ROOT c = f32[100,500] concatenate(n, q), dimensions={1} }
ENTRY e { p = f32[100,200] parameter(0) q = f32[100,300] parameter(1)
  ROOT fu = f32[100,500] fusion(p, q), kind=kInput, calls=f }"""),
    ("""ENTRY e { p = f32[1000,1000] parameter(0) x = f32[1000,1000] parameter(1) a = f32[1000,1000] add(p, x)
  ROOT m = f32[1000,1000] multiply(a, a) }""", "a", "m",
     """f { p = f32[1000,1000] parameter(0) x = f32[1000,1000] parameter(1) a = f32[1000,1000] add(p, x)
  ROOT m = f32[1000,1000] multiply(a, a) }
ENTRY e { p = f32[1000,1000] parameter(0) x = f32[1000,1000] parameter(1)
  ROOT fu = f32[1000,1000] fusion(p, x), kind=kLoop, calls=f }"""),
]


@pytest.mark.parametrize("unfused,producer,consumer,fused", CASES,
                         ids=["reduce", "transpose", "concat", "loop"])
def test_producer_consumer_equals_built_fusion(unfused, producer, consumer, fused):
    c = entry(unfused)
    pc = FusionAnalysis.of_producer_consumer(c.instruction(producer), c.instruction(consumer))
    built = FusionAnalysis.of_fusion(entry(fused).root)
    assert pc.emitter_kind == built.emitter_kind
    assert [h.name for h in pc.heroes] == [h.name for h in built.heroes]
    assert [r.name for r in pc.roots] == [r.name for r in built.roots]
    assert pc.launch_dimensions() == built.launch_dimensions()
    assert pc.reduction == built.reduction
    assert (pc.transpose is None) == (built.transpose is None)
    assert sorted(x.name for x in map(pc.adaptor.external_value, pc.adaptor.inputs())) == \
        sorted(x.name for x in map(built.adaptor.external_value, built.adaptor.inputs()))


def test_reduction_groups():
    """Disjoint reductions run on separate block rows (blocks_y); shared inputs keep them
    together; a shared broadcast constant does not."""
    c = parse_module(ADD + """
disjoint { p = f32[64,1024] parameter(0) q = f32[64,1024] parameter(1) z = f32[] constant(0)
  r1 = f32[64] reduce(p, z), dimensions={1}, to_apply=add
  r2 = f32[64] reduce(q, z), dimensions={1}, to_apply=add
  ROOT t = (f32[64], f32[64]) tuple(r1, r2) }
shared { p = f32[64,1024] parameter(0) q = f32[64,1024] parameter(1) z = f32[] constant(0)
  e = f32[64,1024] exponential(p) r1 = f32[64] reduce(e, z), dimensions={1}, to_apply=add
  a = f32[64,1024] add(p, q) r2 = f32[64] reduce(a, z), dimensions={1}, to_apply=add
  ROOT t = (f32[64], f32[64]) tuple(r1, r2) }
consts { p = f32[64,1024] parameter(0) q = f32[64,1024] parameter(1) z = f32[] constant(0)
  one = f32[] constant(1) b = f32[64,1024] broadcast(one), dimensions={}
  m1 = f32[64,1024] multiply(p, b) r1 = f32[64] reduce(m1, z), dimensions={1}, to_apply=add
  m2 = f32[64,1024] multiply(q, b) r2 = f32[64] reduce(m2, z), dimensions={1}, to_apply=add
  ROOT t = (f32[64], f32[64]) tuple(r1, r2) }
ENTRY e { x = f32[64,1024] parameter(0) y = f32[64,1024] parameter(1)
  d = (f32[64], f32[64]) fusion(x, y), kind=kInput, calls=disjoint
  s = (f32[64], f32[64]) fusion(x, y), kind=kInput, calls=shared
  k = (f32[64], f32[64]) fusion(x, y), kind=kInput, calls=consts
  ROOT tup = tuple(d, s, k) }""").entry
    d, s, k = (FusionAnalysis.of_fusion(c.instruction(n)) for n in ("d", "s", "k"))
    assert [len(a.reduction_groups()) for a in (d, s, k)] == [2, 1, 2]
    assert d.launch_dimensions()[0] == 2 * s.launch_dimensions()[0]


def _pairs(module):
    skip = {"parameter", "tuple", "get-tuple-element", "constant"}
    for p in module.entry.instructions:
        if p.opcode in skip:
            continue
        for u in p.users:
            if u.opcode not in skip:
                yield p.name, u.name


@pytest.mark.parametrize("name", ["M2", "M3", "M4", "M7"])
def test_producer_consumer_views_equal_built_fusions_two_levels(name):
    """Every producer/consumer pair of XLA's fusion-pipeline inputs, and then an operand of the
    fusion built from it: the analysis without building equals the analysis of the fusion built
    by fusion_utils (the corpus sweep of the same check: 1061 pairs, all equal)."""
    from hlo_opt.fusion.fusion_utils import fuse_producer_into_consumer
    from hlo_common.hlo.printer import print_module
    import xla_h100_fusion_inputs as dumps

    def summary(a: FusionAnalysis):
        return (a.emitter_kind, a.launch_dimensions(), a.reduction,
                None if a.transpose is None else (a.transpose.dimensions, a.transpose.permutation))

    text = getattr(dumps, name)
    base = parse_module(text)
    checked = 0
    for p_name, c_name in _pairs(base):
        p, c = base.entry.instruction(p_name), base.entry.instruction(c_name)
        view = FusionAnalysis.of_producer_consumer(p, c)
        m = parse_module(print_module(base))
        fused = fuse_producer_into_consumer(m.entry.instruction(p_name), m.entry.instruction(c_name),
                                            fusion_kind_for_emitter(view))
        assert summary(view) == summary(FusionAnalysis.of_fusion(fused)), (p_name, c_name)
        for o in fused.operands:
            if o.opcode in ("parameter", "constant"):
                continue
            view2 = FusionAnalysis.of_producer_consumer(o, fused)
            m2 = parse_module(print_module(m))
            fused2 = fuse_producer_into_consumer(m2.entry.instruction(o.name), m2.entry.instruction(fused.name),
                                                 fusion_kind_for_emitter(view2))
            assert summary(view2) == summary(FusionAnalysis.of_fusion(fused2)), (o.name, fused.name)
            break
        checked += 1
    assert checked >= 5
