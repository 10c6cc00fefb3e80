"""Collective thunks as MPI calls: the host platform on several devices, one MPI rank per device.

Where it sits: `hlo_run.mpi_runtime.MpiHostDevice.collective` hands each CollectiveThunk here with
uint8 views of its buffers (no copy). Device d is rank d of the world communicator; every replica
group gets its own communicator once, when the manifest is loaded (`Comm.Split` with the group's
order as rank order, so all-gather concatenates and a non-commutative reduction applies in group
order, as XLA's semantics ask). The calls (XLA:CPU's MPI collectives do the same,
xla/backends/cpu/collectives/mpi_communicator.cc):

    all-reduce            Allreduce (MPI.IN_PLACE when source and destination are one slice)
    all-gather            Allgather          reduce-scatter    Reduce_scatter_block
    all-to-all            Alltoall           collective-broadcast  Ibcast from the group's first
    collective-permute    Sendrecv with the pair's target and source (MPI.PROC_NULL for none;
                          a target nobody sends to gets zeros)

Buffers go to MPI as they are, when the concatenated or split dimension is the most major one in
both layouts (what XLA's layout assignment gives collectives); otherwise the pieces are packed
into a temporary in logical order and unpacked after. Reductions use MPI's own operators for the
types MPI knows (sum, prod, and, or on integers and floats; min and max on integers); floating
min / max (NaN propagates, as in XLA) and 16-bit floats run as a user-defined operator over
numpy. A region of any other kind is evaluated on the host: the members' operands are gathered
and folded in group order with the interpreter's `map_computation`, as the interpreter does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlo_common.errors import HloError
from hlo_common.hlo.shape import Shape
from hlo_common.manifest.collective_thunks import CollectiveThunk
from hlo_common.manifest.layout_bytes import bytes_to_array, write_array_into
from hlo_common.manifest.thunks import walk

_NUMPY_OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
              "and": np.logical_and, "or": np.logical_or}
_BOOL_OPS = {"sum": "LOR", "prod": "LAND", "min": "LAND", "max": "LOR", "and": "LAND", "or": "LOR"}
_INT_OPS = {"sum": "SUM", "prod": "PROD", "min": "MIN", "max": "MAX", "and": "BAND", "or": "BOR"}
_FLOAT_OPS = {"sum": "SUM", "prod": "PROD"}


def _mpi():
    from mpi4py import MPI

    return MPI


def _canon(shape: Shape, d: int) -> list[int]:
    """The dimensions major to minor in memory, without those of size 1 other than `d`."""
    return [x for x in reversed(shape.minor_to_major) if shape.dims[x] != 1 or x == d]


def direct(src: Shape, dst: Shape, d: int) -> bool:
    """True when pieces along `d` are contiguous byte ranges in both shapes, in the same order."""
    a, b = _canon(src, d), _canon(dst, d)
    return a == b and a[0] == d


class MpiCollectives:
    """Runs one rank's collective thunks; `world` is the world communicator (rank = device)."""

    def __init__(self, world, manifest, module_text: str | None = None):
        self.MPI = _mpi()
        self.world = world.Dup()  # its own context: never matched with the runtime's own gathers
        self.me = world.Get_rank()
        self.manifest = manifest
        self.comms: dict[tuple, Any] = {}
        self._by_id: dict[int, Any] = {}
        self._ops: dict[tuple, Any] = {}
        self._user_ops: list = []
        self._types: dict[int, Any] = {}
        self._module = None
        self._module_text = module_text if module_text is not None else manifest.hlo
        for thunk in walk(manifest.thunks):  # every rank walks the same thunks in the same order
            if isinstance(thunk, CollectiveThunk) and thunk.groups:
                self.communicator(thunk.groups)

    def communicator(self, groups: tuple[tuple[int, ...], ...]):
        comm = self._by_id.get(id(groups))  # a thunk's groups: hashing nested tuples costs each call
        if comm is not None:
            return comm
        comm = self.comms.get(groups)
        if comm is None:
            if groups == (tuple(range(self.world.Get_size())),):
                comm = self.world
            else:
                color = next(i for i, g in enumerate(groups) if self.me in g)
                comm = self.world.Split(color, groups[color].index(self.me))
            self.comms[groups] = comm
        self._by_id[id(groups)] = comm  # `groups` lives as long as the manifest's thunk
        return comm

    def close(self) -> None:
        for comm in self.comms.values():
            if comm is not self.world:
                comm.Free()
        self.comms, self._by_id = {}, {}
        self.world.Free()
        for op in self._user_ops:
            op.Free()
        self._ops, self._user_ops = {}, []

    # -- running ------------------------------------------------------------------------------------
    def run(self, thunk: CollectiveThunk, views: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """`views`: (source, destination) uint8 arrays over each buffer's bytes."""
        run = getattr(self, "_" + thunk.collective.replace("-", "_"))
        if thunk.collective == "all-to-all" and thunk.dimension is None:
            self._tuple_all_to_all(thunk, views)
            return
        for buffer, (src, dst) in zip(thunk.buffers, views):
            run(thunk, buffer, src, dst)

    def _shapes(self, buffer) -> tuple[Shape, Shape]:
        return self.manifest.shape(buffer.source_shape), self.manifest.shape(buffer.destination_shape)

    def _folded(self, thunk, comm, src, shape: Shape) -> np.ndarray:
        """A region reduction: every member's operand gathered, folded in group order (regions need
        not be associative, so MPI's reduction trees could change the result)."""
        n = shape.byte_size()
        gathered = np.empty(n * comm.Get_size(), np.uint8)
        comm.Allgather([src, n, self.MPI.BYTE], [gathered, n, self.MPI.BYTE])
        comp, evaluator = self._region(thunk.region)
        acc = bytes_to_array(gathered[:n], shape)
        for i in range(1, comm.Get_size()):
            x = bytes_to_array(gathered[i * n:(i + 1) * n], shape)
            acc = np.asarray(evaluator.map_computation(comp, [acc, x])[0], dtype=acc.dtype)
        return acc

    def _all_reduce(self, thunk, buffer, src, dst) -> None:
        shape = self._shapes(buffer)[0]
        if thunk.reduction == "region":
            write_array_into(dst, self._folded(thunk, self.communicator(thunk.groups), src, shape), shape)
            return
        mtype, op = self._reduction(thunk, shape)
        count = shape.num_elements
        comm = self.communicator(thunk.groups)
        if count == 0:
            return
        if src.ctypes.data == dst.ctypes.data:
            comm.Allreduce(self.MPI.IN_PLACE, [dst, count, mtype], op)
        else:
            comm.Allreduce([src, count, mtype], [dst, count, mtype], op)

    def _reduce_scatter(self, thunk, buffer, src, dst) -> None:
        src_shape, dst_shape = self._shapes(buffer)
        comm = self.communicator(thunk.groups)
        if thunk.reduction == "region":
            total = self._folded(thunk, comm, src, src_shape)
            part = np.split(total, comm.Get_size(), axis=thunk.dimension)[comm.Get_rank()]
            write_array_into(dst, part, dst_shape)
            return
        mtype, op = self._reduction(thunk, src_shape)
        count = dst_shape.num_elements
        if count == 0:
            return
        if not direct(src_shape, dst_shape, thunk.dimension):
            parts = np.split(bytes_to_array(src, src_shape), comm.Get_size(), axis=thunk.dimension)
            src = np.concatenate([np.ascontiguousarray(p).reshape(-1) for p in parts]).view(np.uint8)
            out = np.empty(dst.size, np.uint8)
            comm.Reduce_scatter_block([src, mtype], [out, count, mtype], op)
            part = out.view(dst_shape.element_type.np_dtype).reshape(dst_shape.dims)
            write_array_into(dst, part, dst_shape)
            return
        comm.Reduce_scatter_block([src[:count * comm.Get_size() * src_shape.element_type.np_dtype.itemsize],
                                   mtype], [dst, count, mtype], op)

    def _all_gather(self, thunk, buffer, src, dst) -> None:
        src_shape, dst_shape = self._shapes(buffer)
        comm = self.communicator(thunk.groups)
        n = src_shape.byte_size()
        byte = self.MPI.BYTE
        if direct(src_shape, dst_shape, thunk.dimension):
            comm.Allgather([src, n, byte], [dst, n, byte])
            return
        gathered = np.empty(n * comm.Get_size(), np.uint8)
        comm.Allgather([src, n, byte], [gathered, n, byte])
        parts = [bytes_to_array(gathered[i * n:(i + 1) * n], src_shape) for i in range(comm.Get_size())]
        write_array_into(dst, np.concatenate(parts, axis=thunk.dimension), dst_shape)

    def _all_to_all(self, thunk, buffer, src, dst) -> None:
        src_shape, dst_shape = self._shapes(buffer)
        comm = self.communicator(thunk.groups)
        size = comm.Get_size()
        n = src_shape.byte_size() // size
        byte = self.MPI.BYTE
        if direct(src_shape, dst_shape, thunk.dimension):
            comm.Alltoall([src, n, byte], [dst, n, byte])
            return
        d = thunk.dimension
        parts = np.split(bytes_to_array(src, src_shape), size, axis=d)
        packed = np.concatenate([np.ascontiguousarray(p).reshape(-1) for p in parts]).view(np.uint8)
        got = np.empty_like(packed)
        comm.Alltoall([packed, n, byte], [got, n, byte])
        dtype, chunk = dst_shape.element_type.np_dtype, parts[0].shape
        pieces = [got[i * n:(i + 1) * n].view(dtype).reshape(chunk) for i in range(size)]
        write_array_into(dst, np.concatenate(pieces, axis=d), dst_shape)

    def _tuple_all_to_all(self, thunk, views) -> None:
        """Operand j goes to member j; result leaf k is what member k sent."""
        comm = self.communicator(thunk.groups)
        sizes = {b.source.size for b in thunk.buffers}
        if len(views) != comm.Get_size() or len(sizes) != 1:
            raise HloError(f"%{thunk.profile_annotation}: a tuple all-to-all needs one equal-sized operand "
                           f"per member of its group of {comm.Get_size()}")
        n = sizes.pop()
        packed = np.concatenate([src[:n] for src, _ in views]) if n else np.zeros(0, np.uint8)
        got = np.empty_like(packed)
        comm.Alltoall([packed, n, self.MPI.BYTE], [got, n, self.MPI.BYTE])
        for k, (_, dst) in enumerate(views):
            dst[:n] = got[k * n:(k + 1) * n]

    def _collective_broadcast(self, thunk, buffer, src, dst) -> None:
        """The root sends from its operand and copies it into its result while the transfer runs
        (a nonblocking Ibcast on every member: blocking and nonblocking collectives do not match),
        so the copy the root's result needs overlaps the broadcast instead of preceding it (MPICH
        progresses the transfer only inside MPI calls, so on few cores part of it still shows)."""
        comm = self.communicator(thunk.groups)
        n = buffer.source.size
        copy = comm.Get_rank() == 0 and src.ctypes.data != dst.ctypes.data
        request = comm.Ibcast([src if copy else dst, n, self.MPI.BYTE], root=0)
        if copy:
            dst[:n] = src[:n]
        request.Wait()

    def _collective_permute(self, thunk, buffer, src, dst) -> None:
        MPI = self.MPI
        target = next((t for s, t in thunk.pairs if s == self.me), None)
        source = next((s for s, t in thunk.pairs if t == self.me), None)
        n = buffer.source.size
        if target == self.me or source == self.me:  # to itself (only a pair {d,d} names d twice)
            if src.ctypes.data != dst.ctypes.data:
                dst[:n] = src[:n]
            return
        dest = MPI.PROC_NULL if target is None else target
        origin = MPI.PROC_NULL if source is None else source
        if src.ctypes.data == dst.ctypes.data:
            self.world.Sendrecv_replace([dst, n, MPI.BYTE], dest, 0, origin, 0)
        else:
            self.world.Sendrecv([src, n, MPI.BYTE], dest, 0, [dst, n, MPI.BYTE], origin, 0)
        if source is None:
            dst[:n] = 0

    # -- reductions ---------------------------------------------------------------------------------
    def _reduction(self, thunk: CollectiveThunk, shape: Shape) -> tuple[Any, Any]:
        """(MPI datatype, MPI op) for the thunk's reduction over `shape`'s element type."""
        MPI = self.MPI
        dtype = shape.element_type.np_dtype
        kind = thunk.reduction
        found = self._ops.get((kind, dtype))
        if found is not None:
            return found
        builtin = _builtin_type(MPI, dtype)
        table = _BOOL_OPS if dtype == np.bool_ else _INT_OPS if dtype.kind in "iu" else _FLOAT_OPS
        if builtin is not None and kind in table:
            found = builtin, getattr(MPI, table[kind])
        else:
            op = MPI.Op.Create(_numpy_op(kind, dtype), commute=True)
            self._user_ops.append(op)
            found = (builtin if builtin is not None else self._opaque(dtype.itemsize)), op
        self._ops[(kind, dtype)] = found
        return found

    def _opaque(self, itemsize: int):
        t = self._types.get(itemsize)
        if t is None:
            t = self._types[itemsize] = self.MPI.BYTE.Create_contiguous(itemsize).Commit()
        return t

    def _region(self, name: str):
        from hlo_common.hlo.parser import parse_module
        from hlo_common.interpreter.evaluator import Evaluator

        if self._module is None:
            self._module = parse_module(self._module_text, f"{self.manifest.module_name} (manifest)")
        comp = next((c for c in self._module.computations if c.name == name), None)
        if comp is None:
            raise HloError(f"reduction region %{name} is not in the manifest's module")
        return comp, Evaluator(replica_id=0, partition_id=0)


def _builtin_type(MPI, dtype) -> Any:
    """MPI's own datatype for a numpy dtype, or None (16-bit floats, fp8, ...)."""
    table = {"float32": "FLOAT", "float64": "DOUBLE", "int8": "INT8_T", "int16": "INT16_T",
             "int32": "INT32_T", "int64": "INT64_T", "uint8": "UINT8_T", "uint16": "UINT16_T",
             "uint32": "UINT32_T", "uint64": "UINT64_T", "bool": "C_BOOL",
             "complex64": "C_FLOAT_COMPLEX", "complex128": "C_DOUBLE_COMPLEX"}
    name = table.get(np.dtype(dtype).name)
    return getattr(MPI, name) if name is not None else None


def _numpy_op(kind: str, dtype):
    """A user-defined MPI operator: inout = in (op) inout, elementwise in numpy."""
    ufunc = _NUMPY_OPS[kind]

    def fn(inbuf, inoutbuf, datatype) -> None:
        a = np.frombuffer(inbuf, dtype=dtype)
        b = np.frombuffer(inoutbuf, dtype=dtype)
        b[...] = ufunc(a, b)

    return fn
