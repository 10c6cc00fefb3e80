"""Shape inference, positive cases: one or more per opcode family, expected shapes worked out by hand
(the arithmetic is in the comments). Instructions are written without a shape so the parser asks
`infer_shape`; opcodes whose shape only the text can give are checked through the verifier."""

from __future__ import annotations

import re

import pytest

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import OPCODES
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.shape_inference import RULES, infer_shape, needs_declared_shape
from hlo_common.hlo.verifier import verify_module

ADD = "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"


def check(body: str, expected: str, prelude: str = "", of: str = "r") -> None:
    """Write `expected` as the shape of instruction `of` in `ENTRY e { body }`, verify the module, then
    clear that shape and infer it again from the operands and attributes alone."""
    body = re.sub(rf"(^|\n)(\s*(?:ROOT )?){re.escape(of)} = ",
                  lambda m: f"{m.group(1)}{m.group(2)}{of} = {expected} ", body, count=1)
    m = parse_module(f"HloModule m\n{prelude}ENTRY e {{\n{body}\n}}")
    verify_module(m)
    instr = next(i for i in m.entry.instructions if i.name == of)
    declared, instr.shape = instr.shape, None
    try:
        assert infer_shape(instr).to_string(print_layout=False) == expected
    finally:
        instr.shape = declared


def test_every_opcode_has_a_rule() -> None:
    assert set(OPCODES) <= set(RULES)
    assert len(OPCODES) == 133


def test_result_has_default_layout() -> None:
    m = parse_module("ENTRY e { p = f32[2,3]{0,1} parameter(0)  ROOT n = negate(p) }")
    assert str(m.entry.root.shape) == "f32[2,3]{1,0}"


@pytest.mark.parametrize("body, expected", [
    ("p = f32[2,3] parameter(0)\n ROOT r = add(p, p)", "f32[2,3]"),
    ("p = s32[4] parameter(0)\n ROOT r = compare(p, p), direction=LT", "pred[4]"),
    ("p = f32[4] parameter(0)\n ROOT r = is-finite(p)", "pred[4]"),
    ("p = c64[3] parameter(0)\n ROOT r = abs(p)", "f32[3]"),
    ("p = c128[3] parameter(0)\n ROOT r = real(p)", "f64[3]"),
    ("p = f32[2] parameter(0)\n ROOT r = complex(p, p)", "c64[2]"),
    ("p = u8[5] parameter(0)\n ROOT r = popcnt(p)", "u8[5]"),
    ("p = bf16[2] parameter(0)\n ROOT r = reduce-precision(p), exponent_bits=5, mantissa_bits=2", "bf16[2]"),
    ("p = pred[2,2] parameter(0)\n x = f32[2,2] parameter(1)\n ROOT r = select(p, x, x)", "f32[2,2]"),
    ("lo = f32[] parameter(0)\n x = f32[7] parameter(1)\n ROOT r = clamp(lo, x, lo)", "f32[7]"),
    ("p = s32[3] parameter(0)\n ROOT r = shift-left(p, p)", "s32[3]"),
    ("p = f32[3] parameter(0)\n ROOT r = copy(p)", "f32[3]"),
])
def test_elementwise(body: str, expected: str) -> None:
    check(body, expected)


@pytest.mark.parametrize("declared, ok", [
    ("u8[4,4]", True),    # 32 -> 8 bits: a minor dimension of 32/8 = 4 is appended
    ("s16[4,2]", True),   # 32 -> 16 bits: ratio 2
    ("u32[4]", True),     # same width: same dimensions
    ("u8[4]", False),     # narrowing without the extra dimension
    ("f64[4]", False),    # widening needs a last dimension equal to the ratio (2), found 4
])
def test_bitcast_convert_changes_minor_dimension(declared: str, ok: bool) -> None:
    m = parse_module(f"ENTRY e {{ p = f32[4] parameter(0)  ROOT r = {declared} bitcast-convert(p) }}")
    if ok:
        verify_module(m)
    else:
        with pytest.raises(Exception, match="expected"):
            verify_module(m)


def test_bitcast_convert_widening_drops_minor_dimension() -> None:
    m = parse_module("ENTRY e { p = u8[3,4] parameter(0)  ROOT r = f32[3] bitcast-convert(p) }")
    verify_module(m)  # 8 -> 32 bits: the last dimension (4 = 32/8) disappears


@pytest.mark.parametrize("body, expected", [
    # transpose: output dim i = operand dim perm[i] = [4, 2, 3]
    ("p = f32[2,3,4] parameter(0)\n ROOT r = transpose(p), dimensions={2,0,1}", "f32[4,2,3]"),
    # slice [2:9:3] takes 2,5,8 -> 3 elements; [0:8] -> 8
    ("p = f32[10,8] parameter(0)\n ROOT r = slice(p), slice={[2:9:3], [0:8]}", "f32[3,8]"),
    ("p = f32[10,8] parameter(0)\n i = s32[] parameter(1)\n ROOT r = dynamic-slice(p, i, i), "
     "dynamic_slice_sizes={4,8}", "f32[4,8]"),
    ("p = f32[10,8] parameter(0)\n u = f32[2,8] parameter(1)\n i = s32[] parameter(2)\n"
     " ROOT r = dynamic-update-slice(p, u, i, i)", "f32[10,8]"),
    # concatenate along 1: 2 + 5 = 7
    ("a = f32[3,2] parameter(0)\n b = f32[3,5] parameter(1)\n ROOT r = concatenate(a, b), dimensions={1}",
     "f32[3,7]"),
    # pad: 5 - 1 + 2 + (5-1)*1 = 10
    ("p = f32[5] parameter(0)\n z = f32[] parameter(1)\n ROOT r = pad(p, z), padding=-1_2_1", "f32[10]"),
    # pad: dim 0: 4 + 1 + 0 + 3*2 = 11; dim 1: 3 - 1 - 1 = 1
    ("p = f32[4,3] parameter(0)\n z = f32[] parameter(1)\n ROOT r = pad(p, z), padding=1_0_2x-1_-1",
     "f32[11,1]"),
    ("p = f32[4,3] parameter(0)\n ROOT r = reverse(p), dimensions={0,1}", "f32[4,3]"),
    ("p = f32[4] parameter(0)\n q = s32[] parameter(1)\n ROOT r = tuple(p, q)", "(f32[4], s32[])"),
    ("p = (f32[4], s32[]) parameter(0)\n ROOT r = get-tuple-element(p), index=1", "s32[]"),
    ("p = f32[4,3] parameter(0)\n ROOT r = get-dimension-size(p), dimensions={1}", "s32[]"),
    ("p = f32[4,3] parameter(0)\n n = s32[] parameter(1)\n ROOT r = set-dimension-size(p, n), "
     "dimensions={1}", "f32[4,<=3]"),
])
def test_data_movement(body: str, expected: str) -> None:
    check(body, expected)


def test_copy_start_done() -> None:
    body = "p = f32[8] parameter(0)\n s = copy-start(p)\n ROOT r = f32[8] copy-done(s)"
    check(body, "(f32[8], f32[8], u32[])", of="s")
    body = "p = f32[8] parameter(0)\n s = (f32[8], f32[8], u32[]) copy-start(p)\n ROOT r = copy-done(s)"
    check(body, "f32[8]")


def test_shape_only_opcodes_check_the_written_shape() -> None:
    ok = ("ENTRY e { p = f32[2,3] parameter(0)  s = f32[] parameter(1)\n"
          "  r = f32[3,2] reshape(p)  b = f32[4,2,3] broadcast(p), dimensions={1,2}\n"
          "  i = s32[5,2] iota(), iota_dimension=1  c = f32[2] constant({1, 2})\n"
          "  bc = s32[6] bitcast(p)  sb = f32[9] broadcast(s)\n"
          "  ROOT t = (f32[3,2], f32[4,2,3], s32[5,2], f32[2], s32[6], f32[9]) tuple(r, b, i, c, bc, sb) }")
    verify_module(parse_module(ok))
    for name in ("p", "r", "i", "c", "bc"):
        instr = next(i for i in parse_module(ok).entry.instructions if i.name == name)
        assert needs_declared_shape(instr), name


def test_shapeless_broadcast_follows_xla_parser() -> None:
    # XLA's parser prepends `dimensions` as sizes: for a scalar without dimensions, the scalar shape.
    m = parse_module("ENTRY e { s = f32[] parameter(0)  ROOT r = broadcast(s) }")
    assert m.entry.root.shape.to_string(False) == "f32[]"


GATHER = ("ENTRY e {{ p = f32[{op}] parameter(0)  i = s32[{idx}] parameter(1)\n"
          "  ROOT g = gather(p, i), {dims} }}")


def test_gather() -> None:
    # rank = 2 offset dims + (rank(indices) 2 - 1) = 3; batch dim from indices = 7;
    # window dims = operand dims not collapsed (1, 2) with slice sizes 2 and 5.
    dims = ("offset_dims={1,2}, collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, "
            "slice_sizes={1,2,5}")
    m = parse_module(GATHER.format(op="3,4,5", idx="7,2", dims=dims))
    assert m.entry.root.shape.to_string(False) == "f32[7,2,5]"


def test_gather_with_batching_dims() -> None:
    # indices [8,5,1] minus index_vector_dim -> [8,5]; window dim 2 keeps 4 -> [8,5,4]
    dims = ("offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, "
            "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,4}")
    m = parse_module(GATHER.format(op="8,3,4", idx="8,5,1", dims=dims))
    assert m.entry.root.shape.to_string(False) == "f32[8,5,4]"


def test_gather_implicit_index_vector_dim() -> None:
    # index_vector_dim = rank(indices) = 1: indices [6] become [6,1]; output [6] + window [3]
    dims = ("offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, "
            "slice_sizes={1,3}")
    m = parse_module(GATHER.format(op="10,3", idx="6", dims=dims))
    assert m.entry.root.shape.to_string(False) == "f32[6,3]"


SCATTER_DIMS = ("update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                "index_vector_dim=1")


def test_scatter_and_variadic_scatter() -> None:
    one = (ADD + "ENTRY e { p = f32[5,4] parameter(0)  i = s32[3,1] parameter(1)  u = f32[3,4] parameter(2)\n"
           f"  ROOT s = scatter(p, i, u), {SCATTER_DIMS}, to_apply=add }}")
    assert parse_module(one).entry.root.shape.to_string(False) == "f32[5,4]"
    two = ("add2 { a = f32[] parameter(0)  b = s32[] parameter(1)  c = f32[] parameter(2)  "
           "d = s32[] parameter(3)  x = f32[] add(a, c)  y = s32[] add(b, d)  ROOT t = (f32[], s32[]) "
           "tuple(x, y) }\n"
           "ENTRY e { p = f32[5,4] parameter(0)  q = s32[5,4] parameter(1)  i = s32[3,1] parameter(2)\n"
           "  u = f32[3,4] parameter(3)  v = s32[3,4] parameter(4)\n"
           f"  ROOT s = scatter(p, q, i, u, v), {SCATTER_DIMS}, to_apply=add2 }}")
    assert parse_module(two).entry.root.shape.to_string(False) == "(f32[5,4], s32[5,4])"


REDUCE2 = ("r2 { a = f32[] parameter(0)  b = s32[] parameter(1)  c = f32[] parameter(2)  "
           "d = s32[] parameter(3)\n"
           "  x = f32[] maximum(a, c)  y = s32[] minimum(b, d)  ROOT t = (f32[], s32[]) tuple(x, y) }\n")


@pytest.mark.parametrize("body, expected", [
    # reduce over {0,2} keeps dimension 1 (3)
    ("p = f32[2,3,4] parameter(0)\n z = f32[] parameter(1)\n ROOT r = reduce(p, z), dimensions={0,2}, "
     "to_apply=add", "f32[3]"),
    ("p = f32[2,3] parameter(0)\n q = s32[2,3] parameter(1)\n z = f32[] parameter(2)\n y = s32[] "
     "parameter(3)\n"
     " ROOT r = reduce(p, q, z, y), dimensions={1}, to_apply=r2", "(f32[2], s32[2])"),
    # windows: (4-2)/2+1 = 2 and (6-3)/3+1 = 2
    ("p = f32[4,6] parameter(0)\n z = f32[] parameter(1)\n ROOT r = reduce-window(p, z), "
     "window={size=2x3 stride=2x3}, to_apply=add", "f32[2,2]"),
    # padded 1+5+1 = 7, window 3 -> 5
    ("p = f32[5] parameter(0)\n z = f32[] parameter(1)\n ROOT r = reduce-window(p, z), "
     "window={size=3 pad=1_1}, to_apply=add", "f32[5]"),
    # base dilation 2 on 4 elements -> 7 positions, window 1 -> 7
    ("p = f32[4] parameter(0)\n z = f32[] parameter(1)\n ROOT r = reduce-window(p, z), "
     "window={size=1 lhs_dilate=2}, to_apply=add", "f32[7]"),
    # window dilation 2 makes a size-2 window span 3: (8-3)/1+1 = 6
    ("p = f32[8] parameter(0)\n z = f32[] parameter(1)\n ROOT r = reduce-window(p, z), "
     "window={size=2 rhs_dilate=2}, to_apply=add", "f32[6]"),
    ("p = f32[4,10] parameter(0)\n ROOT r = topk(p), k=3, largest=true", "(f32[4,3], s32[4,3])"),
])
def test_reductions(body: str, expected: str) -> None:
    check(body, expected, ADD + REDUCE2)


def test_select_and_scatter_sort_scan() -> None:
    ge = ("ge { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = pred[] compare(a, b), "
          "direction=GE }\n")
    body = ("p = f32[4,6] parameter(0)\n s = f32[2,2] parameter(1)\n z = f32[] parameter(2)\n"
            " ROOT r = select-and-scatter(p, s, z), window={size=2x3 stride=2x3}, select=ge, scatter=add")
    check(body, "f32[4,6]", ADD + ge)
    lt2 = ("lt { a = f32[] parameter(0)  b = f32[] parameter(1)  c = s32[] parameter(2)  "
           "d = s32[] parameter(3)\n"
           "  ROOT r = pred[] compare(a, b), direction=LT }\n")
    body = ("k = f32[5,3] parameter(0)\n v = s32[5,3] parameter(1)\n ROOT r = sort(k, v), dimensions={0}, "
            "to_apply=lt")
    check(body, "(f32[5,3], s32[5,3])", lt2)
    scan = ("comb { x = f32[] parameter(0)  c = f32[] parameter(1)  s = f32[] add(x, c)\n"
            "  ROOT t = (f32[], f32[]) tuple(s, s) }\n")
    body = ("x = f32[10] parameter(0)\n i = f32[] parameter(1)\n ROOT r = scan(x, i), dimensions={0}, "
            "num_carries=1, is_associative=true, to_apply=comb")
    check(body, "(f32[10], f32[])", scan)


@pytest.mark.parametrize("body, expected", [
    # batch [2], lhs free [3], rhs free [5]
    ("a = f32[2,3,4] parameter(0)\n b = f32[2,4,5] parameter(1)\n ROOT r = dot(a, b), lhs_batch_dims={0}, "
     "rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}", "f32[2,3,5]"),
    # no contracting dims: outer product
    ("a = f32[3] parameter(0)\n b = f32[4] parameter(1)\n ROOT r = dot(a, b)", "f32[3,4]"),
    # ragged non-contracting: rhs group dim 0 (3 groups) disappears: [19,11] + [7]
    ("a = f32[19,11,5] parameter(0)\n b = f32[3,5,7] parameter(1)\n g = s64[19,3] parameter(2)\n"
     " ROOT r = ragged-dot(a, b, g), lhs_contracting_dims={2}, rhs_contracting_dims={1}, "
     "lhs_ragged_dims={1}, rhs_group_dims={0}", "f32[19,11,7]"),
    # ragged contracting: a leading group dimension of 3 is added: [3] + [11] + [7]
    ("a = f32[11,19,5] parameter(0)\n b = f32[19,5,7] parameter(1)\n g = s64[19,3] parameter(2)\n"
     " ROOT r = ragged-dot(a, b, g), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, "
     "lhs_ragged_dims={2}", "f32[3,11,7]"),
    # ragged batch: a plain batched dot
    ("a = f32[19,17,11,5] parameter(0)\n b = f32[19,17,5,7] parameter(1)\n g = s64[19,3] parameter(2)\n"
     " ROOT r = ragged-dot(a, b, g), lhs_batch_dims={0,1}, rhs_batch_dims={0,1}, lhs_contracting_dims={3}, "
     "rhs_contracting_dims={2}, lhs_ragged_dims={1}", "f32[19,17,11,7]"),
    # same padding: (5 + 2 - 3)/1 + 1 = 5; output features from the kernel: 4
    ("x = f32[1,5,5,2] parameter(0)\n k = f32[3,3,2,4] parameter(1)\n ROOT r = convolution(x, k), "
     "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f", "f32[1,5,5,4]"),
    # stride 2: (5 + 2 - 3)/2 + 1 = 3; output laid out as bf01
    ("x = f32[1,5,5,2] parameter(0)\n k = f32[3,3,2,4] parameter(1)\n ROOT r = convolution(x, k), "
     "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->bf01", "f32[1,4,3,3]"),
    # feature groups: 4 input features / 2 groups = kernel input 2
    ("x = f32[1,6,4] parameter(0)\n k = f32[3,2,8] parameter(1)\n ROOT r = convolution(x, k), "
     "window={size=3}, dim_labels=b0f_0io->b0f, feature_group_count=2", "f32[1,4,8]"),
    # batch groups: batch 4 / 2 = 2
    ("x = f32[4,6,3] parameter(0)\n k = f32[3,3,8] parameter(1)\n ROOT r = convolution(x, k), "
     "window={size=3}, dim_labels=b0f_0io->b0f, batch_group_count=2", "f32[2,4,8]"),
    # RFFT of length 8 keeps 8/2+1 = 5 complex values
    ("p = f32[3,8] parameter(0)\n ROOT r = fft(p), fft_type=RFFT, fft_length={8}", "c64[3,5]"),
    ("p = c64[3,5] parameter(0)\n ROOT r = fft(p), fft_type=IRFFT, fft_length={8}", "f32[3,8]"),
    ("p = c64[4,4] parameter(0)\n ROOT r = fft(p), fft_type=IFFT, fft_length={4,4}", "c64[4,4]"),
    ("p = f32[2,4,4] parameter(0)\n ROOT r = cholesky(p), lower=true", "f32[2,4,4]"),
    ("a = f32[4,4] parameter(0)\n b = f32[4,3] parameter(1)\n ROOT r = triangular-solve(a, b), "
     "left_side=true, lower=true, transpose_a=NO_TRANSPOSE", "f32[4,3]"),
    ("x = f32[2,3,4] parameter(0)\n s = f32[3] parameter(1)\n ROOT r = batch-norm-training(x, s, s), "
     "epsilon=0.001, feature_index=1", "(f32[2,3,4], f32[3], f32[3])"),
    ("x = f32[2,3] parameter(0)\n s = f32[3] parameter(1)\n ROOT r = batch-norm-inference(x, s, s, s, s), "
     "epsilon=0.001, feature_index=1", "f32[2,3]"),
])
def test_linear_algebra(body: str, expected: str) -> None:
    check(body, expected)


def test_dot_takes_the_preferred_element_type() -> None:
    verify_module(parse_module("ENTRY e { a = s8[2,3] parameter(0)  b = s8[3,4] parameter(1)\n"
                               "  ROOT r = s32[2,4] dot(a, b), lhs_contracting_dims={1}, "
                               "rhs_contracting_dims={0} }"))


def test_calls_and_control_flow() -> None:
    prelude = (ADD + "cond { s = (s32[], f32[4]) parameter(0)  i = s32[] get-tuple-element(s), index=0\n"
               "  n = s32[] constant(3)  ROOT c = pred[] compare(i, n), direction=LT }\n"
               "body { s = (s32[], f32[4]) parameter(0)  ROOT t = (s32[], f32[4]) copy(s) }\n"
               "br0 { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }\n"
               "br1 { y = s32[] parameter(0)  c = f32[] convert(y)  ROOT b = f32[4] broadcast(c) }\n"
               "fused { x = f32[4] parameter(0)  ROOT e = f32[4] exponential(x) }\n")
    body = ("p = f32[4] parameter(0)\n i = s32[] parameter(1)\n z = f32[] parameter(2)\n"
            " c = call(z, z), to_apply=add\n"
            " t = tuple(i, p)\n w = while(t), condition=cond, body=body\n"
            " k = conditional(i, p, i), branch_computations={br0, br1}\n"
            " f = f32[4] fusion(p), kind=kLoop, calls=fused\n"
            " ROOT r = tuple(c, w, k, f)")
    # (call result, while state, branch result, fusion root)
    check(body, "(f32[], (s32[], f32[4]), f32[4], f32[4])", prelude)
    check(body.replace("f32[4] fusion", "fusion"), "f32[4]", prelude, of="f")


def test_async_tokens_and_host_io() -> None:
    prelude = "wrapped { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }\n"
    shapes = {"s": "((f32[4]), f32[4])", "u": "((f32[4]), f32[4])", "d": "f32[4]", "tok": "token[]",
              "snd": "(f32[4], u32[], token[])", "sd": "token[]", "dep": "f32[4]", "ob": "f32[4]",
              "rd": "(f32[2], token[])", "r": "(f32[4], (f32[2], token[]))"}
    body = ("p = f32[4] parameter(0)\n s = async-start(p), calls=wrapped\n u = async-update(s)\n"
            " d = async-done(u)\n tok = after-all()\n snd = send(p, tok), channel_id=1\n"
            " sd = send-done(snd), channel_id=1\n dep = add-dependency(d, sd)\n ob = opt-barrier(dep)\n"
            " rcv = (f32[2], u32[], token[]) recv(tok), channel_id=2\n rd = recv-done(rcv), channel_id=2\n"
            " ROOT r = tuple(ob, rd)")
    for name, shape in shapes.items():
        others = body
        for other, other_shape in shapes.items():  # every other instruction gets its shape written
            if other != name:
                others = re.sub(rf"(\s(?:ROOT )?){other} = ", lambda m: f"{m.group(1)}{other} = {other_shape} ",
                                others, count=1)
        check(others, shape, prelude, of=name)


@pytest.mark.parametrize("body, expected", [
    ("p = f32[2,3] parameter(0)\n q = s32[5] parameter(1)\n ROOT r = all-reduce(p, q), to_apply=add",
     "(f32[2,3], s32[5])"),
    # 4 participants per group gather along dimension 1: 3 * 4 = 12
    ("p = f32[2,3] parameter(0)\n ROOT r = all-gather(p), replica_groups={{0,1,2,3}}, dimensions={1}",
     "f32[2,12]"),
    # iota form [2,4]<=[8]: 2 groups of 4
    ("p = f32[2,3] parameter(0)\n ROOT r = all-gather(p), replica_groups=[2,4]<=[8], dimensions={0}",
     "f32[8,3]"),
    ("p = f32[2,3] parameter(0)\n ROOT r = all-gather-start(p), replica_groups={{0,1}}, dimensions={0}",
     "(f32[2,3], f32[4,3])"),
    # 8 / 2 participants = 4
    ("p = f32[8,2] parameter(0)\n ROOT r = reduce-scatter(p), replica_groups={{0,1}}, dimensions={0}, "
     "to_apply=add", "f32[4,2]"),
    ("p = f32[8,2] parameter(0)\n ROOT r = all-to-all(p), replica_groups={{0,1}}, dimensions={0}",
     "f32[8,2]"),
    ("p = f32[8] parameter(0)\n q = f32[8] parameter(1)\n ROOT r = all-to-all(p, q), replica_groups={{0,1}}",
     "(f32[8], f32[8])"),
    ("p = f32[8] parameter(0)\n ROOT r = collective-permute(p), source_target_pairs={{0,1},{1,0}}", "f32[8]"),
    ("ROOT r = replica-id()", "u32[]"),
    ("ROOT r = partition-id()", "u32[]"),
])
def test_collectives(body: str, expected: str) -> None:
    check(body, expected, ADD)


def test_collective_permute_start_done() -> None:
    body = ("p = f32[8] parameter(0)\n s = collective-permute-start(p), source_target_pairs={{0,1}}\n"
            " ROOT r = f32[8] collective-permute-done(s)")
    check(body, "(f32[8], f32[8])", of="s")
    check(body.replace(" s = ", " s = (f32[8], f32[8]) ").replace("f32[8] collective-permute-done", "collective-permute-done"),
          "f32[8]")


def test_group_size_from_module_replica_count() -> None:
    # Empty replica groups: every replica participates, replica_count=4 -> 3 * 4 = 12.
    m = parse_module("HloModule m, replica_count=4\nENTRY e { p = f32[3] parameter(0)\n"
                     "  ROOT r = f32[12] all-gather(p), replica_groups={}, dimensions={0} }")
    verify_module(m)
    assert infer_shape(m.entry.root).to_string(False) == "f32[12]"


def test_pass_built_instruction() -> None:
    """Passes build instructions without a shape and ask infer_shape."""
    m = parse_module("ENTRY e { p = f32[2,3] parameter(0)  ROOT n = f32[2,3] negate(p) }")
    p = m.entry.parameters[0]
    t = HloInstruction("t", "transpose", None, [p], {"dimensions": (1, 0)})
    assert str(infer_shape(t)) == "f32[3,2]{1,0}"


def test_remaining_opcodes() -> None:
    """Every opcode not covered above, in one module that must verify (declared shapes by hand)."""
    text = ADD + """
mapped { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] multiply(a, b) }
t { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }
f { x = f32[4] parameter(0)  ROOT n = f32[4] abs(x) }
ENTRY e {
  p = f32[4] parameter(0)
  i = s32[] parameter(1)
  c = pred[] parameter(2)
  tok = token[] parameter(3)
  u = u32[4] parameter(4)
  x4 = f32[2,3,4] parameter(5)
  s3 = f32[3] parameter(6)
  a = bf16[2,4] parameter(7)
  b = bf16[8,4] parameter(8)
  sa = f8e8m0fnu[2,1] parameter(9)
  sb = f8e8m0fnu[8,1] parameter(10)
  map = f32[4] map(p, p), dimensions={0}, to_apply=mapped
  dr = f32[2,2] dynamic-reshape(p, i, i)
  rng = f32[3,5] rng(p0, p1), distribution=rng_uniform
  rbg = (u64[2], u32[7]) rng-bit-generator(st), algorithm=rng_default
  rs = u64[2] rng-get-and-update-state(), delta=4
  inf = ((f32[2], s32[]), token[]) infeed(tok), infeed_config="x"
  outf = token[] outfeed(p, tok), outfeed_config="y"
  cc = (f32[3], s8[]) custom-call(p, i), custom_call_target="anything"
  dom = f32[4] domain(p), domain={kind="sharding", entry={maximal device=0}, exit={}}
  sc = s8[4] stochastic-convert(p, u)
  bng = (f32[2,3,4], f32[3], f32[3]) batch-norm-grad(x4, s3, s3, s3, x4), epsilon=0.001, feature_index=1
  sd = f32[2,8] scaled-dot(a, b, sa, sb), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  cb = f32[4] collective-broadcast(p), replica_groups={{0,1}}
  ra = f32[4] ragged-all-to-all(p, p, i1, i1, i1, i1), replica_groups={{0,1}}
  ags = (f32[4], f32[8]) all-gather-start(p), replica_groups={{0,1}}, dimensions={0}
  agd = f32[8] all-gather-done(ags)
  ars = f32[4] all-reduce-start(p), replica_groups={{0,1}}, to_apply=add
  ard = f32[4] all-reduce-done(ars)
  cnd = f32[4] conditional(c, p, p), true_computation=t, false_computation=f
  ROOT r = tuple(map, dr, rng, rbg, rs, inf, outf, cc, dom, sc, bng, sd, cb, ra, agd, ard, cnd)
}"""
    text = text.replace("  map =", "  p0 = f32[] parameter(11)\n  p1 = f32[] parameter(12)\n"
                        "  st = u64[2] parameter(13)\n  i1 = s32[2] parameter(14)\n  map =")
    m = parse_module(text)
    verify_module(m)
    assert m.entry.root.shape.to_string(False).startswith("(f32[4], f32[2,2], f32[3,5], (u64[2], u32[7]), u64[2]")
