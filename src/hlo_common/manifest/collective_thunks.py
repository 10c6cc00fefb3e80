"""Collective thunks of a manifest compiled for several devices (XLA's kAllReduce, kAllGather,
kReduceScatter, kAllToAll, kCollectivePermute, kCollectiveBroadcast and their Start / Done forms).

Part of the manifest schema (`hlo_common.manifest`, registered into `thunks.THUNK_KINDS`).
hlo-codegen compiles a module for N = replica_count x num_partitions devices once, as XLA compiles
one SPMD program: every device runs the same thunks, and a collective thunk carries what each
device needs to take part, with the replica groups already resolved to global device ids
(device d is replica d // num_partitions, partition d % num_partitions):

    collective   all-reduce | all-gather | reduce-scatter | all-to-all | collective-permute |
                 collective-broadcast
    groups       every group of devices that meet, each in group order (the rank order of its
                 communicator); together they hold every device once. collective-permute: `pairs`
                 (source device, target device) instead
    reduction    all-reduce / reduce-scatter: sum | prod | min | max | and | or, or `region` (the
                 `to_apply` computation named by `region`, evaluated on the host in group order)
    dimension    all-gather / reduce-scatter / all-to-all: the logical dimension they concatenate
                 or split (None: the tuple form of all-to-all)
    buffers      one per operand: source and destination slices, element type and both shapes
                 (with layouts)
    is_async     a -start: the matching CollectiveDoneThunk (`start` names it) waits for it

`DeviceIdThunk` (kReplicaId, kPartitionId) writes the running device's replica or partition id.

    >>> t = CollectiveDoneThunk("all-reduce-done", "all-reduce", "all-reduce-start")
    >>> t.kind, thunk_from_json(t.to_json(), "t") == t
    ('kAllReduceDone', True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hlo_common.manifest.json_reader import JsonReader, ManifestError
from hlo_common.manifest.thunks import BufferSlice, thunk_from_json

# collective -> XLA's thunk kind (the Start / Done forms add a suffix)
KIND_OF = {"all-reduce": "kAllReduce", "all-gather": "kAllGather", "reduce-scatter": "kReduceScatter",
           "all-to-all": "kAllToAll", "collective-permute": "kCollectivePermute",
           "collective-broadcast": "kCollectiveBroadcast"}
COLLECTIVE_OF = {kind: name for name, kind in KIND_OF.items()}
REDUCTIONS = ("sum", "prod", "min", "max", "and", "or", "region")
REDUCING = ("all-reduce", "reduce-scatter")
WITH_DIMENSION = ("all-gather", "reduce-scatter", "all-to-all")

__all__ = ["CollectiveBuffer", "CollectiveThunk", "CollectiveDoneThunk", "COLLECTIVE_THUNK_KINDS",
           "DeviceIdThunk",
           "KIND_OF", "REDUCTIONS", "thunk_from_json"]


@dataclass(frozen=True)
class CollectiveBuffer:
    """One operand of a collective and the result leaf it becomes."""

    source: BufferSlice
    destination: BufferSlice
    element_type: str  # HLO's name: f32, bf16, s32, pred, ...
    source_shape: str
    destination_shape: str

    def to_json(self) -> dict:
        return {"source": self.source.to_json(), "destination": self.destination.to_json(),
                "element_type": self.element_type, "source_shape": self.source_shape,
                "destination_shape": self.destination_shape}

    @staticmethod
    def from_json(v: Any, path: str) -> CollectiveBuffer:
        r = JsonReader(v, path)
        return CollectiveBuffer(BufferSlice.from_json(r.data.get("source"), f"{path}.source"),
                                BufferSlice.from_json(r.data.get("destination"), f"{path}.destination"),
                                r.str("element_type"), r.str("source_shape"), r.str("destination_shape"))

    def __str__(self) -> str:
        return f"{self.element_type}: src={self.source}, dst={self.destination}"


def _device_lists(v: Any, path: str, width: int | None) -> tuple[tuple[int, ...], ...]:
    if not isinstance(v, list) or not all(
            isinstance(g, list) and (width is None or len(g) == width)
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in g) for g in v):
        what = "pairs of device ids" if width == 2 else "lists of device ids"
        raise ManifestError(f"{path}: expected {what}")
    return tuple(tuple(g) for g in v)


@dataclass(frozen=True)
class CollectiveThunk:
    profile_annotation: str
    collective: str  # KIND_OF's keys
    groups: tuple[tuple[int, ...], ...]
    buffers: tuple[CollectiveBuffer, ...]
    reduction: str | None = None
    region: str | None = None
    dimension: int | None = None
    pairs: tuple[tuple[int, int], ...] = ()
    is_async: bool = False

    @property
    def kind(self) -> str:
        return KIND_OF[self.collective] + ("Start" if self.is_async else "")

    def to_json(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind, "profile_annotation": self.profile_annotation,
                               "groups": [list(g) for g in self.groups],
                               "buffers": [b.to_json() for b in self.buffers]}
        for key in ("reduction", "region", "dimension"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.collective == "collective-permute":
            out["pairs"] = [list(p) for p in self.pairs]
        return out

    @staticmethod
    def from_json(r: JsonReader) -> CollectiveThunk:
        kind = r.str("kind")
        base = kind[:-len("Start")] if kind.endswith("Start") else kind
        collective = COLLECTIVE_OF[base]
        buffers = tuple(CollectiveBuffer.from_json(b, f"{r.path}.buffers[{i}]")
                        for i, b in enumerate(r.list("buffers")))
        pairs = _device_lists(r.data.get("pairs", []), f"{r.path}.pairs", 2)
        t = CollectiveThunk(r.str("profile_annotation"), collective,
                            _device_lists(r.list("groups"), f"{r.path}.groups", None), buffers,
                            r.str("reduction", optional=True), r.str("region", optional=True),
                            r.int("dimension", optional=True), pairs, kind != base)
        t.check(r.path)
        return t

    def check(self, path: str) -> None:
        """ManifestError unless the fields fit the collective."""
        if (self.reduction is not None) != (self.collective in REDUCING):
            verb = "needs a" if self.reduction is None else "takes no"
            raise ManifestError(f"{path}: {self.collective} {verb} reduction")
        if self.reduction is not None and self.reduction not in REDUCTIONS:
            raise ManifestError(f"{path}.reduction: unknown reduction {self.reduction!r}")
        if (self.reduction == "region") != (self.region is not None):
            raise ManifestError(f"{path}: a region reduction names its computation in 'region'")
        if self.dimension is not None and self.collective not in WITH_DIMENSION:
            raise ManifestError(f"{path}: {self.collective} takes no dimension")
        if self.collective == "collective-permute":
            if self.groups:
                raise ManifestError(f"{path}: collective-permute has pairs, not groups")
            return
        seen = [d for g in self.groups for d in g]
        if not seen or len(set(seen)) != len(seen) or sorted(seen) != list(range(len(seen))):
            raise ManifestError(f"{path}.groups: the groups must hold every device 0..N-1 once")

    def devices(self) -> int:
        """How many devices the thunk was compiled for (permute: the largest id it names + 1)."""
        ids = [d for g in self.groups for d in g] + [d for p in self.pairs for d in p]
        return max(ids, default=0) + 1

    def group_of(self, device: int) -> tuple[int, ...]:
        for g in self.groups:
            if device in g:
                return g
        return (device,)

    def describe(self) -> str:
        parts = [f"profile_annotation={self.profile_annotation}"]
        if self.collective == "collective-permute":
            parts.append("source_target_pairs={" + ",".join(f"{{{s},{t}}}" for s, t in self.pairs) + "}")
        else:
            parts.append("replica_groups={" + ",".join("{" + ",".join(map(str, g)) + "}"
                                                       for g in self.groups) + "}")
        if self.reduction is not None:
            parts.append(f"reduction={self.reduction}" + (f"(%{self.region})" if self.region else ""))
        if self.dimension is not None:
            parts.append(f"dimension={self.dimension}")
        parts.append("buffers=[" + "; ".join(str(b) for b in self.buffers) + "]")
        if self.is_async:
            parts.append("is_async=true")
        return ", ".join(parts)

    def slices(self) -> list[BufferSlice]:
        return [s for b in self.buffers for s in (b.source, b.destination)]


@dataclass(frozen=True)
class CollectiveDoneThunk:
    """Waits for the asynchronous collective its `start` thunk (by profile annotation) began."""

    profile_annotation: str
    collective: str
    start: str

    @property
    def kind(self) -> str:
        return KIND_OF[self.collective] + "Done"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation, "start": self.start}

    @staticmethod
    def from_json(r: JsonReader) -> CollectiveDoneThunk:
        kind = r.str("kind")
        return CollectiveDoneThunk(r.str("profile_annotation"), COLLECTIVE_OF[kind[:-len("Done")]],
                                   r.str("start"))

    def describe(self) -> str:
        return f"profile_annotation={self.profile_annotation}, start={self.start}"

    def slices(self) -> list[BufferSlice]:
        return []


@dataclass(frozen=True)
class DeviceIdThunk:
    """replica-id / partition-id on several devices (XLA's ReplicaIdThunk, PartitionIdThunk): the
    running device's replica or partition number as a u32 into `destination`."""

    profile_annotation: str
    which: str  # "replica" | "partition"
    destination: BufferSlice

    @property
    def kind(self) -> str:
        return "kReplicaId" if self.which == "replica" else "kPartitionId"

    def to_json(self) -> dict:
        return {"kind": self.kind, "profile_annotation": self.profile_annotation,
                "destination": self.destination.to_json()}

    @staticmethod
    def from_json(r: JsonReader) -> DeviceIdThunk:
        which = "replica" if r.str("kind") == "kReplicaId" else "partition"
        t = DeviceIdThunk(r.str("profile_annotation"), which,
                          BufferSlice.from_json(r.data.get("destination"), f"{r.path}.destination"))
        if t.destination.size != 4:
            raise ManifestError(f"{r.path}: a {which} id is a u32; the slice has {t.destination.size} bytes")
        return t

    def describe(self) -> str:
        return f"profile_annotation={self.profile_annotation}, dst={self.destination}"

    def slices(self) -> list[BufferSlice]:
        return [self.destination]


COLLECTIVE_THUNK_KINDS = {
    "kReplicaId": DeviceIdThunk.from_json, "kPartitionId": DeviceIdThunk.from_json,
    **{kind + suffix: CollectiveThunk.from_json for kind in COLLECTIVE_OF for suffix in ("", "Start")},
    **{kind + "Done": CollectiveDoneThunk.from_json for kind in COLLECTIVE_OF},
}
