"""StableHLO and MHLO input (MLIR text, or MLIR bytecode as `jax.export` and
`.compiler_ir("stablehlo")` serialize it), converted to HLO by the converter XLA itself uses,
xla/hlo/translate (ConvertMlirHloToHlo), as jaxlib exposes it: `mlir_module_to_xla_computation`.
jaxlib is an optional dependency (`pip install 'hlo-toolchain[stablehlo]'`, jax and jaxlib); without it the input
is refused in one line naming the extra. The converter's HloModuleProto then goes through
`proto_to_hlo` like any other proto, so what it keeps of Shardy/sharding attributes (frontend
attributes, shardings) reaches the IR as XLA keeps it.
"""

from __future__ import annotations

import re

from hlo_common.errors import InputError

MLIR_FORMATS = ("stablehlo", "mhlo")
BYTECODE_MAGIC = b"ML\xefR"
_TEXT_STARTS = (b"module", b"func.func", b"#loc", b"#map", b"//", b"\"builtin.module\"")
EXTRA = "pip install 'hlo-toolchain[stablehlo]'"


def looks_like_mlir(head: bytes) -> bool:
    """MLIR bytecode, or MLIR text starting with `module` / `func.func` (after `//` comments)."""
    if head.startswith(BYTECODE_MAGIC):
        return True
    body = b"\n".join(ln for ln in head.splitlines() if not ln.lstrip().startswith(b"//")).lstrip()
    return body.startswith((b"module @", b"module {", b"module attributes", b"func.func", b"#loc"))


def hlo_proto_from_mlir(data: bytes, name: str) -> bytes:
    """The serialized HloModuleProto XLA's converter makes of StableHLO/MHLO `data`."""
    try:
        from jax._src.lib import _jax
    except ImportError:
        raise InputError(f"{name}: StableHLO/MHLO input is converted by jaxlib's converter, which is not "
                         f"installed: {EXTRA}") from None
    source = data if data.startswith(BYTECODE_MAGIC) else data.decode("utf-8", "replace")
    try:
        computation = _jax.mlir.mlir_module_to_xla_computation(source, use_tuple_args=False,
                                                               return_tuple=False)
    except Exception as exc:  # noqa: BLE001 - jaxlib raises its own types; the message is the error
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        first = lines[0] if lines else str(exc)
        where = re.match(r"^(?:[A-Z_]+: )?-:(\d+):(\d+): (?:error: )?(.*)$", first)
        if where:  # the converter names the input `-`
            raise InputError(f"{name}:{where[1]}:{where[2]}: StableHLO/MHLO: {where[3]}") from None
        raise InputError(f"{name}: not convertible StableHLO/MHLO: {first}") from None
    return computation.as_serialized_hlo_module_proto()
