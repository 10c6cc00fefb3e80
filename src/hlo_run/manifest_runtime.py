"""Running a manifest: allocate, bind parameters, walk the thunks, read the results back.

Where it sits: hlo-run's cuda and host platforms (`backends/cuda.py`, `backends/host.py`) both
run a manifest through `ManifestExecutable`, which is XLA's `GpuExecutable::ExecuteAsyncOnStream`
with the device calls behind a small `Device` interface:

    allocate(size, alignment) -> Buffer     write(buffer, offset, bytes)    read(buffer, offset, size)
    load_kernel(ManifestKernel) -> handle   launch(handle, KernelThunk, [pointer per argument])
    gemm(GemmThunk, pointers)               copy(dst, src, size)            memset32(dst, size, value)
    convolution(ConvolutionThunk, pointers) (only where the platform's manifests have them: host)
    gemm_fusion(GemmFusionThunk, operand pointers, output pointer) (likewise)
    cudnn_convolution(CudnnConvolutionThunk, pointers by tensor name, workspace)  (cuda)
    collective(CollectiveThunk, pointers, label)  (several devices: the host over MPI)
    timer() -> a callable giving seconds since it was made (events on the GPU, perf_counter on host)

Constants are uploaded once at load; every run allocates the other allocations afresh (entry
parameters receive the arguments' bytes in physical layout order), executes the thunk tree
(while / conditional read their predicate back to the host) and reads every output leaf from its
slice. The 128-bit random-number state that rng-get-and-update-state thunks read and advance
starts at XLA's initial value on every run, as in a freshly loaded XLA executable and in the
interpreter, so repeated runs (`--iterations`) agree. Per-thunk times of the last run (summed
over loop iterations) are kept for `--iterations`.
An `observer` (`executable.observer = fn`) is called with every kernel, gemm, convolution, copy,
memset and rng-state thunk right after it ran, and `observer_before` right before, while the run's
buffers are live (`read_slice` reads one): `hlo-run --find-first-mismatch` (`hlo_run.bisect`) reads
operands before and compares each output with the interpreter after.
Runs longer than a second show a rich progress bar on stderr when stderr is a terminal.
"""

from __future__ import annotations

import abc
import contextlib
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from hlo_common.errors import HloError
from hlo_common.manifest.collective_thunks import CollectiveDoneThunk, CollectiveThunk, DeviceIdThunk
from hlo_common.manifest.cudnn_thunks import CudnnConvolutionThunk
from hlo_common.manifest.layout_bytes import array_to_bytes, bytes_to_array
from hlo_common.manifest.manifest import Allocation, ManifestKernel, Manifest
from hlo_common.manifest.thunks import (
    RNG_INITIAL_STATE, BufferSlice, ConditionalThunk, ConvolutionThunk, CopyThunk, GemmFusionThunk, GemmThunk,
    KernelThunk,
    MemsetThunk, RngGetAndUpdateStateThunk, SequentialThunk, Thunk, WhileThunk, thunk_labels,
)
from hlo_common.hlo.shape import Shape
from hlo_run.backends import Executable


class ThunkError(HloError):
    """A failure while running a thunk (names the thunk)."""


class Device(abc.ABC):
    """The memory and launch primitives one platform provides; addresses are integers."""

    name = ""
    ordinal = 0  # the global device id this device runs (several devices: its MPI rank)

    @abc.abstractmethod
    def allocate(self, size: int, alignment: int) -> Any: ...

    @abc.abstractmethod
    def address(self, buffer: Any) -> int: ...

    @abc.abstractmethod
    def write(self, buffer: Any, offset: int, data: bytes) -> None: ...

    @abc.abstractmethod
    def read(self, buffer: Any, offset: int, size: int) -> bytes: ...

    @abc.abstractmethod
    def load_kernel(self, kernel: ManifestKernel) -> Any: ...

    @abc.abstractmethod
    def launch(self, handle: Any, thunk: KernelThunk, pointers: list[int]) -> None: ...

    @abc.abstractmethod
    def gemm(self, thunk: GemmThunk, pointers: dict[str, int]) -> None: ...

    @abc.abstractmethod
    def copy(self, dst: int, src: int, size: int) -> None: ...

    @abc.abstractmethod
    def memset32(self, dst: int, size: int, value: int) -> None: ...

    def convolution(self, thunk: ConvolutionThunk, pointers: dict[str, int]) -> None:
        raise HloError(f"the {self.name} platform cannot run convolution thunks")

    def gemm_fusion(self, thunk: GemmFusionThunk, operands: list[int], output: int) -> None:
        raise HloError(f"the {self.name} platform cannot run GEMM fusion thunks")
    def cudnn_convolution(self, thunk: CudnnConvolutionThunk, pointers: dict[str, int],
                          workspace: int) -> None:
        """A cuDNN graph on device buffers: `pointers` by graph tensor name (the cuda platform)."""
        raise HloError(f"thunk {thunk.profile_annotation}: the {self.name} platform cannot run cuDNN "
                       "convolutions (a manifest for --target cuda; compile for this platform's target)")

    def collective(self, thunk: CollectiveThunk, pointers: list[tuple[int, int]], label: str) -> None:
        """A collective thunk; `pointers`: (source, destination) per buffer (several devices only:
        the host platform over MPI, `hlo_run.mpi_runtime`)."""
        raise HloError(f"thunk {label}: the {self.name} platform runs one device here; this manifest is "
                       "for several (run it with --platform host, which starts one MPI rank per device)")

    def synchronize(self) -> None:
        pass

    def running(self) -> contextlib.AbstractContextManager:
        """What a run's thunks execute under (the host: numpy's BLAS on one thread, set once)."""
        return contextlib.nullcontext()

    def write_array(self, buffer: Any, value: Any, shape: Shape) -> None:
        """Write a logical array at the start of `buffer` in the shape's physical layout."""
        data = array_to_bytes(value, shape)
        if data:
            self.write(buffer, 0, data)

    def read_array(self, buffer: Any, offset: int, size: int, shape: Shape, own: bool) -> np.ndarray:
        """The logical array of `size` bytes at `offset` in `buffer`. `own=False` lets a device
        hand back a view of its memory (the caller then owns the buffer; the host does that)."""
        raw = self.read(buffer, offset, size) if size else b""
        return bytes_to_array(raw, shape)

    def timer(self) -> Callable[[], float]:
        start = time.perf_counter()
        return lambda: time.perf_counter() - start

    def release(self, buffer: Any) -> None:
        pass

    def close(self) -> None:
        """Unload kernels and let go of the device (after the last run)."""


class ManifestExecutable(Executable):
    """A manifest loaded onto a device; `run(args)` may be called many times."""

    def __init__(self, manifest: Manifest, device: Device, name: str = ""):
        self.manifest = manifest
        self.device = device
        self.name = name or manifest.module_name
        self.parameter_shapes = manifest.parameter_shapes()
        self.result_shape = manifest.result_shape()
        self.labels = {id(t): label for t, label in thunk_labels(manifest.thunks)}
        from hlo_run.kernel_check import check_manifest_kernels

        check_manifest_kernels(manifest, self.name)  # before any kernel is loaded, let alone run
        prepare = getattr(device, "prepare", None)  # optional: a device may look at the launches first
        if prepare is not None:
            prepare(manifest)
        self.kernels = {name: self._load_kernel(k) for name, k in sorted(manifest.kernels.items())}
        self.constants = {a.index: self._upload_constant(a) for a in manifest.allocations
                          if a.kind == "constant"}
        from hlo_run.argument_borrowing import read_only_parameters

        # Parameter allocations whose argument the device may use in place (no copy; the host).
        borrows = getattr(device, "borrows_arguments", False)
        self.borrowable = read_only_parameters(manifest) if borrows else set()
        self._times: dict[int, float] = {}
        self.max_while_iterations: int | None = None  # hlo-run --max-while-iterations
        self._progress: _Progress | None = None
        self.observer: Callable[[Thunk], None] | None = None
        self.observer_before: Callable[[Thunk], None] | None = None
        self._dispatch: dict[type, Callable[[Thunk], None]] = {
            KernelThunk: self._kernel, GemmThunk: self._gemm, ConvolutionThunk: self._convolution,
            GemmFusionThunk: self._gemm_fusion,
            CudnnConvolutionThunk: self._cudnn_convolution,
            CopyThunk: self._copy,
            MemsetThunk: self._memset, RngGetAndUpdateStateThunk: self._rng_state, WhileThunk: self._while,
            ConditionalThunk: self._conditional,
            SequentialThunk: self._sequence,
            CollectiveThunk: self._collective, CollectiveDoneThunk: self._collective_done,
            DeviceIdThunk: self._device_id,
        }

    def _load_kernel(self, kernel: ManifestKernel) -> Any:
        try:
            return self.device.load_kernel(kernel)
        except Exception as exc:  # noqa: BLE001 - a driver / JIT failure, named
            detail = exc.one_line() if isinstance(exc, HloError) else _first_line(exc)
            raise ThunkError(f"{self.name}: cannot load kernel {kernel.name}: {detail}") from exc

    def _upload_constant(self, alloc: Allocation) -> Any:
        buf = self.device.allocate(alloc.size, alloc.alignment)
        if alloc.size:
            self.device.write(buf, 0, alloc.constant)
        return buf

    # -- running ----------------------------------------------------------------------------------
    def run(self, args: Sequence[Any]) -> Any:
        if len(args) != len(self.parameter_shapes):
            raise HloError(f"{self.name}: {len(args)} arguments for {len(self.parameter_shapes)} parameters")
        buffers, borrowed = self._allocate(args)
        try:
            self._bind(buffers, args, borrowed)
            self.buffers = buffers
            self.bases = {i: self.device.address(b) for i, b in buffers.items()}
            self._times = {}
            self.rng_state = RNG_INITIAL_STATE
            self._progress = _Progress.maybe(self.name, len(self.manifest.thunks.thunks))
            try:
                with self.device.running():
                    self._sequence(self.manifest.thunks, top=True)
                self.device.synchronize()
            finally:
                if self._progress is not None:
                    self._progress.close()
            return self._results(buffers)
        finally:
            for i, b in buffers.items():
                if i not in self.constants and i not in borrowed:
                    self.device.release(b)

    def close(self) -> None:
        """Give back what `__init__` took: constant buffers and loaded kernels (idempotent)."""
        for buffer in self.constants.values():
            self.device.release(buffer)
        self.constants = {}
        self.device.close()

    def profile(self) -> list[tuple[str, float]]:
        timed = sorted(self._times.items(), key=lambda kv: self.labels[kv[0]])
        return [(self.labels[k], v) for k, v in timed]

    def _allocate(self, args: Sequence[Any]) -> tuple[dict[int, Any], set[int]]:
        """The run's buffers, and the indices of those that are borrowed arguments."""
        from hlo_run.argument_borrowing import borrowed_buffer

        out, borrowed = dict(self.constants), set()
        for a in self.manifest.allocations:
            if a.kind == "constant":
                continue
            if a.index in self.borrowable:
                value, shape = self._argument(a, args)
                buffer = borrowed_buffer(value, shape, a)
                if buffer is not None:
                    out[a.index] = buffer
                    borrowed.add(a.index)
                    continue
            try:
                out[a.index] = self.device.allocate(a.size, a.alignment)
            except MemoryError:
                for i, b in out.items():
                    if i not in self.constants:
                        self.device.release(b)
                total = sum(x.size for x in self.manifest.allocations)
                raise ThunkError(f"allocation {a.index} ({_bytes_text(a.size)}) does not fit "
                                 f"in memory; the program's buffers take {_bytes_text(total)}") from None
        return out, borrowed

    def _argument(self, a: Allocation, args: Sequence[Any]) -> tuple[Any, Shape]:
        value, shape = args[a.parameter_number], self.parameter_shapes[a.parameter_number]
        for i in a.parameter_shape_index:
            value, shape = value[i], shape.tuple_shapes[i]
        return value, shape

    def _bind(self, buffers: dict[int, Any], args: Sequence[Any], borrowed: set[int]) -> None:
        for a in self.manifest.allocations:
            if a.kind == "parameter" and a.index not in borrowed:
                self.device.write_array(buffers[a.index], *self._argument(a, args))

    def _results(self, buffers: dict[int, Any]) -> Any:
        leaves = {}
        seen: set[int] = set()
        for out in self.manifest.entry.outputs:
            s = out.slice
            # A result may be a view of its run's buffer, unless that buffer outlives the run
            # (a constant) or another result shares its allocation.
            own = s.allocation in self.constants or s.allocation in seen
            seen.add(s.allocation)
            leaves[out.shape_index] = self.device.read_array(buffers[s.allocation], s.offset, s.size,
                                                             self.manifest.shape(out.shape), own)
        return _assemble(self.result_shape, (), leaves)

    def pointer(self, s: BufferSlice) -> int:
        return self.bases[s.allocation] + s.offset

    # -- thunks ------------------------------------------------------------------------------------
    def _execute(self, thunk: Thunk) -> None:
        handler = self._dispatch[type(thunk)]
        if isinstance(thunk, (SequentialThunk, WhileThunk, ConditionalThunk)):
            handler(thunk)
            return
        if self.observer_before is not None:
            self.observer_before(thunk)
        elapsed = self.device.timer()
        try:
            handler(thunk)
        except HloError:
            raise
        except Exception as exc:  # noqa: BLE001 - a device failure, named by thunk
            raise ThunkError(f"{self.name}: thunk {self.labels.get(id(thunk), thunk.kind)} failed: "
                                f"{_first_line(exc)}") from exc
        self._times[id(thunk)] = self._times.get(id(thunk), 0.0) + elapsed()
        if self.observer is not None:
            self.observer(thunk)

    def read_slice(self, s: BufferSlice, shape_text: str) -> np.ndarray:
        """The logical array a slice of the running program's buffers holds (for observers)."""
        raw = self.device.read(self.buffers[s.allocation], s.offset, s.size) if s.size else b""
        return bytes_to_array(raw, self.manifest.shape(shape_text))

    def _sequence(self, thunk: SequentialThunk, top: bool = False) -> None:
        for t in thunk.thunks:
            self._execute(t)
            if top and self._progress is not None:
                self._progress.advance()

    def _kernel(self, thunk: KernelThunk) -> None:
        self.device.launch(self.kernels[thunk.kernel], thunk, [self.pointer(a.slice) for a in thunk.args])
        check = getattr(self.device, "check_guards", None)
        if check is not None:
            problem = check(self.bases[a.slice.allocation] for a in thunk.args if a.written)
            if problem is not None:
                raise ThunkError(f"{self.name}: thunk {self.labels.get(id(thunk), thunk.kind)} {problem}")

    def _gemm(self, thunk: GemmThunk) -> None:
        roles = {"lhs": thunk.lhs, "rhs": thunk.rhs, "output": thunk.output, "c": thunk.c, "bias": thunk.bias,
                 "workspace": thunk.workspace}
        self.device.gemm(thunk, {k: self.pointer(s) for k, s in roles.items() if s is not None})

    def _convolution(self, thunk: ConvolutionThunk) -> None:
        roles = {"input": thunk.input, "filter": thunk.filter, "output": thunk.output}
        self.device.convolution(thunk, {k: self.pointer(s) for k, s in roles.items()})

    def _gemm_fusion(self, thunk: GemmFusionThunk) -> None:
        self.device.gemm_fusion(thunk, [self.pointer(o) for o in thunk.operands], self.pointer(thunk.output))
    def _cudnn_convolution(self, thunk: CudnnConvolutionThunk) -> None:
        pointers = {name: self.pointer(s) for name, s in thunk.buffers}
        workspace = self.pointer(thunk.workspace) if thunk.workspace is not None else 0
        self.device.cudnn_convolution(thunk, pointers, workspace)

    def _collective(self, thunk: CollectiveThunk) -> None:
        pointers = [(self.pointer(b.source), self.pointer(b.destination)) for b in thunk.buffers]
        self.device.collective(thunk, pointers, self.labels.get(id(thunk), thunk.kind))

    def _device_id(self, thunk: DeviceIdThunk) -> None:
        replica, partition = divmod(self.device.ordinal, self.manifest.num_partitions)
        value = replica if thunk.which == "replica" else partition
        s = thunk.destination
        self.device.write(self.buffers[s.allocation], s.offset, value.to_bytes(4, "little"))

    def _collective_done(self, thunk: CollectiveDoneThunk) -> None:
        pass  # the host runs a Start thunk to completion: its Done has nothing left to wait for

    def _copy(self, thunk: CopyThunk) -> None:
        if thunk.source.size:
            self.device.copy(self.pointer(thunk.destination), self.pointer(thunk.source), thunk.source.size)

    def _memset(self, thunk: MemsetThunk) -> None:
        if thunk.destination.size:
            self.device.memset32(self.pointer(thunk.destination), thunk.destination.size, thunk.value)

    def _rng_state(self, thunk: RngGetAndUpdateStateThunk) -> None:
        s = thunk.destination
        self.device.write(self.buffers[s.allocation], s.offset, self.rng_state.to_bytes(16, "little"))
        self.rng_state = (self.rng_state + thunk.delta) % (1 << 128)

    def _read_scalar(self, s: BufferSlice, dtype) -> Any:
        raw = self.device.read(self.buffers[s.allocation], s.offset, np.dtype(dtype).itemsize)
        return np.frombuffer(raw, dtype=dtype)[0]

    def _while(self, thunk: WhileThunk) -> None:
        limit = self.max_while_iterations
        done = 0
        while True:
            self._sequence(thunk.condition)
            if not self._read_scalar(thunk.predicate, np.bool_):
                return
            if limit is not None and done >= limit:
                name = thunk.profile_annotation
                raise ThunkError(f"{self._place(name)}: while %{name} reached --max-while-iterations={limit} "
                                 "and its condition still holds")
            self._sequence(thunk.body)
            done += 1
            if self._progress is not None:
                self._progress.refresh()

    def _place(self, instruction: str) -> str:
        """FILE:LINE:COL of the instruction in the module the user gave (`source_module`) when it
        has one of that name, else its line in the manifest's HLO (the module as compiled)."""
        import re

        from hlo_common.hlo.hlo_utils import instruction_place

        if self.source_module is not None:
            for comp in self.source_module.computations:
                try:
                    instr = comp.instruction(instruction)
                except KeyError:
                    continue
                if instr.opcode == "while" and instr.source is not None:
                    return instruction_place(instr)
        text = self.manifest.hlo
        m = re.search(rf"^[ \t]*(?:ROOT[ \t]+)?%?({re.escape(instruction)})[ \t]*=", text, re.M)
        where = f"{self.name}: in the compiled module {self.manifest.module_name}"
        return where if m is None else f"{where}, line {text.count(chr(10), 0, m.start(1)) + 1}"

    def _conditional(self, thunk: ConditionalThunk) -> None:
        n = len(thunk.branches)
        if thunk.index_is_bool:
            branch = 0 if self._read_scalar(thunk.branch_index, np.bool_) else 1
        else:
            index = int(self._read_scalar(thunk.branch_index, np.int32))
            branch = index if 0 <= index < n else n - 1
        self._sequence(thunk.branches[branch])


def _assemble(shape: Shape, index: tuple[int, ...], leaves: dict) -> Any:
    from hlo_common.interpreter.registry import TOKEN

    if shape.is_tuple:
        return tuple(_assemble(s, index + (i,), leaves) for i, s in enumerate(shape.tuple_shapes))
    if not shape.is_array:
        return TOKEN
    return leaves[index]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class _Progress:
    """A rich progress bar over the top-level thunks, shown only after a second on a terminal."""

    DELAY_S = 1.0

    def __init__(self, name: str, total: int):
        self.name = name
        self.total = total
        self.start = time.perf_counter()
        self.done = 0
        self.bar = None
        self.task = None

    @staticmethod
    def maybe(name: str, total: int) -> _Progress | None:
        stream = sys.stderr
        return _Progress(name, total) if hasattr(stream, "isatty") and stream.isatty() else None

    def advance(self) -> None:
        self.done += 1
        self.refresh()

    def refresh(self) -> None:
        if self.bar is None:
            if time.perf_counter() - self.start < self.DELAY_S:
                return
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                TextColumn("{task.completed}/{task.total} thunks"), TimeElapsedColumn(),
                                console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(f"running {self.name}", total=self.total)
        self.bar.update(self.task, completed=self.done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def manifest_program(text: str, name: str):
    """A `Program` for a manifest file: the manifest plus its HLO module (for the interpreter and
    the reference platforms)."""
    from hlo_common.manifest.manifest import load_manifest
    from hlo_common.hlo.parser import parse_module
    from hlo_run.backends import Program

    manifest = load_manifest(text, name)
    module = parse_module(manifest.hlo, f"{name} (module {manifest.module_name})")
    return Program(name, module, manifest.hlo, manifest)


def _bytes_text(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"
