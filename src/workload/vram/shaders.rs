//! The VRAM test's shaders (`shaders/vram_*.comp`).

use crate::gpu::{ShaderCode, embedded_shader};

/// Writes a VRAM test pattern with 16-byte stores (any access layout).
pub const WRITE: ShaderCode = embedded_shader!("vram_write");
/// Writes a VRAM test pattern with 32-byte stores (contiguous layout, needs int64).
pub const WRITE_WIDE: ShaderCode = embedded_shader!("vram_write_wide");
/// Verifies a VRAM test pattern and records errors.
pub const VERIFY: ShaderCode = embedded_shader!("vram_verify");
/// The same, loading through a texel buffer.
pub const VERIFY_TEXEL: ShaderCode = embedded_shader!("vram_verify_texel");
/// Verifies a pattern, then writes its inversion (moving inversions).
pub const REWRITE: ShaderCode = embedded_shader!("vram_rewrite");
/// The same with texel-buffer loads and 32-byte stores (contiguous layout, int64).
pub const REWRITE_WIDE: ShaderCode = embedded_shader!("vram_rewrite_wide");
/// Reads or rewrites single listed words (retest, planted faults).
pub const PROBE: ShaderCode = embedded_shader!("vram_probe");
/// Streams through memory to push retested words out of the caches.
pub const EVICT: ShaderCode = embedded_shader!("vram_evict");
/// Copies one half of a test buffer onto the other (the benchmark's shader copy).
pub const COPY: ShaderCode = embedded_shader!("vram_copy");
