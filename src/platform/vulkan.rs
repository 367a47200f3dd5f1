//! Vulkan as each OS installs it: the loader's file and what to do when it, a driver or a
//! device is missing, in the words of that OS (a package on Linux, the GPU maker's driver
//! on Windows, which ships the loader with it).

/// The loader's file.
pub const LOADER: &str = os::LOADER;

/// What to do when the loader is missing.
pub const INSTALL_LOADER: &str = os::INSTALL_LOADER;

/// What to do when the loader finds no driver.
pub const INSTALL_DRIVER: &str = os::INSTALL_DRIVER;

/// What to do when the drivers find no device.
pub const FIND_DEVICE: &str = os::FIND_DEVICE;

/// The driver to install for a GPU, where the OS has one answer for every vendor (the
/// card maker's driver registers its Vulkan driver on Windows); None where it depends on
/// the vendor's packages.
pub const MAKERS_DRIVER: Option<&str> = os::MAKERS_DRIVER;

/// The Vulkan driver manifests the OS has registered, where it registers them (Windows'
/// registry: `Khronos\Vulkan\Drivers` and each display adapter's `VulkanDriverName`);
/// None where the loader searches directories instead.
pub fn registered_manifests() -> Option<Vec<std::path::PathBuf>> {
    os::registered_manifests()
}

/// The manifests a registry registers: `Khronos\Vulkan\Drivers` values that are on (0), and
/// every display adapter's `VulkanDriverName`.
pub fn manifests_of(registry: &super::windows_registry::Registry) -> Vec<std::path::PathBuf> {
    use super::windows_registry::Value;
    let mut out: Vec<std::path::PathBuf> = registry
        .values(DRIVERS_KEY)
        .into_iter()
        .filter(|(_, v)| **v == Value::Number(0))
        .map(|(name, _)| std::path::PathBuf::from(name))
        .collect();
    for adapter in registry.subkeys(super::pci::REGISTRY_KEYS[1].0) {
        let key = format!(r"{}\{adapter}", super::pci::REGISTRY_KEYS[1].0);
        if let Some(names) = registry.text(&key, "VulkanDriverName") {
            out.extend(names.split(';').filter(|n| !n.is_empty()).map(Into::into));
        }
    }
    out.dedup();
    out
}

/// Why kiln's own allocation trace layer cannot be used on this OS; None where it is built
/// (beside the kiln binary, by `cargo build`).
pub const NO_TRACE_LAYER: Option<&str> = os::NO_TRACE_LAYER;

/// Where Windows registers Vulkan drivers system-wide.
const DRIVERS_KEY: &str = r"SOFTWARE\Khronos\Vulkan\Drivers";

#[cfg(not(windows))]
mod os {
    pub const MAKERS_DRIVER: Option<&str> = None;
    pub const NO_TRACE_LAYER: Option<&str> = None;

    pub fn registered_manifests() -> Option<Vec<std::path::PathBuf>> {
        None
    }

    pub const LOADER: &str = "libvulkan.so.1";
    pub const INSTALL_LOADER: &str = "install it with `apt-get install libvulkan1`";
    pub const INSTALL_DRIVER: &str = "install the GPU's Vulkan driver, or `apt-get install mesa-vulkan-drivers` for the CPU Vulkan device";
    pub const FIND_DEVICE: &str = "check that the GPU driver is loaded, or `apt-get install mesa-vulkan-drivers` for the CPU Vulkan device";
}

#[cfg(windows)]
mod os {
    use super::super::windows_registry::Registry;

    pub const MAKERS_DRIVER: Option<&str> = Some(
        "the latest driver from the card's maker (nvidia.com, amd.com or intel.com), which registers its Vulkan driver",
    );
    pub const NO_TRACE_LAYER: Option<&str> = Some(
        "no allocation trace: kiln's trace layer is not built for Windows yet; the application is judged from the GPU counters, its output and the event log",
    );

    pub fn registered_manifests() -> Option<Vec<std::path::PathBuf>> {
        let mut registry = Registry::read(&[super::DRIVERS_KEY], 0);
        registry.merge(Registry::read(&[super::super::pci::REGISTRY_KEYS[1].0], 1));
        Some(super::manifests_of(&registry))
    }

    pub const LOADER: &str = "vulkan-1.dll";
    pub const INSTALL_LOADER: &str =
        "install or update the GPU's driver from its maker, which brings it";
    pub const INSTALL_DRIVER: &str = "install or update the GPU's driver from its maker (NVIDIA, AMD or Intel): Windows' own display driver has no Vulkan";
    pub const FIND_DEVICE: &str = "check in Device Manager that the GPU is listed under Display adapters with no warning sign, then reinstall its driver";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_registered_drivers_are_those_on_and_every_adapters_own() {
        let path = format!(
            "{}/tests/fixtures/registry/rtx4090_code43_beside_igpu.reg",
            env!("CARGO_MANIFEST_DIR")
        );
        let registry = super::super::windows_registry::Registry::from_export(
            &std::fs::read_to_string(path).unwrap(),
        );
        assert_eq!(
            manifests_of(&registry),
            [
                PathBuf::from(r"C:\Program Files\Mesa\lvp_icd.x86_64.json"),
                PathBuf::from(
                    r"C:\Windows\System32\DriverStore\FileRepository\iigd_dch.inf_amd64_7a2b\igvk64.json"
                ),
                PathBuf::from(
                    r"C:\Windows\System32\DriverStore\FileRepository\nv_dispi.inf_amd64_8d3b7d1a0a0d3f8e\nv-vk64.json"
                ),
            ],
            "a driver switched off (1) is not one the loader uses"
        );
    }
}
