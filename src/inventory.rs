//! The machine's GPUs, independent of Vulkan: what sysfs PCI and NVML list, matched to the
//! devices Vulkan enumerates and, for a GPU Vulkan cannot see, the most likely cause read from
//! the machine. A GPU that could not be tested is reported with its cause, never replaced by a
//! pass of Mesa's CPU device.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gpu::{self, DeviceInfo};
use crate::telemetry::nvml::{self, NVML_SIGNALS, NvmlGpu};
use crate::telemetry::{Gap, cause, sysfs};
use crate::text::cut;

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

/// Where the PCI name database may live, in the order it is looked for.
const PCI_IDS: &[&str] = &["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];

/// Longest environment value quoted in a message, in characters.
const MAX_QUOTED_CHARS: usize = 200;
/// Longest list of searched places or loader message quoted in a message, in characters.
const MAX_LIST_CHARS: usize = 300;

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

/// A vendor's and a device's name from the PCI database, each when listed.
type DbNames = (Option<String>, Option<String>);

/// Names from the PCI database, read only when a name is needed and cached per id.
struct PciNames<'a> {
    system: &'a System,
    cache: HashMap<(u32, Option<u32>), DbNames>,
}

impl<'a> PciNames<'a> {
    fn new(system: &'a System) -> PciNames<'a> {
        PciNames {
            system,
            cache: HashMap::new(),
        }
    }

    /// "NVIDIA GH100 [H200 SXM 141GB]", else e.g. "NVIDIA GPU 10de:2335" with `what` = "GPU".
    fn name(&mut self, vendor_id: u32, device_id: Option<u32>, what: &str) -> String {
        let (db_vendor, db_device) = self.lookup(vendor_id, device_id);
        let vendor = short_vendor(vendor_id)
            .map(str::to_owned)
            .or(db_vendor)
            .unwrap_or_else(|| format!("vendor 0x{vendor_id:04x}"));
        match (db_device, device_id) {
            // The database often repeats the vendor ("ASPEED Graphics Family").
            (Some(device), _) if device.starts_with(&vendor) => device,
            (Some(device), _) => format!("{vendor} {device}"),
            (None, Some(id)) => format!("{vendor} {what} {vendor_id:04x}:{id:04x}"),
            (None, None) => format!("{vendor} {what}"),
        }
    }

    fn lookup(&mut self, vendor_id: u32, device_id: Option<u32>) -> DbNames {
        let system = self.system;
        self.cache
            .entry((vendor_id, device_id))
            .or_insert_with(|| {
                PCI_IDS
                    .iter()
                    .find_map(|p| scan_pci_ids(&system.path(Path::new(p)), vendor_id, device_id))
                    .map_or((None, None), |(v, d)| (Some(v), d))
            })
            .clone()
    }
}

/// Finds a vendor's name and, within its block, a device's name; reading stops at the end of
/// the vendor's block, since the file is large and ordered by vendor.
fn scan_pci_ids(
    path: &Path,
    vendor_id: u32,
    device_id: Option<u32>,
) -> Option<(String, Option<String>)> {
    let reader = BufReader::new(fs::File::open(path).ok()?);
    let vendor_key = format!("{vendor_id:04x}");
    let device_key = device_id.map(|d| format!("{d:04x}"));
    let mut vendor: Option<String> = None;
    for line in reader.split(b'\n') {
        let Ok(line) = line else {
            break;
        };
        let line = String::from_utf8_lossy(&line);
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        match &vendor {
            None => {
                if !line.starts_with('\t')
                    && let Some((id, name)) = line.split_once("  ")
                    && id.eq_ignore_ascii_case(&vendor_key)
                {
                    if device_key.is_none() {
                        return Some((name.trim().to_owned(), None));
                    }
                    vendor = Some(name.trim().to_owned());
                }
            }
            Some(name) => {
                if !line.starts_with('\t') {
                    return Some((name.clone(), None));
                }
                // Two tabs: a subsystem line, never the device itself.
                if line.starts_with("\t\t") {
                    continue;
                }
                if let Some((id, device)) = line[1..].split_once("  ")
                    && device_key
                        .as_deref()
                        .is_some_and(|k| id.eq_ignore_ascii_case(k))
                {
                    return Some((name.clone(), Some(device.trim().to_owned())));
                }
            }
        }
    }
    vendor.map(|v| (v, None))
}

/// A Vulkan ICD manifest found in the loader's search paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Icd {
    /// The manifest, as the machine names it (`/usr/share/vulkan/icd.d/nvidia_icd.json`).
    pub json_path: PathBuf,
    /// The manifest's `ICD.library_path`, as written.
    pub library_path: String,
    /// Whose driver it is, from the file and library names.
    pub vendor: IcdVendor,
    /// Whether the library loads; the loader's message when it does not.
    pub loads: Result<(), String>,
}

/// Whose Vulkan driver an ICD is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IcdVendor {
    /// NVIDIA's driver (`nvidia_icd.json`, `libGLX_nvidia.so.0`).
    Nvidia,
    /// Mesa's RADV or AMDVLK.
    Amd,
    /// Mesa's ANV or HASVK.
    Intel,
    /// A CPU device (lavapipe, SwiftShader): proves the tool, tests no GPU.
    Cpu,
    /// Any other driver.
    Other,
}

impl IcdVendor {
    /// The driver vendor a GPU of PCI vendor `vendor_id` needs.
    fn of_gpu(vendor_id: u32) -> IcdVendor {
        match vendor_id {
            VENDOR_NVIDIA => IcdVendor::Nvidia,
            VENDOR_AMD => IcdVendor::Amd,
            VENDOR_INTEL => IcdVendor::Intel,
            _ => IcdVendor::Other,
        }
    }

    /// Classifies a file name, or None when it says nothing of the vendor.
    fn of_name(name: &str) -> Option<IcdVendor> {
        let name = name.to_ascii_lowercase();
        let tokens: Vec<&str> = name.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        let token = |t: &str| tokens.contains(&t);
        if token("lvp") || name.contains("lavapipe") || name.contains("swiftshader") {
            Some(IcdVendor::Cpu)
        } else if name.contains("nvidia") {
            Some(IcdVendor::Nvidia)
        } else if name.contains("radeon") || name.contains("amdvlk") || token("amd") {
            Some(IcdVendor::Amd)
        } else if name.contains("intel") || token("anv") {
            Some(IcdVendor::Intel)
        } else {
            None
        }
    }

    /// The library is what runs, so its name decides; the manifest's name is the fallback.
    fn classify(json_path: &Path, library_path: &str) -> IcdVendor {
        let base = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        IcdVendor::of_name(&base(Path::new(library_path)))
            .or_else(|| IcdVendor::of_name(&base(json_path)))
            .unwrap_or(IcdVendor::Other)
    }
}

/// The places the Linux Vulkan loader searches for ICD manifests, as the machine names them.
fn search_paths(system: &System) -> Vec<PathBuf> {
    fn split(list: &str) -> impl Iterator<Item = PathBuf> + '_ {
        list.split(':').filter(|s| !s.is_empty()).map(PathBuf::from)
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(add) = system.var("VK_ADD_DRIVER_FILES") {
        paths.extend(split(add));
    }
    if let Some(files) = system
        .var("VK_DRIVER_FILES")
        .or_else(|| system.var("VK_ICD_FILENAMES"))
    {
        paths.extend(split(files));
    } else {
        let home = system.var("HOME").map(PathBuf::from);
        let icd_d = |base: PathBuf| base.join("vulkan/icd.d");
        let config_home = system
            .var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        paths.extend(config_home.map(icd_d));
        paths.extend(split(system.var("XDG_CONFIG_DIRS").unwrap_or("/etc/xdg")).map(icd_d));
        paths.push(PathBuf::from("/etc/vulkan/icd.d"));
        let data_home = system
            .var("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".local/share")));
        paths.extend(data_home.map(icd_d));
        paths.extend(
            split(
                system
                    .var("XDG_DATA_DIRS")
                    .unwrap_or("/usr/local/share:/usr/share"),
            )
            .map(icd_d),
        );
    }
    let mut unique = Vec::with_capacity(paths.len());
    for p in paths {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique
}

/// Finds the ICD manifests the Vulkan loader would find, and says whether each one's library
/// loads. Also returns the directories or files searched.
pub fn icds(system: &System) -> (Vec<Icd>, Vec<PathBuf>) {
    // Where the OS registers its drivers (Windows' registry), those manifests are the
    // places; elsewhere the loader's search paths.
    let searched =
        crate::platform::vulkan::registered_manifests().unwrap_or_else(|| search_paths(system));
    let mut found: Vec<Icd> = Vec::new();
    for place in &searched {
        let host = system.path(place);
        let manifests: Vec<PathBuf> = if host.is_dir() {
            let mut files: Vec<PathBuf> = fs::read_dir(&host)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| Path::new(n).extension().is_some_and(|x| x == "json"))
                .map(|n| place.join(n))
                .collect();
            files.sort();
            files
        } else if host.is_file() {
            vec![place.clone()]
        } else {
            Vec::new()
        };
        for manifest in manifests {
            if found.iter().any(|i| i.json_path == manifest) {
                continue;
            }
            if let Some(icd) = read_icd(system, &manifest) {
                found.push(icd);
            }
        }
    }
    (found, searched)
}

/// Reads one manifest; an unreadable or malformed one is skipped, as the loader skips it.
fn read_icd(system: &System, json_path: &Path) -> Option<Icd> {
    let text = fs::read_to_string(system.path(json_path)).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let library_path = value.get("ICD")?.get("library_path")?.as_str()?;
    if library_path.is_empty() {
        return None;
    }
    Some(Icd {
        json_path: json_path.to_path_buf(),
        library_path: library_path.to_owned(),
        vendor: IcdVendor::classify(json_path, library_path),
        loads: library_check(system, json_path, library_path),
    })
}

fn library_check(system: &System, json_path: &Path, library_path: &str) -> Result<(), String> {
    let library = Path::new(library_path);
    if library.is_absolute() || library.components().count() > 1 {
        // The loader reads a relative path with a slash as relative to the manifest.
        let logical = if library.is_absolute() {
            library.to_path_buf()
        } else {
            json_path.parent().unwrap_or(Path::new("/")).join(library)
        };
        let host = system.path(&logical);
        if !host.exists() {
            return Err(format!("{} does not exist", logical.display()));
        }
        if system.is_fixture() {
            return Ok(());
        }
        return gpu::library_loads(&host);
    }
    if !system.is_fixture() {
        return gpu::library_loads(library);
    }
    // A fixture cannot load libraries: it lists the bare names that would not load.
    let missing = fs::read_to_string(system.root.join("LIBRARIES_MISSING")).unwrap_or_default();
    if missing.lines().any(|l| l.trim() == library_path) {
        Err(format!(
            "{library_path}: cannot open shared object file: No such file or directory"
        ))
    } else {
        Ok(())
    }
}

/// How starting Vulkan went, as far as the diagnosis needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VulkanState {
    /// Vulkan started and listed devices (maybe not this GPU).
    Started,
    /// The Vulkan loader itself is not installed; the loader's message.
    LoaderMissing(String),
    /// The loader found no driver it could use.
    NoDriver,
    /// Drivers loaded but listed no device.
    NoDevice,
    /// Vulkan failed to start for another reason; the message.
    Failed(String),
}

/// Why a GPU is not visible to Vulkan: a stable cause word and one sentence saying it and
/// what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cause {
    /// Stable word: `vulkan_loader_missing`, `no_kernel_driver`, `mig_enabled`, ...
    pub cause: String,
    /// One sentence: the GPU, what is wrong and what to do.
    pub message: String,
}

impl Cause {
    fn new(cause: &str, message: String) -> Cause {
        Cause {
            cause: cause.to_owned(),
            message,
        }
    }
}

/// "NVIDIA GPU 0000:05:00.0", or by NVML index or name where there is no PCI address.
fn gpu_label(gpu: &InventoryGpu) -> String {
    let vendor = vendor_word(gpu.vendor_id);
    match (&gpu.pci_address, gpu.nvml_index) {
        (Some(address), _) => format!("{vendor} GPU {address}"),
        (None, Some(index)) => format!("{vendor} GPU at NVML index {index}"),
        (None, None) => format!("{vendor} GPU {}", gpu.name),
    }
}

/// The Vulkan driver to install for a vendor, with where it comes from.
fn vulkan_driver_for(vendor: IcdVendor) -> &'static str {
    if let Some(words) = crate::platform::vulkan::MAKERS_DRIVER {
        return words;
    }
    match vendor {
        // Never Mesa for NVIDIA: that installs lavapipe, and kiln would test the CPU instead.
        IcdVendor::Nvidia => {
            "NVIDIA's Vulkan driver (nvidia_icd.json, from the driver's GL/Vulkan package such as libnvidia-gl-<version>)"
        }
        IcdVendor::Amd => {
            "AMD's Vulkan driver (radeon_icd.*.json from mesa-vulkan-drivers, or amd_icd*.json from AMDVLK)"
        }
        IcdVendor::Intel => "Intel's Vulkan driver (intel_icd.*.json from mesa-vulkan-drivers)",
        IcdVendor::Cpu | IcdVendor::Other => "its vendor's Vulkan driver",
    }
}

/// The kernel driver a vendor's GPU needs for Vulkan.
fn kernel_driver_for(vendor: IcdVendor) -> &'static str {
    match vendor {
        IcdVendor::Nvidia => "NVIDIA's driver (nvidia)",
        IcdVendor::Amd => "amdgpu",
        IcdVendor::Intel => "i915 or xe",
        IcdVendor::Cpu | IcdVendor::Other => "its vendor's driver",
    }
}

/// Says why `gpu` is not among the Vulkan devices, most specific cause first, from the
/// machine's state, the ICDs found in `searched` and how starting Vulkan went.
pub fn diagnose(
    system: &System,
    gpu: &InventoryGpu,
    icds: &[Icd],
    searched: &[PathBuf],
    vulkan: &VulkanState,
) -> Cause {
    let vendor = IcdVendor::of_gpu(gpu.vendor_id);
    let vendor_name = vendor_word(gpu.vendor_id);
    let who = gpu_label(gpu);

    // A device the OS itself stopped or cannot drive: nothing above it can use it.
    if let Some(code) = gpu.problem {
        let (word, what) = crate::platform::pci::problem_words(code);
        return Cause::new(word, format!("Vulkan cannot use {who} because {what}."));
    }

    if let VulkanState::LoaderMissing(_) = vulkan {
        return Cause::new(
            "vulkan_loader_missing",
            format!(
                "Vulkan cannot use {who} because the Vulkan loader ({}) is not installed: {}, and {}.",
                crate::platform::vulkan::LOADER,
                crate::platform::vulkan::INSTALL_LOADER,
                vulkan_driver_for(vendor)
            ),
        );
    }

    // A GPU only NVML lists has no sysfs entry, so its missing driver link says nothing;
    // Windows says what is wrong with a driver through its problem code, above.
    if gpu.seen_by.iter().any(|s| s == "sysfs")
        && let Some(cause) = kernel_driver_cause(gpu, vendor, &who)
    {
        return cause;
    }

    if vendor == IcdVendor::Nvidia && gpu.mig_enabled == Some(true) {
        let target = gpu
            .pci_address
            .clone()
            .or_else(|| gpu.nvml_index.map(|i| i.to_string()))
            .unwrap_or_else(|| "<gpu>".into());
        return Cause::new(
            "mig_enabled",
            format!(
                "Vulkan cannot use {who} because MIG is enabled on it and MIG-enabled GPUs expose no graphics APIs: test it with MIG off (`nvidia-smi -i {target} -mig 0` as root, with the GPU idle)."
            ),
        );
    }

    let vendor_icds: Vec<&Icd> = icds.iter().filter(|i| i.vendor == vendor).collect();

    let override_var = ["VK_DRIVER_FILES", "VK_ICD_FILENAMES"]
        .into_iter()
        .find_map(|k| system.var(k).map(|v| (k, v)));
    if let Some((var, value)) = override_var
        && vendor_icds.is_empty()
    {
        return Cause::new(
            "driver_files_override",
            format!(
                "Vulkan cannot use {who} because {var}=\"{}\" limits Vulkan to drivers none of which is {vendor_name}'s: unset {var} or add {}.",
                cut(value, MAX_QUOTED_CHARS),
                vulkan_driver_for(vendor)
            ),
        );
    }

    if vendor == IcdVendor::Nvidia
        && vendor_icds.is_empty()
        && let Some(caps) = missing_graphics_capability(system)
    {
        return Cause::new(
            "container_no_graphics",
            format!(
                "Vulkan cannot use {who} because this container lacks the graphics driver capability ({caps}), and only graphics mounts nvidia_icd.json and libGLX_nvidia.so.0: run the container with NVIDIA_DRIVER_CAPABILITIES=all or add graphics to it."
            ),
        );
    }

    if vendor_icds.is_empty() {
        if vendor == IcdVendor::Other {
            return Cause::new(
                "no_vulkan_driver",
                format!(
                    "Vulkan cannot use {who} because no Vulkan driver for vendor 0x{:04x} is installed: install its vendor's Vulkan driver to test it.",
                    gpu.vendor_id
                ),
            );
        }
        let places: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        return Cause::new(
            "icd_missing",
            format!(
                "Vulkan cannot use {who} because no {vendor_name} Vulkan driver manifest is in the places the Vulkan loader searches ({}): install {}.",
                cut(&places.join(", "), MAX_LIST_CHARS),
                vulkan_driver_for(vendor)
            ),
        );
    }

    let Some(loadable) = vendor_icds.iter().find(|i| i.loads.is_ok()) else {
        let first = vendor_icds[0];
        let error = first.loads.as_ref().err().map_or("", String::as_str);
        let more = match vendor_icds.len() - 1 {
            0 => String::new(),
            n => format!(", and the library of {n} more manifest(s) does not load either"),
        };
        let same_version = if vendor == IcdVendor::Nvidia {
            " of the same version as the kernel module"
        } else {
            ""
        };
        return Cause::new(
            "icd_library_unloadable",
            format!(
                "Vulkan cannot use {who} because {} names {}, which does not load ({}){more}: reinstall {vendor_name}'s Vulkan driver{same_version}.",
                first.json_path.display(),
                first.library_path,
                cut(error, MAX_LIST_CHARS)
            ),
        );
    };

    let nvidia_hint = || {
        if system.path(Path::new("/dev/nvidiactl")).exists() {
            "check that the NVIDIA kernel module and user-space driver are the same version (reboot after a driver upgrade)"
        } else {
            "/dev/nvidiactl is missing, so load the nvidia kernel module or, in a container, pass the /dev/nvidia* device nodes in"
        }
    };
    let started = match vulkan {
        VulkanState::Started => None,
        VulkanState::NoDriver => Some("the Vulkan loader reported no usable driver".to_owned()),
        VulkanState::NoDevice => Some("Vulkan listed no device".to_owned()),
        VulkanState::Failed(m) => Some(format!(
            "Vulkan failed to start ({})",
            cut(m, MAX_LIST_CHARS)
        )),
        VulkanState::LoaderMissing(_) => None,
    };
    if let Some(what) = started {
        let hint = if vendor == IcdVendor::Nvidia {
            nvidia_hint()
        } else {
            "check the kernel log (dmesg) for errors of this GPU"
        };
        return Cause::new(
            "vulkan_no_device",
            format!(
                "Vulkan cannot use {who}: {vendor_name}'s Vulkan driver ({}) is installed and loads but {what}; {hint}.",
                loadable.json_path.display()
            ),
        );
    }
    let hint = if vendor == IcdVendor::Nvidia && !system.path(Path::new("/dev/nvidiactl")).exists()
    {
        format!(", and note that {}", nvidia_hint())
    } else {
        String::new()
    };
    Cause::new(
        "not_enumerated",
        format!(
            "Vulkan did not list {who} although its kernel driver and {vendor_name}'s Vulkan driver ({}) are installed: run `vulkaninfo --summary` and check the kernel log (dmesg) for errors of this GPU{hint}.",
            loadable.json_path.display()
        ),
    )
}

fn kernel_driver_cause(gpu: &InventoryGpu, vendor: IcdVendor, who: &str) -> Option<Cause> {
    let wanted = kernel_driver_for(vendor);
    let cause = match gpu.kernel_driver.as_deref() {
        None => Cause::new(
            "no_kernel_driver",
            format!(
                "Vulkan cannot use {who} because no kernel driver is bound to it: load {wanted} and check the kernel log (dmesg) for why it did not bind."
            ),
        ),
        Some(driver) if driver.contains("vfio") || driver == "pci-stub" => Cause::new(
            "passed_through",
            format!(
                "Vulkan cannot use {who} because it is bound to {driver}, which assigns it to a virtual machine: test it inside that machine, or bind it back to {wanted} to test it here."
            ),
        ),
        Some("nouveau") if vendor == IcdVendor::Nvidia => Cause::new(
            "nouveau",
            format!(
                "Vulkan cannot use {who} because it is driven by nouveau, not NVIDIA's driver: install NVIDIA's driver and its Vulkan driver to test it."
            ),
        ),
        Some("radeon") if vendor == IcdVendor::Amd => Cause::new(
            "old_radeon_driver",
            format!(
                "Vulkan cannot use {who} because it is driven by radeon, which has no Vulkan: bind it to amdgpu (older cards need amdgpu.si_support=1 or amdgpu.cik_support=1 on the kernel command line)."
            ),
        ),
        Some(_) => return None,
    };
    Some(cause)
}

/// In an NVIDIA container without the graphics capability, what the capabilities are.
fn missing_graphics_capability(system: &System) -> Option<String> {
    match system.var("NVIDIA_DRIVER_CAPABILITIES") {
        Some(caps) => {
            let has = |c: &str| caps.split(',').any(|x| x.trim() == c);
            if has("graphics") || has("all") {
                None
            } else {
                Some(format!(
                    "NVIDIA_DRIVER_CAPABILITIES is \"{}\"",
                    cut(caps, MAX_QUOTED_CHARS)
                ))
            }
        }
        None if system.var("NVIDIA_VISIBLE_DEVICES").is_some() => Some(
            "NVIDIA_DRIVER_CAPABILITIES is unset, so the NVIDIA container toolkit's default compute,utility applies"
                .to_owned(),
        ),
        None => None,
    }
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

    /// A fixture machine: a temporary root with PCI devices, ICD manifests and files.
    struct Fixture {
        dir: tempfile::TempDir,
        env: BTreeMap<String, String>,
    }

    impl Fixture {
        fn new() -> Fixture {
            Fixture {
                dir: tempfile::tempdir().unwrap(),
                env: BTreeMap::new(),
            }
        }

        fn host(&self, path: &str) -> PathBuf {
            self.dir.path().join(path.trim_start_matches('/'))
        }

        fn write(&self, path: &str, text: &str) {
            let host = self.host(path);
            fs::create_dir_all(host.parent().unwrap()).unwrap();
            fs::write(host, text).unwrap();
        }

        fn pci(&self, address: &str, class: u32, vendor: u32, device: u32, driver: Option<&str>) {
            let dir = format!("/sys/bus/pci/devices/{address}");
            self.write(&format!("{dir}/class"), &format!("0x{class:06x}\n"));
            self.write(&format!("{dir}/vendor"), &format!("0x{vendor:04x}\n"));
            self.write(&format!("{dir}/device"), &format!("0x{device:04x}\n"));
            if let Some(driver) = driver {
                let target = self.host(&format!("/sys/bus/pci/drivers/{driver}"));
                fs::create_dir_all(&target).unwrap();
                std::os::unix::fs::symlink(target, self.host(&format!("{dir}/driver"))).unwrap();
            }
        }

        fn icd(&self, path: &str, library: &str) {
            self.write(
                path,
                &format!(
                    r#"{{"file_format_version": "1.0.0", "ICD": {{"library_path": "{library}", "api_version": "1.3.0"}}}}"#
                ),
            );
        }

        fn set(&mut self, key: &str, value: &str) {
            self.env.insert(key.into(), value.into());
        }

        fn system(&self) -> System {
            System {
                root: self.dir.path().to_path_buf(),
                env: self.env.clone(),
                nvml: false,
            }
        }

        /// Diagnoses the first GPU of the inventory, after `adjust` has changed it.
        fn diagnose_with(&self, vulkan: VulkanState, adjust: impl Fn(&mut InventoryGpu)) -> Cause {
            let system = self.system();
            let mut gpu = read(&system).gpus.remove(0);
            adjust(&mut gpu);
            let (icds, searched) = icds(&system);
            diagnose(&system, &gpu, &icds, &searched, &vulkan)
        }

        fn diagnose(&self, vulkan: VulkanState) -> Cause {
            self.diagnose_with(vulkan, |_| {})
        }
    }

    const HGX_ADDRESSES: [&str; 8] = [
        "0000:18:00.0",
        "0000:2a:00.0",
        "0000:3a:00.0",
        "0000:5d:00.0",
        "0000:9a:00.0",
        "0000:ab:00.0",
        "0000:ba:00.0",
        "0000:db:00.0",
    ];

    fn nvidia_gpu(driver: Option<&str>) -> Fixture {
        let f = Fixture::new();
        f.pci("0000:05:00.0", 0x030200, 0x10de, 0x2335, driver);
        f
    }

    fn with_nvidia_icd(f: &Fixture) {
        f.icd(
            "/usr/share/vulkan/icd.d/nvidia_icd.json",
            "libGLX_nvidia.so.0",
        );
    }

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

    fn json_names(icds: &[Icd]) -> Vec<String> {
        icds.iter()
            .map(|i| i.json_path.display().to_string())
            .collect()
    }

    #[test]
    fn icd_search_follows_the_loaders_default_places() {
        let mut f = Fixture::new();
        f.set("HOME", "/home/me");
        f.icd(
            "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json",
            "/usr/lib/libvulkan_radeon.so",
        );
        f.icd(
            "/usr/local/share/vulkan/icd.d/lvp_icd.x86_64.json",
            "libvulkan_lvp.so",
        );
        f.icd("/etc/vulkan/icd.d/nvidia_icd.json", "libGLX_nvidia.so.0");
        f.icd(
            "/home/me/.local/share/vulkan/icd.d/intel_icd.x86_64.json",
            "libvulkan_intel.so",
        );
        f.icd("/opt/elsewhere/vulkan/icd.d/other_icd.json", "libother.so");
        f.write("/usr/share/vulkan/icd.d/broken.json", "{ not json");
        f.write("/usr/share/vulkan/icd.d/no_library.json", r#"{"ICD": {}}"#);
        f.write("/usr/share/vulkan/icd.d/readme.txt", "not a manifest");
        let (icds, searched) = icds(&f.system());
        let searched: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            searched,
            [
                "/home/me/.config/vulkan/icd.d",
                "/etc/xdg/vulkan/icd.d",
                "/etc/vulkan/icd.d",
                "/home/me/.local/share/vulkan/icd.d",
                "/usr/local/share/vulkan/icd.d",
                "/usr/share/vulkan/icd.d",
            ]
        );
        assert_eq!(
            json_names(&icds),
            [
                "/etc/vulkan/icd.d/nvidia_icd.json",
                "/home/me/.local/share/vulkan/icd.d/intel_icd.x86_64.json",
                "/usr/local/share/vulkan/icd.d/lvp_icd.x86_64.json",
                "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json",
            ]
        );
        let vendors: Vec<IcdVendor> = icds.iter().map(|i| i.vendor).collect();
        assert_eq!(
            vendors,
            [
                IcdVendor::Nvidia,
                IcdVendor::Intel,
                IcdVendor::Cpu,
                IcdVendor::Amd
            ]
        );
        // The radeon library does not exist in the fixture.
        assert!(
            icds[3]
                .loads
                .as_ref()
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(icds[0].loads.is_ok());
    }

    #[test]
    fn icd_search_honours_xdg_dirs() {
        let mut f = Fixture::new();
        f.set("XDG_CONFIG_HOME", "/cfg");
        f.set("XDG_CONFIG_DIRS", "/xdg1:/xdg2");
        f.set("XDG_DATA_HOME", "/data");
        f.set("XDG_DATA_DIRS", "/share1::/share2");
        f.icd("/xdg2/vulkan/icd.d/nvidia_icd.json", "libGLX_nvidia.so.0");
        f.icd("/share2/vulkan/icd.d/amd_icd64.json", "/opt/amdvlk64.so");
        f.icd(
            "/usr/share/vulkan/icd.d/intel_icd.x86_64.json",
            "libvulkan_intel.so",
        );
        let (icds, searched) = icds(&f.system());
        let searched: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            searched,
            [
                "/cfg/vulkan/icd.d",
                "/xdg1/vulkan/icd.d",
                "/xdg2/vulkan/icd.d",
                "/etc/vulkan/icd.d",
                "/data/vulkan/icd.d",
                "/share1/vulkan/icd.d",
                "/share2/vulkan/icd.d",
            ]
        );
        assert_eq!(
            json_names(&icds),
            [
                "/xdg2/vulkan/icd.d/nvidia_icd.json",
                "/share2/vulkan/icd.d/amd_icd64.json",
            ]
        );
        assert_eq!(icds[1].vendor, IcdVendor::Amd);
    }

    #[test]
    fn vk_driver_files_replaces_the_search() {
        let mut f = Fixture::new();
        f.icd(
            "/usr/share/vulkan/icd.d/nvidia_icd.json",
            "libGLX_nvidia.so.0",
        );
        f.icd("/custom/lvp.json", "libvulkan_lvp.so");
        f.icd("/more/icd.d/swiftshader.json", "./libvk_swiftshader.so");
        f.write("/more/icd.d/libvk_swiftshader.so", "");
        f.icd("/added/intel.json", "libvulkan_intel.so");
        f.set("VK_DRIVER_FILES", "/custom/lvp.json:/more/icd.d");
        f.set("VK_ADD_DRIVER_FILES", "/added/intel.json");
        let (icds, searched) = icds(&f.system());
        assert_eq!(
            searched,
            [
                PathBuf::from("/added/intel.json"),
                PathBuf::from("/custom/lvp.json"),
                PathBuf::from("/more/icd.d"),
            ]
        );
        assert_eq!(
            json_names(&icds),
            [
                "/added/intel.json",
                "/custom/lvp.json",
                "/more/icd.d/swiftshader.json",
            ]
        );
        // A relative library path is relative to its manifest, and there it exists.
        assert_eq!(icds[2].vendor, IcdVendor::Cpu);
        assert!(icds[2].loads.is_ok());

        // The older variable does the same when the newer one is unset.
        f.env.remove("VK_DRIVER_FILES");
        f.env.remove("VK_ADD_DRIVER_FILES");
        f.set("VK_ICD_FILENAMES", "/custom/lvp.json");
        let (icds, _) = super::icds(&f.system());
        assert_eq!(json_names(&icds), ["/custom/lvp.json"]);
    }

    #[test]
    fn bare_library_names_load_unless_listed_missing() {
        let f = Fixture::new();
        with_nvidia_icd(&f);
        f.icd(
            "/usr/share/vulkan/icd.d/intel_icd.x86_64.json",
            "libvulkan_intel.so",
        );
        f.write("/LIBRARIES_MISSING", "libGLX_nvidia.so.0\n");
        let (icds, _) = icds(&f.system());
        assert!(icds[0].loads.is_ok());
        assert!(
            icds[1]
                .loads
                .as_ref()
                .unwrap_err()
                .contains("libGLX_nvidia.so.0")
        );
    }

    #[test]
    fn icd_vendors_come_from_library_then_file_names() {
        let classify = |json: &str, library: &str| IcdVendor::classify(Path::new(json), library);
        assert_eq!(
            classify("nvidia_icd.json", "libGLX_nvidia.so.0"),
            IcdVendor::Nvidia
        );
        assert_eq!(
            classify("radeon_icd.i686.json", "/usr/lib/i386/libvulkan_radeon.so"),
            IcdVendor::Amd
        );
        assert_eq!(
            classify("amd_icd64.json", "/opt/amdgpu-pro/lib/x86_64/amdvlk64.so"),
            IcdVendor::Amd
        );
        assert_eq!(
            classify("intel_hasvk_icd.x86_64.json", "libvulkan_intel_hasvk.so"),
            IcdVendor::Intel
        );
        assert_eq!(
            classify("lvp_icd.x86_64.json", "libvulkan_lvp.so"),
            IcdVendor::Cpu
        );
        assert_eq!(
            classify("vk_swiftshader_icd.json", "./libvk_swiftshader.so"),
            IcdVendor::Cpu
        );
        assert_eq!(
            classify("nouveau_icd.x86_64.json", "libvulkan_nouveau.so"),
            IcdVendor::Other
        );
        assert_eq!(
            classify("virtio_icd.x86_64.json", "libvulkan_virtio.so"),
            IcdVendor::Other
        );
    }

    #[test]
    fn a_missing_loader_comes_first_and_never_suggests_mesa_for_nvidia() {
        let f = nvidia_gpu(None);
        let cause = f.diagnose(VulkanState::LoaderMissing(
            "libvulkan.so.1: not found".into(),
        ));
        assert_eq!(cause.cause, "vulkan_loader_missing");
        assert!(cause.message.contains("0000:05:00.0") && cause.message.contains("libvulkan1"));
        assert!(!cause.message.contains("mesa"), "{}", cause.message);
    }

    #[test]
    fn kernel_driver_causes() {
        for (vendor, driver, word) in [
            (0x10de, None, "no_kernel_driver"),
            (0x10de, Some("vfio-pci"), "passed_through"),
            (0x1002, Some("pci-stub"), "passed_through"),
            (0x10de, Some("nouveau"), "nouveau"),
            (0x1002, Some("radeon"), "old_radeon_driver"),
        ] {
            let f = Fixture::new();
            f.pci("0000:05:00.0", 0x030000, vendor, 0x1234, driver);
            // No ICD at all: the kernel driver is the more specific cause.
            let cause = f.diagnose(VulkanState::NoDriver);
            assert_eq!(cause.cause, word, "{driver:?}: {}", cause.message);
            assert!(cause.message.contains("0000:05:00.0"));
        }
    }

    #[test]
    fn mig_beats_a_missing_icd() {
        let f = nvidia_gpu(Some("nvidia"));
        let cause = f.diagnose_with(VulkanState::Started, |g| g.mig_enabled = Some(true));
        assert_eq!(cause.cause, "mig_enabled");
        assert!(cause.message.contains("MIG off"));
        let cause = f.diagnose_with(VulkanState::Started, |g| g.mig_enabled = Some(false));
        assert_eq!(cause.cause, "icd_missing");
    }

    #[test]
    fn a_driver_files_override_without_the_vendors_icd() {
        let mut f = nvidia_gpu(Some("nvidia"));
        with_nvidia_icd(&f);
        f.icd("/custom/lvp.json", "libvulkan_lvp.so");
        f.set("VK_DRIVER_FILES", "/custom/lvp.json");
        let cause = f.diagnose(VulkanState::Started);
        assert_eq!(cause.cause, "driver_files_override");
        assert!(
            cause
                .message
                .contains("VK_DRIVER_FILES=\"/custom/lvp.json\"")
        );
        // Listing the vendor's ICD is no override problem.
        f.set(
            "VK_DRIVER_FILES",
            "/custom/lvp.json:/usr/share/vulkan/icd.d/nvidia_icd.json",
        );
        assert_eq!(f.diagnose(VulkanState::Started).cause, "not_enumerated");
    }

    #[test]
    fn a_container_without_graphics_is_named_for_nvidia_only() {
        let mut f = Fixture::new();
        f.pci("0000:05:00.0", 0x030200, 0x10de, 0x2335, Some("nvidia"));
        f.pci("0000:06:00.0", 0x030000, 0x1002, 0x744c, Some("amdgpu"));
        f.set("NVIDIA_VISIBLE_DEVICES", "all");
        let system = f.system();
        let inventory = read(&system);
        let (icds, searched) = icds(&system);
        let cause = |gpu: &InventoryGpu, system: &System| {
            diagnose(system, gpu, &icds, &searched, &VulkanState::Started)
        };
        let nvidia = cause(&inventory.gpus[0], &system);
        assert_eq!(nvidia.cause, "container_no_graphics");
        assert!(nvidia.message.contains("default compute,utility"));
        assert_eq!(cause(&inventory.gpus[1], &system).cause, "icd_missing");

        f.set("NVIDIA_DRIVER_CAPABILITIES", "compute,utility");
        let nvidia = cause(&inventory.gpus[0], &f.system());
        assert_eq!(nvidia.cause, "container_no_graphics");
        assert!(nvidia.message.contains("\"compute,utility\""));

        f.set("NVIDIA_DRIVER_CAPABILITIES", "compute,graphics,utility");
        assert_eq!(cause(&inventory.gpus[0], &f.system()).cause, "icd_missing");
        f.set("NVIDIA_DRIVER_CAPABILITIES", "all");
        assert_eq!(cause(&inventory.gpus[0], &f.system()).cause, "icd_missing");
    }

    #[test]
    fn a_missing_icd_names_the_expected_file_and_the_places_searched() {
        let f = nvidia_gpu(Some("nvidia"));
        f.icd(
            "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
            "libvulkan_lvp.so",
        );
        let cause = f.diagnose(VulkanState::Started);
        assert_eq!(cause.cause, "icd_missing");
        assert!(cause.message.contains("nvidia_icd.json"));
        assert!(cause.message.contains("/usr/share/vulkan/icd.d"));
        assert!(!cause.message.contains("mesa"));
    }

    #[test]
    fn an_icd_whose_library_does_not_load() {
        let f = nvidia_gpu(Some("nvidia"));
        with_nvidia_icd(&f);
        f.write("/LIBRARIES_MISSING", "libGLX_nvidia.so.0\n");
        let cause = f.diagnose(VulkanState::NoDriver);
        assert_eq!(cause.cause, "icd_library_unloadable");
        assert!(cause.message.contains("nvidia_icd.json"));
        assert!(cause.message.contains("cannot open shared object file"));
    }

    #[test]
    fn a_loadable_driver_that_lists_no_device() {
        let f = nvidia_gpu(Some("nvidia"));
        with_nvidia_icd(&f);
        let cause = f.diagnose(VulkanState::NoDevice);
        assert_eq!(cause.cause, "vulkan_no_device");
        assert!(cause.message.contains("/dev/nvidia"));
        f.write("/dev/nvidiactl", "");
        let cause = f.diagnose(VulkanState::Failed("VK_ERROR_INITIALIZATION_FAILED".into()));
        assert_eq!(cause.cause, "vulkan_no_device");
        assert!(cause.message.contains("same version"));
    }

    #[test]
    fn everything_installed_but_not_listed() {
        let f = Fixture::new();
        f.pci("0000:00:02.0", 0x030000, 0x8086, 0x56a0, Some("i915"));
        f.icd(
            "/usr/share/vulkan/icd.d/intel_icd.x86_64.json",
            "libvulkan_intel.so",
        );
        let cause = f.diagnose(VulkanState::Started);
        assert_eq!(cause.cause, "not_enumerated");
        assert!(cause.message.contains("vulkaninfo --summary"));
    }

    #[test]
    fn another_vendor_without_a_driver() {
        let f = Fixture::new();
        f.pci("0000:08:00.0", 0x030000, 0x1ed5, 0x0100, Some("mtgpu"));
        f.icd(
            "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
            "libvulkan_lvp.so",
        );
        let cause = f.diagnose(VulkanState::Started);
        assert_eq!(cause.cause, "no_vulkan_driver");
        assert!(cause.message.contains("vendor 0x1ed5"));
    }

    #[test]
    fn a_gpu_windows_stopped_is_named_with_its_code_before_anything_vulkan_says() {
        let root = tempfile::tempdir().unwrap();
        let system = System {
            root: root.path().to_path_buf(),
            env: BTreeMap::new(),
            nvml: false,
        };
        let mut gpu = inventory_gpu(Some("0000:01:00.0"), 0x10de, 0x2684, None);
        gpu.seen_by = vec!["windows".into()];
        gpu.problem = Some(43);
        let cause = diagnose(&system, &gpu, &[], &[], &VulkanState::Started);
        assert_eq!(cause.cause, "device_stopped_code_43");
        assert!(
            cause.message.starts_with(
                "Vulkan cannot use NVIDIA GPU 0000:01:00.0 because Windows stopped it"
            ) && cause.message.contains("Code 43"),
            "{}",
            cause.message
        );
        // Code 12: the firmware's setting, said as such.
        gpu.problem = Some(12);
        let cause = diagnose(&system, &gpu, &[], &[], &VulkanState::Started);
        assert!(
            cause.message.contains("Above 4G Decoding"),
            "{}",
            cause.message
        );
        // Without a problem, the diagnosis goes on to Vulkan's drivers.
        gpu.problem = None;
        let cause = diagnose(&system, &gpu, &[], &[], &VulkanState::Started);
        assert_eq!(cause.cause, "icd_missing");
    }

    fn inventory_gpu(
        address: Option<&str>,
        vendor_id: u32,
        device_id: u32,
        uuid: Option<&str>,
    ) -> InventoryGpu {
        InventoryGpu {
            pci_address: address.map(str::to_owned),
            vendor_id,
            device_id: Some(device_id),
            name: String::new(),
            uuid: uuid.map(str::to_owned),
            nvml_index: None,
            kernel_driver: None,
            mig_enabled: None,
            seen_by: vec!["sysfs".into()],
            problem: None,
        }
    }

    fn inventory_of(gpus: Vec<InventoryGpu>) -> Inventory {
        Inventory {
            gpus,
            ..Inventory::default()
        }
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
    fn library_loading_reports_the_loaders_message() {
        assert!(gpu::library_loads(Path::new("libc.so.6")).is_ok());
        let error = gpu::library_loads(Path::new("libkiln_no_such_library.so.0")).unwrap_err();
        assert!(error.contains("libkiln_no_such_library.so.0"), "{error}");
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
