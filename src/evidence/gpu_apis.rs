//! The GPU APIs a process loaded, known by their libraries: whether a watched application
//! is a Vulkan one (and went through the Vulkan loader, where kiln's layer lives), or a
//! CUDA, HIP, OpenCL, Level Zero or Direct3D one. What it loaded says why kiln's trace
//! saw nothing of it, where it did not.

use serde::{Deserialize, Serialize};

/// A kind of GPU library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuLibrary {
    /// The Vulkan loader (`libvulkan.so.1`, `vulkan-1.dll`): where layers are loaded.
    VulkanLoader,
    /// A Vulkan driver (an ICD: Mesa's, NVIDIA's, AMD's, Intel's).
    VulkanDriver,
    /// CUDA's driver library.
    Cuda,
    /// AMD's HIP runtime.
    Hip,
    /// An OpenCL loader.
    OpenCl,
    /// oneAPI's Level Zero loader.
    LevelZero,
    /// Direct3D 11 or 12.
    Direct3D,
}

/// What a library's file name is, where it is a GPU library kiln knows.
pub fn kind_of(name: &str) -> Option<GpuLibrary> {
    let n = name.to_ascii_lowercase();
    let starts = |p: &str| n.starts_with(p);
    Some(if starts("libvulkan.so") || n == "vulkan-1.dll" {
        GpuLibrary::VulkanLoader
    } else if starts("libvulkan_")
        || starts("libglx_nvidia.so")
        || starts("libnvidia-glcore.so")
        || starts("amdvlk")
        || n == "nvoglv64.dll"
        || starts("igvk")
    {
        GpuLibrary::VulkanDriver
    } else if starts("libcuda.so") || n == "nvcuda.dll" {
        GpuLibrary::Cuda
    } else if starts("libamdhip64.so") || starts("amdhip64") {
        GpuLibrary::Hip
    } else if starts("libopencl.so") || n == "opencl.dll" {
        GpuLibrary::OpenCl
    } else if starts("libze_loader.so") || n == "ze_loader.dll" {
        GpuLibrary::LevelZero
    } else if n == "d3d12.dll" || n == "d3d11.dll" {
        GpuLibrary::Direct3D
    } else {
        return None;
    })
}

/// The GPU libraries among `names`, each with its kind.
pub fn gpu_libraries(names: &[String]) -> Vec<(GpuLibrary, String)> {
    names
        .iter()
        .filter_map(|n| Some((kind_of(n)?, n.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_is_known_by_its_libraries_and_others_are_not() {
        let loaded: Vec<String> = [
            "libc.so.6",
            "libvulkan.so.1",
            "libvulkan_lvp.so",
            "libcuda.so.1",
            "libpython3.11.so.1.0",
            "libamdhip64.so.6",
            "nvcuda.dll",
            "vulkan-1.dll",
            "d3d12.dll",
            "libGLX_nvidia.so.0",
        ]
        .map(String::from)
        .to_vec();
        let kinds: Vec<GpuLibrary> = gpu_libraries(&loaded).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            [
                GpuLibrary::VulkanLoader,
                GpuLibrary::VulkanDriver,
                GpuLibrary::Cuda,
                GpuLibrary::Hip,
                GpuLibrary::Cuda,
                GpuLibrary::VulkanLoader,
                GpuLibrary::Direct3D,
                GpuLibrary::VulkanDriver,
            ]
        );
        assert_eq!(kind_of("libvulkan_lvp.so"), Some(GpuLibrary::VulkanDriver));
        assert_eq!(
            kind_of("libcudart.so.12"),
            None,
            "the runtime, not the driver"
        );
    }
}
