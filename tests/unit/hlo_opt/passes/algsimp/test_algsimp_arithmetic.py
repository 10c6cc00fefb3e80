"""AlgebraicSimplifier: add, subtract, multiply and negate rewrites (XLA's HandleAdd, HandleSubtract,
HandleMultiply, HandleNegate), each applied and declined, results checked with the interpreter."""

from algsimp_cases import Case, parametrize

ADD_COMPUTATION = """
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""

CASES = [
    Case("add_zero", """
        p = f32[4] parameter(0)
        z = f32[] constant(0)
        b = f32[4] broadcast(z), dimensions={}
        ROOT a = f32[4] add(b, p)""",
         "CHECK: ROOT %p = f32[4]{0} parameter(0)",
         negative="""
        p = f32[4] parameter(0)
        z = f32[] constant(-0.5)
        b = f32[4] broadcast(z), dimensions={}
        ROOT a = f32[4] add(p, b)"""),
    Case("add_constant_to_rhs", """
        p = s32[3] parameter(0)
        c = s32[3] constant({4, -2, 7})
        ROOT a = s32[3] add(c, p)""",
         "CHECK: ROOT %{{.*}} = s32[3]{0} add(%p, %c)",
         negative="""
        p = s32[3] parameter(0)
        c = s32[3] constant({4, -2, 7})
        ROOT a = s32[3] add(p, c)"""),
    Case("add_reassociate_constants", """
        p = f32[4] parameter(0)
        c1 = f32[] constant(1.5)
        c2 = f32[] constant(2.25)
        b1 = f32[4] broadcast(c1), dimensions={}
        b2 = f32[4] broadcast(c2), dimensions={}
        a1 = f32[4] add(p, b1)
        ROOT a2 = f32[4] add(a1, b2)""",
         """CHECK: %[[SUM:.*]] = f32[] add(%c1, %c2)
            CHECK: %[[B:.*]] = f32[4]{0} broadcast(%[[SUM]]), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} add(%p, %[[B]])""",
         negative="""
        p = f32[4] parameter(0)
        q = f32[4] parameter(1)
        c2 = f32[] constant(2.25)
        b2 = f32[4] broadcast(c2), dimensions={}
        a1 = f32[4] add(p, q)
        ROOT a2 = f32[4] add(a1, b2)"""),
    Case("add_constant_minus_x", """
        p = s32[3] parameter(0)
        c1 = s32[3] constant({1, 2, 3})
        c2 = s32[3] constant({10, 20, 30})
        s = s32[3] subtract(c1, p)
        ROOT a = s32[3] add(s, c2)""",
         """CHECK: %[[SUM:.*]] = s32[3]{0} add(%c1, %c2)
            CHECK: ROOT %{{.*}} = s32[3]{0} subtract(%[[SUM]], %p)""",
         negative="""
        p = s32[3] parameter(0)
        q = s32[3] parameter(1)
        c2 = s32[3] constant({10, 20, 30})
        s = s32[3] subtract(q, p)
        ROOT a = s32[3] add(s, c2)"""),
    Case("add_cancels_subtract", """
        a = s32[4] parameter(0)
        b = s32[4] parameter(1)
        d = s32[4] subtract(b, a)
        ROOT r = s32[4] add(a, d)""",
         "CHECK: ROOT %b = s32[4]{0} parameter(1)",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        d = f32[4] subtract(b, a)
        ROOT r = f32[4] add(a, d)"""),
    Case("add_into_sparse_update", """
        x = f32[8] parameter(0)
        u = f32[3] parameter(1)
        i = s32[] parameter(2)
        z = f32[] constant(0)
        zeros = f32[8] broadcast(z), dimensions={}
        d = f32[8] dynamic-update-slice(zeros, u, i)
        ROOT a = f32[8] add(x, d)""",
         """CHECK: %[[DS:.*]] = f32[3]{0} dynamic-slice(%x, %i), dynamic_slice_sizes={3}
            CHECK: %[[ADD:.*]] = f32[3]{0} add(%[[DS]], %u)
            CHECK: ROOT %{{.*}} = f32[8]{0} dynamic-update-slice(%x, %[[ADD]], %i)""",
         negative="""
        x = f32[8] parameter(0)
        u = f32[3] parameter(1)
        i = s32[] parameter(2)
        z = f32[] constant(1)
        ones = f32[8] broadcast(z), dimensions={}
        d = f32[8] dynamic-update-slice(ones, u, i)
        ROOT a = f32[8] add(x, d)"""),
    Case("add_factor_common_multiplicand", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[] constant(0.25)
        cb = f32[4] broadcast(c), dimensions={}
        m1 = f32[4] multiply(a, cb)
        m2 = f32[4] multiply(cb, b)
        ROOT r = f32[4] add(m1, m2)""",
         """CHECK: %[[S:.*]] = f32[4]{0} add(%a, %b)
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%[[S]], %cb)""",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[] constant(0.3)
        cb = f32[4] broadcast(c), dimensions={}
        m1 = f32[4] multiply(a, cb)
        m2 = f32[4] multiply(cb, b)
        ROOT r = f32[4] add(m1, m2)"""),
    Case("add_into_scatter", ADD_COMPUTATION + """
        ENTRY e {
          x = f32[8] parameter(0)
          base = f32[8] parameter(1)
          idx = s32[2,1] parameter(2)
          upd = f32[2] parameter(3)
          s = f32[8] scatter(base, idx, upd), update_window_dims={}, inserted_window_dims={0},
              scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=sum
          ROOT a = f32[8] add(x, s)
        }""",
         """CHECK: %[[ADD:.*]] = f32[8]{0} add(%x, %base)
            CHECK: ROOT %s = f32[8]{0} scatter(%[[ADD]], %idx, %upd)""",
         negative=ADD_COMPUTATION + """
        ENTRY e {
          x = f32[8] parameter(0)
          base = f32[8] parameter(1)
          idx = s32[2,1] parameter(2)
          upd = f32[2] parameter(3)
          s = f32[8] scatter(base, idx, upd), update_window_dims={}, inserted_window_dims={0},
              scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=sum
          a = f32[8] add(x, s)
          ROOT t = (f32[8], f32[8]) tuple(a, s)
        }"""),
    Case("subtract_self", """
        p = s32[4] parameter(0)
        ROOT s = s32[4] subtract(p, p)""",
         """CHECK: %[[Z:.*]] = s32[] constant(0)
            CHECK: ROOT %{{.*}} = s32[4]{0} broadcast(%[[Z]]), dimensions={}""",
         negative="""
        p = f32[4] parameter(0)
        ROOT s = f32[4] subtract(p, p)"""),
    Case("subtract_zero", """
        p = f32[2,3] parameter(0)
        z = f32[] constant(0)
        b = f32[2,3] broadcast(z), dimensions={}
        ROOT s = f32[2,3] subtract(p, b)""",
         "CHECK: ROOT %p = f32[2,3]{1,0} parameter(0)",
         negative="""
        p = f32[2,3] parameter(0)
        z = f32[] parameter(1)
        b = f32[2,3] broadcast(z), dimensions={}
        ROOT s = f32[2,3] subtract(p, b)"""),
    Case("subtract_constant_to_add", """
        p = f32[4] parameter(0)
        c = f32[] constant(1.5)
        b = f32[4] broadcast(c), dimensions={}
        ROOT s = f32[4] subtract(p, b)""",
         """CHECK: %[[N:.*]] = f32[] negate(%c)
            CHECK: %[[B:.*]] = f32[4]{0} broadcast(%[[N]]), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} add(%p, %[[B]])""",
         negative="""
        p = f32[4] parameter(0)
        c = f32[4] constant({1, 2, 3, 4})
        ROOT s = f32[4] subtract(c, p)"""),
    Case("subtract_of_subtract", """
        a = s32[4] parameter(0)
        b = s32[4] parameter(1)
        d = s32[4] subtract(a, b)
        ROOT r = s32[4] subtract(a, d)""",
         "CHECK: ROOT %b = s32[4]{0} parameter(1)",
         negative="""
        a = s32[4] parameter(0)
        b = s32[4] parameter(1)
        d = s32[4] subtract(b, a)
        ROOT r = s32[4] subtract(a, d)"""),
    Case("subtract_of_add", """
        a = u32[4] parameter(0)
        b = u32[4] parameter(1)
        s = u32[4] add(b, a)
        ROOT r = u32[4] subtract(a, s)""",
         "CHECK: ROOT %{{.*}} = u32[4]{0} negate(%b)",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        s = f32[4] add(b, a)
        ROOT r = f32[4] subtract(a, s)"""),
    Case("subtract_add_cancel", """
        a = s8[4] parameter(0)
        b = s8[4] parameter(1)
        s = s8[4] add(a, b)
        ROOT r = s8[4] subtract(s, a)""",
         "CHECK: ROOT %b = s8[4]{0} parameter(1)",
         negative="""
        a = s8[4] parameter(0)
        b = s8[4] parameter(1)
        c = s8[4] parameter(2)
        s = s8[4] add(a, b)
        ROOT r = s8[4] subtract(s, c)"""),
    Case("multiply_one", """
        p = bf16[4] parameter(0)
        c = bf16[] constant(1)
        b = bf16[4] broadcast(c), dimensions={}
        ROOT m = bf16[4] multiply(p, b)""",
         "CHECK: ROOT %p = bf16[4]{0} parameter(0)",
         negative="""
        p = bf16[4] parameter(0)
        c = bf16[] constant(-1)
        b = bf16[4] broadcast(c), dimensions={}
        ROOT m = bf16[4] multiply(p, b)"""),
    Case("multiply_zero", """
        p = s32[4] parameter(0)
        c = s32[] constant(0)
        b = s32[4] broadcast(c), dimensions={}
        ROOT m = s32[4] multiply(b, p)""",
         "CHECK: ROOT %b = s32[4]{0} broadcast(%c), dimensions={}",
         negative="""
        p = f32[4] parameter(0)
        c = f32[] constant(0)
        b = f32[4] broadcast(c), dimensions={}
        ROOT m = f32[4] multiply(b, p)"""),
    Case("multiply_negates", """
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        na = f32[4] negate(a)
        nb = f32[4] negate(b)
        ROOT m = f32[4] multiply(na, nb)""",
         """CHECK-NOT: negate
            CHECK: ROOT %m = f32[4]{0} multiply(%a, %b)""",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        na = f32[4] negate(a)
        ROOT m = f32[4] multiply(na, b)"""),
    Case("multiply_abs_abs", """
        a = f32[4] parameter(0)
        x = f32[4] abs(a)
        ROOT m = f32[4] multiply(x, x)""",
         """CHECK-NOT: abs
            CHECK: ROOT %m = f32[4]{0} multiply(%a, %a)""",
         negative="""
        a = c64[4] parameter(0)
        x = f32[4] abs(a)
        ROOT m = f32[4] multiply(x, x)"""),
    Case("multiply_by_converted_pred", """
        x = f32[4] parameter(0)
        p = pred[4] parameter(1)
        c = f32[4] convert(p)
        ROOT m = f32[4] multiply(c, x)""",
         """CHECK: %[[Z:.*]] = f32[4]{0} broadcast(%{{.*}}), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} select(%p, %x, %[[Z]])""",
         negative="""
        x = f32[4] parameter(0)
        p = s32[4] parameter(1)
        c = f32[4] convert(p)
        ROOT m = f32[4] multiply(c, x)"""),
    Case("multiply_two_constant_products", """
        x = s32[3] parameter(0)
        y = s32[3] parameter(1)
        c1 = s32[3] constant({1, 2, 3})
        c2 = s32[3] constant({4, 5, 6})
        m1 = s32[3] multiply(c1, x)
        m2 = s32[3] multiply(y, c2)
        ROOT m = s32[3] multiply(m1, m2)""",
         """CHECK-DAG: %[[XY:.*]] = s32[3]{0} multiply(%x, %y)
            CHECK-DAG: %[[C:.*]] = s32[3]{0} multiply(%c1, %c2)
            CHECK: ROOT %{{.*}} = s32[3]{0} multiply(%[[XY]], %[[C]])""",
         negative="""
        x = s32[3] parameter(0)
        y = s32[3] parameter(1)
        c1 = s32[3] constant({1, 2, 3})
        m1 = s32[3] multiply(c1, x)
        m2 = s32[3] multiply(y, x)
        ROOT m = s32[3] multiply(m1, m2)"""),
    Case("multiply_reassociate_constants", """
        x = f32[4] parameter(0)
        c1 = f32[] constant(2)
        c2 = f32[] constant(3)
        b1 = f32[4] broadcast(c1), dimensions={}
        b2 = f32[4] broadcast(c2), dimensions={}
        m1 = f32[4] multiply(x, b1)
        ROOT m = f32[4] multiply(m1, b2)""",
         """CHECK: %[[C:.*]] = f32[] multiply(%c1, %c2)
            CHECK: %[[B:.*]] = f32[4]{0} broadcast(%[[C]]), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} multiply(%x, %[[B]])""",
         negative="""
        x = f32[4] parameter(0)
        c1 = f32[] constant(2)
        y = f32[4] parameter(1)
        b1 = f32[4] broadcast(c1), dimensions={}
        m1 = f32[4] multiply(x, b1)
        ROOT m = f32[4] multiply(m1, y)"""),
    Case("multiply_constant_into_broadcast", """
        a = f32[2,3] parameter(0)
        v = f32[3] parameter(1)
        c = f32[] constant(0.5)
        cb = f32[2,3] broadcast(c), dimensions={}
        m1 = f32[2,3] multiply(a, cb)
        vb = f32[2,3] broadcast(v), dimensions={1}
        ROOT m = f32[2,3] multiply(m1, vb)""",
         """CHECK: %[[CB:.*]] = f32[3]{0} broadcast(%c), dimensions={}
            CHECK: %[[S:.*]] = f32[3]{0} multiply(%v, %[[CB]])
            CHECK: %[[SB:.*]] = f32[2,3]{1,0} broadcast(%[[S]]), dimensions={1}
            CHECK: ROOT %{{.*}} = f32[2,3]{1,0} multiply(%a, %[[SB]])""",
         negative="""
        a = f32[2,3] parameter(0)
        v = f32[2,3] parameter(1)
        c = f32[] constant(0.5)
        cb = f32[2,3] broadcast(c), dimensions={}
        m1 = f32[2,3] multiply(a, cb)
        ROOT m = f32[2,3] multiply(m1, v)"""),
    Case("multiply_sqrt_sqrt", """
        x = f32[4] parameter(0)
        e = f32[4] exponential(x)
        q1 = f32[4] sqrt(e)
        q2 = f32[4] sqrt(e)
        ROOT m = f32[4] multiply(q1, q2)""",
         "CHECK: ROOT %e = f32[4]{0} exponential(%x)",
         negative="""
        x = f32[4] parameter(0)
        q1 = f32[4] sqrt(x)
        ROOT m = f32[4] multiply(q1, q1)"""),
    Case("multiply_rsqrt_rsqrt", """
        x = f32[4] parameter(0)
        e = f32[4] abs(x)
        r = f32[4] rsqrt(e)
        ROOT m = f32[4] multiply(r, r)""",
         """CHECK: %[[ONE:.*]] = f32[4]{0} broadcast(%{{.*}}), dimensions={}
            CHECK: ROOT %{{.*}} = f32[4]{0} divide(%[[ONE]], %e)""",
         negative="""
        x = f32[4] parameter(0)
        r = f32[4] rsqrt(x)
        ROOT m = f32[4] multiply(r, r)"""),
    Case("negate_of_negate", """
        x = f32[4] parameter(0)
        n1 = f32[4] negate(x)
        ROOT n2 = f32[4] negate(n1)""",
         "CHECK: ROOT %x = f32[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        n1 = f32[4] abs(x)
        ROOT n2 = f32[4] negate(n1)"""),
]


@parametrize(CASES)
def test_rewrite_applies(case: Case) -> None:
    case.check_applies()


@parametrize(CASES)
def test_rewrite_declines(case: Case) -> None:
    case.check_declines()
