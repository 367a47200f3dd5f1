//! The application-level error: why a command could not produce a result, and the exit
//! code that says so.

use crate::evidence::EvidenceError;
use crate::exit_code;
use crate::gpu::GpuError;
use crate::workload::WorkloadError;

/// Why a command could not produce a result.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// Bad flags or input.
    #[error("{0}")]
    Usage(String),
    /// Vulkan could not start or find the devices.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// Evidence could not be written or read.
    #[error(transparent)]
    Evidence(#[from] EvidenceError),
    /// The machine would not let kiln start what a run needs (a worker process, a thread).
    #[error("{0}")]
    Start(String),
}

impl AppError {
    /// The exit code for this failure.
    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Usage(_) => exit_code::USAGE,
            AppError::Gpu(GpuError::NoSuchDevice { .. }) => exit_code::USAGE,
            AppError::Gpu(_) | AppError::Evidence(_) | AppError::Start(_) => {
                exit_code::INCONCLUSIVE
            }
        }
    }
}

impl From<WorkloadError> for AppError {
    fn from(e: WorkloadError) -> Self {
        match e {
            WorkloadError::Gpu(g) => AppError::Gpu(g),
            WorkloadError::Config(c) => AppError::Usage(c),
        }
    }
}
