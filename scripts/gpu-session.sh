#!/bin/bash
# The checks of a session lent a GPU machine, most valuable first, each output saved
# under OUT so that a session cut short still brings back what ran. Run there through
# the device scripts:  bash .gpu/on-gpu.sh bash scripts/gpu-session.sh '$OUT'
# Nothing here changes clocks, power limits, modes or MIG, or resets the card.
set -u
out=${1:?usage: gpu-session.sh OUT}
mkdir -p "$out"
step() {  # step NAME CMD...: runs CMD, saving its output and exit code as NAME.*
    local name=$1
    shift
    local started=$SECONDS
    "$@" >"$out/$name.out" 2>"$out/$name.err"
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - started)) s" | tee -a "$out/steps.txt"
}
step list kiln list --json
step health kiln health --json --state "$out/health-state.json"
step quick kiln run --profile quick --json --out "$out/run"
step health-after kiln health --json --state "$out/health-state.json" --runs "$out" --max-age 1h
step bench-vram kiln bench vram --bytes 8GiB --json
step bench-compute kiln bench compute --duration 10s --json
step bench-pcie kiln bench pcie --json
step fleet kiln run --profile fleet --duration 90s --json --out "$out/fleet"
step compare kiln compare "$out/run" "$out/fleet" --json
