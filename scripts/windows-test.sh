#!/usr/bin/env bash
# The Windows build: kiln.exe cross-built for x86_64-pc-windows-gnu and run under Wine on
# lavapipe (the `wine::` tests of tests/it). Where the Rust target, MinGW, Wine or Xvfb is
# missing it fails with one sentence: CI never drops the Windows suite without a word.
# KILN_SKIP_WINDOWS=1 skips it on purpose, and says so. Arguments go to `cargo test`;
# `--build-only` builds kiln.exe, makes Wine's prefix and stops (scripts/test.sh runs it
# beside the other tests, at the lowest priority). The build has its own target directory
# (target/windows), so that it never waits for, nor holds, the lock of the Linux build the
# other tests run.
#
# Debian bookworm's Wine 8.0 lacks bcryptprimitives.dll (ProcessPrng, which Rust's standard
# library imports; Windows 10 and later have it): a stand-in built from
# tests/wine/bcryptprimitives.c sits beside kiln.exe. Wine's Vulkan needs an X display:
# a private Xvfb.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-pc-windows-gnu
build_only=false
if [ "${1:-}" = --build-only ]; then build_only=true; shift; fi
if [ "${KILN_SKIP_WINDOWS:-}" = 1 ]; then
  echo "windows-test.sh: KILN_SKIP_WINDOWS=1: the Windows build is not tested in this run" >&2
  exit 0
fi
if ! rustup target list --installed 2>/dev/null | grep -x "$target" >/dev/null; then
  if ! rustup target add "$target" >/dev/null 2>&1; then
    echo "windows-test.sh: the Rust target $target could not be installed (rustup target add $target failed), so the Windows build cannot be tested; set KILN_SKIP_WINDOWS=1 to skip it on purpose" >&2
    exit 1
  fi
fi
for tool in x86_64-w64-mingw32-gcc wine Xvfb; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "windows-test.sh: $tool is missing, so the Windows build cannot be tested (bash scripts/setup.sh --test installs it; KILN_SKIP_WINDOWS=1 skips it on purpose)" >&2
    exit 1
  }
done
out="target/windows/$target/debug"
$build_only || echo "== kiln.exe (cross-built for $target) under Wine on lavapipe"
# No debug info in kiln.exe (a panic still names its file and line): the build runs beside
# the tests on CI's two cores, and debug info is a fifth of its time.
CARGO_TARGET_DIR=target/windows CARGO_PROFILE_DEV_DEBUG=false cargo build --target "$target" -p kiln
x86_64-w64-mingw32-gcc -shared -O2 -o "$out/bcryptprimitives.dll" tests/wine/bcryptprimitives.c -ladvapi32
export WINEPREFIX="$PWD/target/wine-prefix" WINEDEBUG=-all
# A display of our own for Wine's Vulkan.
display=""
for n in $(seq 90 119); do
  if [ ! -e "/tmp/.X$n-lock" ] && [ ! -e "/tmp/.X11-unix/X$n" ]; then display=":$n"; break; fi
done
[ -n "$display" ] || { echo "windows-test.sh: no free X display number" >&2; exit 1; }
Xvfb "$display" -screen 0 640x480x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true; wineserver -k 2>/dev/null || true' EXIT
export DISPLAY="$display"
# Wine's first start makes its prefix (a dozen seconds): done by --build-only too.
[ -d "$WINEPREFIX" ] || wineboot -i >/dev/null 2>&1 || true
$build_only && exit 0
icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1)
# The kiln.exe to run: KILN_WINDOWS_EXE's (CI's, unzipped from the zip a user gets), else
# the one built here. Wine 8's missing bcryptprimitives.dll is stood in for in the
# prefix's system32, as Windows' own, for a kiln.exe with nothing beside it.
exe="${KILN_WINDOWS_EXE:-$PWD/$out/kiln.exe}"
cp "$out/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
KILN_WINE_EXE="$exe" VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd" \
  cargo test "$@" --test it wine:: -- --ignored
