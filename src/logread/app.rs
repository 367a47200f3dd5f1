//! An application's failure lines: the frameworks' words that `kiln watch` reads
//! ([`crate::verdict::watch::words`], one parser for both), and what it does not know:
//! CUDA runtime errors (CUDA Runtime API, "Error Handling": cudaErrorIllegalAddress,
//! cudaErrorNoDevice, cudaErrorInsufficientDriver, cudaErrorLaunchTimeout), NVML's and
//! nvidia-smi's own failures (NVML API reference: NVML_ERROR_LIB_RM_VERSION_MISMATCH,
//! NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_GPU_IS_LOST), Vulkan's and Direct3D's lost
//! devices (VK_ERROR_DEVICE_LOST; DXGI_ERROR_DEVICE_REMOVED and _HUNG), wgpu's
//! validation.
//!
//! The framework is the one the text names (a torch path, `tensorflow/`, `jaxlib`,
//! `ggml_`, `Unreal Engine`, `wgpu`, `vk*`, `D3D12`, `nvidia-smi`), never a guess from
//! the words alone.

use std::sync::OnceLock;

use regex::Regex;

use super::{Driver, FailureKind, Reading, Role, Source};
use crate::verdict::watch::words::{self, Kind};

/// One failure pattern: the kind, the expression, and the framework its words are
/// unmistakably (wgpu's binding check), where they are.
struct Pattern {
    kind: FailureKind,
    regex: &'static str,
    framework: Option<&'static str>,
    driver: Option<Driver>,
}

const fn p(kind: FailureKind, regex: &'static str) -> Pattern {
    Pattern {
        kind,
        regex,
        framework: None,
        driver: None,
    }
}

/// The failures the frameworks' words do not cover, most specific first.
const PATTERNS: &[Pattern] = &[
    // NVML's GPU_IS_LOST, as any NVML client prints it.
    Pattern {
        kind: FailureKind::DeviceLost,
        regex: r"ERROR_GPU_IS_LOST|GPU is lost",
        framework: None,
        driver: Some(Driver::Nvidia),
    },
    p(
        FailureKind::IllegalAddress,
        r"(?i)illegal memory access|\bILLEGAL_ADDRESS\b|Illegal address in |: Illegal address\b",
    ),
    p(
        FailureKind::VersionMismatch,
        r"(?i)version mismatch|driver version is insufficient|DRIVER_MISMATCH|cudaErrorInsufficientDriver|API mismatch",
    ),
    p(
        FailureKind::DriverMissing,
        r"(?i)no \W*CUDA-capable device|No CUDA GPUs are available|CUDA_ERROR_NO_DEVICE|cudaErrorNoDevice|couldn.t communicate with the NVIDIA driver|found no NVIDIA driver|NVIDIA driver is not (?:loaded|installed|running)|kernel driver does not appear to be running|No devices were found",
    ),
    p(
        FailureKind::GpuHang,
        r"(?i)launch timed out and was terminated|LAUNCH_TIMEOUT|IOCTL_KGSL_GPU_COMMAND\) failed",
    ),
    p(
        FailureKind::DeviceLost,
        r"(?i)device[_ ]lost|device (?:is|has been) lost|fallen off the bus|Lost the \w+ device|device instance has been suspended|device[_ ]removed|device (?:was|has been) removed|Removing Device|DEVICE_HUNG|0x887A000[5-7]|GPU crashed|D3D Hung",
    ),
    p(
        FailureKind::OutOfMemory,
        r"(?i)out of (?:device |video )?memory|OutOfMemoryError|hipErrorOutOfMemory|failed to allocate (?:\w+ )?buffer|OUT_OF_(?:DEVICE_)?MEMORY|OutOfDeviceMemory|heaps are exhausted|Memory allocation failed|Insufficient Memory|failed to allocate memory|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED|Resource exhausted",
    ),
    Pattern {
        kind: FailureKind::Validation,
        regex: r"is bound with size \d+ where the shader expects",
        framework: Some("wgpu"),
        driver: None,
    },
    p(
        FailureKind::Validation,
        r"Validation Error|requires a buffer binding which is at least|VUID-",
    ),
    // nvidia-smi cannot reach a GPU the driver still lists.
    Pattern {
        kind: FailureKind::Other,
        regex: r"Unable to determine the device handle for GPU",
        framework: None,
        driver: Some(Driver::Nvidia),
    },
    // A kernel that crashed or asserted (CUDA: cudaErrorLaunchFailure, cudaErrorAssert).
    p(
        FailureKind::Other,
        r"(?i)unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|device-side assert(?:ion)? triggered",
    ),
    // ggml's Metal backend: "command buffer 3 failed with status 5".
    p(
        FailureKind::Other,
        r"command buffer \d+ failed with status \d+|CommandBufferCallbackError",
    ),
];

/// The patterns, compiled once.
fn compiled() -> &'static [(Regex, &'static Pattern)] {
    static COMPILED: OnceLock<Vec<(Regex, &'static Pattern)>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        PATTERNS
            .iter()
            .filter_map(|p| Regex::new(p.regex).ok().map(|r| (r, p)))
            .collect()
    })
}

/// The frameworks a text may name, first match wins (ggml's Vulkan backend is ggml's).
const NAMES: &[(&str, &str)] = &[
    ("llama.cpp", r"ggml|llama\.cpp|llama_"),
    ("wgpu", r"wgpu"),
    // "GPU Crashed or D3D Device Removed." and "... D3D device being lost" are Unreal's
    // RHI's own words.
    (
        "unreal",
        r"(?i)Unreal|\bUE[45]\b|D3D device being lost|GPUCrash|GPU Crashed or D3D Device Removed|LogD3D1[12]RHI|LogRHI|D3D1[12]RHI",
    ),
    ("onnxruntime", r"onnxruntime"),
    (
        "pytorch",
        r"(?i)pytorch|\btorch\.|torch/csrc|site-packages/torch|TORCH_USE_CUDA_DSA|aten/src|c10/cuda",
    ),
    (
        "tensorflow",
        r"(?:^|[^_\w])tensorflow|ResourceExhaustedError|OOM when allocating tensor|GPU_\d+_bfc",
    ),
    ("jax", r"(?i)\bjax"),
    ("blender", r"(?i)blender|\bcycles\b|System is out of GPU"),
    ("d3d12", r"D3D12"),
    ("d3d11", r"D3D11"),
    (
        "vulkan",
        r"VK_ERROR_|\bvk[A-Z]\w+|Vulkan|VkResult|ErrorOutOfDeviceMemory",
    ),
    (
        "nvidia-smi",
        r"(?i)nvidia-smi|Failed to initialize NVML|Unable to determine the device handle",
    ),
];

fn names() -> &'static [(Regex, &'static str)] {
    static NAMED: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    NAMED.get_or_init(|| {
        NAMES
            .iter()
            .filter_map(|(name, p)| Regex::new(p).ok().map(|r| (r, *name)))
            .collect()
    })
}

/// The framework a line names, if any. A TensorFlow path under Bazel's
/// `external/org_tensorflow` (or XLA's and TSL's own, whose BFC allocator says
/// `GPU_0_bfc` too) is XLA built into another project (JAX), not TensorFlow.
pub fn framework_named(line: &str) -> Option<&'static str> {
    names()
        .iter()
        .filter(|(_, name)| {
            *name != "tensorflow"
                || !["org_tensorflow", "external/xla", "external/tsl", "tsl/"]
                    .iter()
                    .any(|x| line.contains(x))
        })
        .find(|(r, _)| r.is_match(line))
        .map(|(_, name)| *name)
}

fn exact_bytes() -> Option<&'static Regex> {
    static BYTES: OnceLock<Option<Regex>> = OnceLock::new();
    BYTES
        .get_or_init(|| {
            Regex::new(
                r"\((?P<a>\d+) bytes\)|alloc\w* (?P<b>\d+) bytes|of size (?P<c>\d+)\b|rounded to (?P<d>\d+)\)",
            )
            .ok()
        })
        .as_ref()
}

/// A full PCI address in the line (`00000000:3B:00.0`), written one way.
fn device_address(text: &str) -> Option<String> {
    static ADDRESS: OnceLock<Option<Regex>> = OnceLock::new();
    let re = ADDRESS
        .get_or_init(|| Regex::new(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]").ok())
        .as_ref()?;
    super::normalise_pci(re.find(text)?.as_str())
}

/// The exact byte count a line states (`(19104890880 bytes)`, `alloc 2740606464 bytes`,
/// `buffer of size 151851674624`).
fn exact_size(text: &str) -> Option<u64> {
    let c = exact_bytes()?.captures(text)?;
    c.name("a")
        .or_else(|| c.name("b"))
        .or_else(|| c.name("c"))
        .or_else(|| c.name("d"))?
        .as_str()
        .parse()
        .ok()
}

/// Compiles the reader's patterns now, so that the first line it reads is not delayed by
/// their compiling: a watch stamps the moments it hears (an iteration's mark) as they come,
/// and a first line held back while dozens of patterns compile (a second or more on a
/// loaded machine) would shift every mark after it against the trace's own clock.
pub fn prepare() {
    let _ = (compiled(), names(), exact_bytes(), device_address(""));
    let _ = words::read("");
}

/// What an application's line says; None for a line of no failure and no framework.
pub fn read(text: &str) -> Option<(Role, Reading)> {
    // The host's OOM killer is the host's memory, not a GPU's; pinned host memory refused
    // is a warning llama.cpp falls back from; TensorFlow's BFC allocator says when a
    // refusal is a retry it recovers from.
    if [
        "Out of memory: Kill",
        "of pinned memory",
        "this is not a failure",
    ]
    .iter()
    .any(|quiet| text.contains(quiet))
    {
        return None;
    }
    let mut r = Reading {
        source: Some(Source::Application),
        framework: framework_named(text),
        ..Reading::default()
    };
    if let Some(said) = words::read(text) {
        r.failure = Some(match said.kind {
            Kind::OutOfMemory => FailureKind::OutOfMemory,
            Kind::DeviceLost => FailureKind::DeviceLost,
            Kind::Refused => FailureKind::Validation,
        });
        let f = &said.facts;
        r.requested_bytes = f.request_bytes;
        r.total_bytes = f.total_bytes;
        r.free_bytes = f.free_bytes;
        r.allocated_bytes = f.allocated_bytes;
        // The figure the text gives for "reserved": PyTorch 2.x's reserved but unallocated.
        r.reserved_bytes = f.unallocated_bytes.or(f.reserved_bytes);
        if let Some(exact) = exact_size(text) {
            r.requested_bytes = Some(exact);
            r.requested_exact = true;
        }
        // PyTorch's allocator message is PyTorch's own words.
        if said.framework == words::Framework::PyTorch {
            r.framework = r.framework.or(Some("pytorch"));
        }
        return Some((Role::Failure, r));
    }
    if let Some((_, p)) = compiled().iter().find(|(re, _)| re.is_match(text)) {
        r.failure = Some(p.kind);
        r.framework = p.framework.or(r.framework);
        r.driver = p.driver;
        if p.kind == FailureKind::OutOfMemory {
            r.requested_bytes = exact_size(text);
            r.requested_exact = r.requested_bytes.is_some();
            // A refused allocation's size in a unit (`failed to allocate buffer, size =
            // 1024.00 MiB`), by the watch's own size reader.
            if r.requested_bytes.is_none() && text.contains("failed to allocate") {
                r.requested_bytes = words::requested(text).map(|(bytes, _)| bytes);
            }
        }
        // NVML's clients name the device (`GPU 00000000:3B:00.0: GPU is lost`).
        r.pci_address = device_address(text);
        return Some((Role::Failure, r));
    }
    // The rest of a message the poster's paste broke in two ("Out \nof memory while
    // trying to allocate 5520758552 bytes.").
    if let Some(exact) = exact_size(text).filter(|_| text.contains("allocat")) {
        r.requested_bytes = Some(exact);
        r.requested_exact = true;
        return Some((Role::Detail, r));
    }
    r.framework.map(|_| (Role::Detail, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_and_name_compiles() {
        assert_eq!(compiled().len(), PATTERNS.len());
        assert_eq!(names().len(), NAMES.len());
        assert!(exact_bytes().is_some());
    }

    #[test]
    fn a_failure_is_read_with_the_framework_it_names_and_a_near_miss_is_not() {
        let (_, r) = read("RuntimeError: cuda runtime error (38) : no CUDA-capable device is detected at torch/csrc/cuda/Module.cpp:81").unwrap();
        assert_eq!(
            (r.failure, r.framework),
            (Some(FailureKind::DriverMissing), Some("pytorch"))
        );
        // Lua Torch's cutorch is not PyTorch.
        let (_, r) = read("THCudaCheck FAIL file=/home/p/torch/extra/cutorch/lib/THC/THCGeneral.c line=70 error=35 : CUDA driver version is insufficient for CUDA runtime version").unwrap();
        assert_eq!(
            (r.failure, r.framework),
            (Some(FailureKind::VersionMismatch), None)
        );
        let (_, r) = read("failed to allocate 17.79G (19104890880 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory").unwrap();
        assert_eq!(r.requested_bytes, Some(19_104_890_880));
        let (role, _) =
            read("UserWarning: TypedStorage is deprecated. site-packages/torch/storage.py")
                .unwrap();
        assert_eq!(role, Role::Detail, "a framework's name alone is no failure");
        assert_eq!(read("Out of memory: Killed process 1234 (python3)"), None);
        // TensorFlow's allocator retrying, and llama.cpp's pinned host memory: warnings.
        assert_eq!(
            read(
                "W tensorflow/core/common_runtime/bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.17GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available."
            ),
            None
        );
        assert_eq!(
            read(
                "ggml_cuda_host_malloc: failed to allocate 512.00 MiB of pinned memory: out of memory"
            ),
            None
        );
        // XLA's own BFC allocator in a JAX log is not TensorFlow's, and its exact count wins.
        let (_, r) = read("W external/tsl/tsl/framework/bfc_allocator.cc:479] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00GiB (rounded to 2147483649)requested by op").unwrap();
        assert_eq!(
            (r.framework, r.requested_bytes),
            (None, Some(2_147_483_649))
        );
        // NVML's client names the device it lost.
        let (_, r) = read("Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU").unwrap();
        assert_eq!(
            (r.driver, r.failure, r.pci_address.as_deref()),
            (
                Some(Driver::Nvidia),
                Some(FailureKind::DeviceLost),
                Some("0000:3b:00.0")
            )
        );
        assert_eq!(read("epoch 3 done, loss 0.31"), None);
    }
}
