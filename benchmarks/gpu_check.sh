#!/usr/bin/env bash
# The GPU measurements in one run, on a machine lent a GPU.
#
#   bash benchmarks/gpu_check.sh                    # on the GPU machine, from the repository root
#   GPU_CHECK_DEVICE=cpu GPU_CHECK_SHAPES=8,10,6 bash benchmarks/gpu_check.sh   # a dry run here
#
# It runs, each under its own time limit, so that one failure still leaves the others:
#   1. machine.txt: the card (nvidia-smi), torch, CUDA, and whether faiss is importable;
#   2. tests.txt: tests/engine/test_cuda.py (fits and predictions on the GPU against the CPU)
#      and tests/engine/test_device.py;
#   3. speed_<shape>.txt: benchmarks/speed.py on the GPU, both engines, package defaults, for
#      SPE10's downsampled size (43 x 110 x 30 = 141,900 cells) and, SPA alone, its full size
#      (60 x 220 x 85 = 1,122,000 cells): neighbour build, s/epoch, fit, end to end, peak RSS,
#      peak GPU memory, roofline ratio, accuracy and coverage;
#   4. profile.txt: benchmarks/profile_step.py on the GPU at 141,900 cells, batch 4,096: the time
#      of a step's phases, host clock against GPU kernel time, the profiler's kernel table, and
#      the rate of steps back to back with the batch plans copied in one pinned buffer (the
#      current code) and, for an A/B, with one pageable copy per tensor (before);
#   5. small.txt: a Jura-sized survey (19 x 19 = 361 sites, 3 variables, 30 % missing) imputed
#      with the package defaults on the GPU and on the CPU, and the device "auto" chooses for it
#      (the CPU since 2f4caf7, after the first run found the GPU slower for such fields).
# Files go to $OUT (the folder the device tool brings back) or ./gpu_check_out. The package is
# taken from this checkout; the machine's python3 must have torch, gpytorch, xarray, scipy,
# matplotlib, tqdm and pytest (the lent GPU machines do). netCDF4 is not needed. Without faiss
# the neighbour sets come from scipy's cKDTree on the host, and machine.txt says so (faiss-gpu's
# wheel needs CUDA 12's cuBLAS, far over the device tool's 64 MiB). The first run, on an H200
# (2026-11-28), took 8.4 minutes: its full-size step spent its whole limit making the synthetic
# field, since fixed. The limits below add up to 9.8 minutes, inside the device tool's
# 10-minute command limit (run it with timeout_s=600).
set -u
out=${OUT:-gpu_check_out}
mkdir -p "$out"
device=${GPU_CHECK_DEVICE:-cuda}
shapes=${GPU_CHECK_SHAPES:-"43,110,30 60,220,85"}
py=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

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

timeout 70 "$py" -m pytest -q -p no:cacheprovider tests/engine/test_cuda.py tests/engine/test_device.py \
    > "$out/tests.txt" 2>&1
status=$?
tail -4 "$out/tests.txt"
echo "tests: exit $status" | tee -a "$out/tests.txt"

for shape in $shapes; do
    log="$out/speed_${shape//,/x}.txt"
    limit=120 engine=both
    # full size: SPA alone, so that its line (s/epoch at 1.1M cells) fits the command's limit
    [ "$shape" = "60,220,85" ] && limit=270 engine=spa
    timeout $limit "$py" benchmarks/speed.py --device "$device" --shape "$shape" --engine $engine > "$log" 2>&1
    status=$?
    cat "$log"
    echo "speed $shape: exit $status" | tee -a "$log"
done

timeout 35 "$py" benchmarks/profile_step.py --device "$device" --batches 20 --rows 25 \
    --options '{"batch_size": 4096}' > "$out/profile.txt" 2>&1
status=$?
grep -v "^USDT" "$out/profile.txt" | head -12
echo "profile: exit $status" | tee -a "$out/profile.txt"

GPU_CHECK_DEVICE="$device" timeout 60 "$py" - > "$out/small.txt" 2>&1 <<'PY'
import os, time, torch, geogpvae
from geogpvae.datasets import make_gaussian_field

ds = make_gaussian_field((19, 19), n_vars=3, missing=0.3, seed=0)
for device in (os.environ["GPU_CHECK_DEVICE"], "cpu"):
    for attempt in (1, 2):  # the first call on a device pays its start-up (CUDA context, kernels)
        t = time.perf_counter()
        imp = geogpvae.GPVAEImputer(device=device, seed=0, progress=False).fit(ds)
        out = imp.impute(ds)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        used = next(imp.engine_.model.parameters()).device
        print(f"device={device!r} ran on {used}, {torch.get_num_threads()} CPU threads, "
              f"call {attempt}: {time.perf_counter() - t:.1f} s")
auto = geogpvae.GPVAEImputer(seed=0, progress=False, epochs=1).fit(ds)
print(f"device='auto' chose {auto.engine_.device} for this field")
PY
status=$?
cat "$out/small.txt"
echo "small survey: exit $status" | tee -a "$out/small.txt"
