"""Reading a manifest's JSON with the path of every bad field in the message
(`thunks[2].body[0].args[1]: missing 'slice'`): `JsonReader` gives typed access to one object and
raises `ManifestError` on anything else. Part of the manifest schema (`hlo_common.manifest`); the
thunks' and the manifest's `from_json` read through it.
"""

from __future__ import annotations

from typing import Any

from hlo_common.errors import InputError


class ManifestError(InputError):
    """A manifest that cannot be used: truncated, another version, failed checks, bad references."""


# -- reading JSON with paths in the messages ---------------------------------------------------------
class JsonReader:
    """Typed access to one JSON object; every failure is a ManifestError naming `path.key`."""

    def __init__(self, data: Any, path: str):
        if not isinstance(data, dict):
            raise ManifestError(f"{path}: expected an object, found {type(data).__name__}")
        self.data = data
        self.path = path

    def _get(self, key: str, optional: bool = False) -> Any:
        if key not in self.data:
            if optional:
                return None
            raise ManifestError(f"{self.path}: missing '{key}'")
        return self.data[key]

    def int(self, key: str, optional: bool = False, minimum: int | None = 0) -> int | None:
        v = self._get(key, optional)
        if v is None and optional:
            return None
        if not isinstance(v, int) or isinstance(v, bool):
            raise ManifestError(f"{self.path}.{key}: expected an integer, found {v!r:.40}")
        if minimum is not None and v < minimum:
            raise ManifestError(f"{self.path}.{key}: {v} is below {minimum}")
        return v

    def float(self, key: str) -> float:
        v = self._get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ManifestError(f"{self.path}.{key}: expected a number, found {v!r:.40}")
        return float(v)

    def str(self, key: str, optional: bool = False) -> str | None:
        v = self._get(key, optional)
        if v is None and optional:
            return None
        if not isinstance(v, str):
            raise ManifestError(f"{self.path}.{key}: expected a string, found {v!r:.40}")
        return v

    def bool(self, key: str) -> bool:
        v = self._get(key)
        if not isinstance(v, bool):
            raise ManifestError(f"{self.path}.{key}: expected true or false, found {v!r:.40}")
        return v

    def list(self, key: str) -> list:
        v = self._get(key)
        if not isinstance(v, list):
            raise ManifestError(f"{self.path}.{key}: expected a list, found {type(v).__name__}")
        return v

    def ints(self, key: str, length: int | None = None) -> tuple[int, ...]:
        v = self.list(key)
        if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
            raise ManifestError(f"{self.path}.{key}: expected non-negative integers")
        if length is not None and len(v) != length:
            raise ManifestError(f"{self.path}.{key}: expected {length} integers, found {len(v)}")
        return tuple(v)

    def obj(self, key: str, optional: bool = False) -> JsonReader | None:
        v = self._get(key, optional)
        if v is None and optional:
            return None
        return JsonReader(v, f"{self.path}.{key}")
