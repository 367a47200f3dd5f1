//! What GPU software says when it fails, read into facts: the out-of-memory and lost-device
//! lines of the frameworks people watch (PyTorch's CUDA and HIP allocator, TensorFlow,
//! JAX and XLA, wgpu, ggml and llama.cpp, Blender's Cycles, Unreal and Direct3D, Vulkan),
//! with the sizes they give: what was asked for, the card's total, what was free, what the
//! framework had allocated and reserved, a limit the request went over. The watch's rules
//! judge by these facts as by the trace's; a line none of these patterns knows stays
//! evidence in its own words.

use std::sync::OnceLock;

use regex::Regex;

/// Whose words a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framework {
    /// PyTorch's caching allocator (CUDA or HIP).
    PyTorch,
    /// TensorFlow's BFC allocator.
    TensorFlow,
    /// JAX and XLA.
    Jax,
    /// wgpu (WebGPU), its own validation.
    Wgpu,
    /// ggml and llama.cpp's backends.
    Ggml,
    /// Blender's Cycles renderer.
    Blender,
    /// Direct3D and DXGI, as Unreal and games say them.
    Direct3D,
    /// A Vulkan result code.
    Vulkan,
    /// A framework none of these patterns knows, read by the sizes its line gives
    /// ([`requested`]).
    Unknown,
}

impl Framework {
    /// The name people know it by.
    pub fn name(self) -> &'static str {
        match self {
            Framework::PyTorch => "PyTorch",
            Framework::TensorFlow => "TensorFlow",
            Framework::Jax => "JAX/XLA",
            Framework::Wgpu => "wgpu",
            Framework::Ggml => "ggml",
            Framework::Blender => "Blender Cycles",
            Framework::Direct3D => "Direct3D",
            Framework::Vulkan => "Vulkan",
            Framework::Unknown => "its framework",
        }
    }
}

/// What the line says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An allocation failed for memory.
    OutOfMemory,
    /// A request was refused by the framework's own check before any driver saw it (a
    /// size above a limit).
    Refused,
    /// The device was lost, removed or hung.
    DeviceLost,
}

/// The facts of one line.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Facts {
    /// The size asked for, bytes.
    pub request_bytes: Option<u64>,
    /// The device's total memory as the framework gives it, bytes.
    pub total_bytes: Option<u64>,
    /// Memory free on the device then, bytes.
    pub free_bytes: Option<u64>,
    /// Memory the framework's allocator had handed out, bytes.
    pub allocated_bytes: Option<u64>,
    /// Memory the framework's allocator held from the device (handed out or cached),
    /// bytes: above `allocated_bytes` by what its cache kept.
    pub reserved_bytes: Option<u64>,
    /// Memory the allocator held but had not handed out, where the line says it apart
    /// (PyTorch 2.x's "reserved by PyTorch but unallocated"), bytes.
    pub unallocated_bytes: Option<u64>,
    /// A limit the request went over (wgpu's largest buffer, PyTorch's per-process cap),
    /// bytes.
    pub limit_bytes: Option<u64>,
    /// The elements of the shape asked for, where the line gave a shape rather than a size:
    /// `request_bytes` is then its least size, one byte an element.
    pub request_elements: Option<u64>,
}

/// A line read: whose, what, and the sizes it gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    /// Whose words.
    pub framework: Framework,
    /// What happened.
    pub kind: Kind,
    /// The sizes it gives.
    pub facts: Facts,
}

impl Said {
    /// Memory the framework held but had not handed out (its cache), where it says both:
    /// what a request could not use because it is cut into pieces.
    pub fn cached_bytes(&self) -> Option<u64> {
        Some(
            self.facts
                .reserved_bytes?
                .saturating_sub(self.facts.allocated_bytes?),
        )
    }
}

/// A size as frameworks print it (`2.00 GiB`, `800.47 MiB`, `1.00GiB`, `512 bytes`), in
/// bytes.
fn size(number: &str, unit: &str) -> Option<u64> {
    let n: f64 = number.parse().ok()?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "b" | "bytes" | "" => 1.0,
        "kib" | "kb" => 1024.0,
        "mib" | "mb" => 1024.0 * 1024.0,
        "gib" | "gb" => 1024.0 * 1024.0 * 1024.0,
        "tib" | "tb" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((n * scale).round() as u64)
}

/// The pattern's named size (`<name>` the number, `<name>_unit` its unit).
fn named_size(c: &regex::Captures<'_>, name: &str) -> Option<u64> {
    let unit = c.name(&format!("{name}_unit")).map_or("", |m| m.as_str());
    size(c.name(name)?.as_str(), unit)
}

/// A size of the form the patterns below capture: a number and its unit.
const SIZE: &str = r"[0-9]+(?:\.[0-9]+)?";
const UNIT: &str = r"(?:[KMGT]i?B|bytes|B)";

/// One pattern: whose, what, the expression and the sizes it names.
struct Pattern {
    framework: Framework,
    kind: Kind,
    regex: &'static str,
}

/// Each framework's lines, most specific first. `{S}` is a size's number, `{U}` its
/// unit; the sizes are named `request`, `total`, `free`, `allocated`, `reserved`,
/// `unallocated` (reserved but not handed out), `limit`.
const PATTERNS: &[Pattern] = &[
    // PyTorch 2.x: "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total
    // capacity of 79.15 GiB of which 6.69 MiB is free. ... Of the allocated memory 77.82
    // GiB is allocated by PyTorch, and 800.47 MiB is reserved by PyTorch but unallocated."
    // Releases before 2.2 spell it "capacty"; a per-process cap adds "1.05 GiB allowed;",
    // and newer releases what private pools (CUDA Graphs) hold.
    Pattern {
        framework: Framework::PyTorch,
        kind: Kind::OutOfMemory,
        regex: r"(?:CUDA|HIP) out of memory\. Tried to allocate (?P<request>{S}) ?(?P<request_unit>{U})\. GPU \d+ has a total capac\w* of (?P<total>{S}) ?(?P<total_unit>{U}) of which (?P<free>{S}) ?(?P<free_unit>{U}) is free\.(?: (?P<limit>{S}) ?(?P<limit_unit>{U}) allowed;)?.*?(?P<allocated>{S}) ?(?P<allocated_unit>{U}) is allocated by PyTorch,.*?and (?P<unallocated>{S}) ?(?P<unallocated_unit>{U}) is reserved by PyTorch but unallocated",
    },
    // PyTorch 2.x, the line cut before its allocator's figures.
    Pattern {
        framework: Framework::PyTorch,
        kind: Kind::OutOfMemory,
        regex: r"(?:CUDA|HIP) out of memory\. Tried to allocate (?P<request>{S}) ?(?P<request_unit>{U})\. GPU \d+ has a total capac\w* of (?P<total>{S}) ?(?P<total_unit>{U}) of which (?P<free>{S}) ?(?P<free_unit>{U}) is free",
    },
    // PyTorch 1.x: "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB
    // total capacity; 20.12 GiB already allocated; 1.02 GiB free; 21.50 GiB reserved in
    // total by PyTorch)", before 1.5 "... 4.68 MiB cached)", and with a per-process cap
    // (`torch.cuda.set_per_process_memory_fraction`) "... 1.05 GiB allowed; ...".
    Pattern {
        framework: Framework::PyTorch,
        kind: Kind::OutOfMemory,
        regex: r"Tried to allocate (?P<request>{S}) ?(?P<request_unit>{U}) \(GPU \d+; (?P<total>{S}) ?(?P<total_unit>{U}) total capacity; (?P<allocated>{S}) ?(?P<allocated_unit>{U}) already allocated; (?P<free>{S}) ?(?P<free_unit>{U}) free;(?: (?P<limit>{S}) ?(?P<limit_unit>{U}) allowed;)? (?P<reserved>{S}) ?(?P<reserved_unit>{U}) (?:reserved in total|cached)",
    },
    // PyTorch 1.x, the line cut before what it reserved.
    Pattern {
        framework: Framework::PyTorch,
        kind: Kind::OutOfMemory,
        regex: r"Tried to allocate (?P<request>{S}) ?(?P<request_unit>{U}) \(GPU \d+; (?P<total>{S}) ?(?P<total_unit>{U}) total capacity; (?P<allocated>{S}) ?(?P<allocated_unit>{U}) already allocated; (?P<free>{S}) ?(?P<free_unit>{U}) free",
    },
    // PyTorch with less said: "CUDA out of memory. Tried to allocate 2.00 GiB".
    Pattern {
        framework: Framework::PyTorch,
        kind: Kind::OutOfMemory,
        regex: r"(?:CUDA|HIP) out of memory\. Tried to allocate (?P<request>{S}) ?(?P<request_unit>{U})",
    },
    // TensorFlow's BFC allocator: "Allocator (GPU_0_bfc) ran out of memory trying to
    // allocate 1.00GiB (rounded to 1073741824)".
    Pattern {
        framework: Framework::TensorFlow,
        kind: Kind::OutOfMemory,
        regex: r"ran out of memory trying to allocate (?P<request>{S}) ?(?P<request_unit>{U})",
    },
    // TensorFlow: "ResourceExhaustedError: OOM when allocating tensor with shape[...]".
    Pattern {
        framework: Framework::TensorFlow,
        kind: Kind::OutOfMemory,
        regex: r"OOM when allocating tensor",
    },
    // JAX and XLA: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate
    // 17179869184 bytes."
    Pattern {
        framework: Framework::Jax,
        kind: Kind::OutOfMemory,
        regex: r"RESOURCE_EXHAUSTED: Out of memory (?:while trying to allocate|allocating) (?P<request>{S}) ?(?P<request_unit>{U})",
    },
    Pattern {
        framework: Framework::Jax,
        kind: Kind::OutOfMemory,
        regex: r"RESOURCE_EXHAUSTED: Out of memory",
    },
    // wgpu's validation: "Buffer size 68719476736 is greater than the maximum buffer
    // size (268435456)".
    Pattern {
        framework: Framework::Wgpu,
        kind: Kind::Refused,
        regex: r"[Bb]uffer size (?P<request>[0-9]+) is greater than the maximum buffer size \(?(?P<limit>[0-9]+)\)?",
    },
    // wgpu's device: "Not enough memory left." / "OutOfMemory".
    Pattern {
        framework: Framework::Wgpu,
        kind: Kind::OutOfMemory,
        regex: r"Not enough memory left",
    },
    // ggml on CUDA: "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB
    // on device 0: cudaMalloc failed: out of memory".
    Pattern {
        framework: Framework::Ggml,
        kind: Kind::OutOfMemory,
        regex: r"ggml\w*: allocating (?P<request>{S}) ?(?P<request_unit>{U}) on device \d+: \w+ failed",
    },
    // ggml on Vulkan: "ggml_vulkan: Device memory allocation of size 4294967296 failed."
    Pattern {
        framework: Framework::Ggml,
        kind: Kind::OutOfMemory,
        regex: r"ggml\w*: Device memory allocation of size (?P<request>[0-9]+) failed",
    },
    // llama.cpp: "failed to allocate CUDA0 buffer of size 4294967296".
    Pattern {
        framework: Framework::Ggml,
        kind: Kind::OutOfMemory,
        regex: r"failed to allocate \w+ buffer of size (?P<request>[0-9]+)",
    },
    // Blender Cycles: "System is out of GPU memory", "Out of memory in CUDA queue
    // enqueue", "CUDA error: Out of memory in cuMemAlloc_v2(...)".
    Pattern {
        framework: Framework::Blender,
        kind: Kind::OutOfMemory,
        regex: r"(?i)System is out of GPU(?: and shared host)? memory|Out of memory in (?:CUDA|HIP|OptiX|Metal) queue|Out of memory in cu[A-Z]\w*",
    },
    // Direct3D, as Unreal and games say it: a device removed or hung.
    Pattern {
        framework: Framework::Direct3D,
        kind: Kind::DeviceLost,
        regex: r"(?i)DXGI_ERROR_DEVICE_(?:REMOVED|HUNG|RESET)|0x887A000[567]|D3D Device Removed|GPU crashed|D3D device being lost",
    },
    Pattern {
        framework: Framework::Direct3D,
        kind: Kind::OutOfMemory,
        regex: r"DXGI_ERROR_OUT_OF_MEMORY|E_OUTOFMEMORY|Out of video memory",
    },
    // Vulkan's own result codes, as any application prints them.
    Pattern {
        framework: Framework::Vulkan,
        kind: Kind::DeviceLost,
        regex: r"VK_ERROR_DEVICE_LOST",
    },
    Pattern {
        framework: Framework::Vulkan,
        kind: Kind::OutOfMemory,
        regex: r"VK_ERROR_OUT_OF_DEVICE_MEMORY|VK_ERROR_OUT_OF_POOL_MEMORY",
    },
];

/// The patterns, compiled once.
fn compiled() -> &'static [(Regex, &'static Pattern)] {
    static COMPILED: OnceLock<Vec<(Regex, &'static Pattern)>> = OnceLock::new();
    COMPILED.get_or_init(|| {
        PATTERNS
            .iter()
            .filter_map(|p| {
                let text = p.regex.replace("{S}", SIZE).replace("{U}", UNIT);
                // Constant patterns, each checked by this module's tests.
                Regex::new(&text).ok().map(|r| (r, p))
            })
            .collect()
    })
}

/// What a line of an application's output says, in facts; None where no framework's
/// words are in it.
pub fn read(line: &str) -> Option<Said> {
    compiled().iter().find_map(|(regex, p)| {
        let c = regex.captures(line)?;
        let get = |name: &str| named_size(&c, name);
        let allocated = get("allocated");
        let reserved = get("reserved").or_else(|| Some(allocated? + get("unallocated")?));
        Some(Said {
            framework: p.framework,
            kind: p.kind,
            facts: Facts {
                request_bytes: get("request"),
                total_bytes: get("total"),
                free_bytes: get("free"),
                allocated_bytes: allocated,
                reserved_bytes: reserved,
                unallocated_bytes: get("unallocated"),
                limit_bytes: get("limit"),
                request_elements: None,
            },
        })
    })
}

/// What a line asks for, whatever framework's words it is in: a size in bytes it names
/// (a number with a unit, `64.00 GiB`, `68719476736 bytes`, or a bare number right after
/// a word of size or allocation, `size 68719476736`), or a shape (`(17179869184,) is not
/// a valid shape`), whose elements are at least a byte each. A number in no such place (an
/// index, a code, a count of steps) is no size. The largest such size, and the shape's
/// elements where a shape said it.
pub fn requested(line: &str) -> Option<(u64, Option<u64>)> {
    static SIZED: OnceLock<Option<[Regex; 3]>> = OnceLock::new();
    let [unit, worded, shape] = SIZED
        .get_or_init(|| {
            let unit = Regex::new(&format!(r"\b(?P<n>{SIZE}) ?(?P<u>{UNIT})\b")).ok()?;
            let worded = Regex::new(
                r"(?i)\b(?:size|sized|bytes|allocat\w*|request\w*|reserve)\b(?:\s+of)?[\s:=(]{1,3}(?P<n>[0-9]{4,})\b(?:\s*(?P<u>[KMGT]i?B|bytes|B)\b)?",
            )
            .ok()?;
            let shape = Regex::new(
                r"(?i)\((?P<dims>[0-9]+(?:\s*,\s*[0-9]+)*)\s*,?\s*\)[^()\n]{0,40}?\bshape\b|\bshape\b[^()\n0-9]{0,20}[(\[](?P<dims2>[0-9]+(?:\s*,\s*[0-9]+)*)\s*,?\s*[)\]]",
            )
            .ok()?;
            Some([unit, worded, shape])
        })
        .as_ref()?;
    let mut sizes: Vec<(u64, Option<u64>)> = Vec::new();
    for c in unit.captures_iter(line).chain(worded.captures_iter(line)) {
        let n = c.name("n").map_or("", |m| m.as_str());
        let u = c.name("u").map_or("", |m| m.as_str());
        sizes.extend(size(n, u).map(|b| (b, None)));
    }
    for c in shape.captures_iter(line) {
        let Some(dims) = c.name("dims").or_else(|| c.name("dims2")) else {
            continue;
        };
        let elements = dims
            .as_str()
            .split(',')
            .map(|d| d.trim().parse::<u64>().ok())
            .try_fold(1u64, |acc, d| acc.checked_mul(d?));
        sizes.extend(elements.map(|e| (e, Some(e))));
    }
    sizes.into_iter().max_by_key(|s| s.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(compiled().len(), PATTERNS.len());
    }

    #[test]
    fn pytorch_says_what_it_asked_for_had_and_cached() {
        let new = read("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this process has 77.63 GiB memory in use. Of the allocated memory 60.00 GiB is allocated by PyTorch, and 16.00 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.").unwrap();
        assert_eq!(new.framework, Framework::PyTorch);
        assert_eq!(new.kind, Kind::OutOfMemory);
        assert_eq!(new.facts.request_bytes, Some(2 * GIB));
        assert_eq!(new.facts.free_bytes, Some(3 * GIB / 2));
        assert_eq!(new.facts.allocated_bytes, Some(60 * GIB));
        assert_eq!(new.facts.reserved_bytes, Some(76 * GIB));
        assert_eq!(new.cached_bytes(), Some(16 * GIB));
        let old = read("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.65 GiB total capacity; 20.12 GiB already allocated; 1.02 GiB free; 21.50 GiB reserved in total by PyTorch)").unwrap();
        assert_eq!(old.facts.request_bytes, Some(2 * GIB));
        assert_eq!(old.facts.total_bytes, Some(size("23.65", "GiB").unwrap()));
        assert_eq!(
            old.cached_bytes(),
            Some(size("21.50", "GiB").unwrap() - size("20.12", "GiB").unwrap())
        );
        let hip = read("HIP out of memory. Tried to allocate 512.00 MiB").unwrap();
        assert_eq!(hip.facts.request_bytes, Some(512 * MIB));
        assert_eq!(hip.cached_bytes(), None);
    }

    #[test]
    fn each_framework_s_words_are_read_and_a_near_miss_is_not() {
        let cases: [(&str, Framework, Kind, Option<u64>); 11] = [
            (
                "tensorflow: Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.00GiB (rounded to 1073741824)",
                Framework::TensorFlow,
                Kind::OutOfMemory,
                Some(GIB),
            ),
            (
                "ResourceExhaustedError: OOM when allocating tensor with shape[8192,8192] and type float",
                Framework::TensorFlow,
                Kind::OutOfMemory,
                None,
            ),
            (
                "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
                Framework::Jax,
                Kind::OutOfMemory,
                Some(16 * GIB),
            ),
            (
                "wgpu error: Validation Error: Buffer size 68719476736 is greater than the maximum buffer size (268435456)",
                Framework::Wgpu,
                Kind::Refused,
                Some(64 * GIB),
            ),
            (
                "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of memory",
                Framework::Ggml,
                Kind::OutOfMemory,
                Some(4 * GIB),
            ),
            (
                "ggml_vulkan: Device memory allocation of size 4294967296 failed.",
                Framework::Ggml,
                Kind::OutOfMemory,
                Some(4 * GIB),
            ),
            (
                "llama_model_load: error: failed to allocate CUDA0 buffer of size 4294967296",
                Framework::Ggml,
                Kind::OutOfMemory,
                Some(4 * GIB),
            ),
            (
                "Error: System is out of GPU memory",
                Framework::Blender,
                Kind::OutOfMemory,
                None,
            ),
            (
                "LogD3D12RHI: Error: GPU crashed or D3D Device Removed.",
                Framework::Direct3D,
                Kind::DeviceLost,
                None,
            ),
            (
                "Unreal Engine is exiting due to D3D device being lost. (Error: 0x887A0006 - 'HUNG')",
                Framework::Direct3D,
                Kind::DeviceLost,
                None,
            ),
            (
                "vkQueueSubmit failed: VK_ERROR_DEVICE_LOST",
                Framework::Vulkan,
                Kind::DeviceLost,
                None,
            ),
        ];
        for (line, framework, kind, request) in cases {
            let said = read(line).unwrap_or_else(|| panic!("not read: {line}"));
            assert_eq!((said.framework, said.kind), (framework, kind), "{line}");
            assert_eq!(said.facts.request_bytes, request, "{line}");
        }
        let wgpu =
            read("Buffer size 68719476736 is greater than the maximum buffer size (268435456)")
                .unwrap();
        assert_eq!(wgpu.facts.limit_bytes, Some(256 * MIB));
        // The near misses: lines that speak of memory without a GPU's failure.
        for line in [
            "epoch 3: allocated 2.00 GiB of pinned host memory",
            "checking buffer size 1024 against the maximum",
            "torch.cuda.memory_reserved() = 21.50 GiB",
            "loss 0.31, out of 1000 steps",
        ] {
            assert_eq!(read(line), None, "{line}");
        }
    }

    #[test]
    fn any_framework_s_size_is_read_and_a_number_that_is_no_size_is_not() {
        // Sizes, in the words of frameworks no pattern knows.
        for (line, asked) in [
            (
                "RuntimeError: requested allocation of 68719476736 exceeds what the device supports",
                (64 * GIB, None),
            ),
            (
                "MyEngine: cannot create buffer: 64.00 GiB is too large",
                (64 * GIB, None),
            ),
            ("error: buffer size: 8589934592", (8 * GIB, None)),
            (
                "taichi.lang.exception.TaichiRuntimeError: (17179869184,) is not a valid shape for ndarray",
                (16 * GIB, Some(16 * GIB)),
            ),
            (
                "ValueError: shape [65536, 65536] is too large",
                (4 * GIB, Some(4 * GIB)),
            ),
        ] {
            assert_eq!(requested(line), Some(asked), "{line}");
        }
        // The near misses: numbers that are an index, a code, a count or a step.
        for line in [
            "IndexError: index 17179869184 is out of bounds for axis 0",
            "RuntimeError: CUDA error 700 at kernel.cu:12345",
            "error: step 3000000000 failed to converge",
            "Traceback (most recent call last): (3, 4) in main",
        ] {
            assert_eq!(requested(line), None, "{line}");
        }
    }
}
