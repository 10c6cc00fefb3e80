"""The transpose emitter (XLA's TransposeFusion): a transpose that moves the physically minor
dimension goes through a shared-memory tile, so both its reads and its writes are coalesced.

Where it sits: emitters/__init__.py registers it as the "transpose" emitter kind, which the hero
analysis (hlo_common.fusion_analysis, XLA's GetDescriptionForTiledTransposeEmitter) gives fusions
whose heroes are tiled transposes (or layout-changing copies), loop fusions with elementwise
prologues and epilogues included.

The kernel, per hero group (all heroes with the same operand shape, permutation and layouts):
blocks of (32, 4) threads, one 32 x 32 tile of the plane spanned by the input's minor dimension
`m` and the input dimension `n` that becomes the output's minor dimension, times every index of
the other dimensions (the block number says which).

1. each thread computes the hero's operand - the fused prologue, elementally - at 8 input
   positions, lane x along `m` (coalesced reads), and stores it in a shared 32 x 33 tile (one
   column of padding keeps the transposed reads free of bank conflicts);
2. `sync_threads`;
3. each thread reads the tile transposed, lane x now along `n` (the output's minor dimension:
   coalesced writes), and writes every root computed from the hero through its epilogue
   (`emit_epilogue`: elementwise ops, bitcasts, reshapes).

Roots that are no epilogue of a hero (side outputs) are written by plain elemental loops over
their own shapes after the tiles. Whatever this kernel cannot tile - no hero found, a transpose
that keeps the minor dimension, sub-byte types, more shared memory than a block has - goes to
the loop emitter, which computes every element (correct, uncoalesced), so no fusion is refused.
"""

from __future__ import annotations

import math
from typing import Hashable, Sequence

from hlo_codegen.elemental.emitter import leaf_shapes, value_type
from hlo_codegen.emitters.base import KernelParams, find_hero, output_shapes
from hlo_codegen.emitters.common import (
    FusedValues, SimpleEmitter, ThreadIds, emit_epilogue, epilogue_nodes, linear_index, packing, root_outputs,
    store_side_outputs,
)
from hlo_codegen.emitters.launch import H100, GpuDeviceInfo
from hlo_codegen.emitters.loop import LoopFusion
from hlo_codegen.indexing import IndexingMap, LaunchDimensions, Variable, dim, sym
from hlo_codegen.indexing.interval import Interval
from hlo_codegen.indexing.shape_indexing import delinearize
from hlo_codegen.kernel_ir.builder import IRBuilder
from hlo_codegen.kernel_ir.ir import Buffer, Kernel
from hlo_common.ir import HloInstruction
from hlo_common.opcodes import is_elementwise
from hlo_common.shape import Shape

TILE = 32
ROWS = 4  # threads per block: TILE x ROWS; each thread moves TILE / ROWS elements per tile
PADDED = TILE + 1


def _permutation(instr: HloInstruction) -> list[int] | None:
    """Output dim i reads operand dim perm[i]; a layout-changing copy is the identity."""
    if instr.opcode == "transpose":
        return list(instr.attrs["dimensions"])
    if instr.opcode == "copy" and instr.shape.is_array and \
            instr.shape.minor_to_major != instr.operands[0].shape.minor_to_major:
        return list(range(instr.shape.rank))
    return None


def _minor_dim(shape: Shape) -> int | None:
    """The physically most minor dimension of more than one element."""
    for d in shape.minor_to_major:
        if shape.dims[d] > 1:
            return d
    return None


def transpose_plane(hero: HloInstruction) -> tuple[int, int] | None:
    """(m, n): input dims of the tile, m the input's minor dim and n the one that becomes the
    output's minor dim; None when the transpose keeps the minor dimension (nothing to tile)."""
    perm = _permutation(hero)
    if perm is None or not hero.shape.is_array:
        return None
    m = _minor_dim(hero.operands[0].shape)
    out_minor = _minor_dim(hero.shape)
    if m is None or out_minor is None or perm[out_minor] == m:
        return None
    return m, perm[out_minor]


def transpose_hero(root: HloInstruction) -> HloInstruction | None:
    """The tileable transpose a root is an elementwise epilogue of: the hero analysis's, else the
    only transpose (or layout-changing copy) reached through elementwise ops and bitcasts."""
    hero = find_hero(root)
    if transpose_plane(hero) is not None and epilogue_nodes(root, hero) is not None:
        return hero
    found, seen, work = [], {id(root)}, [root]
    while work:
        node = work.pop()
        if transpose_plane(node) is not None:
            found.append(node)
            continue
        if is_elementwise(node.opcode) or node.opcode == "bitcast":
            for op in node.operands:
                if id(op) not in seen:
                    seen.add(id(op))
                    work.append(op)
    if len(found) == 1 and epilogue_nodes(root, found[0]) is not None:
        return found[0]
    return None


def _signature(hero: HloInstruction) -> tuple:
    op = hero.operands[0].shape
    return (tuple(op.dims), tuple(op.minor_to_major), tuple(_permutation(hero)),
            tuple(hero.shape.minor_to_major))


class TransposeFusion(SimpleEmitter):
    """See the module docstring."""

    kind = "transpose"

    def __init__(self, fusion: HloInstruction, device: GpuDeviceInfo = H100):
        super().__init__(fusion, device)
        self.heroes: list[HloInstruction] = []
        self.hero_roots: dict[int, list[HloInstruction]] = {}
        self.side_roots: list[HloInstruction] = []
        signature = None
        for root, _, _ in root_outputs(fusion, [""] * len(output_shapes(fusion))):
            hero = transpose_hero(root)
            if hero is not None and signature in (None, _signature(hero)):
                signature = _signature(hero)
                if id(hero) not in self.hero_roots:
                    self.heroes.append(hero)
                    self.hero_roots[id(hero)] = []
                self.hero_roots[id(hero)].append(root)
            else:
                self.side_roots.append(root)
        self.fallback: LoopFusion | None = None
        if not self._tileable():
            self.fallback = LoopFusion(fusion, device)
            self._launch = self.fallback.launch_dimensions()
            return
        hero = self.heroes[0]
        dims = hero.operands[0].shape.dims
        self.m, self.n = transpose_plane(hero)
        self.rest = [d for d in range(len(dims)) if d not in (self.m, self.n)]
        self.tiles_m = -(-dims[self.m] // TILE)
        self.tiles_n = -(-dims[self.n] // TILE)
        self.num_tiles = math.prod(dims[d] for d in self.rest) * self.tiles_m * self.tiles_n
        side = max([leaf_shapes(r.shape)[0].num_elements for r in self.side_roots] + [1])
        blocks = max(self.num_tiles, -(-side // (TILE * ROWS)))
        self._launch = LaunchDimensions((TILE, ROWS, 1), (blocks, 1, 1))

    def _tileable(self) -> bool:
        if not self.heroes:
            return False
        if any(packing(s) > 1 for s in output_shapes(self.fusion)):
            return False
        shared = 0
        for hero in self.heroes:
            et = hero.operands[0].shape.element_type
            if et.bits < 8 and not et.is_pred:
                return False
            shared += TILE * PADDED * max(et.bits // 8, 1)
        if shared > self.device.shared_memory_per_block:
            return False
        return self.heroes[0].operands[0].shape.num_elements > 0 and \
            self.device.block_dim_limit[0] >= self.heroes[0].operands[0].shape.num_elements // (TILE * TILE)

    def launch_dimensions(self) -> LaunchDimensions:
        return self._launch

    def emit(self, argument_ids: Sequence[Hashable] | None = None) -> Kernel:
        # An output sharing a parameter's buffer (an in-place side output): blocks still reading
        # tiles would see elements other blocks already overwrote; the loop emitter reads and
        # writes each element in one thread.
        n = len(self.fusion.operands)
        ids = list(argument_ids) if argument_ids is not None else []
        in_place = bool(set(ids[:n]) & set(ids[n:]))
        if self.fallback is not None or in_place:
            return (self.fallback or LoopFusion(self.fusion, self.device)).emit(argument_ids)
        return super().emit(argument_ids)

    # -- the kernel -------------------------------------------------------------------------------------
    def _tile_map(self, along_m: bool) -> IndexingMap:
        """(th_x, th_y, bl_x)[k] -> input index of the element a thread moves in its k-th row:
        lane x along m when reading (`along_m`), along n when writing; bounds as constraints."""
        dims = self.heroes[0].operands[0].shape.dims
        sizes = [dims[d] for d in self.rest] + [self.tiles_n, self.tiles_m]
        block = delinearize(sizes, dim(2))
        t_n, t_m = block[-2], block[-1]
        lane, row = dim(0), dim(1) + sym(0) * ROWS
        coord_m = t_m * TILE + (lane if along_m else row)
        coord_n = t_n * TILE + (row if along_m else lane)
        results = []
        for d in range(len(dims)):
            results.append(coord_m if d == self.m else coord_n if d == self.n else block[self.rest.index(d)])
        grid = [Variable(Interval(0, TILE - 1)), Variable(Interval(0, ROWS - 1)),
                Variable(Interval(0, self._launch.blocks_xyz()[0] - 1))]
        constraints = [(dim(2), Interval(0, self.num_tiles - 1)),
                       (coord_m, Interval(0, dims[self.m] - 1)), (coord_n, Interval(0, dims[self.n] - 1))]
        return IndexingMap(results, grid, [Variable(Interval(0, TILE // ROWS - 1))], (), constraints)

    def build(self, kernel: Kernel, params: KernelParams) -> None:
        outputs = root_outputs(self.fusion, params.output_buffers)
        wanted = [r for r, _, _ in outputs] + [h.operands[0] for h in self.heroes]
        values = FusedValues(kernel, self.computation, params, wanted)
        b = IRBuilder(kernel)
        ids = ThreadIds(b, self._launch)
        th = [ids[0], ids[1], ids[3]]
        tiles = []
        for k, hero in enumerate(self.heroes):
            name = f"tile{k}"
            kernel.buffers.append(Buffer(name, "shared", hero.operands[0].shape.element_type.name,
                                         TILE * PADDED))
            tiles.append(name)

        def read(syms, idx, iters):
            lane, row = th[0], b.apply_indexing(_ROW, [th[1]], list(syms))[0]
            slot = b.apply_indexing(_SLOT, [row, lane])[0]
            for hero, tile in zip(self.heroes, tiles):
                b.store(tile, values.at(b, hero.operands[0], list(idx))[0], slot)
            return []

        b.loop(self._tile_map(True), th, [], read, index_hints=[f"i{d}" for d in range(self._rank())])
        b.sync_threads()

        def write(syms, idx, iters):
            lane, row = th[0], b.apply_indexing(_ROW, [th[1]], list(syms))[0]
            slot = b.apply_indexing(_SLOT, [lane, row])[0]
            for hero, tile in zip(self.heroes, tiles):
                v = b.load(tile, slot, value_type(hero.operands[0].shape))
                out_idx = [idx[p] for p in _permutation(hero)]
                for root, buffers, shapes in outputs:
                    if not any(root is r for r in self.hero_roots[id(hero)]):
                        continue
                    vals, root_idx = emit_epilogue(values.elemental, b, hero, root, [v], out_idx)
                    for val, name, shape in zip(vals, buffers, shapes):
                        b.store(name, val, linear_index(b, shape, root_idx))
            return []

        b.loop(self._tile_map(False), th, [], write, index_hints=[f"i{d}" for d in range(self._rank())])
        side = [o for o in outputs if any(o[0] is r for r in self.side_roots)]
        store_side_outputs(b, ids, self._launch, values, side)

    def _rank(self) -> int:
        return self.heroes[0].operands[0].shape.rank


# th_y[k] -> tile row; (row, column) -> slot of the padded shared tile
_ROW = IndexingMap([dim(0) + sym(0) * ROWS], [Variable(Interval(0, ROWS - 1))],
                   [Variable(Interval(0, TILE // ROWS - 1))])
_SLOT = IndexingMap([dim(0) * PADDED + dim(1)],
                    [Variable(Interval(0, TILE - 1)), Variable(Interval(0, TILE - 1))])
