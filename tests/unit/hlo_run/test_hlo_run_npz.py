"""hlo_run.npz_io: names, storage types (bf16/f8 as float32), errors naming the array, atomic writes."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlo_common.errors import InputError, OutputError
from hlo_common.hlo.shape import Shape
from hlo_run.npz_io import load_inputs, save_arguments, save_outputs

SHAPES = [Shape.array("bf16", (3,)), Shape.array("f8e4m3fn", (2,)), Shape.array("s4", (2,)),
          Shape.array("f32", (2, 2)), Shape.array("pred", ())]


def _args():
    return [np.array([1.5, -2.0, 0.0078125], ml_dtypes.bfloat16),
            np.array([0.5, -448], ml_dtypes.float8_e4m3fn),
            np.array([-8, 7], ml_dtypes.int4), np.array([[1, 2], [3, 4]], np.float32), np.array(True)]


def test_round_trip_with_storage_types(tmp_path):
    path = tmp_path / "in.npz"
    save_arguments(path, _args())
    with np.load(path) as raw:
        assert raw["arg0"].dtype == np.float32 and raw["arg1"].dtype == np.float32
        assert raw["arg2"].dtype == np.int8 and raw["arg3"].dtype == np.float32
        np.testing.assert_array_equal(raw["arg0"], [1.5, -2.0, 0.0078125])
    loaded = load_inputs(path, SHAPES)
    for got, want in zip(loaded, _args()):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_user_written_float32_file_converts_to_bf16(tmp_path):
    path = tmp_path / "in.npz"
    np.savez(path, arg0=np.array([1.0, 1.00390625], np.float32))  # the second rounds to 1 in bf16
    (arg,) = load_inputs(path, [Shape.array("bf16", (2,))])
    assert arg.dtype == ml_dtypes.bfloat16 and arg.astype(np.float32).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("arrays, message", [
    ({"arg0": np.zeros(3, np.float32)}, "missing array 'arg1'"),
    ({"arg0": np.zeros(3, np.float32), "arg1": np.zeros(2, np.int32), "x": np.zeros(1)},
     "unexpected array 'x'"),
    ({"arg0": np.zeros(4, np.float32), "arg1": np.zeros(2, np.int32)},
     "array 'arg0' has shape [4], expected [3]"),
    ({"arg0": np.zeros(3, np.float64), "arg1": np.zeros(2, np.int32)}, "array 'arg0' has dtype float64"),
    ({"arg0": np.zeros(3, np.float32), "arg1": np.zeros(2, np.int64)}, "array 'arg1' has dtype int64"),
])
def test_wrong_names_shapes_types_name_the_array(tmp_path, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(InputError) as info:
        load_inputs(path, [Shape.array("f32", (3,)), Shape.array("s32", (2,))])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unreadable_and_missing_files(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_text("not a zip")
    with pytest.raises(InputError, match="not an .npz file"):
        load_inputs(bad, [])
    with pytest.raises(InputError, match="no such file"):
        load_inputs(tmp_path / "nope.npz", [])


def test_tuple_parameters_use_dotted_names(tmp_path):
    path = tmp_path / "t.npz"
    shape = Shape.tuple_of([Shape.array("f32", (2,)), Shape.tuple_of([Shape.array("s32", ())])])
    save_arguments(path, [(np.float32([1, 2]), (np.array(5, np.int32),))])
    with np.load(path) as raw:
        assert sorted(raw.files) == ["arg0.0", "arg0.1.0"]
    (value,) = load_inputs(path, [shape])
    assert value[0].tolist() == [1, 2] and int(value[1][0]) == 5


def test_outputs_are_flattened_and_written_atomically(tmp_path):
    path = tmp_path / "out.npz"
    save_outputs(path, (np.array([1, 2], ml_dtypes.bfloat16), (np.int32([3]), np.float32([4]))))
    with np.load(path) as raw:
        assert raw.files == ["out0", "out1", "out2"]
        assert raw["out0"].dtype == np.float32 and raw["out2"].tolist() == [4.0]
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]  # no temporary file left behind
    with pytest.raises(OutputError, match="cannot write"):
        save_outputs(tmp_path / "missing_dir" / "o.npz", np.float32([1]))
