"""Which tasks are multi-agent, and the PettingZoo factory each one names.

A task is multi-agent when it is (or its factory returns) a PettingZoo `ParallelEnv` or
`AECEnv`: a zero-argument callable, a `"module:function"` string, or a PettingZoo id
(`"simple_spread_v3"`, `"pistonball_v6"`, `"connect_four_v3"`: looked up in mpe2 and
PettingZoo's families, `parallel_env` preferred where the module has one). Nothing here
imports PettingZoo unless the task can only be one of its envs.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

from seedpool.errors import ConfigError, UnknownEnvError

# PettingZoo's ids are lower_snake_case with a version (gymnasium's are CamelCase-v0).
_PZ_ID = re.compile(r"^[a-z][a-z0-9_]*_v\d+$")
# Where PettingZoo ids live, in the order they are looked up (mpe2 is MPE's maintained home).
_PZ_PACKAGES = ("mpe2", "pettingzoo.butterfly", "pettingzoo.classic", "pettingzoo.sisl", "pettingzoo.atari")
EXTRA = "multiagent"


@dataclass
class AgentTask:
    """A multi-agent task: its factory, a name, and an env it built (read for the layout)."""

    env_fn: Callable[[], Any]
    name: str
    probe: Any
    turn_based: bool
    task_id: str | None = None  # a PettingZoo id, where the task was one (native families are by id)

    def close_probe(self) -> None:
        if self.probe is not None:
            try:
                self.probe.close()
            finally:
                self.probe = None


def is_pettingzoo(obj: Any) -> str | None:
    """"parallel", "aec" or None: what kind of PettingZoo env `obj` is (PettingZoo not imported
    means it is none)."""
    mod = sys.modules.get("pettingzoo.utils.env")
    if mod is None:
        return None
    if isinstance(obj, mod.ParallelEnv):
        return "parallel"
    if isinstance(obj, mod.AECEnv):
        return "aec"
    return None


def is_pettingzoo_id(task: Any) -> bool:
    """Whether `task` is spelled as a PettingZoo id (lower_snake_case with a version)."""
    return isinstance(task, str) and bool(_PZ_ID.match(task))


def pettingzoo_id_factory(task_id: str, options: dict[str, Any]) -> Callable[[], Any] | None:
    """The factory of a PettingZoo id (with `options` bound), None if `task_id` is not one."""
    if not _PZ_ID.match(task_id):
        return None
    for package in _PZ_PACKAGES:
        try:
            module = importlib.import_module(f"{package}.{task_id}")
        except ModuleNotFoundError as err:
            if err.name and (err.name == package.split(".")[0]):
                continue  # the package itself is not installed
            if err.name and err.name.startswith(f"{package}.{task_id}"):
                continue
            if err.name and err.name.startswith(package):
                continue
            raise ConfigError(f"{task_id!r} needs {err.name!r}: pip install 'seedpool[{EXTRA}]'") from err
        fn = getattr(module, "parallel_env", None) or getattr(module, "env", None)
        if fn is not None:
            return functools.partial(fn, **options) if options else fn
    if not any(_installed(p.split(".")[0]) for p in _PZ_PACKAGES):
        raise UnknownEnvError(f"{task_id!r} looks like a PettingZoo id, but neither pettingzoo nor mpe2 is "
                              f"installed: pip install 'seedpool[{EXTRA}]'")
    return None


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _module_function(task: str) -> Callable[[], Any] | None:
    """`"module:function"` -> the function, where the part after the colon names a callable
    (gymnasium's `"module:Env-v0"` names an id instead: None)."""
    module_name, _, attr = task.partition(":")
    if not attr or not attr.isidentifier():
        return None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError:
        return None
    fn = getattr(module, attr, None)
    return fn if callable(fn) else None


def find_agent_task(task: Any, options: dict[str, Any]) -> tuple[AgentTask | None, Any]:
    """(the multi-agent task, None), or (None, an env a callable task already built: the
    single-agent path reuses it instead of calling the factory again), or (None, None)."""
    task_id = None
    if isinstance(task, str):
        fn = pettingzoo_id_factory(task, options)
        if fn is not None:
            task_id = task
        else:
            fn = _module_function(task)
            if fn is None:
                return None, None
            if options:
                fn = functools.partial(fn, **options)
    elif callable(task) and not isinstance(task, type) or _is_pettingzoo_class(task):
        if sys.modules.get("pettingzoo.utils.env") is None:
            return None, None  # PettingZoo never imported: the factory cannot build one of its envs
        fn = task
    else:
        return None, None
    probe = fn()
    kind = is_pettingzoo(probe)
    if kind is None:
        if isinstance(task, str):
            probe.close() if hasattr(probe, "close") else None
            return None, None
        return None, probe
    name = task if isinstance(task, str) else getattr(task, "__name__", type(probe).__name__)
    return AgentTask(fn, name, probe, kind == "aec", task_id), None


def _is_pettingzoo_class(task: Any) -> bool:
    mod = sys.modules.get("pettingzoo.utils.env")
    return isinstance(task, type) and mod is not None and issubclass(task, (mod.ParallelEnv, mod.AECEnv))
