#!/usr/bin/env bash
# Installs, beside the system's own, a CPU Vulkan device that has matrix units: Mesa's
# lavapipe from Debian's testing suite offers VK_KHR_cooperative_matrix (Mesa 25.1 and
# later; bookworm's 22.3 does not). The tests run the matrix workload's cooperative-matrix
# path on it, so that the path a datacenter GPU takes is exercised on every machine.
#
# Nothing goes into the system: the driver, and the C library and LLVM it was built
# against, are unpacked under DIR (KILN_MATRIX_UNITS_DIR, default /opt/kiln-matrix-units).
# DIR/run PROGRAM ARGS (scripts/matrix-units-run.sh) runs PROGRAM on them, with that
# driver as its only Vulkan device, and sets KILN_TEST_RUNNER to itself, so that the
# tests start kiln the same way.
#
# Needs a Debian system (its archive is found in apt's sources) and patchelf; elsewhere it
# says so and fails. Installs nothing that is already there.
set -euo pipefail
dir="${KILN_MATRIX_UNITS_DIR:-/opt/kiln-matrix-units}"
suite=forky
here=$(dirname "$(realpath "$0")")
# DIR/run is refreshed from the source tree on every call; the driver is installed once.
if [ -f "$dir/lvp.json" ]; then
    cmp -s "$here/matrix-units-run.sh" "$dir/run" || install -m 755 "$here/matrix-units-run.sh" "$dir/run"
    exit 0
fi
command -v patchelf >/dev/null || {
    echo "matrix-units-driver.sh: patchelf is needed (apt-get install patchelf)" >&2
    exit 1
}

# The Debian archive this system installs from (not the security one).
archive=$(
    {
        grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
        grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'
    } | grep -v security | grep '/debian/\?$' | head -n 1
) || true
if [ -z "$archive" ]; then
    echo "matrix-units-driver.sh: no Debian archive in apt's sources: the matrix-units device needs Debian's $suite packages" >&2
    exit 1
fi

echo "installing: Mesa's lavapipe from Debian $suite (a CPU device with matrix units) into $dir" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/debs"
echo "deb $archive $suite main" >"$work/sources.list"
apt=(-o "Dir::Etc::sourcelist=$work/sources.list" -o Dir::Etc::sourceparts=-
    -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
    -o Debug::NoLocking=1 -o APT::Sandbox::User=root)
apt-get "${apt[@]}" update -qq
# The driver and everything it needs, recursively (lines with <...> are virtual names).
mapfile -t packages < <(
    apt-cache "${apt[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
        --no-breaks --no-replaces --no-enhances mesa-vulkan-drivers libvulkan1 |
        grep '^[a-z]' | sort -u
)
(cd "$work/debs" && apt-get "${apt[@]}" download -qq "${packages[@]}" >/dev/null)
rm -rf "$dir.new"
mkdir -p "$dir.new/root"
for deb in "$work"/debs/*.deb; do
    dpkg-deb -x "$deb" "$dir.new/root"
done
libs="$dir/root/usr/lib/x86_64-linux-gnu"
# A library's own search path (LLVM's $ORIGIN/../lib) would hide the program's from its
# dependencies, which would then come from the system's older set: point it here.
for lib in "$dir.new"/root/usr/lib/x86_64-linux-gnu/*.so*; do
    if [ -f "$lib" ] && [ ! -L "$lib" ] && readelf -d "$lib" 2>/dev/null | grep -q RUNPATH; then
        patchelf --set-rpath "$libs" "$lib"
    fi
done
icd=$(ls "$dir.new"/root/usr/share/vulkan/icd.d/lvp_icd*.json | head -n 1)
sed "s#\"library_path\": *\"[^\"]*\"#\"library_path\": \"$libs/libvulkan_lvp.so\"#" "$icd" \
    >"$dir.new/lvp.json"
install -m 755 "$here/matrix-units-run.sh" "$dir.new/run"
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "installed: $(ls "$work"/debs | grep -o 'mesa-vulkan-drivers_[^_]*') under $dir" >&2
