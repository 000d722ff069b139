"""A Q-learner behind a replay, as one `Learner`: insert each batch of experience, then learn.

Both value-based trainers hand it `Unrolls` (DQN's sync sampler, or Ape-X's central
inference server): ``update(unrolls)`` writes their transitions into the replay through the
n-step writer, then takes as many minibatch gradient steps as the **UTD ratio** (gradient
steps per env step, docs/training.md "Learning per env step") asks for, and feeds the
learner's new priorities back. Learning is paced by experience, not by the clock: if the
learner falls behind, the runner's queue fills and acting waits, so the ratio holds on any
machine.

The learner behind it is any `MinibatchLearner` (DQN, SAC, TD3 and R2D2): this
loop owns what is not the loss, namely sampling, the importance-sampling exponent's schedule
(``beta0`` -> 1 over the run) and the priority update; the learner only learns from the
minibatch it is given and says what the rows' priorities are now.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Protocol

import numpy as np
from torch import nn

from seedpool.algos.unroll_steps import UnrollSteps
from seedpool.errors import ConfigError
from seedpool.records import Unrolls


class ReplayUpdate(NamedTuple):
    """What a `MinibatchLearner` returns for one minibatch."""

    metrics: dict[str, float]
    """Namespaced scalars (``losses/...``)."""
    priorities: np.ndarray | None
    """The rows' new priorities ``[n]`` (finite, >= 0) in the minibatch's order, e.g. |TD error|;
    None leaves them as they are (a learner that never reads priorities, or a uniform replay)."""


class MinibatchLearner(Protocol):
    """What `ReplayLearner` needs of the learner behind it: one gradient step per replay minibatch."""

    model: nn.Module
    version: int

    def update(self, batch: Mapping[str, Any], env_steps: int = 0) -> ReplayUpdate:
        """Learn from one minibatch as the replay samples it: its fields, ``weights`` (importance
        sampling, float32 [n]; all ones from a uniform replay) and ``indices``; ``env_steps``:
        the new env steps this step accounts for (advances the learner's schedules)."""

    def state_dict(self) -> dict:
        """Model, optimizer, counters."""

    def load_state_dict(self, state: dict) -> None:
        """Restore what `state_dict` returned."""


class ReplayLearner:
    """`update(unrolls)`: insert into ``replay`` via ``writer``, then learn at ``utd_ratio``.

    Each gradient step samples ``minibatch_size`` rows with IS exponent `beta` (``beta0`` at
    the start, 1 at the end of ``total_steps``) and sets the priorities the learner returns.
    """

    def __init__(self, learner: MinibatchLearner, replay, writer, *, utd_ratio: float, minibatch_size: int,
                 learning_starts: int, total_steps: int, beta0: float = 0.4) -> None:
        if utd_ratio <= 0 or minibatch_size < 1:
            raise ConfigError(f"need utd_ratio (gradient steps per env step) > 0 and minibatch_size >= 1, "
                              f"got {utd_ratio}, {minibatch_size}")
        if not 0.0 <= beta0 <= 1.0:
            raise ConfigError(f"beta0 (the IS exponent at the start) must be in [0, 1], got {beta0}")
        self.learner, self.replay, self.writer = learner, replay, writer
        self.utd_ratio, self.minibatch_size, self.beta0 = utd_ratio, minibatch_size, beta0
        self.learning_starts, self.total_steps = learning_starts, total_steps
        self.steps = UnrollSteps()
        self.env_steps = 0  # env steps inserted (reset steps included: they are env steps too)
        self.learning_env_steps = 0  # env steps inserted while the replay was big enough to learn
        self.gradient_steps = 0
        self._credit = 0.0  # gradient steps owed by the UTD ratio, not yet taken

    @property
    def model(self):
        """The learner's network (what acting uses: the online Q network for DQN)."""
        return self.learner.model

    @property
    def version(self) -> int:
        """Gradient steps taken (bumped by each)."""
        return self.learner.version

    @property
    def progress(self) -> float:
        """Fraction of the run's env steps inserted."""
        return min(1.0, self.env_steps / self.total_steps) if self.total_steps else 0.0

    def beta(self) -> float:
        """Prioritized replay's IS exponent now: ``beta0`` at the start, linear to 1 at the end of the run."""
        return self.beta0 + (1.0 - self.beta0) * self.progress

    def update(self, unrolls: Unrolls) -> dict[str, float]:
        """Insert the unrolls' transitions; learn as far as the UTD ratio allows.

        Learning waits until the replay holds ``learning_starts`` transitions (again after a
        resume that did not save the replay)."""
        self.insert(unrolls)
        new_steps = unrolls.num_steps * len(unrolls)
        self.env_steps += new_steps
        out = {"charts/replay_size": float(len(self.replay))}
        if len(self.replay) < max(self.learning_starts, self.minibatch_size):
            return out
        self.learning_env_steps += new_steps
        self._credit += new_steps * self.utd_ratio
        due = int(self._credit)
        self._credit -= due
        for _ in range(due):
            out.update(self._learn_once(new_steps / due))
        return {**out, "charts/gradient_steps": float(self.gradient_steps),
                "charts/utd_ratio": self.measured_ratio()}

    def insert(self, unrolls: Unrolls) -> None:
        """Write the unrolls into the replay: their transitions as n-step rows, the whole batch in
        one writer call (a sequence replay overrides this to cut sequences instead)."""
        for step in self.steps(unrolls):
            self.writer.add(**step)

    def _learn_once(self, env_steps: float) -> dict[str, float]:
        batch = self.replay.sample(self.minibatch_size, beta=self.beta())
        metrics, priorities = self.learner.update(batch, env_steps=int(round(env_steps)))
        if priorities is not None:
            self.replay.update_priorities(batch["indices"], priorities)
        self.gradient_steps += 1
        return metrics

    def measured_ratio(self) -> float:
        """Gradient steps per env step while learning was on (what ``utd_ratio`` asks for)."""
        return self.gradient_steps / self.learning_env_steps if self.learning_env_steps else 0.0

    def state_dict(self) -> dict[str, Any]:
        """The learner's state and this loop's counters (the replay's contents are saved apart)."""
        return {**self.learner.state_dict(), "env_steps": self.env_steps,
                "learning_env_steps": self.learning_env_steps, "gradient_steps": self.gradient_steps,
                "credit": self._credit}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        state = dict(state)
        self.env_steps = int(state.pop("env_steps"))
        self.learning_env_steps = int(state.pop("learning_env_steps"))
        self.gradient_steps = int(state.pop("gradient_steps"))
        self._credit = float(state.pop("credit"))
        self.learner.load_state_dict(state)
