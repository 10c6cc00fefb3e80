"""Text form of the kernel IR (what `--dump-to` writes and tests read); parser.py reads it back.

    #map0 = (th_x, bl_x) -> (bl_x * 128 + th_x), domain: th_x in [0, 127], bl_x in [0, 1]
    kernel @loop_exponential_fusion grid = [2, 1, 1] block = [128, 1, 1] {
      param @arg0 : f32[256]
      param @arg1 : f32[256] written
      %th_x = thread_id {dim = x, range = [0, 127]} : index
      %bl_x = block_id {dim = x, range = [0, 1]} : index
      loop #map0 (%th_x, %bl_x) -> (%d0) {
        %0 = load @arg0 %d0 : f32
        %1 = exp %0 : f32
        store @arg1 %1, %d0
        yield
      }
    }

Generic op syntax: `[%r, ... =] name [@symbol] [#mapN] [%operands] [{attrs}] [: result types]`;
`loop` and `if` have their own (see `_print_loop` / `_print_if`). Indexing maps are printed once,
as `#mapN = ...` lines before the kernel.
"""

from __future__ import annotations

import math
import re

import numpy as np

from hlo_codegen.indexing import IndexingMap
from hlo_codegen.kernel_ir.ir import Block, Buffer, Function, Kernel, Op

SYMBOL_ATTRS = ("buffer", "callee")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def format_attr(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return format_float(float(value))
    if isinstance(value, complex):
        return f"({format_float(value.real)}, {format_float(value.imag)})"
    if isinstance(value, str):
        return value if _IDENT.match(value) else '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    raise TypeError(f"cannot print attribute value {value!r}")


def format_float(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = repr(float(v))
    return text if any(c in text for c in ".en") else text + ".0"


class _Printer:
    def __init__(self) -> None:
        self.maps: dict[str, str] = {}  # map text -> alias
        self.lines: list[str] = []

    def map_alias(self, m: IndexingMap) -> str:
        text = m.to_string()
        alias = self.maps.get(text)
        if alias is None:
            alias = f"#map{len(self.maps)}"
            self.maps[text] = alias
        return alias

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("  " * indent + text)

    def block(self, block: Block, indent: int) -> None:
        for op in block.ops:
            self.op(op, indent)

    def op(self, op: Op, indent: int) -> None:
        head = ", ".join(f"%{r.name}" for r in op.results)
        head = head + " = " if head else ""
        if op.name == "loop":
            self._print_loop(op, head, indent)
        elif op.name == "if":
            self._print_if(op, head, indent)
        else:
            self.emit(indent, head + self._generic(op))

    def _generic(self, op: Op) -> str:
        parts = [op.name]
        for key in SYMBOL_ATTRS:
            if key in op.attrs:
                parts.append("@" + op.attrs[key])
        if "map" in op.attrs:
            parts.append(self.map_alias(op.attrs["map"]))
        if op.operands:
            parts.append(", ".join(f"%{v.name}" for v in op.operands))
        text = " ".join(parts) + self._attrs(op)
        if op.results:
            text += " : " + ", ".join(r.type for r in op.results)
        return text

    def _attrs(self, op: Op) -> str:
        rest = [(k, v) for k, v in op.attrs.items() if k not in SYMBOL_ATTRS and k != "map"]
        if not rest:
            return ""
        return " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in rest) + "}"

    def _print_loop(self, op: Op, head: str, indent: int) -> None:
        m: IndexingMap = op.attrs["map"]
        body = op.regions[0]
        nd, ns, nr = m.num_dims, len(m.range_vars), m.num_results
        dims = ", ".join(f"%{v.name}" for v in op.operands[:nd])
        text = f"{head}loop {self.map_alias(m)} ({dims})"
        if ns:
            text += "[" + ", ".join(f"%{v.name}" for v in body.args[:ns]) + "]"
        text += " -> (" + ", ".join(f"%{v.name}" for v in body.args[ns:ns + nr]) + ")"
        iters = body.args[ns + nr:]
        if iters:
            pairs = ", ".join(f"%{a.name} = %{v.name}" for a, v in zip(iters, op.operands[nd:]))
            text += f" iter_args({pairs})"
        if self._attrs(op):
            text += " attributes" + self._attrs(op)
        if op.results:
            text += " : " + ", ".join(r.type for r in op.results)
        self.emit(indent, text + " {")
        self.block(body, indent + 1)
        self.emit(indent, "}")

    def _print_if(self, op: Op, head: str, indent: int) -> None:
        text = f"{head}if %{op.operands[0].name}"
        if op.results:
            text += " : " + ", ".join(r.type for r in op.results)
        self.emit(indent, text + " {")
        self.block(op.regions[0], indent + 1)
        self.emit(indent, "} else {")
        self.block(op.regions[1], indent + 1)
        self.emit(indent, "}")

    def buffer(self, b: Buffer) -> None:
        text = f"{b.kind} @{b.name} : {b.hlo_type}[{b.num_elements}]"
        if b.written:
            text += " written"
        if b.packed:
            text += " packed"
        if b.data is not None:
            raw = np.ascontiguousarray(b.data).reshape(-1).view(np.uint8).tobytes()
            text += f' = dense<"0x{raw.hex().upper()}">'
        self.emit(1, text)

    def function(self, f: Function) -> None:
        args = ", ".join(f"%{a.name}: {a.type}" for a in f.args)
        self.emit(1, f"func @{f.name}({args}) -> ({', '.join(f.result_types)}) {{")
        self.block(f.body, 2)
        self.emit(1, "}")


def print_kernel(kernel: Kernel) -> str:
    """The kernel's text (maps first, then `kernel @name ... { ... }`), newline-terminated."""
    p = _Printer()
    grid = ", ".join(str(v) for v in kernel.grid)
    block = ", ".join(str(v) for v in kernel.block)
    p.emit(0, f"kernel @{kernel.name} grid = [{grid}] block = [{block}] {{")
    for b in kernel.buffers:
        p.buffer(b)
    for f in kernel.functions:
        p.function(f)
    p.block(kernel.body, 1)
    p.emit(0, "}")
    maps = [f"{alias} = {text}" for text, alias in p.maps.items()]
    return "\n".join(maps + p.lines) + "\n"
