//! Compute shaders as the Vulkan layer takes them: a name and its SPIR-V. The layer names
//! no shader of its own; each workload owns its shaders (with `embedded_shader!`) and
//! asks for pipelines by them.

/// A compute shader kiln ships: its SPIR-V, compiled from `shaders/<name>.comp` by
/// build.rs and embedded, and the name messages and the pipeline cache know it by. A
/// context keeps one module and one pipeline per name (and specialization), so names are
/// unique among kiln's shaders (they are file stems).
#[derive(Clone, Copy)]
pub struct ShaderCode {
    name: &'static str,
    spirv: &'static [u8],
}

impl ShaderCode {
    /// Made by `embedded_shader!` only: the SPIR-V is build.rs's output, which is what
    /// makes handing it to the driver sound.
    pub(crate) const fn embedded(name: &'static str, spirv: &'static [u8]) -> ShaderCode {
        ShaderCode { name, spirv }
    }

    /// The shader's file stem, for messages and as its key.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The compiled SPIR-V, in any alignment (it is copied into words).
    pub fn spirv(&self) -> &'static [u8] {
        self.spirv
    }
}

impl std::fmt::Debug for ShaderCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShaderCode")
            .field("name", &self.name)
            .field("spirv_bytes", &self.spirv.len())
            .finish()
    }
}

/// The shader built from `shaders/<name>.comp` (build.rs writes its SPIR-V to `OUT_DIR`),
/// embedded where the macro is used: `embedded_shader!("vram_write")`.
macro_rules! embedded_shader {
    ($name:literal) => {
        $crate::gpu::ShaderCode::embedded(
            $name,
            include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".spv")),
        )
    };
}
pub(crate) use embedded_shader;
