"""Place actor groups on a Ray cluster: connect, size the groups from its CPUs, spread them, wait.

`make_ray_sources` returns one `RayGroupSource` per group that the cluster placed in time;
the learner, the inference server and the trainers do not change.
"""
from __future__ import annotations

import logging
import os
import uuid
from typing import Any

from seedpool.distributed.config import ClusterError, GroupLayout, RayConfig, plan_groups, require_ray
from seedpool.distributed.group import ActorGroup
from seedpool.distributed.source import RayGroupSource, Roster, note

ray = require_ray()


def connect(address: str) -> bool:
    """Connect this process to the cluster as its driver; False if it already was connected."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, logging_level=logging.WARNING)
    except Exception as err:  # noqa: BLE001 - Ray raises several kinds; the user needs one message
        auth = "" if address == "auto" or os.environ.get("RAY_AUTH_MODE") else (
            "; if the cluster uses token authentication, set RAY_AUTH_MODE=token here too")
        raise ClusterError(
            f"cannot connect to a Ray cluster at {address!r} ({type(err).__name__}: {err}). Start one with "
            "`ray start --head` on this machine and pass --ray-address auto, or host:port of its head "
            f"(see docs/ray.md){auth}") from err
    return True


def make_ray_sources(address: str, cfg: RayConfig, make_kwargs: dict[str, Any], num_envs: int,
                     envs_per_recv: int | None, seed: int) -> list[RayGroupSource]:
    """Actor groups on the cluster at `address` (spread over its nodes), each an inference `Source`.

    `make_kwargs` are `seedpool.make`'s arguments but num_envs, batch_size and seed; group k
    gets seeds from seed + k * envs_per_group.
    """
    ours = connect(address)
    roster = Roster(disconnect=ours)
    handles: list[Any] = []
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        layout = plan_groups(cfg, num_envs, envs_per_recv, [n["Resources"].get("CPU", 0.0) for n in nodes])
        handles = _spawn(cfg, layout, make_kwargs, seed)
        room = sum(int(n["Resources"].get("CPU", 0.0)) // layout.cpus_per_group for n in nodes)
        sources = _placed(handles, layout, cfg, roster, room)
    except BaseException:
        for h in handles:
            ray.kill(h)
        if ours:
            ray.shutdown()
        raise
    spots = len({s.node_id for s in sources})
    note(f"Ray cluster at {address}: {len(sources)} actor group(s) x {layout.envs_per_group} envs "
         f"({layout.batch_size} per batch, 2 batches in flight) on {spots} node(s), "
         f"{layout.cpus_per_group} CPU(s) each")
    return sources


def _spawn(cfg: RayConfig, layout: GroupLayout, make_kwargs: dict[str, Any], seed: int) -> list[Any]:
    """Create the group actors (SPREAD over nodes); named, so the cluster's tools show whose they are."""
    remote = ray.remote(ActorGroup)
    run_id = uuid.uuid4().hex[:8]
    kwargs = {**make_kwargs, "num_envs": layout.envs_per_group, "batch_size": layout.batch_size}
    kwargs["num_workers"] = kwargs.get("num_workers") or layout.cpus_per_group
    return [
        remote.options(name=f"seedpool-{run_id}-group{k}", num_cpus=layout.cpus_per_group,
                       max_restarts=cfg.max_restarts, max_task_retries=0,
                       scheduling_strategy="SPREAD").remote(kwargs, seed + k * layout.envs_per_group)
        for k in range(layout.num_groups)
    ]


def _placed(handles: list[Any], layout: GroupLayout, cfg: RayConfig, roster: Roster,
            room: int) -> list[RayGroupSource]:
    """Sources of the groups that came up within the placement timeout; the others are killed.

    `room`: how many groups the cluster's nodes hold. Once that many are up, the rest get only
    a short look (a node may just have joined), not the whole timeout.
    """
    refs = [h.ready.remote() for h in handles]
    fits = max(1, min(len(refs), room))
    done, _ = ray.wait(refs, num_returns=fits, timeout=cfg.placement_timeout_s)
    if len(done) == fits < len(refs):
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=min(5.0, cfg.placement_timeout_s))
    ready = set(done)
    sources = []
    for k, (h, ref) in enumerate(zip(handles, refs)):
        if ref in ready:
            info = ray.get(ref)  # a group that failed to build its pool raises its error here
            sources.append(RayGroupSource(h, info, f"group{k}", cfg, roster))
        else:
            ray.kill(h)
    missing = len(handles) - len(sources)
    if missing:
        total = ray.cluster_resources().get("CPU", 0.0)
        why = (f"{missing} of {len(handles)} actor group(s) could not be placed within "
               f"{cfg.placement_timeout_s:.0f} s (each asks for {layout.cpus_per_group} CPU(s) on one node; "
               f"the cluster has {total:.0f} CPUs in all)")
        if not sources:
            raise ClusterError(f"{why}: no group to act with. Lower --ray.cpus-per-group or "
                               "--ray.num-groups, or add nodes")
        note(f"{why}: going on with {len(sources)} group(s)")
    return sources
