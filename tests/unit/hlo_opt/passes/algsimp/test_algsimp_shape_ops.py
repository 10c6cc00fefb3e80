"""AlgebraicSimplifier: broadcast, reshape, transpose, bitcast, copy, reverse, iota, constant and
conversion rewrites (XLA's HandleBroadcast, HandleReshape, HandleTranspose, HandleBitcast,
HandleCopy, HandleReverse, HandleIota, HandleConstant, HandleConvert, HandleBitcastConvert,
HandleReducePrecision), layout-insensitive and layout-sensitive."""

from algsimp_cases import Case, parametrize

SENSITIVE = {"is_layout_sensitive": True}

CASES = [
    Case("broadcast_to_reshape", """
        p = f32[6] parameter(0)
        ROOT b = f32[1,6] broadcast(p), dimensions={1}""",
         "CHECK: ROOT %{{.*}} = f32[1,6]{1,0} reshape(%p)",
         negative="""
        p = f32[6] parameter(0)
        ROOT b = f32[2,6] broadcast(p), dimensions={1}"""),
    Case("broadcast_to_transpose", """
        p = f32[2,3] parameter(0)
        ROOT b = f32[3,2] broadcast(p), dimensions={1,0}""",
         "CHECK: ROOT %{{.*}} = f32[3,2]{1,0} transpose(%p), dimensions={1,0}",
         negative="""
        p = f32[2,3] parameter(0)
        ROOT b = f32[2,3,2] broadcast(p), dimensions={0,1}"""),
    Case("broadcast_of_degenerate_reshape", """
        p = f32[3] parameter(0)
        r = f32[1,3] reshape(p)
        ROOT b = f32[4,1,3] broadcast(r), dimensions={1,2}""",
         "CHECK: ROOT %{{.*}} = f32[4,1,3]{2,1,0} broadcast(%p), dimensions={2}",
         negative="""
        p = f32[6] parameter(0)
        r = f32[2,3] reshape(p)
        ROOT b = f32[4,2,3] broadcast(r), dimensions={1,2}"""),
    Case("broadcast_sink_past_elementwise", """
        x = f32[3] parameter(0)
        c = f32[] constant(2)
        bx = f32[2,3] broadcast(x), dimensions={1}
        bc = f32[2,3] broadcast(c), dimensions={}
        ROOT m = f32[2,3] multiply(bx, bc)""",
         """CHECK: %[[C3:.*]] = f32[3]{0} broadcast(%c), dimensions={}
            CHECK: %[[M:.*]] = f32[3]{0} multiply(%x, %[[C3]])
            CHECK: ROOT %{{.*}} = f32[2,3]{1,0} broadcast(%[[M]]), dimensions={1}""",
         negative="""
        x = f32[3] parameter(0)
        y = f32[2,3] parameter(1)
        bx = f32[2,3] broadcast(x), dimensions={1}
        ROOT m = f32[2,3] multiply(bx, y)"""),
    Case("broadcast_scalar_through_permuting_user", """
        x = f32[] parameter(0)
        b = f32[2,3] broadcast(x), dimensions={}
        ROOT t = f32[3,2] transpose(b), dimensions={1,0}""",
         "CHECK: ROOT %{{.*}} = f32[3,2]{1,0} broadcast(%x), dimensions={}",
         negative="""
        x = f32[] parameter(0)
        y = f32[2,3] parameter(1)
        b = f32[2,3] broadcast(x), dimensions={}
        ROOT t = f32[2,3] add(b, y)"""),
    Case("broadcast_of_iota", """
        i = s32[4] iota(), iota_dimension=0
        ROOT b = s32[3,4] broadcast(i), dimensions={1}""",
         "CHECK: ROOT %{{.*}} = s32[3,4]{1,0} iota(), iota_dimension=1",
         negative="""
        i = s32[4] parameter(0)
        ROOT b = s32[3,4] broadcast(i), dimensions={1}"""),
    Case("broadcast_of_broadcast", """
        x = f32[3] parameter(0)
        b1 = f32[2,3] broadcast(x), dimensions={1}
        ROOT b2 = f32[2,4,3] broadcast(b1), dimensions={0,2}""",
         "CHECK: ROOT %{{.*}} = f32[2,4,3]{2,1,0} broadcast(%x), dimensions={2}",
         negative="""
        x = f32[3] parameter(0)
        b1 = f32[2,3] negate(x)
        ROOT b2 = f32[2,4,3] broadcast(b1), dimensions={0,2}""".replace("f32[2,3] negate", "f32[3] negate")
         .replace("broadcast(b1), dimensions={0,2}", "broadcast(b1), dimensions={2}")),
    Case("broadcast_drop_degenerate_operand_dims", """
        x = f32[1,3] parameter(0)
        ROOT b = f32[2,1,3] broadcast(x), dimensions={1,2}""",
         """CHECK: %[[R:.*]] = f32[3]{0} reshape(%x)
            CHECK: ROOT %{{.*}} = f32[2,1,3]{2,1,0} broadcast(%[[R]]), dimensions={2}""",
         negative="""
        x = f32[1,3] parameter(0)
        ROOT b = f32[2,1,3] broadcast(x), dimensions={1,2}""",
         negative_options=SENSITIVE),
    Case("reshape_of_zero_elements", """
        x = f32[0,3] parameter(0)
        ROOT r = f32[3,0] reshape(x)""",
         "CHECK: ROOT %{{.*}} = f32[3,0]{1,0} constant({ {}, {}, {} })",
         negative="""
        x = f32[2,3] parameter(0)
        ROOT r = f32[3,2] reshape(x)"""),
    Case("reshape_is_noop", """
        x = f32[2,3] parameter(0)
        ROOT r = f32[2,3] reshape(x)""",
         "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
         negative="""
        x = f32[2,3]{0,1} parameter(0)
        ROOT r = f32[2,3]{1,0} reshape(x)""",
         negative_options=SENSITIVE),
    Case("reshape_of_reshape", """
        x = f32[2,3,4] parameter(0)
        r1 = f32[6,4] reshape(x)
        ROOT r2 = f32[24] reshape(r1)""",
         "CHECK: ROOT %{{.*}} = f32[24]{0} reshape(%x)",
         negative="""
        x = f32[2,3,4] parameter(0)
        r1 = f32[6,4] negate(x)
        ROOT r2 = f32[24] reshape(r1)""".replace("f32[6,4] negate(x)", "f32[2,3,4] negate(x)")),
    Case("reshape_of_broadcast", """
        x = f32[3] parameter(0)
        b = f32[2,5,3] broadcast(x), dimensions={2}
        ROOT r = f32[10,3] reshape(b)""",
         "CHECK: ROOT %{{.*}} = f32[10,3]{1,0} broadcast(%x), dimensions={1}",
         negative="""
        x = f32[3] parameter(0)
        b = f32[2,5,3] broadcast(x), dimensions={2}
        ROOT r = f32[2,15] reshape(b)"""),
    Case("reshape_of_iota", """
        i = s32[6] iota(), iota_dimension=0
        ROOT r = s32[2,3] reshape(i)""",
         """CHECK-DAG: %[[I1:.*]] = s32[2,3]{1,0} iota(), iota_dimension=1
            CHECK-DAG: %[[I0:.*]] = s32[2,3]{1,0} iota(), iota_dimension=0
            CHECK: %[[M:.*]] = s32[2,3]{1,0} multiply(%[[I0]], %{{.*}})
            CHECK: ROOT %{{.*}} = s32[2,3]{1,0} add(%[[I1]], %[[M]])""",
         negative="""
        i = s32[2,3] iota(), iota_dimension=1
        ROOT r = s32[6] reshape(i)"""),
    Case("reshape_of_dynamic_update_slice", """
        x = f32[4,8] parameter(0)
        u = f32[4,2] parameter(1)
        z = s32[] constant(0)
        i = s32[] parameter(2)
        d = f32[4,8] dynamic-update-slice(x, u, z, i)
        ROOT r = f32[4,1,8] reshape(d)""",
         """CHECK-DAG: %[[X:.*]] = f32[4,1,8]{2,1,0} reshape(%x)
            CHECK-DAG: %[[U:.*]] = f32[4,1,2]{2,1,0} reshape(%u)
            CHECK: ROOT %{{.*}} = f32[4,1,8]{2,1,0} dynamic-update-slice(%[[X]], %[[U]], %z, %{{.*}}, %i)""",
         negative="""
        x = f32[4,8] parameter(0)
        u = f32[4,2] parameter(1)
        z = s32[] constant(0)
        i = s32[] parameter(2)
        d = f32[4,8] dynamic-update-slice(x, u, z, i)
        ROOT r = f32[2,16] reshape(d)"""),
    Case("reshape_to_bitcast", """
        x = f32[2,3]{1,0} parameter(0)
        ROOT r = f32[6]{0} reshape(x)""",
         "CHECK: ROOT %{{.*}} = f32[6]{0} bitcast(%x)",
         negative="""
        x = f32[2,3]{0,1} parameter(0)
        ROOT r = f32[6]{0} reshape(x)""",
         options=SENSITIVE),
    Case("transpose_is_identity", """
        x = f32[2,3] parameter(0)
        ROOT t = f32[2,3] transpose(x), dimensions={0,1}""",
         "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
         negative="""
        x = f32[2,3] parameter(0)
        ROOT t = f32[3,2] transpose(x), dimensions={1,0}"""),
    Case("transpose_of_transpose", """
        x = f32[2,3,4] parameter(0)
        t1 = f32[3,4,2] transpose(x), dimensions={1,2,0}
        ROOT t2 = f32[4,2,3] transpose(t1), dimensions={1,2,0}""",
         "CHECK: ROOT %{{.*}} = f32[4,2,3]{2,1,0} transpose(%x), dimensions={2,0,1}",
         negative="""
        x = f32[2,3,4] parameter(0)
        t1 = f32[2,3,4] negate(x)
        ROOT t2 = f32[3,4,2] transpose(t1), dimensions={1,2,0}"""),
    Case("transpose_of_dot", """
        a = f32[2,3] parameter(0)
        b = f32[3,4] parameter(1)
        d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        ROOT t = f32[4,2] transpose(d), dimensions={1,0}""",
         "CHECK: ROOT %{{.*}} = f32[4,2]{1,0} dot(%b, %a), "
         "lhs_contracting_dims={0}, rhs_contracting_dims={1}",
         negative="""
        a = f32[2,3] parameter(0)
        b = f32[3,4] parameter(1)
        d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
        t = f32[4,2] transpose(d), dimensions={1,0}
        ROOT r = (f32[4,2], f32[2,4]) tuple(t, d)"""),
    Case("transpose_of_degenerate_dims", """
        x = f32[1,3,1,4] parameter(0)
        ROOT t = f32[3,1,4,1] transpose(x), dimensions={1,0,3,2}""",
         "CHECK: ROOT %{{.*}} = f32[3,1,4,1]{3,2,1,0} reshape(%x)",
         negative="""
        x = f32[1,3,1,4] parameter(0)
        ROOT t = f32[4,1,3,1] transpose(x), dimensions={3,0,1,2}"""),
    Case("transpose_to_bitcast", """
        x = f32[2,3]{1,0} parameter(0)
        ROOT t = f32[3,2]{0,1} transpose(x), dimensions={1,0}""",
         "CHECK: ROOT %{{.*}} = f32[3,2]{0,1} bitcast(%x)",
         negative="""
        x = f32[2,3]{1,0} parameter(0)
        ROOT t = f32[3,2]{1,0} transpose(x), dimensions={1,0}""",
         options=SENSITIVE),
    Case("transpose_of_broadcast", """
        x = f32[2,4] parameter(0)
        b = f32[2,3,4] broadcast(x), dimensions={0,2}
        ROOT t = f32[3,2,4] transpose(b), dimensions={1,0,2}""",
         "CHECK: ROOT %{{.*}} = f32[3,2,4]{2,1,0} broadcast(%x), dimensions={1,2}",
         negative="""
        x = f32[2,4] parameter(0)
        b = f32[2,3,4] broadcast(x), dimensions={0,2}
        ROOT t = f32[4,3,2] transpose(b), dimensions={2,1,0}"""),
    Case("bitcast_of_bitcast", """
        x = f32[2,3]{1,0} parameter(0)
        b1 = f32[6]{0} bitcast(x)
        ROOT b2 = f32[3,2]{1,0} bitcast(b1)""",
         "CHECK: ROOT %{{.*}} = f32[3,2]{1,0} bitcast(%x)",
         negative="""
        x = f32[2,3]{0,1} parameter(0)
        b1 = f32[6]{0} reshape(x)
        ROOT b2 = f32[3,2]{1,0} bitcast(b1)""",
         options=SENSITIVE),
    Case("bitcast_is_noop", """
        x = f32[2,3]{1,0} parameter(0)
        ROOT b = f32[2,3]{1,0} bitcast(x)""",
         "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
         negative="""
        x = f32[2,3]{1,0} parameter(0)
        ROOT b = f32[2,3]{0,1} bitcast(x)""",
         options=SENSITIVE, numeric=True),
    Case("copy_of_copy", """
        x = f32[2,3]{1,0} parameter(0)
        c1 = f32[2,3]{0,1} copy(x)
        ROOT c2 = f32[2,3]{1,0} copy(c1)""",
         "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
         negative="""
        x = f32[2,3]{1,0} parameter(0)
        c1 = f32[2,3]{0,1} negate(x)
        ROOT c2 = f32[2,3]{1,0} copy(c1)""",
         options=SENSITIVE),
    Case("copy_is_noop", """
        x = f32[2,3] parameter(0)
        ROOT c = f32[2,3] copy(x)""",
         "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
         negative="""
        x = f32[2,3]{1,0} parameter(0)
        ROOT c = f32[2,3]{0,1} copy(x)""",
         negative_options=SENSITIVE),
    Case("copy_to_bitcast", """
        x = f32[1,6]{1,0} parameter(0)
        ROOT c = f32[1,6]{0,1} copy(x)""",
         "CHECK: ROOT %{{.*}} = f32[1,6]{0,1} bitcast(%x)",
         negative="""
        x = f32[2,3]{1,0} parameter(0)
        ROOT c = f32[2,3]{0,1} copy(x)""",
         options=SENSITIVE),
    Case("copy_of_bitcast_reshape", """
        x = f32[2,3] parameter(0)
        r = f32[6] reshape(x)
        ROOT c = f32[6] copy(r), sharding={replicated}""",
         "CHECK: ROOT %{{.*}} = f32[6]{0} reshape(%x), sharding={replicated}",
         negative="""
        x = f32[2,3] parameter(0)
        r = f32[6] reshape(x)
        n = f32[6] negate(r)
        ROOT c = f32[6] copy(r), sharding={replicated}"""),
    Case("reverse_of_degenerate_dims", """
        x = f32[1,4] parameter(0)
        ROOT r = f32[1,4] reverse(x), dimensions={0}""",
         "CHECK: ROOT %x = f32[1,4]{1,0} parameter(0)",
         negative="""
        x = f32[1,4] parameter(0)
        ROOT r = f32[1,4] reverse(x), dimensions={0,1}"""),
    Case("reverse_of_reverse", """
        x = f32[2,3] parameter(0)
        r1 = f32[2,3] reverse(x), dimensions={0,1}
        ROOT r2 = f32[2,3] reverse(r1), dimensions={1}""",
         "CHECK: ROOT %{{.*}} = f32[2,3]{1,0} reverse(%x), dimensions={0}",
         negative="""
        x = f32[2,3] parameter(0)
        r1 = f32[2,3] reverse(x), dimensions={0,1}
        ROOT r2 = f32[2,3] reverse(r1), dimensions={1}""",
         negative_options=SENSITIVE),
    Case("reverse_of_elementwise_with_scalar", """
        x = f32[5] parameter(0)
        c = f32[] constant(3)
        b = f32[5] broadcast(c), dimensions={}
        s = f32[5] subtract(b, x)
        ROOT r = f32[5] reverse(s), dimensions={0}""",
         """CHECK: %[[R:.*]] = f32[5]{0} reverse(%x), dimensions={0}
            CHECK: ROOT %{{.*}} = f32[5]{0} subtract(%b, %[[R]])""",
         negative="""
        x = f32[5] parameter(0)
        y = f32[5] parameter(1)
        s = f32[5] subtract(y, x)
        ROOT r = f32[5] reverse(s), dimensions={0}"""),
    Case("reverse_of_degenerate_reshape", """
        x = f32[3,4] parameter(0)
        s = f32[3,1,4] reshape(x)
        ROOT r = f32[3,1,4] reverse(s), dimensions={1,2}""",
         """CHECK: %[[R:.*]] = f32[3,4]{1,0} reverse(%x), dimensions={1}
            CHECK: ROOT %{{.*}} = f32[3,1,4]{2,1,0} reshape(%[[R]])""",
         negative="""
        x = f32[12] parameter(0)
        s = f32[3,1,4] reshape(x)
        ROOT r = f32[3,1,4] reverse(s), dimensions={1,2}"""),
    Case("iota_of_degenerate_dim", """
        ROOT i = s32[1,4] iota(), iota_dimension=0""",
         """CHECK: %[[Z:.*]] = s32[] constant(0)
            CHECK: ROOT %{{.*}} = s32[1,4]{1,0} broadcast(%[[Z]]), dimensions={}""",
         negative="""
        ROOT i = s32[2,4] iota(), iota_dimension=0"""),
    Case("constant_tuple_to_tuple", """
        ROOT c = (f32[2], s32[]) constant(({1.5, 2.5}, 7))""",
         """CHECK-DAG: %[[A:.*]] = f32[2]{0} constant({1.5, 2.5})
            CHECK-DAG: %[[B:.*]] = s32[] constant(7)
            CHECK: ROOT %{{.*}} = (f32[2]{0}, s32[]) tuple(%[[A]], %[[B]])""",
         negative="""
        ROOT c = f32[2] constant({1.5, 2.5})"""),
    Case("constant_splat_to_broadcast", """
        ROOT c = f32[2,2] constant({{3, 3}, {3, 3}})""",
         """CHECK: %[[S:.*]] = f32[] constant(3)
            CHECK: ROOT %{{.*}} = f32[2,2]{1,0} broadcast(%[[S]]), dimensions={}""",
         negative="""
        ROOT c = f32[2,2] constant({{3, 3}, {3, 4}})"""),
    Case("constant_iota", """
        ROOT c = s32[4] constant({0, 3, 6, 9})""",
         """CHECK: %[[I:.*]] = s32[4]{0} iota(), iota_dimension=0
            CHECK: ROOT %{{.*}} = s32[4]{0} multiply(%[[I]], %{{.*}})""",
         negative="""
        ROOT c = s32[4] constant({0, 3, 6, 8})"""),
    Case("convert_to_same_type", """
        x = f32[4] parameter(0)
        ROOT c = f32[4] convert(x)""",
         "CHECK: ROOT %x = f32[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        ROOT c = bf16[4] convert(x)"""),
    Case("convert_pair_is_noop", """
        x = s32[4] parameter(0)
        w = s64[4] convert(x)
        ROOT c = s32[4] convert(w)""",
         "CHECK: ROOT %x = s32[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        w = bf16[4] convert(x)
        ROOT c = f32[4] convert(w)"""),
    Case("convert_of_constant", """
        k = f32[3] constant({1.5, -2, 3})
        ROOT c = bf16[3] convert(k)""",
         "CHECK: ROOT %{{.*}} = bf16[3]{0} constant({1.5, -2, 3})",
         negative="""
        k = f32[3] constant({1.5, -2, 3})
        ROOT c = bf16[3] convert(k)""",
         options={"use_convert_constant_folding": True}, negative_options={}),
    Case("convert_narrows_integer_op", """
        a = s8[4] parameter(0)
        b = s8[4] parameter(1)
        wa = s32[4] convert(a)
        wb = s32[4] convert(b)
        m = s32[4] multiply(wa, wb)
        ROOT c = s8[4] convert(m)""",
         "CHECK: ROOT %{{.*}} = s8[4]{0} multiply(%a, %b)",
         negative="""
        a = s8[4] parameter(0)
        b = s8[4] parameter(1)
        wa = s32[4] convert(a)
        wb = s32[4] convert(b)
        m = s32[4] divide(wa, wb)
        ROOT c = s8[4] convert(m)"""),
    Case("bitcast_convert_of_bitcast_convert", """
        x = s32[4] parameter(0)
        f = f32[4] bitcast-convert(x)
        ROOT u = u32[4] bitcast-convert(f)""",
         "CHECK: ROOT %{{.*}} = u32[4]{0} bitcast-convert(%x)",
         negative="""
        x = s32[4] parameter(0)
        f = f32[4] convert(x)
        ROOT u = u32[4] bitcast-convert(f)"""),
    Case("bitcast_convert_of_concatenated_bitcast_converts", """
        x = f32[2] parameter(0)
        y = f32[3] parameter(1)
        bx = s32[2] bitcast-convert(x)
        by = s32[3] bitcast-convert(y)
        c = s32[5] concatenate(bx, by), dimensions={0}
        ROOT r = f32[5] bitcast-convert(c)""",
         "CHECK: ROOT %{{.*}} = f32[5]{0} concatenate(%x, %y), dimensions={0}",
         negative="""
        x = f32[2] parameter(0)
        y = s32[3] parameter(1)
        bx = s32[2] bitcast-convert(x)
        c = s32[5] concatenate(bx, y), dimensions={0}
        ROOT r = f32[5] bitcast-convert(c)"""),
    Case("bitcast_convert_is_noop", """
        x = f32[4] parameter(0)
        ROOT b = f32[4] bitcast-convert(x)""",
         "CHECK: ROOT %x = f32[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        ROOT b = s32[4] bitcast-convert(x)"""),
    Case("reduce_precision_is_noop", """
        x = bf16[4] parameter(0)
        ROOT r = bf16[4] reduce-precision(x), exponent_bits=8, mantissa_bits=7""",
         "CHECK: ROOT %x = bf16[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        ROOT r = f32[4] reduce-precision(x), exponent_bits=8, mantissa_bits=7""",
         options={"enable_remove_no_op_reduce_precision": True}),
]


@parametrize(CASES)
def test_rewrite_applies(case: Case) -> None:
    case.check_applies()


@parametrize(CASES)
def test_rewrite_declines(case: Case) -> None:
    case.check_declines()
