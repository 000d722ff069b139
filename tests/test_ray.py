"""Acting on a Ray cluster (--ray-address): actor groups as inference sources.

The cluster tests run a head and worker nodes on 127.0.0.1, each its own raylet and object
store (`ray.cluster_utils.Cluster`), started once for the module. The head has no CPU, so
every actor group runs on a worker node that a test can remove.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from seedpool import cli
from seedpool.distributed import ClusterError, RayConfig
from seedpool.distributed.config import plan_groups
from seedpool.experiment.metrics import series
from seedpool.experiment.plot import smooth
from seedpool.trainers import common
from seedpool.trainers import impala as trainer

# Every node and the driver on loopback: read when Ray is imported, so set before any test imports it.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
# The test's own loopback cluster, whatever token ~/.ray holds (drivers given an address send none).
os.environ["RAY_AUTH_MODE"] = "disabled"
NODE = {"object_store_memory": 100 * 2**20, "node_ip_address": "127.0.0.1"}
# Node deaths seen within ~2 s (Ray's default health checks take ~30 s).
FAST_HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 2,
                      "health_check_initial_delay_ms": 0}


@pytest.fixture(scope="module")
def cluster():
    """A head (0 CPUs) and three worker nodes of 1 CPU each, shared by this module's tests."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'seedpool[ray]')")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "_system_config": FAST_HEALTH_CHECKS, **NODE})
    for _ in range(3):
        c.add_node(num_cpus=1, **NODE)
    c.wait_for_nodes()
    yield c
    c.shutdown()


def _cfg(tmp_path, cluster, groups: int = 2, **kw) -> trainer.IMPALATrainConfig:
    """The CartPole defaults of the local learning test (16 envs), acting through Ray groups."""
    cfg = trainer.impala_defaults("CartPole-v1")
    ray = RayConfig(num_groups=groups, envs_per_group=16 // groups, cpus_per_group=1, restart_timeout_s=120)
    return dataclasses.replace(cfg, runs_dir=tmp_path, progress="off", tensorboard=False, seed=1,
                               ray_address=cluster.address, ray=ray, **kw)


def _seedpool_actors(address: str) -> list[str]:
    """Named seedpool actors still alive on the cluster (every group is named seedpool-...)."""
    import ray

    ray.init(address=address, logging_level="WARNING")
    try:
        deadline = time.monotonic() + 60  # ray.kill is asynchronous; a loaded machine is slow at it
        while True:
            names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                     if a["name"].startswith("seedpool-")]
            if not names or time.monotonic() > deadline:
                return names
            time.sleep(0.2)
    finally:
        ray.shutdown()


def _last(run_dir, key: str) -> float:
    return series(run_dir / "metrics.csv", key)[2][-1]


def test_an_actor_group_process_imports_no_torch():
    # A group restarted on another node is back sooner when its process loads no torch (it
    # only steps envs): benchmarks/results/ray_vs_local.md, restart 15.7 s -> 4.8 s.
    code = ("import sys, seedpool.distributed.group\n"
            "print(sorted(m for m in ('torch', 'seedpool.inference') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_ray_address_without_ray_installed_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    for name in ("seedpool.distributed.launch", "seedpool.distributed.source"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    code = cli.main(["train", "impala", "--env", "CartPole-v1", "--ray-address", "auto",
                     "--runs-dir", str(tmp_path), "--progress", "off"])
    assert code == cli.EXIT_BAD_INPUT
    assert "pip install 'seedpool[ray]'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # failed before a run folder was made


def test_a_local_run_never_imports_ray():
    script = textwrap.dedent("""
        import sys
        from seedpool.trainers.impala import impala_defaults
        from seedpool.runners import make_sources
        for s in make_sources(impala_defaults("CartPole-v1"), 0, {}):
            s.close()
        import seedpool.cli, seedpool.distributed
        assert "ray" not in sys.modules, "ray was imported"
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)


def test_group_layout_defaults_follow_the_cluster_cpus():
    # Groups of min(4, smallest node) CPUs, as many as the nodes hold; num_envs split over them.
    layout = plan_groups(RayConfig(), num_envs=32, envs_per_recv=None, node_cpus=[0.0, 8.0, 16.0])
    assert (layout.cpus_per_group, layout.num_groups, layout.envs_per_group, layout.batch_size) == (4, 6, 5, 2)
    layout = plan_groups(RayConfig(), num_envs=16, envs_per_recv=None, node_cpus=[2.0])
    assert (layout.cpus_per_group, layout.num_groups, layout.envs_per_group, layout.batch_size) == (2, 1, 16, 8)
    given = RayConfig(num_groups=3, envs_per_group=10, cpus_per_group=1)
    assert plan_groups(given, 16, 4, [2.0]).__dict__ == {"num_groups": 3, "envs_per_group": 10,
                                                         "batch_size": 4, "cpus_per_group": 1}
    with pytest.raises(ClusterError, match="no node with a CPU"):
        plan_groups(RayConfig(), 16, None, [0.0])


@pytest.mark.slow
@pytest.mark.timeout(600)  # the whole 150k budget: 141 s on 2 cores at load average 9-12 (2026-11-25)
def test_impala_holds_475_on_cartpole_acting_on_ray_groups_and_leaves_nothing_behind(cluster, tmp_path):
    import ray

    # What tests/test_learning_impala.py asserts of the threaded system: the mean of the last 20
    # episodes at the end of the whole default budget (150k steps), not the first time it got there.
    # One group of 16 envs, recv batches of 8: the local test's pool, on another node. Seeds 1,
    # 2 and 3 held it (2026-11-25, 73-141 s each at load average 7-12 on 2 cores).
    result = trainer.train_impala(_cfg(tmp_path, cluster, groups=1))
    assert result.step >= 150_000
    _, _, values = series(result.run_dir / "metrics.csv", "charts/episodic_return")
    best = smooth(np.asarray(values)).max()
    assert result.final_return >= 475, f"final mean of 20 episodes {result.final_return:.1f}; best {best:.1f}"
    assert not ray.is_initialized()  # the driver's connection is closed...
    assert _seedpool_actors(cluster.address) == []  # ...every group is gone...
    ray.init(address=cluster.address, logging_level="WARNING")
    try:
        assert sum(n["Alive"] for n in ray.nodes()) == 4  # ...and the cluster is still up
    finally:
        ray.shutdown()


def _train_losing_a_node(cluster, tmp_path, monkeypatch, lose) -> tuple:
    """Train with two groups; once training is under way, `lose(node)` the node of the first
    group, and stop (as on Ctrl-C) once the run has trained 5,000 more steps with that group
    back. Returns the run's result, the sources and {"step", "node"} of the loss."""
    from seedpool.experiment.run import Run

    made = []
    real_make_sources = common.make_sources  # what every central trainer's build calls

    def make_sources_and_remember(*args, **kwargs):
        made.extend(real_make_sources(*args, **kwargs))
        return made

    end_update = Run.end_update
    removed = {}

    def end_update_then_remove_then_stop(run, step, scalars):
        end_update(run, step, scalars)
        if not removed and step > 2_000:
            node = next(n for n in cluster.worker_nodes if n.node_id == made[0].node_id)
            removed.update(step=step, node=node.node_id)
            lose(node)
        elif removed and scalars["charts/dropped_steps"] > 0 and step >= removed["step"] + 5_000:
            # The restarted group has sent its first batch (its envs' cut unrolls were dropped).
            run.stop_requested = True  # what Ctrl-C does

    monkeypatch.setattr(common, "make_sources", make_sources_and_remember)
    monkeypatch.setattr(Run, "end_update", end_update_then_remove_then_stop)
    result = trainer.train_impala(_cfg(tmp_path, cluster, total_timesteps=10_000_000))
    return result, made, removed


def _sigkill_node(cluster, node) -> set[int]:
    """Kill a worker node as a crash would: SIGKILL to its raylet (which holds the object
    store), every process under it (the actor workers) and the node's other daemons, with no
    chance to clean up; then drop it from the cluster's list. Returns the killed pids."""
    import psutil

    started = [info.process for infos in node.all_processes.values() for info in infos]
    raylet = psutil.Process(node.all_processes["raylet"][0].process.pid)
    doomed = [raylet, *raylet.children(recursive=True)]  # the workers, before the raylet goes
    doomed += [psutil.Process(p.pid) for p in started if p.pid != raylet.pid]
    for p in doomed:  # the raylet first: it cannot start a worker behind our back
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    for p in started:  # reap the processes this test process started (no zombies)
        p.wait(timeout=30)
    cluster.remove_node(node, allow_graceful=False)  # bookkeeping only: nothing of it is alive
    return {p.pid for p in doomed}


def test_a_removed_node_restarts_its_group_and_the_run_goes_on(cluster, tmp_path, monkeypatch):
    """The node of one group is removed once training is under way; the group must come back
    on the free node (its envs' partial unrolls dropped), be counted, and the run train 5,000
    more steps, then stop as on Ctrl-C."""
    result, made, removed = _train_losing_a_node(cluster, tmp_path, monkeypatch, cluster.remove_node)
    assert result.interrupted and result.step >= removed["step"] + 5_000
    assert made[0].group_restarts == 1 and made[0].node_id != removed["node"]
    assert _last(result.run_dir, "charts/worker_restarts") == 1
    assert _seedpool_actors(cluster.address) == []


def test_a_node_killed_hard_restarts_its_group_and_leaves_nothing_behind(cluster, tmp_path, monkeypatch):
    """As above, but the node dies as in a crash (SIGKILL of its raylet, object store and
    workers): Ray sees it only when its health checks fail. The group must come back on a free
    node and the run go on; no process of the dead node may survive it."""
    import ray

    from conftest import new_shm_leaks, shm_entries, wait_gone

    while len(cluster.worker_nodes) < 3:  # two groups and a free node (an earlier test removed one)
        cluster.add_node(num_cpus=1, **NODE)
    cluster.wait_for_nodes()
    killed: set[int] = set()
    shm = shm_entries()
    result, made, removed = _train_losing_a_node(
        cluster, tmp_path, monkeypatch, lambda node: killed.update(_sigkill_node(cluster, node)))
    assert killed and result.interrupted and result.step >= removed["step"] + 5_000
    assert made[0].group_restarts == 1 and made[0].node_id != removed["node"]
    assert made[1].group_restarts == 0  # the other group's node was not touched
    assert _last(result.run_dir, "charts/worker_restarts") == 1
    assert not wait_gone(killed, timeout=30), "a process of the killed node is still running"
    assert not new_shm_leaks(shm), "the killed node's group left shared memory behind"
    assert _seedpool_actors(cluster.address) == []
    ray.init(address=cluster.address, logging_level="WARNING")
    try:
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert removed["node"] not in alive and len(alive) == 1 + len(cluster.worker_nodes)
    finally:
        ray.shutdown()


def test_groups_the_cluster_cannot_place_are_reported_and_acting_goes_on_without_them(cluster, capsys):
    import ray

    from seedpool.actors.pool_source import SourceRetired
    from seedpool.distributed.launch import make_ray_sources

    make = {"task": "CartPole-v1", "backend": "serial", "num_workers": None}
    free = len(cluster.worker_nodes)  # 1 CPU each, nothing running
    with pytest.raises(ClusterError, match="no group to act with"):  # 2-CPU groups fit nowhere
        make_ray_sources(cluster.address, RayConfig(cpus_per_group=2, placement_timeout_s=2), make, 8, None, 0)
    assert not ray.is_initialized()
    # A long timeout for the groups that fit (a loaded machine starts one in 5-60 s); the one
    # beyond the cluster's CPUs gets only a short look once they are up.
    cfg = RayConfig(num_groups=free + 1, envs_per_group=4, cpus_per_group=1, placement_timeout_s=180,
                    restart_timeout_s=3)
    sources = make_ray_sources(cluster.address, cfg, make, 16, None, 0)
    try:
        assert len(sources) == free
        assert f"1 of {free + 1} actor group(s) could not be placed" in capsys.readouterr().out
        for s in sources:
            s.start()
            s.send(np.zeros(2, np.int64), s.recv().env_ids)
        # With no free CPU left, the group of a removed node cannot come back: it retires
        # after restart_timeout_s and the others keep stepping.
        cluster.remove_node(next(n for n in cluster.worker_nodes if n.node_id == sources[0].node_id))
        with pytest.raises(SourceRetired):
            for _ in range(1000):
                sources[0].send(np.zeros(2, np.int64), sources[0].recv().env_ids)
        assert "is lost" in capsys.readouterr().out
        assert len(sources[1].recv().env_ids) == 2
    finally:
        for s in sources:
            s.close()
    assert not ray.is_initialized()
    assert _seedpool_actors(cluster.address) == []
