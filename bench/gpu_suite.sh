#!/usr/bin/env bash
# The GPU rows of BENCHMARKS.md in one command, on a machine where JAX sees an NVIDIA GPU
# (`pip install -e '.[torch,cuda]'`). Each step logs to OUT/STEP.log and prints its table.
#
#   bash bench/gpu_suite.sh OUT throughput hover velocity        # steps in the order given
#   TRAIN_S=480 MOTION=walk_g1.npz bash bench/gpu_suite.sh OUT tracking
#   OVERRIDES="robot=my_g1.yaml" bash bench/gpu_suite.sh OUT velocity   # more config for each training
#   RESUME=RUN_DIR bash bench/gpu_suite.sh OUT velocity         # go on with an earlier run
#
# Steps:
#   throughput  env-steps/s of quadrotor-hover on mjx (8192 and 32768 envs; native on the CPU's
#               cores beside it at 8192) and of g1-velocity on mjx (8192)
#   hover       `simreal train quadrotor-hover backend=mjx` (4096 envs, 20M steps at most, the
#               learning rate decayed over them) to its eval target (0.95), then eval
#   velocity    `simreal train g1-velocity backend=mjx` for TRAIN_S seconds (8192 envs,
#               unroll 24, 32 minibatches, 4 epochs), then eval
#   tracking    bench/bench_tracking.py on MOTION (a `simreal retarget` npz) on mjx for TRAIN_S s
# Runs stay under OUT/runs; a run's folder is also packed as OUT/STEP-run.tgz.
set -u
out=$(realpath -m "${1:?usage: gpu_suite.sh OUT STEP...}")
shift
bench=$(realpath "$(dirname "$0")")
motion=${MOTION:+$(realpath -m "$MOTION")}
mkdir -p "$out/runs"
cd "$out" || exit  # not the checkout's root, whose simreal/ folder would shadow the installed package
train_s=${TRAIN_S:-300}
envs=${ENVS:-8192}   # training envs (a small number tries the script out on a CPU)
resume=${RESUME:+$(realpath -m "$RESUME")}
read -r -a overrides <<< "${OVERRIDES:-}"   # more config key=value for every training (robot=my_g1.yaml)
py=${PYTHON:-python3}
simreal() { "$py" -m simreal.cli "$@"; }

pack() {  # pack RUN_DIR NAME: the run as OUT/NAME-run.tgz (its folder name kept)
  tar czf "$out/$2-run.tgz" -C "$(dirname "$1")" "$(basename "$1")"
}

last_run() {  # the newest run folder of a task under OUT/runs
  ls -dt "$out/runs/$1"/*/ 2>/dev/null | head -1 | sed 's:/$::'
}

step_throughput() {
  "$py" "$bench/bench_throughput.py" --tasks quadrotor-hover --backends native mjx --envs 8192 --playground
  "$py" "$bench/bench_throughput.py" --tasks quadrotor-hover --backends mjx --envs 32768 --steps 50 --playground
  "$py" "$bench/bench_throughput.py" --tasks g1-velocity --backends mjx --envs 8192 --playground --steps 50
}

step_hover() {
  simreal train quadrotor-hover backend=mjx "runs_root=$out/runs" train.num_envs="${ENVS:-4096}" \
    train.num_timesteps=20000000 train.eval_every_steps=1000000 train.max_wall_s="$train_s" "${overrides[@]}" \
    --json || return
  local run; run=$(last_run quadrotor-hover)
  simreal eval "$run" --episodes 512 --json
  pack "$run" hover
}

step_velocity() {
  if [ -n "$resume" ]; then
    simreal train --resume "$resume" train.max_wall_s="$train_s" --json || return
    local run=$resume
  else
    simreal train g1-velocity backend=mjx "runs_root=$out/runs" train.num_envs="$envs" \
      train.num_minibatches=32 train.num_updates_per_batch=4 train.num_timesteps=1000000000 \
      train.max_wall_s="$train_s" "${overrides[@]}" --json || return
    local run; run=$(last_run g1-velocity)
  fi
  simreal eval "$run" --episodes 256 --json
  pack "$run" velocity
}

step_tracking() {
  [ -n "${MOTION:-}" ] || { echo "tracking needs MOTION=walk_g1.npz"; return 2; }
  "$py" "$bench/bench_tracking.py" "$motion" --backend mjx --num-envs "$envs" \
    --hidden 512 256 128 --steps 1000000000 --limit-s "$train_s" --episodes 256 --workdir "$out/tracking" --override "${overrides[@]}" || return
  pack "$(ls -dt "$out"/tracking/runs/g1-tracking/*/ | head -1 | sed 's:/$::')" tracking
}

for s in "$@"; do
  echo "== $s $(date -u +%H:%M:%S)"
  t0=$(date +%s)
  "step_$s" 2>&1 | tee "$out/$s.log" | grep -v 'ETA' | tail -40
  rc=${PIPESTATUS[0]}
  echo "== $s done in $(( $(date +%s) - t0 )) s (exit $rc)"
done
