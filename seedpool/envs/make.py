"""`seedpool.make`: resolve the task, choose a backend, build the pool."""

from __future__ import annotations

import logging
import sys
from typing import Any, NamedTuple, Sequence

from seedpool.envs import spaces
from seedpool.envs.agents.make import AGENT_OPTIONS, make_agents, make_native_agents, native_agent_family
from seedpool.envs.agents.resolve import find_agent_task
from seedpool.envs.channel import ring_order_problem
from seedpool.envs.envpool_api import take_envpool_options
from seedpool.envs.executor import ExecutorConfig
from seedpool.envs.native.resolve import native_spec
from seedpool.envs.native.threads import available_cores as usable_cores
from seedpool.envs.native.threads import native_config
from seedpool.envs.pool import AUTORESET_MODES, EnvPool, env_seeds
from seedpool.envs.runner import probe_step_cost
from seedpool.envs.spec import Task, TaskSpec, check_observation_mode, resolve
from seedpool.errors import ConfigError

BACKENDS = ("auto", "serial", "thread", "process")
ON_WORKER_DEATH = ("raise", "restart")

# Rules for backend="auto", from benchmarks/results/engine.md: a hand-off to a worker on
# another core has a fixed cost each way, and two Python processes running flat out do not
# double the throughput. Below this much env work per batch, stepping in-process wins.
SERIAL_BELOW_S = 150e-6
# In async mode, up to this much work per batch, the pool's process steps a share of the envs
# itself (one hand-off per batch instead of two); above it, it stays free for the policy.
# In sync mode it always steps a share: it would only wait otherwise.
SHARE_MAIN_BELOW_S = 2e-3
# In a training loop the caller computes between steps with torch's intra-op (OpenMP) threads,
# and those threads keep spinning on their cores for milliseconds after every torch op, even a
# tiny policy forward (libgomp's default wait policy; measured in benchmarks/results/loop.md).
# A sync step comes right after the forward, so a worker process then shares its core with a
# spinning thread. The layout rules below model the caller's threads as holding every core but
# the pool's own for this long after each forward...
CALLER_SPIN_S = 5e-3
# ...and each batch's hand-off to workers as costing this much in such a loop (a worker woken
# onto a busy core, the caller's threads woken back).
LOOP_HANDOFF_S = 0.5e-3

log = logging.getLogger("seedpool.envs")


def make(
    task: Task,
    num_envs: int | None = None,
    batch_size: int | None = None,
    num_workers: int | None = None,
    backend: str = "auto",
    seed: int | Sequence[int | None] | None = 0,
    autoreset: str = "next_step",
    max_episode_steps: int | None = None,
    step_timeout: float | None = 600.0,
    on_worker_death: str = "raise",
    info_keys: dict[str, Any] | None = None,
    observation_mode: Any = "same",
    native: bool | None = None,
    **task_options: Any,
) -> EnvPool:
    """Build a pool of `num_envs` copies of `task` (a registered id, gymnasium id or env factory),
    or of one env per factory in a list of them (`num_envs` is then the list's length).

    `batch_size < num_envs` gives async mode (send/recv, first finished envs come back).
    `backend`: "serial" (in this process), "thread", "process", or "auto" (chosen by the
    measured cost of a step). `seed`: env i gets seed + i; a list gives one per env; None
    leaves envs unseeded. `step_timeout`: seconds an env may stay in a worker without a
    result before `StepTimeoutError` (None: wait forever; the serial backend steps in this
    process and cannot time out). `on_worker_death`: "raise" (WorkerDiedError) or "restart"
    (the worker's envs are reset and reported truncated, info["restarted"]); only worker
    processes can be replaced, so "restart" refuses backend="thread", and with the serial
    backend there is no worker to lose. `info_keys`: scalar info entries of your env to
    send through shared arrays, e.g. {"x_position": "float64"}; other info entries are
    forwarded too, batched as gymnasium batches them (see seedpool/envs/infos.py).
    `observation_mode`: as gymnasium's vector envs: "same" (every env has env 0's observation
    space), "different" (spaces may differ in bounds but not in shapes and dtypes; make_vec
    batches them with `batch_differing_spaces`), or a (batched, single) pair of spaces.
    `native`: None runs a task natively (all envs stepped in one call on arrays, see
    seedpool/envs/families/) where it has a native family and the backend is "auto"; False
    keeps the Python-env path; True insists (backend "auto" or "serial"; an error if it cannot).
    A `NativeEnv` subclass as the task always runs natively.
    """
    num_envs = env_count(task, num_envs)
    # EnvPool's own make() options (env_type, num_threads, ...), for scripts written for it.
    num_workers = take_envpool_options(task_options, num_workers)
    if not isinstance(num_envs, int) or num_envs < 1:
        raise ConfigError(f"num_envs must be a positive int, got {num_envs!r}")
    batch_size = num_envs if batch_size is None else batch_size
    if not isinstance(batch_size, int) or not 1 <= batch_size <= num_envs:
        raise ConfigError(f"batch_size must be an int in [1, num_envs={num_envs}], got {batch_size!r}")
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if autoreset not in AUTORESET_MODES:
        raise ConfigError(f"autoreset must be one of {AUTORESET_MODES}, got {autoreset!r}")
    if on_worker_death not in ON_WORKER_DEATH:
        raise ConfigError(f"on_worker_death must be one of {ON_WORKER_DEATH}, got {on_worker_death!r}")
    if num_workers is not None and (not isinstance(num_workers, int) or num_workers < 1):
        raise ConfigError(f"num_workers must be a positive int or None, got {num_workers!r}")
    restart = on_worker_death == "restart"
    check_observation_mode(observation_mode)
    seeds = env_seeds(seed, num_envs)
    agent_options = {k: task_options.pop(k) for k in AGENT_OPTIONS if k in task_options}
    family = native_agent_family(task)
    if family is not None:  # a native multi-agent family (envs/families/mpe/)
        pool = make_native_agents(family, task, native, backend, num_envs, batch_size, seeds, autoreset,
                                  max_episode_steps, agent_options, task_options)
        if pool is not None:
            return pool
    agents, built = find_agent_task(task, task_options)
    if agents is not None:  # a PettingZoo env: its agents are the rows (envs/agents/)
        return make_agents(agents, agent_options, num_envs, batch_size, make, dict(
            num_workers=num_workers, backend=backend, seed=seed, autoreset=autoreset,
            max_episode_steps=max_episode_steps, step_timeout=step_timeout, on_worker_death=on_worker_death))
    if agent_options:
        raise ConfigError(f"{sorted(agent_options)} apply to multi-agent (PettingZoo) tasks only")
    spec = native_spec(task, native, backend, num_envs, max_episode_steps, info_keys, task_options)
    if spec is not None:
        cfg = native_config(spec, batch_size, num_workers)  # threads: num_workers caps them
        return EnvPool(spec, num_envs, batch_size, seeds, autoreset, cfg, made_with={"seed": seed, **task_options})
    spec = resolve(task, max_episode_steps=max_episode_steps, info_keys=info_keys, probe=built, **task_options)
    spec.observation_mode = observation_mode
    try:
        dynamic = spaces.check(spec.observation_space, "observation")
        dynamic = spaces.check(spec.action_space, "action") or dynamic
        if dynamic and backend == "auto":  # objects are pickled to leave a worker: keep them here
            backend = "serial"
        cfg = plan(spec, num_envs, batch_size, num_workers, backend, step_timeout, restart)
    except BaseException:
        if spec.probe is not None:
            spec.probe.close()
        raise
    return EnvPool(spec, num_envs, batch_size, seeds, autoreset, cfg, made_with={"seed": seed, **task_options})


def env_count(task: Task, num_envs: int | None) -> int:
    """How many envs a pool of `task` has: one per factory for a list of them, else
    `num_envs` (default 1)."""
    if isinstance(task, (list, tuple)):
        if not task:
            raise ConfigError("the list of env factories is empty: give one zero-argument callable per env")
        if num_envs is not None and num_envs != len(task):
            raise ConfigError(f"a list of {len(task)} env factories builds {len(task)} envs, "
                              f"but num_envs={num_envs} was given")
        return len(task)
    return 1 if num_envs is None else num_envs


_THREADS_CANNOT_RESTART = (
    "on_worker_death='restart' needs backend='process': a thread worker cannot be killed, so a "
    "hung or broken one cannot be replaced. Use backend='process' (or 'auto'), or keep threads "
    "with on_worker_death='raise'"
)


class Layout(NamedTuple):
    """Where `auto` puts envs: the backend, its worker count, envs the pool steps itself, and why."""

    backend: str
    num_workers: int | None
    local_envs: int
    reason: str = ""


def caller_threads() -> int:
    """Threads this process computes with between steps: torch's intra-op threads when torch is
    imported (seedpool does not import it to ask), else 1."""
    torch = sys.modules.get("torch")
    try:
        return max(1, int(torch.get_num_threads())) if torch is not None else 1
    except Exception:  # noqa: BLE001 - a partly imported or stubbed torch: assume one thread
        return 1


def plan(
    spec: TaskSpec,
    num_envs: int,
    batch_size: int,
    num_workers: int | None,
    backend: str,
    step_timeout: float | None,
    restart: bool,
) -> ExecutorConfig:
    """Decide where envs run: the executor configuration for a backend request (a ValueError
    for a combination this machine or the restart policy cannot honour)."""
    cores, threads = usable_cores(), caller_threads()
    local, reason = 0, ""
    if backend == "auto":
        backend, num_workers, local, reason = auto_layout(spec, num_envs, batch_size, num_workers, cores, restart,
                                                          threads)
        log.info("seedpool: %s x %d: backend=%r, %s workers, %d envs in this process: %s",
                 spec.name, num_envs, backend, num_workers, local, reason)
    if backend == "thread" and restart:
        raise ConfigError(_THREADS_CANNOT_RESTART)
    unsupported = ring_order_problem(backend)
    if unsupported:
        raise ConfigError(unsupported)
    if backend == "serial":
        return ExecutorConfig("serial", 0, num_envs, 0.0, 0.0, step_timeout, False, reason)
    workers = min(num_workers or cores, num_envs - local)
    busy = workers + (1 if local else 0)
    # Spin only where every spinner has a core of its own, the caller's compute threads counted
    # (they spin too, see CALLER_SPIN_S); otherwise spinning starves the rest.
    spin_ok = backend == "process" and busy + threads - 1 <= cores
    return ExecutorConfig(
        kind=backend,
        num_workers=workers,
        local_envs=local,
        worker_spin_s=200e-6 if spin_ok and local else 0.0,
        main_spin_s=100e-6 if spin_ok and local else 0.0,
        step_timeout=step_timeout,
        restart_workers=restart,
        reason=reason,
    )


def auto_layout(spec: TaskSpec, num_envs: int, batch_size: int, num_workers: int | None, cores: int,
                isolate: bool, threads: int = 1) -> Layout:
    """The layout `backend="auto"` picks from the task's measured step cost, the machine and
    the caller's compute threads (see `choose_layout`).

    It never picks threads (whether an env's step releases the GIL cannot be seen from
    outside), and picks serial where worker processes are unsupported (see channel.py).
    """
    if ring_order_problem("process"):
        return Layout("serial", 0, num_envs, "worker processes are unsupported on this CPU")
    in_loop = batch_size == num_envs and threads > 1 and not isolate
    # GIL-holding families (Atari) are costly enough to need no probe, unless a loop's
    # compute threads may make stepping them in this process the better choice.
    if spec.prefer_processes and not in_loop:
        return choose_layout(None, num_envs, batch_size, num_workers, cores, threads, isolate)
    try:
        cost = probe_step_cost(spec)
    except Exception as err:  # noqa: BLE001 - the user's own calls will meet the env's error, if any
        # An env may need the user's setup before it steps (an attribute set with set_attr, a
        # reset option): the probe's extra env has none. Step in this process, as
        # SyncVectorEnv would; an env that cannot step at all raises at the user's first step.
        log.info("seedpool: %s: the probe's env raised %r", spec.name, err)
        return Layout("serial", 0, num_envs, f"an extra env built for the probe raised {type(err).__name__} "
                                             "before the user's own setup: stepping in this process")
    return choose_layout(cost, num_envs, batch_size, num_workers, cores, threads, isolate)


def choose_layout(step_cost: float | None, num_envs: int, batch_size: int, num_workers: int | None,
                  cores: int, threads: int, isolate: bool) -> Layout:
    """The layout for envs whose step costs `step_cost` seconds (None: not probed, a GIL-holding
    family that always goes to worker processes), on `cores` cores, made by a caller that
    computes between steps on `threads` threads (torch's); `isolate`: every env in a worker.
    A pure function of its arguments, so the rules can be pinned by a test."""
    sync = batch_size == num_envs
    work = None if step_cost is None else step_cost * batch_size
    if work is not None and (cores < 2 or num_envs < 2):
        return Layout("serial", 0, num_envs, f"{'one core' if cores < 2 else 'one env'}: nothing to spread")
    if work is not None and work < SERIAL_BELOW_S:
        return Layout("serial", 0, num_envs, f"a batch is {work * 1e6:.0f} us of env work, less than the "
                                             "hand-offs to workers would cost")
    # A sync pool under a torch loop (not with the restart policy: the caller asked for envs in
    # workers, where a crash can be survived).
    in_loop = sync and threads > 1 and not isolate and work is not None
    if in_loop and not loop_parallel_pays(work, min(cores, num_envs), cores, threads):
        return Layout("serial", 0, num_envs,
                      f"a batch is {work * 1e3:.1f} ms of env work and this process computes on {threads} "
                      f"torch threads of {cores} cores between steps: workers would wait for cores those "
                      "threads spin on")
    # In sync mode the pool's process only waits while the envs step, so it steps a share
    # itself; in async mode it stays free for the policy unless a batch is little work. Not
    # when dead workers are to be restarted: an env that crashes or hangs in the pool's own
    # process cannot be.
    what = "GIL-holding envs" if work is None else f"a batch is {work * 1e3:.2f} ms of env work"
    if cores >= 2 and not isolate and (sync or (work is not None and work < SHARE_MAIN_BELOW_S)):
        workers = num_workers or (cores - 1)
        return Layout("process", workers, num_envs // (workers + 1),
                      f"{what}: spread over worker processes and this one")
    return Layout("process", num_workers, 0, f"{what}: spread over worker processes"
                  + (", none in this process (on_worker_death='restart')" if isolate and sync else ""))


def loop_parallel_pays(work: float, ways: int, cores: int, threads: int) -> bool:
    """Whether `work` seconds of env stepping per batch, spread `ways` ways, finishes sooner in
    workers than in this process when the caller's `threads` compute threads hold every core
    but one for CALLER_SPIN_S after each forward (the hand-offs counted)."""
    ways = max(1, ways)
    free = min(ways, max(1, cores - threads + 1))  # cores the envs have while the caller's threads spin
    if work <= free * CALLER_SPIN_S:
        spread = work / free
    else:
        spread = CALLER_SPIN_S + (work - free * CALLER_SPIN_S) / ways
    return spread + LOOP_HANDOFF_S < work
