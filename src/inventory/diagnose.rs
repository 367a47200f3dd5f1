//! Why a GPU of the machine is not among Vulkan's devices: the most specific cause read from
//! the machine (the OS's problem code, the loader, the kernel driver, MIG, the drivers'
//! manifests and libraries, a container's capabilities), in one sentence with what to do.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Icd, IcdVendor, InventoryGpu, System, vendor_word};
use crate::text::cut;

/// Longest environment value quoted in a message, in characters.
const MAX_QUOTED_CHARS: usize = 200;
/// Longest list of searched places or loader message quoted in a message, in characters.
const MAX_LIST_CHARS: usize = 300;
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
pub(super) fn gpu_label(gpu: &InventoryGpu) -> String {
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

    // No Vulkan driver drives a compute-only accelerator, whatever is installed: advice
    // to install one would send a person after a driver that does not exist.
    if gpu.compute_only {
        return Cause::new(
            "no_graphics_engine",
            format!(
                "Vulkan cannot use {who} because it is a compute-only accelerator (AMD Instinct, CDNA) and no Vulkan driver drives one (Mesa's RADV refuses chips without graphics): kiln cannot load it; `kiln health` still checks its RAS counters, bad pages, sensors and PCIe link, and the maker's own tools (ROCm's rocm-smi and rocm_bandwidth_test, AMD's AGFHC) load it."
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
        && let Some(caps) = lacks_capability(system, "graphics")
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

/// In an NVIDIA container without the driver capability `cap` (`graphics`, `compute`),
/// what the capabilities are; None outside such a container or where it has `cap`.
pub(super) fn lacks_capability(system: &System, cap: &str) -> Option<String> {
    match system.var("NVIDIA_DRIVER_CAPABILITIES") {
        Some(caps) => {
            let has = |c: &str| caps.split(',').any(|x| x.trim() == c);
            if has(cap) || has("all") {
                None
            } else {
                Some(format!(
                    "NVIDIA_DRIVER_CAPABILITIES is \"{}\"",
                    cut(caps, MAX_QUOTED_CHARS)
                ))
            }
        }
        None if system.var("NVIDIA_VISIBLE_DEVICES").is_some()
            && !TOOLKIT_DEFAULT_CAPABILITIES.contains(&cap) =>
        {
            Some(
                "NVIDIA_DRIVER_CAPABILITIES is unset, so the NVIDIA container toolkit's default compute,utility applies"
                    .to_owned(),
            )
        }
        None => None,
    }
}

/// The capabilities the NVIDIA container toolkit gives a container that names none.
const TOOLKIT_DEFAULT_CAPABILITIES: [&str; 2] = ["compute", "utility"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::fixture::*;
    use crate::inventory::*;

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
    fn a_compute_only_instinct_is_said_to_have_no_vulkan_driver_whatever_is_installed() {
        // An MI300X (a processing accelerator) and an MI210 (a display controller by class,
        // CDNA by its id), with RADV installed: no driver will list either.
        for (class, device) in [(0x120000, 0x74a1), (0x038000, 0x740f)] {
            let f = Fixture::new();
            f.pci("0000:05:00.0", class, 0x1002, device, Some("amdgpu"));
            f.icd(
                "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json",
                "libvulkan_radeon.so",
            );
            let cause = f.diagnose(VulkanState::Started);
            assert_eq!(cause.cause, "no_graphics_engine", "{}", cause.message);
            assert!(cause.message.contains("kiln health"), "{}", cause.message);
        }
        // A Radeon (an RDNA card) with no Vulkan driver installed is told to install one.
        let f = Fixture::new();
        f.pci("0000:05:00.0", 0x030000, 0x1002, 0x744c, Some("amdgpu"));
        assert_eq!(f.diagnose(VulkanState::Started).cause, "icd_missing");
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
}
