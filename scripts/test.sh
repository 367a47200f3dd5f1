#!/usr/bin/env bash
# The test suite: the whole of it on the machine's Vulkan driver (Mesa's CPU device in CI),
# then the suites that touch device memory again on emulated discrete cards (the layer in
# tests/layers/discrete/, built by the first pass): no BAR, a 256 MiB BAR window and
# resizable BAR, as NVIDIA, AMD and Intel; and the matrix suites on a CPU device with
# matrix units. Arguments go to every `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
cargo test "$@"
layer=target/layers/debug
[ -f "$layer/VkLayer_kiln_discrete.json" ] || {
    echo "test.sh: the emulated-discrete layer was not built by the first pass" >&2
    exit 1
}
icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1)
for card in nvidia/none amd/small intel/rebar; do
    echo "== the memory suites on an emulated ${card%/*} card, BAR: ${card#*/}"
    VK_LAYER_PATH="$PWD/$layer" VK_INSTANCE_LAYERS=VK_LAYER_KILN_emulated_discrete \
        KILN_EMULATE_VENDOR=${card%/*} KILN_EMULATE_BAR=${card#*/} \
        VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd \
        cargo test "$@" --test vram_detectors --test error_counters --test compute \
        --test pcie --test fragment --test gpu_errors --test tools --test matrix
done
# The matrix workload's cooperative-matrix path, on a CPU device that has matrix units
# (scripts/matrix-units-driver.sh, installed by setup.sh --test): fp16 and int8 must run
# on the units there, and every planted fault must still be found at its coordinates;
# then the matrix suite on that device disguised as an NVIDIA card without BAR.
units="${KILN_MATRIX_UNITS_DIR:-/opt/kiln-matrix-units}/run"
echo "== the matrix suites on a CPU device with matrix units (VK_KHR_cooperative_matrix)"
KILN_EXPECT_MATRIX_UNITS=1 CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$units" \
    cargo test "$@" --test matrix --test tools
echo "== the matrix suite on an emulated nvidia card with matrix units, BAR: none"
VK_LAYER_PATH="$PWD/$layer" VK_INSTANCE_LAYERS=VK_LAYER_KILN_emulated_discrete \
    KILN_EMULATE_VENDOR=nvidia KILN_EMULATE_BAR=none KILN_EXPECT_MATRIX_UNITS=1 \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$units" cargo test "$@" --test matrix
