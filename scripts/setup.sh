#!/usr/bin/env bash
# Installs what kiln needs on Debian or Ubuntu: the Vulkan loader, Mesa's CPU Vulkan
# driver (lavapipe, so kiln runs even without a GPU) and glslc (to rebuild shaders).
# With --test, also what the tests check kiln's outputs against: promtool,
# node_exporter, headless Chromium and Python's jsonschema. Installs nothing that is
# already there.
set -euo pipefail
need=()
ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1' || need+=(libvulkan1)
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need+=(mesa-vulkan-drivers)
command -v glslc >/dev/null 2>&1 || need+=(glslc)
if [ "${1:-}" = "--test" ]; then
  command -v promtool >/dev/null 2>&1 || need+=(prometheus)
  command -v prometheus-node-exporter >/dev/null 2>&1 || need+=(prometheus-node-exporter)
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
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
