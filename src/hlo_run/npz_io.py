"""`.npz` files for `hlo-run --inputs` and `--output`.

Inputs are named `arg0` .. `argN-1` in entry-parameter order; outputs `out0` .. `outM-1`, the
array leaves of the result in depth-first order (a tuple result is flattened, tokens are
skipped). The leaves of a tuple-shaped *parameter* are named `argI.J` (`argI.J.K` when nested).

numpy cannot store every XLA element type, so some are kept in a wider storage type and converted
on load and save: bf16, f8 and the narrower floats as float32; the sub-byte integers s1/s2/s4 as
int8 and u1/u2/u4 as uint8. Every other type is stored as itself. A file whose names, shapes or
types do not fit the module is an `InputError` naming the array. Output files are written whole
or not at all (`hlo_common.cli_util.write_file_atomically`).
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from hlo_common.cli_util import write_file_atomically
from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.errors import InputError
from hlo_common.interpreter.registry import TOKEN
from hlo_common.hlo.shape import Shape
from hlo_run.compare import flatten_leaves

MAX_NPZ_STREAM_BYTES = 1 << 32  # an .npz read from a pipe or device (a regular file is read in place)


def storage_dtype(t: PrimitiveType) -> np.dtype:
    """The dtype an element type is stored as in an .npz file."""
    if t.is_float and t.name not in ("f16", "f32", "f64"):
        return np.dtype(np.float32)
    if t.is_integer and t.bits < 8:
        return np.dtype(np.int8 if t.kind == "signed" else np.uint8)
    return t.np_dtype


def to_storage(arr: np.ndarray) -> np.ndarray:
    """An array in its .npz storage dtype (bf16 -> float32, s4 -> int8, ...)."""
    from hlo_common.hlo.dtypes import from_numpy_dtype

    arr = np.asarray(arr)
    return arr.astype(storage_dtype(from_numpy_dtype(arr.dtype)))


def load_inputs(path: str | Path, parameter_shapes: list[Shape]) -> list[Any]:
    """Read `arg0..argN-1` from `path` and convert them to the parameters' element types.

    The archive's directory and every member's .npy header are read first: names, dtypes and
    shapes are checked against the parameters, and the sizes against the memory hlo-run may use,
    before any array's data is (an .npz whose header claimed a 373 GiB array was allocated before
    its shape was compared). Values outside the element type's range are an error naming the
    array (s4 100 wrapped to 4; f8e4m3fn 1000 became NaN)."""
    from hlo_run.memory_budget import available_bytes, check_fits

    expected: dict[str, Shape] = {}
    for i, shape in enumerate(parameter_shapes):
        for name, leaf in _leaf_names(f"arg{i}", shape):
            expected[name] = leaf
    with open_npz(path) as archive:
        members = _members(archive, path)
        for name in sorted(members):
            if name not in expected:
                raise InputError(f"{path}: unexpected array '{name}' "
                                 f"(the module takes {_names_text(expected)})")
        for name in expected:
            if expected[name].is_array and name not in members:
                raise InputError(f"{path}: missing array '{name}' ({expected[name].to_string(False)})")
        budget, total = available_bytes(), 0
        for name, info in members.items():
            dims, dtype = _header(archive, info, path, name)
            _check_header(path, name, expected[name], dims, dtype)
            total += _prod(dims) * (dtype.itemsize + expected[name].element_type.np_dtype.itemsize)
            check_fits(total, f"{path}: array '{name}' ({expected[name].to_string(False)})", budget)
        arrays = {name: _read_member(archive, info, path, name) for name, info in members.items()}
    return [_build(f"arg{i}", shape, arrays, path) for i, shape in enumerate(parameter_shapes)]


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def open_npz(path: str | Path) -> zipfile.ZipFile:
    """The .npz archive at `path` (InputError when it is not one). A regular file is read in place;
    anything else (a FIFO, a device) is read into memory up to MAX_NPZ_STREAM_BYTES, after its
    first bytes were found to start a zip archive (/dev/zero is refused at once)."""
    from hlo_common.source import open_input, read_capped

    name = str(path)
    with open_input(name) as f:
        regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
        try:
            head = f.read(6)
        except OSError as exc:
            raise InputError(f"cannot read '{name}': {exc.strerror or exc}") from None
        if head.startswith(b"\x93NUMPY"):
            raise InputError(f"{path}: a single .npy array, not an .npz archive (save with numpy.savez)")
        if not head.startswith(b"PK"):
            raise InputError(f"{path}: not an .npz file (no zip archive inside; save with numpy.savez)")
        data = None if regular else head + read_capped(f, name, MAX_NPZ_STREAM_BYTES - len(head))
    try:
        return zipfile.ZipFile(name if data is None else io.BytesIO(data))
    except (OSError, zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise InputError(f"{path}: not a readable .npz file ({_first_line(exc)})") from None


def _members(archive: zipfile.ZipFile, path) -> dict[str, zipfile.ZipInfo]:
    out = {}
    for info in archive.infolist():
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if name in out:
            raise InputError(f"{path}: array '{name}' is in the archive twice")
        out[name] = info
    return out


def _header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path, name: str) -> tuple[tuple, np.dtype]:
    """(shape, dtype) from a member's .npy header, without reading its data."""
    from numpy.lib import format as npy

    try:
        with archive.open(info) as f:
            version = npy.read_magic(f)
            reader = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}.get(version)
            if reader is None:
                raise ValueError(f"unsupported .npy format version {version}")
            shape, _, dtype = reader(f)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
        raise InputError(f"{path}: array '{name}' cannot be read ({_first_line(exc)})") from None
    if dtype.hasobject:
        raise InputError(f"{path}: holds object (pickled) arrays; only numeric arrays are read")
    return tuple(shape), dtype


def _check_header(path, name: str, shape: Shape, dims: tuple, dtype: np.dtype) -> None:
    t = shape.element_type
    want = storage_dtype(t)
    if dtype != want and dtype != t.np_dtype:
        raise InputError(f"{path}: array '{name}' has dtype {dtype}, expected {want} "
                         f"for {shape.to_string(False)}")
    if tuple(dims) != tuple(shape.dims):
        raise InputError(f"{path}: array '{name}' has shape {list(dims)}, expected {list(shape.dims)} for "
                         f"{shape.to_string(False)}")


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path, name: str) -> np.ndarray:
    from numpy.lib import format as npy

    try:
        with archive.open(info) as f:
            return npy.read_array(f, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, RuntimeError, NotImplementedError) as exc:
        raise InputError(f"{path}: array '{name}' cannot be read ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _leaf_names(prefix: str, shape: Shape) -> list[tuple[str, Shape]]:
    if not shape.is_tuple:
        return [(prefix, shape)]
    out = []
    for j, sub in enumerate(shape.tuple_shapes):
        out.extend(_leaf_names(f"{prefix}.{j}", sub))
    return out


def _names_text(expected: dict[str, Shape]) -> str:
    names = [n for n, s in expected.items() if s.is_array]
    return ", ".join(names) if names else "no arguments"


def _build(name: str, shape: Shape, arrays: dict[str, np.ndarray], path) -> Any:
    if shape.is_tuple:
        return tuple(_build(f"{name}.{j}", s, arrays, path) for j, s in enumerate(shape.tuple_shapes))
    if not shape.is_array:
        return TOKEN
    arr = arrays[name]
    _check_header(path, name, shape, arr.shape, arr.dtype)
    t = shape.element_type
    value = arr.astype(t.np_dtype)
    if arr.dtype != value.dtype:
        _check_range(path, name, t, arr, value)
    return value


def _check_range(path, name: str, t: PrimitiveType, stored: np.ndarray, value: np.ndarray) -> None:
    """Stored values the element type cannot hold: integers outside its range (which would wrap)
    and finite floats beyond its largest finite value (which would become inf or NaN)."""
    if t.is_integer:
        signed = t.kind == "signed"
        lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if signed else (0, (1 << t.bits) - 1)
        bad = (stored < lo) | (stored > hi)
        what = f"outside {t.name}'s range [{lo}, {hi}]"
    elif t.is_float:
        bad = np.isfinite(stored) & ~np.isfinite(value.astype(np.float32))
        what = f"beyond {t.name}'s largest finite value {float(ml_dtypes.finfo(t.np_dtype).max):g}"
    else:
        return
    if bad.any():
        first = stored.reshape(-1)[int(np.flatnonzero(bad.reshape(-1))[0])]
        raise InputError(f"{path}: array '{name}' holds {first.item()!r}, {what} "
                         f"({int(bad.sum())} value(s) out of range)")


def output_arrays(value: Any) -> dict[str, np.ndarray]:
    """`out0..outM-1` in storage dtypes, for a result value."""
    return {f"out{i}": to_storage(leaf) for i, leaf in enumerate(flatten_leaves(value))}


def save_outputs(path: str | Path, value: Any) -> None:
    """Write the result's leaves as `out0..` to `path`, atomically."""
    save_npz_atomic(path, output_arrays(value))


def save_arguments(path: str | Path, args: list[Any]) -> None:
    """Write arguments as `arg0..` (tuple leaves as `argI.J`), the format `--inputs` reads."""
    arrays: dict[str, np.ndarray] = {}
    for i, arg in enumerate(args):
        _collect_args(f"arg{i}", arg, arrays)
    save_npz_atomic(path, arrays)


def _collect_args(name: str, value: Any, out: dict[str, np.ndarray]) -> None:
    if isinstance(value, tuple):
        for j, v in enumerate(value):
            _collect_args(f"{name}.{j}", v, out)
    elif isinstance(value, (np.ndarray, np.generic)):
        out[name] = to_storage(np.asarray(value))


def save_npz_atomic(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` as an .npz file, whole or not at all (OutputError when it cannot)."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    write_file_atomically(path, buffer.getvalue())
