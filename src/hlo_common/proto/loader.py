"""Reading HLO from XLA's protocol-buffer files: HloModuleProto / HloProto (`.pb`, binary, as
XLA's --xla_dump_hlo_as_proto writes them; `.pbtxt`, text format) and HloSnapshot (the module with
the arguments it ran on and its result, --xla_dump_hlo_snapshots), as xla/tools/hlo_module_loader.cc
and run_hlo_module read them. `hlo_common.source.read_input` picks the format and calls this.
Every failure is a one-line ProtoError naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf import message as pb_message
from google.protobuf import text_format

from hlo_common.proto.messages import HloModuleProto, HloProto, HloSnapshot
from hlo_common.proto.proto_values import ProtoError, literal_from_proto

PROTO_FORMATS = ("pb", "pbtxt", "snapshot", "stablehlo", "mhlo")


@dataclass
class ProtoInput:
    """What a proto file holds: the module and, from a snapshot, its arguments and result."""

    module: Any  # HloModule
    format: str
    arguments: list | None = None  # numpy arrays / tuples, one per entry parameter
    result: Any = None  # the recorded result, or None when the snapshot has none


def read_proto_input(data: bytes, name: str, fmt: str | None) -> ProtoInput:
    """Parse `data` as `fmt` (pb, pbtxt, snapshot, stablehlo, mhlo; None: whichever binary message
    it holds). StableHLO/MHLO go through XLA's own converter (hlo_common.proto.mlir_input)."""
    from hlo_common.proto.proto_to_hlo import module_from_proto

    if fmt in ("stablehlo", "mhlo"):
        from hlo_common.proto.mlir_input import hlo_proto_from_mlir

        proto = HloModuleProto.FromString(hlo_proto_from_mlir(data, name))
        return ProtoInput(module_from_proto(proto, name), fmt)
    if fmt == "pbtxt":
        kind, msg = _text_message(data, name)
    else:
        kind, msg = _binary_message(data, name, fmt)
    if kind == "snapshot":
        module = module_from_proto(msg.hlo.hlo_module, name)
        args = [literal_from_proto(a, f"{name}: arguments[{k}]") for k, a in enumerate(msg.arguments)]
        result = literal_from_proto(msg.result, f"{name}: result") if msg.HasField("result") else None
        return ProtoInput(module, "snapshot", args, result)
    return ProtoInput(module_from_proto(msg, name), fmt or "pb")


def _binary_message(data: bytes, name: str, fmt: str | None):
    if fmt in (None, "snapshot"):
        snap = _parse(HloSnapshot, data)
        if snap is not None and snap.hlo.hlo_module.computations:
            return "snapshot", snap
        if fmt == "snapshot":
            raise ProtoError(f"{name}: not a binary HloSnapshot (it holds no module at hlo.hlo_module)")
    hlo = _parse(HloProto, data)
    if hlo is not None and hlo.hlo_module.computations:
        return "pb", hlo.hlo_module
    module = _parse(HloModuleProto, data)
    if module is None or not module.computations:
        why = "it does not parse" if module is None else "it holds no computations"
        raise ProtoError(f"{name}: not a binary HloModuleProto, HloProto or HloSnapshot ({why}; "
                         f"truncated, or another format: see --input_format)")
    return "pb", module


def _parse(cls, data: bytes):
    try:
        return cls.FromString(data)
    except (pb_message.DecodeError, RuntimeError, ValueError):
        return None


def _text_message(data: bytes, name: str):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtoError(f"{name}: not a text proto (not UTF-8; a binary proto is "
                         "--input_format=pb)") from None
    first_error = None
    for kind, cls in (("pb", HloModuleProto), ("pb", HloProto), ("snapshot", HloSnapshot)):
        msg = cls()
        try:
            # XLA's dumps carry fields this schema leaves out (buffer assignment, statistics):
            # skipped, as the binary reader keeps them as unknown fields.
            text_format.Parse(text, msg, allow_unknown_field=True)
        except text_format.ParseError as exc:
            first_error = first_error or exc
            continue
        module = msg if cls is HloModuleProto else (msg.hlo_module if cls is HloProto else msg.hlo.hlo_module)
        if module.computations:
            return kind, (module if kind == "pb" else msg)
    if first_error is not None:
        line, col = first_error.GetLine(), first_error.GetColumn()
        where = f"{name}:{line}:{col}" if line else name
        raise ProtoError(f"{where}: not a text HloModuleProto: {str(first_error).split(' : ')[-1]}")
    raise ProtoError(f"{name}: a text proto without computations (not an HloModuleProto, HloProto "
                     "or HloSnapshot)")
