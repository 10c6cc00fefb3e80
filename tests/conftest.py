"""Shared pytest set-up: the corpus location, and a kernel cache of the tests' own."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "helpers"))  # the shared test helpers (docs/testing.md)

# hlo-codegen caches kernels under the user's cache directory unless told otherwise
# (`hlo_codegen.kernel_cache`). Every compile the tests make, in this process or in a tool they
# start (hlo-run runs hlo-codegen), uses a temporary directory instead, whatever the environment
# says: the tests never read or write the user's cache.
CACHE_ENV = "HLO_TOOLCHAIN_CACHE_DIR"
_TEST_CACHE = tempfile.mkdtemp(prefix="hlo-test-kernel-cache-")
os.environ[CACHE_ENV] = _TEST_CACHE

# Multi-device modules are checked against XLA:CPU with N host devices, which XLA makes only when
# its client is created under this flag; set before any test creates one, the comparisons run in
# process (hlo_run.xla_cpu_devices otherwise starts a child process per run).
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()


def pytest_unconfigure(config) -> None:
    shutil.rmtree(_TEST_CACHE, ignore_errors=True)
