"""Options of Ray actor groups, how they resolve against a cluster's CPUs, and the errors a user
sees; importing this module never imports Ray."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from seedpool.errors import ConfigError

INSTALL_HINT = "pip install 'seedpool[ray]'"


class RayNotInstalledError(ConfigError, ImportError):
    """--ray-address was given but Ray is not installed (a ConfigError: the CLI prints it in one line)."""


class ClusterError(ConfigError, ConnectionError):
    """The Ray cluster cannot be reached or cannot place any actor group; the message says what to do."""


@dataclass
class RayConfig:
    """Actor groups on a Ray cluster (with --ray-address): each group is one engine pool on a node."""

    num_groups: int | None = None
    """Actor groups; default as many as the cluster's CPUs hold (its CPUs // cpus_per_group)."""
    envs_per_group: int | None = None
    """Envs in each group's pool; default num_envs split evenly over the groups (at least 2)."""
    cpus_per_group: int | None = None
    """CPUs each group reserves on its node (and its engine's worker processes, unless
    --acting.num-workers says otherwise); default min(4, the smallest node's CPUs)."""
    max_restarts: int = 20
    """Times Ray restarts a group whose process or node died (-1: no limit); its envs start afresh."""
    restart_timeout_s: float = 120.0
    """How long a dead group may take to come back; after that the run goes on without it
    (and stops with an error when no group is left)."""
    health_check_timeout_s: float = 60.0
    """A group that answers nothing for this long is killed, so that Ray restarts it (a hung process)."""
    placement_timeout_s: float = 60.0
    """How long the cluster may take to place the groups at the start; the run goes on with those placed."""


MAX_DEFAULT_CPUS_PER_GROUP = 4
"""Groups default to at most this many CPUs: bigger groups mean fewer, larger messages for the
driver, smaller ones fit on more nodes."""


@dataclass
class GroupLayout:
    """How acting is cut into groups."""

    num_groups: int
    envs_per_group: int
    batch_size: int
    """Envs per batch (the pool's recv size): half the group, so two batches are in flight."""
    cpus_per_group: int


def plan_groups(cfg: RayConfig, num_envs: int, envs_per_recv: int | None, node_cpus: list[float]) -> GroupLayout:
    """The settings given, and for the rest defaults that follow the CPUs of the cluster's nodes."""
    usable = [int(c) for c in node_cpus if c >= 1]
    if not usable:
        raise ClusterError("the Ray cluster has no node with a CPU to place actor groups on; "
                           "start nodes with `ray start --address ... --num-cpus N`")
    cpus = cfg.cpus_per_group or max(1, min(MAX_DEFAULT_CPUS_PER_GROUP, min(usable)))
    groups = cfg.num_groups or max(1, sum(c // cpus for c in usable))
    envs = cfg.envs_per_group or max(2, num_envs // groups)
    batch = envs_per_recv or max(1, envs // 2)
    if batch >= envs:
        raise ConfigError(f"envs_per_recv={batch} must be below the {envs} envs of each actor group "
                          "(central inference needs the engine's async mode)")
    return GroupLayout(groups, envs, batch, cpus)


def require_ray() -> ModuleType:
    """The `ray` module, or an error naming the extra to install."""
    try:
        return importlib.import_module("ray")
    except ImportError as err:
        raise RayNotInstalledError(
            f"--ray-address needs Ray, which is not installed here ({err}). Install it with "
            f"`{INSTALL_HINT}` on this machine and on every node of the cluster, or drop "
            "--ray-address to act on this machine") from None
