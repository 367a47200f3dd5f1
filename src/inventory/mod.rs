//! The machine's GPUs, independent of Vulkan: what sysfs PCI and NVML list, matched to the
//! devices Vulkan enumerates and, for a GPU Vulkan cannot see, the most likely cause read from
//! the machine. A GPU that could not be tested is reported with its cause, never replaced by a
//! pass of Mesa's CPU device.

mod diagnose;
mod fixture;
pub mod frameworks;
mod icd;
mod pci_names;

pub use diagnose::{Cause, VulkanState, diagnose};
pub use icd::{Icd, IcdVendor, icds};
use pci_names::PciNames;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gpu::DeviceInfo;
use crate::telemetry::nvml::{self, NVML_SIGNALS, NvmlGpu};
use crate::telemetry::{Gap, cause, sysfs};

const VENDOR_NVIDIA: u32 = 0x10de;
const VENDOR_AMD: u32 = 0x1002;
const VENDOR_INTEL: u32 = 0x8086;

/// The environment variables the inventory and the diagnosis read.
const ENV_VARS: &[&str] = &[
    "HOME",
    "VK_DRIVER_FILES",
    "VK_ICD_FILENAMES",
    "VK_ADD_DRIVER_FILES",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_VISIBLE_DEVICES",
    "PATH",
];

/// Display controllers that belong to a BMC or a hypervisor: vendor id, short name and role.
/// Every HGX server has an ASPEED BMC display, and it must never count as an untested GPU.
const NOT_GPUS: &[(u32, &str, &str)] = &[
    (0x1a03, "ASPEED", "BMC display"),
    (0x102b, "Matrox", "BMC display"),
    (0x1050, "Nuvoton", "BMC display"),
    (0x126f, "Silicon Motion", "BMC display"),
    (0x1013, "Cirrus Logic", "emulated display"),
    (0x1234, "QEMU", "emulated display"),
    (0x15ad, "VMware", "emulated display"),
    (0x1414, "Microsoft Hyper-V", "emulated display"),
    (0x1af4, "Red Hat", "emulated display"),
    (0x1b36, "Red Hat", "emulated display"),
];
/// Where kiln reads the machine: `/` normally; tests point it at a fixture tree.
#[derive(Debug, Clone)]
pub struct System {
    /// The directory that stands for `/`.
    pub root: PathBuf,
    /// The environment variables the diagnosis reads, as the process saw them.
    pub env: BTreeMap<String, String>,
    /// Whether NVML is asked for the GPUs it lists. A live process always asks (a sysfs
    /// fixture under `KILN_SYSTEM_ROOT` changes where sysfs is read, nothing else); the
    /// inventory's own fixture tests do not, so that the machine's NVML stays out of them.
    pub nvml: bool,
}

impl System {
    /// The real machine: root from env `KILN_SYSTEM_ROOT` (a test hook) else `/`; `env`
    /// captured from the process for the variables the inventory and diagnosis read.
    pub fn from_env() -> System {
        let root = sysfs::system_root();
        let env = ENV_VARS
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        System {
            root,
            env,
            nvml: true,
        }
    }

    /// True when `root` is not `/` (a fixture): libraries are then not loaded.
    pub fn is_fixture(&self) -> bool {
        self.root != Path::new("/")
    }

    /// Where the machine's path `path` lies on this host.
    fn path(&self, path: &Path) -> PathBuf {
        if !self.is_fixture() {
            return path.to_path_buf();
        }
        self.root.join(path.strip_prefix("/").unwrap_or(path))
    }

    /// A variable's value; an empty one counts as unset, as the Vulkan loader and the
    /// NVIDIA container toolkit treat it.
    fn var(&self, key: &str) -> Option<&str> {
        self.env
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }
}

/// One GPU of the machine, as sysfs and NVML see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InventoryGpu {
    /// PCI address `0000:05:00.0`, lower case; None for a GPU NVML lists without one.
    pub pci_address: Option<String>,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// PCI device id, when known.
    pub device_id: Option<u32>,
    /// NVML's name, else the PCI database's, else vendor and ids (`NVIDIA GPU 10de:2335`).
    pub name: String,
    /// NVML's UUID (`GPU-xxxxxxxx-...`), when known.
    pub uuid: Option<String>,
    /// NVML's index, when NVML lists the GPU.
    pub nvml_index: Option<u32>,
    /// The kernel driver bound to it (`nvidia`, `amdgpu`, `i915`, `vfio-pci`, ...), per sysfs.
    pub kernel_driver: Option<String>,
    /// Whether MIG mode is on, per NVML; None where unknown or without MIG.
    pub mig_enabled: Option<bool>,
    /// Which sources list it: `sysfs` (or `windows`, Windows' device tree), `nvml`.
    pub seen_by: Vec<String>,
    /// The problem code Windows' Device Manager shows for it (`43`), where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<u32>,
    /// A compute-only accelerator with no graphics (an AMD Instinct of the CDNA
    /// generations): no Vulkan driver drives one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compute_only: bool,
}

impl InventoryGpu {
    /// Its UUID as reports name devices: the body without `GPU-`, empty where unknown.
    pub fn uuid_body(&self) -> String {
        self.uuid
            .as_deref()
            .map(|u| u.trim_start_matches("GPU-").to_owned())
            .unwrap_or_default()
    }
}

/// AMD's compute-only accelerators (CDNA 1 to 3: Instinct MI100, MI200, MI300) by PCI
/// device id, for those that enumerate as display controllers rather than as processing
/// accelerators (class 0x12): no graphics engine, so no Vulkan driver drives them (Mesa's
/// RADV refuses GFX9 chips without graphics; AMDVLK supported Radeon cards only).
const AMD_COMPUTE_ONLY: [u32; 12] = [
    0x738c, 0x738e, // MI100
    0x7408, 0x740c, 0x740f, 0x7410, // MI200
    0x74a0, 0x74a1, 0x74a2, 0x74a5, 0x74a9, 0x74b5, // MI300
];

/// Whether a PCI device of `class`, `vendor_id` and `device_id` is a compute-only
/// accelerator that no Vulkan driver drives.
fn is_compute_only(class: u32, vendor_id: u32, device_id: Option<u32>) -> bool {
    vendor_id == VENDOR_AMD
        && (class >> 16 == 0x12 || device_id.is_some_and(|d| AMD_COMPUTE_ONLY.contains(&d)))
}

/// The machine's GPUs, the display controllers set aside, and what could not be read.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Inventory {
    /// The GPUs, sorted by PCI address (those without one last, by NVML index).
    pub gpus: Vec<InventoryGpu>,
    /// Display controllers that are not GPUs to test (BMC and emulated VGA), each as
    /// "0000:02:00.0 ASPEED ... (BMC display)".
    pub ignored: Vec<String>,
    /// What could not be read (no sysfs PCI tree, NVML's reason), one sentence each.
    pub notes: Vec<String>,
}

/// The inventory's GPUs as the live telemetry sources' targets, each by its place in the
/// list: what `kiln health` and `kiln bench telemetry` watch, whether or not Vulkan sees them.
pub fn targets(gpus: &[InventoryGpu]) -> Vec<crate::telemetry::Target> {
    gpus.iter()
        .enumerate()
        .map(|(index, g)| crate::telemetry::Target {
            index,
            name: g.name.clone(),
            uuid: g
                .uuid
                .as_deref()
                .map(|u| u.trim_start_matches("GPU-").to_ascii_lowercase()),
            pci_address: g.pci_address.clone(),
            nvml_index: g.nvml_index,
            luid: None,
        })
        .collect()
}

/// Lists the machine's GPUs from sysfs and NVML (where [`System::nvml`] says to ask it),
/// merged by PCI address.
pub fn read(system: &System) -> Inventory {
    let mut inventory = Inventory::default();
    let mut names = PciNames::new(system);
    read_pci(system, &mut names, &mut inventory);
    if system.nvml {
        merge_nvml(&mut inventory, nvml::inventory());
    }
    for gpu in inventory.gpus.iter_mut().filter(|g| g.name.is_empty()) {
        gpu.name = names.name(gpu.vendor_id, gpu.device_id, "GPU");
    }
    inventory.gpus.sort_by(|a, b| {
        (a.pci_address.is_none(), &a.pci_address, a.nvml_index).cmp(&(
            b.pci_address.is_none(),
            &b.pci_address,
            b.nvml_index,
        ))
    });
    inventory.ignored.sort();
    inventory
}

/// The GPUs of the OS's PCI device list ([`crate::platform::pci`]): display controllers
/// and AMD's accelerators, the BMC and emulated displays set aside.
fn read_pci(system: &System, names: &mut PciNames, inventory: &mut Inventory) {
    let devices = match crate::platform::pci::devices(&system.root) {
        Ok(devices) => devices,
        Err(why) => {
            inventory
                .notes
                .push(format!("{why}, so GPUs are known only through NVML."));
            return;
        }
    };
    for device in devices {
        let (class, vendor_id, device_id) = (device.class, device.vendor_id, device.device_id);
        let display = class >> 16 == 0x03;
        // Instinct MI300 enumerates as a processing accelerator; other vendors' accelerators
        // (Habana, ...) have no Vulkan and are not GPUs to test.
        let amd_accelerator = class >> 8 == 0x1200 && vendor_id == VENDOR_AMD;
        if !display && !amd_accelerator {
            continue;
        }
        if let Some((_, _, role)) = NOT_GPUS.iter().find(|(v, _, _)| *v == vendor_id) {
            let name = device
                .name
                .clone()
                .unwrap_or_else(|| names.name(vendor_id, device_id, "display"));
            inventory
                .ignored
                .push(format!("{} {name} ({role})", device.address));
            continue;
        }
        inventory.gpus.push(InventoryGpu {
            pci_address: Some(device.address),
            vendor_id,
            device_id,
            name: device.name.unwrap_or_default(),
            uuid: None,
            nvml_index: None,
            kernel_driver: device.driver,
            mig_enabled: None,
            seen_by: vec![crate::platform::pci::SOURCE.into()],
            problem: device.problem,
            compute_only: is_compute_only(class, vendor_id, device_id),
        });
    }
}

/// Adds what NVML lists to the sysfs GPUs, matching by PCI address.
fn merge_nvml(inventory: &mut Inventory, nvml: Result<Vec<NvmlGpu>, Gap>) {
    let list = match nvml {
        Ok(list) => list,
        Err(gap) => {
            let nvidia_seen = inventory.gpus.iter().any(|g| g.vendor_id == VENDOR_NVIDIA);
            // No NVML on a machine without NVIDIA GPUs is how it should be, not a gap.
            if gap.cause.as_deref() != Some(cause::NVML_MISSING) || nvidia_seen {
                let suffix = format!(": no {NVML_SIGNALS}");
                let why = gap.message.strip_suffix(&suffix).unwrap_or(&gap.message);
                inventory
                    .notes
                    .push(format!("NVML could not list the GPUs: {why}."));
            }
            return;
        }
    };
    let mut unopened = Vec::new();
    for g in list {
        if g.uuid.is_none() && g.pci_address.is_none() {
            unopened.push(g.index);
            continue;
        }
        let known = g.pci_address.as_deref().and_then(|address| {
            inventory
                .gpus
                .iter_mut()
                .find(|x| x.pci_address.as_deref() == Some(address))
        });
        match known {
            Some(gpu) => {
                gpu.name = g.name.unwrap_or_default();
                gpu.uuid = g.uuid;
                gpu.nvml_index = Some(g.index);
                gpu.mig_enabled = g.mig_enabled;
                gpu.device_id = gpu.device_id.or(g.pci_device_id);
                gpu.seen_by.push("nvml".into());
            }
            None => inventory.gpus.push(nvml_only(g)),
        }
    }
    // An NVIDIA GPU sysfs lists but NVML did not place is most likely one NVML could not
    // open: listing both would count one GPU as two.
    let mut unplaced = inventory
        .gpus
        .iter()
        .filter(|x| x.vendor_id == VENDOR_NVIDIA && x.nvml_index.is_none())
        .count();
    for index in unopened {
        inventory.notes.push(format!(
            "NVML could not open the GPU at NVML index {index}, which is how a GPU that has fallen off the bus shows; check the kernel log for Xid 79."
        ));
        if unplaced > 0 {
            unplaced -= 1;
        } else {
            inventory.gpus.push(nvml_only(NvmlGpu {
                index,
                uuid: None,
                name: None,
                pci_address: None,
                pci_device_id: None,
                mig_enabled: None,
            }));
        }
    }
}

fn nvml_only(g: NvmlGpu) -> InventoryGpu {
    InventoryGpu {
        pci_address: g.pci_address,
        vendor_id: VENDOR_NVIDIA,
        device_id: g.pci_device_id,
        name: g.name.unwrap_or_default(),
        uuid: g.uuid,
        nvml_index: Some(g.index),
        kernel_driver: None,
        mig_enabled: g.mig_enabled,
        seen_by: vec!["nvml".into()],
        problem: None,
        compute_only: false,
    }
}

/// The short vendor name used in kiln's output, where the vendor is one kiln knows.
fn short_vendor(vendor_id: u32) -> Option<&'static str> {
    match vendor_id {
        VENDOR_NVIDIA => Some("NVIDIA"),
        VENDOR_AMD => Some("AMD"),
        VENDOR_INTEL => Some("Intel"),
        v => NOT_GPUS
            .iter()
            .find(|(id, _, _)| *id == v)
            .map(|(_, name, _)| *name),
    }
}

/// The vendor as messages name it: `NVIDIA`, `AMD`, `Intel`, else `vendor 0x....`.
fn vendor_word(vendor_id: u32) -> String {
    short_vendor(vendor_id).map_or_else(|| format!("vendor 0x{vendor_id:04x}"), str::to_owned)
}
/// Pairs every inventory GPU with the Vulkan device that is it (the device's `index` field),
/// if any: by UUID, else by PCI address, else, for Vulkan devices without a PCI address, by
/// vendor and device id in order. Each Vulkan device is used once; CPU devices never match.
pub fn match_vulkan(inventory: &Inventory, devices: &[DeviceInfo]) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..devices.len())
        .filter(|&i| devices[i].kind.is_gpu())
        .collect();
    order.sort_by_key(|&i| devices[i].index);
    let mut taken = vec![false; devices.len()];
    let mut out = vec![None; inventory.gpus.len()];
    let mut pass = |same: &dyn Fn(&InventoryGpu, &DeviceInfo) -> bool| {
        for (slot, gpu) in inventory.gpus.iter().enumerate() {
            if out[slot].is_some() {
                continue;
            }
            if let Some(&i) = order.iter().find(|&&i| !taken[i] && same(gpu, &devices[i])) {
                taken[i] = true;
                out[slot] = Some(devices[i].index);
            }
        }
    };
    pass(&|gpu, device| {
        gpu.uuid.as_deref().is_some_and(|uuid| {
            let body = uuid.strip_prefix("GPU-").unwrap_or(uuid);
            body.eq_ignore_ascii_case(&device.device_uuid)
        })
    });
    pass(
        &|gpu, device| match (&gpu.pci_address, &device.pci_address) {
            (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
            _ => false,
        },
    );
    pass(&|gpu, device| {
        device.pci_address.is_none()
            && device.vendor_id == gpu.vendor_id
            && gpu.device_id == Some(device.device_id)
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::DeviceKind;
    use crate::inventory::fixture::*;

    #[test]
    fn hgx_node_lists_eight_gpus_and_ignores_the_bmc() {
        let f = Fixture::new();
        // Reverse order: the inventory sorts by address whatever the directory order.
        for address in HGX_ADDRESSES.iter().rev() {
            f.pci(address, 0x030200, 0x10de, 0x2335, Some("nvidia"));
        }
        f.pci("0000:02:00.0", 0x030000, 0x1a03, 0x2000, Some("ast"));
        // The GPUs' audio functions and an NVSwitch are not GPUs.
        f.pci("0000:18:00.1", 0x040300, 0x10de, 0x22a3, None);
        f.pci("0000:c0:00.0", 0x068000, 0x10de, 0x22a3, Some("nvidia"));
        let inventory = read(&f.system());
        let addresses: Vec<&str> = inventory
            .gpus
            .iter()
            .filter_map(|g| g.pci_address.as_deref())
            .collect();
        assert_eq!(addresses, HGX_ADDRESSES);
        assert!(
            inventory
                .gpus
                .iter()
                .all(|g| g.kernel_driver.as_deref() == Some("nvidia")
                    && g.seen_by == ["sysfs"]
                    && g.device_id == Some(0x2335))
        );
        assert_eq!(inventory.ignored.len(), 1);
        assert!(
            inventory.ignored[0].starts_with("0000:02:00.0 ASPEED")
                && inventory.ignored[0].ends_with("(BMC display)"),
            "{:?}",
            inventory.ignored
        );
        assert!(inventory.notes.is_empty());
    }

    #[test]
    fn mi300_accelerator_counts_and_habana_does_not() {
        let f = Fixture::new();
        f.pci("0000:11:00.0", 0x120000, 0x1002, 0x74a1, Some("amdgpu"));
        f.pci("0000:22:00.0", 0x120000, 0x1da3, 0x1020, Some("habanalabs"));
        f.pci("0000:33:00.0", 0x038000, 0x8086, 0x0bd5, Some("xe"));
        f.pci("0000:44:00.0", 0x030000, 0x1234, 0x1111, Some("bochs-drm"));
        let inventory = read(&f.system());
        let ids: Vec<u32> = inventory.gpus.iter().map(|g| g.vendor_id).collect();
        assert_eq!(ids, [0x1002, 0x8086]);
        assert_eq!(inventory.ignored.len(), 1);
        assert!(inventory.ignored[0].contains("(emulated display)"));
    }

    #[test]
    fn names_come_from_pci_ids_else_vendor_and_ids() {
        let f = Fixture::new();
        f.pci("0000:05:00.0", 0x030200, 0x10de, 0x2335, Some("nvidia"));
        f.pci("0000:06:00.0", 0x030200, 0x10de, 0x9999, Some("nvidia"));
        f.pci("0000:07:00.0", 0x030000, 0x1002, 0x744c, Some("amdgpu"));
        f.pci("0000:08:00.0", 0x030000, 0x1ed5, 0x0100, None);
        f.pci("0000:09:00.0", 0x030000, 0x1eee, 0x0001, None);
        f.pci("0000:02:00.0", 0x030000, 0x1a03, 0x2000, Some("ast"));
        f.write(
            "/usr/share/hwdata/pci.ids",
            "# pci.ids fixture\n\
             10de  NVIDIA Corporation\n\
             \t2335  GH100 [H200 SXM 141GB]\n\
             \t\t10de 18be  H200 SXM 141GB\n\
             1002  Advanced Micro Devices, Inc. [AMD/ATI]\n\
             1a03  ASPEED Technology, Inc.\n\
             \t2000  ASPEED Graphics Family\n\
             1ed5  Moore Threads Technology Co.,Ltd\n\
             \t0100  MTT S80\n\
             \t744c  not AMD's device\n",
        );
        let names: Vec<String> = read(&f.system()).gpus.into_iter().map(|g| g.name).collect();
        assert_eq!(
            names,
            [
                "NVIDIA GH100 [H200 SXM 141GB]",
                "NVIDIA GPU 10de:9999",
                "AMD GPU 1002:744c",
                "Moore Threads Technology Co.,Ltd MTT S80",
                "vendor 0x1eee GPU 1eee:0001",
            ]
        );
        let ignored = read(&f.system()).ignored;
        assert_eq!(
            ignored,
            ["0000:02:00.0 ASPEED Graphics Family (BMC display)"]
        );
    }

    #[test]
    fn a_missing_pci_tree_is_a_note() {
        let f = Fixture::new();
        let inventory = read(&f.system());
        assert!(inventory.gpus.is_empty());
        assert_eq!(inventory.notes.len(), 1);
        assert!(inventory.notes[0].contains("/sys/bus/pci/devices"));
    }

    #[test]
    fn nvml_merges_by_pci_address() {
        let f = Fixture::new();
        f.pci("0000:05:00.0", 0x030200, 0x10de, 0x2335, Some("nvidia"));
        f.pci("0000:06:00.0", 0x030200, 0x10de, 0x2335, Some("nvidia"));
        let system = f.system();
        let mut inventory = Inventory::default();
        read_pci(&system, &mut PciNames::new(&system), &mut inventory);
        let listed = NvmlGpu {
            index: 0,
            uuid: Some("GPU-12345678-aaaa-bbbb-cccc-1234567890ab".into()),
            name: Some("NVIDIA H200".into()),
            pci_address: Some("0000:05:00.0".into()),
            pci_device_id: Some(0x2335),
            mig_enabled: Some(true),
        };
        let unopened = NvmlGpu {
            index: 1,
            uuid: None,
            name: None,
            pci_address: None,
            pci_device_id: None,
            mig_enabled: None,
        };
        let elsewhere = NvmlGpu {
            index: 2,
            pci_address: Some("0000:99:00.0".into()),
            uuid: Some("GPU-0".into()),
            ..listed.clone()
        };
        merge_nvml(&mut inventory, Ok(vec![listed, unopened, elsewhere]));
        assert_eq!(inventory.gpus.len(), 3, "{inventory:?}");
        let at = |address: &str| {
            inventory
                .gpus
                .iter()
                .find(|g| g.pci_address.as_deref() == Some(address))
                .unwrap()
        };
        let first = at("0000:05:00.0");
        assert_eq!(first.name, "NVIDIA H200");
        assert_eq!(first.nvml_index, Some(0));
        assert_eq!(first.mig_enabled, Some(true));
        assert_eq!(first.seen_by, ["sysfs", "nvml"]);
        assert_eq!(at("0000:06:00.0").seen_by, ["sysfs"]);
        assert_eq!(at("0000:99:00.0").seen_by, ["nvml"]);
        assert!(inventory.notes[0].contains("NVML index 1"));

        let mut inventory = Inventory::default();
        read_pci(&system, &mut PciNames::new(&system), &mut inventory);
        merge_nvml(
            &mut inventory,
            Err(nvml::explain(
                &nvml_wrapper::error::NvmlError::DriverNotLoaded,
            )),
        );
        assert_eq!(
            inventory.notes,
            ["NVML could not list the GPUs: the NVIDIA kernel driver is not loaded."]
        );
    }

    #[test]
    fn no_nvml_without_nvidia_gpus_is_no_note() {
        let f = Fixture::new();
        f.pci("0000:07:00.0", 0x030000, 0x1002, 0x744c, Some("amdgpu"));
        let system = f.system();
        let mut inventory = Inventory::default();
        read_pci(&system, &mut PciNames::new(&system), &mut inventory);
        let missing = Gap {
            device: None,
            message: format!("NVML is not available: no {NVML_SIGNALS}"),
            missing: vec!["nvml".into()],
            cause: Some("nvml_missing".into()),
        };
        merge_nvml(&mut inventory, Err(missing));
        assert!(inventory.notes.is_empty());
    }

    #[test]
    fn vulkan_devices_match_by_uuid_first() {
        let inventory = inventory_of(vec![
            inventory_gpu(
                Some("0000:05:00.0"),
                0x10de,
                0x2335,
                Some("GPU-AAAAAAAA-0000-0000-0000-000000000001"),
            ),
            inventory_gpu(
                Some("0000:06:00.0"),
                0x10de,
                0x2335,
                Some("GPU-aaaaaaaa-0000-0000-0000-000000000002"),
            ),
        ]);
        // Vulkan's PCI addresses are deliberately crossed: the UUID decides.
        let devices = [
            DeviceInfo::for_tests(
                0,
                DeviceKind::DiscreteGpu,
                0x10de,
                0x2335,
                "aaaaaaaa-0000-0000-0000-000000000002",
                Some("0000:05:00.0"),
            ),
            DeviceInfo::for_tests(
                1,
                DeviceKind::DiscreteGpu,
                0x10de,
                0x2335,
                "aaaaaaaa-0000-0000-0000-000000000001",
                Some("0000:06:00.0"),
            ),
        ];
        assert_eq!(match_vulkan(&inventory, &devices), [Some(1), Some(0)]);
    }

    #[test]
    fn vulkan_devices_match_by_pci_address() {
        let inventory = inventory_of(vec![
            inventory_gpu(Some("0000:05:00.0"), 0x1002, 0x744c, None),
            inventory_gpu(Some("0000:06:00.0"), 0x1002, 0x744c, None),
            inventory_gpu(Some("0000:07:00.0"), 0x1002, 0x744c, None),
        ]);
        let devices = [
            DeviceInfo::for_tests(
                0,
                DeviceKind::DiscreteGpu,
                0x1002,
                0x744c,
                "00000000-0000-0000-0000-000000000000",
                Some("0000:07:00.0"),
            ),
            DeviceInfo::for_tests(
                1,
                DeviceKind::DiscreteGpu,
                0x1002,
                0x744c,
                "00000000-0000-0000-0000-000000000000",
                Some("0000:05:00.0"),
            ),
        ];
        assert_eq!(match_vulkan(&inventory, &devices), [Some(1), None, Some(0)]);
    }

    #[test]
    fn vulkan_devices_without_an_address_pair_by_ids_in_order() {
        let inventory = inventory_of(vec![
            inventory_gpu(Some("0000:05:00.0"), 0x8086, 0x56a0, None),
            inventory_gpu(Some("0000:06:00.0"), 0x1002, 0x744c, None),
            inventory_gpu(Some("0000:07:00.0"), 0x8086, 0x56a0, None),
        ]);
        let devices = [
            DeviceInfo::for_tests(
                0,
                DeviceKind::Cpu,
                0x10005,
                0,
                "00000000-0000-0000-0000-000000000000",
                None,
            ),
            DeviceInfo::for_tests(1, DeviceKind::DiscreteGpu, 0x8086, 0x56a0, "1", None),
            DeviceInfo::for_tests(2, DeviceKind::DiscreteGpu, 0x8086, 0x56a0, "2", None),
            // An address that is not the GPU's: no pairing by ids for it.
            DeviceInfo::for_tests(
                3,
                DeviceKind::DiscreteGpu,
                0x1002,
                0x744c,
                "3",
                Some("0000:99:00.0"),
            ),
        ];
        assert_eq!(match_vulkan(&inventory, &devices), [Some(1), None, Some(2)]);
    }

    #[test]
    fn a_cpu_device_never_matches() {
        let inventory = inventory_of(vec![inventory_gpu(
            Some("0000:05:00.0"),
            0x10de,
            0x2335,
            Some("GPU-6d657361-3232-2e33-2e36-000000000000"),
        )]);
        let devices = [DeviceInfo::for_tests(
            0,
            DeviceKind::Cpu,
            0x10de,
            0x2335,
            "6d657361-3232-2e33-2e36-000000000000",
            Some("0000:05:00.0"),
        )];
        assert_eq!(match_vulkan(&inventory, &devices), [None]);
    }
    #[test]
    fn the_real_machine_reads_without_failing() {
        let system = System {
            root: PathBuf::from("/"),
            env: System::from_env().env,
            nvml: true,
        };
        assert!(!system.is_fixture());
        let inventory = read(&system);
        let (icds, searched) = icds(&system);
        assert!(!searched.is_empty());
        for gpu in &inventory.gpus {
            let cause = diagnose(&system, gpu, &icds, &searched, &VulkanState::Started);
            assert!(!cause.cause.is_empty() && !cause.message.is_empty());
        }
    }
}
