#!/usr/bin/env bash
# The GPU measurements in one run, on a machine lent a GPU.
#
#   bash benchmarks/gpu_check.sh                    # on the GPU machine, from the repository root
#   GPU_CHECK_STEPS="tests speed" bash benchmarks/gpu_check.sh      # some steps only (a rerun)
#   GPU_CHECK_DEVICE=cpu GPU_CHECK_SHAPE=8,10,6 GPU_CHECK_FULL=8,10,6 GPU_CHECK_SIDES=8 \
#       bash benchmarks/gpu_check.sh                # a dry run on a CPU machine
#
# Steps, each under its own time limit so that one failure still leaves the others:
#   machine  machine.txt: the card (nvidia-smi), torch, CUDA, whether faiss imports;
#   tests    tests.txt: tests/engine/test_cuda.py and test_device.py (GPU fits against the CPU);
#   phases   phases.txt: benchmarks/fit_phases.py at 141,900 cells (43 x 110 x 30): the seconds
#            of each phase of fit and predict, then ms per training step for batch sizes up to
#            the whole field;
#   steps    steps.txt: the step timings alone (no fit before them);
#   speed    speed.txt: benchmarks/speed.py, SPA, 141,900 cells: package defaults, then larger
#            batches with fewer steps (s/epoch, fit, end to end, memory, accuracy, coverage);
#   full     full.txt: the same at SPE10's full size (60 x 220 x 85 = 1,122,000 cells), SPA;
#   sizes    sizes.txt: impute with the package defaults on the GPU on 2-D fields of 2,025 to
#            65,536 sites, 3 variables (the crossover with the CPU; the VM's times are in
#            docs/performance.md).
# Files go to $OUT (the folder the device tool brings back) or ./gpu_check_out. The package is
# taken from this checkout; the machine's python3 must have torch, gpytorch, xarray, scipy,
# matplotlib, tqdm and pytest (the lent GPU machines do). Without faiss the neighbour sets come
# from SciPy's cKDTree or the lattice stencils on the host, and machine.txt says so (faiss-gpu's
# wheel needs CUDA 12's cuBLAS, far over the device tool's 64 MiB). The default steps (machine
# tests steps speed sizes) have limits that add up to 7.6 minutes (run with timeout_s=600);
# "phases" (1.5 minutes) and "full" (9 minutes: the 1,122,000 cells did not finish in 170 s on
# an H200 on 2026-12-04) are run on request, "full" alone in its own call. In the run of
# 2026-12-04, the first fit of a fresh machine took twice as long as the same fit a minute later:
# read the first step's times with that in mind.
set -u
out=${OUT:-gpu_check_out}
mkdir -p "$out"
device=${GPU_CHECK_DEVICE:-cuda}
shape=${GPU_CHECK_SHAPE:-43,110,30}
full=${GPU_CHECK_FULL:-60,220,85}
steps=${GPU_CHECK_STEPS:-"machine tests steps speed sizes"}
py=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

has() { [[ " $steps " == *" $1 "* ]]; }
report() {  # report NAME STATUS: the log's end and the exit status
    tail -${3:-30} "$out/$1.txt"
    echo "$1: exit $2" | tee -a "$out/$1.txt"
}

if has machine; then
    {
        date -u
        nvidia-smi 2>&1 | head -20
        "$py" - <<'PY'
import importlib.util, platform, torch, geogpvae
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), {gpu}")
print(f"geogpvae {geogpvae.__version__}; faiss importable: {importlib.util.find_spec('faiss') is not None}")
PY
    } > "$out/machine.txt" 2>&1
    cat "$out/machine.txt"
fi

if has tests; then
    timeout 60 "$py" -m pytest -q -p no:cacheprovider -n 0 tests/engine/test_cuda.py tests/engine/test_device.py \
        > "$out/tests.txt" 2>&1
    report tests $? 4
fi

if has phases; then
    n=$(( $(echo "$shape" | tr ',' '*') ))
    timeout 90 "$py" benchmarks/fit_phases.py --device "$device" --shape "$shape" \
        --batches "4096,16384,65536,$n" --step-epochs 3 --json "$out/phases.json" > "$out/phases.txt" 2>&1
    report phases $?
fi

run_speed() {  # run_speed OPTIONS [ARGS]: one speed.py line into speed.txt
    echo "== options $*" >> "$out/speed.txt"
    timeout 60 "$py" benchmarks/speed.py --device "$device" --shape "$shape" --engine spa --options "$@" \
        >> "$out/speed.txt" 2>&1
    echo "exit $?" >> "$out/speed.txt"
}

if has steps; then  # the step timings alone, without the phases' fit
    n=$(( $(echo "$shape" | tr ',' '*') ))
    timeout 60 "$py" benchmarks/fit_phases.py --device "$device" --shape "$shape" --steps-only \
        --batches "1024,4096,16384,65536,$n" --step-epochs 3 > "$out/steps.txt" 2>&1
    report steps $?
fi

if has speed; then
    run_speed '{}'
    run_speed '{"batch_size": 32768}' --epochs 60
    run_speed '{"batch_size": 32768, "lr": 0.01}' --epochs 60
    report speed 0 20
fi

if has full; then
    timeout 540 "$py" benchmarks/speed.py --device "$device" --shape "$full" --engine spa > "$out/full.txt" 2>&1
    report full $? 6
fi

if has sizes; then
    GPU_CHECK_DEVICE="$device" timeout ${GPU_CHECK_SIZES_LIMIT:-150} "$py" - > "$out/sizes.txt" 2>&1 <<'PY'
import os, time, torch, geogpvae
from geogpvae.datasets import make_gaussian_field

device = os.environ["GPU_CHECK_DEVICE"]
geogpvae.GPVAEImputer(device=device, seed=0, progress=False, epochs=1).fit(make_gaussian_field((8, 8), n_vars=3, seed=0))
for side in map(int, os.environ.get("GPU_CHECK_SIDES", "45,128,256").split(",")):  # 2,025 to 65,536 sites
    ds = make_gaussian_field((side, side), n_vars=3, missing=0.3, seed=0)
    t = time.perf_counter()
    imp = geogpvae.GPVAEImputer(device=device, seed=0, progress=False).fit(ds)
    imp.impute(ds)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    print(f"{side * side:>6} sites on {imp.engine_.device}: {time.perf_counter() - t:.1f} s, "
          f"{len(imp.engine_.history['epoch'])} epochs, {imp.engine_.train_state.steps} steps", flush=True)
PY
    report sizes $?
fi
