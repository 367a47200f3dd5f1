//! The machine a run tested on (the facts are the platform's to read,
//! [`crate::platform::host`]), with the Vulkan loader kiln found on it. Read once at the
//! start and kept in the manifest, so that a report rebuilt elsewhere still describes the
//! machine that ran the test.

pub use crate::platform::host::HostInfo;

/// Reads this machine, the Vulkan loader included.
pub fn collect() -> HostInfo {
    HostInfo {
        vulkan_loader: crate::gpu::loader_version(),
        ..crate::platform::host::read()
    }
}
