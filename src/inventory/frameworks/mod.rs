//! Why a framework cannot see a GPU, beyond what Vulkan needs: the driver's CUDA version
//! against each installed framework's runtime, the framework's build, NVML's version
//! mismatch, the kernel module, a container's devices and capabilities, a GPU assigned to a
//! virtual machine or held by a display server that passthrough must wait on, and a link
//! narrower than the card. Everything is read from files; kiln
//! never imports or runs a framework or a Python interpreter.
//!
//! Sources: NVIDIA's CUDA Compatibility guide (minor version compatibility from CUDA 11 on:
//! an application built with CUDA 11.x or 12.x runs on a driver of the same major version,
//! and fails with `cudaErrorInsufficientDriver` on an older major); the NVIDIA Container
//! Toolkit's documentation (`NVIDIA_VISIBLE_DEVICES`, `NVIDIA_DRIVER_CAPABILITIES`, default
//! `compute,utility`); the NVML API reference (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`); the
//! PCI Express base specifications (per-lane rates and line codes, as
//! [`sysfs::theoretical_gbps`] computes them).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::diagnose::lacks_capability;
use super::{InventoryGpu, System, VENDOR_AMD, VENDOR_NVIDIA};
use crate::telemetry::record::Reading;
use crate::telemetry::{signals, sysfs};

mod python;
mod tests;

use python::small_text;
pub use python::{PythonEnv, installed, installed_in, python_envs};

/// A CUDA version, major and minor (`12.4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CudaVersion {
    /// Major version (`12`).
    pub major: u32,
    /// Minor version (`4`).
    pub minor: u32,
}

impl CudaVersion {
    /// `12.1`, `11.8`, `12` (minor 0); None for anything else.
    pub fn parse(text: &str) -> Option<CudaVersion> {
        let mut parts = text.trim().split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = match parts.next() {
            Some(m) => m.parse().ok()?,
            None => 0,
        };
        Some(CudaVersion { major, minor })
    }

    /// NVML's `nvmlSystemGetCudaDriverVersion` integer (`12040` is 12.4).
    pub fn from_nvml(version: i32) -> Option<CudaVersion> {
        let v = u32::try_from(version).ok().filter(|&v| v > 0)?;
        Some(CudaVersion {
            major: v / 1000,
            minor: (v % 1000) / 10,
        })
    }
}

impl std::fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// A framework kiln knows how to read the build of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Framework {
    /// PyTorch (`torch/version.py`).
    Pytorch,
    /// JAX's CUDA plugin (`jax_cuda12_plugin`, `jax_cuda12_pjrt`) or an old `jaxlib+cudaNN`.
    Jax,
    /// onnxruntime-gpu (`onnxruntime/capi/build_and_package_info.py`).
    Onnxruntime,
    /// TensorFlow (`tensorflow/python/platform/build_info.py`).
    Tensorflow,
}

impl Framework {
    /// Its name as people write it.
    pub fn word(self) -> &'static str {
        match self {
            Framework::Pytorch => "PyTorch",
            Framework::Jax => "JAX",
            Framework::Onnxruntime => "onnxruntime-gpu",
            Framework::Tensorflow => "TensorFlow",
        }
    }
}

/// What GPU runtime a framework's build was made for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "runtime", content = "version")]
pub enum Runtime {
    /// A CUDA build, for this CUDA version.
    Cuda(CudaVersion),
    /// A CUDA build of which only the major version is known (JAX's plugin names).
    CudaMajor(u32),
    /// A ROCm build, for this HIP version.
    Hip(String),
    /// Built without any GPU runtime.
    CpuOnly,
}

/// One framework installed in one Python environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Installed {
    /// Which framework.
    pub framework: Framework,
    /// Its version, where its files say it (`2.1.0+cu121`).
    pub version: Option<String>,
    /// The runtime it was built for.
    pub runtime: Runtime,
    /// The site-packages directory it lies in.
    pub site_packages: PathBuf,
    /// The GPU architectures it carries code for (`sm_80`, `sm_90`, `compute_90`), where
    /// its files say (PyTorch's `torch.cuda.get_arch_list()`, read from its library).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archs: Option<Vec<String>>,
}

impl Installed {
    /// "PyTorch 2.1.0+cu121 in /venv/lib/python3.11/site-packages".
    fn label(&self) -> String {
        let version = self
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        format!(
            "{}{version} in {}",
            self.framework.word(),
            self.site_packages.display()
        )
    }
}

/// Why NVML could not start, as far as these diagnoses need it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvmlState {
    /// NVML started.
    Up,
    /// The library and the kernel module differ in version (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`).
    VersionMismatch,
    /// NVML is missing or failed for another reason.
    Down,
}

impl NvmlState {
    /// From the cause word of NVML's start-up gap ([`crate::telemetry::cause`]), None when
    /// it started.
    pub fn from_cause(cause: Option<&str>) -> NvmlState {
        match cause {
            None => NvmlState::Up,
            Some(c) if c == crate::telemetry::cause::VERSION_MISMATCH => NvmlState::VersionMismatch,
            Some(_) => NvmlState::Down,
        }
    }
}

/// What the diagnoses read beyond the GPU itself: NVML's state, the CUDA version the driver
/// supports, and the frameworks installed.
#[derive(Debug, Clone)]
pub struct Facts {
    /// How starting NVML went.
    pub nvml: NvmlState,
    /// The newest CUDA version the driver supports, per NVML.
    pub cuda_driver: Option<CudaVersion>,
    /// The frameworks found in the Python environments.
    pub installed: Vec<Installed>,
    /// Each GPU's compute capability (major, minor) by NVML index, per NVML.
    pub compute_capability: std::collections::BTreeMap<u32, (u32, u32)>,
}

/// The kind of a reason a framework cannot (or may not) use a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosisKind {
    /// A framework built for a newer major CUDA version than the driver supports.
    CudaTooNew,
    /// A framework built for a newer minor CUDA version of the driver's major version: it
    /// runs under minor version compatibility, without PTX JIT compilation.
    CudaMinorNewer,
    /// A framework built without any GPU runtime.
    CpuOnlyBuild,
    /// A framework without code for the card's compute capability.
    ArchMissing,
    /// A framework built for the other vendor's runtime (ROCm on NVIDIA, CUDA on AMD).
    OtherVendorBuild,
    /// NVML's library and the kernel module differ in version: driver updated, no reboot.
    DriverLibraryMismatch,
    /// The NVIDIA kernel module is not loaded.
    KernelModuleNotLoaded,
    /// A container that was not given the NVIDIA devices.
    ContainerWithoutGpu,
    /// A container without the NVIDIA driver's compute capability.
    ContainerWithoutCompute,
    /// The GPU is bound to vfio-pci or pci-stub, for a virtual machine.
    PassedThrough,
    /// A display server holds the GPU on a machine set up to pass GPUs to virtual machines.
    DisplayServerHolds,
    /// The PCIe link has fewer lanes than the card.
    NarrowLink,
}

impl DiagnosisKind {
    /// Its stable word, as the JSON names it (`cuda_too_new`).
    pub fn word(self) -> &'static str {
        match self {
            DiagnosisKind::CudaTooNew => "cuda_too_new",
            DiagnosisKind::CudaMinorNewer => "cuda_minor_newer",
            DiagnosisKind::CpuOnlyBuild => "cpu_only_build",
            DiagnosisKind::ArchMissing => "arch_missing",
            DiagnosisKind::OtherVendorBuild => "other_vendor_build",
            DiagnosisKind::DriverLibraryMismatch => "driver_library_mismatch",
            DiagnosisKind::KernelModuleNotLoaded => "kernel_module_not_loaded",
            DiagnosisKind::ContainerWithoutGpu => "container_without_gpu",
            DiagnosisKind::ContainerWithoutCompute => "container_without_compute",
            DiagnosisKind::PassedThrough => "passed_through",
            DiagnosisKind::DisplayServerHolds => "display_server_holds",
            DiagnosisKind::NarrowLink => "narrow_link",
        }
    }
}

/// One reason a framework cannot use a GPU: its kind, and one sentence with the fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The kind.
    pub kind: DiagnosisKind,
    /// What is wrong, in words (no fix).
    pub said: String,
    /// What to do.
    pub fix: String,
}

impl Diagnosis {
    fn new(kind: DiagnosisKind, said: String, fix: String) -> Diagnosis {
        Diagnosis { kind, said, fix }
    }

    /// The one sentence: what is wrong, then the fix.
    pub fn sentence(&self) -> String {
        format!("{}: {}.", self.said, self.fix)
    }
}

/// Every reason a framework cannot use `gpu` on `system`, given `facts`; empty when all is
/// well.
pub fn diagnose(system: &System, gpu: &InventoryGpu, facts: &Facts) -> Vec<Diagnosis> {
    let who = super::diagnose::gpu_label(gpu);
    let mut out = Vec::new();
    let nvidia = gpu.vendor_id == VENDOR_NVIDIA;
    let driver = gpu.kernel_driver.as_deref();

    if let Some(d) = driver.filter(|d| d.contains("vfio") || *d == "pci-stub") {
        out.push(Diagnosis::new(
            DiagnosisKind::PassedThrough,
            format!("No framework on this host can use {who}: it is bound to {d}, which assigns it to a virtual machine"),
            format!("use it inside that machine, or unbind it from {d} and bind it to {} to use it here", if nvidia { "nvidia" } else { "its vendor's driver" }),
        ));
    }

    if let Some(d) = display_server_holds(system, gpu, &who) {
        out.push(d);
    }
    if nvidia {
        nvidia_driver(system, gpu, facts, &who, &mut out);
    }
    frameworks(gpu, facts, &who, &mut out);
    if let Some(d) = narrow_link(system, gpu, &who) {
        out.push(d);
    }
    out
}

/// Display servers and display managers by their process name as `/proc/PID/comm` gives
/// it (cut at 15 characters by the kernel).
const DISPLAY_SERVERS: &[&str] = &[
    "Xorg",
    "X",
    "Xwayland",
    "gnome-shell",
    "kwin_wayland",
    "kwin_x11",
    "sway",
    "weston",
    "mutter",
    "gdm-x-session",
    "gdm-wayland-ses",
    "sddm-greeter",
    "lightdm",
];

/// A display server holding `gpu` open on a machine set up for passthrough (the vfio-pci
/// module loaded): unbinding the GPU from its driver waits on every process that holds it.
/// Read from `/proc/PID/fd` of the display servers alone; where their file tables cannot be
/// read (another user's, kiln not root), nothing is said.
fn display_server_holds(system: &System, gpu: &InventoryGpu, who: &str) -> Option<Diagnosis> {
    let address = gpu.pci_address.as_deref()?;
    let driver = gpu.kernel_driver.as_deref()?;
    if driver.contains("vfio")
        || driver == "pci-stub"
        || !system.path(Path::new("/sys/module/vfio_pci")).exists()
    {
        return None;
    }
    let nodes = device_nodes(system, address);
    if nodes.is_empty() {
        return None;
    }
    let mut pids: Vec<(u32, PathBuf)> = std::fs::read_dir(system.path(Path::new("/proc")))
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
        .collect();
    pids.sort();
    for (pid, dir) in pids {
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        let comm = comm.trim();
        if !DISPLAY_SERVERS.contains(&comm) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
            continue;
        };
        let holds = fds
            .filter_map(Result::ok)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| nodes.contains(&target));
        if holds {
            return Some(Diagnosis::new(
                DiagnosisKind::DisplayServerHolds,
                format!("{who} is held open by {comm} (pid {pid}), a display server, on a machine set up to pass GPUs to virtual machines (vfio-pci is loaded): unbinding it for a virtual machine waits until that process lets go"),
                "stop the display manager (`sudo systemctl stop display-manager`) or move the desktop to another GPU before binding it to vfio-pci".to_owned(),
            ));
        }
    }
    None
}

/// The device nodes of the GPU at `address`, as the machine names them: its DRM nodes
/// (`/dev/dri/card1`, `/dev/dri/renderD128`) and, on NVIDIA's driver, `/dev/nvidiaN`.
fn device_nodes(system: &System, address: &str) -> Vec<PathBuf> {
    let mut nodes: Vec<PathBuf> = std::fs::read_dir(
        system.path(&Path::new("/sys/bus/pci/devices").join(address).join("drm")),
    )
    .into_iter()
    .flatten()
    .filter_map(Result::ok)
    .filter_map(|e| e.file_name().to_str().map(str::to_owned))
    .filter(|n| n.starts_with("card") || n.starts_with("renderD"))
    .map(|n| Path::new("/dev/dri").join(n))
    .collect();
    let information = system.path(
        &Path::new("/proc/driver/nvidia/gpus")
            .join(address)
            .join("information"),
    );
    if let Some(text) = small_text(&information) {
        let minor = text.lines().find_map(|l| {
            l.trim()
                .strip_prefix("Device Minor:")
                .and_then(|m| m.trim().parse::<u32>().ok())
        });
        if let Some(m) = minor {
            nodes.push(PathBuf::from(format!("/dev/nvidia{m}")));
        }
    }
    nodes
}

/// The NVIDIA driver's own state: NVML's mismatch, the module, a container's devices.
fn nvidia_driver(
    system: &System,
    gpu: &InventoryGpu,
    facts: &Facts,
    who: &str,
    out: &mut Vec<Diagnosis>,
) {
    if facts.nvml == NvmlState::VersionMismatch {
        out.push(Diagnosis::new(
            DiagnosisKind::DriverLibraryMismatch,
            format!("No CUDA framework can use {who}: NVML reports \"Driver/library version mismatch\", the user-space driver was updated but the loaded kernel module is the old one"),
            "reboot (or unload and reload the nvidia kernel modules with the GPU idle)".to_owned(),
        ));
        return;
    }
    // NVML answering means the module is loaded and the container has the devices.
    if facts.nvml == NvmlState::Up {
        return;
    }
    let driver = gpu.kernel_driver.as_deref();
    let passed = driver.is_some_and(|d| d.contains("vfio") || d == "pci-stub");
    let module_loaded = system.path(Path::new("/sys/module/nvidia")).exists()
        || system
            .path(Path::new("/proc/driver/nvidia/version"))
            .exists();
    if gpu.seen_by.iter().any(|s| s == "sysfs")
        && driver != Some("nvidia")
        && !passed
        && !module_loaded
    {
        let by = driver.map_or_else(String::new, |d| format!(" ({d} drives it)"));
        out.push(Diagnosis::new(
            DiagnosisKind::KernelModuleNotLoaded,
            format!("No CUDA framework can use {who}: the nvidia kernel module is not loaded{by}"),
            "load it (`sudo modprobe nvidia`; after a kernel update, rebuild it with DKMS or reinstall the driver for the running kernel, and with Secure Boot on, enrol its signing key) and check the kernel log (dmesg) for why it did not load".to_owned(),
        ));
        return;
    }
    let in_container = system.path(Path::new("/.dockerenv")).exists()
        || system.path(Path::new("/run/.containerenv")).exists()
        || system.var("NVIDIA_VISIBLE_DEVICES").is_some();
    if !in_container || passed {
        return;
    }
    let visible = system.var("NVIDIA_VISIBLE_DEVICES");
    let none_given = visible.is_some_and(|v| {
        let v = v.trim();
        v == "void" || v == "none"
    });
    if none_given || !system.path(Path::new("/dev/nvidiactl")).exists() {
        let why = match visible {
            Some(v) if none_given => format!("NVIDIA_VISIBLE_DEVICES is \"{v}\""),
            _ => "/dev/nvidiactl is missing here".to_owned(),
        };
        out.push(Diagnosis::new(
            DiagnosisKind::ContainerWithoutGpu,
            format!("No framework in this container can use {who}: the container was not given the NVIDIA GPUs ({why})"),
            "start it with the GPUs (`docker run --gpus all`, `--device nvidia.com/gpu=all` with CDI, or a `nvidia.com/gpu` resource limit in Kubernetes)".to_owned(),
        ));
        return;
    }
    if let Some(caps) = lacks_capability(system, "compute") {
        out.push(Diagnosis::new(
            DiagnosisKind::ContainerWithoutCompute,
            format!("No CUDA framework in this container can use {who}: the container lacks the compute driver capability ({caps}), and only compute mounts libcuda.so"),
            "run the container with NVIDIA_DRIVER_CAPABILITIES=compute,utility (or all)".to_owned(),
        ));
    }
}

/// Each installed framework's build against the GPU and the driver.
fn frameworks(gpu: &InventoryGpu, facts: &Facts, who: &str, out: &mut Vec<Diagnosis>) {
    let nvidia = gpu.vendor_id == VENDOR_NVIDIA;
    let amd = gpu.vendor_id == VENDOR_AMD;
    if !nvidia && !amd {
        return;
    }
    let vendor = if nvidia { "NVIDIA" } else { "AMD" };
    for f in &facts.installed {
        let label = f.label();
        let cuda_build = matches!(f.runtime, Runtime::Cuda(_) | Runtime::CudaMajor(_));
        match &f.runtime {
            Runtime::CpuOnly => out.push(Diagnosis::new(
                DiagnosisKind::CpuOnlyBuild,
                format!("{label} is built without CUDA or ROCm, so it cannot use {who}"),
                format!(
                    "install its {} build (PyTorch's selector at pytorch.org names the index URL)",
                    if nvidia { "CUDA" } else { "ROCm" }
                ),
            )),
            Runtime::Hip(hip) if nvidia => out.push(Diagnosis::new(
                DiagnosisKind::OtherVendorBuild,
                format!("{label} is built for ROCm (HIP {hip}), so it cannot use {who}"),
                "install its CUDA build".to_owned(),
            )),
            _ if amd && cuda_build => out.push(Diagnosis::new(
                DiagnosisKind::OtherVendorBuild,
                format!("{label} is built for CUDA, so it cannot use {who}, an {vendor} GPU"),
                "install its ROCm build".to_owned(),
            )),
            _ => {}
        }
        if !nvidia {
            continue;
        }
        if let (Some(archs), Some(cc)) = (
            &f.archs,
            gpu.nvml_index
                .and_then(|i| facts.compute_capability.get(&i)),
        ) && !runs_on(archs, *cc)
        {
            let (major, minor) = cc;
            out.push(Diagnosis::new(
                DiagnosisKind::ArchMissing,
                format!(
                    "{label} carries code for {} but not for {who}'s compute capability {major}.{minor} (sm_{major}{minor}), so its kernels cannot run there (\"no kernel image is available for execution on the device\")",
                    archs.join(" ")
                ),
                format!("install a build of it that lists sm_{major}{minor} (a newer release, or the build for a newer CUDA)"),
            ));
        }
        let Some(driver) = facts.cuda_driver else {
            continue;
        };
        let (built, major) = match &f.runtime {
            Runtime::Cuda(v) => (v.to_string(), v.major),
            Runtime::CudaMajor(m) => (format!("{m}.x"), *m),
            _ => continue,
        };
        // Before CUDA 11 there is no minor version compatibility: every newer version
        // needs a newer driver.
        let too_new = major > driver.major
            || matches!(f.runtime, Runtime::Cuda(v) if v.major < 11 && v > driver);
        if too_new {
            out.push(Diagnosis::new(
                DiagnosisKind::CudaTooNew,
                format!("{label} is built for CUDA {built} but the driver supports CUDA {driver} at most, so it cannot use {who} (cudaErrorInsufficientDriver)"),
                format!("update the NVIDIA driver to one that supports CUDA {major}, or install the framework's build for CUDA {}", driver.major),
            ));
        } else if let Runtime::Cuda(v) = f.runtime
            && v > driver
        {
            out.push(Diagnosis::new(
                DiagnosisKind::CudaMinorNewer,
                format!("{label} is built for CUDA {v}, newer than the driver's CUDA {driver}: it runs on {who} only under CUDA's minor version compatibility, which cannot JIT-compile PTX, so kernels not prebuilt for this card fail"),
                format!("update the NVIDIA driver to one that supports CUDA {v}, or install the framework's build for CUDA {driver} or older"),
            ));
        }
    }
}

/// Whether code for `archs` runs on a card of compute capability `cc`, by PyTorch's own
/// check (`torch.cuda._check_cubins`): machine code of the same major version runs on any
/// minor of it; PTX (`compute_XY`) of this capability or older is compiled for the card by
/// the driver.
fn runs_on(archs: &[String], cc: (u32, u32)) -> bool {
    let number = |a: &str, prefix: &str| -> Option<u32> {
        let digits: String = a
            .strip_prefix(prefix)?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let card = cc.0 * 10 + cc.1;
    archs.iter().any(|a| {
        number(a, "sm_").is_some_and(|n| n / 10 == cc.0)
            || number(a, "compute_").is_some_and(|n| n <= card)
    })
}

/// A link with fewer lanes than the card, and what that costs at the card's generation.
fn narrow_link(system: &System, gpu: &InventoryGpu, who: &str) -> Option<Diagnosis> {
    let address = gpu.pci_address.as_deref()?;
    if !gpu.seen_by.iter().any(|s| s == "sysfs") {
        return None;
    }
    let dir = system.path(&Path::new("/sys/bus/pci/devices").join(address));
    let link = sysfs::read_link(&dir);
    let n = |k: &str| link.get(k).and_then(Reading::number).map(|v| v as u32);
    let width = n(signals::PCIE_WIDTH.name)?;
    let card = n(signals::PCIE_WIDTH_MAX.name)?;
    // Width 0 is a link that is down or a device asleep: not a width.
    if width == 0 || width >= card {
        return None;
    }
    let slot = n(signals::PCIE_SLOT_WIDTH_MAX.name);
    let generation = match (
        n(signals::PCIE_GEN_MAX.name),
        n(signals::PCIE_SLOT_GEN_MAX.name),
    ) {
        (Some(c), Some(s)) => Some(c.min(s)),
        (c, s) => c.or(s),
    };
    let cost = generation.and_then(|g| {
        let full = sysfs::theoretical_gbps(g, card)?;
        let now = sysfs::theoretical_gbps(g, width)?;
        Some(format!(
            ", {:.1} of {:.1} GB/s per direction at PCIe Gen{g} ({:.1} GB/s lost)",
            now,
            full,
            full - now
        ))
    });
    let cost = cost.unwrap_or_default();
    let (said, fix) = match slot {
        Some(s) if s < card => (
            format!("{who} runs its link at x{width} of its x{card} lanes because its slot is x{s}{cost}"),
            format!("move the card to a slot (or riser) with x{card} lanes where the host bandwidth matters, and check the board's lane sharing with other slots and M.2 drives"),
        ),
        _ => (
            format!("{who} trained its link at x{width} of its x{card} lanes{cost}"),
            "reseat the card, check its riser or cable, and check the kernel log (dmesg) for PCIe errors of it".to_owned(),
        ),
    };
    Some(Diagnosis::new(DiagnosisKind::NarrowLink, said, fix))
}
