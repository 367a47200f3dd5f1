//! Why a framework cannot see a GPU, beyond what Vulkan needs: the driver's CUDA version
//! against each installed framework's runtime, the framework's build, NVML's version
//! mismatch, the kernel module, a container's devices and capabilities, a GPU assigned to a
//! virtual machine, and a link narrower than the card. Everything is read from files; kiln
//! never imports or runs a framework or a Python interpreter.
//!
//! Sources: NVIDIA's CUDA Compatibility guide (minor version compatibility from CUDA 11 on:
//! an application built with CUDA 11.x or 12.x runs on a driver of the same major version,
//! and fails with `cudaErrorInsufficientDriver` on an older major); the NVIDIA Container
//! Toolkit's documentation (`NVIDIA_VISIBLE_DEVICES`, `NVIDIA_DRIVER_CAPABILITIES`, default
//! `compute,utility`); the NVML API reference (`NVML_ERROR_LIB_RM_VERSION_MISMATCH`); the
//! PCI Express base specifications (per-lane rates and line codes, as
//! [`crate::workload::pcie::theoretical_gbps`] computes them).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::diagnose::lacks_capability;
use super::{InventoryGpu, System, VENDOR_AMD, VENDOR_NVIDIA};
use crate::telemetry::record::Reading;
use crate::telemetry::{signals, sysfs};

/// Longest file kiln reads to find a framework's version, in bytes: the files it reads are
/// a few kilobytes; anything larger is not the file it expects.
const MAX_VERSION_FILE_BYTES: u64 = 1 << 20;
/// Longest library kiln scans for PyTorch's list of architectures, in bytes
/// (`libtorch_python.so` is tens of megabytes).
const MAX_LIBRARY_BYTES: u64 = 512 << 20;
/// Longest string of architectures kiln reads from the library, in bytes.
const MAX_ARCH_LIST_BYTES: usize = 4096;

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

    if nvidia {
        nvidia_driver(system, gpu, facts, &who, &mut out);
    }
    frameworks(gpu, facts, &who, &mut out);
    if let Some(d) = narrow_link(system, gpu, &who) {
        out.push(d);
    }
    out
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

/// PyTorch's list of architectures (`torch.cuda.get_arch_list()`), read from its Python
/// library, where PyTorch's `_cuda_getArchFlags` keeps it as one string of words
/// (`sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90`): the longest string of the library made
/// of such words alone. None where the library is missing, too large, or has no such string.
fn arch_list(library: &Path) -> Option<Vec<String>> {
    use std::io::Read;
    let file = std::fs::File::open(library).ok()?;
    if file.metadata().ok()?.len() > MAX_LIBRARY_BYTES {
        return None;
    }
    let mut best: Option<Vec<String>> = None;
    let mut run: Vec<u8> = Vec::new();
    let mut overflow = false;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut chunk).ok()?;
        if n == 0 {
            consider_arch_string(&run, overflow, &mut best);
            return best;
        }
        for &b in &chunk[..n] {
            // A C string ends at NUL.
            if b == 0 {
                consider_arch_string(&run, overflow, &mut best);
                run.clear();
                overflow = false;
            } else if run.len() < MAX_ARCH_LIST_BYTES {
                run.push(b);
            } else {
                overflow = true;
            }
        }
    }
}

/// Keeps `run` in `best` where it is a longer list of architectures than `best` holds.
fn consider_arch_string(run: &[u8], overflow: bool, best: &mut Option<Vec<String>>) {
    let is_arch = |w: &str| {
        let body = w.strip_prefix("sm_").or_else(|| w.strip_prefix("compute_"));
        body.is_some_and(|b| {
            let digits = b.trim_end_matches(['a', 'f']);
            digits.len() >= 2 && digits.bytes().all(|c| c.is_ascii_digit())
        })
    };
    if overflow {
        return;
    }
    let Ok(text) = std::str::from_utf8(run) else {
        return;
    };
    let words: Vec<&str> = text.split(' ').collect();
    if words.iter().all(|w| is_arch(w))
        && words.iter().any(|w| w.starts_with("sm_"))
        && best.as_ref().is_none_or(|b| b.len() < words.len())
    {
        *best = Some(words.iter().map(|w| (*w).to_owned()).collect());
    }
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
        let full = crate::workload::pcie::theoretical_gbps(g, card)?;
        let now = crate::workload::pcie::theoretical_gbps(g, width)?;
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
            "move it to an x16 slot wired to the CPU (or check the board's lane sharing with other slots and M.2 drives)".to_owned(),
        ),
        _ => (
            format!("{who} trained its link at x{width} of its x{card} lanes{cost}"),
            "reseat the card, check its riser or cable, and check the kernel log (dmesg) for PCIe errors of it".to_owned(),
        ),
    };
    Some(Diagnosis::new(DiagnosisKind::NarrowLink, said, fix))
}

/// One Python environment: an interpreter and the site-packages directories it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct PythonEnv {
    /// The interpreter as found (on PATH or named).
    pub interpreter: PathBuf,
    /// Its site-packages (and dist-packages) directories that exist.
    pub site_packages: Vec<PathBuf>,
}

/// Whether a file name is a Python interpreter's: `python`, `python3`, `python3.11`.
fn is_python_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("python") else {
        return false;
    };
    rest.is_empty()
        || rest == "3"
        || rest
            .strip_prefix("3.")
            .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
}

/// `3.11` from `python3.11`.
fn version_of_name(name: &str) -> Option<String> {
    name.strip_prefix("python")
        .filter(|v| v.contains('.'))
        .map(str::to_owned)
}

/// `key = value` lines of a `pyvenv.cfg`.
fn pyvenv_value(cfg: &str, key: &str) -> Option<String> {
    cfg.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

/// The Python environments of the interpreters on `path_var` (a PATH value) and of those
/// `named` (an interpreter, or an environment's directory), with `home` for the user's
/// site-packages; each environment once.
pub fn python_envs(
    path_var: Option<&str>,
    named: &[PathBuf],
    home: Option<&Path>,
) -> Vec<PythonEnv> {
    let mut interpreters: Vec<PathBuf> = Vec::new();
    for dir in path_var.into_iter().flat_map(std::env::split_paths) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(is_python_name))
            .map(|e| e.path())
            .collect();
        found.sort();
        interpreters.extend(found);
    }
    for n in named {
        if n.is_dir() {
            let bin = ["bin/python3", "bin/python", "python.exe"]
                .iter()
                .map(|b| n.join(b))
                .find(|p| p.exists());
            // An environment's directory without an interpreter is still read as one.
            interpreters.push(bin.unwrap_or_else(|| n.join("bin/python3")));
        } else {
            interpreters.push(n.clone());
        }
    }
    let mut out: Vec<PythonEnv> = Vec::new();
    for interpreter in interpreters {
        let site_packages = site_packages(&interpreter, home);
        if site_packages.is_empty() || out.iter().any(|e| e.site_packages == site_packages) {
            continue;
        }
        out.push(PythonEnv {
            interpreter,
            site_packages,
        });
    }
    out
}

/// The site-packages directories an interpreter reads, from its place on disk: a virtual
/// environment's (and its base's where `include-system-site-packages` is true), else its
/// installation prefix's, plus the user's; only those that exist.
fn site_packages(interpreter: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let name = interpreter
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let real = std::fs::canonicalize(interpreter).ok();
    let env_dir = interpreter.parent().and_then(Path::parent);
    let cfg = env_dir.and_then(|d| std::fs::read_to_string(d.join("pyvenv.cfg")).ok());
    let version = version_of_name(name)
        .or_else(|| {
            real.as_ref()
                .and_then(|r| r.file_name()?.to_str().and_then(version_of_name))
        })
        .or_else(|| {
            let v = cfg.as_deref().and_then(|c| {
                pyvenv_value(c, "version").or_else(|| pyvenv_value(c, "version_info"))
            })?;
            let mut parts = v.split('.');
            Some(format!("{}.{}", parts.next()?, parts.next()?))
        });
    let mut prefixes: Vec<PathBuf> = Vec::new();
    let mut user = true;
    if let Some(env) = env_dir {
        prefixes.push(env.to_path_buf());
    }
    if let Some(cfg) = &cfg {
        // A virtual environment reads its base's packages only when told to, and never
        // the user's.
        user = false;
        let system = pyvenv_value(cfg, "include-system-site-packages")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if system
            && let Some(base) = pyvenv_value(cfg, "home")
            && let Some(p) = Path::new(&base).parent()
        {
            prefixes.push(p.to_path_buf());
        }
    } else if let Some(p) = real.as_ref().and_then(|r| r.parent()?.parent()) {
        prefixes.push(p.to_path_buf());
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for prefix in &prefixes {
        let versions: Vec<String> = match &version {
            Some(v) => vec![format!("python{v}")],
            None => std::fs::read_dir(prefix.join("lib"))
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.starts_with("python3."))
                .collect(),
        };
        for v in &versions {
            for lib in ["lib", "lib64"] {
                for sub in ["site-packages", "dist-packages"] {
                    dirs.push(prefix.join(lib).join(v).join(sub));
                }
            }
        }
        // Debian's and Ubuntu's system packages.
        dirs.push(prefix.join("lib/python3/dist-packages"));
    }
    if user && let (Some(home), Some(v)) = (home, &version) {
        dirs.push(
            home.join(".local/lib")
                .join(format!("python{v}"))
                .join("site-packages"),
        );
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if d.is_dir() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// A small text file, or None where it is missing, unreadable or larger than a version
/// file is.
fn small_text(path: &Path) -> Option<String> {
    let len = std::fs::metadata(path).ok()?.len();
    if len > MAX_VERSION_FILE_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The value of a Python assignment or dict entry, as far as kiln reads one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PyValue {
    /// A quoted string.
    Text(String),
    /// The literal `None`.
    Nothing,
    /// Anything else (a call, a name): not read.
    Other,
}

impl PyValue {
    fn text(self) -> Option<String> {
        match self {
            PyValue::Text(t) => Some(t),
            PyValue::Nothing | PyValue::Other => None,
        }
    }
}

/// What a Python assignment or dict entry of `key` holds, None where the key is absent.
/// `at_line_start` asks for an assignment at the start of a line (`cuda: Optional[str] =
/// '12.1'`), else the key may stand anywhere, as a dict key (`'cuda_version': '12.3'`).
fn python_value(text: &str, key: &str, at_line_start: bool) -> Option<PyValue> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for line in text.lines() {
        let mut from = 0;
        while let Some(at) = line[from..].find(key).map(|i| i + from) {
            from = at + key.len();
            let before = line[..at].chars().next_back();
            let after = line[from..].chars().next();
            let starts = if at_line_start {
                line[..at].trim().is_empty()
            } else {
                !before.is_some_and(ident)
            };
            if !starts || after.is_some_and(ident) {
                continue;
            }
            let rest = line[from..].trim_start_matches(['\'', '"']).trim_start();
            if !rest.starts_with([':', '=']) {
                continue;
            }
            // The value ends at the next entry of a dict; an annotation comes before `=`.
            let value = rest.split(',').next().unwrap_or_default();
            let value = match value.rsplit_once('=') {
                Some((_, v)) => v,
                None => &value[1..],
            }
            .trim()
            .trim_end_matches('}');
            let quoted = value
                .chars()
                .next()
                .filter(|c| *c == '\'' || *c == '"')
                .and_then(|q| {
                    let body = &value[1..];
                    body.find(q).map(|close| body[..close].to_owned())
                });
            return Some(match quoted {
                Some(t) => PyValue::Text(t),
                None if value == "None" => PyValue::Nothing,
                None => PyValue::Other,
            });
        }
    }
    None
}

/// The frameworks installed in one site-packages directory.
pub fn installed_in(site: &Path) -> Vec<Installed> {
    let mut out = Vec::new();
    let mut push = |framework, version, runtime, archs| {
        out.push(Installed {
            framework,
            version,
            runtime,
            site_packages: site.to_path_buf(),
            archs,
        });
    };
    if let Some(text) = small_text(&site.join("torch/version.py")) {
        let version = python_value(&text, "__version__", true).and_then(PyValue::text);
        let cuda = python_value(&text, "cuda", true);
        let hip = python_value(&text, "hip", true);
        let cuda_version = cuda.clone().and_then(PyValue::text);
        let runtime = match (cuda_version.as_deref().map(CudaVersion::parse), hip) {
            (Some(Some(v)), _) => Some(Runtime::Cuda(v)),
            (_, Some(PyValue::Text(h))) => Some(Runtime::Hip(h)),
            // Only `cuda = None` (and no HIP) is a CPU-only build: a value kiln cannot
            // read is no evidence of one.
            (None, None | Some(PyValue::Nothing)) if cuda == Some(PyValue::Nothing) => {
                Some(Runtime::CpuOnly)
            }
            _ => None,
        };
        if let Some(runtime) = runtime {
            let archs = if matches!(runtime, Runtime::Cuda(_)) {
                ["torch/lib/libtorch_python.so", "torch/lib/torch_python.dll"]
                    .iter()
                    .find_map(|l| arch_list(&site.join(l)))
            } else {
                None
            };
            push(Framework::Pytorch, version, runtime, archs);
        }
    }
    if let Some(text) = small_text(&site.join("tensorflow/python/platform/build_info.py"))
        && let Some(v) = python_value(&text, "cuda_version", false)
            .and_then(PyValue::text)
            .and_then(|v| CudaVersion::parse(&v))
    {
        push(Framework::Tensorflow, None, Runtime::Cuda(v), None);
    }
    if let Some(text) = small_text(&site.join("onnxruntime/capi/build_and_package_info.py"))
        && let Some(v) = python_value(&text, "cuda_version", false)
            .and_then(PyValue::text)
            .and_then(|v| CudaVersion::parse(&v))
    {
        let version = python_value(&text, "__version__", true).and_then(PyValue::text);
        push(Framework::Onnxruntime, version, Runtime::Cuda(v), None);
    }
    let mut jax: Option<(u32, String)> = None;
    let mut names: Vec<String> = std::fs::read_dir(site)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.ends_with(".dist-info"))
        .collect();
    names.sort();
    for name in names {
        let stem = name.trim_end_matches(".dist-info");
        let Some((dist, version)) = stem.split_once('-') else {
            continue;
        };
        let major = if let Some(rest) = dist.strip_prefix("jax_cuda") {
            rest.strip_suffix("_plugin")
                .or_else(|| rest.strip_suffix("_pjrt"))
                .and_then(|m| m.parse().ok())
        } else if dist == "jaxlib" {
            // Old jaxlib wheels carried CUDA in their local version: `0.4.23+cuda12.cudnn89`.
            version
                .split_once("+cuda")
                .and_then(|(_, r)| r.split('.').next()?.parse().ok())
        } else {
            None
        };
        if let Some(m) = major
            && jax.is_none()
        {
            jax = Some((m, version.to_owned()));
        }
    }
    if let Some((major, version)) = jax {
        push(
            Framework::Jax,
            Some(version),
            Runtime::CudaMajor(major),
            None,
        );
    }
    out
}

/// The frameworks installed in every environment.
pub fn installed(envs: &[PythonEnv]) -> Vec<Installed> {
    let mut out: Vec<Installed> = Vec::new();
    for site in envs.iter().flat_map(|e| &e.site_packages) {
        for i in installed_in(site) {
            if !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::fixture::*;
    use crate::inventory::read;
    use std::fs;

    fn facts(nvml: NvmlState, cuda: Option<&str>, installed: Vec<Installed>) -> Facts {
        Facts {
            nvml,
            cuda_driver: cuda.and_then(CudaVersion::parse),
            installed,
            compute_capability: std::collections::BTreeMap::new(),
        }
    }

    fn torch(runtime: Runtime) -> Installed {
        Installed {
            framework: Framework::Pytorch,
            version: Some("2.7.0".into()),
            runtime,
            site_packages: PathBuf::from("/venv/lib/python3.11/site-packages"),
            archs: None,
        }
    }

    fn cuda(v: &str) -> Runtime {
        Runtime::Cuda(CudaVersion::parse(v).unwrap())
    }

    fn kinds(f: &Fixture, facts: &Facts) -> Vec<DiagnosisKind> {
        let system = f.system();
        let gpu = read(&system).gpus.remove(0);
        diagnose(&system, &gpu, facts)
            .into_iter()
            .map(|d| d.kind)
            .collect()
    }

    fn said(f: &Fixture, facts: &Facts) -> Vec<String> {
        let system = f.system();
        let gpu = read(&system).gpus.remove(0);
        diagnose(&system, &gpu, facts)
            .iter()
            .map(Diagnosis::sentence)
            .collect()
    }

    #[test]
    fn versions_read_from_nvml_and_from_text() {
        assert_eq!(
            CudaVersion::from_nvml(12040),
            Some(CudaVersion {
                major: 12,
                minor: 4
            })
        );
        assert_eq!(CudaVersion::from_nvml(11080).unwrap().to_string(), "11.8");
        assert_eq!(CudaVersion::from_nvml(0), None);
        assert_eq!(CudaVersion::parse("12.1").unwrap().to_string(), "12.1");
        assert_eq!(CudaVersion::parse("12").unwrap().to_string(), "12.0");
        assert_eq!(CudaVersion::parse("None"), None);
    }

    #[test]
    fn python_values_in_each_framework_s_form() {
        let torch_new = "__version__ = '2.3.0+cu121'\ndebug = False\ncuda: Optional[str] = '12.1'\ngit_version = 'abc'\nhip: Optional[str] = None\n";
        assert_eq!(
            python_value(torch_new, "cuda", true),
            Some(PyValue::Text("12.1".into()))
        );
        assert_eq!(python_value(torch_new, "hip", true), Some(PyValue::Nothing));
        assert_eq!(
            python_value(torch_new, "__version__", true),
            Some(PyValue::Text("2.3.0+cu121".into()))
        );
        let torch_old = "__version__ = '1.4.0'\ndebug = False\ncuda = '10.1'\ngit_version = 'x'\n";
        assert_eq!(
            python_value(torch_old, "cuda", true),
            Some(PyValue::Text("10.1".into()))
        );
        assert_eq!(python_value(torch_old, "hip", true), None);
        let tf = "build_info = {'cpu_compiler': '/usr/bin/gcc', 'cuda_compute_capabilities': ['sm_50'], 'cuda_version': '12.3', 'cudnn_version': '8', 'is_cuda_build': True}\n";
        assert_eq!(
            python_value(tf, "cuda_version", false),
            Some(PyValue::Text("12.3".into()))
        );
        let tf_cpu = "build_info = {'is_cuda_build': False, 'is_rocm_build': False}\n";
        assert_eq!(python_value(tf_cpu, "cuda_version", false), None);
        let ort = "package_name = 'onnxruntime-gpu'\n__version__ = '1.18.0'\ncuda_version = '11.8'\ncudnn_version = '8'\n";
        assert_eq!(
            python_value(ort, "cuda_version", false),
            Some(PyValue::Text("11.8".into()))
        );
    }

    /// A site-packages directory holding `files` (path, text), and empty directories `dirs`.
    fn site(files: &[(&str, &str)], dirs: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = d.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        for dir in dirs {
            fs::create_dir_all(d.path().join(dir)).unwrap();
        }
        d
    }

    #[test]
    fn each_framework_s_build_is_read_from_its_files() {
        let s = site(
            &[
                (
                    "torch/version.py",
                    "__version__ = '2.7.0+cu128'\ncuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
                ),
                (
                    "tensorflow/python/platform/build_info.py",
                    "build_info = {'cuda_version': '12.3', 'cudnn_version': '8'}\n",
                ),
                (
                    "onnxruntime/capi/build_and_package_info.py",
                    "package_name = 'onnxruntime-gpu'\n__version__ = '1.18.0'\ncuda_version = '11.8'\n",
                ),
            ],
            &[
                "jax_cuda12_plugin-0.4.30.dist-info",
                "jax-0.4.30.dist-info",
                "numpy-1.26.dist-info",
            ],
        );
        let found: Vec<(Framework, Runtime)> = installed_in(s.path())
            .into_iter()
            .map(|i| (i.framework, i.runtime))
            .collect();
        assert_eq!(
            found,
            [
                (Framework::Pytorch, cuda("12.8")),
                (Framework::Tensorflow, cuda("12.3")),
                (Framework::Onnxruntime, cuda("11.8")),
                (Framework::Jax, Runtime::CudaMajor(12)),
            ]
        );
        // A CPU-only PyTorch, a ROCm one, an old jaxlib with CUDA in its version; CPU
        // TensorFlow and onnxruntime say nothing.
        let s = site(
            &[
                (
                    "torch/version.py",
                    "__version__ = '2.7.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n",
                ),
                (
                    "tensorflow/python/platform/build_info.py",
                    "build_info = {'is_cuda_build': False}\n",
                ),
                (
                    "onnxruntime/capi/build_and_package_info.py",
                    "package_name = 'onnxruntime'\n__version__ = '1.18.0'\n",
                ),
            ],
            &["jaxlib-0.4.23+cuda11.cudnn86.dist-info"],
        );
        let found: Vec<(Framework, Runtime)> = installed_in(s.path())
            .into_iter()
            .map(|i| (i.framework, i.runtime))
            .collect();
        assert_eq!(
            found,
            [
                (Framework::Pytorch, Runtime::CpuOnly),
                (Framework::Jax, Runtime::CudaMajor(11)),
            ]
        );
        let s = site(
            &[(
                "torch/version.py",
                "cuda: Optional[str] = None\nhip: Optional[str] = '6.2.41133'\n",
            )],
            &[],
        );
        assert_eq!(
            installed_in(s.path())[0].runtime,
            Runtime::Hip("6.2.41133".into())
        );
        // A version file kiln cannot read says nothing, rather than "CPU only".
        let s = site(&[("torch/version.py", "cuda = get_cuda()\n")], &[]);
        assert!(installed_in(s.path()).is_empty());
    }

    #[test]
    fn python_environments_are_found_on_path_and_by_name_without_running_them() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // A base installation at /opt/py, and a venv made from it whose python3 links there.
        let base_bin = r.join("opt/py/bin");
        fs::create_dir_all(&base_bin).unwrap();
        fs::write(base_bin.join("python3.11"), "").unwrap();
        std::os::unix::fs::symlink(base_bin.join("python3.11"), base_bin.join("python3")).unwrap();
        // Not interpreters: never read as such.
        fs::write(base_bin.join("python3-config"), "").unwrap();
        fs::write(base_bin.join("python3.11-config"), "").unwrap();
        let base_site = r.join("opt/py/lib/python3.11/site-packages");
        fs::create_dir_all(&base_site).unwrap();
        let venv = r.join("venv");
        fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(base_bin.join("python3"), venv.join("bin/python3")).unwrap();
        fs::write(
            venv.join("pyvenv.cfg"),
            format!(
                "home = {}\ninclude-system-site-packages = false\nversion = 3.11.9\n",
                base_bin.display()
            ),
        )
        .unwrap();
        let venv_site = venv.join("lib/python3.11/site-packages");
        fs::create_dir_all(&venv_site).unwrap();
        // A user site the base reads and the venv does not.
        let home = r.join("home");
        let user_site = home.join(".local/lib/python3.11/site-packages");
        fs::create_dir_all(&user_site).unwrap();

        let path = std::env::join_paths([base_bin.clone(), r.join("missing")]).unwrap();
        let envs = python_envs(path.to_str(), std::slice::from_ref(&venv), Some(&home));
        let sites: Vec<&Vec<PathBuf>> = envs.iter().map(|e| &e.site_packages).collect();
        // python3 and python3.11 on PATH are one environment.
        assert_eq!(
            sites,
            [
                &vec![base_site.clone(), user_site.clone()],
                &vec![venv_site.clone()]
            ]
        );
        // A venv that includes the system's packages reads its base's too; one named by its
        // interpreter is the same as one named by its directory.
        fs::write(
            venv.join("pyvenv.cfg"),
            format!(
                "home = {}\ninclude-system-site-packages = true\nversion = 3.11.9\n",
                base_bin.display()
            ),
        )
        .unwrap();
        let envs = python_envs(None, &[venv.join("bin/python3")], Some(&home));
        assert_eq!(envs[0].site_packages, [venv_site, base_site]);
    }

    #[test]
    fn a_framework_built_for_a_newer_cuda_major_than_the_driver_cannot_see_the_card() {
        let f = nvidia_gpu(Some("nvidia"));
        let on = |driver: &str, runtime: Runtime| {
            kinds(
                &f,
                &facts(NvmlState::Up, Some(driver), vec![torch(runtime)]),
            )
        };
        assert_eq!(on("11.8", cuda("12.8")), [DiagnosisKind::CudaTooNew]);
        assert_eq!(
            on("11.8", Runtime::CudaMajor(12)),
            [DiagnosisKind::CudaTooNew]
        );
        // Before CUDA 11 a newer minor needs a newer driver too.
        assert_eq!(on("10.1", cuda("10.2")), [DiagnosisKind::CudaTooNew]);
        // Same major, newer minor: it sees the card, without PTX JIT.
        assert_eq!(on("12.4", cuda("12.8")), [DiagnosisKind::CudaMinorNewer]);
        // Near misses: the driver's own version or older, and a major-only build it supports.
        assert!(on("12.4", cuda("12.4")).is_empty());
        assert!(on("12.8", cuda("11.8")).is_empty());
        assert!(on("12.2", Runtime::CudaMajor(12)).is_empty());
        let sentence = &said(
            &f,
            &facts(NvmlState::Up, Some("11.8"), vec![torch(cuda("12.8"))]),
        )[0];
        assert!(
            sentence.contains("PyTorch 2.7.0 in /venv/lib/python3.11/site-packages is built for CUDA 12.8 but the driver supports CUDA 11.8")
                && sentence.contains("update the NVIDIA driver"),
            "{sentence}"
        );
        // Without NVML's CUDA version nothing is compared.
        assert!(kinds(&f, &facts(NvmlState::Up, None, vec![torch(cuda("12.8"))])).is_empty());
    }

    fn words(list: &str) -> Vec<String> {
        list.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn pytorch_s_architectures_are_read_from_its_library() {
        let s = site(&[], &["torch/lib"]);
        let library = s.path().join("torch/lib/libtorch_python.so");
        let mut bytes = b"\x7fELF\x02\x01\x00junk sm_80 text\x00-arch=sm_90\x00sm_80\x00".to_vec();
        bytes.extend_from_slice(b"sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90\x00");
        bytes.extend(std::iter::repeat_n(0xffu8, 3 << 20));
        bytes.extend_from_slice(b"\x00compute_90 sm_90a");
        fs::write(&library, &bytes).unwrap();
        assert_eq!(
            arch_list(&library),
            Some(words("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"))
        );
        // Near miss: a library without such a string says nothing.
        fs::write(&library, b"\x00sm_80 is not a list of architectures\x00").unwrap();
        assert_eq!(arch_list(&library), None);
        assert_eq!(arch_list(&s.path().join("missing.so")), None);
    }

    #[test]
    fn a_wheel_without_code_for_the_card_s_architecture() {
        let to_sm90 = words("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90");
        // PyTorch's own rule: any machine code of the same major, or PTX no newer.
        assert!(!runs_on(&to_sm90, (12, 0)));
        assert!(runs_on(&to_sm90, (8, 9)));
        assert!(runs_on(&words("sm_80 compute_80"), (9, 0)));
        assert!(runs_on(&words("sm_90 sm_100 sm_120"), (12, 0)));
        assert!(!runs_on(&words("sm_90a"), (10, 0)));

        let f = nvidia_gpu(Some("nvidia"));
        let system = f.system();
        let mut gpu = read(&system).gpus.remove(0);
        gpu.nvml_index = Some(0);
        let with = |gpu: &InventoryGpu, archs: &str, cc: (u32, u32)| {
            let mut t = torch(cuda("12.8"));
            t.archs = Some(words(archs));
            let mut facts = facts(NvmlState::Up, Some("12.8"), vec![t]);
            facts.compute_capability.insert(0, cc);
            diagnose(&system, gpu, &facts)
        };
        let said = with(&gpu, "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", (12, 0));
        assert_eq!(said.len(), 1);
        assert_eq!(said[0].kind, DiagnosisKind::ArchMissing);
        assert!(
            said[0]
                .sentence()
                .contains("compute capability 12.0 (sm_120)")
                && said[0].sentence().contains("lists sm_120"),
            "{}",
            said[0].sentence()
        );
        // Near misses: the wheel lists the card's architecture, or the card is one it has.
        assert!(with(&gpu, "sm_80 sm_86 sm_90 sm_100 sm_120", (12, 0)).is_empty());
        assert!(with(&gpu, "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", (9, 0)).is_empty());
        // Without the card's capability nothing is compared.
        gpu.nvml_index = None;
        assert!(with(&gpu, "sm_50", (12, 0)).is_empty());
    }

    #[test]
    fn a_build_without_the_card_s_runtime_cannot_see_it() {
        let nvidia = nvidia_gpu(Some("nvidia"));
        let amd = Fixture::new();
        amd.pci("0000:05:00.0", 0x030000, 0x1002, 0x744c, Some("amdgpu"));
        let with = |runtime: Runtime| facts(NvmlState::Up, Some("12.4"), vec![torch(runtime)]);
        assert_eq!(
            kinds(&nvidia, &with(Runtime::CpuOnly)),
            [DiagnosisKind::CpuOnlyBuild]
        );
        assert_eq!(
            kinds(&amd, &with(Runtime::CpuOnly)),
            [DiagnosisKind::CpuOnlyBuild]
        );
        assert_eq!(
            kinds(&nvidia, &with(Runtime::Hip("6.2".into()))),
            [DiagnosisKind::OtherVendorBuild]
        );
        assert_eq!(
            kinds(&amd, &with(cuda("12.1"))),
            [DiagnosisKind::OtherVendorBuild]
        );
        // Near misses: each card with its own vendor's build; an Intel GPU is no framework's
        // CUDA or ROCm target, so nothing is said of it.
        assert!(kinds(&nvidia, &with(cuda("12.1"))).is_empty());
        assert!(kinds(&amd, &with(Runtime::Hip("6.2".into()))).is_empty());
        let intel = Fixture::new();
        intel.pci("0000:00:02.0", 0x030000, 0x8086, 0x56a0, Some("i915"));
        assert!(kinds(&intel, &with(Runtime::CpuOnly)).is_empty());
    }

    #[test]
    fn nvml_s_version_mismatch_is_a_reboot() {
        let f = nvidia_gpu(Some("nvidia"));
        let k = kinds(&f, &facts(NvmlState::VersionMismatch, None, vec![]));
        assert_eq!(k, [DiagnosisKind::DriverLibraryMismatch]);
        assert!(said(&f, &facts(NvmlState::VersionMismatch, None, vec![]))[0].contains("reboot"));
        // Near miss: NVML down for another reason (here its library absent, the module
        // loaded and the GPU bound to it) is no mismatch.
        assert_eq!(
            NvmlState::from_cause(Some(crate::telemetry::cause::VERSION_MISMATCH)),
            NvmlState::VersionMismatch
        );
        assert_eq!(
            NvmlState::from_cause(Some(crate::telemetry::cause::DRIVER_NOT_LOADED)),
            NvmlState::Down
        );
        assert!(kinds(&f, &facts(NvmlState::Down, None, vec![])).is_empty());
    }

    #[test]
    fn a_kernel_module_not_loaded_is_named_only_where_it_is_not() {
        let f = nvidia_gpu(None);
        let down = facts(NvmlState::Down, None, vec![]);
        assert_eq!(kinds(&f, &down), [DiagnosisKind::KernelModuleNotLoaded]);
        let f = nvidia_gpu(Some("nouveau"));
        assert!(said(&f, &down)[0].contains("(nouveau drives it)"));
        // Near misses: the module loaded (sysfs has it), a GPU bound to nvidia, and NVML up.
        f.write("/sys/module/nvidia/version", "570.86.15\n");
        assert!(kinds(&f, &down).is_empty());
        assert!(kinds(&nvidia_gpu(Some("nvidia")), &down).is_empty());
        assert!(kinds(&nvidia_gpu(None), &facts(NvmlState::Up, None, vec![])).is_empty());
    }

    #[test]
    fn a_container_without_the_gpu_or_its_compute_capability() {
        let down = facts(NvmlState::Down, None, vec![]);
        let mut f = nvidia_gpu(Some("nvidia"));
        f.write("/.dockerenv", "");
        assert_eq!(kinds(&f, &down), [DiagnosisKind::ContainerWithoutGpu]);
        f.set("NVIDIA_VISIBLE_DEVICES", "void");
        f.write("/dev/nvidiactl", "");
        assert!(said(&f, &down)[0].contains("\"void\""));
        // Given the GPU but not compute: libcuda.so is not mounted.
        f.set("NVIDIA_VISIBLE_DEVICES", "all");
        f.set("NVIDIA_DRIVER_CAPABILITIES", "graphics,utility");
        assert_eq!(kinds(&f, &down), [DiagnosisKind::ContainerWithoutCompute]);
        // Near misses: compute given, or the toolkit's default (compute,utility).
        f.set("NVIDIA_DRIVER_CAPABILITIES", "compute,utility");
        assert!(kinds(&f, &down).is_empty());
        f.env.remove("NVIDIA_DRIVER_CAPABILITIES");
        assert!(kinds(&f, &down).is_empty());
        // Outside a container, no /dev/nvidiactl is not a container's doing.
        let f = nvidia_gpu(Some("nvidia"));
        assert!(kinds(&f, &down).is_empty());
    }

    #[test]
    fn a_gpu_assigned_to_a_virtual_machine() {
        let up = facts(NvmlState::Up, Some("12.4"), vec![]);
        let f = nvidia_gpu(Some("vfio-pci"));
        assert_eq!(kinds(&f, &up), [DiagnosisKind::PassedThrough]);
        // Nor is its missing module said: vfio-pci holds it by choice.
        assert_eq!(
            kinds(&f, &facts(NvmlState::Down, None, vec![])),
            [DiagnosisKind::PassedThrough]
        );
        assert!(kinds(&nvidia_gpu(Some("nvidia")), &up).is_empty());
    }

    /// A card at `address` under a port whose slot is `slot` lanes wide, its link files
    /// `(current speed, current width, max speed, max width)`.
    fn card_on_link(f: &Fixture, slot: u32, link: (&str, u32, &str, u32)) {
        let port = "/sys/devices/pci0000:00/0000:00:01.0";
        f.write(&format!("{port}/max_link_speed"), "16.0 GT/s PCIe\n");
        f.write(&format!("{port}/max_link_width"), &format!("{slot}\n"));
        let dev = format!("{port}/0000:05:00.0");
        for (file, text) in [
            ("class", "0x030000".to_owned()),
            ("vendor", "0x10de".to_owned()),
            ("device", "0x2684".to_owned()),
            ("current_link_speed", link.0.to_owned()),
            ("current_link_width", link.1.to_string()),
            ("max_link_speed", link.2.to_owned()),
            ("max_link_width", link.3.to_string()),
        ] {
            f.write(&format!("{dev}/{file}"), &text);
        }
        let driver = f.host("/sys/bus/pci/drivers/nvidia");
        fs::create_dir_all(&driver).unwrap();
        std::os::unix::fs::symlink(driver, f.host(&format!("{dev}/driver"))).unwrap();
        fs::create_dir_all(f.host("/sys/bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(f.host(&dev), f.host("/sys/bus/pci/devices/0000:05:00.0"))
            .unwrap();
    }

    #[test]
    fn a_link_narrower_than_the_card_says_what_it_costs() {
        let up = facts(NvmlState::Up, Some("12.4"), vec![]);
        // An x16 Gen4 card in an x4 slot: 7.9 of 31.5 GB/s.
        let f = Fixture::new();
        card_on_link(&f, 4, ("16.0 GT/s PCIe", 4, "16.0 GT/s PCIe", 16));
        let s = said(&f, &up);
        assert_eq!(kinds(&f, &up), [DiagnosisKind::NarrowLink]);
        assert!(
            s[0].contains("x4 of its x16 lanes because its slot is x4, 7.9 of 31.5 GB/s per direction at PCIe Gen4 (23.6 GB/s lost)")
                && s[0].contains("x16 slot"),
            "{s:?}"
        );
        // The same width in an x16 slot: the link trained down.
        let f = Fixture::new();
        card_on_link(&f, 16, ("16.0 GT/s PCIe", 8, "16.0 GT/s PCIe", 16));
        assert!(
            said(&f, &up)[0].contains("trained its link at x8")
                && said(&f, &up)[0].contains("reseat")
        );
        // Near misses: full width at an idle card's lowered speed, and a link that is down.
        let f = Fixture::new();
        card_on_link(&f, 16, ("2.5 GT/s PCIe", 16, "16.0 GT/s PCIe", 16));
        assert!(kinds(&f, &up).is_empty());
        let f = Fixture::new();
        card_on_link(&f, 16, ("Unknown", 0, "16.0 GT/s PCIe", 16));
        assert!(kinds(&f, &up).is_empty());
    }
}
