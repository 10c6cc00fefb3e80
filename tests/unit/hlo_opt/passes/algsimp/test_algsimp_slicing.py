"""AlgebraicSimplifier: slice, concatenate, pad, dynamic-slice and dynamic-update-slice rewrites
(XLA's HandleSlice, HandleConcatenate, HandlePad, HandleDynamicSlice, HandleDynamicUpdateSlice)."""

from algsimp_cases import Case, parametrize

SENSITIVE = {"is_layout_sensitive": True}

CASES = [
    Case("slice_is_noop", """
        x = f32[4,3] parameter(0)
        ROOT s = f32[4,3] slice(x), slice={[0:4], [0:3]}""",
         "CHECK: ROOT %x = f32[4,3]{1,0} parameter(0)",
         negative="""
        x = f32[4,3] parameter(0)
        ROOT s = f32[3,3] slice(x), slice={[1:4], [0:3]}"""),
    Case("slice_of_pad", """
        x = f32[4] parameter(0)
        z = f32[] constant(0)
        p = f32[8] pad(x, z), padding=2_2
        ROOT s = f32[4] slice(p), slice={[2:6]}""",
         "CHECK: ROOT %x = f32[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        z = f32[] constant(0)
        p = f32[8] pad(x, z), padding=2_2
        ROOT s = f32[4] slice(p), slice={[1:5]}"""),
    Case("slice_of_slice", """
        x = f32[10,6] parameter(0)
        t1 = f32[6,4] slice(x), slice={[2:8], [1:5]}
        ROOT t2 = f32[2,2] slice(t1), slice={[3:5], [1:3]}""",
         "CHECK: ROOT %{{.*}} = f32[2,2]{1,0} slice(%x), slice={[5:7], [2:4]}",
         negative="""
        x = f32[10,6] parameter(0)
        t1 = f32[3,4] slice(x), slice={[2:8:2], [1:5]}
        ROOT t2 = f32[2,2] slice(t1), slice={[1:3], [1:3]}"""),
    Case("slice_of_broadcast_only_new_dims", """
        x = f32[3] parameter(0)
        b = f32[5,3] broadcast(x), dimensions={1}
        ROOT s = f32[2,3] slice(b), slice={[1:3], [0:3]}""",
         "CHECK: ROOT %{{.*}} = f32[2,3]{1,0} broadcast(%x), dimensions={1}",
         negative="""
        b = s32[5,3] iota(), iota_dimension=1
        ROOT s = s32[2,3] slice(b), slice={[1:3], [0:3]}"""),
    Case("slice_scalar_of_concat", """
        a = f32[3] parameter(0)
        b = f32[1] parameter(1)
        c = f32[4] concatenate(a, b), dimensions={0}
        ROOT s = f32[1] slice(c), slice={[3:4]}""",
         "CHECK: ROOT %b = f32[1]{0} parameter(1)",
         negative="""
        a = f32[4] parameter(0)
        b = f32[4] parameter(1)
        c = f32[4] add(a, b)
        ROOT s = f32[1] slice(c), slice={[3:4]}"""),
    Case("slice_of_broadcast", """
        x = f32[6] parameter(0)
        b = f32[4,6] broadcast(x), dimensions={1}
        ROOT s = f32[4,2] slice(b), slice={[0:4], [1:5:2]}""",
         """CHECK: %[[S:.*]] = f32[2]{0} slice(%x), slice={[1:5:2]}
            CHECK: ROOT %{{.*}} = f32[4,2]{1,0} broadcast(%[[S]]), dimensions={1}""",
         negative="""
        x = f32[4,6] parameter(0)
        ROOT s = f32[4,2] slice(x), slice={[0:4], [1:5:2]}"""),
    Case("slice_of_concat", """
        a = f32[3,2] parameter(0)
        b = f32[4,2] parameter(1)
        c = f32[5,2] parameter(2)
        cat = f32[12,2] concatenate(a, b, c), dimensions={0}
        ROOT s = f32[3,2] slice(cat), slice={[4:7], [0:2]}""",
         "CHECK: ROOT %{{.*}} = f32[3,2]{1,0} slice(%b), slice={[1:4], [0:2]}",
         negative="""
        a = f32[3,2] parameter(0)
        b = f32[4,2] parameter(1)
        cat = f32[7,2] concatenate(a, b), dimensions={0}
        ROOT s = f32[4,2] slice(cat), slice={[2:6], [0:2]}"""),
    Case("slice_of_reshape", """
        x = f32[4,6] parameter(0)
        r = f32[8,3] reshape(x)
        ROOT s = f32[4,3] slice(r), slice={[2:6], [0:3]}""",
         """CHECK: %[[S:.*]] = f32[2,6]{1,0} slice(%x), slice={[1:3], [0:6]}
            CHECK: ROOT %{{.*}} = f32[4,3]{1,0} reshape(%[[S]])""",
         negative="""
        x = f32[4,6] parameter(0)
        r = f32[8,3] reshape(x)
        ROOT s = f32[3,3] slice(r), slice={[2:5], [0:3]}"""),
    Case("slice_of_reverse", """
        x = f32[8] parameter(0)
        r = f32[8] reverse(x), dimensions={0}
        ROOT s = f32[3] slice(r), slice={[1:6:2]}""",
         """CHECK: %[[S:.*]] = f32[3]{0} slice(%x), slice={[2:7:2]}
            CHECK: ROOT %{{.*}} = f32[3]{0} reverse(%[[S]]), dimensions={0}""",
         negative="""
        x = f32[8] parameter(0)
        r = f32[8] negate(x)
        ROOT s = f32[3] slice(r), slice={[1:6:2]}"""),
    Case("slice_redundant_stride", """
        x = f32[8,4] parameter(0)
        ROOT s = f32[1,4] slice(x), slice={[2:5:4], [0:4:1]}""",
         "CHECK: ROOT %{{.*}} = f32[1,4]{1,0} slice(%x), slice={[2:3], [0:4]}",
         negative="""
        x = f32[8,4] parameter(0)
        ROOT s = f32[2,4] slice(x), slice={[2:7:4], [0:4:1]}"""),
    Case("concat_of_one_operand", """
        x = f32[4] parameter(0)
        ROOT c = f32[4] concatenate(x), dimensions={0}""",
         "CHECK: ROOT %x = f32[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        ROOT c = f32[8] concatenate(x, x), dimensions={0}"""),
    Case("concat_drop_empty_operands", """
        x = f32[4] parameter(0)
        y = f32[0] parameter(1)
        z = f32[3] parameter(2)
        ROOT c = f32[7] concatenate(x, y, z), dimensions={0}""",
         "CHECK: ROOT %{{.*}} = f32[7]{0} concatenate(%x, %z), dimensions={0}",
         negative="""
        x = f32[4] parameter(0)
        z = f32[3] parameter(1)
        ROOT c = f32[7] concatenate(x, z), dimensions={0}"""),
    Case("concat_flatten_nested", """
        x = f32[2] parameter(0)
        y = f32[3] parameter(1)
        z = f32[4] parameter(2)
        inner = f32[7] concatenate(y, z), dimensions={0}
        ROOT c = f32[9] concatenate(x, inner), dimensions={0}""",
         "CHECK: ROOT %{{.*}} = f32[9]{0} concatenate(%x, %y, %z), dimensions={0}",
         negative="""
        x = f32[2,3] parameter(0)
        y = f32[1,3] parameter(1)
        z = f32[1,3] parameter(2)
        inner = f32[1,6] concatenate(y, z), dimensions={1}
        inner2 = f32[2,3] reshape(inner)
        ROOT c = f32[4,3] concatenate(x, inner2), dimensions={0}"""),
    Case("concat_merge_adjacent_slices", """
        x = f32[10] parameter(0)
        y = f32[2] parameter(1)
        a = f32[3] slice(x), slice={[1:4]}
        b = f32[4] slice(x), slice={[4:8]}
        ROOT c = f32[9] concatenate(a, b, y), dimensions={0}""",
         """CHECK: %[[S:.*]] = f32[7]{0} slice(%x), slice={[1:8]}
            CHECK: ROOT %{{.*}} = f32[9]{0} concatenate(%[[S]], %y), dimensions={0}""",
         negative="""
        x = f32[10] parameter(0)
        y = f32[2] parameter(1)
        a = f32[3] slice(x), slice={[1:4]}
        b = f32[4] slice(x), slice={[5:9]}
        ROOT c = f32[9] concatenate(a, b, y), dimensions={0}"""),
    Case("concat_with_broadcast_scalar_to_pad", """
        x = f32[3,4] parameter(0)
        v = f32[] parameter(1)
        b = f32[3,2] broadcast(v), dimensions={}
        ROOT c = f32[3,6] concatenate(x, b), dimensions={1}""",
         "CHECK: ROOT %{{.*}} = f32[3,6]{1,0} pad(%x, %v), padding=0_0x0_2",
         negative="""
        x = f32[3,4] parameter(0)
        v = f32[2] parameter(1)
        b = f32[3,2] broadcast(v), dimensions={1}
        ROOT c = f32[3,6] concatenate(x, b), dimensions={1}"""),
    Case("concat_of_same_size1_operand", """
        x = f32[3,1] parameter(0)
        ROOT c = f32[3,4] concatenate(x, x, x, x), dimensions={1}""",
         """CHECK: %[[R:.*]] = f32[3]{0} reshape(%x)
            CHECK: ROOT %{{.*}} = f32[3,4]{1,0} broadcast(%[[R]]), dimensions={0}""",
         negative="""
        x = f32[3,2] parameter(0)
        ROOT c = f32[3,6] concatenate(x, x, x), dimensions={1}"""),
    Case("pad_of_zero_element_operand", """
        x = f32[0,3] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[2,3] pad(x, v), padding=1_1x0_0""",
         "CHECK: ROOT %{{.*}} = f32[2,3]{1,0} broadcast(%v), dimensions={}",
         negative="""
        x = f32[1,3] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[3,3] pad(x, v), padding=1_1x0_0"""),
    Case("pad_clear_interior_on_size1", """
        x = f32[1,3] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[3,3] pad(x, v), padding=1_1_2x0_0_0""",
         "CHECK: ROOT %{{.*}} = f32[3,3]{1,0} pad(%x, %v), padding=1_1x0_0",
         negative="""
        x = f32[2,3] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[6,3] pad(x, v), padding=1_1_2x0_0_0"""),
    Case("pad_is_noop", """
        x = f32[2,3] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[2,3] pad(x, v), padding=0_0x0_0""",
         "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
         negative="""
        x = f32[2,3] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[4,3] pad(x, v), padding=1_0_1x0_0"""),
    Case("pad_negative_to_slice", """
        x = f32[6] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[6] pad(x, v), padding=-1_1""",
         """CHECK: %[[P:.*]] = f32[7]{0} pad(%x, %v), padding=0_1
            CHECK: ROOT %{{.*}} = f32[6]{0} slice(%[[P]]), slice={[1:7]}""",
         negative="""
        x = f32[6] parameter(0)
        v = f32[] parameter(1)
        ROOT p = f32[6] pad(x, v), padding=-1_1""",
         negative_options={"enable_negative_padding_replacement": False}),
    Case("dynamic_slice_is_whole_operand", """
        x = f32[4] parameter(0)
        i = s32[] parameter(1)
        ROOT d = f32[4] dynamic-slice(x, i), dynamic_slice_sizes={4}""",
         "CHECK: ROOT %x = f32[4]{0} parameter(0)",
         negative="""
        x = f32[4] parameter(0)
        i = s32[] parameter(1)
        ROOT d = f32[3] dynamic-slice(x, i), dynamic_slice_sizes={3}"""),
    Case("dynamic_slice_zero_full_dim_index", """
        x = f32[4,6] parameter(0)
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        ROOT d = f32[4,2] dynamic-slice(x, i, j), dynamic_slice_sizes={4,2}""",
         """CHECK: %[[Z:.*]] = s32[] constant(0)
            CHECK: ROOT %{{.*}} = f32[4,2]{1,0} dynamic-slice(%x, %[[Z]], %j), dynamic_slice_sizes={4,2}""",
         negative="""
        x = f32[4,6] parameter(0)
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        ROOT d = f32[3,2] dynamic-slice(x, i, j), dynamic_slice_sizes={3,2}"""),
    Case("dynamic_slice_of_broadcast", """
        x = f32[6] parameter(0)
        b = f32[5,6] broadcast(x), dimensions={1}
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        ROOT d = f32[2,3] dynamic-slice(b, i, j), dynamic_slice_sizes={2,3}""",
         """CHECK: %[[S:.*]] = f32[3]{0} dynamic-slice(%x, %j), dynamic_slice_sizes={3}
            CHECK: ROOT %{{.*}} = f32[2,3]{1,0} broadcast(%[[S]]), dimensions={1}""",
         negative="""
        x = f32[5,6] parameter(0)
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        ROOT d = f32[2,3] dynamic-slice(x, i, j), dynamic_slice_sizes={2,3}"""),
    Case("dynamic_slice_of_transpose", """
        x = f32[6,5] parameter(0)
        t = f32[5,6] transpose(x), dimensions={1,0}
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        ROOT d = f32[2,3] dynamic-slice(t, i, j), dynamic_slice_sizes={2,3}""",
         """CHECK: %[[S:.*]] = f32[3,2]{1,0} dynamic-slice(%x, %j, %i), dynamic_slice_sizes={3,2}
            CHECK: ROOT %{{.*}} = f32[2,3]{1,0} transpose(%[[S]]), dimensions={1,0}""",
         negative="""
        x = f32[6,5] parameter(0)
        t = f32[5,6] transpose(x), dimensions={1,0}
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        ROOT d = f32[2,3] dynamic-slice(t, i, j), dynamic_slice_sizes={2,3}""",
         negative_options=SENSITIVE),
    Case("dynamic_slice_to_slice", """
        x = f32[8] parameter(0)
        i = s32[] constant(6)
        ROOT d = f32[3] dynamic-slice(x, i), dynamic_slice_sizes={3}""",
         "CHECK: ROOT %{{.*}} = f32[3]{0} slice(%x), slice={[5:8]}",
         negative="""
        x = f32[8] parameter(0)
        i = s32[] constant(-1)
        ROOT d = f32[3] dynamic-slice(x, i), dynamic_slice_sizes={3}"""),
    Case("dynamic_slice_of_dynamic_slice", """
        x = f32[10] parameter(0)
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        d1 = f32[6] dynamic-slice(x, i), dynamic_slice_sizes={6}
        ROOT d2 = f32[2] dynamic-slice(d1, j), dynamic_slice_sizes={2}""",
         """CHECK-DAG: %[[CI:.*]] = s32[] clamp(%{{.*}}, %i, %{{.*}})
            CHECK-DAG: %[[CJ:.*]] = s32[] clamp(%{{.*}}, %j, %{{.*}})
            CHECK: %[[A:.*]] = s32[] add(%[[CI]], %[[CJ]])
            CHECK: ROOT %{{.*}} = f32[2]{0} dynamic-slice(%x, %[[A]]), dynamic_slice_sizes={2}""",
         negative="""
        x = f32[10] parameter(0)
        i = s32[] parameter(1)
        j = s32[] parameter(2)
        d1 = f32[6] slice(x), slice={[1:7]}
        ROOT d2 = f32[2] dynamic-slice(d1, j), dynamic_slice_sizes={2}"""),
    Case("dus_of_broadcast_to_pad", """
        u = f32[3] parameter(0)
        z = f32[] constant(0)
        b = f32[8] broadcast(z), dimensions={}
        i = s32[] constant(2)
        ROOT d = f32[8] dynamic-update-slice(b, u, i)""",
         "CHECK: ROOT %{{.*}} = f32[8]{0} pad(%u, %z), padding=2_3",
         negative="""
        u = f32[3] parameter(0)
        z = f32[] constant(0)
        b = f32[8] broadcast(z), dimensions={}
        i = s32[] parameter(1)
        ROOT d = f32[8] dynamic-update-slice(b, u, i)"""),
    Case("dus_full_update", """
        x = f32[4] parameter(0)
        u = f32[4] parameter(1)
        i = s32[] parameter(2)
        ROOT d = f32[4] dynamic-update-slice(x, u, i)""",
         "CHECK: ROOT %u = f32[4]{0} parameter(1)",
         negative="""
        x = f32[4] parameter(0)
        u = f32[3] parameter(1)
        i = s32[] parameter(2)
        ROOT d = f32[4] dynamic-update-slice(x, u, i)"""),
    Case("dus_zero_full_dim_index", """
        x = f32[4,6] parameter(0)
        u = f32[4,2] parameter(1)
        i = s32[] parameter(2)
        j = s32[] parameter(3)
        ROOT d = f32[4,6] dynamic-update-slice(x, u, i, j)""",
         """CHECK: %[[Z:.*]] = s32[] constant(0)
            CHECK: ROOT %{{.*}} = f32[4,6]{1,0} dynamic-update-slice(%x, %u, %[[Z]], %j)""",
         negative="""
        x = f32[4,6] parameter(0)
        u = f32[3,2] parameter(1)
        i = s32[] parameter(2)
        j = s32[] parameter(3)
        ROOT d = f32[4,6] dynamic-update-slice(x, u, i, j)"""),
    Case("dus_of_empty_update", """
        x = f32[4,6] parameter(0)
        u = f32[0,2] parameter(1)
        i = s32[] parameter(2)
        j = s32[] parameter(3)
        ROOT d = f32[4,6] dynamic-update-slice(x, u, i, j)""",
         "CHECK: ROOT %x = f32[4,6]{1,0} parameter(0)",
         negative="""
        x = f32[4,6] parameter(0)
        u = f32[1,2] parameter(1)
        i = s32[] parameter(2)
        j = s32[] parameter(3)
        ROOT d = f32[4,6] dynamic-update-slice(x, u, i, j)"""),
    Case("dus_of_dus_of_own_slice", """
        a = f32[10] parameter(0)
        c = f32[2] parameter(1)
        i = s32[] parameter(2)
        j = s32[] parameter(3)
        w = f32[5] dynamic-slice(a, i), dynamic_slice_sizes={5}
        inner = f32[5] dynamic-update-slice(w, c, j)
        ROOT d = f32[10] dynamic-update-slice(a, inner, i)""",
         """CHECK-DAG: %[[CI:.*]] = s32[] clamp(%{{.*}}, %i, %{{.*}})
            CHECK-DAG: %[[CJ:.*]] = s32[] clamp(%{{.*}}, %j, %{{.*}})
            CHECK: %[[A:.*]] = s32[] add(%[[CI]], %[[CJ]])
            CHECK: ROOT %{{.*}} = f32[10]{0} dynamic-update-slice(%a, %c, %[[A]])""",
         negative="""
        a = f32[10] parameter(0)
        c = f32[2] parameter(1)
        i = s32[] parameter(2)
        j = s32[] parameter(3)
        k = s32[] parameter(4)
        w = f32[5] dynamic-slice(a, k), dynamic_slice_sizes={5}
        inner = f32[5] dynamic-update-slice(w, c, j)
        ROOT d = f32[10] dynamic-update-slice(a, inner, i)"""),
]


@parametrize(CASES)
def test_rewrite_applies(case: Case) -> None:
    case.check_applies()


@parametrize(CASES)
def test_rewrite_declines(case: Case) -> None:
    case.check_declines()
