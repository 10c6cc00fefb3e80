"""`hlo_common.interpreter.blas.single_threaded` under overlapping blocks: the N-device runtime
evaluates each device on its own thread, each inside its own block, and the process-wide OpenBLAS
thread count must stay 1 until the last block leaves (else a replica's dot may sum in another
order and replicas of one tile disagree)."""

from __future__ import annotations

import pytest

from hlo_common.interpreter import blas


def test_overlapping_blocks_keep_one_thread_until_the_last_one_leaves():
    controls = blas._find_controls()
    if controls is None:
        pytest.skip("numpy's BLAS is not OpenBLAS")
    get, put = controls
    before = get()
    put(2)
    try:
        first, second = blas.single_threaded(), blas.single_threaded()
        first.__enter__()
        assert get() == 1
        second.__enter__()
        first.__exit__(None, None, None)  # the first device finishes while the second computes
        assert get() == 1
        second.__exit__(None, None, None)
        assert get() == 2
    finally:
        put(before)
