"""How central-inference acting is laid out: engine pools in async mode, and their options."""
from __future__ import annotations

from dataclasses import dataclass

import seedpool


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


def make_pools(env_id: str, num_envs: int, backend: str, cfg: ActingConfig, seed: int,
               env_options: dict | None = None) -> list:
    """The engine pools in async mode, with disjoint env seeds."""
    per_pool = num_envs // cfg.num_pools
    if per_pool * cfg.num_pools != num_envs:
        raise ValueError(f"num_envs={num_envs} must divide evenly into num_pools={cfg.num_pools}")
    batch = cfg.envs_per_recv or max(1, per_pool // 2)
    if batch >= per_pool:
        raise ValueError(f"envs_per_recv={batch} must be below the {per_pool} envs of each pool "
                         "(central-inference acting needs the engine's async mode)")
    on_death = "restart" if cfg.restart_workers and backend != "thread" else "raise"
    pools = []
    try:
        for k in range(cfg.num_pools):
            pools.append(seedpool.make(
                env_id, num_envs=per_pool, batch_size=batch, backend=backend,
                num_workers=cfg.num_workers, seed=seed + k * per_pool,
                on_worker_death=on_death, **(env_options or {})))
    except BaseException:
        for p in pools:
            p.close()
        raise
    return pools
