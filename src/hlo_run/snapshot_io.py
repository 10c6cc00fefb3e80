"""`hlo-run --save-snapshot FILE`: the run written as an HloSnapshot (xla/service/hlo.proto), the
module with the arguments it ran on and its result, as XLA's --xla_dump_hlo_snapshots writes one;
`hlo-run FILE` (or `--input_format=snapshot`) runs it again on those arguments and compares with
that result. The module is taken before any platform compiles it (the input as the user gave it).
"""

from __future__ import annotations

from typing import Any

from hlo_common.errors import InputError


class SnapshotWriter:
    """Started once the arguments are known, finished with the result (or without one, when the
    run produced none, as --find-first-mismatch), then written whole or not at all."""

    def __init__(self, path: str, program, args: list[Any], platform: str):
        from hlo_common.proto.hlo_to_proto import module_to_proto
        from hlo_common.proto.messages import HloSnapshot

        if program.module is None:
            raise InputError(f"{program.name}: --save-snapshot needs an HLO module; a manifest holds "
                             "compiled kernels (save the snapshot from the module hlo-codegen compiled)")
        if program.devices != 1:
            raise InputError(f"{program.name}: --save-snapshot writes a single-device run; this one runs on "
                             f"{program.devices} devices (an HloSnapshot holds one device's arguments)")
        self.path = path
        self.snapshot = HloSnapshot(execution_platform=platform)
        self.snapshot.hlo.hlo_module.CopyFrom(module_to_proto(program.module))
        self.result_shape = program.result_shape
        for value, shape in zip(args, program.parameter_shapes):
            _literal(self.snapshot.arguments.add(), value, shape)

    def finish(self, result: Any = None) -> None:
        from hlo_common.cli_util import write_output

        if result is not None:
            _literal(self.snapshot.result, result, self.result_shape)
        write_output(self.path, self.snapshot.SerializeToString(deterministic=True))


def _literal(out, value, shape) -> None:
    """LiteralProto `out` of `value` (numpy array or tuple) of IR shape `shape`."""
    from hlo_common.proto.hlo_to_proto import write_shape
    from hlo_common.proto.messages import ShapeProto
    from hlo_common.proto.proto_values import literal_to_proto

    proto = ShapeProto()
    write_shape(proto, shape, "snapshot")
    literal_to_proto(value, proto, out)
