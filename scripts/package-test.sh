#!/usr/bin/env bash
# kiln's packages tested as their users get them (scripts/test.sh runs these beside the
# other tests; anything wrong fails with a sentence and exit 1):
#
#   scripts/package-test.sh root DIR      a clean Debian root in DIR (mmdebstrap, from the
#                                         distribution's mirror): its essential packages,
#                                         apt, the Vulkan loader and Mesa's drivers (the
#                                         .deb's Depends and Recommends), man and the shells
#   scripts/package-test.sh deb DEB DIR   DEB's control fields and contents; then in DIR,
#                                         chrooted: dpkg -i, kiln --version, kiln list, a
#                                         10 s run on the CPU device with the profile read
#                                         from /usr/share/kiln/profiles, man kiln, each
#                                         shell's completion; dpkg --purge, and no file of
#                                         the package left
#   scripts/package-test.sh zip ZIP       ZIP unzipped into a clean folder: what it holds,
#                                         no DLL it needs that Windows lacks, and kiln.exe
#                                         list and a short run under Wine on lavapipe, in
#                                         a Wine prefix of its own
#   scripts/package-test.sh zip ZIP --unzip-only
#                                         the same without Wine: prints the unzipped
#                                         kiln.exe's path (CI's Wine suite runs that one)
#
# The root is made in target/ and removed by `deb` when it passes, as `zip` removes its
# folder (target/zip-test); nothing is cached between runs. Needs root (chroot, mounts) for `root` and `deb`.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
fail() {
  echo "package-test.sh: $*" >&2
  exit 1
}

# A command in the root, with its own /proc, /sys and /dev (a private mount namespace:
# the mounts go when it ends), a clean environment and the CPU device.
in_root() {
  local root="$1"
  shift
  unshare --mount --propagation private -- bash -c '
    root="$1"; shift
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=dumb LANG=C.UTF-8 \
      LP_NUM_THREADS="${LP_NUM_THREADS:-}" chroot "$root" "$@"
  ' in_root "$root" "$@"
}

# Every path in the root but those that change without the package's doing (dpkg's
# records, logs, caches, temporary files, root's home).
tree_of() {
  (cd "$1" && find . -xdev \( -path ./var/lib/dpkg -o -path ./var/log -o -path ./var/cache \
    -o -path ./tmp -o -path ./root -o -path ./proc -o -path ./sys -o -path ./dev \
    -o -path ./run -o -path ./var/lib/apt \) -prune -o -print | sort)
}

what="${1:-}"
case "$what" in
root)
  root="${2:?scripts/package-test.sh root DIR}"
  command -v mmdebstrap >/dev/null 2>&1 ||
    fail "mmdebstrap is missing (bash scripts/setup.sh --test installs it)"
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$suite" ] || fail "/etc/os-release names no Debian or Ubuntu codename to make a root of"
  rm -rf "$root"
  # The host's apt sources (its mirror); Mesa's drivers for the CPU device, man-db and
  # the three shells for the man page and the completions.
  mmdebstrap --quiet --mode=root --variant=apt \
    --include=libvulkan1,mesa-vulkan-drivers,man-db,bash-completion,zsh,fish \
    "$suite" "$root" >/dev/null || fail "mmdebstrap could not make a $suite root in $root"
  ;;
deb)
  deb="${2:?scripts/package-test.sh deb DEB DIR}"
  root="${3:?scripts/package-test.sh deb DEB DIR}"
  [ -f "$deb" ] || fail "$deb is not there (scripts/package.sh deb makes it)"
  [ -x "$root/usr/bin/apt-get" ] || fail "$root is no Debian root (scripts/package-test.sh root $root)"
  # The control fields: the loader required, Mesa's drivers recommended.
  field() { dpkg-deb --field "$deb" "$1"; }
  [ "$(field Package)" = kiln ] || fail "the package is not named kiln"
  [ "$(field Version)" = "$version-1" ] || fail "the package's version $(field Version) is not $version-1"
  field Depends | tr ',' '\n' | grep -x ' *libvulkan1' >/dev/null ||
    fail "the package does not depend on libvulkan1 (Depends: $(field Depends))"
  field Recommends | tr ',' '\n' | grep -x ' *mesa-vulkan-drivers' >/dev/null ||
    fail "the package does not recommend mesa-vulkan-drivers (Recommends: $(field Recommends))"
  if field Depends | grep mesa-vulkan-drivers >/dev/null; then
    fail "the package requires mesa-vulkan-drivers, which it should only recommend"
  fi
  # The contents: binary, layer, profiles, man page, completions, contrib's examples.
  listing=$(dpkg-deb --contents "$deb" | awk '{print $6}' | sed 's|^\./|/|')
  expect=(/usr/bin/kiln /usr/lib/kiln/libkiln_trace_layer.so /usr/share/man/man1/kiln.1.gz
    /usr/share/bash-completion/completions/kiln /usr/share/zsh/vendor-completions/_kiln
    /usr/share/fish/vendor_completions.d/kiln.fish)
  for p in profiles/*.toml; do expect+=("/usr/share/kiln/$p"); done
  for d in slurm nhc k8s prometheus; do
    for f in contrib/"$d"/*; do expect+=("/usr/share/doc/kiln/examples/$d/${f##*/}"); done
  done
  for p in "${expect[@]}"; do
    grep -x -F "$p" <<<"$listing" >/dev/null || fail "the package lacks $p"
  done

  before=$(tree_of "$root")
  cp "$deb" "$root/tmp/kiln.deb"
  # Only the distribution's packages are there: dpkg -i alone must find every dependency.
  in_root "$root" dpkg -i /tmp/kiln.deb >"$root/tmp/dpkg.log" 2>&1 ||
    fail "dpkg -i of the package failed in the clean root: $(tail -n 5 "$root/tmp/dpkg.log")"
  cat >"$root/tmp/check.sh" <<'CHECK'
set -uo pipefail
fail() { echo "in the clean root: $*" >&2; exit 1; }
version="$1"
cd /tmp
out=$(kiln --version) || fail "kiln --version failed"
case "$out" in "kiln $version (commit "*")") ;; *) fail "kiln --version says '$out'" ;; esac
out=$(kiln list 2>&1) || fail "kiln list failed: $out"
grep 'CPU device' <<<"$out" >/dev/null || fail "kiln list shows no CPU device: $out"
# The profile comes from the package's files, not the copy built into kiln.
out=$(kiln run --device cpu --duration 10s --dry-run 2>&1) || fail "kiln run --dry-run failed: $out"
grep -F 'profile quick read from /usr/share/kiln/profiles/quick.toml' <<<"$out" >/dev/null ||
  fail "kiln did not read its profile from /usr/share/kiln/profiles: $out"
# A short run of the installed profile on the CPU device, tested as asked: it passes, with
# its report. Its work is bounded (16 MiB, one pass of one algorithm, transfers to 1 MiB),
# so that it ends well inside its 10 s beside CI's other tests: a run given the whole
# profile's work for 10 s on a loaded machine is honestly cut short (exit 4).
rm -rf /tmp/run
kiln run --device cpu --duration 10s --vram-bytes 16MiB --algorithms own-address --passes 1 \
  --pcie-max-bytes 1MiB --out /tmp/run >/tmp/run.log 2>&1
code=$?
[ "$code" = 0 ] || fail "kiln run --device cpu --duration 10s exited $code, not 0: $(tail -n 20 /tmp/run.log)"
[ -f /tmp/run/report.json ] || fail "the run wrote no report.json"
out=$(MANPAGER=cat COLUMNS=80 man kiln 2>&1) || fail "man kiln failed: $out"
grep -i 'GPU stress and health diagnostics' <<<"$out" >/dev/null || fail "man kiln shows no kiln page: $out"
# Each shell finds the completion where the package put it, unasked (in an empty folder:
# no file name to complete instead).
mkdir -p /tmp/empty && cd /tmp/empty
out=$(bash -c '. /usr/share/bash-completion/bash_completion
  __load_completion kiln && COMP_WORDS=(kiln ru) COMP_CWORD=1 && _kiln kiln ru kiln &&
  printf "%s\n" "${COMPREPLY[@]}"' 2>&1)
grep -x 'run' <<<"$out" >/dev/null || fail "bash does not complete 'kiln ru' to run: $out"
out=$(zsh -fc 'autoload -U compinit && compinit -u -D && print -r -- ${_comps[kiln]}' 2>&1)
[ "$out" = _kiln ] || fail "zsh does not find kiln's completion ($out)"
out=$(fish -c 'complete --do-complete "kiln ru"' 2>&1)
grep "^run$(printf '\t')" <<<"$out" >/dev/null || fail "fish does not complete 'kiln ru' to run: $out"
CHECK
  in_root "$root" bash /tmp/check.sh "$version" || fail "the installed package does not work (above)"
  in_root "$root" dpkg --purge kiln >"$root/tmp/dpkg.log" 2>&1 ||
    fail "dpkg --purge kiln failed: $(tail -n 5 "$root/tmp/dpkg.log")"
  after=$(tree_of "$root")
  left=$(comm -13 <(echo "$before") <(echo "$after"))
  [ -z "$left" ] || fail "dpkg --purge kiln left files behind: $left"
  gone=$(comm -23 <(echo "$before") <(echo "$after"))
  [ -z "$gone" ] || fail "installing and purging kiln removed files of the root: $gone"
  rm -rf "$root"
  ;;
zip)
  zip="${2:?scripts/package-test.sh zip ZIP}"
  [ -f "$zip" ] || fail "$zip is not there (scripts/package.sh zip makes it)"
  for tool in unzip wine Xvfb x86_64-w64-mingw32-objdump x86_64-w64-mingw32-gcc; do
    command -v "$tool" >/dev/null 2>&1 ||
      fail "$tool is missing (bash scripts/setup.sh --test installs it)"
  done
  dir="$PWD/target/zip-test"
  rm -rf "$dir" && mkdir -p "$dir/unzipped"
  unzip -q "$zip" -d "$dir/unzipped"
  name="kiln-$version-windows-x86_64"
  got=$(cd "$dir/unzipped" && find . -type f | sort | tr '\n' ' ')
  want="./$name/README.txt ./$name/kiln.exe "
  for license in LICENSE LICENSE.txt LICENSE-MIT LICENSE-APACHE COPYING; do
    [ -f "$license" ] && want="./$name/$license.txt $want"
  done
  [ "$got" = "$want" ] || fail "the zip holds $got, not $want"
  exe="$dir/unzipped/$name/kiln.exe"
  grep -F "kiln $version" "$dir/unzipped/$name/README.txt" >/dev/null ||
    fail "the zip's README.txt does not name kiln $version"
  # Every DLL kiln.exe imports is Windows' own (10, 1709 on; Vulkan and NVML are loaded
  # at run time from the driver) or in the zip: MinGW's runtime DLLs would not be there.
  system="kernel32 ntdll advapi32 bcrypt bcryptprimitives userenv ws2_32 ole32 oleaut32
    combase rpcrt4 shell32 user32 gdi32 dxgi pdh cfgmgr32 setupapi wevtapi msvcrt ucrtbase
    api-ms-win-core-synch-l1-2-0 api-ms-win-core-winrt-error-l1-1-0"
  for dll in $(x86_64-w64-mingw32-objdump -p "$exe" | sed -n 's/^\s*DLL Name: //p' | sort -u); do
    base=$(tr '[:upper:]' '[:lower:]' <<<"${dll%.*}")
    tr -s ' \n' '\n' <<<"$system" | grep -x -F "$base" >/dev/null || [ -f "$(dirname "$exe")/$dll" ] ||
      fail "kiln.exe needs $dll, which neither Windows nor the zip has"
  done
  # CI runs its Wine suite (scripts/windows-test.sh) on this unzipped kiln.exe rather than
  # boot a second Wine here: the copy stays, its path said.
  if [ "${3:-}" = --unzip-only ]; then
    echo "$exe"
    exit 0
  fi
  # A Windows of its own: a fresh prefix, where Wine 8's missing bcryptprimitives.dll
  # (Windows 10 has it; Rust's standard library needs its ProcessPrng) is stood in for
  # in system32, as Windows' own, not beside kiln.exe.
  export WINEPREFIX="$dir/prefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
  display=""
  for n in $(seq 120 149); do
    if [ ! -e "/tmp/.X$n-lock" ] && [ ! -e "/tmp/.X11-unix/X$n" ]; then display=":$n"; break; fi
  done
  [ -n "$display" ] || fail "no free X display number"
  Xvfb "$display" -screen 0 640x480x24 -nolisten tcp >/dev/null 2>&1 &
  xvfb=$!
  trap 'kill $xvfb 2>/dev/null || true; wineserver -k 2>/dev/null || true' EXIT
  export DISPLAY="$display"
  wineboot -i >/dev/null 2>&1 || true
  x86_64-w64-mingw32-gcc -shared -O2 -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
    tests/wine/bcryptprimitives.c -ladvapi32
  icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json 2>/dev/null | head -n 1)
  export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
  cd "$dir"
  out=$(timeout 120 wine "$exe" list 2>&1) || fail "kiln.exe list failed under Wine: $out"
  grep 'CPU device' <<<"$out" >/dev/null || fail "kiln.exe list shows no CPU device: $out"
  code=0
  timeout 300 wine "$exe" run --device cpu --vram-bytes 16MiB --algorithms own-address --passes 1 \
    --pcie-max-bytes 1MiB --out 'Z:'"${dir//\//\\}"'\run' >"$dir/run.log" 2>&1 || code=$?
  [ "$code" = 0 ] || fail "kiln.exe's short run exited $code under Wine, not 0: $(tail -n 20 "$dir/run.log")"
  [ -f "$dir/run/report.json" ] || fail "kiln.exe's run wrote no report.json"
  # Passed: the prefix and the unzipped copy go (a failure leaves them to look at).
  wineserver -k 2>/dev/null || true
  cd / && rm -rf "$dir"
  ;;
*)
  echo "usage: scripts/package-test.sh root DIR | deb DEB DIR | zip ZIP" >&2
  exit 64
  ;;
esac
