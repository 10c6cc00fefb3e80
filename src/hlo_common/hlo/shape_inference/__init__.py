"""Shape inference: the result shape of an instruction from its operands, attributes and callees.

Used by the parser for instructions written without a shape, by passes that build new
instructions, and by the verifier (`hlo_common.hlo.verifier`), which compares every declared shape
with the inferred one. One rule per opcode (or family) lives in a registry keyed by the opcode's
text name (`RULES`), split by family over the modules of this package. Results carry the default
layout. A rule that cannot produce a shape raises `ShapeInferenceError` naming the instruction and
saying what was found and what was expected.

    >>> from hlo_common.hlo.parser import parse_module
    >>> m = parse_module("ENTRY e { p = f32[2,3] parameter(0) ROOT t = transpose(p), dimensions={1,0} }")
    >>> str(m.entry.root.shape)
    'f32[3,2]{1,0}'
"""

from __future__ import annotations

from hlo_common.hlo.opcodes import OPCODES
from hlo_common.hlo.shape import Shape
from hlo_common.hlo.shape_inference import (  # noqa: F401 - importing registers the rules
    collectives, control, data_movement, elementwise, gather_scatter, linalg, reductions,
)
from hlo_common.hlo.shape_inference._base import (
    RULES, InferenceContext, InferenceFailure, NeedsDeclaredShape, ShapeInferenceError,
)

__all__ = ["infer_shape", "InferenceContext", "ShapeInferenceError", "RULES", "needs_declared_shape"]

_MISSING = sorted(set(OPCODES) - set(RULES))
assert not _MISSING, f"opcodes without a shape rule: {_MISSING}"


def infer_shape(instr, ctx: InferenceContext | None = None) -> Shape:
    """The result shape of `instr` (default layout), or ShapeInferenceError naming it.

    Opcodes whose shape only the text can give (parameter, constant, iota, reshape, broadcast,
    custom-call, ...) read the instruction's written `shape` and check it against the operands; with
    no written shape they raise an error saying the shape must be written out.
    """
    fn = RULES.get(instr.opcode)
    if fn is None:
        raise ShapeInferenceError(f"unknown opcode '{instr.opcode}'", instr)
    if ctx is None:
        module = getattr(getattr(instr, "parent", None), "parent", None)
        ctx = InferenceContext.for_module(module)
    try:
        return fn(instr, ctx)
    except InferenceFailure as exc:
        raise ShapeInferenceError(str(exc), instr) from None
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        # Malformed IR built by a pass (a missing attribute object, a non-array where one is
        # needed...): still a user-facing error that names the instruction.
        raise ShapeInferenceError(f"malformed instruction ({type(exc).__name__}: {exc})", instr) from None


def needs_declared_shape(instr) -> bool:
    """Whether `instr`'s result shape can only come from its written shape."""
    saved = instr.shape
    instr.shape = None
    try:
        RULES[instr.opcode](instr, InferenceContext())
    except NeedsDeclaredShape:
        return True
    except Exception:  # noqa: BLE001 - any other failure means the shape was not the missing piece
        return False
    finally:
        instr.shape = saved
    return False
