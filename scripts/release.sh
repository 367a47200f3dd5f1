#!/usr/bin/env bash
# Makes a release into dist/: from one release build of kiln (stripped), the Debian
# package, and from one cross-build the Windows zip; the container image from the same
# Linux binary where a container engine is installed (docker or podman; else it says it
# made none); the version in every name and in dist/VERSION, and dist/SHA256SUMS.
#
#   bash scripts/release.sh            then: cd dist && sha256sum -c SHA256SUMS
#
# What it makes is what CI tests (scripts/package-test.sh), there from the debug build;
# run that on these to check them by hand:
#   bash scripts/package-test.sh root target/deb-root
#   bash scripts/package-test.sh deb dist/kiln_VERSION-1_amd64.deb target/deb-root
#   bash scripts/package-test.sh zip dist/kiln-VERSION-windows-x86_64.zip
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "release.sh: the work tree has changes not committed; kiln --version will name $commit all the same" >&2
fi
bash scripts/setup.sh --package
rustup target list --installed | grep -x x86_64-pc-windows-gnu >/dev/null ||
  rustup target add x86_64-pc-windows-gnu
command -v x86_64-w64-mingw32-gcc >/dev/null 2>&1 || {
  echo "release.sh: MinGW is missing for the Windows build (bash scripts/setup.sh --test installs it)" >&2
  exit 1
}
dist=dist
rm -rf "$dist" && mkdir -p "$dist"
# One release build of each, stripped (a panic still names its file and line): the .deb
# and the image carry this kiln, the zip this kiln.exe.
export CARGO_PROFILE_RELEASE_STRIP=symbols
echo "== kiln $version (commit $commit): the release build"
cargo build --release --locked -p kiln -p kiln-trace-layer
echo "== kiln.exe: the release cross-build"
CARGO_TARGET_DIR=target/windows cargo build --release --locked --target x86_64-pc-windows-gnu -p kiln
echo "== the packages"
bash scripts/package.sh deb release "$dist" >/dev/null
bash scripts/package.sh zip target/windows/x86_64-pc-windows-gnu/release/kiln.exe "$dist" >/dev/null
# An engine that can replace the build stage with a folder: BuildKit's --build-context
# (docker with buildx and a daemon; podman 4.5 on).
engine=""
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 \
  && docker buildx version >/dev/null 2>&1; then
  engine=docker
elif command -v podman >/dev/null 2>&1 && podman build --help 2>/dev/null | grep -e --build-context >/dev/null; then
  engine=podman
fi
if [ -n "$engine" ]; then
  echo "== the image kiln:$version ($engine), from the same binary"
  image=target/image
  rm -rf "$image" && mkdir -p "$image/out"
  cp target/release/kiln target/release/libkiln_trace_layer.so "$image/out/"
  "$engine" build --build-context build="$image" -t "kiln:$version" .
  "$engine" save "kiln:$version" | gzip -n >"$dist/kiln-$version-image.tar.gz"
else
  echo "release.sh: no container engine that can build from a given binary (docker with buildx and its daemon running, or podman 4.5 or later): no image made" >&2
fi
# The version and commit as the binary says them (the commit it was built from).
target/release/kiln --version >"$dist/VERSION"
(cd "$dist" && sha256sum -- * >SHA256SUMS)
echo "== dist/"
ls -l "$dist"
