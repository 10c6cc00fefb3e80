"""The partitioner's per-instruction handlers (XLA's SpmdPartitioningVisitor::Handle*, in
xla/service/spmd/spmd_partitioner.cc and dot_handler.cc).

`Partitioner.values` maps each original instruction to its per-device instruction and the tiling
that instruction actually holds (a tuple of tilings for a tuple); `get` reshards on demand, once
per (value, layout). Each handler asks for its operands in the layout it needs and records the
layout its result comes out in; the consumer reshards if it wants another.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.shape import Shape
from hlo_opt.spmd import dot_dims, manual, rules, uneven
from hlo_opt.spmd.builder import SpmdBuilder
from hlo_opt.spmd.errors import SpmdError
from hlo_opt.spmd.extra_handlers import HANDLERS
from hlo_opt.spmd.reshard import reshard, reshard_cost
from hlo_opt.spmd.tiling import Tiling, from_sharding


class Partitioner:
    def __init__(self, b: SpmdBuilder):
        self.b, self.n = b, b.n
        self.values: dict[HloInstruction, tuple[HloInstruction, object]] = {}
        self._cache: dict[tuple[HloInstruction, Tiling], HloInstruction] = {}

    # -- layouts -------------------------------------------------------------------------------
    def wanted(self, instr: HloInstruction):
        """The tiling sharding-propagation chose for `instr` (replicated where it chose none)."""
        return self._wanted(instr.sharding, instr.shape, instr)

    def _wanted(self, sharding, shape, instr):
        if shape.is_tuple:
            leaves = list(sharding.elements) if sharding is not None and sharding.kind == "tuple" else None
            it = iter(leaves) if leaves is not None else None
            return self._wanted_tuple(shape, it, sharding, instr)
        if sharding is not None and sharding.kind == "manual":
            return manual.MANUAL
        t = from_sharding(sharding, shape.rank, self.n)
        if t is None:
            raise SpmdError(f"cannot partition sharding {sharding} (manual and subgroup shardings "
                            "are not supported yet)", instr)
        return t

    def _wanted_tuple(self, shape, leaves, whole, instr):
        out = []
        for element in shape.tuple_shapes:
            if element.is_tuple:
                out.append(self._wanted_tuple(element, leaves, whole, instr))
            else:
                out.append(self._wanted(next(leaves) if leaves is not None else None, element, instr))
        return tuple(out)

    def get(self, instr: HloInstruction, want) -> HloInstruction:
        """`instr`'s per-device value in layout `want` (a tuple of layouts for a tuple)."""
        new, have = self.values[instr]
        if manual.is_manual(have) or manual.is_manual(want):
            if have != want:
                raise SpmdError("a value crosses a shard_map region's edge other than through "
                                "GlobalToLocalShape / LocalToGlobalShape", instr)
            return new
        if isinstance(want, tuple):
            if have == want:
                return new
            parts = [self._get_element(instr, new, have, k, w) for k, w in enumerate(want)]
            return self.b.add("tuple", parts)
        key = (instr, want)
        if key not in self._cache:
            self._cache[key] = self._reshard(new, instr.shape, have, want)
        return self._cache[key]

    def _reshard(self, new, shape, have: Tiling, want: Tiling):
        if uneven.is_uneven(shape, have) or uneven.is_uneven(shape, want):
            return uneven.reshard_uneven(self, new, shape, have, want)
        return reshard(self.b, new, shape, have, want)

    def _get_element(self, instr, new, have, k, want):
        element = self.b.add("get-tuple-element", [new], new.shape.tuple_shapes[k], {"index": k})
        shape = instr.shape.tuple_shapes[k]
        if isinstance(want, tuple):
            raise SpmdError("nested tuples are not partitioned yet", instr)
        return self._reshard(element, shape, have[k], want)

    def replicated(self, shape):
        if shape.is_tuple:
            return tuple(self.replicated(s) for s in shape.tuple_shapes)
        return Tiling.replicated(shape.rank, self.n)

    def local(self, shape, t: Tiling, instr):
        """The per-device shape: the tile, padded where the tile count does not divide a dim
        (`hlo_opt.spmd.uneven`)."""
        return shape.with_dims(t.local_dims(t.padded_dims(shape.dims)))

    def _local_of(self, shape, want, instr):
        """The per-device shape of a value (a tuple: leaf by leaf)."""
        if isinstance(want, tuple):
            return Shape.tuple_of([self._local_of(s, w, instr) for s, w in zip(shape.tuple_shapes, want)])
        return self.local(shape, want, instr)

    def root(self, instr: HloInstruction) -> HloInstruction:
        return self.get(instr, self.wanted(instr))

    # -- handlers ------------------------------------------------------------------------------
    def handle(self, instr: HloInstruction) -> None:
        op = instr.opcode
        if manual.target(instr) is not None:
            self._region_edge(instr)
        elif any(manual.is_manual(self.values[o][1]) for o in instr.operands):
            self._inside_region(instr)
        elif op == "parameter":
            self._parameter(instr)
        elif rules.is_elementwise_like(instr):
            self._elementwise(instr)
        elif op in ("broadcast", "transpose", "reshape") and not instr.shape.is_tuple:
            self._shape_op(instr)
        elif op == "dot":
            self._dot(instr)
        elif op == "reduce" and not instr.shape.is_tuple:
            self._reduce(instr)
        elif op == "tuple":
            want = self.wanted(instr)
            parts = [self.get(o, w) for o, w in zip(instr.operands, want)]
            self.values[instr] = (self.b.add("tuple", parts, name=instr.name), want)
        elif op == "get-tuple-element":
            new, have = self.values[instr.operands[0]]
            k = instr.attrs["index"]
            gte = self.b.add(op, [new], new.shape.tuple_shapes[k], {"index": k}, name=instr.name)
            self.values[instr] = (gte, have[k])
        elif not self._extra(instr):
            self._whole(instr)  # no handler, or it does not apply (it said False)

    def _extra(self, instr: HloInstruction) -> bool:
        """A handler of `extra_handlers` partitioned `instr`. Those count on whole tiles: with an
        uneven tiling around, only a slice that keeps every tile in place is partitioned."""
        if self._uneven_around(instr):
            return instr.opcode == "slice" and uneven.slice_in_place(self, instr)
        return instr.opcode in HANDLERS and HANDLERS[instr.opcode](self, instr)

    def _uneven_around(self, instr: HloInstruction) -> bool:
        """An uneven tiling on the instruction or an operand (`hlo_opt.spmd.uneven`)."""
        pairs = [(instr.shape, self.wanted(instr))] + [(o.shape, self.values[o][1]) for o in instr.operands]
        return any(isinstance(t, Tiling) and uneven.is_uneven(shape, t) for shape, t in pairs)

    def _region_edge(self, instr: HloInstruction) -> None:
        """GlobalToLocalShape: each operand as its region tiling's tile; LocalToGlobalShape: the
        per-device result taken as the tile of its out tiling."""
        tilings = manual.region_tilings(instr, self.n)
        if manual.target(instr) == manual.TO_GLOBAL:
            (operand,), (tiling,) = instr.operands, tilings
            manual.check_local(instr, instr.shape, tiling, operand.shape)
            self.values[instr] = (self.values[operand][0], tiling)
            return
        locals_ = instr.shape.tuple_shapes if instr.shape.is_tuple else [instr.shape]
        parts = []
        for operand, tiling, local in zip(instr.operands, tilings, locals_, strict=True):
            manual.check_local(instr, operand.shape, tiling, local)
            parts.append(self.get(operand, tiling))
        value = self.b.add("tuple", parts, name=instr.name) if instr.shape.is_tuple else parts[0]
        self.values[instr] = (value, manual.like(instr.shape))

    def _inside_region(self, instr: HloInstruction) -> None:
        """An instruction on per-device values (the region's call, its get-tuple-elements): as is."""
        operands = [self.values[o][0] for o in instr.operands]
        new = instr.clone(new_operands=operands, name=self.b.comp.unique_name(instr.name))
        new.sharding = None
        self.b.comp.add_instruction(new)
        self.values[instr] = (new, manual.like(instr.shape))

    def _parameter(self, instr: HloInstruction) -> None:
        want = self.wanted(instr)
        new = self.b.comp.add_new_instruction("parameter", [], self._local_of(instr.shape, want, instr), {},
                                              name=instr.name, parameter_number=instr.parameter_number)
        new.sharding, new.metadata = instr.sharding, list(instr.metadata)
        self.values[instr] = (new, want)

    def _clone(self, instr: HloInstruction, operands, t: Tiling) -> None:
        shape = self.local(instr.shape, t, instr)
        new = instr.clone(new_operands=operands, shape=shape, name=self.b.comp.unique_name(instr.name))
        new.sharding = None
        self.b.comp.add_instruction(new)
        self.values[instr] = (new, t)

    def _elementwise(self, instr: HloInstruction) -> None:
        want = self.wanted(instr)
        operands = [self.get(o, want) for o in instr.operands]
        if instr.opcode == "custom-call":  # Sharding: the operand in its layout, nothing more
            self.values[instr] = (operands[0], want)
            return
        self._clone(instr, operands, want)

    def _shape_op(self, instr: HloInstruction) -> None:
        want = self.wanted(instr)
        need = rules.operand_from_output(instr, 0, want)
        # a broadcast's new dims are tiled by the output alone; the others must round-trip
        round_trips = need is not None and (instr.opcode == "broadcast"
                                            or rules.output_from_operand(instr, 0, need) == want)
        # a reshape of padded tiles (other than of size-1 dims) would mix the padding into the data
        mixes = instr.opcode == "reshape" and self._uneven_around(instr) and not _degenerate(instr)
        if not round_trips or mixes:
            self._whole(instr)
            return
        self._clone(instr, [self.get(instr.operands[0], need)], want)

    def _whole(self, instr: HloInstruction) -> None:
        """No handler yet: the op runs whole on every device, on replicated operands."""
        operands = [self.get(o, self.replicated(o.shape)) for o in instr.operands]
        new = instr.clone(new_operands=operands, name=self.b.comp.unique_name(instr.name))
        new.sharding = None
        self.b.comp.add_instruction(new)
        self.values[instr] = (new, self.replicated(instr.shape))

    def _reduce(self, instr: HloInstruction) -> None:
        if len(instr.operands) != 2:
            self._whole(instr)
            return
        source, init = instr.operands
        have = self.values[source][1]
        dims = tuple(instr.attrs["dimensions"])
        partial = [d for d in dims if have.tiles[d] > 1]
        result = rules.reduce_forward(have, dims)
        init_value = self.get(init, self.replicated(init.shape))
        data = uneven.mask(self, self.values[source][0], source.shape, have, partial, init_value)
        self._clone(instr, [data, init_value], result)
        if partial:
            new = self.values[instr][0]
            combined = self.b.all_reduce(new, have.groups(partial), instr.attrs["to_apply"])
            self.values[instr] = (combined, result)

    def _dot(self, instr: HloInstruction) -> None:
        axes = dot_dims.dot_axes(instr)
        lhs, rhs = instr.operands
        have_l, have_r = self.values[lhs][1], self.values[rhs][1]
        want = self.wanted(instr)
        space = self._dot_space(instr, axes, have_l, have_r, want)
        need_l = dot_dims.project(space, axes, "lhs")
        need_r = dot_dims.project(space, axes, "rhs")
        out = dot_dims.project(space, axes, "out")
        operands = [self.get(lhs, need_l), self.get(rhs, need_r)]
        if uneven.is_uneven(lhs.shape, need_l) or uneven.is_uneven(rhs.shape, need_r):
            # the padding of a split contracting dim must add nothing: zeros on both sides
            k_l = [ax.lhs for ax in axes if ax.kind == dot_dims.CONTRACTING]
            k_r = [ax.rhs for ax in axes if ax.kind == dot_dims.CONTRACTING]
            operands = [uneven.mask(self, operands[0], lhs.shape, need_l, k_l, 0),
                        uneven.mask(self, operands[1], rhs.shape, need_r, k_r, 0)]
        self._clone(instr, operands, out)
        contracting = _contracting(space, axes)
        if not contracting:
            return
        new = self.values[instr][0]
        add = self.b.reducer("add", instr.shape.element_type)
        scatter = dot_dims.reduce_scatter(space, contracting, out, want)
        if scatter is not None and not uneven.is_uneven(instr.shape, want):  # straight into the tiles
            dim, groups = scatter
            self.values[instr] = (self.b.reduce_scatter(new, groups, dim, add), want)
            return
        self.values[instr] = (self.b.all_reduce(new, space.groups(contracting), add), out)

    def _dot_space(self, instr, axes, have_l: Tiling, have_r: Tiling, want: Tiling) -> Tiling:
        """The iteration-space tiling that moves the fewest elements: both operands as they are
        (when they agree), one of them as it is, or the result's layout (XLA's dot handler tries
        the same strategies and more)."""
        lhs, rhs = instr.operands
        candidates = [dot_dims.joint(have_l, have_r, axes), dot_dims.lift(have_l, axes, "lhs"),
                      dot_dims.lift(have_r, axes, "rhs"), dot_dims.lift(want, axes, "out")]
        best, best_cost = None, None
        for space in candidates:
            if space is None:
                continue
            need_l = dot_dims.project(space, axes, "lhs")
            need_r = dot_dims.project(space, axes, "rhs")
            out = dot_dims.project(space, axes, "out")
            cost = reshard_cost(lhs.shape.dims, have_l, need_l) + reshard_cost(rhs.shape.dims, have_r, need_r)
            local_out = _elements(instr.shape.dims) / out.num_tiles
            contracting = _contracting(space, axes)
            reduced = _elements([space.tiles[k] for k in contracting])
            if contracting and dot_dims.reduce_scatter(space, contracting, out, want) is not None:
                cost += local_out * (reduced - 1) / reduced
            else:
                if reduced > 1:
                    cost += 2 * local_out * (reduced - 1) / reduced
                cost += reshard_cost(instr.shape.dims, out, want)
            # equal bytes: the more tiled space, each device computing less
            key = (cost, -space.num_tiles)
            if best_cost is None or key < best_cost:
                best, best_cost = space, key
        if best is None:  # nothing splits evenly: every device computes the whole dot
            best = dot_dims.lift(Tiling.replicated(lhs.shape.rank, self.n), axes, "lhs")
        return best


def _degenerate(reshape: HloInstruction) -> bool:
    """A reshape that only adds or drops dims of size 1 (padded tiles stay whole tiles)."""
    return [d for d in reshape.shape.dims if d != 1] == [d for d in reshape.operands[0].shape.dims if d != 1]


def _contracting(space: Tiling, axes) -> list[int]:
    return [k for k, ax in enumerate(axes) if ax.kind == dot_dims.CONTRACTING and space.tiles[k] > 1]


def _elements(dims) -> int:
    total = 1
    for d in dims:
        total *= int(d)
    return total
