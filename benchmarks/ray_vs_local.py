"""Acting on Ray vs acting locally: end-to-end IMPALA throughput, group restart time, memory.

- **Throughput**: `seedpool train impala --env ENV` as users run it, with local actors and
  with `--ray-address` pointing at a one-node Ray cluster that this script starts
  (`ray start --head` with its own temp dir and port) and stops again (by the process ids
  of that cluster only: never `ray stop`). Cases are interleaved over the repeats; each
  runs for warm-up + window, is stopped with Ctrl-C, and its rate is read from the
  metrics.csv rows inside the window. Medians are reported.
- **Memory**: at the end of each window, PSS of seedpool's processes (the trainer, its env
  workers, and on Ray the actor-group process and its workers) and of Ray's own processes
  (GCS, raylet, agents, idle workers), and the CPU Ray's own processes used in the window.
- **Restart**: on a three-node cluster on one machine (`ray.cluster_utils.Cluster`, node
  deaths detected by 1 s health checks), one group steps random actions; the node it runs
  on is killed (no graceful shutdown), and the time until the group's next batch (from its
  restarted life, on another node) is measured.
- **Messages**: one source without a learner, random actions, as fast as it goes: local
  pool vs Ray group; env steps/s and the driver's CPU per batch message.
- **Bytes per env step** crossing the network, from a real batch of each task.

    .venv/bin/python benchmarks/ray_vs_local.py             # 3 repeats, 10 s + 30 s per run
    .venv/bin/python benchmarks/ray_vs_local.py --quick     # sanity run

writes benchmarks/results/ray_vs_local.md.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from seed_vs_sync import machine, wait_for_metrics  # noqa: E402 - shared with the other end-to-end benchmarks

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "ray_vs_local.md"
PY = sys.executable
RAY = str(Path(PY).parent / "ray")
ENVS = ("CartPole-v1", "Pong-v5")
CASES = ("local", "ray")
# Node deaths noticed within ~2 s (Ray's defaults take tens of seconds); see docs/ray.md.
FAST_HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 2}


# -- the one-node cluster --------------------------------------------------------------------
def start_head(temp_dir: Path, tries: int = 3) -> str:
    """`ray start --head` on a free port with its own temp dir; returns its address.

    A loaded machine can make Ray's node start time out: it is tried again.
    """
    env = {**os.environ, **{f"RAY_{k}": str(v) for k, v in FAST_HEALTH_CHECKS.items()}}
    for attempt in range(tries):
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        _ports[temp_dir] = port
        out = subprocess.run([RAY, "start", "--head", f"--port={port}", f"--temp-dir={temp_dir}",
                              f"--num-cpus={os.cpu_count()}", "--include-dashboard=false", "--disable-usage-stats"],
                             env=env, capture_output=True, text=True, timeout=300)
        if out.returncode == 0:
            return f"127.0.0.1:{port}"
        stop_head(temp_dir)
    raise RuntimeError(f"ray start failed {tries} times:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")


def ray_roots(temp_dir: Path) -> list[int]:
    """Pids of the processes started for the cluster in `temp_dir` (their command lines name its
    temp dir, or its port: the client server of the head names only the port)."""
    port = _ports.get(temp_dir)
    marks = [str(temp_dir)] + ([f":{port}"] if port else [])
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(m in part for part in (p.info["cmdline"] or []) for m in marks):
            out.append(p.info["pid"])
    return out


_ports: dict[Path, int] = {}  # temp dir -> port of the head started there


def stop_head(temp_dir: Path) -> None:
    """Stop exactly that cluster: its processes and their children (other Ray clusters are left alone)."""
    procs = tree(ray_roots(temp_dir))
    for q in procs.values():
        try:
            q.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(list(procs.values()), timeout=10)
    for q in alive:
        try:
            q.kill()
        except psutil.NoSuchProcess:
            pass


# -- one trainer run ---------------------------------------------------------------------------
def trainer_cmd(env_id: str, case: str, address: str, runs_dir: str) -> list[str]:
    """The command line of a case: the env's IMPALA defaults, with or without --ray-address."""
    cmd = [PY, "-m", "seedpool.cli", "train", "impala", "--env", env_id, "--seed", "1",
           "--total-timesteps", "1000000000", "--runs-dir", runs_dir, "--progress", "off",
           "--no-tensorboard", "--checkpoint-every-s", "1e9"]
    return cmd + ["--ray-address", address] if case == "ray" else cmd


def tree(pids: list[int]) -> dict[int, psutil.Process]:
    """The processes `pids` and all their descendants."""
    out = {}
    for pid in pids:
        try:
            root = psutil.Process(pid)
            out.update({q.pid: q for q in [root, *root.children(recursive=True)]})
        except psutil.NoSuchProcess:
            pass
    return out


def split_ray(temp_dir: Path) -> tuple[dict, dict]:
    """(Ray's own processes, seedpool's actor groups with their env workers) of the cluster."""
    everything = tree(ray_roots(temp_dir))
    groups = [q.pid for q in everything.values() if _name(q).startswith("ray::ActorGroup")]
    ours = tree(groups)
    return {pid: q for pid, q in everything.items() if pid not in ours}, ours


def _name(q: psutil.Process) -> str:
    try:
        return " ".join(q.cmdline())
    except psutil.Error:
        return ""


def pss_mib(procs: dict) -> float:
    """Proportional set size of these processes (shared pages split between them), MiB."""
    total = 0
    for q in procs.values():
        try:
            info = q.memory_full_info()
            total += getattr(info, "pss", info.rss)
        except psutil.Error:
            pass
    return total / 2**20


def cpu_s(procs: dict) -> float:
    """CPU seconds these processes have used so far."""
    total = 0.0
    for q in procs.values():
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def run_case(env_id: str, case: str, a: argparse.Namespace, address: str, temp_dir: Path) -> dict:
    """Run one trainer for warm-up + window, measure, Ctrl-C it; the rate comes from metrics.csv."""
    from seedpool.experiment.metrics import series

    with tempfile.TemporaryDirectory() as runs_dir:
        proc = subprocess.Popen(trainer_cmd(env_id, case, address, runs_dir), cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            csv = wait_for_metrics(proc, Path(runs_dir), a.warmup_s)
            ray_own, _ = split_ray(temp_dir)
            ray_cpu0, t0 = cpu_s(ray_own), time.monotonic()
            if csv is not None:
                time.sleep(a.window_s)
            ray_own, groups = split_ray(temp_dir)
            ray_cores = (cpu_s(ray_own) - ray_cpu0) / (time.monotonic() - t0)
            mem = {"seedpool_mib": pss_mib({**tree([proc.pid]), **groups}), "ray_mib": pss_mib(ray_own)}
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=180)
        finally:
            if proc.poll() is None:  # interrupted: leave no trainer behind
                proc.kill()
        if csv is None:
            raise RuntimeError(f"{env_id} {case} wrote no metrics; stderr:\n{err[-3000:]}")
        steps, times, _ = series(csv, "charts/SPS")
    inside = [(s, t) for s, t in zip(steps, times) if t >= a.warmup_s]
    if len(inside) < 2:
        raise RuntimeError(f"{env_id} {case}: fewer than 2 metric rows inside the window")
    (s0, t0), (s1, t1) = inside[0], inside[-1]
    layout = next((line for line in out.splitlines() if "actor group(s)" in line), "")
    return {"env": env_id, "case": case, "steps_per_s": (s1 - s0) / (t1 - t0), "ray_cores": ray_cores,
            "layout": layout.replace("[seedpool] ", ""), **mem}


# -- one group without a learner: the cost of a message ---------------------------------------------
def message_rate(env_id: str, address: str | None, seconds: float) -> dict:
    """Random actions through one source of 16 envs (batches of 8), as fast as it goes: a Ray group
    on the cluster at `address`, or (None) a local pool; env steps/s and this process's CPU per batch."""
    import numpy as np

    from seedpool.distributed import RayConfig
    from seedpool.runners import CentralRunConfig, make_sources

    cfg = CentralRunConfig(env=env_id, num_envs=16, ray_address=address,
                           ray=RayConfig(num_groups=1, envs_per_group=16, cpus_per_group=os.cpu_count()))
    [source] = make_sources(cfg, 0, {})
    me = psutil.Process()
    try:
        source.start()
        for _ in range(20):  # warm-up: every env reset and stepping
            batch = source.recv()
            source.send(np.zeros(len(batch.env_ids), np.int64), batch.env_ids)
        t0, c0 = time.monotonic(), me.cpu_times()
        n = batches = 0
        while time.monotonic() - t0 < seconds:
            batch = source.recv()
            source.send(np.zeros(len(batch.env_ids), np.int64), batch.env_ids)
            n, batches = n + len(batch.env_ids), batches + 1
        c1, dt = me.cpu_times(), time.monotonic() - t0
    finally:
        source.close()
    cpu = (c1.user + c1.system) - (c0.user + c0.system)
    return {"env": env_id, "case": "ray" if address else "local", "steps_per_s": n / dt,
            "batches_per_s": batches / dt, "driver_cpu_ms_per_batch": 1000 * cpu / batches}


# -- restart time (child process: it starts its own multi-node cluster) -------------------------
def restart_main(a: argparse.Namespace) -> None:
    """Kill the node of a stepping group `a.kills` times; print one JSON line of seconds to recovery."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every node on loopback; read at import
    import numpy as np
    from ray.cluster_utils import Cluster

    from seedpool.distributed import RayConfig
    from seedpool.distributed.launch import make_ray_sources

    node = {"object_store_memory": 100 * 2**20, "node_ip_address": "127.0.0.1"}
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "_system_config": FAST_HEALTH_CHECKS, **node})
    for _ in range(2):
        cluster.add_node(num_cpus=1, **node)
    cfg = RayConfig(num_groups=1, envs_per_group=8, cpus_per_group=1)
    make = {"task": a.restart_env, "backend": "serial", "num_workers": None}
    [group] = make_ray_sources(cluster.address, cfg, make, 8, None, 0)
    seconds, restart = [], []
    try:
        group.start()
        for _ in range(a.kills):
            for _ in range(20):  # stepping
                batch = group.recv()
                group.send(np.zeros(len(batch.env_ids), np.int64), batch.env_ids)
            victim = next(n for n in cluster.worker_nodes if n.node_id == group.node_id)
            t0 = time.monotonic()
            cluster.remove_node(victim, allow_graceful=False)
            while True:
                batch = group.recv()
                if batch.restarted.all():
                    seconds.append(time.monotonic() - t0)
                    restart.append(group.last_restart_s)
                    break
                group.send(np.zeros(len(batch.env_ids), np.int64), batch.env_ids)
            group.send(np.zeros(len(batch.env_ids), np.int64), batch.env_ids)
            cluster.add_node(num_cpus=1, **node)  # room for the next restart
    finally:
        group.close()
        cluster.shutdown()
    print(json.dumps({"seconds": seconds, "restart": restart}))


def measure_restarts(a: argparse.Namespace) -> dict:
    """Run `restart_main` in a fresh process: {"seconds": [...], "restart": [...]}."""
    cmd = [PY, __file__, "--case", "restart", "--kills", str(a.kills), "--restart-env", a.restart_env]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"restart measurement failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- bytes per env step ---------------------------------------------------------------------------
def bytes_per_step(env_id: str, envs: int) -> dict:
    """What one group's batch carries each way, per env step: array payload and pickled message."""
    import numpy as np

    import seedpool
    from seedpool.actors.pool_source import PoolSource

    source = PoolSource(seedpool.make(env_id, num_envs=envs, batch_size=envs // 2, backend="serial", seed=0))
    try:
        source.start()
        batch = source.recv()
        actions = np.zeros(len(batch.env_ids), np.int64)
        payload = sum(v.nbytes for v in vars(batch).values())
        out = len(pickle.dumps((batch, 0), protocol=pickle.HIGHEST_PROTOCOL))  # as ActorGroup.recv sends it
        back = len(pickle.dumps(actions, protocol=5))  # the group remembers the batch's env ids
        obs = batch.obs.nbytes
    finally:
        source.close()
    n = len(batch.env_ids)
    return {"env": env_id, "batch": n, "obs": obs / n, "payload_out": payload / n, "message_out": out / n,
            "message_back": back / n}


# -- report ----------------------------------------------------------------------------------------
def versions() -> str:
    """Ray's version (the header has the others)."""
    import ray

    return f"- Ray {ray.__version__} (`pip install 'seedpool[ray]'`), psutil {psutil.__version__}"


def report(a: argparse.Namespace, rows: list[dict], messages: list[dict], restarts: dict,
           sizes: list[dict], header: list[str]) -> str:
    """The markdown file: throughput with ratios, memory, restart time, bytes per step."""
    lines = ["# Acting on Ray vs acting locally: IMPALA end to end, restarts, memory", "", *header, versions(),
             f"- Method: `seedpool train impala --env ENV` (each env's defaults) as a fresh process, with and "
             f"without `--ray-address` to a one-node cluster started by this script (`ray start --head "
             f"--num-cpus {os.cpu_count()}`, default group layout); warm-up {a.warmup_s:g} s, window "
             f"{a.window_s:g} s, {a.repeats} interleaved repeat(s), medians. The cluster stays up during the "
             "local runs too (its idle cost is in the `Ray CPU` column).",
             "- **The machine is shared with a long PPO training run in the background: absolute figures "
             "move with its load; the ratios between cases of this run are what count.**", "",
             "| env | case | env steps/s (median) | runs | × local | seedpool PSS MiB | Ray PSS MiB | Ray CPU (cores) |",
             "|---|---|---:|---|---:|---:|---:|---:|"]
    for env_id in ENVS:
        med = {c: statistics.median(r["steps_per_s"] for r in rows if r["env"] == env_id and r["case"] == c)
               for c in CASES if any(r["env"] == env_id and r["case"] == c for r in rows)}
        for c, v in med.items():
            mine = [r for r in rows if r["env"] == env_id and r["case"] == c]
            runs = ", ".join(f"{r['steps_per_s']:,.0f}" for r in mine)
            ratio = f"**{v / med['local']:.2f}**" if "local" in med else "-"
            lines.append(f"| {env_id} | {c} | {v:,.0f} | {runs} | {ratio} | "
                         f"{statistics.median(r['seedpool_mib'] for r in mine):,.0f} | "
                         f"{statistics.median(r['ray_mib'] for r in mine):,.0f} | "
                         f"{statistics.median(r['ray_cores'] for r in mine):.2f} |")
    layouts = sorted({f"{r['env']}: {r['layout']}" for r in rows if r["layout"]})
    lines += ["", "Target: ray / local >= 0.7 for each env.", "", "Ray layouts used:", *[f"- {x}" for x in layouts]]
    lines += ["", "## One source without a learner: what a message costs", "",
              "Random actions through one source of 16 envs (batches of 8, two in flight) as fast as it "
              f"goes for {a.window_s / 3:g} s: a local pool, or one Ray group on the same one-node cluster. "
              "Driver CPU: this process's CPU time per batch (recv + send).", "",
              "| env | source | env steps/s | batches/s | driver CPU ms per batch |", "|---|---|---:|---:|---:|"]
    for m in messages:
        lines.append(f"| {m['env']} | {m['case']} | {m['steps_per_s']:,.0f} | {m['batches_per_s']:,.0f} | "
                     f"{m['driver_cpu_ms_per_batch']:.2f} |")
    if restarts:
        total, back = restarts["seconds"], restarts["restart"]
        lines += ["", "## Restart: node killed -> its group stepping again", "",
                  f"Three-node cluster on one machine (`ray.cluster_utils.Cluster`), health checks "
                  f"{FAST_HEALTH_CHECKS}; a group of 8 {a.restart_env} envs steps; its node's processes are "
                  "killed (`remove_node(allow_graceful=False)`); time until the group's first batch of "
                  "its restarted life arrives. Of that, *restart* is the time from the driver seeing the "
                  "group dead to its new life being ready (Ray starts a worker process on the other node, "
                  "which imports seedpool and torch and builds the pool); the rest is noticing the death "
                  "and the first batch.", "",
                  f"- total seconds: {', '.join(f'{x:.1f}' for x in total)}; median "
                  f"**{statistics.median(total):.1f} s** (target <= 10 s)",
                  f"- of which restart: {', '.join(f'{x:.1f}' for x in back)}; median {statistics.median(back):.1f} s"]
    lines += ["", "## Bytes per env step between a group and the learner", "",
              "| env | obs | batch out: arrays | batch out: pickled message | actions back: pickled |",
              "|---|---:|---:|---:|---:|"]
    for s in sizes:
        lines.append(f"| {s['env']} (batch {s['batch']}) | {s['obs']:,.0f} | {s['payload_out']:,.0f} | "
                     f"{s['message_out']:,.0f} | {s['message_back']:,.0f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run every part (or the restart child) and write the markdown file."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", default=",".join(ENVS))
    p.add_argument("--warmup-s", type=float, default=10.0)
    p.add_argument("--window-s", type=float, default=30.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--kills", type=int, default=3, help="node kills for the restart time (0: skip)")
    p.add_argument("--restart-env", default="CartPole-v1")
    p.add_argument("--quick", action="store_true", help="1 repeat, 5 s + 10 s, 1 kill")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--case", default=None, help=argparse.SUPPRESS)  # child process body
    a = p.parse_args()
    # This script's own clusters, whatever token ~/.ray holds (drivers given an address send none).
    os.environ["RAY_AUTH_MODE"] = "disabled"
    if a.case == "restart":
        restart_main(a)
        return
    if a.quick:
        a.repeats, a.warmup_s, a.window_s, a.kills = 1, 5.0, 10.0, 1
    envs = a.envs.split(",")
    header = machine()
    sizes = [bytes_per_step(e, 16) for e in envs]
    rows = []
    temp_dir = Path(tempfile.mkdtemp(prefix="rvl", dir="/tmp"))  # short: Ray's socket paths have a limit
    address = start_head(temp_dir)
    try:
        for k in range(a.repeats):
            for env_id in envs:
                for case in (CASES if k % 2 == 0 else CASES[::-1]):
                    rows.append(run_case(env_id, case, a, address, temp_dir))
                    r = rows[-1]
                    print(f"{env_id} {case}: {r['steps_per_s']:,.0f} steps/s, seedpool {r['seedpool_mib']:,.0f} "
                          f"MiB, Ray {r['ray_mib']:,.0f} MiB, Ray CPU {r['ray_cores']:.2f}", flush=True)
        messages = [message_rate(e, addr, a.window_s / 3) for e in envs for addr in (None, address)]
    finally:
        stop_head(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
    restarts = measure_restarts(a) if a.kills else {}
    header.append(f"- Load average after: {os.getloadavg()}")
    a.out.write_text(report(a, rows, messages, restarts, sizes, header))
    print(a.out.read_text())


if __name__ == "__main__":
    main()
