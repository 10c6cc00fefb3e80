"""compile_to_ptx links only the libdevice functions a module calls (a cached bitcode subset per
set of names): the PTX must be exactly what linking the whole library gives, and the subset
must hold what the functions need and nothing unrelated.
"""

from __future__ import annotations

import re

import pytest

from hlo_codegen import ptx
from hlo_codegen.llvm.libdevice import find_libdevice, read_libdevice

KERNEL = """target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-p6:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

declare float @__nv_tanhf(float)
declare double @__nv_erf(double)

define ptx_kernel void @k(ptr addrspace(1) %x, ptr addrspace(1) %y) {
entry:
  %a = load float, ptr addrspace(1) %x, align 4
  %t = call float @__nv_tanhf(float %a)
  %w = fpext float %t to double
  %e = call double @__nv_erf(double %w)
  %n = fptrunc double %e to float
  store float %n, ptr addrspace(1) %y, align 4
  ret void
}
"""


def _whole_library_ptx(llvm_ir: str) -> str:
    """The reference: link all of libdevice, internalize, O3 (how ptx.py did it before)."""
    llvm = ptx._llvm()
    module = llvm.parse_assembly(llvm_ir)
    lib = llvm.parse_bitcode(read_libdevice(str(find_libdevice())))
    lib.triple, lib.data_layout = module.triple, module.data_layout
    module.link_in(lib)
    for fn in module.functions:
        if not fn.is_declaration and fn.name != "k":
            fn.linkage = "internal"
    tm = ptx._target_machine("sm_90")
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(module, pb)
    return tm.emit_assembly(module)


@pytest.fixture(scope="module")
def libdevice() -> str:
    path = find_libdevice()
    if path is None:
        pytest.skip("libdevice.10.bc not found on this machine")
    return str(path)


def test_subset_gives_the_same_ptx_as_the_whole_library(libdevice: str) -> None:
    ptx._libdevice_subset.cache_clear()
    first = ptx.compile_to_ptx(KERNEL)
    assert first == _whole_library_ptx(KERNEL)
    assert ptx.compile_to_ptx(KERNEL) == first  # from the cached subset
    assert ptx._libdevice_subset.cache_info().hits >= 1


def test_subset_holds_the_called_functions_and_their_callees_only(libdevice: str) -> None:
    llvm = ptx._llvm()
    lib = llvm.parse_bitcode(ptx._libdevice_subset(libdevice, frozenset({"__nv_tanhf"})))
    defined = {f.name for f in lib.functions if not f.is_declaration}
    assert "__nv_tanhf" in defined
    assert not defined & {"__nv_erf", "__nv_sinf", "__nv_powf"}
    whole = llvm.parse_bitcode(read_libdevice(libdevice))
    assert len(defined) < len([f for f in whole.functions if not f.is_declaration]) // 10
    assert all(re.match(r"__nv_|__internal|llvm\.", name) for name in defined)
