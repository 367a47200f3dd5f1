//! The machine's PCI devices as the OS lists them, independent of Vulkan: address, class,
//! ids, the driver bound to each, and (Windows) the problem Device Manager shows for it and
//! the Vulkan driver its display driver registered. Linux reads sysfs under a root that
//! tests point at a fixture tree; Windows reads the device tree from the registry
//! (`Enum\PCI`, the display class's driver keys) and asks the configuration manager which
//! devices are present and what problem each has. The inventory decides which are GPUs.

use std::path::{Path, PathBuf};

use super::windows_registry::Registry;

/// One PCI device.
#[derive(Debug, Clone, PartialEq)]
pub struct PciDevice {
    /// `0000:01:00.0`, lower case.
    pub address: String,
    /// The class code (`0x030000` for a VGA controller).
    pub class: u32,
    /// Vendor id.
    pub vendor_id: u32,
    /// Device id, when known.
    pub device_id: Option<u32>,
    /// The OS's name of it (Windows' `DeviceDesc`, its driver's `DriverDesc`), when it has
    /// one.
    pub name: Option<String>,
    /// The driver bound to it: the kernel module (`nvidia`) on Linux; the driver's
    /// provider and version on Windows (`NVIDIA 32.0.15.6094`). None when none is bound.
    pub driver: Option<String>,
    /// The problem code Device Manager shows (`43`: Windows stopped it after it reported
    /// problems), where the OS has them and the device has one.
    pub problem: Option<u32>,
    /// The Vulkan driver manifests its display driver registered (Windows).
    pub vulkan_manifests: Vec<PathBuf>,
}

/// True where the kernel exposes devices in sysfs (Linux): the sysfs and DRM fdinfo
/// telemetry sources read there, and nowhere else.
pub const SYSFS: bool = os::SYSFS;

/// The name of the list in the inventory's `seen_by`.
pub const SOURCE: &str = os::SOURCE;

/// Every PCI device, or why the list could not be read (one sentence).
pub fn devices(root: &Path) -> Result<Vec<PciDevice>, String> {
    os::devices(root)
}

/// Reads a Linux sysfs PCI tree under `root`.
pub fn from_sysfs(root: &Path) -> Result<Vec<PciDevice>, String> {
    let logical = Path::new("sys/bus/pci/devices");
    let entries = std::fs::read_dir(root.join(logical)).map_err(|e| {
        format!(
            "The PCI device list /{} could not be read ({e})",
            logical.display()
        )
    })?;
    let hex = |path: PathBuf| {
        let text = std::fs::read_to_string(path).ok()?;
        let text = text.trim();
        let digits = text
            .strip_prefix("0x")
            .or_else(|| text.strip_prefix("0X"))
            .unwrap_or(text);
        u32::from_str_radix(digits, 16).ok()
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let (Some(class), Some(vendor_id)) = (hex(dir.join("class")), hex(dir.join("vendor")))
        else {
            continue;
        };
        out.push(PciDevice {
            address: entry.file_name().to_string_lossy().to_ascii_lowercase(),
            class,
            vendor_id,
            device_id: hex(dir.join("device")),
            name: None,
            driver: std::fs::read_link(dir.join("driver"))
                .ok()
                .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned())),
            problem: None,
            vulkan_manifests: Vec::new(),
        });
    }
    Ok(out)
}

/// The registry keys the Windows list is read from, with the depth read below each.
pub const REGISTRY_KEYS: [(&str, usize); 2] = [
    (r"SYSTEM\CurrentControlSet\Enum\PCI", 2),
    (
        r"SYSTEM\CurrentControlSet\Control\Class\{4d36e968-e325-11ce-bfc1-08002be10318}",
        1,
    ),
];

/// The Windows list from the registry: every device instance under `Enum\PCI` that
/// `present` says is present (the registry keeps devices long removed), with the problem
/// it gives (`Some(None)`: present, no problem).
pub fn from_registry(
    registry: &Registry,
    present: &dyn Fn(&str) -> Option<Option<u32>>,
) -> Vec<PciDevice> {
    let [(enum_pci, _), (display_class, _)] = REGISTRY_KEYS;
    let mut out = Vec::new();
    for hardware in registry.subkeys(enum_pci) {
        let ids = ids_of(&hardware);
        for instance in registry.subkeys(&format!(r"{enum_pci}\{hardware}")) {
            let key = format!(r"{enum_pci}\{hardware}\{instance}");
            let Some(problem) = present(&format!(r"PCI\{hardware}\{instance}")) else {
                continue;
            };
            let Some((vendor_id, device_id)) = ids else {
                continue;
            };
            // The class code is in the compatible ids (`PCI\VEN_10DE&CC_030000`).
            let class = registry
                .text(&key, "CompatibleIDs")
                .and_then(|c| {
                    c.split(';').find_map(|id| {
                        let at = id.to_ascii_uppercase().find("CC_")?;
                        let digits: String = id[at + 3..]
                            .chars()
                            .take_while(char::is_ascii_hexdigit)
                            .collect();
                        match digits.len() {
                            6 => u32::from_str_radix(&digits, 16).ok(),
                            4 => u32::from_str_radix(&digits, 16).ok().map(|c| c << 8),
                            _ => None,
                        }
                    })
                })
                .unwrap_or(0);
            let Some(address) = registry
                .text(&key, "LocationInformation")
                .and_then(location_address)
            else {
                continue;
            };
            // The driver key (`{4d36e968-...}\0000`) of a display adapter holds its
            // driver's description, provider, version and Vulkan registration.
            let driver_key = registry
                .text(&key, "Driver")
                .and_then(|d| d.rsplit_once('\\'))
                .map(|(_, n)| format!(r"{display_class}\{n}"));
            let driver_text = |name: &str| {
                driver_key
                    .as_deref()
                    .and_then(|k| registry.text(k, name))
                    .map(str::to_owned)
            };
            let driver = match (driver_text("ProviderName"), driver_text("DriverVersion")) {
                (Some(p), Some(v)) => Some(format!("{p} {v}")),
                (p, v) => p.or(v),
            };
            // The 64-bit driver's manifests (`VulkanDriverNameWow` is the 32-bit one's).
            let vulkan_manifests = driver_text("VulkanDriverName")
                .map(|v| {
                    v.split(';')
                        .filter(|s| !s.is_empty())
                        .map(PathBuf::from)
                        .collect()
                })
                .unwrap_or_default();
            out.push(PciDevice {
                address,
                class,
                vendor_id,
                device_id,
                name: driver_text("DriverDesc")
                    .or_else(|| registry.text(&key, "DeviceDesc").map(device_desc)),
                driver,
                problem,
                vulkan_manifests,
            });
        }
    }
    out.sort_by(|a, b| a.address.cmp(&b.address));
    out
}

/// The vendor and device ids of a hardware key (`VEN_10DE&DEV_2684&SUBSYS_16F310DE&REV_A1`).
fn ids_of(hardware: &str) -> Option<(u32, Option<u32>)> {
    let field = |tag: &str| {
        hardware.split('&').find_map(|part| {
            let part = part.to_ascii_uppercase();
            part.strip_prefix(tag)
                .and_then(|hex| u32::from_str_radix(&hex[..hex.len().min(4)], 16).ok())
        })
    };
    Some((field("VEN_")?, field("DEV_")))
}

/// `PCI bus 1, device 0, function 0` as `0000:01:00.0` (Windows' consumer machines have
/// one PCI segment).
fn location_address(location: &str) -> Option<String> {
    let number = |tag: &str| -> Option<u32> {
        let at = location.find(tag)? + tag.len();
        location[at..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    let (bus, device, function) = (number("bus")?, number("device")?, number("function")?);
    Some(format!("0000:{bus:02x}:{device:02x}.{function:x}"))
}

/// A `DeviceDesc` without the driver file's reference before it
/// (`@oem12.inf,%nvidia_dev.2684%;NVIDIA GeForce RTX 4090`).
fn device_desc(text: &str) -> String {
    text.rsplit_once(';')
        .map_or(text, |(_, name)| name)
        .to_owned()
}

/// What a Device Manager problem code means for a GPU: a stable word and a sentence of
/// what to do.
pub fn problem_words(code: u32) -> (&'static str, &'static str) {
    match code {
        43 => (
            "device_stopped_code_43",
            "Windows stopped it because its driver reported a failure (Code 43): reinstall the driver cleanly; if Code 43 comes back with a fresh driver, in another slot, the card is the likely cause",
        ),
        28 => (
            "driver_not_installed_code_28",
            "its driver is not installed (Code 28): install the card maker's driver",
        ),
        22 => (
            "device_disabled_code_22",
            "it is disabled in Device Manager (Code 22): enable it",
        ),
        10 => (
            "device_cannot_start_code_10",
            "it cannot start (Code 10): reinstall its driver, and check its power cables",
        ),
        12 => (
            "no_resources_code_12",
            "Windows found no free resources for it (Code 12): enable Above 4G Decoding (and Resizable BAR) in the firmware setup",
        ),
        31 => (
            "driver_not_loaded_code_31",
            "its driver could not be loaded (Code 31): reinstall the card maker's driver",
        ),
        _ => (
            "device_problem",
            "Device Manager shows a problem with it: open its properties there for the code's meaning, and reinstall its driver",
        ),
    }
}

#[cfg(not(windows))]
mod os {
    pub const SOURCE: &str = "sysfs";
    pub const SYSFS: bool = true;

    pub fn devices(root: &std::path::Path) -> Result<Vec<super::PciDevice>, String> {
        super::from_sysfs(root)
    }
}

#[cfg(windows)]
mod os {
    use windows::Win32::Devices::DeviceAndDriverInstallation::{
        CM_DEVNODE_STATUS_FLAGS, CM_Get_DevNode_Status, CM_LOCATE_DEVNODE_NORMAL,
        CM_Locate_DevNodeW, CM_PROB, CR_SUCCESS, DN_HAS_PROBLEM,
    };
    use windows::core::HSTRING;

    use super::{REGISTRY_KEYS, Registry};

    pub const SOURCE: &str = "windows";
    pub const SYSFS: bool = false;

    /// Whether the device instance is present, and its problem code if it has one.
    fn present(instance: &str) -> Option<Option<u32>> {
        let mut node = 0u32;
        // SAFETY: a NUL-terminated instance id and a valid out-pointer.
        let located = unsafe {
            CM_Locate_DevNodeW(
                &mut node,
                &HSTRING::from(instance),
                CM_LOCATE_DEVNODE_NORMAL,
            )
        };
        if located != CR_SUCCESS {
            return None;
        }
        let mut status = CM_DEVNODE_STATUS_FLAGS(0);
        let mut problem = CM_PROB(0);
        // SAFETY: valid out-pointers and a devnode just located.
        let read = unsafe { CM_Get_DevNode_Status(&mut status, &mut problem, node, 0) };
        if read != CR_SUCCESS {
            return Some(None);
        }
        Some((status.0 & DN_HAS_PROBLEM.0 != 0).then_some(problem.0))
    }

    pub fn devices(_root: &std::path::Path) -> Result<Vec<super::PciDevice>, String> {
        let mut registry = Registry::default();
        for (key, depth) in REGISTRY_KEYS {
            registry.merge(Registry::read(&[key], depth));
        }
        let list = super::from_registry(&registry, &present);
        if registry.subkeys(REGISTRY_KEYS[0].0).is_empty() {
            return Err("Windows' PCI device list could not be read from the registry".into());
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_windows_device_tree_lists_the_present_devices_with_their_problems() {
        let path = format!(
            "{}/tests/fixtures/registry/rtx4090_code43_beside_igpu.reg",
            env!("CARGO_MANIFEST_DIR")
        );
        let registry = Registry::from_export(&std::fs::read_to_string(path).unwrap());
        let present = |instance: &str| -> Option<Option<u32>> {
            // The configuration manager takes instance ids in any case.
            match instance.to_ascii_uppercase().as_str() {
                // The card Windows stopped, the integrated GPU, and the root port.
                r"PCI\VEN_10DE&DEV_2684&SUBSYS_16F310DE&REV_A1\4&2B8B1D3C&0&0008" => Some(Some(43)),
                r"PCI\VEN_8086&DEV_A780&SUBSYS_7D751462&REV_04\3&11583659&0&10" => Some(None),
                r"PCI\VEN_8086&DEV_A70D&SUBSYS_7D751462&REV_01\3&11583659&0&08" => Some(None),
                // The card that was in the slot before: long removed.
                _ => None,
            }
        };
        let devices = from_registry(&registry, &present);
        assert_eq!(devices.len(), 3, "{devices:#?}");
        let rtx = devices.iter().find(|d| d.vendor_id == 0x10de).unwrap();
        assert_eq!(rtx.address, "0000:01:00.0");
        assert_eq!((rtx.class, rtx.device_id), (0x030000, Some(0x2684)));
        assert_eq!(rtx.name.as_deref(), Some("NVIDIA GeForce RTX 4090"));
        assert_eq!(rtx.driver.as_deref(), Some("NVIDIA 32.0.15.6094"));
        assert_eq!(rtx.problem, Some(43));
        assert_eq!(
            rtx.vulkan_manifests,
            [PathBuf::from(
                r"C:\Windows\System32\DriverStore\FileRepository\nv_dispi.inf_amd64_8d3b7d1a0a0d3f8e\nv-vk64.json"
            )]
        );
        let igpu = devices
            .iter()
            .find(|d| d.device_id == Some(0xa780))
            .unwrap();
        assert_eq!(igpu.address, "0000:00:02.0");
        assert_eq!(igpu.name.as_deref(), Some("Intel(R) UHD Graphics 770"));
        assert_eq!(igpu.problem, None);
        let port = devices
            .iter()
            .find(|d| d.device_id == Some(0xa70d))
            .unwrap();
        assert_eq!(
            port.class, 0x060400,
            "a bridge, for the inventory to leave out"
        );
        assert_eq!(problem_words(43).0, "device_stopped_code_43");
    }

    #[test]
    fn windows_locations_read_as_pci_addresses() {
        assert_eq!(
            location_address("PCI bus 1, device 0, function 0").as_deref(),
            Some("0000:01:00.0")
        );
        assert_eq!(
            location_address("PCI bus 23, device 12, function 3").as_deref(),
            Some("0000:17:0c.3")
        );
        assert_eq!(location_address("on the motherboard"), None);
        assert_eq!(
            ids_of("VEN_10DE&DEV_2684&SUBSYS_16F310DE&REV_A1"),
            Some((0x10de, Some(0x2684)))
        );
        assert_eq!(ids_of("CC_0300"), None);
    }
}
