"""AlgebraicSimplifier: reduce, reduce-window, dot, convolution, sort, gather, scatter, map,
get-tuple-element and opt-barrier rewrites (XLA's HandleReduce, HandleReduceWindow, HandleDot,
HandleConvolution, HandleSort, HandleGather, HandleScatter, HandleMap, HandleGetTupleElement,
HandleOptimizationBarrier)."""

from algsimp_cases import Case, parametrize

ADD = """
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""
MAX = """
max {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] maximum(x, y)
}
"""
MUL = """
mul {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] multiply(x, y)
}
"""
LESS = """
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
"""


def entry(computations: str, body: str) -> str:
    lines = "\n".join("  " + line.strip() for line in body.strip().splitlines())
    return computations + "\nENTRY e {\n" + lines + "\n}\n"


CASES = [
    Case("reduce_of_zero_elements", entry(ADD, """
        x = f32[0,3] parameter(0)
        z = f32[] constant(1)
        ROOT r = f32[3] reduce(x, z), dimensions={0}, to_apply=add"""),
         "CHECK: ROOT %{{.*}} = f32[3]{0} broadcast(%z), dimensions={}",
         negative=entry(ADD, """
        x = f32[2,3] parameter(0)
        z = f32[] constant(1)
        ROOT r = f32[3] reduce(x, z), dimensions={0}, to_apply=add""")),
    Case("reduce_to_reshape", entry(ADD, """
        x = f32[4,1,3] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[4,3] reduce(x, z), dimensions={1}, to_apply=add"""),
         "CHECK: ROOT %{{.*}} = f32[4,3]{1,0} reshape(%x)",
         negative=entry(ADD, """
        x = f32[4,2,3] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[4,3] reduce(x, z), dimensions={1}, to_apply=add""")),
    Case("reduce_of_negate", entry(ADD, """
        x = f32[4,3] parameter(0)
        n = f32[4,3] negate(x)
        z = f32[] constant(0)
        ROOT r = f32[3] reduce(n, z), dimensions={0}, to_apply=add"""),
         """CHECK: %[[R:.*]] = f32[3]{0} reduce(%x, %z), dimensions={0}, to_apply=%add
            CHECK: ROOT %{{.*}} = f32[3]{0} negate(%[[R]])""",
         negative=entry(MAX, """
        x = f32[4,3] parameter(0)
        n = f32[4,3] negate(x)
        z = f32[] constant(0)
        ROOT r = f32[3] reduce(n, z), dimensions={0}, to_apply=max""")),
    Case("reduce_of_transpose", entry(ADD, """
        x = f32[2,3,4] parameter(0)
        t = f32[4,2,3] transpose(x), dimensions={2,0,1}
        z = f32[] constant(0)
        ROOT r = f32[4,3] reduce(t, z), dimensions={1}, to_apply=add"""),
         """CHECK: %[[R:.*]] = f32[3,4]{1,0} reduce(%x, %z), dimensions={0}, to_apply=%add
            CHECK: ROOT %{{.*}} = f32[4,3]{1,0} transpose(%[[R]]), dimensions={1,0}""",
         negative=entry(ADD, """
        x = f32[2,3,4] parameter(0)
        t = f32[4,2,3] transpose(x), dimensions={2,0,1}
        z = f32[] constant(0)
        ROOT r = f32[4,3] reduce(t, z), dimensions={1}, to_apply=add""")
         .replace("t = f32[4,2,3] transpose(x), dimensions={2,0,1}", "t = f32[4,2,3] reshape(x)")
         .replace("f32[4,3] reduce(t", "f32[4,3] reduce(t")),
    Case("reduce_of_reduce", entry(ADD, """
        x = f32[2,3,4] parameter(0)
        z = f32[] constant(0)
        r1 = f32[2,4] reduce(x, z), dimensions={1}, to_apply=add
        ROOT r2 = f32[4] reduce(r1, z), dimensions={0}, to_apply=add"""),
         "CHECK: ROOT %{{.*}} = f32[4]{0} reduce(%x, %z), dimensions={0,1}, to_apply=%add",
         negative=entry(ADD + MAX, """
        x = f32[2,3,4] parameter(0)
        z = f32[] constant(0)
        r1 = f32[2,4] reduce(x, z), dimensions={1}, to_apply=max
        ROOT r2 = f32[4] reduce(r1, z), dimensions={0}, to_apply=add""")),
    Case("reduce_of_reshape_merged_dims", entry(ADD, """
        x = f32[4,2,3] parameter(0)
        s = f32[4,6] reshape(x)
        z = f32[] constant(0)
        ROOT r = f32[4] reduce(s, z), dimensions={1}, to_apply=add"""),
         "CHECK: ROOT %{{.*}} = f32[4]{0} reduce(%x, %z), dimensions={1,2}, to_apply=%add",
         negative=entry(ADD, """
        x = f32[2,3,4] parameter(0)
        s = f32[3,8] reshape(x)
        z = f32[] constant(0)
        ROOT r = f32[3] reduce(s, z), dimensions={1}, to_apply=add""")),
    Case("reduce_before_reshape", entry(ADD, """
        x = f32[2,3,5] parameter(0)
        s = f32[6,5] reshape(x)
        z = f32[] constant(0)
        ROOT r = f32[6] reduce(s, z), dimensions={1}, to_apply=add"""),
         """CHECK: %[[R:.*]] = f32[2,3]{1,0} reduce(%x, %z), dimensions={2}, to_apply=%add
            CHECK: ROOT %{{.*}} = f32[6]{0} reshape(%[[R]])""",
         negative=entry(ADD, """
        x = f32[2,3,4] parameter(0)
        s = f32[3,8] reshape(x)
        z = f32[] constant(0)
        ROOT r = f32[8] reduce(s, z), dimensions={0}, to_apply=add""")),
    Case("reduce_of_concat", entry(ADD, """
        a = f32[3,4] parameter(0)
        b = f32[3,4] parameter(1)
        c = f32[6,4] concatenate(a, b), dimensions={0}
        z = f32[] constant(0)
        ROOT r = f32[4] reduce(c, z), dimensions={0}, to_apply=add"""),
         """CHECK-DAG: %[[RA:.*]] = f32[4]{0} reduce(%a, %z), dimensions={0}, to_apply=%add
            CHECK-DAG: %[[RB:.*]] = f32[4]{0} reduce(%b, %z), dimensions={0}, to_apply=%add
            CHECK: ROOT %{{.*}} = f32[4]{0} map(%[[RA]], %[[RB]]), dimensions={0}, to_apply=%add""",
         negative=entry(ADD, """
        a = f32[3,4] parameter(0)
        b = f32[2,4] parameter(1)
        c = f32[5,4] concatenate(a, b), dimensions={0}
        z = f32[] constant(0)
        ROOT r = f32[4] reduce(c, z), dimensions={0}, to_apply=add""")),
    Case("reduce_of_scalar_broadcast", entry(MAX, """
        x = f32[] parameter(0)
        b = f32[4,3] broadcast(x), dimensions={}
        z = f32[] constant(-1)
        ROOT r = f32[] reduce(b, z), dimensions={0,1}, to_apply=max"""),
         "CHECK: ROOT %{{.*}} = f32[] maximum(%x, %z)",
         negative=entry(MUL, """
        x = f32[] parameter(0)
        b = f32[4,3] broadcast(x), dimensions={}
        z = f32[] constant(-1)
        ROOT r = f32[] reduce(b, z), dimensions={0,1}, to_apply=mul""")),
    Case("reduce_of_broadcast_commute", entry(ADD, """
        x = f32[3,4] parameter(0)
        b = f32[3,5,4] broadcast(x), dimensions={0,2}
        z = f32[] constant(0)
        ROOT r = f32[5,4] reduce(b, z), dimensions={0}, to_apply=add"""),
         """CHECK: %[[R:.*]] = f32[4]{0} reduce(%x, %z), dimensions={0}, to_apply=%add
            CHECK: ROOT %{{.*}} = f32[5,4]{1,0} broadcast(%[[R]]), dimensions={1}""",
         negative=entry(ADD, """
        x = f32[3,4] parameter(0)
        b = f32[3,5,4] broadcast(x), dimensions={0,2}
        z = f32[] constant(0)
        ROOT r = f32[3,4] reduce(b, z), dimensions={1}, to_apply=add""")
         .replace("to_apply=add", "to_apply=mul")
         .replace(ADD, ADD + MUL)),
    Case("reduce_of_broadcast_sum", entry(ADD, """
        x = f32[3] parameter(0)
        b = f32[3,5] broadcast(x), dimensions={0}
        z = f32[] constant(1)
        ROOT r = f32[3] reduce(b, z), dimensions={1}, to_apply=add"""),
         """CHECK: %[[M:.*]] = f32[3]{0} multiply(%x, %{{.*}})
            CHECK: %[[A:.*]] = f32[3]{0} add(%{{.*}}, %[[M]])
            CHECK: ROOT %{{.*}} = f32[3]{0} broadcast(%[[A]]), dimensions={0}""",
         negative=entry(MUL, """
        x = f32[3] parameter(0)
        b = f32[3,5] broadcast(x), dimensions={0}
        z = f32[] constant(1)
        ROOT r = f32[3] reduce(b, z), dimensions={1}, to_apply=mul""")),
    Case("reduce_window_of_zero_elements", entry(ADD, """
        x = f32[0,4] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[0,3] reduce-window(x, z), window={size=1x2}, to_apply=add"""),
         "CHECK: ROOT %{{.*}} = f32[0,3]{1,0} broadcast(%z), dimensions={}",
         negative=entry(ADD, """
        x = f32[2,4] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[2,3] reduce-window(x, z), window={size=1x2}, to_apply=add""")),
    Case("reduce_window_of_scalar", entry(ADD, """
        x = f32[] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[] reduce-window(x, z), window={}, to_apply=add"""),
         "CHECK: ROOT %x = f32[] parameter(0)",
         negative=entry(ADD, """
        x = f32[3] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[2] reduce-window(x, z), window={size=2}, to_apply=add""")),
    Case("reduce_window_of_unit_window", entry(MAX, """
        x = f32[3,4] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[3,6] reduce-window(x, z), window={size=1x1 pad=0_0x1_1}, to_apply=max"""),
         """CHECK: %[[B:.*]] = f32[3,4]{1,0} broadcast(%z), dimensions={}
            CHECK: %[[M:.*]] = f32[3,4]{1,0} maximum(%x, %[[B]])
            CHECK: ROOT %{{.*}} = f32[3,6]{1,0} pad(%[[M]], %z), padding=0_0x1_1""",
         negative=entry(MAX, """
        x = f32[3,4] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[3,2] reduce-window(x, z), window={size=1x1 stride=1x2}, to_apply=max""")),
    Case("reduce_window_to_reduce", entry(ADD, """
        x = f32[3,4] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[3,1] reduce-window(x, z), window={size=1x4}, to_apply=add"""),
         """CHECK: %[[R:.*]] = f32[3]{0} reduce(%x, %z), dimensions={1}, to_apply=%add
            CHECK: ROOT %{{.*}} = f32[3,1]{1,0} reshape(%[[R]])""",
         negative=entry(ADD, """
        x = f32[3,4] parameter(0)
        z = f32[] constant(0)
        ROOT r = f32[3,2] reduce-window(x, z), window={size=1x3}, to_apply=add""")),
    Case("dot_of_zero_elements", """
        a = f32[2,0] parameter(0)
        b = f32[0,3] parameter(1)
        ROOT d = f32[2,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
         """CHECK: %[[Z:.*]] = f32[] constant(0)
            CHECK: ROOT %{{.*}} = f32[2,3]{1,0} broadcast(%[[Z]]), dimensions={}""",
         negative="""
        a = f32[2,4] parameter(0)
        b = f32[4,3] parameter(1)
        ROOT d = f32[2,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"""),
    Case("dot_without_contraction_to_multiply", """
        a = f32[2,3] parameter(0)
        b = f32[4] parameter(1)
        ROOT d = f32[2,3,4] dot(a, b)""",
         """CHECK-DAG: %[[A:.*]] = f32[2,3,4]{2,1,0} broadcast(%a), dimensions={0,1}
            CHECK-DAG: %[[B:.*]] = f32[2,3,4]{2,1,0} broadcast(%b), dimensions={2}
            CHECK: ROOT %{{.*}} = f32[2,3,4]{2,1,0} multiply(%[[A]], %[[B]])""",
         negative="""
        a = f32[2,3] parameter(0)
        b = f32[4] parameter(1)
        ROOT d = f32[2,3,4] dot(a, b)""",
         negative_options={"enable_dot_to_multiply_rewrite": False}),
    Case("dot_strength_reduction", """
        a = bf16[8] parameter(0)
        b = bf16[8] parameter(1)
        ROOT d = bf16[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}""",
         """CHECK: %scalar_add_computation
            CHECK: %[[M:.*]] = bf16[8]{0} multiply(%a, %b)
            CHECK: %[[C:.*]] = f32[8]{0} convert(%[[M]])
            CHECK: %[[R:.*]] = f32[] reduce(%[[C]], %{{.*}}), dimensions={0}, to_apply=%scalar_add_computation
            CHECK: ROOT %{{.*}} = bf16[] convert(%[[R]])""",
         negative="""
        a = bf16[2,8] parameter(0)
        b = bf16[8] parameter(1)
        ROOT d = bf16[2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"""),
    Case("dot_remove_degenerate_dims", """
        a = f32[1,4] parameter(0)
        b = f32[4,3] parameter(1)
        ROOT d = f32[1,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
         """CHECK: %[[A:.*]] = f32[4]{0} reshape(%a)
            CHECK: %[[D:.*]] = f32[3]{0} dot(%[[A]], %b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
            CHECK: ROOT %{{.*}} = f32[1,3]{1,0} reshape(%[[D]])""",
         negative="""
        a = f32[2,4] parameter(0)
        b = f32[4,3] parameter(1)
        ROOT d = f32[2,3] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"""),
    Case("dot_of_transposes", """
        a = f32[3,2] parameter(0)
        b = f32[4,3] parameter(1)
        ta = f32[2,3] transpose(a), dimensions={1,0}
        tb = f32[3,4] transpose(b), dimensions={1,0}
        ROOT d = f32[2,4] dot(ta, tb), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
         """CHECK: %[[D:.*]] = f32[4,2]{1,0} dot(%b, %a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
            CHECK: ROOT %{{.*}} = f32[2,4]{1,0} transpose(%[[D]]), dimensions={1,0}""",
         negative="""
        a = f32[3,2] parameter(0)
        b = f32[3,4] parameter(1)
        ta = f32[2,3] transpose(a), dimensions={1,0}
        ROOT d = f32[2,4] dot(ta, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"""),
    Case("convolution_of_zero_elements", """
        x = f32[1,0,3] parameter(0)
        k = f32[1,3,2] parameter(1)
        ROOT c = f32[1,0,2] convolution(x, k), window={size=1}, dim_labels=b0f_0io->b0f""",
         """CHECK: %[[Z:.*]] = f32[] constant(0)
            CHECK: ROOT %{{.*}} = f32[1,0,2]{2,1,0} broadcast(%[[Z]]), dimensions={}""",
         negative="""
        x = f32[1,5,3] parameter(0)
        k = f32[1,3,2] parameter(1)
        ROOT c = f32[1,5,2] convolution(x, k), window={size=1}, dim_labels=b0f_0io->b0f"""),
    Case("sort_of_trivial_dimension", entry(LESS, """
        x = f32[4,1] parameter(0)
        ROOT s = f32[4,1] sort(x), dimensions={1}, to_apply=less"""),
         "CHECK: ROOT %x = f32[4,1]{1,0} parameter(0)",
         negative=entry(LESS, """
        x = f32[4,2] parameter(0)
        ROOT s = f32[4,2] sort(x), dimensions={1}, to_apply=less""")),
    Case("gather_of_zero_elements", """
        x = f32[0,3] parameter(0)
        i = s32[2,1] parameter(1)
        ROOT g = f32[2,0] gather(x, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={1},
            index_vector_dim=1, slice_sizes={0,0}""".replace("f32[2,0] gather", "f32[2,0,0] gather")
         .replace("offset_dims={1}", "offset_dims={1,2}"),
         """CHECK: %[[Z:.*]] = f32[] constant(0)
            CHECK: ROOT %{{.*}} = f32[2,0,0]{2,1,0} broadcast(%[[Z]]), dimensions={}""",
         negative="""
        x = f32[5,3] parameter(0)
        i = s32[2,1] parameter(1)
        ROOT g = f32[2,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0},
            index_vector_dim=1, slice_sizes={1,3}"""),
    Case("gather_of_effective_scalar", """
        x = f32[1,1] parameter(0)
        i = s32[3,2] parameter(1)
        ROOT g = f32[3] gather(x, i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1},
            index_vector_dim=1, slice_sizes={1,1}""",
         """CHECK: %[[R:.*]] = f32[] reshape(%x)
            CHECK: ROOT %{{.*}} = f32[3]{0} broadcast(%[[R]]), dimensions={}""",
         negative="""
        x = f32[5,3] parameter(0)
        i = s32[3,2] parameter(1)
        ROOT g = f32[3] gather(x, i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1},
            index_vector_dim=1, slice_sizes={1,1}"""),
    Case("gather_of_tiny_operand", """
        x = f32[3] parameter(0)
        i = s32[5] parameter(1)
        ROOT g = f32[5] gather(x, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0},
            index_vector_dim=1, slice_sizes={1}""",
         """CHECK: %[[M:.*]] = pred[5]{0} compare(%i, %{{.*}}), direction=GE
            CHECK: ROOT %{{.*}} = f32[5]{0} select(%{{.*}}, %{{.*}}, %{{.*}})""",
         negative="""
        x = f32[8] parameter(0)
        i = s32[5] parameter(1)
        ROOT g = f32[5] gather(x, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0},
            index_vector_dim=1, slice_sizes={1}"""),
    Case("scatter_of_empty_updates", entry(ADD, """
        x = f32[5] parameter(0)
        i = s32[0,1] parameter(1)
        u = f32[0] parameter(2)
        ROOT s = f32[5] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0},
            scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add"""),
         "CHECK: ROOT %x = f32[5]{0} parameter(0)",
         negative=entry(ADD, """
        x = f32[5] parameter(0)
        i = s32[2,1] parameter(1)
        u = f32[2] parameter(2)
        ROOT s = f32[5] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0},
            scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add""")),
    Case("scatter_with_empty_indices", entry(ADD, """
        x = f32[5] parameter(0)
        i = s32[0] parameter(1)
        u = f32[5] parameter(2)
        ROOT s = f32[5] scatter(x, i, u), update_window_dims={0}, inserted_window_dims={},
            scatter_dims_to_operand_dims={}, index_vector_dim=0, to_apply=add"""),
         "CHECK: ROOT %{{.*}} = f32[5]{0} map(%x, %u), dimensions={0}, to_apply=%add",
         negative=entry(ADD, """
        x = f32[5] parameter(0)
        i = s32[1] parameter(1)
        u = f32[3] parameter(2)
        ROOT s = f32[5] scatter(x, i, u), update_window_dims={0}, inserted_window_dims={},
            scatter_dims_to_operand_dims={0}, index_vector_dim=0, to_apply=add""")),
    Case("map_of_parameter", """
        second {
          a = f32[] parameter(0)
          ROOT b = f32[] parameter(1)
        }
        ENTRY e {
          x = f32[4] parameter(0)
          y = f32[4] parameter(1)
          ROOT m = f32[4] map(x, y), dimensions={0}, to_apply=second
        }""",
         "CHECK: ROOT %y = f32[4]{0} parameter(1)",
         negative="""
        sq {
          a = f32[] parameter(0)
          b = f32[] multiply(a, a)
          ROOT c = f32[] add(b, a)
        }
        ENTRY e {
          x = f32[4] parameter(0)
          ROOT m = f32[4] map(x), dimensions={0}, to_apply=sq
        }"""),
    Case("map_of_constant", """
        seven {
          a = f32[] parameter(0)
          ROOT c = f32[] constant(7)
        }
        ENTRY e {
          x = f32[4] parameter(0)
          ROOT m = f32[4] map(x), dimensions={0}, to_apply=seven
        }""",
         """CHECK: ENTRY
            CHECK: %[[C:.*]] = f32[] constant(7)
            CHECK: ROOT %{{.*}} = f32[4]{0} broadcast(%[[C]]), dimensions={}""",
         negative="""
        seven {
          a = f32[] parameter(0)
          ROOT c = f32[2] constant({7, 8})
        }
        ENTRY e {
          x = f32[4] parameter(0)
          ROOT m = f32[4] map(x), dimensions={0}, to_apply=seven
        }""".replace("ROOT c = f32[2] constant({7, 8})",
                     "c = f32[] constant(7)\n  ROOT d = f32[] add(a, c)")),
    Case("map_of_elementwise", entry(ADD, """
        x = f32[4] parameter(0)
        y = f32[4] parameter(1)
        ROOT m = f32[4] map(x, y), dimensions={0}, to_apply=add"""),
         "CHECK: ROOT %{{.*}} = f32[4]{0} add(%x, %y)",
         negative="""
        sq {
          a = f32[] parameter(0)
          b = f32[] multiply(a, a)
          ROOT c = f32[] add(b, a)
        }
        ENTRY e {
          x = f32[4] parameter(0)
          ROOT m = f32[4] map(x), dimensions={0}, to_apply=sq
        }"""),
    Case("gte_of_tuple", """
        x = f32[4] parameter(0)
        y = s32[] parameter(1)
        t = (f32[4], s32[]) tuple(x, y)
        ROOT g = s32[] get-tuple-element(t), index=1""",
         "CHECK: ROOT %y = s32[] parameter(1)",
         negative="""
        t = (f32[4], s32[]) parameter(0)
        ROOT g = s32[] get-tuple-element(t), index=1"""),
    Case("opt_barrier_drops_unused_elements", """
        x = f32[4] parameter(0)
        y = f32[3] parameter(1)
        t = (f32[4], f32[3]) tuple(x, y)
        b = (f32[4], f32[3]) opt-barrier(t)
        ROOT g = f32[3] get-tuple-element(b), index=1""",
         """CHECK: %[[T:.*]] = (f32[3]{0}) tuple(%y)
            CHECK: %b = (f32[3]{0}) opt-barrier(%[[T]])
            CHECK: ROOT %g = f32[3]{0} get-tuple-element(%b), index=0""",
         negative="""
        x = f32[4] parameter(0)
        y = f32[3] parameter(1)
        t = (f32[4], f32[3]) tuple(x, y)
        b = (f32[4], f32[3]) opt-barrier(t)
        g0 = f32[4] get-tuple-element(b), index=0
        g1 = f32[3] get-tuple-element(b), index=1
        ROOT r = (f32[4], f32[3]) tuple(g0, g1)"""),
    Case("conditional_on_converted_pred", """
        b0 {
          x0 = f32[4] parameter(0)
          ROOT n0 = f32[4] negate(x0)
        }
        b1 {
          x1 = f32[4] parameter(0)
          ROOT e1 = f32[4] exponential(x1)
        }
        ENTRY e {
          p = pred[] parameter(0)
          a = f32[4] parameter(1)
          b = f32[4] parameter(2)
          i = s32[] convert(p)
          ROOT c = f32[4] conditional(i, a, b), branch_computations={b0, b1}
        }""",
         """CHECK: ROOT %{{.*}} = f32[4]{0} conditional(%p, %b, %a), true_computation=%b1,
            CHECK-SAME: false_computation=%b0""",
         negative="""
        b0 {
          x0 = f32[4] parameter(0)
          ROOT n0 = f32[4] negate(x0)
        }
        b1 {
          x1 = f32[4] parameter(0)
          ROOT e1 = f32[4] exponential(x1)
        }
        b2 {
          x2 = f32[4] parameter(0)
          ROOT a2 = f32[4] abs(x2)
        }
        ENTRY e {
          p = pred[] parameter(0)
          a = f32[4] parameter(1)
          i = s32[] convert(p)
          ROOT c = f32[4] conditional(i, a, a, a), branch_computations={b0, b1, b2}
        }"""),
]


@parametrize(CASES)
def test_rewrite_applies(case: Case) -> None:
    case.check_applies()


@parametrize(CASES)
def test_rewrite_declines(case: Case) -> None:
    case.check_declines()
