"""Heroes, bitcasts and tiled transposes of a fusion (XLA's `xla/codegen/ir_emission_utils.cc`:
`FindNonTrivialHero`, `IsIntermediate`; `xla/service/gpu/ir_emission_utils.cc`:
`GetDescriptionForTiledTransposeEmitter`, packed transposes, fusion roots and
`IsDynamicUpdateSliceFusion`; `ShapeUtil`'s bitcast checks).

Where it sits: the fusion analysis (`hlo_fusion_analysis`) picks emitters by these facts;
hlo-opt's fusion rules and hlo-codegen's transpose emitter ask them directly. Layouts are
normalized on the fly: transposes are described in physical dimension order, as XLA sees them
after layout normalization; `is_reshape_or_transpose_bitcast` compares element counts and
physical non-unit dimension orders.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlo_common.gpu.hlo_traversal import FusionAdaptor
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape

MIN_DIMENSION_TO_TRANSPOSE_TILED = 16
MIN_DIMENSION_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BITS_IN_MOST_MINOR_DIMENSION = 8 * 8
NUM_SHMEM_BANKS = 32
BANK_BITWIDTH = 32


# -- shapes in physical order -----------------------------------------------------------------------------
def physical_dims(shape: Shape) -> list[int]:
    """Logical dimension numbers, major to minor."""
    return list(reversed(shape.minor_to_major))


def reshape_is_bitcast(a: Shape, b: Shape) -> bool:
    """The reshape a -> b keeps the physical element order (ShapeUtil::ReshapeIsBitcast, for the
    layouts this project meets: row-major on the non-unit dims, or only unit dims added/removed)."""
    if a.num_elements != b.num_elements:
        return False

    def nonunit_phys(s: Shape) -> list[int]:
        return [d for d in physical_dims(s) if s.dims[d] != 1]

    def row_major(s: Shape) -> bool:
        order = nonunit_phys(s)
        return order == sorted(order)

    if row_major(a) and row_major(b):
        return True
    return [a.dims[d] for d in nonunit_phys(a)] == [b.dims[d] for d in nonunit_phys(b)] and \
        [x for x in a.dims if x != 1] == [x for x in b.dims if x != 1]


def transpose_is_bitcast(operand: Shape, out: Shape, perm) -> bool:
    """Only unit dimensions move physically (ShapeUtil::TransposeIsBitcast)."""
    moved = [perm[d] for d in physical_dims(out) if out.dims[d] != 1]
    return moved == [d for d in physical_dims(operand) if operand.dims[d] != 1]


def is_reshape_or_transpose_bitcast(a: Shape, b: Shape) -> bool:
    """a and b hold the same elements in the same physical order (ignoring element types)."""
    if a.num_elements != b.num_elements:
        return False
    return [a.dims[d] for d in physical_dims(a) if a.dims[d] != 1] == \
        [b.dims[d] for d in physical_dims(b) if b.dims[d] != 1]


def element_bit_width(shape: Shape) -> int:
    """Bits of one element (pred counts as 8)."""
    et = shape.element_type
    return 8 if et.is_pred else et.bits


def is_intermediate(instr: HloInstruction, allowed_operand_count: int = 1) -> bool:
    """XLA's IsIntermediate: elementwise (layout-preserving copies only), bitcast, bitcast-like
    reshapes and transposes, with 1..allowed operands."""
    n = len(instr.operands)
    if n == 0 or n > allowed_operand_count:
        return False
    op = instr.opcode
    if is_elementwise(op):
        if op == "copy":
            return instr.shape == instr.operands[0].shape
        return True
    if op == "bitcast":
        return True
    if op == "reshape":
        return reshape_is_bitcast(instr.operands[0].shape, instr.shape)
    if op == "transpose":
        return transpose_is_bitcast(instr.operands[0].shape, instr.shape, instr.attrs["dimensions"])
    return False


# -- transposes ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TransposeDescription:
    """A transpose in normalized form: output dims (unit dims dropped, dims that move together
    merged) and permutation (output dim i = input dim permutation[i]); shared memory it needs."""

    instr: HloInstruction
    dimensions: tuple[int, ...]
    permutation: tuple[int, ...]
    shmem_usage: int
    packed: bool = False

    @property
    def input_dimensions(self) -> tuple[int, ...]:
        inv = [0] * len(self.permutation)
        for i, p in enumerate(self.permutation):
            inv[p] = i
        return tuple(self.dimensions[inv[j]] for j in range(len(inv)))

    def equivalent(self, other: TransposeDescription) -> bool:
        return self.dimensions == other.dimensions and self.permutation == other.permutation


def normalized_transpose(operand: Shape, out: Shape, perm) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(normalized output dims, permutation) of a transpose in physical order
    (ShapeUtil::GetNormalizedLogicalTransposeShape after layout normalization)."""
    in_phys = physical_dims(operand)
    in_pos = {d: k for k, d in enumerate(in_phys)}
    out_phys = physical_dims(out)
    # output physical position k reads input physical position ppos[k]
    ppos = [in_pos[perm[d]] for d in out_phys]
    sizes = [out.dims[d] for d in out_phys]
    keep = [k for k in range(len(ppos)) if sizes[k] != 1]
    ppos = [ppos[k] for k in keep]
    sizes = [sizes[k] for k in keep]
    # renumber input positions densely
    rank_of = {p: i for i, p in enumerate(sorted(ppos))}
    ppos = [rank_of[p] for p in ppos]
    # merge runs of output dims that are consecutive in the input too
    dims: list[int] = []
    firsts: list[int] = []
    for k, p in enumerate(ppos):
        if k and p == ppos[k - 1] + 1:
            dims[-1] *= sizes[k]
        else:
            dims.append(sizes[k])
            firsts.append(p)
    rank = {p: i for i, p in enumerate(sorted(firsts))}
    return tuple(dims), tuple(rank[p] for p in firsts)


def packed_transpose_tiles(dims: tuple[int, ...], perm: tuple[int, ...], bits: int
                           ) -> tuple[tuple[int | None, int, int], tuple[int, int, int]] | None:
    """XLA's GetTransposeSpec + GetPackedTransposeTileSizes on a normalized transpose (output
    dims, permutation): ((normalized input dim of A or None, of T1, of T2), (tile sizes of A, T1,
    T2)), or None when the packed emitter does not apply. T1 is the input's minor dim, T2 the
    one that becomes the output's minor dim, A the dim before T1 when the transpose keeps it in
    place; a block's tile is T2 rows by A x T1 columns of a (32 * v)-square shared tile."""
    r = len(perm)
    if bits >= BANK_BITWIDTH or r < 2 or perm[-1] == r - 1:  # B (the kept minor dim) must be 1
        return None
    vector = BANK_BITWIDTH // bits
    shmem_dim = NUM_SHMEM_BANKS * vector
    inv = [0] * r
    for i, p in enumerate(perm):
        inv[p] = i
    in_dims = [dims[inv[j]] for j in range(r)]
    a = r - 2 if r >= 3 and perm[r - 2] == r - 2 else None
    t1, t2 = r - 1, perm[r - 1]
    dim_a = in_dims[a] if a is not None else 1
    tile_t1 = min(in_dims[t1], shmem_dim)
    tile_a = min(dim_a, shmem_dim // tile_t1)
    tile_t2 = min(in_dims[t2], shmem_dim)
    rows, cols = tile_t2, tile_a * tile_t1
    if cols < 10 * vector or rows < 10 * vector:
        return None
    if rows % vector or cols % vector or in_dims[t2] % tile_t2 % vector:
        return None
    return (a, t1, t2), (tile_a, tile_t1, tile_t2)


def transpose_permutation(instr: HloInstruction) -> tuple[int, ...] | None:
    """The logical permutation of a transpose, the identity for a layout-changing copy (which
    moves data as the physical transpose of its layouts), None for any other op."""
    if instr.opcode == "transpose":
        return tuple(instr.attrs["dimensions"])
    if instr.opcode == "copy" and instr.shape.is_array and instr.shape != instr.operands[0].shape:
        return tuple(range(instr.shape.rank))
    return None


def tiled_transpose_description(instr: HloInstruction) -> TransposeDescription | None:
    """XLA's GetDescriptionForTiledTransposeEmitter: a transpose the shared-memory tiled (or
    packed) transpose emitter handles; a layout-changing copy counts as its physical transpose."""
    perm = transpose_permutation(instr)
    if perm is None:
        return None
    operand = instr.operands[0].shape
    if not operand.is_array:
        return None
    dims, nperm = normalized_transpose(operand, instr.shape, perm)
    if len(nperm) < 2:
        return None
    bits = element_bit_width(instr.shape)
    inv = [0] * len(nperm)
    for i, p in enumerate(nperm):
        inv[p] = i
    op_dims = [dims[inv[j]] for j in range(len(nperm))]
    if packed_transpose_tiles(dims, nperm, bits) is not None:
        vector = BANK_BITWIDTH // bits
        return TransposeDescription(instr, dims, nperm,
                                    NUM_SHMEM_BANKS * (BANK_BITWIDTH // 8) * NUM_SHMEM_BANKS * vector, True)
    op_minor = op_dims[-1]
    if nperm[-1] == len(dims) - 1:
        op_minor = op_dims[-2]
        if bits * dims[-1] <= MAX_BITS_IN_MOST_MINOR_DIMENSION and \
                bits * dims[-1] * min(op_minor, dims[-2]) >= 8 * MIN_DIMENSION_TO_TRANSPOSE_TILED:
            shmem = -(-NUM_SHMEM_BANKS * (NUM_SHMEM_BANKS + 1) * bits * dims[-1] // 8)
            return TransposeDescription(instr, dims, nperm, shmem)
    elif (op_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED and dims[-1] >= MIN_DIMENSION_TO_TRANSPOSE_TILED) or \
            (op_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED2 and dims[-1] >= MIN_DIMENSION_TO_TRANSPOSE_TILED2
             and op_minor * dims[-1] >= MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED):
        if bits == 4:
            return None
        shmem = -(-NUM_SHMEM_BANKS * (NUM_SHMEM_BANKS + 1) * bits // 8)
        return TransposeDescription(instr, dims, nperm, shmem)
    return None


# -- heroes -------------------------------------------------------------------------------------------------
def _find_hero_by(start: HloInstruction, adaptor: FusionAdaptor, predicate) -> HloInstruction | None:
    """XLA's FindHero(root, predicate): the unique node satisfying `predicate` reachable from
    `start` towards operands through intermediates (<= 3 operands), with only intermediates
    between it and the roots."""
    hero = None
    seen = {start}
    queue = [start]
    i = 0
    while i < len(queue):
        node = queue[i]
        i += 1
        if predicate(node):
            if hero is not None:
                return None
            hero = node
            continue
        if not is_intermediate(node, 3):
            continue
        for o in adaptor.operands(node):
            if o not in seen and adaptor.contains(o):
                seen.add(o)
                queue.append(o)
    if hero is None:
        return None
    # no non-intermediate op may be reachable from the hero towards the roots
    seen = set()
    queue = list(adaptor.users(hero))
    i = 0
    while i < len(queue):
        node = queue[i]
        i += 1
        if node in seen:
            continue
        seen.add(node)
        if node.opcode not in ("tuple", "parameter") and not is_intermediate(node, 3):
            return None
        queue.extend(adaptor.users(node))
    return hero


HERO_SEARCH_OPCODES = frozenset({"transpose", "copy", "concatenate"})


def find_non_trivial_hero(root: HloInstruction, adaptor: FusionAdaptor | None = None,
                          search: bool = True) -> HloInstruction:
    """XLA's FindNonTrivialHero: the op that decides how a fusion root is emitted (a reduce, a
    tiled transpose or a concatenate found through intermediates; else the root itself).
    Without an adaptor, `root`'s computation is the view. `search=False` (the caller knows the
    view holds no transpose, copy or concatenate) skips the transpose / concatenate search."""
    if adaptor is None:
        adaptor = FusionAdaptor.for_computation(root.parent)
    hero = root
    while is_intermediate(hero, 1):
        operand = adaptor.operands(hero)[0]
        if not adaptor.contains(operand):
            break
        hero = operand
    if not search:
        return hero if hero.opcode == "reduce" else root
    transpose = _find_hero_by(hero, adaptor, lambda n: tiled_transpose_description(n) is not None)
    if transpose is not None:
        return transpose
    concat = _find_hero_by(hero, adaptor, lambda n: n.opcode == "concatenate")
    if concat is not None:
        return concat
    return hero if hero.opcode == "reduce" else root


# -- fusion roots ------------------------------------------------------------------------------------------
def strip_bitcasts(instr: HloInstruction) -> HloInstruction:
    while instr.opcode == "bitcast":
        instr = instr.operands[0]
    return instr


def fusion_roots(fusion: HloInstruction) -> list[HloInstruction]:
    """The instructions computing a fusion's outputs (operands of a root tuple)."""
    root = fusion.fused_computation().root
    return list(root.operands) if root.opcode == "tuple" else [root]


def is_dus_root(root: HloInstruction) -> bool:
    return strip_bitcasts(root).opcode == "dynamic-update-slice"


__all__ = [
    "HERO_SEARCH_OPCODES", "TransposeDescription", "element_bit_width", "find_non_trivial_hero",
    "is_intermediate", "is_reshape_or_transpose_bitcast", "normalized_transpose", "packed_transpose_tiles",
    "physical_dims", "reshape_is_bitcast", "tiled_transpose_description", "transpose_is_bitcast",
    "fusion_roots", "is_dus_root", "strip_bitcasts", "transpose_permutation",
]
