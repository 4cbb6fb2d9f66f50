#!/usr/bin/env bash
# The device check: what gpuscale reads from a real NVIDIA GPU. Run on a machine
# with a GPU, PyTorch and nvidia-ml-py (no TensorFlow needed), from the repo root,
# with OUT set to a folder for the results:
#   OUT=/tmp/gpu-check bash benchmarks/gpu/check.sh [STEP...]
# Steps (default: all, in this order):
#   devices  devices.txt: `gpuscale devices`, text and --json; nvidia-smi and its topology
#   calls    nvml_calls.txt: each NVML call's time; the sampler's period, wall and CPU
#   run      load.ndjson: a recording of `gpuscale run -- python benchmarks/gpu/load.py`
#            (real samples); telemetry.txt: benchmarks/gpu/telemetry.py's checks on it
#   sampler  sampler.txt: benchmarks/sampler.py against real NVML, at 10 Hz and 2 Hz
#   watch    the dashboard in a pty at 120x36 (recorded to watch.ndjson) and at 80x24,
#            with SVG screenshots in data/screenshots and what was drawn in pty*.log
#   interference  interference.txt: benchmarks/gpu/interference.py, what sampling costs
#            a PyTorch training loop's steps on the GPU sampled (off / 0.5 s / 0.1 s)
set -u
export PYTHONUNBUFFERED=1
out=${OUT:?set OUT to a folder for the results}
py=${PYTHON:-python3}
steps=${*:-devices calls run sampler watch interference}
for step in $steps; do
  echo "=== $step"
  case $step in
    devices)
      { $py -m gpuscale devices; echo "--- --json"; $py -m gpuscale devices --json; echo "--- nvidia-smi";
        nvidia-smi; nvidia-smi topo -m; } > "$out/devices.txt" 2>&1
      echo "devices: exit $?"; head -30 "$out/devices.txt" ;;
    calls)
      $py benchmarks/gpu/nvml_calls.py 2>&1 | tee "$out/nvml_calls.txt" ;;
    run)
      timeout 120 $py -m gpuscale run --record "$out/load.ndjson" -- \
        $py benchmarks/gpu/load.py --seconds "${LOAD_SECONDS:-6}" > "$out/run.txt" 2>&1
      echo "run: exit $?"; tail -25 "$out/run.txt"
      $py benchmarks/gpu/telemetry.py "$out/load.ndjson" 2>&1 | tee "$out/telemetry.txt" ;;
    sampler)
      for interval in 0.1 0.5; do
        $py benchmarks/sampler.py --seconds 8 --rounds 4 --interval $interval 2>&1
      done | tee "$out/sampler.txt" ;;
    watch)
      GPUSCALE_DATA_DIR="$out/data" timeout 90 $py benchmarks/gpu/watch_pty.py \
        --log "$out/pty120.log" --shot 15 --shot 28 --quit 32 -- \
        --record "$out/watch.ndjson" -- $py benchmarks/gpu/load.py --seconds 4
      GPUSCALE_DATA_DIR="$out/data" timeout 90 $py benchmarks/gpu/watch_pty.py \
        --cols 80 --rows 24 --log "$out/pty80.log" --shot 28 --quit 31 -- \
        --no-record -- $py benchmarks/gpu/load.py --seconds 4
      ls -la "$out/data/screenshots" 2>&1 ;;
    interference)
      timeout 150 $py benchmarks/gpu/interference.py 2>&1 | tee "$out/interference.txt" ;;
    *) echo "unknown step: $step" >&2; exit 2 ;;
  esac
done
