"""A small builder of LLVM IR *text* (opaque pointers, LLVM 17+ syntax), used by both lowerings.

Where it sits: nvptx.py and host.py lower the kernel IR through `lowering.py` into an
`LLModule`; ptx.py and hlo_run.host_kernel parse the text with llvmlite. Writing text keeps
full control over address spaces, calling conventions, intrinsics and metadata.

Values are `LV(type, ref)`: `LV("float", "%x.3")` or a constant `LV("i64", "7")`.

    >>> m = LLModule("x86_64-unknown-linux-gnu")
    >>> f = m.function("twice", "float", [("float", "x")])
    >>> f.ret(f.binop("fmul", f.args[0], f.fconst("float", 2.0)))
    >>> print(f.text().splitlines()[2])
      %t = fmul float %x, 0x4000000000000000
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class LV:
    ty: str
    ref: str

    def __str__(self) -> str:
        return f"{self.ty} {self.ref}"


def float_hex(ty: str, value: float) -> str:
    """LLVM's hexadecimal spelling of a float/double constant (a float's value as a double)."""
    if ty == "float":
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


class _Phi:
    def __init__(self, ty: str, name: str):
        self.ty = ty
        self.name = name
        self.incoming: list[tuple[str, str]] = []

    def render(self) -> str:
        pairs = ", ".join(f"[ {v}, %{label} ]" for v, label in self.incoming)
        return f"  {self.name} = phi {self.ty} {pairs}"


def _bool_type(ty: str) -> str:
    """The type of a comparison of `ty` values: i1, or <N x i1> for a vector <N x T>."""
    if ty.startswith("<"):
        return f"<{ty[1:].split(' x ', 1)[0]} x i1>"
    return "i1"


class LLFunction:
    """One function definition; instructions go to the current block."""

    def __init__(self, module: LLModule, name: str, ret: str, params: list[tuple[str, str]],
                 prefix: str = "", suffix: str = "", param_attrs: list[str] | None = None):
        self.module = module
        self.name = name
        self.ret_ty = ret
        self.prefix = prefix
        self.suffix = suffix
        self.param_attrs = param_attrs or [""] * len(params)
        self.names: dict[str, int] = {}
        self.access_group: str | None = None  # e.g. "!3": tags memory accesses and calls (host.py)
        self.args = [LV(t, "%" + self._unique(n)) for t, n in params]
        self.blocks: list[tuple[str, list]] = []
        self.entry = self.new_block("entry")
        self.set_block(self.entry)

    def _unique(self, hint: str | None) -> str:
        hint = "".join(c if c.isalnum() or c == "_" else "_" for c in (hint or "t")) or "t"
        if hint[0].isdigit():
            hint = "v" + hint
        n = self.names.get(hint, -1) + 1
        self.names[hint] = n
        return hint if n == 0 else f"{hint}.{n}"

    def fresh(self, hint: str | None = None) -> str:
        return "%" + self._unique(hint)

    def new_block(self, hint: str) -> str:
        label = self._unique(hint)
        self.blocks.append((label, []))
        return label

    def set_block(self, label: str) -> None:
        self.current = label
        self.lines = next(lines for name, lines in self.blocks if name == label)

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def inst(self, ty: str, text: str, hint: str | None = None) -> LV:
        name = self.fresh(hint)
        self.lines.append(f"  {name} = {text}")
        return LV(ty, name)

    # -- constants -----------------------------------------------------------------------------
    @staticmethod
    def iconst(ty: str, value: int) -> LV:
        if ty == "i1":
            return LV(ty, "true" if value & 1 else "false")
        return LV(ty, str(int(value)))

    @staticmethod
    def fconst(ty: str, value: float) -> LV:
        return LV(ty, float_hex(ty, value))

    # -- instructions --------------------------------------------------------------------------
    def binop(self, op: str, a: LV, b: LV, flags: str = "", hint: str | None = None) -> LV:
        return self.inst(a.ty, f"{op}{' ' + flags if flags else ''} {a.ty} {a.ref}, {b.ref}", hint)

    def icmp(self, pred: str, a: LV, b: LV) -> LV:
        return self.inst(_bool_type(a.ty), f"icmp {pred} {a.ty} {a.ref}, {b.ref}")

    def fcmp(self, pred: str, a: LV, b: LV) -> LV:
        return self.inst(_bool_type(a.ty), f"fcmp {pred} {a.ty} {a.ref}, {b.ref}")

    def select(self, cond: LV, a: LV, b: LV) -> LV:
        if a.ref == b.ref:
            return a
        return self.inst(a.ty, f"select {cond}, {a}, {b}")

    def cast(self, op: str, v: LV, ty: str) -> LV:
        if v.ty == ty and op in ("bitcast", "zext", "sext", "trunc"):
            return v
        return self.inst(ty, f"{op} {v} to {ty}")

    def _tag(self, text: str) -> str:
        return f"{text}, !llvm.access.group {self.access_group}" if self.access_group else text

    def call(self, ret: str, fn: str, args: list[LV], attrs: str = "") -> LV | None:
        text = self._tag(f"call {ret} @{fn}({', '.join(str(a) for a in args)}){' ' + attrs if attrs else ''}")
        if ret == "void":
            self.emit(text)
            return None
        return self.inst(ret, text)

    def intrinsic(self, name: str, ret: str, args: list[LV]) -> LV | None:
        self.module.declare(name, ret, [a.ty for a in args])
        return self.call(ret, name, args)

    def gep(self, elem_ty: str, ptr: LV, index: LV, inbounds: bool = True) -> LV:
        ib = "inbounds " if inbounds else ""
        return self.inst(ptr.ty, f"getelementptr {ib}{elem_ty}, {ptr}, {index}")

    def load(self, ty: str, ptr: LV, align: int | None = None, invariant: bool = False) -> LV:
        text = f"load {ty}, {ptr}"
        if align:
            text += f", align {align}"
        if invariant:
            text += ", !invariant.load !0"
            self.module.need_empty_md = True
        return self.inst(ty, self._tag(text))

    def store(self, value: LV, ptr: LV, align: int | None = None) -> None:
        self.emit(self._tag(f"store {value}, {ptr}{f', align {align}' if align else ''}"))

    def alloca(self, ty: str, align: int = 16) -> LV:
        """An alloca in the entry block (so LLVM promotes it and the stack does not grow)."""
        name = self.fresh("buf")
        entry = self.blocks[0][1]
        entry.insert(0, f"  {name} = alloca {ty}, align {align}")
        return LV("ptr", name)

    def extractvalue(self, ty: str, agg: LV, index: int) -> LV:
        return self.inst(ty, f"extractvalue {agg}, {index}")

    def insertvalue(self, agg: LV, value: LV, index: int) -> LV:
        return self.inst(agg.ty, f"insertvalue {agg}, {value}, {index}")

    def extractelement(self, ty: str, vec: LV, index: LV) -> LV:
        return self.inst(ty, f"extractelement {vec}, {index}")

    def insertelement(self, vec: LV, value: LV, index: LV) -> LV:
        return self.inst(vec.ty, f"insertelement {vec}, {value}, {index}")

    def phi(self, ty: str, hint: str | None = None) -> tuple[LV, _Phi]:
        p = _Phi(ty, self.fresh(hint))
        self.lines.append(p)
        return LV(ty, p.name), p

    def br(self, label: str) -> None:
        self.emit(f"br label %{label}")

    def cbr(self, cond: LV, then_label: str, else_label: str, loop_md: str | None = None) -> None:
        md = f", !llvm.loop {loop_md}" if loop_md else ""
        self.emit(f"br {cond}, label %{then_label}, label %{else_label}{md}")

    def ret(self, value: LV | None = None) -> None:
        self.emit(f"ret {value}" if value is not None else "ret void")

    # -- output --------------------------------------------------------------------------------
    def text(self) -> str:
        params = ", ".join(f"{a.ty}{' ' + attr if attr else ''} {a.ref}"
                           for a, attr in zip(self.args, self.param_attrs))
        head = f"define {self.prefix + ' ' if self.prefix else ''}{self.ret_ty} @{self.name}({params})"
        out = [head + (f" {self.suffix}" if self.suffix else "") + " {"]
        for label, lines in self.blocks:
            out.append(f"{label}:")
            out.extend(line.render() if isinstance(line, _Phi) else line for line in lines)
        out.append("}")
        return "\n".join(out)


class LLModule:
    """Declarations, globals and function definitions of one LLVM module."""

    def __init__(self, triple: str, datalayout: str | None = None):
        self.triple = triple
        self.datalayout = datalayout
        self.declarations: dict[str, str] = {}
        self.globals: list[str] = []
        self.functions: list[LLFunction] = []
        self.defined: set[str] = set()
        self.need_empty_md = False
        self.trailer: list[str] = []
        self._metadata = 0  # !0 is the empty node of invariant loads; numbered nodes follow

    def metadata(self, body: str) -> str:
        """A new numbered metadata node; `body` may name itself as `{self}` (distinct loop ids)."""
        self._metadata += 1
        ref = f"!{self._metadata}"
        self.trailer.append(f"{ref} = {body.replace('{self}', ref)}")
        return ref

    def declare(self, name: str, ret: str, arg_types: list[str]) -> None:
        if name not in self.declarations and name not in self.defined:
            self.declarations[name] = f"declare {ret} @{name}({', '.join(arg_types)})"

    def function(self, name: str, ret: str, params: list[tuple[str, str]], **kwargs) -> LLFunction:
        f = LLFunction(self, name, ret, params, **kwargs)
        self.functions.append(f)
        self.defined.add(name)
        self.declarations.pop(name, None)
        return f

    def text(self) -> str:
        out = []
        if self.datalayout:
            out.append(f'target datalayout = "{self.datalayout}"')
        out.append(f'target triple = "{self.triple}"')
        out.append("")
        out.extend(self.globals)
        out.extend(d for name, d in sorted(self.declarations.items()) if name not in self.defined)
        for f in self.functions:
            out.append("")
            out.append(f.text())
        if self.need_empty_md:
            out.append("")
            out.append("!0 = !{}")
        out.extend(self.trailer)
        return "\n".join(out) + "\n"
