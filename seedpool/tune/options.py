"""`seedpool tune`'s own options, how they are told apart from the trainer's, and the checked
experiment they describe (`ExperimentSpec`, written to the experiment folder as tune.json)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tyro

from seedpool.algorithms import TRAINERS
from seedpool.errors import ConfigError
from seedpool.tune.space import Range, apply_values, parse_ranges, plain, read_space

SPEC_FILE = "tune.json"
EPISODE_RETURN = "episode_return"
# Scalars every trainer's run logs (seedpool.experiment.run.Run): no probe run is needed to know them.
ALWAYS_REPORTED = (EPISODE_RETURN, "charts/episodic_return", "charts/episodic_length", "charts/SPS")


@dataclass
class SpaceOptions:
    """Where the ranges come from."""

    space: list[str] = field(default_factory=list)
    """Ranges, NAME=FUNCTION(ARGS) each: 'ppo.learning_rate=loguniform(1e-4,1e-2)' 'ent_coef=choice(0,0.01)'
    (functions: uniform, quniform, loguniform, qloguniform, randint, qrandint, lograndint, qlograndint,
    choice; see docs/tune.md)."""
    space_file: Path | None = None
    """A file of ranges, one per line (# starts a comment); added to --tune.space."""


@dataclass
class TuneArgs:
    """Population-based training (--pbt) or a search (--search) over any trainer's options, on Ray
    Tune; the trainer's own options (--env, --total-timesteps per member, ...) pass through."""

    pbt: bool = False
    """Ray Tune's PopulationBasedTraining: members copy better members' weights and perturb their
    hyperparameters every --perturbation-interval env steps (only live fields can be tuned)."""
    search: bool = False
    """Optuna's sampler through Ray Tune's OptunaSearch: --num-samples runs, --population at a time."""
    population: int = 4
    """Members training at once."""
    perturbation_interval: int | None = None
    """Env steps between reports (PBT: between exploit/explore decisions); default a tenth of --total-timesteps."""
    metric: str = EPISODE_RETURN
    """What members are ranked by: episode_return (mean of the last 20 episodes) or a scalar the
    trainer logs (charts/episodic_length, losses/value_loss, ...)."""
    mode: Literal["max", "min"] = "max"
    """Whether a higher or a lower --metric is better."""
    num_samples: int | None = None
    """--search: runs in all; default 4 x --population."""
    tune: SpaceOptions = field(default_factory=SpaceOptions)
    cpus_per_member: float | None = None
    """CPUs Ray reserves per member; default this machine's cores shared by the population, 1 on a cluster."""
    ray_address: str | None = None
    """A running Ray cluster (auto, or HOST:PORT of its head); default: Ray started in this process."""
    resume: Path | None = None
    """Continue the stopped experiment in this folder (its options apply)."""


def _flags() -> dict[str, str]:
    """Each option string of `TuneArgs` -> how many values follow it ("0", "1" or "+")."""
    flags: dict[str, str] = {}
    for f in dataclasses.fields(TuneArgs):
        if f.name == "tune":
            flags["--tune.space"] = "+"
            flags["--tune.space-file"] = "1"
            continue
        name = "--" + f.name.replace("_", "-")
        if f.type in ("bool", bool):
            flags[name] = flags["--no-" + name[2:]] = "0"
        else:
            flags[name] = "1"
    return flags


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(tune's options, the trainer's options) of a `seedpool tune ALGO` command line."""
    flags = _flags()
    mine: list[str] = []
    theirs: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg.split("=", 1)[0]
        count = flags.get(name.replace("_", "-") if name.startswith("--") else name)
        if count is None:
            theirs.append(arg)
            i += 1
            continue
        mine.append(arg)
        i += 1
        if "=" in arg or count == "0":
            continue
        if count == "1":
            mine += argv[i:i + 1]
            i += 1
        else:
            while i < len(argv) and not argv[i].startswith("--"):
                mine.append(argv[i])
                i += 1
    return mine, theirs


def parse_tune_args(argv: list[str]) -> TuneArgs:
    """tyro's parse of tune's own options (``--help`` prints them and exits)."""
    return tyro.cli(TuneArgs, args=argv, prog="seedpool tune ALGO",
                    description=" ".join(TuneArgs.__doc__.split()) + " Trainer options: seedpool train ALGO --help.")


@dataclass
class ExperimentSpec:
    """A checked `seedpool tune` experiment: what every member and a resume rebuild from."""

    algo: str
    trainer_argv: list[str]
    scheduler: Literal["pbt", "search"]
    space: list[str]
    metric: str
    mode: Literal["max", "min"]
    population: int
    num_samples: int
    perturbation_interval: int
    total_timesteps: int
    seed: int
    dir: str
    cpus_per_member: float | None = None
    initial: list[dict[str, Any]] = field(default_factory=list)
    """PBT: each member's first hyperparameters (drawn with --seed), so the same members can be
    trained without PBT for a comparison."""

    @property
    def names(self) -> list[str]:
        """The tuned options' config paths, in the order given."""
        return [r.path for r in self.ranges()]

    def ranges(self) -> list[Range]:
        return parse_ranges(self.space, self.base_config(), live_only=self.scheduler == "pbt")

    def base_config(self) -> Any:
        """The trainer's config as the command line gave it."""
        from seedpool.cli import train_config

        return train_config(self.algo, list(self.trainer_argv))

    def member_config(self, member: int, values: dict[str, Any]) -> Any:
        """Member ``member``'s config: its own runs folder and seed, ``values`` applied; its torch
        threads follow its share of the cores unless --torch-threads was given."""
        cfg = self.base_config()
        given = {a.split("=", 1)[0] for a in self.trainer_argv}
        changes: dict[str, Any] = {"runs_dir": Path(self.dir) / "members" / str(member), "seed": cfg.seed + member}
        if "--progress" not in given:
            changes["progress"] = "off"
        if "--torch-threads" not in given:
            changes["torch_threads"] = max(1, int(self.cpus_per_member or 1))
        return apply_values(dataclasses.replace(cfg, **changes), values)

    def save(self) -> None:
        path = Path(self.dir) / SPEC_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=2))
        os.replace(tmp, path)

    @classmethod
    def load(cls, folder: Path) -> ExperimentSpec:
        path = Path(folder) / SPEC_FILE
        if not path.is_file():
            raise ConfigError(f"{folder} has no {SPEC_FILE}: it is not a seedpool tune experiment folder")
        return cls(**json.loads(path.read_text()))


def build_spec(args: TuneArgs, algo: str | None, trainer_argv: list[str], folder: Path | None) -> ExperimentSpec:
    """The experiment the options describe, every option checked (nothing starts here); ``folder``
    None gives the spec a placeholder folder (for `seedpool.cli.parse_command`)."""
    if algo is None or algo.startswith("-"):
        raise ConfigError(f"say which algorithm to tune: seedpool tune {{{','.join(TRAINERS)}}} --env ID --pbt ...")
    if args.pbt == args.search:
        raise ConfigError("say how to tune: --pbt (population-based training) or --search (Optuna), one of them")
    if "--resume" in trainer_argv:
        raise ConfigError("a member cannot resume a run: continue an experiment with seedpool tune --resume DIR")
    from seedpool.cli import train_config

    cfg = train_config(algo, list(trainer_argv))  # an unknown option ends here, with tyro's message
    scheduler = "pbt" if args.pbt else "search"
    _check_counts(args, scheduler, cfg.total_timesteps)
    ranges = parse_ranges(read_space(args.tune.space, args.tune.space_file), cfg, live_only=args.pbt)
    for r in ranges:  # the values each range can reach build a config (e.g. a Literal's choices)
        for value in (r.args if r.bounds is None else r.bounds):
            apply_values(cfg, {r.path: value})
    interval = args.perturbation_interval or max(1, cfg.total_timesteps // 10)
    spec = ExperimentSpec(
        algo=algo, trainer_argv=list(trainer_argv), scheduler=scheduler, space=[r.text for r in ranges],
        metric=args.metric, mode=args.mode, population=args.population,
        num_samples=args.num_samples or (args.population if args.pbt else 4 * args.population),
        perturbation_interval=interval, total_timesteps=cfg.total_timesteps, seed=cfg.seed,
        dir=str(Path(folder).resolve()) if folder is not None else "", cpus_per_member=args.cpus_per_member)
    if scheduler == "pbt":
        spec.initial = initial_population(ranges, args.population, cfg.seed)
    return spec


def _check_counts(args: TuneArgs, scheduler: str, total: int) -> None:
    if args.population < (2 if scheduler == "pbt" else 1):
        raise ConfigError(f"--population {args.population}: PBT needs at least 2 members, a search at least 1")
    if args.num_samples is not None and (scheduler == "pbt" or args.num_samples < 1):
        raise ConfigError("--num-samples counts the runs of a --search (at least 1); a PBT population is --population")
    interval = args.perturbation_interval
    if interval is not None and interval < 1:
        raise ConfigError(f"--perturbation-interval must be at least 1 env step, got {interval}")
    if scheduler == "pbt" and interval is not None and interval >= total:
        raise ConfigError(f"--perturbation-interval {interval} is not below --total-timesteps {total}: "
                          "PBT would never exploit or explore")
    if args.cpus_per_member is not None and not (args.cpus_per_member > 0 and math.isfinite(args.cpus_per_member)):
        raise ConfigError(f"--cpus-per-member must be above 0, got {args.cpus_per_member}")


def initial_population(ranges: list[Range], population: int, seed: int) -> list[dict[str, Any]]:
    """Each member's first values, drawn from the ranges with a generator seeded by ``seed``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [{r.path: plain(r.domain().sample(random_state=rng)) for r in ranges} for _ in range(population)]


def check_metric(spec: ExperimentSpec) -> None:
    """Raise unless a member reports ``spec.metric``. The scalars every run logs are known; any
    other name is looked for in the metrics of a probe run of the trainer (built in a temporary
    folder, advanced until it logs the name or past its learning start, then deleted)."""
    if spec.metric in ALWAYS_REPORTED:
        return
    import shutil
    import tempfile

    from seedpool.runs import build_run

    folder = Path(tempfile.mkdtemp(prefix="seedpool-tune-probe-"))
    try:
        cfg = spec.base_config()
        steps = _probe_steps(cfg)
        cfg = dataclasses.replace(cfg, runs_dir=folder, progress="off", tensorboard=False, track=False,
                                  checkpoint_every_s=math.inf)
        run = build_run(spec.algo, cfg)
        try:
            run.advance(steps, until=lambda r: spec.metric in r.metrics)
            names = sorted(set(run.metrics) | set(ALWAYS_REPORTED))
        finally:
            run.close(failed=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if spec.metric not in names:
        raise ConfigError(f"--metric {spec.metric}: no {spec.algo} member reports it; the names its runs "
                          f"report: {', '.join(names)}")


def _probe_steps(cfg: Any) -> int:
    """Env steps a probe run takes at most: one update, or past learning_starts where a learner waits."""
    starts = [getattr(getattr(cfg, f.name), "learning_starts", 0) for f in dataclasses.fields(cfg)
              if dataclasses.is_dataclass(getattr(cfg, f.name))]
    return max([1, *(2 * s for s in starts if isinstance(s, int))])
