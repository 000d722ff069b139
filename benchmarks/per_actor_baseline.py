"""The IMPALA-style baseline: every actor process runs its own CPU copy of the policy.

This is the architecture SEED RL was measured against. Each actor steps its own few envs
in-process, runs inference on them with its private model, cuts unrolls and ships them
(pickled) to the learner, and pulls fresh parameters from shared memory before each
unroll. There is no central inference. Only `seed_vs_sync.py` (beside this file) uses it,
as its `baseline` case; it is not part of the seedpool package.
"""

from __future__ import annotations

import queue as queue_mod
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.multiprocessing as mp

import seedpool
from seedpool.algos.impala import ImpalaConfig, ImpalaLearner
from seedpool.inference import TrajectoryBuffers, Unrolls, concat_unrolls
from seedpool.models import ModelConfig, make_policy


@dataclass
class BaselineResult:
    """Throughput of one baseline run over its measured window."""

    env_steps_per_s: float
    updates: int
    seconds: float


def _actor_main(rank: int, env_id: str, envs_per_actor: int, env_options: dict, seed: int,
                model_cfg: ModelConfig, shared: dict, version, lock, steps, out, stop,
                unroll_length: int) -> None:
    """One actor: its envs, its own policy copy, unrolls to `out` until `stop` is set."""
    torch.set_num_threads(1)
    torch.manual_seed(seed + rank)
    with seedpool.make(env_id, num_envs=envs_per_actor, backend="serial",
                       seed=seed + rank * envs_per_actor, **env_options) as pool:
        model = make_policy(pool.single_observation_space, pool.single_action_space, model_cfg).eval()
        space = pool.single_observation_space
        buf = TrajectoryBuffers(envs_per_actor, unroll_length, space.shape, space.dtype)
        slots = np.arange(envs_per_actor)
        local_version = -1
        obs, _ = pool.reset()
        rew = np.zeros(envs_per_actor, np.float32)
        term = trunc = np.zeros(envs_per_actor, bool)
        while not stop.is_set():
            if version.value != local_version:  # IMPALA actors refresh once per unroll
                with lock:
                    model.load_state_dict(shared)
                    local_version = version.value
            for _ in range(unroll_length):
                done, _ = buf.observe(slots, obs, rew, term, trunc, np.zeros(envs_per_actor, bool))
                with torch.no_grad():
                    action, logp, _ = model.act(torch.from_numpy(obs))
                buf.record_action(slots, action.numpy(), logp.numpy(), local_version)
                if done is not None:
                    out.put(done)
                obs, rew, term, trunc, _ = pool.step(action.numpy())
            with steps.get_lock():
                steps.value += unroll_length * envs_per_actor


class BaselineSystem:
    """`num_actors` actor processes feeding one learner in this process."""

    def __init__(self, env_id: str, num_envs: int, num_actors: int, impala: ImpalaConfig,
                 model_cfg: ModelConfig, env_options: dict | None = None, seed: int = 0) -> None:
        if num_envs % num_actors:
            raise ValueError(f"num_envs={num_envs} must divide evenly into num_actors={num_actors}")
        with seedpool.make(env_id, num_envs=1, backend="serial", **(env_options or {})) as probe:
            spaces = probe.single_observation_space, probe.single_action_space
        self.learner = ImpalaLearner(make_policy(*spaces, model_cfg), impala)
        self.published = make_policy(*spaces, model_cfg)
        self.published.load_state_dict(self.learner.model.state_dict())
        self.published.share_memory()
        ctx = mp.get_context("spawn")  # no fork after torch ran threads in this process
        self.version, self.lock = ctx.Value("q", 0), ctx.Lock()
        self.steps, self.stop = ctx.Value("q", 0), ctx.Event()
        self.out = ctx.Queue(maxsize=4 * num_actors)
        self.batch = impala.unrolls_per_batch
        self.pending: list[Unrolls] = []
        shared = dict(self.published.state_dict())
        self.procs = [ctx.Process(target=_actor_main, daemon=True, args=(
            k, env_id, num_envs // num_actors, env_options or {}, seed, model_cfg, shared,
            self.version, self.lock, self.steps, self.out, self.stop, impala.unroll_length))
            for k in range(num_actors)]

    def start(self) -> None:
        """Start the actor processes."""
        for p in self.procs:
            p.start()

    def learn_for(self, seconds: float) -> int:
        """Consume unrolls and update for `seconds`; returns the number of updates."""
        updates, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self.pending.append(self.out.get(timeout=0.2))
            except queue_mod.Empty:
                continue
            if sum(len(u) for u in self.pending) < self.batch:
                continue
            batch = concat_unrolls(self.pending)
            self.pending = []
            self.learner.update(batch)
            with self.lock:
                self.published.load_state_dict(self.learner.model.state_dict())
                self.version.value = self.learner.version
            updates += 1
        return updates

    def close(self) -> None:
        """Stop and reap every actor process."""
        self.stop.set()
        deadline = time.monotonic() + 10
        while any(p.is_alive() for p in self.procs) and time.monotonic() < deadline:
            try:
                while True:
                    self.out.get_nowait()  # a blocked put would keep an actor from exiting
            except queue_mod.Empty:
                time.sleep(0.05)
        for p in self.procs:
            if p.is_alive():
                p.kill()
            p.join()


def run_baseline(env_id: str, num_envs: int, num_actors: int, impala: ImpalaConfig,
                 model_cfg: ModelConfig, warmup_s: float, measure_s: float,
                 env_options: dict | None = None, seed: int = 0) -> BaselineResult:
    """Env steps per second of the per-actor-inference baseline over a measured window."""
    system = BaselineSystem(env_id, num_envs, num_actors, impala, model_cfg, env_options, seed)
    try:
        system.start()
        system.learn_for(warmup_s)
        s0, t0 = system.steps.value, time.monotonic()
        updates = system.learn_for(measure_s)
        s1, t1 = system.steps.value, time.monotonic()
    finally:
        system.close()
    return BaselineResult((s1 - s0) / (t1 - t0), updates, t1 - t0)
