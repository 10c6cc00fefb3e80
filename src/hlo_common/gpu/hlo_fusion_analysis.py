"""Fusion analysis: which emitter a fusion gets, its heroes, reduction/transpose shapes and
launch dimensions (XLA's `HloFusionAnalysis`, `xla/service/gpu/hlo_fusion_analysis.cc`).

Where it sits: hlo-opt's priority fusion and multi-output fusion (through the GPU performance
model in `hlo_opt.gpu_model`, and the fusibility rules) ask it about fusions that do not exist
yet; hlo-codegen asks it which emitter to run (`hlo_codegen.emitters.emitter_kind`). It reads a
fusion through a `FusionAdaptor` (`hlo_traversal`: a fusion, a lone instruction or a producer +
consumer pair as if fused, without building anything) and decides with the facts of its sibling
modules: heroes and tiled transposes (`ir_emission_utils`), reduction geometry
(`reduction_utils`), loop launches and unroll factors (`launch_dimensions`), all for the
`DeviceDescription` it is given (the H100 by default).

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module('''
    ... add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
    ... ENTRY e { p = f32[128,1024] parameter(0) e = f32[128,1024] exponential(p)
    ...   c = f32[] constant(0) ROOT r = f32[128] reduce(e, c), dimensions={1}, to_apply=add }''')
    >>> a = FusionAnalysis.of_producer_consumer(m.entry.instruction("e"), m.entry.root)
    >>> a.emitter_kind, fusion_kind_for_emitter(a), a.reduction.is_row, a.reduction.dims
    ('reduction', 'kInput', True, (1, 128, 1024))

Emitter kinds (XLA's `GetEmitterFusionKind`, in order): a backend-config kind of a custom, Triton
or cuDNN fusion -> "custom" (our own normalization fusions, backend kind "__norm" made by
hlo-opt's `normalization-fusion` pass, -> "normalization", launched by `normalization_launch`);
a real reduction hero whose other roots are compatible -> "reduction"; consistent
tiled-transpose heroes -> "transpose"; several roots -> "loop"; a scatter root -> "scatter"; a
sort root -> "sort"; a concatenate hero of at most 4 operands -> "concatenate"; else "loop". A
"loop" whose roots are all (bitcasts of) dynamic-update-slices of a fusion input is reported as
"in_place_dynamic_update_slice" (in XLA a sub-case of kLoop chosen in `GetFusionEmitter`);
`fusion_kind_for_emitter` maps it to kLoop.
"""

from __future__ import annotations

import functools

from hlo_common.gpu.device import DeviceDescription, H100
from hlo_common.gpu.hlo_traversal import FusionAdaptor
from hlo_common.gpu.ir_emission_utils import (
    HERO_SEARCH_OPCODES, TransposeDescription, element_bit_width, find_non_trivial_hero,
    is_reshape_or_transpose_bitcast, packed_transpose_tiles, reshape_is_bitcast, strip_bitcasts,
    tiled_transpose_description,
)
from hlo_common.gpu.launch_dimensions import (
    VECTORIZATION_OPCODES, loop_launch, loop_unroll_factor, normalization_launch, normalization_row_dims, smallest_bit_width,
)
from hlo_common.gpu.reduction_utils import (
    MIN_THREADS_X_ROW_REDUCTION, ReductionDimensions, is_real_reduction_hero, reduction_dimensions,
)
from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape

MAX_CONCATENATE_OPERANDS = 4              # UseConcatenateFusion
TRANSPOSE_TILE = 32
TRANSPOSE_ROWS_PER_BLOCK = 4              # 32 x 4 = 128 threads per block
MINOR_REDUCED_ELEMENTS_PER_THREAD = 16
THREADS_PER_BLOCK_TARGET = 256
FALLBACK_THREADS_PER_BLOCK = 128          # EstimateFusionLaunchDimensions fallback

CUSTOM_BACKEND_KINDS = ("__custom_fusion", "__triton", "__triton_gemm", "__triton_nested_gemm_fusion",
                        "__triton_collective", "__cudnn$fusion", "__triton_softmax")
EMITTER_KINDS = ("loop", "reduction", "transpose", "concatenate", "scatter", "sort",
                 "in_place_dynamic_update_slice", "custom", "normalization")
NORMALIZATION_BACKEND_KIND = "__norm"     # hlo-opt's normalization-fusion (not an XLA kind)


def _backend_kind(instr: HloInstruction | None) -> str | None:
    if instr is None or instr.opcode != "fusion":
        return None
    data = instr.backend_config_data
    if isinstance(data, dict):
        cfg = data.get("fusion_backend_config")
        if isinstance(cfg, dict):
            return cfg.get("kind")
    return None


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
        search = bool(adaptor.with_opcode(*HERO_SEARCH_OPCODES))
        self.heroes = [find_non_trivial_hero(r, adaptor, search) for r in self.roots]
        self.reduction: ReductionDimensions | None = None
        self.reduction_hero: HloInstruction | None = None
        self.transpose: TransposeDescription | None = None
        self.emitter_kind = self._kind()
        self._launch: tuple[int, int] | None = None

    # the narrowest element types read and written: only reductions ask (vector sizes), so they
    # are found on first use (priority fusion builds thousands of analyses of loop fusions)
    @functools.cached_property
    def smallest_input_bits(self) -> int:
        inputs = self.adaptor.input_values()
        return smallest_bit_width([i.shape for i in inputs]) if inputs else 1 << 30

    @functools.cached_property
    def smallest_output_bits(self) -> int:
        return smallest_bit_width([r.shape for r in self.roots])

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
        dus = [strip_bitcasts(r) for r in self.roots]
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
        n, device = shape.num_elements, self.device
        # the ops that may prevent vectorization only matter for a loop large enough to unroll
        nodes = self.adaptor.with_opcode(*VECTORIZATION_OPCODES) \
            if n >= device.threads_per_core_limit * device.core_count else ()
        return loop_unroll_factor(n, nodes, [r.shape for r in self.roots], device)

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
            update = strip_bitcasts(self.roots[0]).operands[1].shape
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
        groups = _DisjointSets(len(roots))
        is_reduction = [h.opcode == "reduce" and is_real_reduction_hero(r, h, warp)
                        for r, h in zip(roots, self.heroes)]
        non_reduction = [k for k, red in enumerate(is_reduction) if not red]
        for k in non_reduction[1:]:
            groups.union(non_reduction[0], k)
        for node, ks in _roots_reaching(self.adaptor, roots):
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
                groups.union(picked[0], k)
        by_group: dict[int, list[HloInstruction]] = {}
        for k, root in enumerate(roots):
            by_group.setdefault(groups.find(k), []).append(root)
        return [by_group[g] for g in sorted(by_group)]

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
            ids, tiles = packed_transpose_tiles(desc.dimensions, desc.permutation,
                                                element_bit_width(desc.instr.shape))
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

    def __repr__(self) -> str:
        return f"FusionAnalysis({self.emitter_kind}, roots={[r.name for r in self.roots]}, " \
               f"heroes={[h.name for h in self.heroes]})"


class _DisjointSets:
    """Union-find over 0..n-1; a set is named by its smallest member."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def _roots_reaching(adaptor: FusionAdaptor,
                    roots: list[HloInstruction]) -> list[tuple[HloInstruction, list[int]]]:
    """Every node the roots reach towards their operands (fusion inputs included, not walked
    through), with the numbers of the roots reaching it, in order of first visit (breadth first
    from each root in turn)."""
    reached: dict[HloInstruction, list[int]] = {}
    for k, root in enumerate(roots):
        seen = {root}
        queue = [root]
        i = 0
        while i < len(queue):
            node = queue[i]
            i += 1
            reached.setdefault(node, []).append(k)
            if adaptor.contains(node):
                for o in adaptor.operands(node):
                    if o not in seen:
                        seen.add(o)
                        queue.append(o)
    return list(reached.items())


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


def fusion_kind_for_emitter(analysis: FusionAnalysis) -> str:
    """The HLO fusion kind priority fusion gives a fusion with this analysis (XLA's ChooseKind)."""
    kind = analysis.emitter_kind
    if kind in ("loop", "in_place_dynamic_update_slice"):
        return "kLoop"
    if kind in ("custom", "sort", "normalization"):
        return "kCustom"
    return "kInput"


__all__ = ["EMITTER_KINDS", "FusionAnalysis", "fusion_kind_for_emitter"]
