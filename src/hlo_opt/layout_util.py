"""Layout arithmetic for the layout passes (XLA's `LayoutUtil`, the layout parts of `ShapeUtil` and
`permutation_util`), used by layout-assignment, reshape-decomposer, layout_normalization, the
reduction normalizers and the cuBLAS GEMM rewriter.

Conventions (all permutations are tuples of ints):

- A layout's `minor_to_major` lists dimensions from fastest- to slowest-varying; its reverse is the
  *physical order* `P` (major to minor, XLA's `ToTransposeDimensions`).
- `normalized(s)` (XLA's `MakeShapeWithDescendingLayoutAndSamePhysicalLayout`) has dims
  `[s.dims[P[0]], s.dims[P[1]], ...]` and the default layout; as logical arrays it equals
  `transpose(s, P)`, and a bitcast between the two moves no byte.
- `transpose(x, perm)` has dims `[x.dims[perm[0]], ...]`; `transpose(transpose(z, a), b)` equals
  `transpose(z, compose(a, b))` with `compose(a, b)[k] = a[b[k]]` (XLA's `ComposePermutations`).

    >>> s = Shape.array("f32", (2, 3, 4), (0, 2, 1))
    >>> str(normalized(s)), physical_order(s)
    ('f32[3,4,2]{2,1,0}', (1, 2, 0))
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable, Sequence

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Layout, Shape


# -- permutations ---------------------------------------------------------------------------------
def inverse_permutation(perm: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return tuple(out)


def compose_permutations(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """`compose(a, b)[k] = a[b[k]]`: transposing by `a`, then by `b`, is transposing by this."""
    return tuple(a[k] for k in b)


def permute(values: Sequence, perm: Sequence[int]) -> list:
    """XLA's Permute: `out[i] = values[perm[i]]` (per-dimension values of `x` for `transpose(x, perm)`)."""
    return [values[p] for p in perm]


def is_identity(perm: Sequence[int]) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


# -- layouts ----------------------------------------------------------------------------------------
def physical_order(shape: Shape) -> tuple[int, ...]:
    """Dimensions from most major to most minor (XLA's ToTransposeDimensions of the layout)."""
    return tuple(reversed(shape.minor_to_major))


def _element_size(shape: Shape) -> tuple[tuple[str, str], ...]:
    """The `E(n)` extra of a layout (sub-byte elements packed n bits each), which no reordering of
    the dims changes (XLA keeps element_size_in_bits through MakeShapeWithDescendingLayout...)."""
    layout = shape.layout
    return tuple((k, v) for k, v in layout.extras if k == "E") if layout is not None else ()


def with_minor_to_major(shape: Shape, minor_to_major: Sequence[int]) -> Shape:
    """`shape` (an array) with this layout; tiles of the old layout are dropped, its element size
    (`E(n)`) is kept: a packed s4 value stays packed."""
    return replace(shape, layout=Layout(tuple(int(d) for d in minor_to_major), _element_size(shape)))


def with_major_to_minor(shape: Shape, major_to_minor: Sequence[int]) -> Shape:
    return with_minor_to_major(shape, tuple(reversed(tuple(major_to_minor))))


def default_m2m(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def has_default_layout(shape: Shape) -> bool:
    """An array whose layout is the descending one (XLA's IsMonotonicWithDim0Major)."""
    return shape.is_array and shape.minor_to_major == default_m2m(shape.rank)


def same_m2m(a: Shape, b: Shape) -> bool:
    """Same minor-to-major order on every array leaf (tiles and element sizes ignored)."""
    if a.is_tuple or b.is_tuple:
        return a.is_tuple and b.is_tuple and len(a.tuple_shapes) == len(b.tuple_shapes) and all(
            same_m2m(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
    if not a.is_array or not b.is_array:
        return True
    return a.minor_to_major == b.minor_to_major


def normalized(shape: Shape) -> Shape:
    """The default-layout shape with the same physical layout (its dims in physical order)."""
    order = physical_order(shape)
    layout = Layout(Layout.default(shape.rank).minor_to_major, _element_size(shape))
    return Shape(shape.element_type, tuple(shape.dims[d] for d in order), layout, None,
                 tuple(shape.dynamic[d] for d in order) if shape.dynamic else ("",) * shape.rank)


def default_layout_shape(shape: Shape) -> Shape:
    return shape.with_default_layouts()


def move_dim_to_major(shape: Shape, dim: int) -> Shape:
    """XLA's ShapeUtil::MoveDimToMajor: `dim` becomes the most major, the others keep their order."""
    m2m = [d for d in shape.minor_to_major if d != dim] + [dim]
    return with_minor_to_major(shape, m2m)


def delete_dimensions(shape: Shape, dims: Iterable[int]) -> Shape:
    """XLA's ShapeUtil::DeleteDimensions: the dims are removed, the layout keeps the others' order."""
    gone = set(dims)
    keep = [d for d in range(shape.rank) if d not in gone]
    renumber = {d: k for k, d in enumerate(keep)}
    m2m = [renumber[d] for d in shape.minor_to_major if d not in gone]
    layout = Layout(tuple(m2m), _element_size(shape))
    return Shape(shape.element_type, tuple(shape.dims[d] for d in keep), layout, None,
                 tuple(shape.dynamic[d] for d in keep) if shape.dynamic else ("",) * len(keep))


def drop_degenerate_dimensions(shape: Shape) -> Shape:
    """XLA's ShapeUtil::DropDegenerateDimensions: size-1 dims removed, layout order kept."""
    return delete_dimensions(shape, [d for d in range(shape.rank) if shape.dims[d] == 1])


def filter_layout_to_dims(shape: Shape, keep: Sequence[int]) -> tuple[int, ...]:
    """The minor-to-major order of `shape` restricted to `keep` and renumbered 0..len(keep)-1 in the
    order of `keep` (XLA's FilterDimensions on a layout)."""
    pos = {d: k for k, d in enumerate(keep)}
    return tuple(pos[d] for d in shape.minor_to_major if d in pos)


# -- reshape / transpose bitcasts -------------------------------------------------------------------
def _alignment_groups(a: Sequence[int], b: Sequence[int]) -> tuple[list[int], list[int]] | None:
    """Group ids for the dims of `a` and of `b` (both without size-1 dims) such that each group
    holds consecutive dims of both with equal products; None when the element counts differ."""
    ga, gb = [0] * len(a), [0] * len(b)
    i = j = 0
    group = 0
    pa = pb = 1
    while i < len(a) or j < len(b):
        if pa == pb and pa > 1:
            group += 1
            pa = pb = 1
        if (pa < pb or j == len(b)) and i < len(a):
            ga[i] = group
            pa *= a[i]
            i += 1
        elif j < len(b):
            gb[j] = group
            pb *= b[j]
            j += 1
        else:
            return None
    return (ga, gb) if pa == pb else None


def _group_sequence(shape: Shape, nontrivial: list[int], groups: list[int]) -> list[int] | None:
    """The groups in physical order (major first) when each group's dims are physically contiguous
    and in increasing logical order, else None."""
    index = {d: k for k, d in enumerate(nontrivial)}
    seq: list[int] = []
    last_dim = -1
    for d in physical_order(shape):
        if d not in index:
            continue
        g = groups[index[d]]
        if seq and seq[-1] == g:
            if d < last_dim:
                return None
        elif g in seq:
            return None
        else:
            seq.append(g)
        last_dim = d
    return seq


def _nontrivial(shape: Shape) -> list[int]:
    return [d for d in range(shape.rank) if shape.dims[d] != 1]


def reshape_is_bitcast(src: Shape, dst: Shape) -> bool:
    """XLA's ShapeUtil::ReshapeIsBitcast: the reshape leaves every element at its physical offset."""
    if src.element_type is not dst.element_type or src.num_elements != dst.num_elements:
        return False
    if src.num_elements == 0:
        return True
    a, b = _nontrivial(src), _nontrivial(dst)
    grouping = _alignment_groups([src.dims[d] for d in a], [dst.dims[d] for d in b])
    if grouping is None:
        return False
    seq_a = _group_sequence(src, a, grouping[0])
    seq_b = _group_sequence(dst, b, grouping[1])
    return seq_a is not None and seq_a == seq_b


def align_layouts(src: Shape, dst: Shape) -> Shape | None:
    """XLA's ShapeUtil::AlignLayouts: `dst` (dims only) with a layout making the reshape from `src` a
    bitcast, or None when no layout does. Size-1 dims of `dst` go most major."""
    if src.num_elements != dst.num_elements or src.num_elements == 0:
        return None
    a, b = _nontrivial(src), _nontrivial(dst)
    grouping = _alignment_groups([src.dims[d] for d in a], [dst.dims[d] for d in b])
    if grouping is None:
        return None
    seq = _group_sequence(src, a, grouping[0])
    if seq is None:
        return None
    m2m: list[int] = []
    for g in reversed(seq):
        m2m.extend(sorted((d for d, gd in zip(b, grouping[1]) if gd == g), reverse=True))
    m2m.extend(sorted((d for d in range(dst.rank) if dst.dims[d] == 1), reverse=True))
    return with_minor_to_major(dst, m2m)


def transpose_is_bitcast(src: Shape, dst: Shape, perm: Sequence[int]) -> bool:
    """XLA's ShapeUtil::TransposeIsBitcast: the permuted result layout is the operand's layout."""
    if src.element_type is not dst.element_type:
        return False
    return tuple(perm[d] for d in dst.minor_to_major) == tuple(src.minor_to_major)


def true_rank(shape: Shape) -> int:
    """XLA's TrueNumDimensions: dims larger than 1."""
    return sum(1 for d in shape.dims if d != 1)


# -- matrices (cuBLAS) ------------------------------------------------------------------------------
def matrix_layout_ok(shape: Shape, batch: Sequence[int], rows: Sequence[int], cols: Sequence[int]) -> bool:
    """XLA's MatrixLayout::For(shape, batch, rows, cols).ok(): each group is physically contiguous
    and in its listed order, and the batch group is not the most minor of the three."""
    groups: list[int] = []  # group ids minor -> major
    m2m = shape.minor_to_major
    i = 0
    while i < len(m2m):
        d = m2m[i]
        for gid, dims in ((1, rows), (2, cols), (0, batch)):
            if dims and d == dims[-1]:
                if tuple(m2m[i:i + len(dims)]) != tuple(reversed(tuple(dims))):
                    return False
                groups.append(gid)
                i += len(dims)
                break
        else:
            return False
    for gid, dims in ((2, cols), (1, rows), (0, batch)):
        if not dims:
            groups.append(gid)
    # Allowed (minor -> major): (C,R,B) (R,C,B) (C,B,R) (R,B,C); batch may not be most minor.
    return groups[0] != 0


# -- instruction builders -----------------------------------------------------------------------------
def make_bitcast(operand: HloInstruction, shape: Shape, before: HloInstruction | None = None,
                 name: str = "bitcast") -> HloInstruction:
    """bitcast(operand) to `shape`, added to the operand's computation (before `before`)."""
    comp = operand.parent
    return comp.add_new_instruction("bitcast", [operand], shape, name=name, before=before)


def maybe_bitcast(operand: HloInstruction, shape: Shape, before: HloInstruction | None = None
                  ) -> HloInstruction:
    """`operand` itself when it already has `shape` (layout included), else a bitcast to it."""
    if operand.shape == shape or (operand.shape.compatible(shape) and same_m2m(operand.shape, shape)
                                  and operand.shape.dims == shape.dims):
        return operand
    return make_bitcast(operand, shape, before)


def make_copy(operand: HloInstruction, shape: Shape, before: HloInstruction | None = None) -> HloInstruction:
    """copy(operand) into `shape` (same dims, another layout)."""
    return operand.parent.add_new_instruction("copy", [operand], shape, name="copy", before=before)


def copy_to_layout(instr: HloInstruction, shape: Shape,
                   before: HloInstruction | None = None) -> HloInstruction:
    """XLA's CreateCopyWithNewLayout: a copy of an array, or a tuple of element copies."""
    comp = instr.parent
    if instr.shape.is_tuple:
        elements = []
        for i, target in enumerate(shape.tuple_shapes):
            gte = comp.add_new_instruction("get-tuple-element", [instr], instr.shape.tuple_shapes[i],
                                           {"index": i}, before=before)
            elements.append(gte if same_m2m(gte.shape, target) else copy_to_layout(gte, target, before))
        return comp.add_new_instruction("tuple", elements, Shape.tuple_of(e.shape for e in elements),
                                        before=before)
    if not instr.shape.is_array:
        return instr
    new_shape = with_minor_to_major(instr.shape, shape.minor_to_major)
    copy = comp.add_new_instruction("copy", [instr], new_shape, name="copy", before=before)
    copy.metadata = list(instr.metadata)
    return copy


def byte_size(shape: Shape) -> int:
    return shape.byte_size() if shape.is_array else sum(byte_size(s) for s in shape.tuple_shapes or ())


def product(values: Iterable[int]) -> int:
    return math.prod(values)


def array_leaves(shape: Shape) -> list[tuple[tuple[int, ...], Shape]]:
    return [(idx, s) for idx, s in shape.leaf_shapes() if s.is_array]


def replace_leaf_layouts(shape: Shape, layouts: dict[tuple[int, ...], tuple[int, ...]],
                         prefix: tuple[int, ...] = ()) -> Shape:
    if shape.is_tuple:
        return Shape.tuple_of(replace_leaf_layouts(s, layouts, prefix + (i,))
                              for i, s in enumerate(shape.tuple_shapes))
    m2m = layouts.get(prefix)
    if m2m is None or not shape.is_array or tuple(m2m) == shape.minor_to_major:
        return shape
    return with_minor_to_major(shape, m2m)


def reshape_bitcast_layout(known: Shape, other: Shape) -> tuple | None:
    """The layout of `other` (one side of a reshape) that makes the reshape from `known` (the
    other side, with its layout) a bitcast. As XLA's layout assignment: when `known` has the
    default layout and the default layout of `other` makes a bitcast, that one (so size-1 dims
    stay where the default puts them: f32[8,16]{1,0} -> f32[8,1,16]{2,1,0}, as XLA:GPU assigns
    it, not {2,0,1}); likewise the same layout when both have the same rank; else
    ShapeUtil::AlignLayouts against `other`'s default layout."""
    default = other.with_default_layouts()
    if known.minor_to_major == default_m2m(known.rank) and reshape_is_bitcast(known, default):
        return default.minor_to_major
    if known.rank == other.rank and known.rank > 0:
        same = with_minor_to_major(other, known.minor_to_major)
        if reshape_is_bitcast(known, same):
            return same.minor_to_major
    aligned = align_layouts(known, default)
    return aligned.minor_to_major if aligned is not None else None


def subshape_or_none(shape: Shape, idx: tuple) -> Shape | None:
    """The subshape of `shape` at tuple index `idx`, None where `shape` has no such element."""
    for i in idx:
        if not shape.is_tuple or i >= len(shape.tuple_shapes):
            return None
        shape = shape.tuple_shapes[i]
    return shape
