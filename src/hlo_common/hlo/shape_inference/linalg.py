"""Shape rules of linear algebra and DNN opcodes: dot, ragged-dot, scaled-dot, convolution, fft,
cholesky, triangular-solve and the batch-norm family.

Dot-like ops and convolution take their element type from the written shape when there is one
(XLA's "preferred element type"); it may not narrow an integral input type.
"""

from __future__ import annotations

from hlo_common.hlo.attributes import Window
from hlo_common.hlo.dtypes import PRIMITIVE_TYPES
from hlo_common.hlo.shape_inference._base import (
    attr, check_dim_list, describe, expect_array, fail, higher_precision, int_attr, ints_attr, like, make,
    operand_shape, rule, same_type_ignoring_fp, tuple_of, window_output_dims, word_attr,
)


def _result_type(instr, a, b):
    base = higher_precision(a.element_type, b.element_type)
    if instr.shape is None or not instr.shape.is_array:
        return base
    want = instr.shape.element_type
    if want is not base and not base.is_float and want.bits < base.bits:
        fail(f"result element type {want.name} is narrower than the operand type {base.name}, expected at "
             f"least {base.bits} bits")
    return want


def _dot_attrs(instr):
    return tuple(ints_attr(instr, k, ()) for k in (
        "lhs_batch_dims", "rhs_batch_dims", "lhs_contracting_dims", "rhs_contracting_dims"))


def _dot_dims(lhs, rhs, lb, rb, lc, rc):
    check_dim_list(lb + lc, lhs.rank, "lhs batch and contracting dims")
    check_dim_list(rb + rc, rhs.rank, "rhs batch and contracting dims")
    if len(lc) != len(rc):
        fail(f"{len(lc)} lhs contracting dims and {len(rc)} rhs contracting dims, expected equal counts")
    if len(lb) != len(rb):
        fail(f"{len(lb)} lhs batch dims and {len(rb)} rhs batch dims, expected equal counts")
    for a, b in zip(lc, rc):
        if lhs.dims[a] != rhs.dims[b]:
            fail(f"contracting dimension sizes differ: lhs dimension {a} is {lhs.dims[a]}, "
                 f"rhs dimension {b} is {rhs.dims[b]}; expected equal sizes")
    for a, b in zip(lb, rb):
        if lhs.dims[a] != rhs.dims[b]:
            fail(f"batch dimension sizes differ: lhs dimension {a} is {lhs.dims[a]}, "
                 f"rhs dimension {b} is {rhs.dims[b]}; expected equal sizes")
    return lb, rb, lc, rc


def _dot_output(lhs, rhs, lb, rb, lc, rc, rhs_skip=()) -> list[int]:
    out = [lhs.dims[d] for d in lb]
    out += [n for d, n in enumerate(lhs.dims) if d not in lb and d not in lc]
    out += [n for d, n in enumerate(rhs.dims) if d not in rb and d not in rc and d not in rhs_skip]
    return out


@rule("dot", "scaled-dot")
def _dot(instr, ctx):
    lhs = operand_shape(instr, 0, "lhs of dot")
    rhs = operand_shape(instr, 1, "rhs of dot")
    lb, rb, lc, rc = _dot_dims(lhs, rhs, *_dot_attrs(instr))
    return make(_result_type(instr, lhs, rhs), _dot_output(lhs, rhs, lb, rb, lc, rc))


@rule("ragged-dot")
def _ragged_dot(instr, ctx):
    lhs = operand_shape(instr, 0, "lhs of ragged-dot")
    rhs = operand_shape(instr, 1, "rhs of ragged-dot")
    groups = operand_shape(instr, 2, "group sizes of ragged-dot")
    if not groups.element_type.is_integer or groups.rank < 1:
        fail(f"group sizes are {describe(groups)}, expected an integral array of rank >= 1")
    num_groups = groups.dims[-1]
    ragged = ints_attr(instr, "lhs_ragged_dims")
    group_dims = ints_attr(instr, "rhs_group_dims", ())
    if len(ragged) != 1:
        fail(f"lhs_ragged_dims has {len(ragged)} entries, expected exactly 1")
    check_dim_list(ragged, lhs.rank, "lhs_ragged_dims")
    check_dim_list(group_dims, rhs.rank, "rhs_group_dims")
    r = ragged[0]
    lb, rb, lc, rc = _dot_attrs(instr)
    if r in lc or r in lb:  # ragged contracting or batch dimension: no group dimension on rhs
        if group_dims:
            fail("found rhs_group_dims with a ragged batch or contracting dimension, expected none")
        _dot_dims(lhs, rhs, lb, rb, lc, rc)
        out = _dot_output(lhs, rhs, lb, rb, lc, rc)
        if r in lc:
            out = [num_groups] + out
        return make(_result_type(instr, lhs, rhs), out)
    if len(group_dims) != 1:
        fail(f"rhs_group_dims has {len(group_dims)} entries, expected 1 for a ragged non-contracting dim")
    g = group_dims[0]
    if rhs.dims[g] != num_groups:
        fail(f"rhs group dimension {g} is {rhs.dims[g]}, expected {num_groups} (the number of groups)")
    if g in rb or g in rc:
        fail(f"rhs group dimension {g} is also a batch or contracting dimension, expected a free dimension")
    # Check and compute as a plain dot against rhs without its group dimension.
    squeezed = make(rhs.element_type, [n for d, n in enumerate(rhs.dims) if d != g])
    rb, rc = (tuple(d - (d > g) for d in dims) for dims in (rb, rc))
    _dot_dims(lhs, squeezed, lb, rb, lc, rc)
    return make(_result_type(instr, lhs, rhs), _dot_output(lhs, squeezed, lb, rb, lc, rc))


def _conv_numbers(dn, num_dims: int):
    groups = (
        ("input", (dn.input_batch, dn.input_feature, *dn.input_spatial)),
        ("kernel", (dn.kernel_input_feature, dn.kernel_output_feature, *dn.kernel_spatial)),
        ("output", (dn.output_batch, dn.output_feature, *dn.output_spatial)),
    )
    for name, dims in groups:
        if sorted(dims) != list(range(num_dims)):
            fail(f"dim_labels {dn}: the {name} labels repeat or miss a dimension, expected each of "
                 f"{num_dims} once")


@rule("convolution")
def _convolution(instr, ctx):
    lhs = operand_shape(instr, 0, "lhs of convolution")
    rhs = operand_shape(instr, 1, "rhs of convolution")
    fgc = int_attr(instr, "feature_group_count", 1)
    bgc = int_attr(instr, "batch_group_count", 1)
    if fgc <= 0 or bgc <= 0 or (fgc > 1 and bgc > 1):
        fail(f"feature_group_count={fgc}, batch_group_count={bgc}: expected positive and not both > 1")
    dn = attr(instr, "dim_labels")
    window = attr(instr, "window", Window(()))  # XLA: optional, empty without spatial dims
    nsp = len(dn.input_spatial)
    if len(window.dims) != nsp:
        fail(f"window has {len(window.dims)} dimensions, expected {nsp} (spatial dims in dim_labels)")
    for what, s in (("lhs", lhs), ("rhs", rhs)):
        if s.rank != nsp + 2:
            fail(f"{what} is {describe(s)}, expected rank {nsp + 2} for dim_labels {dn}")
    _conv_numbers(dn, nsp + 2)
    in_features, batch = lhs.dims[dn.input_feature], lhs.dims[dn.input_batch]
    k_in, k_out = rhs.dims[dn.kernel_input_feature], rhs.dims[dn.kernel_output_feature]
    if k_out % bgc:
        fail(f"kernel output features {k_out}, expected a multiple of batch_group_count {bgc}")
    if in_features % fgc or in_features // fgc != k_in:
        fail(f"input features {in_features} / feature_group_count {fgc}, expected them to equal the kernel "
             f"input features {k_in}")
    if k_out % fgc:
        fail(f"kernel output features {k_out}, expected a multiple of feature_group_count {fgc}")
    if batch % bgc:
        fail(f"input batch {batch}, expected a multiple of batch_group_count {bgc}")
    k_spatial = [rhs.dims[d] for d in dn.kernel_spatial]
    if k_spatial != [w.size for w in window.dims]:
        fail(f"window size {'x'.join(str(w.size) for w in window.dims)}, expected the kernel's spatial "
             f"dimensions {'x'.join(map(str, k_spatial))}")
    spatial = window_output_dims([lhs.dims[d] for d in dn.input_spatial], window, "the input")
    out = [0] * (nsp + 2)
    out[dn.output_batch] = batch // bgc
    out[dn.output_feature] = k_out
    for i, d in enumerate(dn.output_spatial):
        out[d] = spatial[i]
    return make(_result_type(instr, lhs, rhs), out)


@rule("fft")
def _fft(instr, ctx):
    s = operand_shape(instr, 0, "the operand of fft")
    kind = word_attr(instr, "fft_type", "FFT")
    length = ints_attr(instr, "fft_length")
    n = len(length)
    if not 1 <= n <= 3:
        fail(f"fft_length has {n} entries, expected 1 to 3")
    if s.rank < n:
        fail(f"operand {describe(s)} has rank {s.rank}, expected at least {n}")
    et = s.element_type
    inner = list(s.dims[s.rank - n:])
    if kind in ("FFT", "IFFT"):
        if not et.is_complex:
            fail(f"{kind} operand has element type {et.name}, expected a complex type")
        return like(s)
    dims = list(s.dims)
    if kind == "RFFT":
        if et.name not in ("f32", "f64"):
            fail(f"RFFT operand has element type {et.name}, expected f32 or f64")
        if inner != list(length):
            fail(f"RFFT inner dimensions are {inner}, expected fft_length {list(length)}")
        if length[-1]:
            dims[-1] = length[-1] // 2 + 1
        return make(PRIMITIVE_TYPES["c64" if et.name == "f32" else "c128"], dims)
    if kind == "IRFFT":
        if not et.is_complex:
            fail(f"IRFFT operand has element type {et.name}, expected a complex type")
        if inner[:-1] != list(length[:-1]):
            fail(f"IRFFT inner dimensions are {inner}, expected {list(length[:-1])} before the last")
        if (inner[-1] or length[-1]) and inner[-1] != length[-1] // 2 + 1:
            fail(f"IRFFT last dimension is {inner[-1]}, expected fft_length/2+1 = {length[-1] // 2 + 1}")
        dims[-1] = length[-1]
        return make(PRIMITIVE_TYPES["f32" if et.name == "c64" else "f64"], dims)
    fail(f"unknown fft_type {kind}, expected FFT, IFFT, RFFT or IRFFT")


def _square_minor(s, what: str) -> None:
    if not (s.element_type.is_float or s.element_type.is_complex):
        fail(f"{what} has element type {s.element_type.name}, expected a floating-point or complex type")
    if s.rank < 2:
        fail(f"{what} is {describe(s)}, expected rank >= 2")
    if s.dims[-1] != s.dims[-2]:
        fail(f"{what} is {describe(s)}, expected its two minor dimensions equal")


@rule("cholesky")
def _cholesky(instr, ctx):
    a = operand_shape(instr, 0, "the operand of cholesky")
    _square_minor(a, "the operand")
    return like(a)


@rule("triangular-solve")
def _triangular_solve(instr, ctx):
    a = operand_shape(instr, 0, "a of triangular-solve")
    b = operand_shape(instr, 1, "b of triangular-solve")
    _square_minor(a, "a")
    if b.element_type is not a.element_type or b.rank != a.rank:
        fail(f"b is {describe(b)}, expected the element type and rank of a {describe(a)}")
    left = bool(attr(instr, "left_side", False))
    shared = b.dims[-2] if left else b.dims[-1]
    if a.dims[-1] != shared:
        fail(f"a is {describe(a)} and b is {describe(b)}: the shared dimension differs, expected equal sizes")
    if a.dims[:-2] != b.dims[:-2]:
        fail(f"batch dimensions differ: a is {describe(a)}, b is {describe(b)}; expected equal")
    transpose = word_attr(instr, "transpose_a", "NO_TRANSPOSE")
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        fail(f"transpose_a={transpose}, expected NO_TRANSPOSE, TRANSPOSE or ADJOINT")
    return like(b)


def _feature_count(instr, operand) -> int:
    expect_array(operand, "the operand")
    if not operand.element_type.is_float:
        fail(f"operand has element type {operand.element_type.name}, expected a floating-point type")
    f = int_attr(instr, "feature_index")
    if not 0 <= f < operand.rank:
        fail(f"feature_index={f}, expected a dimension in [0, {operand.rank})")
    return operand.dims[f]


def _check_vectors(instr, operand, first: int, names: tuple[str, ...], count: int) -> None:
    for k, name in enumerate(names):
        v = operand_shape(instr, first + k, name)
        if v.rank != 1 or v.dims[0] != count:
            fail(f"{name} is {describe(v)}, expected rank 1 of size {count} (the feature count)")
        if not same_type_ignoring_fp(v.element_type, operand.element_type):
            fail(f"{name} has element type {v.element_type.name}, expected {operand.element_type.name}")


@rule("batch-norm-training")
def _batch_norm_training(instr, ctx):
    x = operand_shape(instr, 0)
    n = _feature_count(instr, x)
    _check_vectors(instr, x, 1, ("scale", "offset"), n)
    feat = make(x.element_type, [n])
    return tuple_of([x, feat, feat])


@rule("batch-norm-inference")
def _batch_norm_inference(instr, ctx):
    x = operand_shape(instr, 0)
    n = _feature_count(instr, x)
    _check_vectors(instr, x, 1, ("scale", "offset", "mean", "variance"), n)
    return like(x)


@rule("batch-norm-grad")
def _batch_norm_grad(instr, ctx):
    x = operand_shape(instr, 0)
    n = _feature_count(instr, x)
    _check_vectors(instr, x, 1, ("scale", "mean", "variance"), n)
    g = operand_shape(instr, 4, "output gradient")
    if g.dims != x.dims or not same_type_ignoring_fp(g.element_type, x.element_type):
        fail(f"output gradient is {describe(g)}, expected the operand's shape {describe(x)}")
    feat = make(x.element_type, [n])
    return tuple_of([x, feat, feat])
