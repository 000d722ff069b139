"""How central-inference acting is laid out: engine pools in async mode on this machine, or
actor groups on a Ray cluster (`--ray-address`), and the options every such trainer shares."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import seedpool
from seedpool.actors.pool_source import PoolSource
from seedpool.distributed.config import RayConfig
from seedpool.errors import ConfigError
from seedpool.experiment.config import RunConfig
from seedpool.inference.sources import Source


@dataclass
class ActingConfig:
    """Engine pools feeding one central inference server."""

    num_pools: int = 1
    """Engine pools, each with its own actor thread (a source); num_envs is split between them."""
    envs_per_recv: int | None = None
    """Envs per recv of each pool (the engine's async batch_size); default half the pool, so the halves overlap."""
    max_inference_batch: int | None = None
    """Largest inference batch (observations); default the sum of all pools' envs_per_recv."""
    max_wait_ms: float = 2.0
    """Deadline: a partial inference batch closes once its oldest request waited this long."""
    queue_size: int | None = None
    """Unrolls the learner's queue holds before inference blocks; default two learner batches."""
    num_workers: int | None = None
    """Engine worker processes per pool (default: the engine decides)."""
    restart_workers: bool = True
    """Restart a dead env worker process (its envs reset, partial unrolls dropped) instead of
    failing; thread workers cannot be replaced, so with --backend thread a failure stops the run."""
    serial: bool = False
    """Run actors, inference and learner in one thread, in turn: deterministic, for debugging."""


@dataclass
class CentralRunConfig(RunConfig):
    """Options every central-inference trainer shares: run options, and where and how acting runs."""

    acting: ActingConfig = field(default_factory=ActingConfig)
    ray_address: str | None = None
    """An existing Ray cluster to act on: "auto" for the one `ray start` made on this machine,
    or host:port of its head; None: local actors (Ray is not imported). With it, --ray.* lays
    out the actor groups instead of --acting.num-pools; see docs/ray.md."""
    ray: RayConfig = field(default_factory=RayConfig)


def make_sources(cfg: CentralRunConfig, seed: int, env_options: dict | None = None,
                 pools: Callable[..., list] | None = None) -> list[Source]:
    """What feeds the inference server: local engine pools, or Ray actor groups with ``ray_address``.

    Each source also has num_envs, batch_size and the single env's spaces; close them all.
    ``pools`` builds the local pools (default `make_pools`; a trainer passes its own name
    for it, so that tests can substitute it there).
    """
    if cfg.ray_address is None:
        made = (pools or make_pools)(cfg.env, cfg.num_envs, cfg.backend, cfg.acting, seed, env_options)
        return [_source(p, getattr(cfg, "ma", None)) for p in made]
    from seedpool.distributed.launch import make_ray_sources  # imports Ray (a clear error without it)

    make_kwargs = {"task": cfg.env, **_pool_options(cfg.backend, cfg.acting, env_options)}
    return make_ray_sources(cfg.ray_address, cfg.ray, make_kwargs, cfg.num_envs, cfg.acting.envs_per_recv, seed)


def _source(pool, ma) -> Source:
    """A pool as an inference source: a multi-agent pool's agent rows are the server's slots."""
    from seedpool.actors.agent_rows import AgentRowsSource, is_agent_pool

    if is_agent_pool(pool):
        if ma is None:
            pool.close()
            raise ConfigError("this trainer has no multi-agent options (--ma.*): it cannot train a multi-agent env")
        return AgentRowsSource(pool, ma)
    return PoolSource(pool)


def _pool_options(backend: str, cfg: ActingConfig, env_options: dict | None) -> dict[str, Any]:
    """`seedpool.make` arguments every central-inference pool shares."""
    on_death = "restart" if cfg.restart_workers and backend != "thread" else "raise"
    return {"backend": backend, "num_workers": cfg.num_workers, "on_worker_death": on_death,
            **(env_options or {})}


def make_pools(env_id: str, num_envs: int, backend: str, cfg: ActingConfig, seed: int,
               env_options: dict | None = None) -> list:
    """The engine pools in async mode, with disjoint env seeds."""
    per_pool = num_envs // cfg.num_pools
    if per_pool * cfg.num_pools != num_envs:
        raise ConfigError(f"num_envs={num_envs} must divide evenly into num_pools={cfg.num_pools}")
    batch = cfg.envs_per_recv or max(1, per_pool // 2)
    if batch >= per_pool:
        raise ConfigError(f"envs_per_recv={batch} must be below the {per_pool} envs of each pool "
                          "(central-inference acting needs the engine's async mode)")
    from seedpool.actors.agent_rows import make_envs  # a multi-agent env's groups by role where spaces differ

    options = _pool_options(backend, cfg, env_options)
    pools = []
    try:
        for k in range(cfg.num_pools):
            pools.append(make_envs(env_id, num_envs=per_pool, batch_size=batch, seed=seed + k * per_pool,
                                   **options))
    except BaseException:
        for p in pools:
            p.close()
        raise
    return pools


def close_all(sources: list) -> None:
    """Close every source (a closed one ignores it), the last error raised after all are closed."""
    errors = []
    for s in sources:
        try:
            s.close()
        except Exception as e:  # noqa: BLE001 - the others still close
            errors.append(e)
    if errors:
        raise errors[0]
