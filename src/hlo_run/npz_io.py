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
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from hlo_common.cli_util import write_file_atomically
from hlo_common.hlo.dtypes import PrimitiveType
from hlo_common.errors import InputError
from hlo_common.interpreter.registry import TOKEN
from hlo_common.hlo.shape import Shape
from hlo_run.compare import flatten_leaves


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
    """Read `arg0..argN-1` from `path` and convert them to the parameters' element types."""
    arrays = read_npz(path)
    expected: dict[str, Shape] = {}
    for i, shape in enumerate(parameter_shapes):
        for name, leaf in _leaf_names(f"arg{i}", shape):
            expected[name] = leaf
    for name in sorted(arrays):
        if name not in expected:
            raise InputError(f"{path}: unexpected array '{name}' (the module takes {_names_text(expected)})")
    for name in expected:
        if expected[name].is_array and name not in arrays:
            raise InputError(f"{path}: missing array '{name}' ({expected[name].to_string(False)})")
    return [_build(f"arg{i}", shape, arrays, path) for i, shape in enumerate(parameter_shapes)]


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz file; an InputError saying why when it is not one (missing, a
    directory, unreadable, a lone .npy array, not a zip archive, object arrays)."""
    from hlo_common.source import read_bytes

    data = read_bytes(str(path))
    if data.startswith(b"\x93NUMPY"):
        raise InputError(f"{path}: a single .npy array, not an .npz archive (save with numpy.savez)")
    if not data.startswith(b"PK"):
        raise InputError(f"{path}: not an .npz file (no zip archive inside; save with numpy.savez)")
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            return {name: npz[name] for name in npz.files}
    except ValueError as exc:
        if "pickle" in str(exc):
            raise InputError(f"{path}: holds object (pickled) arrays; only numeric arrays are read") from None
        raise InputError(f"{path}: not a readable .npz file ({_first_line(exc)})") from None
    except (OSError, zipfile.BadZipFile, EOFError, KeyError) as exc:
        raise InputError(f"{path}: not a readable .npz file ({_first_line(exc)})") from None


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
    t = shape.element_type
    want = storage_dtype(t)
    if arr.dtype != want and arr.dtype != t.np_dtype:
        raise InputError(f"{path}: array '{name}' has dtype {arr.dtype}, expected {want} "
                         f"for {shape.to_string(False)}")
    if tuple(arr.shape) != tuple(shape.dims):
        raise InputError(f"{path}: array '{name}' has shape {list(arr.shape)}, expected "
                         f"{list(shape.dims)} for {shape.to_string(False)}")
    return arr.astype(t.np_dtype)


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
