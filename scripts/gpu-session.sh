#!/bin/bash
# The checks of a session lent a GPU machine, most valuable first, each output saved
# under OUT so that a session cut short still brings back what ran. Run there through
# the device scripts:  bash .gpu/on-gpu.sh bash scripts/gpu-session.sh '$OUT'
# Nothing here changes clocks, power limits, modes or MIG, or resets the card.
set -u
out=${1:?usage: gpu-session.sh OUT}
mkdir -p "$out"
step() {  # step SECONDS NAME CMD...: runs CMD for at most SECONDS, saving its output and exit code
    local limit=$1 name=$2
    shift 2
    local started=$SECONDS
    timeout --kill-after=10 "$limit" "$@" >"$out/$name.out" 2>"$out/$name.err"
    local rc=$?
    local note=""
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && note=" (stopped at the ${limit} s limit)"
    echo "$name: exit $rc in $((SECONDS - started)) s$note" | tee -a "$out/steps.txt"
}
# First what the loader sees, so that a run that finds no GPU can be explained: the ICD
# manifests present, whether their libraries load, and the loader's own driver log.
step 20 icds bash -c 'for f in /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json ${VK_DRIVER_FILES//:/ } ${VK_ICD_FILENAMES//:/ }; do [ -f "$f" ] && echo "== $f" && cat "$f"; done; ldconfig -p | grep -E "libvulkan|libGLX_nvidia|libnvidia-ml"'
step 30 loader env VK_LOADER_DEBUG=error,warn,driver kiln list
step 30 list kiln list --json
step 30 health kiln health --json --state "$out/health-state.json"
step 150 quick kiln run --profile quick --json --out "$out/run"
step 30 health-after kiln health --json --state "$out/health-state.json" --runs "$out" --max-age 1h
# The logs the machine already has, read by the one reader (kiln explain), and why a
# framework can or cannot see the card (kiln list's diagnoses, against the PyTorch there).
step 20 explain bash -c '(dmesg -T 2>/dev/null || journalctl -k -b --no-pager 2>/dev/null) | kiln explain --json -'
step 20 frameworks bash -c 'kiln list --json --python "$(command -v python3)"'
# kiln watch of three short PyTorch programs on the card (tests/apps/torch/job.py): steady,
# leaking every step, and one asking for more than the card has; each report's diagnosis,
# its memory source and its sizes are the figures.
for mode in steady leak too-big; do
    step 40 "watch-torch-$mode" kiln watch --json --iteration '^step' --out "$out/watch-$mode" -- python3 tests/apps/torch/job.py "$mode" 30 256
done
# One planted stuck word on the real card: the RMA page and bundle of one bad word (its
# page count, its evidence in words), and the next step a hardware FAIL is given.
step 60 bad kiln run --profile quick --duration 25s --test-stuck-word 1000 --out "$out/bad"
step 30 rma kiln report --rma "$out/bad"
step 60 bench-vram kiln bench vram --bytes 8GiB --json
step 40 bench-compute kiln bench compute --duration 10s --json
# The matrix path: fp16 and int8 on the tensor cores (VK_KHR_cooperative_matrix, in the
# shape the driver lists) and fp32 on the ALUs, the verified rate next to the same kernel
# unverified and the units against the shared-memory kernel; then a short run held at 90%
# of the power limit through the real NVML feed (reached after, share in band, why not).
step 40 bench-matrix kiln bench matrix --duration 12s --json
step 60 matrix-power kiln run --workloads matrix --duration 40s --power-target 90 --json --out "$out/matrix"
step 40 bench-pcie kiln bench pcie --json
step 130 fleet kiln run --profile fleet --duration 90s --json --out "$out/fleet"
step 20 compare kiln compare "$out/run" "$out/fleet" --json
