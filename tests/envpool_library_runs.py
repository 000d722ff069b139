"""Libraries' own EnvPool integration code, run on envpool or on seedpool's shim, in a child
process (test_envpool_libraries.py): `python envpool_library_runs.py LIB BACKEND TASKS STEPS OUT`
writes the observations, rewards and done flags the library saw to OUT-<task>.npz.

BACKEND "envpool" imports the real envpool; "seedpool" calls `seedpool.install_as_envpool()`
first, with no other change to the library's path. Actions come from a seeded generator, so
two runs see the same actions.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

NUM_ENVS = 4
SEED = 3


def _actions(n: int, steps: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, n, (steps, NUM_ENVS))


def tianshou_collector(task: str, steps: int) -> dict[str, Any]:
    """Tianshou's Collector on `envpool.make_gymnasium`; the replay buffer it fills."""
    import envpool
    from tianshou.algorithm.algorithm_base import Policy
    from tianshou.data import Batch, Collector, VectorReplayBuffer

    class SeededRandomPolicy(Policy):
        """Integer actions from a seeded generator (Tianshou's RandomActionPolicy gives a
        discrete space's action probabilities, not actions)."""

        def __init__(self, action_space):
            super().__init__(action_space=action_space)
            self.rng = np.random.default_rng(0)

        def forward(self, batch, state=None, **kwargs):
            return Batch(act=self.rng.integers(0, self.action_space.n, len(batch.obs)), state=state)

    envs = envpool.make_gymnasium(task, num_envs=NUM_ENVS, seed=SEED)
    buffer = VectorReplayBuffer(steps * NUM_ENVS, buffer_num=NUM_ENVS)
    collector = Collector(SeededRandomPolicy(envs.action_space), envs, buffer)
    collector.collect(n_step=steps * NUM_ENVS, reset_before_collect=True)
    return {"obs": buffer.obs, "rew": buffer.rew, "terminated": buffer.terminated,
            "truncated": buffer.truncated, "env_type": type(collector.env).__name__}


def rlgames_vecenv(task: str, steps: int) -> dict[str, Any]:
    """rl-games' envpool vecenv (`env_name: envpool`): its reset and steps."""
    from rl_games.envs.envpool import create_envpool

    env = create_envpool(env_name=task, num_actors=NUM_ENVS, seed=SEED)
    obs = [env.reset()]
    rews, dones = [], []
    for act in _actions(int(env.action_space.n), steps):
        o, r, d, _ = env.step(act.astype(np.int32))
        obs.append(o)
        rews.append(r)
        dones.append(d)
    return {"obs": np.stack(obs), "rew": np.stack(rews), "done": np.stack(dones)}


def torchrl_multithreaded(task: str, steps: int) -> dict[str, Any]:
    """TorchRL's MultiThreadedEnvWrapper on `envpool.make(task_id=..., env_type="gym")`."""
    import envpool
    import torch
    from torchrl.envs.libs.envpool import MultiThreadedEnvWrapper

    torch.manual_seed(0)
    pool = envpool.make(task_id=task, env_type="gym", num_envs=NUM_ENVS, seed=SEED, max_num_players=1)
    env = MultiThreadedEnvWrapper(pool)
    out = env.rollout(steps, break_when_any_done=False)
    return {"obs": out["next", "observation"].numpy(), "rew": out["next", "reward"].numpy(),
            "done": out["next", "done"].numpy()}


def skrl_gymnasium(task: str, steps: int) -> dict[str, Any]:
    """skrl's gymnasium wrapper (`wrap_env`) on `envpool.make_gymnasium`."""
    import envpool
    import skrl
    import torch
    from skrl.envs.wrappers.torch import wrap_env

    # skrl's wrapper calls reset(seed=skrl's key) once: EnvPool ignores it (a warning),
    # seedpool reseeds env i with key + i, as gymnasium does; with key = make's seed, the
    # episodes are EnvPool's.
    skrl.config.torch.key = SEED
    env = wrap_env(envpool.make_gymnasium(task, num_envs=NUM_ENVS, seed=SEED), wrapper="gymnasium")
    obs, _ = env.reset()
    seen, rews, dones = [obs.numpy()], [], []
    for act in _actions(int(env.action_space.n), steps):
        o, r, term, trunc, _ = env.step(torch.as_tensor(act).view(NUM_ENVS, 1))
        seen.append(o.numpy())
        rews.append(r.numpy())
        dones.append((term | trunc).numpy())
    return {"obs": np.stack(seen), "rew": np.stack(rews), "done": np.stack(dones),
            "vectorized": env._vectorized}


RUNS = {"tianshou": tianshou_collector, "rlgames": rlgames_vecenv, "torchrl_mt": torchrl_multithreaded,
        "skrl": skrl_gymnasium}


def main(argv: list[str]) -> None:
    """LIB BACKEND TASKS STEPS OUT: run one library's EnvPool path on each of the
    comma-separated TASKS, save what it saw to OUT-<task>.npz."""
    lib, backend, tasks, steps, out = argv
    if backend == "seedpool":
        import seedpool

        seedpool.install_as_envpool(quiet=True)
        from seedpool.compat.envpool import registration

        registration.BACKEND = "serial"  # in this process: the test compares results, not speed
    for task in tasks.split(","):
        got = RUNS[lib](task, int(steps))
        np.savez(f"{out}-{task}.npz", **{k: np.asarray(v) for k, v in got.items()})


if __name__ == "__main__":
    main(sys.argv[1:])
