#!/usr/bin/env bash
# Recompiles every shaders/*.comp into the committed shaders/spirv/*.spv, with the flags build.rs
# uses: glslc and shaders/glslc.args, or, for the matrix units' shaders
# (GL_KHR_cooperative_matrix, newer than Debian's glslc), the glslangValidator that
# KILN_GLSLANG names (default: the one scripts/setup.sh --test puts in the test venv) and
# shaders/glslang.args. Run after editing a shader.
set -euo pipefail
cd "$(dirname "$0")/.."
glslang="${KILN_GLSLANG:-${KILN_TEST_VENV:-/opt/kiln-test-venv}/bin/glslangValidator}"
mapfile -t args < <(tr -s ' \n' '\n' < shaders/glslc.args | sed '/^$/d')
mapfile -t glslang_args < <(tr -s ' \n' '\n' < shaders/glslang.args | sed '/^$/d')
# The committed SPIR-V of a source: shaders/spirv/<name>.spv.
spirv() { local name; name=$(basename "$1" .comp); echo "shaders/spirv/$name.spv"; }
for src in shaders/*.comp; do
  if grep -q GL_KHR_cooperative_matrix "$src"; then
    [ -x "$glslang" ] || {
      echo "compile-shaders.sh: $src needs $glslang (run scripts/setup.sh --test, or set KILN_GLSLANG)" >&2
      exit 1
    }
    "$glslang" "${glslang_args[@]}" "$src" -o "$(spirv "$src")" >/dev/null
  else
    glslc "${args[@]}" "$src" -o "$(spirv "$src")"
  fi
done
echo "compiled $(ls shaders/*.comp | wc -l) shaders"
