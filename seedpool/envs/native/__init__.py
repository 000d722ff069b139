"""The engine's side of vector-native env families: every env of a family stepped in one call.

`NativeEnv` (base.py) is the interface a family implements (see docs/engine.md); the
executor, threads, background lanes, part ring, atomics and compiled bookkeeping here run
any family; the families themselves live in seedpool/envs/families/. Public names:
`NativeEnv`, `register_native` and `native_ids` (the registry, seedpool/envs/registry.py),
`check_native_env` (seedpool/envs/check_native.py).

Only `NativeEnv` is imported eagerly. Importing any module of this package runs this file
first, and `make` imports this package's modules: importing the checker (which imports
`make`) or the registry here would import them half-built. The others load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from seedpool.envs.native.base import NativeEnv

_LAZY = {
    "native_ids": "seedpool.envs.registry",
    "register_native": "seedpool.envs.registry",
    "check_native_env": "seedpool.envs.check_native",
    "CheckReport": "seedpool.envs.check_native",
    "NativeMismatch": "seedpool.envs.check_native",
}

__all__ = ["NativeEnv", "native_ids", "register_native", "check_native_env", "CheckReport", "NativeMismatch"]


def __getattr__(name: str) -> Any:
    """The public names defined outside this package, imported on first use (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)
