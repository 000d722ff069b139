"""`EnvView`: what per-env calls (`env_call`, `make_vec(...).get_attr`, SB3's `get_attr`) see
of env i of a native family, which has no env objects.

Reads of the single env's constant attributes (spaces, `render_mode`, `metadata`, `spec`,
physical constants) come from the family's `reference` gymnasium env; `np_random` and
`np_random_seed` are env i's own. Attributes the single env changes while it runs
(`state`, ...) exist only as rows of the family's arrays: reading them, setting anything,
or rendering raises an error that names `native=False`, the path with env objects.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from seedpool.envs.errors import EnvPoolError
from seedpool.envs.native.base import NativeEnv


def _hint(family: NativeEnv, what: str) -> str:
    return (f"{what}: this pool runs the native family {type(family).__name__}, which keeps every env's "
            "state in arrays and has no env objects; make the pool with native=False for per-env access")


class EnvView:
    """Env i of a native family, as far as per-env calls can see it (read-only)."""

    def __init__(self, family: NativeEnv, i: int):
        object.__setattr__(self, "_family", family)
        object.__setattr__(self, "_i", i)

    @property
    def unwrapped(self) -> "EnvView":
        """The view itself: there is no env object underneath."""
        return self

    @property
    def np_random(self) -> Any:
        """Env i's generator."""
        return self._family.rng(self._i)

    @property
    def np_random_seed(self) -> int | None:
        """The seed env i's generator came from (gymnasium's `np_random_seed`)."""
        return self._family.seed_of(self._i)

    def __getattr__(self, name: str) -> Any:
        family = self._family
        reference = family.reference
        if reference is None or name.startswith("_") or name in family.state_names():
            raise AttributeError(_hint(family, f"env {self._i} has no readable attribute {name!r}"))
        value = getattr(reference, name)
        if callable(value) and not isinstance(value, gym.Space):  # a method would act on the reference
            raise AttributeError(_hint(family, f"env {self._i} has no method {name!r} to call"))
        return value

    def get_wrapper_attr(self, name: str) -> Any:
        """gymnasium's lookup through wrappers (there are none)."""
        return getattr(self, name)

    def has_wrapper_attr(self, name: str) -> bool:
        """Whether `get_wrapper_attr(name)` answers."""
        try:
            getattr(self, name)
        except AttributeError:
            return False
        return True

    def set_wrapper_attr(self, name: str, value: Any) -> None:
        """Refused: one env of a native family cannot be changed on its own."""
        raise EnvPoolError(_hint(self._family, f"cannot set {name!r} on env {self._i}"))

    def __setattr__(self, name: str, value: Any) -> None:
        self.set_wrapper_attr(name, value)

    def render(self) -> Any:
        """Refused: native families do not render."""
        raise EnvPoolError(_hint(self._family, f"env {self._i} cannot render"))
