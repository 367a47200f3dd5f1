#!/usr/bin/env bash
# The test suite: the whole of it on the machine's Vulkan driver (Mesa's CPU device in CI),
# then the suites that touch device memory again on emulated discrete cards (the layer in
# tests/layers/discrete/, built by the first pass): no BAR, a 256 MiB BAR window and
# resizable BAR, as NVIDIA (an emulated NVIDIA node, with the fake NVML), AMD and Intel; and the matrix suites on a CPU device with
# matrix units; then kiln.exe, the Windows build, under Wine. Arguments go to every
# `cargo test`.
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
# The NVIDIA card is an emulated NVIDIA node: the fake libnvidia-ml.so.1 (tests/fakes/nvml,
# built by the first pass) answers for it as a healthy H200 by its UUID and PCI address,
# so kiln's NVML code runs beside every memory suite.
nvml=target/fakes/debug/libkiln_fake_nvml.so
[ -f "$nvml" ] || {
    echo "test.sh: the fake NVML was not built by the first pass" >&2
    exit 1
}
mkdir -p target/fakes/node
cp "$nvml" target/fakes/node/libnvidia-ml.so.1
echo '{"driver_version": "550.90.07", "gpus": [{"uuid": "GPU-4b494c4e-4832-3030-8000-00000000003b", "bus_id": "00000000:3B:00.0"}]}' \
    > target/fakes/node/h200.json
for card in nvidia/none amd/small intel/rebar; do
    node=()
    if [ "${card%/*}" = nvidia ]; then
        node=(LD_LIBRARY_PATH="$PWD/target/fakes/node" KILN_FAKE_NVML="$PWD/target/fakes/node/h200.json"
            KILN_EMULATE_UUID=GPU-4b494c4e-4832-3030-8000-00000000003b
            KILN_EMULATE_PCI_ADDRESS=0000:3b:00.0 KILN_EMULATE_DRIVER_VERSION=550.90.07)
        echo "== the memory suites on an emulated NVIDIA node (the fake NVML's H200), BAR: ${card#*/}"
    else
        echo "== the memory suites on an emulated ${card%/*} card, BAR: ${card#*/}"
    fi
    env "${node[@]}" VK_LAYER_PATH="$PWD/$layer" VK_INSTANCE_LAYERS=VK_LAYER_KILN_emulated_discrete \
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
# The Windows build, cross-compiled and run under Wine on lavapipe (tests/wine.rs).
bash scripts/windows-test.sh "$@"
