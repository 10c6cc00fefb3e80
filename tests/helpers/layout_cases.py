"""Hand-written modules for `test_layout_sensitive_pipe.py`, one or more per pass that rewrites
according to layouts. Each written with non-default layouts where the pass cares, none with a
bitcast (XLA:CPU runs them as written, through StableHLO, which has no layouts).

`WITNESS[name]` is a predicate on the optimized module's text that shows the case reached the
layout-sensitive path it is written for (a BIAS epilogue on a column-major result, a row
reduction of a logical column reduction, ...), so a case that drifts away from its purpose fails.
"""

from __future__ import annotations

import re

GELU = """
  k3 = f32[] constant(0.044715)
  c3 = f32[64,8] broadcast(k3), dimensions={}
  ks = f32[] constant(0.797884583)
  cs = f32[64,8] broadcast(ks), dimensions={}
  kh = f32[] constant(0.5)
  half = f32[64,8] broadcast(kh), dimensions={}
  k1 = f32[] constant(1)
  one = f32[64,8] broadcast(k1), dimensions={}
  x2 = f32[64,8] multiply(a, a)
  x3 = f32[64,8] multiply(x2, a)
  t0 = f32[64,8] multiply(x3, c3)
  t1 = f32[64,8] add(a, t0)
  t2 = f32[64,8] multiply(t1, cs)
  th = f32[64,8] tanh(t2)
  t3 = f32[64,8] add(th, one)
  t4 = f32[64,8] multiply(t3, half)
  g = f32[64,8] multiply(a, t4)"""


def gemm_epilogue(name: str, activation: str, bias: bool = True) -> str:
    """dot -> f32[64,8] with a bias along dim 0 (or none) and an activation, transposed at the
    root: layout assignment makes the dot column-major, so the bias runs along its minor dim."""
    body = {"": "  g = f32[64,8] copy(a)",
            "RELU": "  k0 = f32[] constant(0)\n  z = f32[64,8] broadcast(k0), dimensions={}\n"
                    "  g = f32[64,8] maximum(a, z)",
            "GELU": GELU}[activation]
    add = ("  b = f32[64] parameter(2)\n  bb = f32[64,8] broadcast(b), dimensions={0}\n"
           "  a = f32[64,8] add(d, bb)") if bias else "  a = f32[64,8] copy(d)"
    return f"""HloModule {name}
ENTRY main {{
  w = f32[64,16] parameter(0)
  x = f32[8,16] parameter(1)
  d = f32[64,8] dot(w, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
{add}
{body}
  ROOT t = f32[8,64] transpose(g), dimensions={{1,0}}
}}
"""


def gemm_batched(name: str, result_layout: str, bias_dim: int) -> str:
    """A batched dot f32[4,32,8] plus a bias along `bias_dim`, the sum wanted in `result_layout`
    (the knob of layout-assignment moves the dot into each layout cuBLAS can write:
    test_layout_sensitive_pipe.py)."""
    size = (4, 32, 8)[bias_dim]
    return f"""HloModule {name}
ENTRY main {{
  a = f32[4,32,16]{{2,1,0}} parameter(0)
  b = f32[4,16,8]{{1,2,0}} parameter(1)
  v = f32[{size}] parameter(2)
  d = f32[4,32,8] dot(a, b), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}},
    rhs_contracting_dims={{1}}
  vb = f32[4,32,8] broadcast(v), dimensions={{{bias_dim}}}
  ROOT s = f32[4,32,8]{result_layout} add(d, vb)
}}
"""


CASES: dict[str, str] = {
    "gemm_bias_colmajor": gemm_epilogue("gemm_bias_colmajor", ""),
    "gemm_bias_relu_colmajor": gemm_epilogue("gemm_bias_relu_colmajor", "RELU"),
    "gemm_bias_gelu_colmajor": gemm_epilogue("gemm_bias_gelu_colmajor", "GELU"),
    "gemm_relu_colmajor": gemm_epilogue("gemm_relu_colmajor", "RELU", bias=False),
    "gemm_gelu_colmajor": gemm_epilogue("gemm_gelu_colmajor", "GELU", bias=False),
    "gemm_batched_bias": gemm_batched("gemm_batched_bias", "{2,1,0}", 2),
    # reshapes that merge and split dims of column-major values: bitcasts, or transposes + bitcasts
    "reshape_permuted": """HloModule reshape_permuted
ENTRY main {
  p = f32[8,6,4]{0,1,2} parameter(0)
  q = f32[48,4]{0,1} parameter(1)
  r1 = f32[48,4] reshape(p)
  s = f32[48,4] add(r1, q)
  r2 = f32[8,24] reshape(s)
  e = f32[8,24] exponential(r2)
  ROOT r3 = f32[2,4,24]{0,2,1} reshape(e)
}
""",
    "transpose_permuted": """HloModule transpose_permuted
ENTRY main {
  p = f32[16,32,8]{0,1,2} parameter(0)
  q = f32[32,8,16]{2,1,0} parameter(1)
  t = f32[32,8,16] transpose(p), dimensions={1,2,0}
  a = f32[32,8,16] add(t, q)
  ROOT u = f32[8,16,32]{1,0,2} transpose(a), dimensions={1,2,0}
}
""",
    # a logical column reduction that is a row reduction in memory, and a reduce over an outer and
    # an inner dim of a 3-d value laid out {1,0,2}
    "reduce_permuted": """HloModule reduce_permuted
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  p = f32[512,48]{0,1} parameter(0)
  z = f32[] constant(0)
  r0 = f32[48] reduce(p, z), dimensions={0}, to_apply=add
  q = f32[8,64,32]{1,0,2} parameter(1)
  e = f32[8,64,32] exponential(q)
  r1 = f32[64] reduce(e, z), dimensions={0,2}, to_apply=add
  ROOT t = (f32[48], f32[64]) tuple(r0, r1)
}
""",
    "concat_slice_pad_permuted": """HloModule concat_slice_pad_permuted
ENTRY main {
  a = f32[8,16]{0,1} parameter(0)
  b = f32[8,24]{1,0} parameter(1)
  c = f32[8,40] concatenate(a, b), dimensions={1}
  s = f32[6,20] slice(c), slice={[1:7], [0:40:2]}
  z = f32[] constant(0)
  ROOT p = f32[9,42]{0,1} pad(s, z), padding=1_2x0_3_1
}
""",
    "dus_scatter_gather_permuted": """HloModule dus_scatter_gather_permuted
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  op = f32[16,32]{0,1} parameter(0)
  up = f32[4,8]{0,1} parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  dus = f32[16,32] dynamic-update-slice(op, up, i, j)
  idx = s32[5,1] parameter(4)
  upd = f32[5,32]{0,1} parameter(5)
  sc = f32[16,32] scatter(dus, idx, upd), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  g = f32[5,32] gather(sc, idx), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,32}
  ROOT t = (f32[16,32]{1,0}, f32[5,32]{0,1}) tuple(sc, g)
}
""",
    "convolution_permuted": """HloModule convolution_permuted
ENTRY main {
  img = f32[2,8,8,3]{0,1,2,3} parameter(0)
  k = f32[3,3,3,4]{3,2,0,1} parameter(1)
  c = f32[2,8,8,4] convolution(img, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT r = f32[2,8,8,4]{1,2,3,0} maximum(c, c)
}
""",
    "while_permuted": """HloModule while_permuted
cond {
  s = (s32[], f32[8,16]{0,1}, f32[16,16]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(n, three), direction=LT
}
body {
  s = (s32[], f32[8,16]{0,1}, f32[16,16]) parameter(0)
  n = s32[] get-tuple-element(s), index=0
  x = f32[8,16]{0,1} get-tuple-element(s), index=1
  w = f32[16,16] get-tuple-element(s), index=2
  d = f32[8,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[8,16] tanh(d)
  one = s32[] constant(1)
  n1 = s32[] add(n, one)
  ROOT r = (s32[], f32[8,16]{0,1}, f32[16,16]) tuple(n1, t, w)
}
ENTRY main {
  x = f32[8,16]{0,1} parameter(0)
  w = f32[16,16]{0,1} parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[8,16]{0,1}, f32[16,16]) tuple(zero, x, w)
  l = (s32[], f32[8,16]{0,1}, f32[16,16]) while(init), condition=cond, body=body
  ROOT o = f32[8,16]{1,0} get-tuple-element(l), index=1
}
""",
    "conditional_permuted": """HloModule conditional_permuted
on_true {
  p = f32[12,20]{0,1} parameter(0)
  ROOT n = f32[20,12] transpose(p), dimensions={1,0}
}
on_false {
  p = f32[12,20]{1,0} parameter(0)
  t = f32[20,12]{0,1} transpose(p), dimensions={1,0}
  ROOT e = f32[20,12]{0,1} exponential(t)
}
ENTRY main {
  c = pred[] parameter(0)
  a = f32[12,20]{0,1} parameter(1)
  b = f32[12,20]{1,0} parameter(2)
  ROOT r = f32[20,12]{0,1} conditional(c, a, b), true_computation=on_true, false_computation=on_false
}
""",
}


def _has(pattern: str):
    return lambda text: re.search(pattern, text) is not None


def _lt_epilogue(epilogue: str, shape: str = r"f32\[64,8\]\{0,1\}"):
    # the cuBLASLt call's result has the layout and carries the epilogue
    return _has(r"\(" + shape + r', s8\[\d+\]\{0\}\) custom-call\([^\n]*"epilogue":"' + epilogue + '"')


WITNESS = {
    "gemm_bias_colmajor": _lt_epilogue("BIAS"),
    "gemm_bias_relu_colmajor": _lt_epilogue("BIAS_RELU"),
    "gemm_bias_gelu_colmajor": _lt_epilogue("BIAS_GELU"),
    "gemm_relu_colmajor": _lt_epilogue("RELU"),
    "gemm_gelu_colmajor": _lt_epilogue("GELU"),
    "gemm_batched_bias": _lt_epilogue("BIAS", r"f32\[4,32,8\]\{2,1,0\}"),
    "reshape_permuted": _has(r"bitcast\("),
    "transpose_permuted": _has(r"bitcast\("),
    "reduce_permuted": _has(r"kind=kInput"),
    "concat_slice_pad_permuted": _has(r"concatenate\(|pad\("),
    "dus_scatter_gather_permuted": _has(r"scatter\("),
    "convolution_permuted": _has(r"__cudnn\$convForward"),  # XLA:GPU makes it a cuDNN call
    "while_permuted": _has(r"while\("),
    "conditional_permuted": _has(r"conditional\("),
}
