"""Every `seedpool ...` command shown in README.md and docs/ still parses, and the cheap ones run.

A renamed or removed option, or a wrong algorithm, in a documented command fails here
rather than in a user's shell. Commands are taken from fenced code blocks and from inline
code that holds a whole command; placeholders (RUN_DIR, ID, N, ...) are filled in with
real values first. Each is parsed against the CLI without training
(`seedpool.cli.parse_command`, what `--dry-run` prints); the CartPole training commands
also run for a few hundred env steps, and eval/plot run on the folder one of them left.
docs/architecture.md's layer table is checked against every import in seedpool/, and every
`seedpool.x.y` name and repository file the docs mention must exist.
"""
from __future__ import annotations

import re
import shlex
import warnings
from pathlib import Path

import pytest
import tyro

from seedpool.cli import TRAINERS, EvalArgs, PlotArgs, UsageError, _load, main, parse_command

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIXTURES = ROOT / "tests" / "fixtures" / "checkpoints_v1"  # one run folder per trainer
COMMANDS = ("train", "eval", "plot", "bench", "tune")
# Placeholders in documented commands, and what stands in for them (run folders separately).
PLACEHOLDERS = {"ID": "CartPole-v1", "N": "3", "PNG": "curves.png", "<Game>": "Breakout"}
# Other programs whose command lines the docs show, and their flags named alone in prose.
OTHER_PROGRAMS = {"ray", "tensorboard", "python", "pip", "make", "py-spy"}
OTHER_PROGRAMS_FLAGS = {"--num-cpus"}
# Budget options appended to the commands that really train (run options every trainer has).
TINY = ["--total-timesteps", "512", "--progress", "off", "--no-tensorboard"]


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def _inline_spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", prose)


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) for every seedpool command line in the docs."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        for _, body in _fenced_blocks(text):
            for line in body.splitlines():
                line = line.split("#", 1)[0].strip()
                # "seedpool eval runs/...  /  seedpool plot runs/..." shows two commands on one line.
                for part in re.split(r"\s+/\s+(?=seedpool )", line):
                    if part.startswith("seedpool ") and part.split()[1:2] and part.split()[1] in COMMANDS:
                        found.append((doc.name, part))
        for span in _inline_spans(text):
            words = span.split()
            # Inline code that names a command in prose (`seedpool train ALGO`, `seedpool eval`,
            # `--env ... | --resume ...`) is not a command line; one with options or a run folder is.
            if (len(words) > 2 and words[0] == "seedpool" and words[1] in COMMANDS
                    and not {"ALGO", "|", "..."} & set(words)):
                found.append((doc.name, span))
    return found


def _algo(words: list[str]) -> str:
    return words[1] if words[0] == "train" else "ppo"


def _is_run_folder(word: str) -> bool:
    return word.rstrip(".") in ("RUN_DIR", "RUN") or word.startswith("runs/")


def concrete(command: str, run_folder: Path) -> list[str]:
    """The command's argv (without "seedpool"), placeholders filled in and optional brackets dropped."""
    words = shlex.split(command.replace("[", " ").replace("]", " "))[1:]  # a tune range is quoted
    out: list[str] = []
    for word in words:
        if _is_run_folder(word):
            out.append(str(run_folder))
        elif word in PLACEHOLDERS:
            out.append(PLACEHOLDERS[word])
        else:  # a placeholder inside a word: MinAtar/<Game>-v1
            out.append(re.sub(r"<\w+>", lambda m: PLACEHOLDERS[m.group(0)], word))
    return out


COMMAND_LINES = documented_commands()


def test_the_docs_show_commands_of_every_kind():
    """The extraction itself can fail: it must find the commands known to be there."""
    argvs = [c.split()[1:3] for _, c in COMMAND_LINES]
    for algo in TRAINERS:
        assert ["train", algo] in argvs, f"no documented `seedpool train {algo}` command found"
    assert {"eval", "plot"} <= {a[0] for a in argvs}
    assert len(COMMAND_LINES) >= 20, COMMAND_LINES


@pytest.mark.parametrize("where, command", COMMAND_LINES, ids=[f"{w}:{c}" for w, c in COMMAND_LINES])
def test_documented_command_parses(where, command, capsys):
    words = command.split()[1:]
    argv = concrete(command, FIXTURES / _algo(words))
    if "--help" in argv:
        with pytest.raises(SystemExit) as exc:
            parse_command(argv)
        assert exc.value.code == 0, f"{where}: `{command}` --help failed"
        assert "usage:" in capsys.readouterr().out
        return
    try:
        parsed = parse_command(argv)
    except (SystemExit, UsageError) as exc:  # tyro: unknown option or bad value; cli: wrong algorithm
        pytest.fail(f"{where}: `{command}` does not parse ({' '.join(argv)}): {exc}\n"
                    f"{capsys.readouterr().err}")
    if words[0] == "train":
        assert type(parsed).__name__ == _load(TRAINERS[words[1]].config).__name__
        if "--env" in argv:
            assert parsed.env == argv[argv.index("--env") + 1]
    else:
        assert isinstance(parsed, {"eval": EvalArgs, "plot": PlotArgs}.get(words[0], object))


def _options_of(cls: type, default: object = None) -> set[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # get_parser: tyro's own parser, as tyro.cli builds it
        parser = tyro.extras.get_parser(cls, default=default)
    return {opt for action in parser._actions for opt in action.option_strings}


def test_options_named_in_the_docs_exist():
    """Every `--option` in inline code or a bash block is an option of some seedpool command."""
    import seedpool.bench
    from seedpool.tune.options import TuneArgs

    known = {"--dry-run"} | OTHER_PROGRAMS_FLAGS
    for entry in TRAINERS.values():
        known |= _options_of(_load(entry.config), _load(entry.defaults)("CartPole-v1"))
        if entry.renamed is not None:  # old spellings the command line still takes (with a deprecation line)
            known |= {f"--{section}.{old.replace('_', '-')}" for section, old in _load(entry.renamed)}
        if entry.converted is not None:  # old options whose value converts (with a deprecation line)
            known |= {opt.flag(opt.old) for opt in _load(entry.converted)}
    for cls in (EvalArgs, PlotArgs, seedpool.bench.BenchArgs, TuneArgs):
        known |= _options_of(cls)
    stale = []
    for doc in DOCS:
        text = doc.read_text()
        # Inline code that is not another program's command line, and seedpool lines of bash blocks.
        places = [span for span in _inline_spans(text) if span.split()[0] not in OTHER_PROGRAMS
                  and not span.split()[0].endswith(".py")]
        places += [line for lang, body in _fenced_blocks(text) if lang in ("bash", "sh")
                   for line in body.splitlines() if line.startswith("seedpool ")]
        for place in places:
            for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*(?:\.[a-z0-9-]*)*", place):
                if option.endswith("."):  # `--ppo.*`: a section of options
                    ok = any(k.startswith(option) for k in known)
                else:
                    ok = option in known
                if not ok:
                    stale.append(f"{doc.name}: {option}")
    assert not stale, f"options in the docs that no seedpool command has: {stale}"


def _cheap(command: str) -> bool:
    """A training command that runs on one CPU in seconds: CartPole, no cluster, GPU or run folder."""
    argv = command.split()
    return (argv[1] == "train" and "--env" in argv and argv[argv.index("--env") + 1] == "CartPole-v1"
            and not {"--resume", "--ray-address", "--help", "cuda"} & set(argv))


CHEAP = sorted({c.split("#")[0].strip() for _, c in COMMAND_LINES if _cheap(c)})


def test_cheap_documented_commands_run(tmp_path, capsys):
    """Run each CartPole training command with a tiny budget, then eval and plot its folder."""
    assert len(CHEAP) >= 4, CHEAP  # ppo, impala, dqn, apex
    for i, command in enumerate(CHEAP):
        runs = tmp_path / f"{command.split()[2]}{i}"  # one folder per command (a trainer may have several)
        argv = command.split()[1:] + TINY + ["--runs-dir", str(runs)]
        assert main(argv) == 0, f"`{command}` failed: {capsys.readouterr().err}"
        (folder,) = runs.iterdir()
        assert (folder / "checkpoint.pt").exists() and (folder / "config.json").exists()
    ppo_run = next(next(tmp_path.glob("ppo*")).iterdir())
    for _, command in COMMAND_LINES:
        words = command.split()
        # A match (--against) needs a game's run: tests/test_league.py plays them.
        if words[1] in ("eval", "plot") and "--video" not in words and "--against" not in words:
            argv = concrete(command, ppo_run)
            if "--out" in argv:  # not into the working directory
                argv[argv.index("--out") + 1] = str(tmp_path / "out.png")
            assert main(argv) == 0, f"`{command}` failed"
    out = capsys.readouterr().out
    assert "return" in out and "plot:" in out


def test_readme_engine_snippet_runs():
    """The README's engine snippet, with its loops shortened and its undefined names supplied."""
    import gymnasium as gym
    import numpy as np

    text = (ROOT / "README.md").read_text()
    (snippet,) = [body for lang, body in _fenced_blocks(text) if lang == "python" and "seedpool.make(" in body]
    snippet = snippet.replace("range(1000)", "range(20)")  # the same calls, fewer of them

    class MyEnv(gym.Env):
        """The README's user-written env: a level number and a ten-step episode."""

        observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def __init__(self, level: int = 0) -> None:
            self.level, self.t = level, 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(3, np.float32), {}

        def step(self, action):
            self.t += 1
            return np.full(3, self.level / 10, np.float32), 1.0, self.t >= 10, False, {}

    sb3 = pytest.importorskip("stable_baselines3")
    scope = {"MyEnv": MyEnv, "make_env": lambda i: lambda: gym.make("CartPole-v1"), "PPO": sb3.PPO}
    try:
        exec(compile(snippet, "README.md", "exec"), scope)
        assert scope["pool"].num_envs == 32 and scope["vec"].num_envs == 8
    finally:
        for name in ("pool", "vec"):
            if name in scope:
                scope[name].close()
        if "model" in scope:
            scope["model"].get_env().close()


def test_dry_run_prints_the_resolved_config_and_trains_nothing(tmp_path, capsys):
    import json

    argv = ["train", "dqn", "--env", "CartPole-v1", "--seed", "7", "--runs-dir", str(tmp_path), "--dry-run"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["algo"] == "dqn" and printed["config"]["seed"] == 7
    assert not any(tmp_path.iterdir())
    with pytest.raises(SystemExit):  # an unknown option still fails
        main(["train", "dqn", "--env", "CartPole-v1", "--dqn.no-such-option", "1", "--dry-run"])


def _layer_table() -> dict[str, int]:
    """Package (``envs``, ``records``, ``__init__``, ``cli``...) -> layer, from architecture.md's table."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers = {}
    for number, packages in re.findall(r"^\| (\d+) \| ([^|]+) \|", section, flags=re.M):
        for name in re.findall(r"`([\w.]+?)(?:/|\.py)`", packages):
            layers[name] = int(number)
    return layers


def _imports(path: Path) -> list[tuple[str, int]]:
    """(seedpool module, line) of every absolute seedpool import in a file, inside functions too."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
    return [(m, line) for m, line in found if m == "seedpool" or m.startswith("seedpool.")]


def test_each_layer_imports_only_the_layers_below_it():
    """architecture.md's layer table holds for every import in seedpool/."""
    layers = _layer_table()
    package_dir = ROOT / "seedpool"
    on_disk = {p.stem if p.is_file() else p.name for p in package_dir.iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert on_disk == set(layers), f"architecture.md's layers list {sorted(layers)}; seedpool/ holds {sorted(on_disk)}"

    def owner(module: str) -> str:
        parts = module.split(".")
        return "__init__" if len(parts) == 1 else parts[1]

    wrong = []
    for path in package_dir.rglob("*.py"):
        rel = path.relative_to(package_dir)
        here = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for module, line in _imports(path):
            there = owner(module)
            if there != here and layers[there] >= layers[here]:
                wrong.append(f"{rel}:{line} imports {module} (layer {layers[there]}, not below {layers[here]})")
    assert not wrong, "imports against docs/architecture.md's layers:\n" + "\n".join(wrong)


def test_modules_and_files_the_docs_name_exist():
    """Every `seedpool.x.y` the docs name imports, and every repository file they name is there."""
    import importlib

    missing = []
    for doc in DOCS:
        text = doc.read_text()
        for ref in sorted(set(re.findall(r"`(seedpool(?:\.\w+)+)", text))):
            parts = ref.split(".")
            # The longest importable prefix, then attributes (seedpool.algos.ppo.a2c_config).
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                    break
                except ModuleNotFoundError:
                    continue
            for name in parts[i:]:
                obj = getattr(obj, name, None)
            if obj is None:
                missing.append(f"{doc.name}: {ref}")
        paths = re.findall(r"((?:seedpool|benchmarks|tests|docs)/[\w/.-]*\.(?:py|md|png))", text)
        packages = "runners|trainers|algos|actors|inference|envs|replay|models|experiment|distributed|compat|bench"
        paths += ["seedpool/" + p for p in re.findall(rf"`((?:{packages})/[\w/.-]+\.py)`", text)]
        missing += [f"{doc.name}: {p}" for p in sorted(set(paths)) if not (ROOT / p).exists()]
    assert not missing, f"the docs name what the repository does not have: {missing}"
