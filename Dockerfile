# The kiln image: built with cargo, run on a slim Debian with the Vulkan loader.
#
#   docker build -t kiln:0.1.0 .          (or: podman build / buildah bud)
#   docker run --rm --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics \
#       kiln:0.1.0 run --profile fleet
#
# The GPU's Vulkan driver comes from the host: NVIDIA's container toolkit mounts its ICD
# (nvidia_icd.json, libGLX_nvidia) only when the capabilities include `graphics`; AMD and
# Intel need /dev/dri and Mesa's drivers (add mesa-vulkan-drivers below for them).
#
# scripts/release.sh builds the image from the binary its .deb and zip are made with: the
# build stage is replaced by that binary (`--build-context build=target/image`, a folder
# holding out/kiln and out/libkiln_trace_layer.so), and nothing is compiled here.
# `--build-arg KILN_COMMIT=$(git rev-parse --short=12 HEAD)` names the commit in
# `kiln --version` (the build context has no .git).

# --- build ---------------------------------------------------------------------------
FROM rust:1-bookworm AS build
ARG KILN_COMMIT
WORKDIR /src
# The committed SPIR-V is used as is (no glslc needed to build the image).
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
COPY shaders ./shaders
COPY profiles ./profiles
COPY hostmath ./hostmath
COPY layer ./layer
COPY tests/layers/discrete ./tests/layers/discrete
COPY tests/fakes/nvml ./tests/fakes/nvml
COPY tests/apps/vkapp ./tests/apps/vkapp
# kiln, and the Vulkan layer `kiln watch` loads into an application (found in
# ../lib/kiln beside the binary); stripped, as scripts/release.sh builds them (a smaller
# image; a panic still names its file and line).
ENV CARGO_PROFILE_RELEASE_STRIP=symbols
RUN cargo build --release --locked --bin kiln \
    && cargo build --release --locked -p kiln-trace-layer \
    && install -D -m 0755 target/release/kiln /out/kiln \
    && install -D -m 0644 target/release/libkiln_trace_layer.so /out/libkiln_trace_layer.so

# --- run -----------------------------------------------------------------------------
# Only the Vulkan loader: kiln makes no network connections (no certificates needed).
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends libvulkan1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/kiln /usr/local/bin/kiln
COPY --from=build /out/libkiln_trace_layer.so /usr/local/lib/kiln/libkiln_trace_layer.so
# Vulkan needs the graphics capability on NVIDIA (the ICD), NVML needs utility.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics
LABEL org.opencontainers.image.title="kiln" \
      org.opencontainers.image.description="GPU stress and health diagnostics" \
      org.opencontainers.image.version="0.1.0"
ENTRYPOINT ["/usr/local/bin/kiln"]
CMD ["run", "--profile", "quick"]
