#!/bin/sh
# Runs PROGRAM ARGS on the matrix-units device that scripts/matrix-units-driver.sh
# installs (it copies this file to DIR/run): a copy of PROGRAM, made anew when the
# program changes, whose ELF interpreter and library path are the newer C library's that
# the driver was built against. The program, and any copy of itself it starts (kiln's
# device workers), load that C library; the other programs it starts keep the system's.
set -eu
dir=$(dirname "$(realpath "$0")")
libs="$dir/root/usr/lib/x86_64-linux-gnu"
prog=$(realpath "$1")
shift
copy="$dir/bin/$(printf %s "$prog" | md5sum | cut -c1-12)-$(basename "$prog")"
if [ ! -e "$copy" ] || [ "$prog" -nt "$copy" ]; then
    mkdir -p "$dir/bin"
    # Beside, then renamed: tests start several at once.
    cp "$prog" "$copy.$$"
    patchelf --set-interpreter "$dir/root/usr/lib64/ld-linux-x86-64.so.2" \
        --force-rpath --set-rpath "$libs" "$copy.$$"
    mv "$copy.$$" "$copy"
fi
export VK_DRIVER_FILES="$dir/lvp.json" VK_ICD_FILENAMES="$dir/lvp.json"
export KILN_TEST_RUNNER="$dir/run"
exec "$copy" "$@"
