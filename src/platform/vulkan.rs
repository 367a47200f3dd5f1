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

#[cfg(not(windows))]
mod os {
    pub const LOADER: &str = "libvulkan.so.1";
    pub const INSTALL_LOADER: &str = "install it with `apt-get install libvulkan1`";
    pub const INSTALL_DRIVER: &str = "install the GPU's Vulkan driver, or `apt-get install mesa-vulkan-drivers` for the CPU Vulkan device";
    pub const FIND_DEVICE: &str = "check that the GPU driver is loaded, or `apt-get install mesa-vulkan-drivers` for the CPU Vulkan device";
}

#[cfg(windows)]
mod os {
    pub const LOADER: &str = "vulkan-1.dll";
    pub const INSTALL_LOADER: &str =
        "install or update the GPU's driver from its maker, which brings it";
    pub const INSTALL_DRIVER: &str = "install or update the GPU's driver from its maker (NVIDIA, AMD or Intel): Windows' own display driver has no Vulkan";
    pub const FIND_DEVICE: &str = "check in Device Manager that the GPU is listed under Display adapters with no warning sign, then reinstall its driver";
}
