//! The Vulkan layer: the only place with unsafe code. Above it, workloads see safe types:
//! device descriptions, an open context, buffers, pipelines and timed submissions.

mod context;
mod error;
mod info;
mod instance;
mod library;
mod shaders;

pub use context::{
    AllocatorStats, BINDINGS, Binding, BufferKind, DEFAULT_FENCE_TIMEOUT, DeviceContext, GpuBuffer,
    Pipeline, RawMemory, Recording, Timing,
};
pub use error::{GpuError, GpuResult};
pub use info::{
    DeviceInfo, DeviceKind, DeviceLimits, HeapInfo, MatrixUnitShape, MatrixUnits, MemoryTypeInfo,
    format_uuid,
};
pub use instance::{Vulkan, loader_version, take_validation_messages};
pub use library::library_loads;
pub use shaders::ShaderCode;
pub(crate) use shaders::embedded_shader;
