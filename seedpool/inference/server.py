"""The central inference server: one thread that batches requests and runs the policy.

Sources (actor loops) `submit` observation batches and wait on the reply; the server
batches them dynamically, keeps per-env recurrent state (`StateSlots`) and trajectory
buffers, runs the policy on the learner's device, and hands complete unrolls to
`on_unrolls`. A recurrent policy's state is reset where an episode starts (the row's
`first` flag: after terminated/truncated, i.e. the engine's autoreset step) and dropped
when an env restarts (a dead worker, a replaced Ray group); each unroll carries the state
the policy was given at its first observation (`Unrolls.start_state`). The learner
`publish`es new parameters with a version number; they are swapped in between batches
and every recorded step carries the version that chose its action.

Several policies: `add_policy` adds another (a league opponent, a team's second policy) and
`assign` names, per env slot, the policy that acts for it. A batch is then split by policy,
each part acted on by its own model, and the parts put back in row order. Policy 0 is the
one built with the server, the one `publish` updates by default; with only it, a batch is
served exactly as before (no split, no copy).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np
import torch

from seedpool.inference.batcher import DynamicBatcher, Reply, Request
from seedpool.inference.state_slots import PreviousInputs, StateSlots
from seedpool.inference.stats import InferenceStats
from seedpool.inference.unrolls import TrajectoryBuffers
from seedpool.records import ActOutput, State, Unrolls

ActFn = Callable[..., ActOutput]
"""act(model, obs, state, first, slots) -> ActOutput; `first` marks rows that open an
episode, `slots` are the rows' global env slots (per-env exploration keys on them). A server
built with ``prev_inputs=True`` also passes ``prev_action=`` and ``prev_reward=`` (zero on
rows that open an episode)."""


class InferenceServer:
    """Dynamic-batching policy server with trajectory buffers and versioned parameters."""

    def __init__(self, model: torch.nn.Module, act: ActFn, *, num_slots: int,
                 obs_shape: tuple, obs_dtype, action_shape: tuple = (), action_dtype=np.int64,
                 unroll_length: int, max_batch: int, max_wait_s: float,
                 on_unrolls: Callable[[Unrolls], None], device: str | torch.device = "cpu",
                 initial_state: State = None, version: int = 0, aux_size: int = 0,
                 prev_inputs: bool = False) -> None:
        """``initial_state``: a recurrent policy's state for one env (no batch axis), kept per env
        slot; ``prev_inputs``: also give ``act`` each row's previous action and reward (keywords
        ``prev_action``, ``prev_reward``) and record them at every unroll's start."""
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.act = act
        self.on_unrolls = on_unrolls
        self.batcher = DynamicBatcher(max_batch, max_wait_s)
        self.buffers = TrajectoryBuffers(num_slots, unroll_length, obs_shape, obs_dtype,
                                         action_shape, action_dtype, aux_size)
        self.states = StateSlots(num_slots, initial_state, self.device)
        torch_action_dtype = torch.int64 if np.dtype(action_dtype).kind in "iu" else torch.float32
        self.inputs = PreviousInputs(num_slots, action_shape, torch_action_dtype, self.device) if prev_inputs else None
        self.stats = InferenceStats(max_batch)
        self.num_slots = num_slots
        self.version = version
        self.others: list[tuple[torch.nn.Module, ActFn]] = []  # policies 1, 2, ... (`add_policy`)
        self.other_versions: list[int] = []
        self.slot_policy = np.zeros(num_slots, np.int64)  # which policy acts for each env slot
        self.error: BaseException | None = None
        self._pending: tuple[dict, int] | None = None
        self._pending_others: dict[int, tuple[dict, int]] = {}
        self._pending_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- called from other threads -------------------------------------------------
    def submit(self, request: Request) -> Reply:
        """Queue one source's observation batch; wait on the returned reply for actions."""
        if self.error is not None or self._stop.is_set():
            raise RuntimeError("the inference server has stopped") from self.error
        if request.slots.min(initial=0) < 0 or request.slots.max(initial=0) >= self.num_slots:
            raise ValueError(f"slots must lie in [0, {self.num_slots}), got {request.slots}")
        return self.batcher.submit(request)

    def publish(self, state_dict: dict[str, torch.Tensor], version: int, policy: int = 0) -> None:
        """Offer new parameters for ``policy``; the server swaps them in before its next batch."""
        copy = {k: v.detach().to(self.device, copy=True) for k, v in state_dict.items()}
        with self._pending_lock:
            if policy == 0:
                self._pending = (copy, version)
            else:
                self._check_policy(policy)
                self._pending_others[policy] = (copy, version)

    def add_policy(self, model: torch.nn.Module, act: ActFn | None = None, version: int = 0) -> int:
        """Serve another policy (its own model, and ``act`` or the server's act function); its id.

        Its rows share the server's per-slot recurrent state layout, so a recurrent policy
        added here must keep a state of the same shape as policy 0's."""
        with self._pending_lock:
            self.others.append((model.to(self.device).eval(), act or self.act))
            self.other_versions.append(version)
            return len(self.others)

    def assign(self, slots: np.ndarray, policy: int) -> None:
        """Let ``policy`` act for the env ``slots`` from their next observation on (to swap the
        policy of an env in the middle of an episode, reset its state: `StateSlots.reset`)."""
        self._check_policy(policy)
        slots = np.asarray(slots, np.int64)
        if slots.size and (slots.min() < 0 or slots.max() >= self.num_slots):
            raise ValueError(f"slots must lie in [0, {self.num_slots}), got {slots}")
        self.slot_policy[slots] = policy

    def _check_policy(self, policy: int) -> None:
        if not 0 <= policy <= len(self.others):
            raise ValueError(f"no policy {policy}: the server holds policies 0..{len(self.others)}")

    def start(self) -> "InferenceServer":
        """Run the serving loop in its own daemon thread."""
        self._thread = threading.Thread(target=self._serve, name="inference", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving; actors still waiting get an error rather than hanging."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.batcher.fail_all(RuntimeError("the inference server stopped"))

    # --- the serving loop ------------------------------------------------------------
    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                self.run_once(idle_timeout=0.05)
        except BaseException as e:  # noqa: BLE001 - reported to actors and the trainer
            self.error = e
            self._stop.set()
            self.batcher.fail_all(RuntimeError(f"inference failed: {e!r}"))

    def run_once(self, idle_timeout: float) -> int:
        """Serve one batch (the serial twin calls this directly); returns its row count."""
        t0 = time.perf_counter()
        requests = self.batcher.next_batch(idle_timeout)
        t1 = time.perf_counter()
        self.stats.add_idle(t1 - t0)
        if not requests:
            return 0
        try:
            blocked_s = self._serve_batch(requests)
        except BaseException as e:
            for r in requests:
                r.reply.fail(RuntimeError(f"inference failed: {e!r}"))
            raise
        self.stats.add_batch(sum(len(r) for r in requests), time.perf_counter() - t1 - blocked_s)
        return sum(len(r) for r in requests)

    def _serve_batch(self, requests: list[Request]) -> float:
        """Serve one batch; returns the seconds spent blocked handing unrolls on."""
        self._swap_parameters()
        cat = np.concatenate
        slots = cat([r.slots for r in requests])
        obs_np = cat([r.obs for r in requests])
        restarted = cat([r.restarted for r in requests])
        if restarted.any():  # those envs start afresh: their memory goes with their cut unroll
            self.states.reset(slots[restarted])
        rewards = cat([r.rewards for r in requests])
        actives = [r.active for r in requests]
        active = None if all(a is None for a in actives) else cat(
            [np.ones(len(r), bool) if a is None else a for r, a in zip(requests, actives)])
        completed, first = self.buffers.observe(
            slots, obs_np, rewards, cat([r.terminated for r in requests]), cat([r.truncated for r in requests]),
            restarted, active,
        )
        # Rows whose observation opens a new unroll (the previous one was just cut, or none was open).
        opens = self.buffers.pos[slots] == 0
        blocked_s = 0.0
        if completed is not None:
            # Before this batch overwrites them: the states these unrolls started from.
            completed.start_state = self.states.starts_for(completed.slots)
            if self.inputs is not None:
                completed.start_inputs = self.inputs.starts_for(completed.slots)
            t0 = time.perf_counter()
            self.on_unrolls(completed)
            blocked_s = time.perf_counter() - t0
            self.stats.add_blocked(blocked_s)
        obs = torch.from_numpy(obs_np).to(self.device)
        slots_t = torch.from_numpy(slots).to(self.device)
        first_t = torch.from_numpy(first).to(self.device)
        state = self.states.gather(slots_t, first_t)
        opens_t = torch.from_numpy(opens).to(self.device)
        if state is not None and opens.any():
            self.states.record_starts(slots_t[opens_t], {k: v[opens_t] for k, v in state.items()})
        extra = {}
        if self.inputs is not None:
            prev_action, prev_reward = self.inputs.gather(slots_t, torch.from_numpy(rewards).to(self.device), first_t)
            self.inputs.record_starts(slots_t[opens_t], prev_action[opens_t], prev_reward[opens_t])
            extra = {"prev_action": prev_action, "prev_reward": prev_reward}
        with torch.no_grad():
            if self.others:
                out = self._act_by_policy(slots, obs, state, first_t, slots_t, extra)
            else:
                out = self.act(self.model, obs, state, first_t, slots_t, **extra)
        self.states.scatter(slots_t, out.state)
        if self.inputs is not None:
            self.inputs.keep_actions(slots_t, out.actions)
        actions = out.actions.cpu().numpy()
        aux = None if out.aux is None else out.aux.float().cpu().numpy()
        self.buffers.record_action(slots, actions, out.logp.float().cpu().numpy(), self.version, aux)
        start = 0
        for r in requests:
            r.reply.set(actions[start:start + len(r)])
            start += len(r)
        return blocked_s

    def _act_by_policy(self, slots: np.ndarray, obs: torch.Tensor, state: State, first: torch.Tensor,
                       slots_t: torch.Tensor, extra: dict) -> ActOutput:
        """Each policy acts for its own rows; the outputs come back in the batch's row order."""
        owner = self.slot_policy[slots]
        parts = []
        for policy in np.unique(owner):
            rows = torch.from_numpy(np.flatnonzero(owner == policy)).to(self.device)
            model, act = (self.model, self.act) if policy == 0 else self.others[policy - 1]
            sub_state = None if state is None else {k: v[rows] for k, v in state.items()}
            sub_extra = {k: v[rows] for k, v in extra.items()}
            parts.append((rows, act(model, obs[rows], sub_state, first[rows], slots_t[rows], **sub_extra)))
        if len(parts) == 1:
            return parts[0][1]
        n = len(slots)

        def merge(pieces: list[torch.Tensor | None]) -> torch.Tensor | None:
            if pieces[0] is None:
                return None
            out = pieces[0].new_empty((n, *pieces[0].shape[1:]))
            for (rows, _), piece in zip(parts, pieces):
                out[rows] = piece
            return out

        outs = [o for _, o in parts]
        new_state = None if outs[0].state is None else \
            {k: merge([o.state[k] for o in outs]) for k in outs[0].state}
        return ActOutput(merge([o.actions for o in outs]), merge([o.logp for o in outs]), new_state,
                         merge([o.aux for o in outs]))

    def _swap_parameters(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, None
            others, self._pending_others = self._pending_others, {}
        if pending is not None:
            self.model.load_state_dict(pending[0])
            self.version = pending[1]
            self.stats.add_swap()
        for policy, (params, version) in others.items():
            self.others[policy - 1][0].load_state_dict(params)
            self.other_versions[policy - 1] = version
