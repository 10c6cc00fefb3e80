"""NVPTX LLVM IR -> PTX (llvmlite's NVPTX target) -> cubin (nvJitLink): the GPU back end.

Where it sits: after `hlo_codegen.llvm.nvptx.lower_to_nvptx`. `compile_to_ptx` links libdevice
when the module calls `__nv_*` functions, internalizes everything but the kernels, runs LLVM's
O3 pipeline for the target machine (which includes NVVMReflect) and prints PTX. Only the
libdevice functions a module calls (and those they call) are linked: `_libdevice_subset` keeps
them as bitcode, once per process for each set of names, so a math kernel no longer parses
and optimizes the whole library (130 -> 9 ms for a tanh kernel; the PTX is the same). `ptx_to_cubin`
links the PTX with nvJitLink for `--arch` (sm_90 by default); that is also how PTX is validated
on machines without a GPU (`validate_ptx`, what hlo-codegen runs on every kernel, links
without optimization: its cubin is thrown away; `validate_ptx_batch` checks several kernels in one
link, which spares nvJitLink's fixed cost per link, a third of a small kernel's check). cuda-bindings is imported lazily: without the
`ptx` extra the error says what to install.

    ptx = compile_to_ptx(lower_to_nvptx(kernel), arch="sm_90")
    cubin = ptx_to_cubin(ptx, arch="sm_90")     # bytes of an ELF cubin
"""

from __future__ import annotations

import functools
import re
import threading

from hlo_codegen.llvm.libdevice import find_libdevice, read_libdevice
from hlo_common.errors import HloError

DEFAULT_ARCH = "sm_90"
_ARCH = re.compile(r"^sm_(\d+)([af]?)$")
# What the NVPTX lowering and nvJitLink can both produce: the warp shuffles (`shfl.sync`) need
# Turing or newer (LLVM cannot select them below; sm_35..sm_61 aborted inside LLVM), CUDA 13's
# nvJitLink no longer links Volta (sm_70, sm_72), and the `a` / `f` feature sets exist only where
# listed. `hlo-codegen --arch` refuses anything else as a usage error, before LLVM sees it.
SUPPORTED_ARCHS = (
    "sm_75", "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a",
    "sm_100f", "sm_103", "sm_103a", "sm_110", "sm_120", "sm_120a", "sm_121", "sm_121a",
)


class PtxError(HloError):
    """LLVM could not produce PTX, or nvJitLink rejected it (the log is in the message)."""


# compile_to_ptx may run on several threads at once (hlo-codegen compiles kernels in parallel): each
# call parses into an LLVM context of its own, each thread has its own target machines, and what is
# shared (LLVM's start-up, the libdevice subsets) is made under a lock.
_LOCK = threading.RLock()
_PER_THREAD = threading.local()


def _llvm():
    with _LOCK:
        return _llvm_locked()


@functools.lru_cache(maxsize=None)
def _llvm_locked():
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def arch_problem(arch: str) -> str | None:
    """Why `arch` cannot be compiled for (None when it can)."""
    if not _ARCH.match(arch):
        return f"bad GPU architecture '{arch}' (expected sm_XY, e.g. sm_90)"
    if arch not in SUPPORTED_ARCHS:
        return f"GPU architecture '{arch}' is not supported (supported: {', '.join(SUPPORTED_ARCHS)})"
    return None


def _check_arch(arch: str) -> None:
    problem = arch_problem(arch)
    if problem is not None:
        raise PtxError(problem)


def _target_machine(arch: str):
    """This thread's NVPTX target machine for `arch` (LLVM's are not shared between threads)."""
    machines = getattr(_PER_THREAD, "machines", None)
    if machines is None:
        machines = _PER_THREAD.machines = {}
    tm = machines.get(arch)
    if tm is None:
        llvm = _llvm()
        target = llvm.Target.from_triple("nvptx64-nvidia-cuda")
        tm = machines[arch] = target.create_target_machine(
            cpu=arch.rstrip("af") if arch.endswith(("a", "f")) else arch, features="", opt=3)
    return tm


def preload_ptx_tools(arch: str = DEFAULT_ARCH) -> None:
    """Load LLVM's NVPTX target machine for `arch` and nvJitLink ahead of the first kernel."""
    _check_arch(arch)
    _target_machine(arch)
    _nvjitlink()


def compile_to_ptx(llvm_ir: str, arch: str = DEFAULT_ARCH, libdevice: str | None = None) -> str:
    """PTX text for an NVPTX module; `libdevice` defaults to `find_libdevice()` when needed."""
    _check_arch(arch)
    llvm = _llvm()
    context = llvm.create_context()
    try:
        module = llvm.parse_assembly(llvm_ir, context=context)
        module.verify()
    except RuntimeError as err:
        raise PtxError(f"invalid NVPTX LLVM IR: {str(err).strip()}") from None
    kernels = set(re.findall(r"define ptx_kernel void @([A-Za-z0-9_.$]+)\(", llvm_ir))
    if "@__nv_" in llvm_ir:
        path = libdevice or find_libdevice()
        if path is None:
            raise PtxError("the module calls libdevice functions but libdevice.10.bc was not found "
                           "(set CUDA_HOME or HLO_LIBDEVICE)")
        called = frozenset(re.findall(r"@(__nv_[A-Za-z0-9_]+)\(", llvm_ir))
        lib = llvm.parse_bitcode(_libdevice_subset(str(path), called), context=context)
        lib.triple = module.triple
        lib.data_layout = module.data_layout
        module.link_in(lib)
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in kernels:
            fn.linkage = "internal"
    tm = _target_machine(arch)
    pto = llvm.create_pipeline_tuning_options(speed_level=3)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(module, pb)
    leftover = [fn.name for fn in module.functions if fn.is_declaration and fn.name.startswith("__nv")]
    if leftover:
        raise PtxError(f"unresolved libdevice functions: {', '.join(sorted(leftover))}")
    return tm.emit_assembly(module)


@functools.lru_cache(maxsize=64)
def _libdevice_subset(path: str, names: frozenset[str]) -> bytes:
    """Bitcode of the libdevice functions `names` and everything they use (GlobalDCE of the
    library with every other function made internal)."""
    with _LOCK:
        return _make_libdevice_subset(path, names)


def _make_libdevice_subset(path: str, names: frozenset[str]) -> bytes:
    llvm = _llvm()
    lib = llvm.parse_bitcode(read_libdevice(path), context=llvm.create_context())
    for fn in lib.functions:
        if not fn.is_declaration and fn.name not in names:
            fn.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=0)
    pb = llvm.create_pass_builder(_target_machine(DEFAULT_ARCH), pto)
    mpm = llvm.create_new_module_pass_manager()
    mpm.add_global_dead_code_eliminate_pass()
    mpm.run(lib, pb)
    return lib.as_bitcode()


def _nvjitlink():
    try:
        from cuda.bindings import nvjitlink
    except ImportError:
        raise PtxError("cubin validation needs the 'ptx' extra: pip install 'hlo-toolchain[ptx]' "
                       "(cuda-bindings and nvidia-nvjitlink)") from None
    return nvjitlink


def ptx_to_cubin(ptx: str, arch: str = DEFAULT_ARCH, optimize: bool = True) -> bytes:
    """Link PTX into a cubin with nvJitLink (no GPU needed); raises PtxError with its log.
    `optimize=False` runs ptxas at -O0: the PTX is checked as thoroughly (syntax, types, what
    `arch` supports, resource limits) in about 70 % of the time, for a cubin nobody runs."""
    _check_arch(arch)
    nvjitlink = _nvjitlink()
    options = [f"-arch={arch}"] + ([] if optimize else ["-O0"])
    handle = nvjitlink.create(len(options), options)
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
        size = nvjitlink.get_linked_cubin_size(handle)
        buf = bytearray(size)
        nvjitlink.get_linked_cubin(handle, buf)
        return bytes(buf)
    except nvjitlink.nvJitLinkError as err:
        log = _error_log(nvjitlink, handle)
        raise PtxError(f"nvJitLink rejected the PTX for {arch}: {err}\n{log}") from None
    finally:
        nvjitlink.destroy(handle)


def validate_ptx(ptx: str, arch: str = DEFAULT_ARCH) -> None:
    """Raise PtxError when nvJitLink rejects `ptx` for `arch` (a link at -O0, cubin discarded)."""
    ptx_to_cubin(ptx, arch, optimize=False)


def validate_ptx_batch(ptxs: list[str], arch: str = DEFAULT_ARCH) -> list[PtxError | None]:
    """`validate_ptx` of each PTX module, as one link of all of them (each input is assembled on
    its own, as alone; their symbols are module-local but the kernels', whose names differ). When
    that link fails, each module is checked alone, so the errors are those of `validate_ptx`."""
    _check_arch(arch)
    nvjitlink = _nvjitlink()
    options = [f"-arch={arch}", "-O0"]
    handle = nvjitlink.create(len(options), options)
    try:
        for i, ptx in enumerate(ptxs):
            data = ptx.encode()
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), f"kernel{i}.ptx")
        nvjitlink.complete(handle)
        return [None] * len(ptxs)
    except nvjitlink.nvJitLinkError:
        pass
    finally:
        nvjitlink.destroy(handle)
    errors: list[PtxError | None] = []
    for ptx in ptxs:
        try:
            validate_ptx(ptx, arch)
            errors.append(None)
        except PtxError as err:
            errors.append(err)
    return errors


def _error_log(nvjitlink, handle) -> str:
    try:
        size = nvjitlink.get_error_log_size(handle)
        buf = bytearray(size)
        nvjitlink.get_error_log(handle, buf)
        return bytes(buf).decode(errors="replace").rstrip("\x00").strip()
    except Exception:  # the log is a courtesy; the error above is what matters
        return ""
