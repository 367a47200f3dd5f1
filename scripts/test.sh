#!/usr/bin/env bash
# The test suite: the whole of it on the machine's Vulkan driver (Mesa's CPU device in CI),
# then the tests whose outcome depends on the card (`::card::` in their path) again on
# emulated discrete cards (tests/layers/discrete/): as NVIDIA without BAR (an emulated
# NVIDIA node, with the fake NVML), AMD with a 256 MiB BAR window and Intel with resizable
# BAR; those that depend on the matrix units too (`::card::units::`) on a CPU device with
# matrix units, and on that device dressed as an NVIDIA card; then kiln.exe, the Windows
# build, under Wine. The packages are tested as their users get them, beside the rest
# (scripts/package-test.sh): the .deb installed into a clean Debian root, the Windows zip
# unzipped and run under Wine; both are made from the binaries the tests build (the
# debug ones: CI builds kiln once), scripts/release.sh makes the release ones. Timed tests (`::timed::`) run after the rest, one at a time, beside
# the tests of the cards; those that measure kiln's own timing (`::alone::`) run last,
# with nothing beside them.
# Arguments are cargo's and go to every `cargo test` (e.g. --no-fail-fast).
#
# The machine's two cores are kept busy: kiln builds while the packages install (the build
# needs only Rust: the committed SPIR-V stands in for glslc), and kiln.exe builds at the
# lowest priority beside the tests, in the time they leave the cores idle.
set -euo pipefail
cd "$(dirname "$0")/.."
# A failure ends what still runs beside it.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
bash scripts/setup.sh --test &
setup=$!

# One build of what the tests run, sharing one target directory and one set of
# dependencies: kiln, its unit tests and its one integration binary (tests/it), and the
# workspace's test-only crates (kiln's trace layer, the emulated-discrete layer, the fake
# NVML, the watch's test application), built as tests/it/common.rs builds them.
cargo build -p kiln-trace-layer -p kiln-discrete-layer -p kiln-fake-nvml -p kiln-test-app
cargo test "$@" --no-run
wait "$setup"

# Beside the tests, at the lowest priority, each with its own log, waited for before the
# tests that run alone: the .deb (cargo-deb compiled while mmdebstrap makes the clean
# root, where it is missing) and kiln.exe's build, then its zip.
packages_log=target/package-tests.log
(
  set -e
  start=$SECONDS
  bash scripts/package-test.sh root target/deb-root &
  root=$!
  trap 'kill $root 2>/dev/null || true' EXIT
  nice -n 19 bash scripts/setup.sh --package
  echo "cargo-deb ready after $((SECONDS - start))s"
  deb=$(nice -n 19 bash scripts/package.sh deb dev target/packages)
  echo "$deb made after $((SECONDS - start))s"
  wait "$root"
  echo "the clean root made after $((SECONDS - start))s"
  # At the tests' own priority: its timed run is a test like theirs.
  bash scripts/package-test.sh deb "$deb" target/deb-root
  echo "the .deb installed, run and purged in the clean root after $((SECONDS - start))s"
) >"$packages_log" 2>&1 &
packages=$!
windows_log=target/windows-build.log
(
  set -e
  nice -n 19 bash scripts/windows-test.sh --build-only
  start=$SECONDS
  zip=$(bash scripts/package.sh zip target/windows/x86_64-pc-windows-gnu/debug/kiln.exe target/packages)
  nice -n 19 bash scripts/package-test.sh zip "$zip" --unzip-only >target/zip-exe.path
  echo "$zip made and unzipped in $((SECONDS - start))s (its kiln.exe runs the Wine suite)"
) >"$windows_log" 2>&1 &
windows=$!

# On the CPU device each kiln takes one core (lavapipe's threads), so that a test's timed
# load does not take the other core from the test beside it.
export LP_NUM_THREADS="${LP_NUM_THREADS:-1}"
# The tests mostly wait on kiln's processes and their timed loads, not on the cores:
# more of them at once than there are cores (RUST_TEST_THREADS to choose).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}"
echo "== unit tests and the integration suite"
cargo test "$@" -- --skip ::timed:: --skip ::alone::

layer=target/vk-layer
[ -f "$layer/VkLayer_kiln_discrete.json" ] || {
    echo "test.sh: the emulated-discrete layer's manifest was not written by the first pass" >&2
    exit 1
}
icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1)
# The NVIDIA card is an emulated NVIDIA node: the fake libnvidia-ml.so.1 answers for it as
# a healthy H200 by its UUID and PCI address, so kiln's NVML code runs beside every test
# of the card.
node=target/fake-nvml-node
mkdir -p "$node"
cp target/debug/libkiln_fake_nvml.so "$node/libnvidia-ml.so.1"
echo '{"driver_version": "550.90.07", "gpus": [{"uuid": "GPU-4b494c4e-4832-3030-8000-00000000003b", "bus_id": "00000000:3B:00.0"}]}' \
    > "$node/h200.json"

# Two tests at once here, as in the first pass: the timed tests one at a time, with the
# CPU device on both cores as a card gives a load all of itself; beside them, one at a
# time too, the tests of the card on each emulated card.
timed_log=target/timed-tests.log
echo "== the timed tests, one at a time, beside the tests of the cards (their output follows those)"
env -u LP_NUM_THREADS RUST_TEST_THREADS=1 cargo test "$@" --test it ::timed:: >"$timed_log" 2>&1 &
timed=$!
for card in nvidia/none amd/small intel/rebar; do
    nvidia=()
    if [ "${card%/*}" = nvidia ]; then
        nvidia=(LD_LIBRARY_PATH="$PWD/$node" KILN_FAKE_NVML="$PWD/$node/h200.json"
            KILN_EMULATE_UUID=GPU-4b494c4e-4832-3030-8000-00000000003b
            KILN_EMULATE_PCI_ADDRESS=0000:3b:00.0 KILN_EMULATE_DRIVER_VERSION=550.90.07)
        echo "== the tests of the card on an emulated NVIDIA node (the fake NVML's H200), BAR: ${card#*/}"
    else
        echo "== the tests of the card on an emulated ${card%/*} card, BAR: ${card#*/}"
    fi
    env "${nvidia[@]}" VK_LAYER_PATH="$PWD/$layer" VK_INSTANCE_LAYERS=VK_LAYER_KILN_emulated_discrete \
        KILN_EMULATE_VENDOR=${card%/*} KILN_EMULATE_BAR=${card#*/} \
        VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd RUST_TEST_THREADS=1 \
        cargo test "$@" --test it ::card::
done
timed_ok=true
wait "$timed" || timed_ok=false
cat "$timed_log"
$timed_ok || exit 1

# From here the tests use the cores as cargo chooses, with nothing beside them: the
# matrix-units benchmark holds a rate against its kernel's own, measured in one run.
unset RUST_TEST_THREADS
# The matrix workload's cooperative-matrix path, on a CPU device that has matrix units
# (scripts/matrix-units-driver.sh, installed by setup.sh --test): fp16 and int8 must run
# on the units there, and every planted fault must still be found at its coordinates;
# then on that device disguised as an NVIDIA card without BAR.
units="${KILN_MATRIX_UNITS_DIR:-/opt/kiln-matrix-units}/run"
echo "== the tests of the matrix units on a CPU device with matrix units (VK_KHR_cooperative_matrix)"
KILN_EXPECT_MATRIX_UNITS=1 CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$units" \
    cargo test "$@" --test it ::units::
echo "== the tests of the matrix units on an emulated nvidia card with matrix units, BAR: none"
VK_LAYER_PATH="$PWD/$layer" VK_INSTANCE_LAYERS=VK_LAYER_KILN_emulated_discrete \
    KILN_EMULATE_VENDOR=nvidia KILN_EMULATE_BAR=none KILN_EXPECT_MATRIX_UNITS=1 \
    CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$units" cargo test "$@" --test it ::units::

# The Windows build, cross-compiled beside the tests above (waited for before the tests
# that run alone), run under Wine on lavapipe (tests/it/wine.rs); the packages' tests.
wait "$windows" || {
    cat "$windows_log" >&2
    exit 1
}
wait "$packages" || {
    cat "$packages_log" >&2
    exit 1
}
echo "== the packages (the .deb in a clean root, the Windows zip under Wine)"
grep -h ' after \| in [0-9]*s$' "$packages_log" "$windows_log"
echo "== the tests that measure kiln's own timing, with nothing beside them"
env -u LP_NUM_THREADS RUST_TEST_THREADS=1 cargo test "$@" --test it ::alone::
# kiln.exe as the zip holds it: the suite is the zip's test under Wine too.
KILN_WINDOWS_EXE="$(cat target/zip-exe.path)" bash scripts/windows-test.sh "$@"
