//! The SPIR-V of every shader, embedded at build time (see build.rs).

/// A compute shader kiln ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shader {
    /// Writes a VRAM test pattern with 16-byte stores (any access layout).
    VramWrite,
    /// Writes a VRAM test pattern with 32-byte stores (contiguous layout, needs int64).
    VramWriteWide,
    /// Verifies a VRAM test pattern and records errors.
    VramVerify,
    /// The same, loading through a texel buffer.
    VramVerifyTexel,
    /// Verifies a pattern, then writes its inversion (moving inversions).
    VramRewrite,
    /// The same with texel-buffer loads and 32-byte stores (contiguous layout, int64).
    VramRewriteWide,
    /// Reads or rewrites single listed words (retest, planted faults).
    VramProbe,
    /// Streams through memory to push retested words out of the caches.
    VramEvict,
    /// Long dependent multiply-add chains, one result per work item.
    ComputeFma,
    /// The same in fp16 (a separate module: it needs the Float16 capability).
    ComputeFma16,
    /// Compares two runs of the same work items.
    ComputeCompare,
    /// Checksums a transferred buffer on the device.
    PcieChecksum,
}

impl Shader {
    /// The compiled SPIR-V.
    pub fn spirv(self) -> &'static [u8] {
        match self {
            Shader::VramWrite => include_bytes!(concat!(env!("OUT_DIR"), "/vram_write.spv")),
            Shader::VramWriteWide => {
                include_bytes!(concat!(env!("OUT_DIR"), "/vram_write_wide.spv"))
            }
            Shader::VramVerify => include_bytes!(concat!(env!("OUT_DIR"), "/vram_verify.spv")),
            Shader::VramVerifyTexel => {
                include_bytes!(concat!(env!("OUT_DIR"), "/vram_verify_texel.spv"))
            }
            Shader::VramRewrite => include_bytes!(concat!(env!("OUT_DIR"), "/vram_rewrite.spv")),
            Shader::VramRewriteWide => {
                include_bytes!(concat!(env!("OUT_DIR"), "/vram_rewrite_wide.spv"))
            }
            Shader::VramProbe => include_bytes!(concat!(env!("OUT_DIR"), "/vram_probe.spv")),
            Shader::VramEvict => include_bytes!(concat!(env!("OUT_DIR"), "/vram_evict.spv")),
            Shader::ComputeFma => include_bytes!(concat!(env!("OUT_DIR"), "/compute_fma.spv")),
            Shader::ComputeFma16 => include_bytes!(concat!(env!("OUT_DIR"), "/compute_fma16.spv")),
            Shader::ComputeCompare => {
                include_bytes!(concat!(env!("OUT_DIR"), "/compute_compare.spv"))
            }
            Shader::PcieChecksum => include_bytes!(concat!(env!("OUT_DIR"), "/pcie_checksum.spv")),
        }
    }

    /// The shader's file stem, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Shader::VramWrite => "vram_write",
            Shader::VramWriteWide => "vram_write_wide",
            Shader::VramVerify => "vram_verify",
            Shader::VramVerifyTexel => "vram_verify_texel",
            Shader::VramRewrite => "vram_rewrite",
            Shader::VramRewriteWide => "vram_rewrite_wide",
            Shader::VramProbe => "vram_probe",
            Shader::VramEvict => "vram_evict",
            Shader::ComputeFma => "compute_fma",
            Shader::ComputeFma16 => "compute_fma16",
            Shader::ComputeCompare => "compute_compare",
            Shader::PcieChecksum => "pcie_checksum",
        }
    }
}
