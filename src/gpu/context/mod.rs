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
pub use pipeline::{BINDINGS, Binding, Pipeline};
pub use submission::{Recording, Timing};
