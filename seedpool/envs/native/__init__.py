"""Vector-native env families: every env of a family stepped in one call, on arrays.

`NativeEnv` is the interface a family implements (see docs/engine.md); `register_native`
gives a task id a native family; `check_native_env` compares a family with its single-env
version. Gymnasium's classic control ids are registered here.
"""

from seedpool.envs.native.base import NativeEnv
from seedpool.envs.native.check import CheckReport, NativeMismatch, check_native_env
from seedpool.envs.native.registry import native_ids, register_native

__all__ = ["NativeEnv", "native_ids", "register_native", "check_native_env", "CheckReport", "NativeMismatch"]
