#!/usr/bin/env bash
# Recompiles every shaders/*.comp into the committed shaders/*.spv, with the flags in
# shaders/glslc.args (the same ones build.rs uses). Run after editing a shader.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t args < <(tr -s ' \n' '\n' < shaders/glslc.args | sed '/^$/d')
for src in shaders/*.comp; do
  glslc "${args[@]}" "$src" -o "${src%.comp}.spv"
done
echo "compiled $(ls shaders/*.comp | wc -l) shaders"
