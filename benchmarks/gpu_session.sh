#!/usr/bin/env bash
# What seedpool measures on a machine with one CUDA GPU and many cores, in one short session
# (about 10 minutes): the CUDA paths of the trainers, learner precision on the GPU, end-to-end
# Pong steps/s with the GPU learning, and the engine's Pong throughput on all the cores.
#
#     bash benchmarks/gpu_session.sh OUTDIR        # from the repo root, seedpool importable
#
# Every step is bounded by `timeout` and goes on after a failure, so one broken path does not
# hide the others; each trainer is stopped with SIGINT (seedpool's Ctrl-C: it checkpoints and
# prints its summary). Writes OUTDIR/log.txt, precision_cuda.md and engine_gpu_machine.md.
# STEPS="ppo-pong impala-pong" runs only the steps named.
set -u
OUT=${1:?usage: gpu_session.sh OUTDIR}
mkdir -p "$OUT" "$OUT/runs"
OUT=$(cd "$OUT" && pwd)
REPO=$(pwd)
export PYTHONPATH=$REPO:$REPO/benchmarks${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
[[ $PY == */* ]] && PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")

step() {  # step SECONDS NAME COMMAND...: run in OUTDIR/runs, stop with SIGINT at SECONDS
    local limit=$1 name=$2
    shift 2
    [[ -z ${STEPS:-} || " $STEPS " == *" $name "* ]] || return 0
    echo "=== $(date -u +%T) $name (limit ${limit}s): $*"
    (cd "$OUT/runs" && timeout -s INT -k 20 "$limit" "$@")
    local rc=$?
    echo "=== $(date -u +%T) $name: exit $rc"
}
train() { local limit=$1 name=$2; shift 2; step "$limit" "$name" "$PY" -m seedpool.cli train "$@" --progress log --log-every-s 10; }

{
    nvidia-smi -L; nproc; uname -r
    "$PY" -c "import torch, numpy; print('torch', torch.__version__, torch.cuda.get_device_name(0), 'numpy', numpy.__version__)"

    step 60 precision "$PY" "$REPO/benchmarks/precision.py" --device cuda --threads 4 --repeats 7 \
        --out "$OUT/precision_cuda.md"
    # The CUDA path of every learner family, briefly: on-policy (PPO), replay (Ape-X), sequence
    # replay with recurrent state on the GPU (R2D2), continuous off-policy (SAC).
    train 40 ppo-cartpole ppo --env CartPole-v1 --device cuda
    train 25 apex-cartpole apex --env CartPole-v1 --device cuda --total-timesteps 40000
    train 25 r2d2-cartpole r2d2 --env CartPole-v1 --device cuda --total-timesteps 40000
    train 25 sac-pendulum sac --env Pendulum-v1 --device cuda --total-timesteps 6000
    # Pong end to end with the GPU learning: PPO with its defaults (32 envs) until a mean of the
    # last 20 games of 18 (about 3 minutes on an H200 with 16 cores: gpu_h200.md), the earlier
    # 8-env default for 90 s, IMPALA/APPO on 32 envs.
    train 300 ppo-pong ppo --env Pong-v5 --device cuda --stop-at-return 18
    train 90 ppo-pong-8 ppo --env Pong-v5 --device cuda --num-envs 8 --ppo.num-minibatches 4
    train 90 impala-pong impala --env Pong-v5 --device cuda --num-envs 32
    # The engine on all the cores: seedpool against ale-py's own C++ vector env.
    step 90 engine "$PY" -m seedpool.bench --tasks pong --pong-sizes 16,32 \
        --cases ale_vec,ale_vec_async,seedpool_auto,seedpool_auto_async \
        --warmup 0.5 --window 1.5 --repeats 3 --out "$OUT/engine_gpu_machine.md"
} 2>&1 | tee "$OUT/log.txt"
