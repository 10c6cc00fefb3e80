"""hlo-run's argument rule for `unique_indices=true` scatters: the generated indices scatter every
element at most once (windows tiled without overlap, in bounds), checked by counting coverage
with numpy; sorted when the scatter says so; the plain index bound otherwise."""

from __future__ import annotations

import numpy as np
import pytest

from hlo_common.hlo.parser import parse_module
from hlo_run.inputs import make_fake_arguments

ADD = "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n"


def scatter_1d(n: int, unique: bool = True) -> str:
    flags = f"indices_are_sorted=true, unique_indices={'true' if unique else 'false'}"
    return f"""HloModule s
{ADD}ENTRY e {{ o = f32[10000] parameter(0) i = s32[{n},1] parameter(1) u = f32[{n},32] parameter(2)
  ROOT s = f32[10000] scatter(o, i, u), update_window_dims={{1}}, inserted_window_dims={{}},
    scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, {flags}, to_apply=add }}"""


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sorted_unique_windows_do_not_overlap_and_stay_in_bounds(seed):
    idx = make_fake_arguments(parse_module(scatter_1d(10)), seed)[1].reshape(-1)
    assert idx.dtype == np.int32
    assert np.all(np.diff(idx) >= 32), idx  # sorted, and each window of 32 starts after the last ends
    assert idx.min() >= 0 and idx.max() + 32 <= 10000


def test_two_scatter_dims_with_an_inserted_dim_cover_each_element_once():
    text = f"""HloModule s
{ADD}ENTRY e {{ o = f32[6,20,3] parameter(0) i = s32[2,4,5] parameter(1) u = f32[4,5,3,3] parameter(2)
  ROOT s = f32[6,20,3] scatter(o, i, u), update_window_dims={{2,3}}, inserted_window_dims={{0}},
    scatter_dims_to_operand_dims={{1,0}}, index_vector_dim=0, unique_indices=true, to_apply=add }}"""
    idx = make_fake_arguments(parse_module(text), 0)[1]
    covered = np.zeros((6, 20, 3), np.int64)
    for v in idx.reshape(2, -1).T:  # component 0 -> operand dim 1 (window 3), 1 -> dim 0 (inserted)
        d1, d0 = int(v[0]), int(v[1])
        assert d1 % 3 == 0 and d1 + 3 <= 20 and 0 <= d0 < 6
        covered[d0, d1:d1 + 3, :] += 1
    assert covered.max() == 1 and covered.sum() == 20 * 3 * 3


def test_without_room_for_unique_windows_or_the_flag_the_plain_bound_applies():
    for text in (scatter_1d(400), scatter_1d(10, unique=False)):
        idx = make_fake_arguments(parse_module(text), 0)[1]
        assert idx.min() >= 0 and idx.max() <= 9999 and np.all(np.diff(idx.reshape(-1)) >= 0)
    crowded = make_fake_arguments(parse_module(scatter_1d(400)), 0)[1].reshape(-1)
    assert np.any(np.diff(crowded) < 32)  # 400 windows of 32 cannot tile 10000 elements
