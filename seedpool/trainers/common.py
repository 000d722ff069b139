"""What every trainer's build function starts or ends with: its device, checkpoint and envs, and
the `Training` a replay trainer's sync loop becomes."""
from __future__ import annotations

from typing import Any

from seedpool.experiment import CHECKPOINT_FILE, Run, load_checkpoint, setup_torch
from seedpool.experiment.checkpoint import replay_trainer_state, resume_env_seed
from seedpool.experiment.training import Training
from seedpool.runners import make_pools, make_sources
from seedpool.runners.sync import SyncLoop


def start_central(cfg: Any, algo: str) -> tuple[str, dict | None, list]:
    """A central-inference trainer's device, the checkpoint it resumes (or None) and its env
    sources, seeded afresh for a resumed segment (its envs cannot be replayed)."""
    device = setup_torch(cfg.seed, cfg.torch_threads, cfg.device)
    ckpt = load_checkpoint(cfg.resume / CHECKPOINT_FILE, algo) if cfg.resume else None
    env_seed = cfg.seed if ckpt is None else resume_env_seed(cfg.seed, ckpt)
    return device, ckpt, make_sources(cfg, env_seed, cfg.env_options, pools=make_pools)


def replay_sync_training(run: Run, sampler, learner, cfg: Any, pool) -> Training:
    """The `Training` of a replay trainer on the sync loop (DQN, SAC, TD3, R2D2 in lockstep):
    its checkpoints hold the learner, the sampler and, with ``--save-replay``, the replay."""
    def state() -> dict:
        return replay_trainer_state(run.dir, learner, sampler, cfg.save_replay)

    return Training(run, SyncLoop(sampler, learner, state), learner, cfg, close=pool.close)



def rows_and_policy(pool, model_cfg, ma_cfg):
    """What a sync trainer samples from and acts with: the pool (its Dict observations as
    `policy_view` gives them) and `make_policy`'s policy, or,
    for a multi-agent pool, its agent rows and a team policy; and the group each finished
    episode's returns are also logged under (None for single-agent runs)."""
    from seedpool.actors.agent_rows import is_agent_pool, team_rows_and_policy
    from seedpool.actors.observations import policy_view
    from seedpool.models import make_policy

    if not is_agent_pool(pool):
        pool = policy_view(pool)  # a Dict observation as one array (MiniGrid's image, dm_control's state)
        return pool, make_policy(pool.single_observation_space, pool.single_action_space, model_cfg), None
    rows, policy = team_rows_and_policy(pool, model_cfg, ma_cfg)
    return rows, policy, rows.group_of


def source_policy(source, model_cfg, ma_cfg):
    """The policy a central-inference trainer serves for `source`'s slots (a team policy for a
    multi-agent source's agent rows), and the group each episode is also logged under (or None)."""
    from seedpool.models import make_policy
    from seedpool.models.team import make_team_policy

    rows = getattr(source, "rows", None)
    if rows is None:
        return make_policy(source.single_observation_space, source.single_action_space, model_cfg), None
    policy = make_team_policy(rows.inputs, len(rows.groups), rows.single_action_space, model_cfg, ma_cfg)
    return policy, source.group_of
