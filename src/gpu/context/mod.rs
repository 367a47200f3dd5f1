//! An open device: compute queue, allocator, pipelines, buffers, descriptor bindings and
//! command submission with bounded waits and GPU timestamps. One concern a file, each with
//! its own `impl DeviceContext`: opening and lifetime (`device`), buffers and memory
//! (`memory`), layouts, bindings and pipelines (`pipeline`), recording and bounded waits
//! (`submission`).

mod device;
mod memory;
mod pipeline;
mod submission;

pub use device::{DEFAULT_FENCE_TIMEOUT, DeviceContext};
pub use memory::{AllocatorStats, BufferKind, GpuBuffer, RawMemory};
pub use pipeline::{Binding, Pipeline};
pub use submission::{Recording, Timing};

/// Bytes of push constants every kiln pipeline may use (the Vulkan minimum).
pub const PUSH_CONSTANT_BYTES: u32 = 128;
/// Storage-buffer bindings in every kiln descriptor set.
pub const BINDINGS: usize = 3;
/// Binding at which the first buffer is also visible as a uniform texel buffer of
/// `R32G32B32A32_UINT` texels (loads through it vectorise on some CPU drivers).
pub const TEXEL_BINDING: u32 = 3;
