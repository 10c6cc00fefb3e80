"""The message classes of the HLO proto schema (`xla_hlo.proto`, XLA's field numbers), built from
the compiled descriptor in a private pool; the converters in this package use them.

    >>> m = HloModuleProto(name="m")
    >>> HloModuleProto.FromString(m.SerializeToString()).name
    'm'
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from hlo_common.proto.xla_hlo_descriptor import FILE_DESCRIPTOR

_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(descriptor_pb2.FileDescriptorProto.FromString(FILE_DESCRIPTOR))


def message_class(name: str):
    """The class of message `xla.<name>`."""
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"xla.{name}"))


def enum_names(name: str) -> dict[int, str]:
    """Number -> name of enum `xla.<name>` (nested enums as `Outer.Inner`)."""
    return {v.number: v.name for v in _POOL.FindEnumTypeByName(f"xla.{name}").values}


HloModuleProto = message_class("HloModuleProto")
HloProto = message_class("HloProto")
HloSnapshot = message_class("HloSnapshot")
LiteralProto = message_class("LiteralProto")
ShapeProto = message_class("ShapeProto")
OpSharding = message_class("OpSharding")
