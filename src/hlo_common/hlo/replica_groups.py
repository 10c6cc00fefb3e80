"""`replica_groups=` of the collectives, in every form XLA prints (xla/hlo/ir/replica_group.cc,
xla/hlo/ir/collective_device_list.cc, xla/hlo/ir/mesh_and_axis.cc):

- explicit lists `{{0,1},{2,3}}`, and `{}` (no groups: every device of the group mode);
- iota `[G,S]<=[d0,d1,...]` with an optional transpose `T(p0,p1,...)` (IotaReplicaGroupList);
- mesh axes `mesh['x'=4,'y'=2] {'x'}` (MeshAxesReplicaGroupList), where the mesh may name its
  device order, `mesh['x'=4,'y'=2], device_ids=([2,2,2]T(0,2,1)) {'x'}` (an iota tile assignment)
  or `device_ids=(0,2,1,3,...)` (a list), and a grouped axis may be a sub-axis `'x':(pre)size`.

The value keeps the spelling it was parsed from, so printing gives the same bytes back; `groups()`
resolves any form to lists of device ids, as XLA's `flattened_replica_groups()` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Axis = tuple[str, int]  # mesh axis: name, size
AxisRef = tuple[str, int | None, int | None]  # grouped axis: name, sub-axis (pre_size, size) or None
DeviceIds = tuple  # ("iota", reshape_dims, perm or None) or ("list", ids)


@dataclass(frozen=True)
class Mesh:
    axes: tuple[Axis, ...]
    grouped: tuple[AxisRef, ...]
    device_ids: DeviceIds | None = None

    def device_array(self) -> np.ndarray:
        """Device ids laid out on the mesh (row-major iota unless `device_ids` says otherwise)."""
        dims = [n for _, n in self.axes]
        if self.device_ids is None:
            return np.arange(math.prod(dims)).reshape(dims)
        if self.device_ids[0] == "list":
            return np.array(self.device_ids[1], dtype=np.int64).reshape(dims)
        _, reshape, perm = self.device_ids
        ids = np.arange(math.prod(reshape)).reshape(reshape)
        return ids.transpose(perm if perm is not None else range(len(reshape))).reshape(dims)

    def check(self) -> None:
        """ValueError unless the mesh and its grouped axes are well formed (as Mesh::ValidateMesh
        and ValidateSpanOfAxes require)."""
        names = [a for a, _ in self.axes]
        if not self.axes or len(set(names)) != len(names) or any(n <= 0 for _, n in self.axes):
            raise ValueError("mesh axes must be present, distinct and of positive size")
        total = math.prod(n for _, n in self.axes)
        if self.device_ids is not None:
            if self.device_ids[0] == "list":
                if sorted(self.device_ids[1]) != list(range(total)):
                    raise ValueError(f"mesh device_ids must be a permutation of 0..{total - 1}")
            else:
                _, reshape, perm = self.device_ids
                if math.prod(reshape) != total:
                    raise ValueError(f"mesh device_ids {list(reshape)} hold {math.prod(reshape)} devices, "
                                     f"the mesh {total}")
                if perm is not None and sorted(perm) != list(range(len(reshape))):
                    raise ValueError("mesh device_ids: bad transpose permutation")
        for name, pre, size in self.grouped:
            if name not in names:
                raise ValueError(f"grouped axis '{name}' is not a mesh axis")
            full = dict(self.axes)[name]
            if pre is not None and (size < 2 or size >= full or full % (pre * size)):
                raise ValueError(f"sub-axis '{name}':({pre}){size} does not split the axis of size {full}")
        self._reindexed()  # overlapping sub-axes fail here

    def _reindexed(self) -> tuple[list[int], list[int]]:
        """Mesh dims split by the sub-axes, and the split axes to group over, in `grouped` order."""
        sizes, grouped_axes = [], []
        for axis, (name, full) in enumerate(self.axes):
            refs = [(k, pre, size) for k, (n, pre, size) in enumerate(self.grouped) if n == name]
            base = len(sizes)
            if not refs:
                sizes.append(full)
                continue
            if len(refs) == 1 and refs[0][1] is None:
                sizes.append(full)
                grouped_axes.append((refs[0][0], base))
                continue
            if any(pre is None for _, pre, _ in refs):
                raise ValueError(f"axis '{name}' is grouped whole and as a sub-axis")
            done = 1
            for k, pre, size in sorted(refs, key=lambda r: r[1]):
                if pre % done:
                    raise ValueError(f"sub-axes of '{name}' overlap")
                if pre != done:
                    sizes.append(pre // done)
                    done = pre
                grouped_axes.append((k, len(sizes)))
                sizes.append(size)
                done *= size
            if done != full:
                sizes.append(full // done)
        return sizes, [a for _, a in sorted(grouped_axes)]

    def groups(self) -> list[list[int]]:
        sizes, grouped = self._reindexed()
        rest = [i for i in range(len(sizes)) if i not in grouped]
        size = math.prod(sizes[i] for i in grouped)
        return self.device_array().reshape(sizes).transpose(rest + grouped).reshape(-1, size).tolist()

    def __str__(self) -> str:
        text = "mesh[" + ",".join(f"'{a}'={n}" for a, n in self.axes) + "]"
        if self.device_ids is not None:
            if self.device_ids[0] == "list":
                ids = ",".join(map(str, self.device_ids[1]))
            else:
                _, reshape, perm = self.device_ids
                ids = "[" + ",".join(map(str, reshape)) + "]"
                ids += "" if perm is None else "T(" + ",".join(map(str, perm)) + ")"
            text += f", device_ids=({ids})"
        refs = [f"'{n}'" + ("" if pre is None else f":({pre}){size}") for n, pre, size in self.grouped]
        return text + " {" + ",".join(refs) + "}"


def check_cover(groups: list[list[int]], count: int, noun: str) -> None:
    """ValueError unless `groups` name each id below `count` at most once and, unless there are
    no groups at all, every one of them (XLA's verifier: CheckReplicaGroups)."""
    seen: set[int] = set()
    for g in groups:
        for d in g:
            if d < 0 or d >= count:
                raise ValueError(f"replica_groups name {noun} {d}, but the module has {count} {noun}(s)")
            if d in seen:
                raise ValueError(f"replica_groups name {noun} {d} twice")
            seen.add(d)
    if seen and len(seen) != count:
        missing = min(set(range(count)) - seen)
        raise ValueError(f"replica_groups leave out {noun} {missing} of the module's {count}")


# Collectives whose HLO instruction carries `use_global_device_ids` (XLA's HloAllReduceInstructionBase
# and HloAllGatherInstruction); the others take the cross-partition mode when they have a channel.
_GLOBAL_ID_OPS = frozenset({"all-reduce", "all-reduce-start", "all-gather", "all-gather-start",
                            "reduce-scatter"})


def group_mode(instr) -> str:
    """XLA's CollectiveOpGroupMode (xla/service/collective_ops_utils.cc GetCollectiveOpGroupMode):
    no channel_id: cross-replica; with one, flattened-id (use_global_device_ids=true) or
    cross-replica-and-partition for all-reduce / all-gather / reduce-scatter, else cross-partition."""
    if instr.attrs.get("channel_id") is None:
        return "cross-replica"
    if instr.opcode in _GLOBAL_ID_OPS:
        return "flattened-id" if instr.attrs.get("use_global_device_ids") else "cross-replica-and-partition"
    return "cross-partition"


def check_groups(instr, replicas: int, partitions: int) -> None:
    """ValueError unless `instr`'s replica groups fit `replicas` x `partitions` devices (the ids
    its group mode names: replicas, partitions or flattened device ids)."""
    raw = instr.attrs.get("replica_groups")
    if raw is None or not hasattr(raw, "groups"):
        return
    mode = group_mode(instr)
    count, noun = {"cross-replica": (replicas, "replica"), "cross-replica-and-partition": (replicas, "replica"),
                   "cross-partition": (partitions, "partition"),
                   "flattened-id": (replicas * partitions, "device")}[mode]
    check_cover(raw.groups(), count, noun)


def device_groups(instr, replicas: int, partitions: int) -> list[list[int]]:
    """The groups of global device ids (replica * partitions + partition) that meet at `instr`,
    each in group order, first devices ascending; every device is in one (XLA's
    GetParticipatingDevices for every device, xla/service/collective_ops_utils.cc)."""
    n = replicas * partitions
    mode = group_mode(instr)
    raw = instr.attrs.get("replica_groups")
    given = [list(g) for g in raw.groups() if g] if raw is not None and hasattr(raw, "groups") else []
    out: list[list[int]] = []
    placed: set[int] = set()
    for d in range(n):
        if d in placed:
            continue
        r, p = divmod(d, partitions)
        if mode == "flattened-id":
            group = _containing(given or [list(range(n))], d)
        elif mode == "cross-partition":
            group = [r * partitions + q for q in _containing(given or [list(range(partitions))], p)]
        else:
            mine = _containing(given or [list(range(replicas))], r)
            parts = [p] if mode == "cross-replica" else range(partitions)
            group = [q * partitions + x for q in mine for x in parts]
        placed.update(group)
        out.append(group)
    return out


def _containing(groups: list[list[int]], me: int) -> list[int]:
    return next((g for g in groups if me in g), [me])


def device_pairs(instr, replicas: int, partitions: int) -> list[tuple[int, int]]:
    """collective-permute's (source, target) pairs as global device ids: replica ids within each
    partition without `channel_id`, partition ids within each replica with one."""
    raw = instr.attrs.get("source_target_pairs")
    pairs = [tuple(p) for p in raw.pairs] if hasattr(raw, "pairs") else []
    if instr.attrs.get("channel_id") is None:
        return [(s * partitions + p, t * partitions + p) for p in range(partitions) for s, t in pairs]
    return [(r * partitions + s, r * partitions + t) for r in range(replicas) for s, t in pairs]


@dataclass(frozen=True)
class ReplicaGroups:
    """One `replica_groups=` value: exactly one of `explicit`, `iota` or `mesh` is set."""

    explicit: tuple[tuple[int, ...], ...] | None = None
    iota: tuple[tuple[int, int], tuple[int, ...], tuple[int, ...]] | None = None  # (G,S), reshape, perm
    mesh: Mesh | None = None

    @staticmethod
    def parse_iota(text: str) -> ReplicaGroups:
        """`[G,S]<=[d0,d1,...]` with an optional `T(perm)`; ValueError when malformed."""
        head, sep, rest = text.replace(" ", "").partition("<=")
        shape = int_list(head, "[", "]")
        if not sep or len(shape) != 2:
            raise ValueError(f"iota replica groups '{text}' need [groups,size]<=[dims]")
        dims_text, tsep, perm_text = rest.partition("T")
        dims = int_list(dims_text, "[", "]")
        perm = int_list(perm_text, "(", ")") if tsep else tuple(range(len(dims)))
        if sorted(perm) != list(range(len(dims))) or (len(dims) > 1 and not tsep):
            raise ValueError(f"iota replica groups '{text}': bad transpose permutation")
        if shape[0] * shape[1] != math.prod(dims):
            raise ValueError(f"iota replica groups '{text}': {shape[0]}x{shape[1]} != {math.prod(dims)}")
        return ReplicaGroups(iota=((shape[0], shape[1]), dims, perm))

    def groups(self) -> list[list[int]]:
        """The device (replica/partition) ids of every group ([] for `{}`)."""
        if self.explicit is not None:
            return [list(g) for g in self.explicit]
        if self.iota is not None:
            (g, s), dims, perm = self.iota
            return np.arange(math.prod(dims)).reshape(dims).transpose(perm).reshape(g, s).tolist()
        return self.mesh.groups()

    def __str__(self) -> str:
        if self.explicit is not None:
            return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in self.explicit) + "}"
        if self.iota is not None:
            (g, s), dims, perm = self.iota
            text = f"[{g},{s}]<=[{','.join(map(str, dims))}]"
            return text + (f"T({','.join(map(str, perm))})" if len(dims) > 1 else "")
        return str(self.mesh)


def int_list(text: str, open_: str, close: str) -> tuple[int, ...]:
    if not (text.startswith(open_) and text.endswith(close)):
        raise ValueError(f"expected {open_}...{close}, found '{text}'")
    body = text[1:-1]
    return tuple(int(v) for v in body.split(",")) if body else ()
