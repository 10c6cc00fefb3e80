"""Run an HLO text module on real XLA:CPU through jax: the reference for the interpreter.

This is the one place in the project that talks to XLA itself (see xla-reference.md). XLA parses
the module text itself, compiles it with XLA:CPU's own pipeline and runs it; the results come
back as numpy arrays in the element type's dtype, with the tuple structure of the entry's result
restored (PjRt hands back the leaves of a tuple result flattened depth first).

    >>> exe = XlaCpuExecutable.compile("ENTRY e { p = f32[2] parameter(0) ROOT n = f32[2] negate(p) }")
    >>> exe.run([np.array([1, -2], np.float32)])
    array([-1.,  2.], dtype=float32)

XLA:CPU cannot take tuple- or token-shaped entry parameters; such modules raise
`XlaCpuRejected` before compiling. jax is an optional dependency (the `test` extra): without it
`XlaCpuUnavailable` says so in one line. The jax CPU backend is created once per process.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from hlo_common.errors import HloError
from hlo_common.hlo.ir import HloModule


class XlaCpuUnavailable(HloError):
    """jax / jaxlib are not installed, so XLA:CPU cannot be used as a reference."""


class XlaCpuRejected(HloError):
    """XLA itself refused the module: its parser, the StableHLO conversion or XLA:CPU's compiler."""


@functools.lru_cache(maxsize=None)
def _jax_modules():
    try:
        import jax
        import jax.extend  # noqa: F401  (must be imported explicitly)
        from jax._src.lib import _jax, xla_client
    except ImportError as exc:
        raise XlaCpuUnavailable(
            f"the xla-cpu reference needs jax and jaxlib (pip install 'hlo-toolchain[test]'): {exc}"
        ) from None
    return jax, _jax, xla_client


@functools.lru_cache(maxsize=None)
def cpu_backend():
    """The jax CPU client and its first device, created once per process."""
    jax, _jax, _ = _jax_modules()
    backend = jax.extend.backend.get_backend("cpu")
    return backend, backend.local_devices()[0]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for prefix in ("INVALID_ARGUMENT: ", "UNIMPLEMENTED: ", "INTERNAL: ", "FAILED_PRECONDITION: "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    if lines[0].endswith(":") and len(lines) > 1:  # "Syntax error ...:" then the actual error
        return f"{lines[0]} {lines[1]}"
    return lines[0]


class XlaCpuExecutable:
    """One module compiled by XLA:CPU; `run` may be called many times."""

    def __init__(self, loaded, result_shape, parameter_shapes):
        self._loaded = loaded
        self.result_shape = result_shape  # xla_client.Shape, used to rebuild tuples
        self.parameter_shapes = parameter_shapes

    @classmethod
    def compile(cls, hlo_text: str, *, allow_excess_precision: bool = True,
                debug_options: dict[str, Any] | None = None) -> XlaCpuExecutable:
        """Parse `hlo_text` with XLA's own parser and compile it for XLA:CPU.

        `allow_excess_precision=False` makes XLA round bf16/f16 intermediates after every op,
        as the interpreter does, instead of keeping them in f32 inside fusions. `debug_options`
        are further DebugOptions overrides by name, e.g. `{"xla_backend_optimization_level": 0}`
        to spend less time in LLVM when compile time matters more than run time.
        """
        _, _jax, xc = _jax_modules()
        try:
            hlo_module = xc.hlo.hlo_module_from_text(hlo_text)
            proto = hlo_module.as_serialized_hlo_module_proto()
            program_shape = xc.hlo.XlaComputation(proto).program_shape()
        except Exception as exc:  # noqa: BLE001 - XLA raises its own runtime error types
            raise XlaCpuRejected(f"XLA's parser rejects the module: {_first_line(exc)}") from None
        params = program_shape.parameter_shapes()
        for i, shape in enumerate(params):
            if shape.is_tuple() or shape.is_token():
                kind = "tuple" if shape.is_tuple() else "token"
                raise XlaCpuRejected(
                    f"XLA:CPU cannot take the {kind}-shaped entry parameter {i} ({shape}) of this module")
        backend, device = cpu_backend()
        options = xc.CompileOptions()
        overrides = dict(debug_options or {})
        if not allow_excess_precision:
            overrides["xla_allow_excess_precision"] = False
        if overrides:
            options.env_option_overrides = sorted(overrides.items())
        try:
            mlir = _jax.mlir.hlo_to_stablehlo(proto)
            loaded = backend.compile_and_load(mlir, _jax.DeviceList((device,)), options)
        except Exception as exc:  # noqa: BLE001
            raise XlaCpuRejected(f"XLA:CPU cannot compile the module: {_first_line(exc)}") from None
        return cls(loaded, program_shape.result_shape(), params)

    def run(self, args: Sequence[np.ndarray]) -> Any:
        """Run on numpy arguments (one per entry parameter); arrays or nested tuples come back."""
        jax, _, _ = _jax_modules()
        if len(args) != len(self.parameter_shapes):
            raise XlaCpuRejected(
                f"the module takes {len(self.parameter_shapes)} argument(s), {len(args)} given")
        _, device = cpu_backend()
        try:
            with jax.enable_x64(True):  # otherwise 64-bit inputs are narrowed silently
                buffers = [jax.device_put(np.asarray(a), device) for a in args]
                result = self._loaded.execute_sharded(buffers)
                leaves = [np.asarray(out[0]) for out in result.disassemble_into_single_device_arrays()]
        except Exception as exc:  # noqa: BLE001
            raise XlaCpuRejected(f"XLA:CPU failed to run the module: {_first_line(exc)}") from None
        value, rest = _rebuild(self.result_shape, leaves)
        assert not rest, "XLA:CPU returned more leaves than the result shape holds"
        return value

    def optimized_hlo(self) -> str:
        """XLA:CPU's optimized module text (what it actually ran)."""
        return self._loaded.hlo_modules()[0].to_string()


def _rebuild(shape, leaves: list[np.ndarray]) -> tuple[Any, list[np.ndarray]]:
    """Nest the flat, depth-first leaves back into the tuple structure of `shape`."""
    if shape.is_tuple():
        parts = []
        for sub in shape.tuple_shapes():
            part, leaves = _rebuild(sub, leaves)
            parts.append(part)
        return tuple(parts), leaves
    return leaves[0], leaves[1:]


def has_fusions(module: HloModule) -> bool:
    return any(i.opcode == "fusion" for c in module.computations for i in c.instructions)


def has_elided_constants(module: HloModule) -> bool:
    return any(i.literal_unknown for c in module.computations for i in c.instructions)


def rewritten_text(module: HloModule) -> str:
    """The module's text with fusions turned into calls and `{...}` constants written out.

    XLA:CPU only runs fusions its own pipeline formed (it needs their backend config, and its
    tiled emitters abort the process on some foreign ones), while a fusion means exactly a call
    of its computation; so a module written with fusions (emitter tests, optimized dumps) reaches
    XLA:CPU unfused and gets fused again by XLA:CPU's own passes. A constant whose values the
    text elides (`constant({...})`) gets the stand-in values our parser chose, so that both runs
    see the same numbers.
    """
    from hlo_common.hlo.ir import clone_module
    from hlo_common.hlo.printer import print_module

    clone = clone_module(module)
    originals = {(c.name, i.name): i for c in module.computations for i in c.instructions}
    for comp in clone.computations:
        for instr in comp.instructions:
            if instr.opcode == "fusion":
                callee = instr.attrs.pop("calls")
                instr.attrs.pop("kind", None)
                instr.attrs["to_apply"] = callee
                instr.opcode = "call"
                instr.backend_config = None
            if instr.literal_unknown:
                instr.literal = originals[(comp.name, instr.name)].literal
                instr.literal_unknown = False
    return print_module(clone)


def text_for_xla_cpu(module: HloModule, original_text: str) -> str:
    """What to give XLA:CPU for `module`: its original text, or `rewritten_text` when it has
    fusions or elided constants."""
    if has_fusions(module) or has_elided_constants(module):
        return rewritten_text(module)
    return original_text


def run_hlo_text(hlo_text: str, args: Sequence[np.ndarray], *, allow_excess_precision: bool = True) -> Any:
    """Compile `hlo_text` on XLA:CPU and run it once on `args`."""
    return XlaCpuExecutable.compile(hlo_text, allow_excess_precision=allow_excess_precision).run(args)
