"""Smoke tests of the engine benchmark: harness, report, CLI and the uneven bench env."""

from __future__ import annotations

import platform
import time

import gymnasium as gym
import pytest

from seedpool.bench import main
from seedpool.bench.cases import Target, gym_case, loop_case
from seedpool.bench.envs import UnevenEnv
from seedpool.bench.harness import Case, CaseResult, Group, Timing, Unavailable, _worker_processes, run_group
from seedpool.bench.report import MEMORY_COLUMNS, THROUGHPUT_COLUMNS, machine_info, render, target_table

TINY = Timing(warmup=0.05, window=0.1, repeats=2)


def _cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


class _FlakyStepper:
    """Steps fine `ok_calls` times, then raises; records whether it was closed."""

    env_steps = 1

    def __init__(self, ok_calls: int) -> None:
        self.left = ok_calls
        self.closed = False

    def step(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise RuntimeError("env exploded")

    def close(self) -> None:
        self.closed = True


def _raise(exc: Exception):
    def setup():
        raise exc
    return setup


def test_group_runs_interleaved_and_reports_errors_per_case() -> None:
    flaky = _FlakyStepper(ok_calls=1000)
    cases = [
        loop_case(_cartpole, 2),
        Case("broken", _raise(RuntimeError("boom")), 2),
        Case("absent", _raise(Unavailable("peer not installed")), 2),
        Case("flaky", lambda: flaky, 1),
    ]
    results = run_group(Group("toy", "Toy", cases, baselines=("loop",)), TINY, log=lambda _: None)
    loop, broken, absent, flaky_result = results
    assert len(loop.rates) == 2 and all(rate > 100 for rate in loop.rates) and loop.error is None
    assert broken.error == "error: RuntimeError: boom" and not broken.rates
    assert absent.error == "n/a (peer not installed)"
    # The flaky case dies in its warm-up or a window: it is closed and reported, the others go on.
    assert flaky.closed and flaky_result.error == "error: RuntimeError: env exploded"

    text = render(machine_info(), TINY, [(Group("toy", "Toy", cases, baselines=("loop",)), results)], ())
    header = "| " + " | ".join([*THROUGHPUT_COLUMNS, "× loop"]) + " |"
    assert header in text
    assert "| broken | 2 | error: RuntimeError: boom |" in text
    assert "| absent | 2 | n/a (peer not installed) |" in text
    loop_row = next(line for line in text.splitlines() if line.startswith("| loop |"))
    assert loop_row.endswith("| 1.00 |")
    for key in ("date", "machine", "kernel", "python", "numpy", "gymnasium", "ale-py", "envpool", "torch"):
        assert f"- **{key}:**" in text
    assert "nproc = " in text and "method:" in text
    assert "\n## Targets\n" in text and "issue" not in text.lower()  # the report names no tracker


def test_target_table_compares_medians() -> None:
    group = Group("g", "G", [])
    fast, slow = CaseResult("fast", 8, rates=[300.0, 100.0, 200.0]), CaseResult("slow", 8, rates=[100.0])
    targets = [Target("g", "fast", "slow", 1.5, ""), Target("g", "slow", "fast", 1.0, ""),
               Target("other", "x", "y", 1.0, "")]
    table = target_table(targets, [(group, [fast, slow])])
    assert "| g | fast / slow | 2.00 | ≥ 1.5 | yes |" in table
    assert "| g | slow / fast | 0.50 | ≥ 1 | **no** |" in table
    assert "other" not in table  # groups that were not run are left out


def test_cli_writes_report_and_leaves_no_process(tmp_path) -> None:
    before = set(_worker_processes())
    out = tmp_path / "engine.md"
    code = main(["--tasks", "uneven", "--cases", "loop,gym_async", "--warmup", "0", "--window", "0.1",
                 "--repeats", "1", "--out", str(out)])
    assert code == 0
    text = out.read_text()
    assert "## Uneven pure-Python env" in text
    assert "| loop | 8 |" in text and "| gym_async | 8 |" in text
    assert "| " + " | ".join(MEMORY_COLUMNS) + " |" in text  # gym_async runs worker processes
    assert "tasks=uneven" in text
    assert set(_worker_processes()) <= before


def test_gym_async_case_reports_worker_memory() -> None:
    before = set(_worker_processes())
    result, = run_group(Group("m", "M", [gym_case(_cartpole, 2, asynchronous=True)]),
                        Timing(warmup=0.05, window=0.05, repeats=1), log=lambda _: None)
    assert result.num_workers == 2 and result.worker_rss and result.worker_rss > result.worker_uss > 0
    assert set(_worker_processes()) <= before


def test_cli_rejects_unknown_task(capsys) -> None:
    assert main(["--tasks", "cartpole,tetris"]) == 2
    assert "tetris" in capsys.readouterr().err


def test_uneven_env_is_slow_on_a_per_seed_phase() -> None:
    env = UnevenEnv(step_cpu_us=300.0, slow_every=10, slow_factor=10.0, episode_length=5)
    env.reset(seed=3)
    slow = [i for i in range(30) if env.is_slow(i)]
    assert len(slow) == 3 and slow[1] - slow[0] == 10
    twin = UnevenEnv()
    twin.reset(seed=3)
    assert twin.phase == env.phase
    assert len({_phase_of(seed) for seed in range(10)}) > 1  # envs are slow at different times

    costs = []
    for i in range(20):
        start = time.thread_time()
        _, _, terminated, _, _ = env.step(1)
        costs.append((env.is_slow(i), time.thread_time() - start))
        if terminated:  # the slow phase runs across episodes
            env.reset()
    slow_cost = min(c for s, c in costs if s)
    fast_cost = max(c for s, c in costs if not s)
    assert slow_cost > 5 * 300e-6 * 0.9 and slow_cost > 3 * fast_cost


def _phase_of(seed: int) -> int:
    env = UnevenEnv()
    env.reset(seed=seed)
    return env.phase


def test_uneven_env_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="slow_every"):
        UnevenEnv(slow_every=0)



@pytest.mark.parametrize("flags, said", [
    ("fpu sse2 avx avx2 fma", "AMD EPYC (family 25, model 1; AVX2, no AVX-512)"),
    ("fpu avx2 avx512f avx512_bf16", "AMD EPYC (family 25, model 1; AVX-512 with BF16)"),
    ("fpu avx2 avx512f amx_bf16", "AMD EPYC (family 25, model 1; AVX-512, no BF16, AMX)"),
])
def test_machine_line_names_the_cpus_family_and_vector_instructions(tmp_path, flags, said):
    from seedpool.bench.report import cpu_model

    info = tmp_path / "cpuinfo"
    info.write_text(f"processor\t: 0\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: {flags}\n"
                    "processor\t: 1\nflags\t\t: nothing\n")
    assert cpu_model(info) == said
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd\n")
    assert cpu_model(arm) == (platform.processor() or "unknown")  # no x86 flags: the name alone
