"""Shared helpers of the thunk / manifest / hlo-codegen CLI / hlo-run manifest tests.

`FakeKernelBackend` stands in for the emitters where a test is about thunks, not kernels: it
records each fusion it is asked for and returns one kernel taking every argument, with
placeholder code for both targets.
"""

from __future__ import annotations

from hlo_common.manifest.manifest import ManifestKernel
from hlo_common.hlo.parser import parse_module
from hlo_codegen.compiler import CompileOptions, compile_module
from hlo_codegen.thunk_emitter import CompiledKernel


class FakeKernelBackend:
    def __init__(self):
        self.calls = []

    def compile(self, fusion, args, unique_name):
        name = unique_name(fusion.name)
        self.calls.append((fusion.name, name, list(args)))
        kernel = ManifestKernel(name, (1, 1, 1), (128, 1, 1), 0, len(args), ptx=f"// {name}\n",
                                llvm_ir=f"; {name}\n")
        return [CompiledKernel(kernel, tuple(range(len(args))), {"kernel_ir.txt": f"kernel {name}\n"})]


def compile_text(text: str, target: str = "host", backend=None):
    """Parse and compile `text` with the fake kernel backend (or `backend`)."""
    backend = backend if backend is not None else FakeKernelBackend()
    return compile_module(parse_module(text), CompileOptions(target=target), backend), backend


# -- a tiny real kernel generator for runtime tests --------------------------------------------------
_LL_TYPES = {"f32": "float", "s32": "i32", "pred": "i8"}
_BINARY = {("add", "f32"): "fadd", ("add", "s32"): "add", ("subtract", "f32"): "fsub",
           ("subtract", "s32"): "sub", ("multiply", "f32"): "fmul", ("multiply", "s32"): "mul"}
_COMPARE = {("LT", "f32"): "fcmp olt", ("GT", "f32"): "fcmp ogt", ("LT", "s32"): "icmp slt",
            ("GT", "s32"): "icmp sgt", ("EQ", "s32"): "icmp eq"}


class ElementwiseHostBackend(FakeKernelBackend):
    """Real host kernels (hand-written LLVM IR, one element per block) for fusions whose root is one
    add / subtract / multiply / negate / compare of its parameters, f32 or s32. It lets runtime
    tests launch kernels without depending on the emitters."""

    def compile(self, fusion, args, unique_name):
        name = unique_name(fusion.name)
        self.calls.append((fusion.name, name, list(args)))
        root = fusion.fused_computation().root
        n = fusion.shape.num_elements
        param_arg = {}
        for i, spec in enumerate(args):
            for k in spec.operands:
                param_arg[k] = i
        out_arg = next(i for i, spec in enumerate(args) if () in spec.outputs)
        lines = [f"define void @{name}(ptr %args, i64 %begin, i64 %end) {{", "entry:"]
        for i in range(len(args)):
            lines += [f"  %pp{i} = getelementptr ptr, ptr %args, i64 {i}", f"  %p{i} = load ptr, ptr %pp{i}"]
        lines += ["  br label %loop", "loop:", "  %i = phi i64 [%begin, %entry], [%next, %body]",
                  "  %more = icmp slt i64 %i, %end", "  br i1 %more, label %body, label %exit", "body:"]
        values = []
        for k, operand in enumerate(root.operands):
            t = _LL_TYPES[operand.shape.element_type.name]
            arg = param_arg[operand.parameter_number]
            lines += [f"  %a{k}p = getelementptr {t}, ptr %p{arg}, i64 %i", f"  %a{k} = load {t}, ptr %a{k}p"]
            values.append((f"%a{k}", t, operand.shape.element_type.name))
        lines += self._op(root, values)
        t_out = _LL_TYPES[root.shape.element_type.name]
        lines += [f"  %op = getelementptr {t_out}, ptr %p{out_arg}, i64 %i", f"  store {t_out} %r, ptr %op",
                  "  %next = add i64 %i, 1", "  br label %loop", "exit:", "  ret void", "}"]
        ir = "\n".join(lines) + "\n"
        kernel = ManifestKernel(name, (max(n, 1), 1, 1), (1, 1, 1), 0, len(args), ptx=f"// {name}\n",
                                llvm_ir=ir)
        return [CompiledKernel(kernel, tuple(range(len(args))), {"ll": ir})]

    @staticmethod
    def _op(root, values) -> list[str]:
        (a, t, et), *rest = values
        if root.opcode == "negate":
            return [f"  %r = fneg {t} {a}"] if et == "f32" else [f"  %r = sub {t} 0, {a}"]
        b = rest[0][0]
        if root.opcode == "compare":
            cmp = _COMPARE[(str(root.attrs["direction"]), et)]
            return [f"  %c = {cmp} {t} {a}, {b}", "  %r = zext i1 %c to i8"]
        return [f"  %r = {_BINARY[(root.opcode, et)]} {t} {a}, {b}"]


# No kernels: gemms, copies, constants, a while whose predicate is loop state, a conditional.
KERNEL_FREE = """HloModule kernel_free
then { p = (f32[4,4], f32[4,4]{0,1}) parameter(0) a = f32[4,4] get-tuple-element(p), index=0
  b = f32[4,4]{0,1} get-tuple-element(p), index=1
  ROOT d = f32[4,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0} }
else { p = (f32[4,4], f32[4,4]{0,1}) parameter(0) ROOT a = f32[4,4] get-tuple-element(p), index=0 }
cond { s = (pred[], f32[4,4], f32[4,4]) parameter(0) ROOT go = pred[] get-tuple-element(s), index=0 }
body { s = (pred[], f32[4,4], f32[4,4]) parameter(0) x = f32[4,4] get-tuple-element(s), index=1
  y = f32[4,4] get-tuple-element(s), index=2
  m = f32[4,4] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  f = pred[] constant(false) ROOT t = (pred[], f32[4,4], f32[4,4]) tuple(f, m, y) }
ENTRY e { go = pred[] parameter(0) x = f32[4,4] parameter(1) y = f32[4,4]{0,1} parameter(2)
  k = f32[4,4] constant({{1,0,0,0},{0,2,0,0},{0,0,3,0},{0,0,0,4}})
  c = f32[4,4]{0,1} copy(y)
  s = (pred[], f32[4,4], f32[4,4]) tuple(go, x, k)
  w = (pred[], f32[4,4], f32[4,4]) while(s), condition=cond, body=body
  r = f32[4,4] get-tuple-element(w), index=1
  pair = (f32[4,4], f32[4,4]{0,1}) tuple(r, c)
  z = f32[4,4] conditional(go, pair, pair), true_computation=then, false_computation=else
  ROOT out = (f32[4,4], f32[4,4], f32[4,4]) tuple(z, r, k) }"""


WHILE = """HloModule w
cond { p = (s32[], f32[4]) parameter(0) i = s32[] get-tuple-element(p), index=0 c = s32[] constant(5)
  ROOT lt = pred[] compare(i, c), direction=LT }
body { p = (s32[], f32[4]) parameter(0) i = s32[] get-tuple-element(p), index=0 one = s32[] constant(1)
  n = s32[] add(i, one) v = f32[4] get-tuple-element(p), index=1 w = f32[4] negate(v)
  ROOT t = (s32[], f32[4]) tuple(n, w) }
ENTRY e { a = f32[4] parameter(0) z = s32[] constant(0) t = (s32[], f32[4]) tuple(z, a)
  loop = (s32[], f32[4]) while(t), condition=cond, body=body, backend_config={"known_trip_count":{"n":"5"}}
  ROOT r = f32[4] get-tuple-element(loop), index=1 }"""
