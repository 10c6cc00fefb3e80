"""Shared helper of the expander passes that build their replacement as HLO text
(`cholesky_expander`, `triangular_solve_expander`, `fft_expander`).

An expansion is written as a small HLO module whose entry takes the expanded instruction's
operands and returns its result. `embed_call` parses it, adds its computations to the module
(renamed where a name is taken) and builds a `call` of its entry next to the instruction; the
call-inliner of the `optimization` pipeline inlines it later. The leading underscore keeps
`load_all_passes` from importing this file as a pass.
"""

from __future__ import annotations

from hlo_common.hlo.ir import HloInstruction
from hlo_common.hlo.parser import parse_module
from hlo_common.hlo.hlo_creation_utils import add_embedded_computation


class TextBuilder:
    """Collects the lines of one computation; every `op` returns the new value's name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._count = 0

    def op(self, shape: str, expr: str, name: str = "v") -> str:
        self._count += 1
        value = f"{name}.{self._count}"
        self.lines.append(f"  {value} = {shape} {expr}")
        return value

    def computation(self, header: str, root: str) -> str:
        """`header { lines; ROOT root }` where `root` is an `op` result (re-emitted as ROOT)."""
        last = self.lines[-1]
        if not last.startswith(f"  {root} = "):
            raise ValueError(f"root {root} is not the last value")
        body = self.lines[:-1] + ["  ROOT " + last.strip()]
        return header + " {\n" + "\n".join(body) + "\n}\n"


def splat(b: TextBuilder, et: str, dims: str, value: str) -> str:
    """A broadcast scalar constant `value` (a literal of `et`) of shape et[dims]."""
    return b.op(f"{et}[{dims}]", f"broadcast({b.op(f'{et}[]', f'constant({value})')}), dimensions={{}}")


def dynamic_slice(b: TextBuilder, et: str, x: str, starts: list[str], sizes: list[int]) -> str:
    """dynamic-slice(x, starts...) of the given sizes."""
    sizes_text = ",".join(str(s) for s in sizes)
    return b.op(f"{et}[{sizes_text}]", f"dynamic-slice({x}, {', '.join(starts)}), "
                f"dynamic_slice_sizes={{{sizes_text}}}", "dynamic-slice")


def dims_text(dims: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(d) for d in dims)


def real_type(et: str) -> str:
    """The element type name of a complex type's parts; the type itself otherwise."""
    return {"c64": "f32", "c128": "f64"}.get(et, et)


def literal_text(et: str, value: str) -> str:
    """A scalar literal of `et` (`(value, 0)` for complex types)."""
    return f"({value}, 0)" if real_type(et) != et else value


def conj_text(b: TextBuilder, x: str, shape: str, et: str, dims: str) -> str:
    """conj(x) as real/imag/negate/complex for complex `et`; x itself otherwise."""
    rt = real_type(et)
    if rt == et:
        return x
    re = b.op(f"{rt}[{dims}]", f"real({x})", "real")
    im = b.op(f"{rt}[{dims}]", f"negate({b.op(f'{rt}[{dims}]', f'imag({x})', 'imag')})", "negate")
    return b.op(shape, f"complex({re}, {im})", "conj")


def swap_minor(b: TextBuilder, x: str, et: str, nb: int, n: int, m: int, conj: bool = False) -> str:
    """x of shape [nb, n, m] -> x^T (x^H when `conj`) of shape [nb, m, n]."""
    shape = f"{et}[{nb},{m},{n}]"
    t = b.op(shape, f"transpose({x}), dimensions={{0,2,1}}", "transpose")
    return conj_text(b, t, shape, et, f"{nb},{m},{n}") if conj else t


def embed_call(instr: HloInstruction, module_text: str) -> HloInstruction:
    """Add the computations of `module_text` to `instr`'s module and return a new `call` of its
    entry on `instr`'s operands (same shape as `instr`), placed in `instr`'s computation."""
    expansion = parse_module(module_text, f"<expansion of %{instr.name}>")
    comp = instr.parent
    module = comp.parent
    entry = expansion.entry
    for sub in list(expansion.computations):
        expansion.computations.remove(sub)
        sub.is_entry = False
        add_embedded_computation(module, sub, before=comp)
    return comp.add_new_instruction("call", list(instr.operands), instr.shape,
                                    {"to_apply": entry}, name="call")
