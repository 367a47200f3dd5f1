//! Typed errors of the Vulkan layer. Each says what went wrong in words a person at the
//! terminal can act on; the ones raised while work was in flight name that work.

use ash::vk;

/// Everything the Vulkan layer can fail with.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// The Vulkan loader (`libvulkan.so.1`, `vulkan-1.dll`) could not be loaded.
    #[error(
        "the Vulkan loader ({}) is not installed: {} ({detail})",
        crate::platform::vulkan::LOADER,
        crate::platform::vulkan::INSTALL_LOADER
    )]
    LoaderMissing {
        /// What the dynamic loader said.
        detail: String,
    },
    /// The loader is there but no installable client driver answered.
    #[error(
        "the Vulkan loader found no driver: {}",
        crate::platform::vulkan::INSTALL_DRIVER
    )]
    NoDriver,
    /// Drivers loaded but enumerated no physical device.
    #[error("Vulkan found no device: {}", crate::platform::vulkan::FIND_DEVICE)]
    NoDevice,
    /// A `--device` selector matched nothing.
    #[error(
        "no Vulkan device matches {} (run `kiln list` to see the devices)",
        crate::text::quote(selector)
    )]
    NoSuchDevice {
        /// The selector as the user gave it.
        selector: String,
    },
    /// The device reported `VK_ERROR_DEVICE_LOST`.
    #[error("the device was lost while {running}")]
    DeviceLost {
        /// The work that was on the device.
        running: String,
    },
    /// A fence wait ran past its bound.
    #[error("the device did not finish {running} within {timeout_ms} ms")]
    Timeout {
        /// The work that was on the device.
        running: String,
        /// The bound that expired.
        timeout_ms: u64,
    },
    /// Device or host memory ran out.
    #[error("out of memory while {running}")]
    OutOfMemory {
        /// What was being allocated.
        running: String,
    },
    /// The device lacks something kiln needs.
    #[error("the device cannot run kiln: {0}")]
    Unsupported(String),
    /// Any other Vulkan failure.
    #[error("Vulkan call {call} failed with {result:?} while {running}")]
    Vulkan {
        /// The Vulkan entry point.
        call: &'static str,
        /// What it returned.
        result: vk::Result,
        /// The work in progress.
        running: String,
    },
}

impl GpuError {
    /// Maps a failed Vulkan call to the typed error, keeping what was running.
    pub fn from_vk(call: &'static str, result: vk::Result, running: &str) -> Self {
        let running = running.to_owned();
        match result {
            vk::Result::ERROR_DEVICE_LOST => GpuError::DeviceLost { running },
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY | vk::Result::ERROR_OUT_OF_HOST_MEMORY => {
                GpuError::OutOfMemory { running }
            }
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => GpuError::NoDriver,
            result => GpuError::Vulkan {
                call,
                result,
                running,
            },
        }
    }

    /// True when the device can take no more work (lost or hung).
    pub fn is_device_fatal(&self) -> bool {
        matches!(self, GpuError::DeviceLost { .. } | GpuError::Timeout { .. })
    }
}

/// Result alias of the Vulkan layer.
pub type GpuResult<T> = Result<T, GpuError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vulkan_results_map_to_typed_errors_that_name_the_work() {
        let lost = GpuError::from_vk(
            "vkQueueSubmit",
            vk::Result::ERROR_DEVICE_LOST,
            "vram verify of own-address",
        );
        assert!(
            matches!(&lost, GpuError::DeviceLost { running } if running == "vram verify of own-address")
        );
        assert!(lost.is_device_fatal());
        assert!(lost.to_string().contains("vram verify of own-address"));
        let oom = GpuError::from_vk(
            "vkAllocateMemory",
            vk::Result::ERROR_OUT_OF_DEVICE_MEMORY,
            "allocating",
        );
        assert!(matches!(oom, GpuError::OutOfMemory { .. }));
        assert!(!oom.is_device_fatal());
        let other = GpuError::from_vk("vkCreateBuffer", vk::Result::ERROR_UNKNOWN, "x");
        assert!(other.to_string().contains("vkCreateBuffer"));
    }
}
