"""The kernel IR itself: text round trip (print(parse(print(k))) == print(k)), parse and verifier
errors with their locations, and the transforms (inlining, CSE, DCE, vectorization).
"""

from __future__ import annotations

import numpy as np
import pytest

from hlo_codegen.indexing import parse_indexing_map
from hlo_codegen.kernel_ir import Buffer, FunctionBuilder, IRBuilder, Kernel, parse_kernel, print_kernel, verify_kernel
from hlo_codegen.kernel_ir.transforms import (
    eliminate_common_subexpressions, eliminate_dead_code, inline_calls, optimize_kernel, vectorize_loops,
)
from hlo_common.errors import HloParseError, VerificationError

EVERYTHING = """#map0 = (th_x, bl_x)[s0] -> (bl_x * 64 + th_x * 2 + s0), domain: th_x in [0, 31], bl_x in [0, 3], s0 in [0, 1]
#map1 = (d0) -> (d0 floordiv 2, d0 mod 2), domain: d0 in [0, 255]
kernel @everything grid = [4, 1, 1] block = [32, 1, 1] {
  param @arg0 : bf16[256]
  param @arg1 : c64[256]
  param @arg2 : f32[256] written
  param @arg3 : s4[256] written packed
  shared @shm : f32[32]
  global @cst : s8[3] = dense<"0x01FE7F">
  func @pair(%a: f32, %b: f32) -> (f32, f32) {
    %0 = maximumf %a, %b : f32
    %1 = minimumf %a, %b : f32
    return %0, %1
  }
  func @mx(%x: f32, %y: f32) -> (f32) {
    %m = maximumf %x, %y : f32
    return %m
  }
  %th_x = thread_id {dim = x, range = [0, 31]} : index
  %bl_x = block_id {dim = y, range = [0, 3]} : index
  %2 = constant {value = 0.0} : f32
  %3 = constant {value = -inf} : f32
  %4 = constant {value = (1.5, -2.0)} : complex<f32>
  %sum = loop #map0 (%th_x, %bl_x)[%s] -> (%i) iter_args(%acc = %2) attributes {unroll = true} : f32 {
    %5 = load @arg0 %i : bf16
    %6 = extf %5 : f32
    %7, %8 = call @pair %6, %3 : f32, f32
    %9 = cmpf %7, %8 {predicate = ogt} : i1
    %10 = if %9 : f32 {
      %11 = addf %acc, %7 : f32
      yield %11
    } else {
      yield %acc
    }
    %12 = load @arg1 %i : complex<f32>
    %13 = complex.mul %12, %4 : complex<f32>
    %14 = complex.re %13 : f32
    %15 = addf %10, %14 : f32
    %16, %17 = apply_indexing #map1 %i : index, index
    %18 = load @cst %17 : i8
    %19 = trunci %18 : i4
    store @arg3 %19, %i
    yield %15
  }
  store @shm %sum, %th_x
  sync_threads
  %20 = load @shm %th_x : f32
  %21 = shuffle_reduce @mx %20 {max_distance = 16} : f32
  store @arg2 %21, %th_x
}
"""


def test_text_round_trip_of_every_construct() -> None:
    kernel = parse_kernel(EVERYTHING)
    verify_kernel(kernel)
    assert print_kernel(kernel) == EVERYTHING
    assert kernel.buffer("cst").data.tolist() == [1, -2, 127]
    assert kernel.shared_memory_bytes == 128 and kernel.num_threads == 32 and kernel.num_blocks == 4


@pytest.mark.parametrize("text,message,where", [
    ("kernel @k grid = [1, 1, 1] block = [1, 1, 1] {\n  %0 = addf %1, %1 : f32\n}\n",
     "use of undefined value %1", ":2:13:"),
    ("kernel @k grid = [1, 1, 1] block = [1, 1, 1] {\n  %0 = frobnicate : f32\n}\n",
     "unknown op 'frobnicate'", ":2:8:"),
    ("kernel @k grid = [1, 1] block = [1, 1, 1] {\n}\n", "grid must be three integers", ":1:"),
    ("kernel @k grid = [1, 1, 1] block = [1, 1, 1] {\n  %0 = constant {value = 1} : f33\n}\n",
     "unknown type f33", ":2:31:"),
    ("kernel @k grid = [1, 1, 1] block = [1, 1, 1] {\n  loop #map7 () -> () {\n  }\n}\n",
     "undefined indexing map #map7", ":2:8:"),
    ("#map0 = (d0 -> ()\nkernel @k grid = [1, 1, 1] block = [1, 1, 1] {\n}\n", "bad indexing map", ":1:1:"),
    ("kernel @k grid = [1, 1, 1] block = [1, 1, 1] {\n  %0 = constant {value = 1} : i32\n"
     "  %0 = constant {value = 2} : i32\n}\n", "value %0 is defined twice", ":3:3:"),
])
def test_parse_errors_say_where(text: str, message: str, where: str) -> None:
    with pytest.raises(HloParseError) as err:
        parse_kernel(text)
    assert message in str(err.value) and where in str(err.value)


def _kernel() -> tuple[Kernel, IRBuilder]:
    k = Kernel("k", (1, 1, 1), (8, 1, 1))
    k.buffers += [Buffer("arg0", "param", "f32", 8), Buffer("arg1", "param", "f32", 8, written=True)]
    return k, IRBuilder(k)


@pytest.mark.parametrize("build,message", [
    (lambda k, b: b.store("arg0", b.constant(1.0, "f32"), b.index(0)), "store to read-only buffer @arg0"),
    (lambda k, b: b.if_(b.constant(1, "i1"), [], lambda: (b.sync_threads(), [])[1]),
     "only allowed directly in the kernel body"),
    (lambda k, b: b.load("nope", b.index(0), "f32"), "unknown buffer @nope"),
])
def test_verifier_errors(build, message: str) -> None:
    k, b = _kernel()
    build(k, b)
    with pytest.raises(VerificationError, match=message):
        verify_kernel(k)


def test_verifier_rejects_thread_ids_in_functions_and_bad_calls() -> None:
    k, b = _kernel()
    f = FunctionBuilder(k, "f", ["index"], ["f32"])
    f.thread_id("x", 8)
    f.return_([f.constant(1.0, "f32")])
    with pytest.raises(VerificationError, match="not allowed in a subgraph function"):
        verify_kernel(k)
    k, b = _kernel()
    g = FunctionBuilder(k, "g", ["index"], ["f32"])
    g.return_([g.constant(1.0, "f32")])
    b.op("call", [b.constant(1.0, "f32")], ["f32"], {"callee": "g"})
    with pytest.raises(VerificationError, match="do not match @g"):
        verify_kernel(k)


def test_inline_cse_dce() -> None:
    k, b = _kernel()
    once = FunctionBuilder(k, "once", ["index"], ["f32"])
    once.return_([once.unary("exp", once.load("arg0", once.function.args[0], "f32"))])
    twice = FunctionBuilder(k, "twice", ["index"], ["f32"])
    twice.return_([twice.unary("log", twice.load("arg0", twice.function.args[0], "f32"))])
    th = b.thread_id("x", 8)
    x = b.call(once.function, [th])[0]
    y = b.call(twice.function, [th])[0]
    z = b.call(twice.function, [b.index(0)])[0]
    b.unary("sin", x)  # dead
    b.store("arg1", b.binary("addf", b.binary("addf", x, y), z), th)
    inline_calls(k)
    assert [f.name for f in k.functions] == ["twice"]
    text = print_kernel(k)
    assert "exp" in text and text.count("call @twice") == 2
    eliminate_dead_code(k)
    assert "sin" not in print_kernel(k)
    verify_kernel(k)


def test_cse_keeps_region_scopes_and_reloads_written_buffers() -> None:
    k, b = _kernel()
    th = b.thread_id("x", 8)
    c = b.cmpi("eq", th, b.index(0))
    one = b.op("load", [th], ["f32"], {"buffer": "arg1"}, cse=False).result
    b.if_(c, [], lambda: (b.store("arg1", one, th), [])[1])
    two = b.op("load", [th], ["f32"], {"buffer": "arg1"}, cse=False).result  # written: not merged
    three = b.op("load", [th], ["f32"], {"buffer": "arg0"}, cse=False).result
    four = b.op("load", [th], ["f32"], {"buffer": "arg0"}, cse=False).result  # read-only: merged
    b.store("arg1", b.binary("addf", b.binary("addf", one, two), b.binary("addf", three, four)), th)
    eliminate_common_subexpressions(k)
    text = print_kernel(k)
    assert text.count("load @arg1") == 2 and text.count("load @arg0") == 1


def test_vectorize_contiguous_aligned_accesses_only() -> None:
    k = Kernel("v", (2, 1, 1), (16, 1, 1))
    k.buffers += [Buffer("arg0", "param", "f32", 128), Buffer("arg1", "param", "f32", 128),
                  Buffer("arg2", "param", "f32", 128, written=True)]
    b = IRBuilder(k)
    th, bl = b.thread_id("x", 16), b.block_id("x", 2)
    inner = parse_indexing_map("(th_x, bl_x)[s0] -> (bl_x * 64 + th_x * 4 + s0), "
                               "domain: th_x in [0, 15], bl_x in [0, 1], s0 in [0, 3]")
    odd = parse_indexing_map("(d0) -> ((d0 * 3) mod 128), domain: d0 in [0, 127]")

    def body(syms, idx, iters):
        a = b.load("arg0", idx[0], "f32")
        c = b.load("arg1", b.apply_indexing(odd, idx)[0], "f32")
        b.store("arg2", b.binary("addf", a, c), idx[0])
        return []

    b.loop(inner, [th, bl], [], body, attrs={"vectorize": 4})
    vectorize_loops(k)
    eliminate_dead_code(k)
    verify_kernel(k)
    text = print_kernel(k)
    assert "load @arg0 %0 {align = 16} : vector<4xf32>" in text.replace("%1 =", "%0 =") or \
        "{align = 16} : vector<4xf32>" in text.split("load @arg0")[1].splitlines()[0]
    assert "vector<4xf32>" not in text.split("load @arg1")[1].splitlines()[0]  # stride 3: scalar
    assert "store @arg2" in text and text.split("store @arg2")[1].split("\n")[0].endswith("{align = 16}")
    from hlo_codegen.llvm import lower_to_host
    from hlo_run.host_kernel import load_host_kernel

    x, y = np.arange(128, dtype=np.float32), np.arange(128, dtype=np.float32) * 10
    out = np.zeros(128, np.float32)
    load_host_kernel(lower_to_host(k), "v")([x, y, out], 2)
    np.testing.assert_array_equal(out, x + y[(np.arange(128) * 3) % 128])


def test_optimize_renumbers_values() -> None:
    k, b = _kernel()
    th = b.thread_id("x", 8)
    for _ in range(3):
        b.value("f32")  # burn names
    b.store("arg1", b.unary("exp", b.load("arg0", th, "f32")), th)
    optimize_kernel(k)
    assert "%0 = load @arg0 %th_x : f32" in print_kernel(k)
