"""What the routing plugins share: skips by test name, and which tests built a routed env."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable

import pytest

# Node ids of the tests that built at least one env through a routed class; written to
# $SEEDPOOL_PEER_BUILDS (one per line) when set, so a report can count "tests that build a VecEnv".
_BUILT: set[str] = set()


def count_routed_builds(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Record the running test's id whenever the routed constructor `fn` is called."""

    @functools.wraps(fn)
    def routed(*args: Any, **kwargs: Any) -> Any:
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        if test:
            _BUILT.add(test)
        return fn(*args, **kwargs)

    return routed


def skip_by_name(items: list[pytest.Item], skips: dict[str, str], whose: str) -> None:
    """Skip each item whose name (with or without its parameters) is in `skips`."""
    for item in items:
        reason = skips.get(item.name) or skips.get(getattr(item, "originalname", ""))
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"{whose}: {reason}"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the ids of the tests that built a routed env, if asked to."""
    path = os.environ.get("SEEDPOOL_PEER_BUILDS")
    if path:
        with open(path, "w") as f:
            f.write("".join(f"{t}\n" for t in sorted(_BUILT)))
