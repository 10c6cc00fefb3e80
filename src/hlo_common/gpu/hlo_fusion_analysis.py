"""Fusion analysis: which emitter a fusion gets, its heroes, reduction/transpose shapes and
launch-dimension estimates (XLA's `HloFusionAnalysis` and `HloFusionAdaptor`).

Where it sits: hlo-opt's priority fusion and multi-output fusion (through the GPU performance
model in `hlo_common.gpu_model`, and the fusibility rules) ask it about fusions that do not exist
yet; hlo-codegen asks it which emitter to run (`hlo_codegen.emitters.emitter_kind`). Sources:
`xla/service/gpu/hlo_fusion_analysis.cc`, `xla/codegen/ir_emission_utils.cc`
(`FindNonTrivialHero`, `IsIntermediate`), `xla/service/gpu/ir_emission_utils.cc`
(`GetDescriptionForTiledTransposeEmitter`, packed transposes), `xla/service/gpu/reduction_utils.cc`
(reduction kinds and race-free bounds), `launch_dimensions.cc` and the emitters' launch rules.

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module('''
    ... add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    ... ENTRY e { p = f32[128,1024] parameter(0) e = f32[128,1024] exponential(p)
    ...   c = f32[] constant(0) ROOT r = f32[128] reduce(e, c), dimensions={1}, to_apply=add }''')
    >>> a = FusionAnalysis.of_producer_consumer(m.entry.instruction("e"), m.entry.root)
    >>> a.emitter_kind, fusion_kind(a), a.reduction.is_row, a.reduction.dims
    ('reduction', 'kInput', True, (1, 128, 1024))

The view (`FusionAdaptor`) is what lets one analysis cover three cases without building anything:
a fusion instruction (its fused computation), a lone instruction (a one-op fusion), and a producer
+ consumer pair as if fused (the consumer's parameters that the producer feeds resolve to the
producer's roots). Nodes are the real instructions; an operand outside the view is returned as
itself (a fused `parameter`, or an instruction of the outer computation): `contains` is false.

Emitter kinds (XLA's `GetEmitterFusionKind`, in order): a backend-config kind of a custom, Triton
or cuDNN fusion -> "custom" (our own normalization fusions, backend kind "__norm" made by
hlo-opt's `normalization-fusion` pass, -> "normalization", launched by `normalization_launch`);
a real reduction hero whose other roots are compatible ->
"reduction"; consistent tiled-transpose heroes -> "transpose"; several roots -> "loop"; a
scatter root -> "scatter"; a sort root -> "sort"; a concatenate hero of at most 4 operands ->
"concatenate"; else "loop". A "loop" whose roots are all (bitcasts of) dynamic-update-slices of
a fusion input is reported as "in_place_dynamic_update_slice" (in XLA a sub-case of kLoop chosen
in `GetFusionEmitter`); `fusion_kind` maps it to kLoop.

Simplifications, all documented here: layouts are normalized on the fly (transposes and
reductions are described in physical dimension order, as XLA sees them after layout
normalization); `IsReshapeOrTransposeBitcast` for transpose side outputs compares element counts
and physical non-unit dimension orders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hlo_common.gpu.device import DeviceDescription, H100
from hlo_common.hlo.ir import HloComputation, HloInstruction
from hlo_common.hlo.opcodes import is_elementwise
from hlo_common.hlo.shape import Shape

# -- constants (XLA names) ----------------------------------------------------------------------------
WARP_SCHEDULERS = 4                       # loop emitter: 4 warps = 128 threads per block
MAX_UNROLL = 4                            # ComputeMaxUnrollFactor
MAX_CONCAT_OPERANDS_FOR_UNROLLING = 10
MAX_REDUCE_WINDOW_FOR_UNROLLING = 8
MAX_CONCATENATE_OPERANDS = 4              # UseConcatenateFusion
MIN_DIMENSION_TO_TRANSPOSE_TILED = 16
MIN_DIMENSION_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BITS_IN_MOST_MINOR_DIMENSION = 8 * 8
NUM_SHMEM_BANKS = 32
BANK_BITWIDTH = 32
TRANSPOSE_TILE = 32
TRANSPOSE_ROWS_PER_BLOCK = 4              # 32 x 4 = 128 threads per block
MIN_THREADS_X_ROW_REDUCTION = 1024
ROW_REDUCTION_TILE = (1, 1, 16)           # GetReductionTiling, row: 16 minor elements per thread
COLUMN_REDUCTION_TILE = (1, 128, 1)
BATCHED_REDUCTION_RACE_FREE_BOUND = 8
MINOR_REDUCED_ELEMENTS_PER_THREAD = 16
THREADS_PER_BLOCK_TARGET = 256
FALLBACK_THREADS_PER_BLOCK = 128          # EstimateFusionLaunchDimensions fallback

CUSTOM_BACKEND_KINDS = ("__custom_fusion", "__triton", "__triton_gemm", "__triton_nested_gemm_fusion",
                        "__triton_collective", "__cudnn$fusion", "__triton_softmax")

EMITTER_KINDS = ("loop", "reduction", "transpose", "concatenate", "scatter", "sort",
                 "in_place_dynamic_update_slice", "custom", "normalization")
NORMALIZATION_BACKEND_KIND = "__norm"     # hlo-opt's normalization-fusion (not an XLA kind)
NORMALIZATION_ELEMENTS_PER_THREAD = 8     # row elements each thread keeps in registers
NORMALIZATION_THREADS_PER_BLOCK = 128     # short rows: one warp per row, 4 rows per block


def normalization_row_dims(fusion_root: HloInstruction) -> tuple[int, ...] | None:
    """D, the dims of the full arrays of a normalization fusion: the operand of its first
    reduce over the minor dimension (None if there is none)."""
    stack, seen = [fusion_root], {id(fusion_root)}
    while stack:
        node = stack.pop()
        if node.opcode == "reduce" and node.operands[0].shape.is_array:
            return tuple(node.operands[0].shape.dims)
        for op in node.operands:
            if id(op) not in seen:
                seen.add(id(op))
                stack.append(op)
    return None


def normalization_launch(dims: tuple[int, ...], device: DeviceDescription = H100) -> tuple[int, int, int]:
    """(threads per row, rows per block, blocks) of a normalization fusion over rows of
    n = dims[-1] elements: a power of two of threads per row, at least a warp and at most 1024,
    so that each keeps <= 8 elements of the row (n <= 8192); rows of at most one warp's work
    share a block of 128 threads, one warp each."""
    n = max(dims[-1], 1) if dims else 1
    rows = math.prod(dims[:-1]) if dims else 1
    warp = device.threads_per_warp
    want = -(-n // NORMALIZATION_ELEMENTS_PER_THREAD)
    threads = warp
    while threads < want and threads < 1024:
        threads *= 2
    per_block = max(1, NORMALIZATION_THREADS_PER_BLOCK // threads)
    return threads, per_block, max(1, -(-rows // per_block))


# -- the view ---------------------------------------------------------------------------------------------
class _Part:
    """One piece of a view: a fusion instruction (its computation), a lone instruction, or a bare
    computation (no caller known)."""

    __slots__ = ("instr", "comp", "leaf_outputs")

    def __init__(self, instr: HloInstruction | None, comp: HloComputation | None):
        self.instr = instr
        self.comp = comp
        if comp is None:
            self.leaf_outputs = [instr]
        else:
            root = comp.root
            self.leaf_outputs = list(root.operands) if root.opcode == "tuple" else [root]


class FusionAdaptor:
    """A read-only view of what would be one kernel (XLA's HloFusionAdaptor); see the module doc."""

    def __init__(self, parts: list[_Part], roots_from: list[int], extra_outputs_from: list[int] = ()):
        self.parts = parts
        self._by_comp = {p.comp: p for p in parts if p.comp is not None}
        self._by_instr = {p.instr: p for p in parts if p.instr is not None}
        self._singles = {p.instr: p for p in parts if p.comp is None}
        self._operands: dict[HloInstruction, list[HloInstruction]] = {}
        self._users: dict[HloInstruction, list[HloInstruction]] = {}
        self._inputs: list[HloInstruction] | None = None
        self._post_order: list[HloInstruction] | None = None
        roots: list[HloInstruction] = []
        for k in roots_from:
            for r in self._outputs(parts[k]):
                roots.append(r)
        for k in extra_outputs_from:
            for r in self._outputs(parts[k]):
                if r not in roots and self._has_outside_users(parts[k], r):
                    roots.append(r)
        self._roots = roots

    # constructors
    @staticmethod
    def for_instruction(instr: HloInstruction) -> FusionAdaptor:
        """A fusion's computation, or a lone instruction as a one-op fusion."""
        part = _Part(instr, instr.fused_computation()) if instr.opcode == "fusion" else _Part(instr, None)
        return FusionAdaptor([part], [0])

    @staticmethod
    def for_computation(comp: HloComputation) -> FusionAdaptor:
        """A computation as a fusion body whose caller is unknown (parameters stay external)."""
        return FusionAdaptor([_Part(None, comp)], [0])

    @staticmethod
    def for_producer_consumer(producer: HloInstruction, consumer: HloInstruction,
                              with_extra_outputs: bool = False) -> FusionAdaptor:
        """`producer` fused into `consumer`; with `with_extra_outputs`, producer outputs used
        outside the consumer are roots too (a multi-output fusion)."""
        parts = []
        for instr in (producer, consumer):
            parts.append(_Part(instr, instr.fused_computation()) if instr.opcode == "fusion"
                         else _Part(instr, None))
        return FusionAdaptor(parts, [1], [0] if with_extra_outputs else [])

    # membership
    def _part_of(self, node: HloInstruction) -> _Part | None:
        p = self._singles.get(node)
        if p is not None:
            return p
        p = self._by_comp.get(node.parent)
        if p is None or node.opcode == "parameter" or (node is p.comp.root and node.opcode == "tuple"):
            return None
        return p

    def contains(self, node: HloInstruction) -> bool:
        return self._part_of(node) is not None

    # graph
    def _outputs(self, part: _Part) -> list[HloInstruction]:
        """The part's outputs, resolved (a parameter root resolves across parts); the tuple
        elements of one multi-output op (gte(reduce, i)) collapse into that op."""
        out: list[HloInstruction] = []
        for leaf in part.leaf_outputs:
            node = leaf
            if node.opcode == "get-tuple-element" and part.comp is not None and node.parent is part.comp:
                node = node.operands[0]
            if not self.contains(node):
                node = self._resolve(node, part)
            if not out or out[-1] is not node:
                out.append(node)
        return out

    def _resolve(self, x: HloInstruction, part: _Part | None) -> HloInstruction:
        """An operand outside every part's nodes, seen from `part`: the producer's output it
        stands for when the producer is in the view, else itself (an external input)."""
        outer = x
        if x.opcode == "parameter" and part is not None and part.comp is not None and x.parent is part.comp:
            if part.instr is None:
                return x
            outer = part.instr.operands[x.parameter_number]
        p = self._by_instr.get(outer)
        index = 0
        if p is None and outer.opcode == "get-tuple-element":
            p = self._by_instr.get(outer.operands[0])
            index = outer.attrs.get("index", 0)
        if p is None or p is part:
            return x
        leaf = p.leaf_outputs[index] if p.comp is not None and p.comp.root.opcode == "tuple" \
            else p.leaf_outputs[0]
        if p.comp is not None and leaf.opcode == "parameter" and leaf.parent is p.comp:
            return self._resolve(leaf, p)
        return leaf

    def operands(self, node: HloInstruction) -> list[HloInstruction]:
        ops = self._operands.get(node)
        if ops is None:
            part = self._part_of(node)
            ops = [o if self.contains(o) else self._resolve(o, part) for o in node.operands]
            self._operands[node] = ops
        return ops

    def _has_outside_users(self, part: _Part, node: HloInstruction) -> bool:
        outer = part.instr
        if outer is None:
            return False
        consumers = set(self._by_instr)
        return any(u not in consumers for u in outer.users)

    def users(self, node: HloInstruction) -> list[HloInstruction]:
        """Users within the view (across the producer -> consumer edge too)."""
        us = self._users.get(node)
        if us is not None:
            return us
        part = self._part_of(node)
        us = [u for u in node.users if self.contains(u)]
        if part is not None and part.instr is not None and (part.comp is None or node in part.leaf_outputs
                                                            or self._gte_root_of(part, node)):
            outer_values = [part.instr]
            if part.comp is not None and part.comp.root.opcode == "tuple":
                idx = {k for k, leaf in enumerate(part.leaf_outputs)
                       if leaf is node or (leaf.opcode == "get-tuple-element" and leaf.operands[0] is node)}
                outer_values = [u for u in part.instr.users
                                if u.opcode == "get-tuple-element" and u.attrs.get("index") in idx]
            for value in outer_values:
                for user in value.users:
                    q = self._by_instr.get(user)
                    if q is None or q is part or q.comp is None:
                        continue
                    for i, o in enumerate(user.operands):
                        if o is value:
                            us.extend(u for u in q.comp.parameter(i).users if self.contains(u))
        seen: set = set()
        us = [u for u in us if not (u in seen or seen.add(u))]
        self._users[node] = us
        return us

    @staticmethod
    def _gte_root_of(part: _Part, node: HloInstruction) -> bool:
        return any(leaf.opcode == "get-tuple-element" and leaf.operands[0] is node
                   for leaf in part.leaf_outputs)

    def roots(self) -> list[HloInstruction]:
        return self._roots

    def post_order(self) -> list[HloInstruction]:
        """Every node, operands before users (producer part first). Cached: a view is a snapshot
        (build a new one after editing the graph)."""
        if self._post_order is not None:
            return self._post_order
        out: list[HloInstruction] = []
        for p in self.parts:
            if p.comp is None:
                out.append(p.instr)
            else:
                out.extend(i for i in p.comp.post_order() if self.contains(i))
        self._post_order = out
        return out

    def external_value(self, x: HloInstruction) -> HloInstruction:
        """The outer-computation instruction an external input stands for (a fused parameter maps
        to the fusion's operand)."""
        if x.opcode == "parameter":
            p = self._by_comp.get(x.parent)
            if p is not None and p.instr is not None:
                return p.instr.operands[x.parameter_number]
        return x

    def inputs(self) -> list[HloInstruction]:
        """The external inputs as seen from the nodes (fused parameters or outer instructions),
        first-use order, each outer value once."""
        if self._inputs is not None:
            return self._inputs
        seen: set = set()
        out = []
        for node in self.post_order():
            for o in self.operands(node):
                if self.contains(o):
                    continue
                key = self.external_value(o)
                if key not in seen:
                    seen.add(key)
                    out.append(o)
        self._inputs = out
        return out


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


def _bits(shape: Shape) -> int:
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


def tiled_transpose_description(instr: HloInstruction) -> TransposeDescription | None:
    """XLA's GetDescriptionForTiledTransposeEmitter: a transpose the shared-memory tiled (or
    packed) transpose emitter handles; a layout-changing copy counts as its physical transpose."""
    if instr.opcode == "transpose":
        perm = instr.attrs["dimensions"]
    elif instr.opcode == "copy" and instr.shape.is_array and instr.shape != instr.operands[0].shape:
        perm = tuple(range(instr.shape.rank))
    else:
        return None
    operand = instr.operands[0].shape
    if not operand.is_array:
        return None
    dims, nperm = normalized_transpose(operand, instr.shape, perm)
    if len(nperm) < 2:
        return None
    bits = _bits(instr.shape)
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


_HERO_SEARCH_OPCODES = frozenset({"transpose", "copy", "concatenate"})


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


# -- reductions ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReductionDimensions:
    """XLA's ReductionDimensions: row = [batch (major reduced), kept, minor reduced];
    column = [major kept, reduced, minor kept]."""

    is_row: bool
    dims: tuple[int, int, int]


def _dims_consecutive(shape: Shape, dims) -> bool:
    """LayoutUtil::AreDimensionsConsecutive: `dims` are adjacent in the layout."""
    dims = set(dims)
    positions = sorted(k for k, d in enumerate(physical_dims(shape)) if d in dims)
    return not positions or positions[-1] - positions[0] + 1 == len(positions)


def _partition_by_middle(shape: Shape, middle) -> tuple[int, int, int]:
    """PartitionShapeByMiddleDimensions: (product before, of, after) the middle dims, physically."""
    middle = set(middle)
    out = [1, 1, 1]
    seg = 0
    for d in physical_dims(shape):
        if d in middle:
            seg = 1
            out[1] *= shape.dims[d]
        else:
            out[2 if seg else 0] *= shape.dims[d]
    return out[0], out[1], out[2]


def reduction_dimensions(reduce: HloInstruction) -> ReductionDimensions:
    """XLA's GetReductionKindAndContiguousComponents."""
    shape = reduce.operands[0].shape
    reduced = set(reduce.attrs["dimensions"])
    kept = [d for d in range(shape.rank) if d not in reduced]
    if not kept or all(shape.dims[d] == 1 for d in kept):
        return ReductionDimensions(True, (1, 1, shape.num_elements))
    if _dims_consecutive(shape, kept):
        a, b, c = _partition_by_middle(shape, kept)
        if b == 1:
            return ReductionDimensions(True, (1, 1, a * c))
        if c == 1:
            return ReductionDimensions(False, (1, a, b))
        return ReductionDimensions(True, (a, b, c))
    a, b, c = _partition_by_middle(shape, reduced)
    if c == 1:
        return ReductionDimensions(True, (1, a, b))
    return ReductionDimensions(False, (a, b, c))


def is_unnested_reduction_faster_than_elemental(rd: ReductionDimensions, warp: int = 32) -> bool:
    if rd.is_row:
        return rd.dims[2] >= warp or warp % rd.dims[2] == 0
    major, minor = rd.dims[1], rd.dims[2]
    prefer_elemental = (major < warp or (major < 2 * warp and minor < warp)
                        or (major < 4 * warp and minor < 8) or (major < 8 * warp and minor < 3))
    return not prefer_elemental


def is_reduction_from_or_to_contiguous_dimensions(instr: HloInstruction, warp: int = 32) -> bool:
    if instr.opcode != "reduce":
        return False
    shape = instr.operands[0].shape
    reduced = list(instr.attrs["dimensions"])
    kept = [d for d in range(shape.rank) if d not in set(reduced)]
    if not (_dims_consecutive(shape, kept) or _dims_consecutive(shape, reduced)):
        return False
    return is_unnested_reduction_faster_than_elemental(reduction_dimensions(instr), warp)


def reduction_dimension_race_free_bound(rd: ReductionDimensions, warp: int = 32) -> int:
    """XLA's ReductionDimensionRaceFreeBound: the most reduced elements one kernel reduces without
    atomics (row: 1024 threads * 16 minor elements; column: a warp * 128 reduced rows)."""
    if rd.is_row:
        return MIN_THREADS_X_ROW_REDUCTION * ROW_REDUCTION_TILE[2]
    return warp * COLUMN_REDUCTION_TILE[1]


def reduction_is_race_free(rd: ReductionDimensions, warp: int = 32) -> bool:
    """XLA's ReductionIsRaceFree: the emitter needs no atomics (row: minor <= 1024 * 16 and batch
    <= 8; column: reduced <= 32 * 128)."""
    bound = reduction_dimension_race_free_bound(rd, warp)
    if rd.is_row:
        return rd.dims[2] <= bound and rd.dims[0] <= BATCHED_REDUCTION_RACE_FREE_BOUND
    return rd.dims[1] <= bound


def is_real_reduction_hero(root: HloInstruction, hero: HloInstruction, warp: int = 32) -> bool:
    """XLA's IsRealReductionHero: a contiguous reduce that the reduction emitter handles, and
    either the root itself or race-free (an epilogue needs the whole result in one block)."""
    if not is_reduction_from_or_to_contiguous_dimensions(hero, warp):
        return False
    return root is hero or reduction_is_race_free(reduction_dimensions(hero), warp)


def reduction_shared_memory_bytes(reduce: HloInstruction) -> int:
    """What XLA's SharedMemoryUsage budgets for one unnested reduce: 32 elements for a row
    reduction, 4 x 32 x 33 for a column reduction, per variadic output."""
    size = reduce.operands[0].shape.element_type.byte_size
    n = len(reduce.shape.tuple_shapes) if reduce.shape.is_tuple else 1
    if reduction_dimensions(reduce).is_row:
        return 32 * size * n
    return 4 * 32 * 33 * size * n


# -- loop launch (launch_dimensions.cc, ComputeLoopFusionConfig) -----------------------------------
def max_unroll_factor(num_elements: int) -> int:
    """The largest power of two <= 4 dividing `num_elements` (ComputeMaxUnrollFactor)."""
    k = MAX_UNROLL
    while k > 1:
        if num_elements % k == 0:
            return k
        k //= 2
    return 1


def _prevents_vectorization(instr: HloInstruction) -> bool:
    op = instr.opcode
    if op in ("dot", "sort"):
        return True
    if op == "concatenate" and len(instr.operands) > MAX_CONCAT_OPERANDS_FOR_UNROLLING:
        return True
    if op == "reduce" and instr.shape.is_tuple:
        return True
    if op == "reduce-window":
        window = instr.attrs.get("window")
        size = math.prod(d.size for d in window.dims) if window is not None else 1
        return size > MAX_REDUCE_WINDOW_FOR_UNROLLING
    return False


def may_prevent_vectorization(nodes) -> bool:
    """Ops that make unrolled loops spill or serialize (XLA's MayPreventVectorization)."""
    for instr in nodes:
        if _prevents_vectorization(instr):
            return True
        if instr.opcode == "fusion" and may_prevent_vectorization(instr.fused_computation().instructions):
            return True
    return False


def smallest_bit_width(shapes) -> int:
    bits = 1 << 30
    for shape in shapes:
        for _, leaf in shape.leaf_shapes():
            if leaf.is_array:
                bits = min(bits, _bits(leaf))
    return bits


def loop_unroll_factor(num_elements: int, nodes, output_shapes, device: DeviceDescription = H100) -> int:
    """XLA's ComputeLoopFusionConfig unroll factor."""
    unroll = 1
    if num_elements >= device.threads_per_core_limit * device.core_count \
            and not may_prevent_vectorization(nodes):
        unroll = max_unroll_factor(num_elements)
    return max(unroll, -(-8 // smallest_bit_width(output_shapes)))


def split_grid_x(num_blocks: int, device: DeviceDescription = H100) -> tuple[int, int]:
    """(x, y) with x * y >= num_blocks and x within the grid limit (y a power of two)."""
    limit = device.block_dim_limit[0]
    y = 1
    while -(-num_blocks // y) > limit:
        y *= 2
    return -(-num_blocks // y), y


def loop_launch(num_elements: int, unroll: int, device: DeviceDescription = H100) -> tuple[int, int]:
    """(blocks, threads per block) of a loop over `num_elements`, `unroll` per thread."""
    if num_elements <= 1:
        return 1, 1
    n = -(-num_elements // unroll)
    threads = min(device.threads_per_warp * WARP_SCHEDULERS, n)
    return -(-n // threads), threads


# -- the analysis ----------------------------------------------------------------------------------
def _backend_kind(instr: HloInstruction | None) -> str | None:
    if instr is None or instr.opcode != "fusion":
        return None
    data = instr.backend_config_data
    if isinstance(data, dict):
        cfg = data.get("fusion_backend_config")
        if isinstance(cfg, dict):
            return cfg.get("kind")
    return None


def _strip_bitcasts(instr: HloInstruction) -> HloInstruction:
    while instr.opcode == "bitcast":
        instr = instr.operands[0]
    return instr


class FusionAnalysis:
    """The analysis of one (possibly hypothetical) fusion; build with `of_fusion`,
    `of_instruction`, `of` or `of_producer_consumer`. Fields: `adaptor`, `device`, `roots`,
    `heroes`, `emitter_kind`, `backend_kind`, `reduction` (ReductionDimensions of the first real
    reduction hero, or None), `reduction_hero`, `transpose` (TransposeDescription or None),
    `smallest_input_bits`, `smallest_output_bits`."""

    def __init__(self, adaptor: FusionAdaptor, device: DeviceDescription = H100,
                 backend_kind: str | None = None):
        self.adaptor = adaptor
        self.device = device
        self.backend_kind = backend_kind
        self.roots = adaptor.roots()
        search = any(n.opcode in _HERO_SEARCH_OPCODES for n in adaptor.post_order())
        self.heroes = [find_non_trivial_hero(r, adaptor, search) for r in self.roots]
        self.reduction: ReductionDimensions | None = None
        self.reduction_hero: HloInstruction | None = None
        self.transpose: TransposeDescription | None = None
        inputs = [adaptor.external_value(x) for x in adaptor.inputs()]
        self.smallest_input_bits = smallest_bit_width([i.shape for i in inputs]) if inputs else 1 << 30
        self.smallest_output_bits = smallest_bit_width([r.shape for r in self.roots])
        self.emitter_kind = self._kind()
        self._launch: tuple[int, int] | None = None
        self._shmem: int | None = None

    # constructors
    @classmethod
    def of_fusion(cls, fusion: HloInstruction, device: DeviceDescription = H100) -> FusionAnalysis:
        return cls(FusionAdaptor.for_instruction(fusion), device, _backend_kind(fusion))

    @classmethod
    def of_instruction(cls, instr: HloInstruction, device: DeviceDescription = H100) -> FusionAnalysis:
        """A lone instruction as a one-op fusion (a fusion instruction: its own analysis)."""
        return cls(FusionAdaptor.for_instruction(instr), device, _backend_kind(instr))

    of = of_instruction

    @classmethod
    def of_producer_consumer(cls, producer: HloInstruction, consumer: HloInstruction,
                             device: DeviceDescription = H100,
                             with_extra_outputs: bool = False) -> FusionAnalysis:
        """`producer` fused into `consumer`, without building the fusion."""
        kind = _backend_kind(consumer) if consumer.opcode == "fusion" else None
        if kind is None:
            kind = _backend_kind(producer)
        return cls(FusionAdaptor.for_producer_consumer(producer, consumer, with_extra_outputs), device, kind)

    # kind selection
    def _kind(self) -> str:
        if self.backend_kind in CUSTOM_BACKEND_KINDS:
            return "custom"
        if self.backend_kind == NORMALIZATION_BACKEND_KIND:
            return "normalization"
        warp = self.device.threads_per_warp
        roots, heroes = self.roots, self.heroes
        first = None
        for root, hero in zip(roots, heroes):
            if hero.opcode == "reduce" and is_real_reduction_hero(root, hero, warp):
                first = hero
                break
        if first is not None:
            first_rd = reduction_dimensions(first)
            n_in = first.operands[0].shape.num_elements
            ok = True
            for root, hero in zip(roots, heroes):
                if root is first:
                    continue
                if hero.opcode == "reduce" and is_real_reduction_hero(root, hero, warp):
                    if reduction_dimensions(hero) != first_rd:
                        ok = False
                        break
                elif _leaf_elements(root.shape) != n_in:
                    ok = False
                    break
            if ok:
                self.reduction = first_rd
                self.reduction_hero = first
                return "reduction"
        transpose = self._consistent_transpose()
        if transpose is not None:
            self.transpose = transpose
            return "transpose"
        if len(roots) > 1:
            return self._loop_or_dus()
        if roots[0].opcode == "scatter":
            return "scatter"
        if roots[0].opcode == "sort":
            return "sort"
        hero = heroes[0]
        if hero.opcode == "concatenate" and not roots[0].shape.is_tuple and \
                len(hero.operands) <= MAX_CONCATENATE_OPERANDS:
            return "concatenate"
        return self._loop_or_dus()

    def _consistent_transpose(self) -> TransposeDescription | None:
        found = None
        others = []
        for root, hero in zip(self.roots, self.heroes):
            desc = tiled_transpose_description(hero)
            if desc is None:
                others.append(root)
            elif found is None:
                found = desc
            elif not found.equivalent(desc):
                return None
        if found is None:
            return None
        in_shape = found.instr.operands[0].shape
        for root in others:
            if root.shape.is_tuple or not (reshape_is_bitcast(root.shape, in_shape)
                                           or is_reshape_or_transpose_bitcast(root.shape, in_shape)):
                return None
        return found

    def _loop_or_dus(self) -> str:
        """kLoop, or the in-place DUS emitter when every root is (a bitcast of) a
        dynamic-update-slice of a fusion input (XLA's IsDynamicUpdateSliceFusion; whether the
        buffers really alias is decided by hlo-codegen after buffer assignment)."""
        dus = [_strip_bitcasts(r) for r in self.roots]
        if not all(d.opcode == "dynamic-update-slice" for d in dus):
            return "loop"
        for d in dus:
            base = self.adaptor.operands(d)[0]
            while base.opcode == "bitcast" and self.adaptor.contains(base):
                base = self.adaptor.operands(base)[0]
            if self.adaptor.contains(base):
                return "loop"
        return "in_place_dynamic_update_slice"

    # launch dimensions
    def launch_dimensions(self) -> tuple[int, int]:
        """(blocks, threads per block) the emitter would launch with (XLA's
        EstimateFusionLaunchDimensions); blocks is the product over the grid."""
        if self._launch is None:
            self._launch = self._compute_launch()
        return self._launch

    def _index_shape(self) -> Shape:
        shape = self.roots[0].shape
        while shape.is_tuple and shape.tuple_shapes:
            shape = shape.tuple_shapes[0]
        return shape

    def loop_unroll_factor(self, shape: Shape | None = None) -> int:
        shape = shape if shape is not None else self._index_shape()
        return loop_unroll_factor(shape.num_elements, self.adaptor.post_order(),
                                  [r.shape for r in self.roots], self.device)

    def _compute_launch(self) -> tuple[int, int]:
        kind = self.emitter_kind
        if kind == "reduction":
            return self._reduction_launch()
        if kind == "transpose":
            return self._transpose_launch()
        if kind == "concatenate":
            hero = self.heroes[0]
            largest = max((o.shape for o in hero.operands), key=lambda s: s.num_elements)
            return loop_launch(largest.num_elements, self.loop_unroll_factor(largest), self.device)
        if kind == "scatter":
            updates = self.roots[0].operands[2].shape
            return loop_launch(updates.num_elements, self.loop_unroll_factor(updates), self.device)
        if kind == "in_place_dynamic_update_slice":
            update = _strip_bitcasts(self.roots[0]).operands[1].shape
            return loop_launch(update.num_elements, self.loop_unroll_factor(update), self.device)
        if kind == "normalization":
            dims = normalization_row_dims(self.roots[0])
            if dims is not None:
                threads, per_block, blocks = normalization_launch(dims, self.device)
                return blocks, threads * per_block
        if kind in ("loop",):
            shape = self._index_shape()
            return loop_launch(shape.num_elements, self.loop_unroll_factor(shape), self.device)
        shape = self._index_shape()
        return max(1, -(-shape.num_elements // FALLBACK_THREADS_PER_BLOCK)), FALLBACK_THREADS_PER_BLOCK

    def _vector_size_for_reduction(self, minor: int, num_threads: int) -> int:
        """XLA's GetVectorSizeForMlir."""
        if minor % 2 or num_threads * 2 > minor:
            return 1
        for hero in self.heroes:
            if any(o.shape.is_array and o.shape.element_type.is_complex for o in hero.operands):
                return 1
        if self.smallest_input_bits >= 64:
            return 1
        if self.smallest_input_bits >= 32:
            return 2
        if num_threads * 4 > minor:
            return 2
        return 4 if minor % 4 == 0 else 2

    def reduction_emitter(self) -> str:
        """Which reduction emitter XLA picks: "multi_row", "row", "column" or "small_column"."""
        rd = self.reduction
        if rd.is_row:
            return "multi_row" if self._multi_row_vector() else "row"
        return "small_column" if self.device.threads_per_warp % rd.dims[2] == 0 else "column"

    def _multi_row_vector(self) -> int:
        """The vector size of the multi-row reduction emitter, 0 when it does not apply."""
        batch, kept, minor = self.reduction.dims
        warp = self.device.threads_per_warp
        if minor & (minor - 1):
            return 0
        bits = min(self.smallest_input_bits, self.smallest_output_bits)
        vector = max(1, min(minor, 64 // max(bits, 1)))
        if minor > warp * vector:
            return 0
        cores = self.device.core_count
        while vector > 1 and -(-kept * (minor // vector) // THREADS_PER_BLOCK_TARGET) < cores:
            vector //= 2
        if minor > warp * vector:
            return 0
        return vector

    def reduction_groups(self) -> list[list[HloInstruction]]:
        """Roots that one block row computes together (XLA's GroupDisjointReductions, the MLIR
        variant): non-reduction roots form one group; roots sharing a predecessor (a fused
        instruction or a fusion input) join, except that reductions are not joined through a
        broadcast constant or scalar (recomputing that is cheap). Groups run on blocks_y."""
        roots = self.roots
        if len(roots) == 1:
            return [list(roots)]
        warp = self.device.threads_per_warp
        parent = list(range(len(roots)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        def union(i: int, j: int) -> None:
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)

        is_reduction = [h.opcode == "reduce" and is_real_reduction_hero(r, h, warp)
                        for r, h in zip(roots, self.heroes)]
        non_reduction = [k for k, red in enumerate(is_reduction) if not red]
        for k in non_reduction[1:]:
            union(non_reduction[0], k)
        adaptor = self.adaptor
        reached: dict[HloInstruction, list[int]] = {}
        order: list[HloInstruction] = []
        for k, root in enumerate(roots):
            seen = {root}
            queue = [root]
            i = 0
            while i < len(queue):
                node = queue[i]
                i += 1
                if node not in reached:
                    reached[node] = []
                    order.append(node)
                reached[node].append(k)
                if adaptor.contains(node):
                    for o in adaptor.operands(node):
                        if o not in seen:
                            seen.add(o)
                            queue.append(o)
        for node in order:
            ks = reached[node]
            if len(ks) < 2:
                continue
            cheap = _is_broadcasted_constant_or_scalar(node)
            picked: list[int] = []
            added_reduce = False
            for k in ks:
                if is_reduction[k] and cheap and added_reduce:
                    continue
                picked.append(k)
                added_reduce |= is_reduction[k]
            for k in picked[1:]:
                union(picked[0], k)
        groups: dict[int, list[HloInstruction]] = {}
        for k, root in enumerate(roots):
            groups.setdefault(find(k), []).append(root)
        return [groups[g] for g in sorted(groups)]

    def _reduction_launch(self) -> tuple[int, int]:
        blocks, threads = self._reduction_launch_x()
        return blocks * len(self.reduction_groups()), threads

    def row_reduction_threads(self) -> tuple[int, int]:
        """(threads along kept rows, threads along the minor reduced dim) of XLA's row emitter."""
        batch, kept, minor = self.reduction.dims
        warp = self.device.threads_per_warp
        threads_reduced = min(MIN_THREADS_X_ROW_REDUCTION,
                              -(-(-(-minor // MINOR_REDUCED_ELEMENTS_PER_THREAD)) // warp) * warp)
        threads_kept = 1
        if threads_reduced * 2 <= THREADS_PER_BLOCK_TARGET:
            threads_kept = kept if kept * threads_reduced <= THREADS_PER_BLOCK_TARGET \
                else THREADS_PER_BLOCK_TARGET // threads_reduced
        return threads_kept, threads_reduced

    def row_reduction_tile(self, threads_reduced: int, vector: int) -> int:
        """Vectors of the minor reduced dim each thread of XLA's row emitter folds per block."""
        minor = self.reduction.dims[2]
        return min(MINOR_REDUCED_ELEMENTS_PER_THREAD // vector, -(-(minor // vector) // threads_reduced))

    def small_column_config(self) -> tuple[int, int, int]:
        """(vector size, shared rows, threads) of XLA's small-column emitter: 128 threads, vector
        and then threads halved until the partials fit 32 shared rows."""
        _, reduced, minor_kept = self.reduction.dims
        warp = self.device.threads_per_warp
        vector = self._vector_size_for_reduction(reduced * minor_kept, warp)
        threads = 128
        rows = vector * threads // minor_kept
        while rows > warp and vector > 1:
            vector //= 2
            rows //= 2
        if rows > warp:
            threads //= rows // warp
            rows = warp
        return vector, rows, threads

    def _reduction_launch_x(self) -> tuple[int, int]:
        batch, kept, minor = self.reduction.dims
        warp = self.device.threads_per_warp
        if self.reduction.is_row:
            vector = self._multi_row_vector()
            if vector:
                threads_reduced = minor // vector
                threads_kept = kept if kept * threads_reduced <= THREADS_PER_BLOCK_TARGET \
                    else THREADS_PER_BLOCK_TARGET // threads_reduced
                return -(-kept // threads_kept), threads_kept * threads_reduced
            threads_kept, threads_reduced = self.row_reduction_threads()
            vector = self._vector_size_for_reduction(minor, threads_reduced)
            tile = self.row_reduction_tile(threads_reduced, vector)
            per_block = threads_reduced * tile * vector
            blocks = -(-kept // threads_kept) * -(-minor // per_block)
            return blocks, threads_kept * threads_reduced
        major, reduced, minor_kept = batch, kept, minor
        if warp % minor_kept == 0:
            return major, self.small_column_config()[2]
        vector = self._vector_size_for_reduction(minor_kept, warp)
        return major * -(-minor_kept // (warp * vector)), warp * warp

    def _transpose_launch(self) -> tuple[int, int]:
        desc = self.transpose
        dims = list(desc.dimensions)
        in_dims = list(desc.input_dimensions)
        threads = TRANSPOSE_TILE * TRANSPOSE_ROWS_PER_BLOCK
        if desc.packed:
            ids, tiles = packed_transpose_tiles(desc.dimensions, desc.permutation, _bits(desc.instr.shape))
            # tiles of A x T1 x T2 input elements (XLA's PackedTranspose)
            blocks = 1
            for d, n in enumerate(in_dims):
                tile = tiles[ids.index(d)] if d in ids else 1
                blocks *= -(-n // tile)
            return max(blocks, 1), threads
        tile = TRANSPOSE_TILE
        # the two tiled dims: the output's minor dim and the input's minor dim
        out_minor = len(dims) - 1
        in_minor_as_out = desc.permutation.index(len(in_dims) - 1)
        blocks = 1
        for i, d in enumerate(dims):
            if i in (out_minor, in_minor_as_out):
                blocks *= -(-d // tile)
            else:
                blocks *= d
        if in_minor_as_out == out_minor:  # minor dim kept: tile the second-minor dims instead
            blocks = 1
            second = desc.permutation.index(len(in_dims) - 2)
            for i, d in enumerate(dims[:-1]):
                blocks *= -(-d // tile) if i in (len(dims) - 2, second) else d
        return max(blocks, 1), threads

    # shared memory
    def shared_memory_bytes(self) -> int:
        """Shared memory the fusion's kernel budgets (XLA's SharedMemoryUsage: unnested
        reductions and tiled transposes)."""
        if self._shmem is None:
            total = 0
            warp = self.device.threads_per_warp
            for node in self.adaptor.post_order():
                if node.opcode == "reduce" and is_reduction_from_or_to_contiguous_dimensions(node, warp):
                    total += reduction_shared_memory_bytes(node)
                elif node.opcode in ("transpose", "copy"):  # a layout-changing copy is one too
                    desc = tiled_transpose_description(node)
                    if desc is not None:
                        total += desc.shmem_usage
                elif node.opcode == "fusion":  # a nested fusion (rare)
                    total += FusionAnalysis.of_fusion(node, self.device).shared_memory_bytes()
            self._shmem = total
        return self._shmem

    def num_unnested_reductions(self) -> int:
        """Reduction roots the reduction emitter would emit (for the 8-output limit)."""
        warp = self.device.threads_per_warp
        return sum(1 for r, h in zip(self.roots, self.heroes)
                   if h.opcode == "reduce" and is_reduction_from_or_to_contiguous_dimensions(h, warp))

    def __repr__(self) -> str:
        return f"FusionAnalysis({self.emitter_kind}, roots={[r.name for r in self.roots]}, " \
               f"heroes={[h.name for h in self.heroes]})"


def _is_broadcasted_constant_or_scalar(instr: HloInstruction) -> bool:
    """hlo_query::IsBroadcastedConstantOrScalar."""
    def constant_or_scalar(i: HloInstruction) -> bool:
        return i.opcode == "constant" or (i.shape.is_array and i.shape.rank == 0)
    return constant_or_scalar(instr) or \
        (instr.opcode == "broadcast" and constant_or_scalar(instr.operands[0]))


def _leaf_elements(shape: Shape) -> int:
    while shape.is_tuple and shape.tuple_shapes:
        shape = shape.tuple_shapes[0]
    return shape.num_elements


def fusion_kind(analysis: FusionAnalysis) -> str:
    """The HLO fusion kind priority fusion gives a fusion with this analysis (XLA's ChooseKind)."""
    kind = analysis.emitter_kind
    if kind in ("loop", "in_place_dynamic_update_slice"):
        return "kLoop"
    if kind in ("custom", "sort", "normalization"):
        return "kCustom"
    return "kInput"


def fusion_roots(fusion: HloInstruction) -> list[HloInstruction]:
    """The instructions computing a fusion's outputs (operands of a root tuple)."""
    root = fusion.fused_computation().root
    return list(root.operands) if root.opcode == "tuple" else [root]


def is_dus_root(root: HloInstruction) -> bool:
    return _strip_bitcasts(root).opcode == "dynamic-update-slice"


__all__ = [
    "EMITTER_KINDS", "FusionAdaptor", "FusionAnalysis", "ReductionDimensions", "TransposeDescription",
    "find_non_trivial_hero", "fusion_kind", "fusion_roots", "is_dus_root", "is_intermediate",
    "is_real_reduction_hero", "is_reduction_from_or_to_contiguous_dimensions", "loop_launch",
    "loop_unroll_factor", "max_unroll_factor", "may_prevent_vectorization", "normalization_launch",
    "normalization_row_dims", "reduction_dimensions",
    "reduction_is_race_free", "reduction_shared_memory_bytes", "smallest_bit_width", "split_grid_x",
    "tiled_transpose_description",
]
