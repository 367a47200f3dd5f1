//! The emulated card: its identity and memory model from the `KILN_EMULATE_*` environment,
//! and the event log.

use std::io::Write;

use ash::vk;

/// 1 GiB, the default size of both fake heaps.
const GIB: u64 = 1 << 30;
/// The classic BAR window of a card without resizable BAR.
const SMALL_BAR_BYTES: u64 = 256 << 20;

/// How much of VRAM the CPU can map through the PCIe BAR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bar {
    /// No host-visible device-local memory type at all.
    None,
    /// Resizable BAR: all of VRAM is host-visible.
    Rebar,
    /// The 256 MiB window, a heap of its own.
    Small,
}

/// One fake memory type: its flags and heap.
#[derive(Clone, Copy)]
pub struct FakeType {
    pub flags: vk::MemoryPropertyFlags,
    pub heap: u32,
}

/// One fake memory heap.
#[derive(Clone, Copy)]
pub struct FakeHeap {
    pub size: u64,
    pub flags: vk::MemoryHeapFlags,
}

/// What the layer presents, read once per instance.
pub struct Config {
    pub vendor_id: u32,
    pub device_id: u32,
    pub device_name: String,
    /// The driver version as the vendor packs it, when the card states one (else the
    /// driver's own).
    pub driver_version: Option<u32>,
    pub max_storage_range: Option<u32>,
    /// `maxMemoryAllocationCount`, enforced: the allocation past it is refused with
    /// `VK_ERROR_TOO_MANY_OBJECTS`, as drivers that keep the limit low (4096) do.
    pub max_allocations: Option<u32>,
    /// Submissions after which the device is lost (`VK_ERROR_DEVICE_LOST`).
    pub lose_after_submits: Option<u64>,
    /// The device is lost at this Unix time (seconds), as a card falls off the bus at a
    /// moment of the run: `KILN_EMULATE_LOSE_AT_S` after `KILN_FAKE_NVML_EPOCH`, the run's
    /// shared clock.
    pub lose_at_unix_s: Option<f64>,
    /// A watchdog's loss instead of a refused submission: the losing submission is
    /// accepted and the wait for it ends lost after this many milliseconds (Windows' TDR).
    pub loss_wait_ms: Option<u64>,
    /// The card's PCI address (domain, bus, device, function), given through
    /// `VK_EXT_pci_bus_info`, which the layer then advertises.
    pub pci: Option<[u32; 4]>,
    /// The card's UUID (`deviceUUID`), so that Vulkan, NVML and sysfs meet on one.
    pub uuid: Option<[u8; 16]>,
    pub log: Option<std::path::PathBuf>,
    pub heaps: Vec<FakeHeap>,
    pub types: Vec<FakeType>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn bytes(name: &str, default: u64) -> Result<u64, String> {
    match var(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| format!("{name}={v}: expected a positive number of bytes")),
    }
}

impl Config {
    /// Reads the `KILN_EMULATE_*` variables; an unknown value is an error (a test that
    /// misspells a setting must fail, not silently test the default).
    pub fn from_env() -> Result<Config, String> {
        let vendor = var("KILN_EMULATE_VENDOR").unwrap_or_else(|| "nvidia".into());
        let (vendor_id, device_id, device_name) = match vendor.to_ascii_lowercase().as_str() {
            "nvidia" => (0x10DE, 0x2335, "kiln emulated NVIDIA GPU"),
            "amd" => (0x1002, 0x74A1, "kiln emulated AMD GPU"),
            "intel" => (0x8086, 0x56A0, "kiln emulated Intel GPU"),
            _ => {
                return Err(format!(
                    "KILN_EMULATE_VENDOR={vendor}: expected nvidia, amd or intel"
                ));
            }
        };
        let device_name = var("KILN_EMULATE_NAME").unwrap_or_else(|| device_name.to_owned());
        let driver_version = match var("KILN_EMULATE_DRIVER_VERSION") {
            None => None,
            Some(v) => Some(pack_version(vendor_id, &v).ok_or_else(|| {
                format!("KILN_EMULATE_DRIVER_VERSION={v}: expected a dotted version (550.90.07)")
            })?),
        };
        let bar_name = var("KILN_EMULATE_BAR").unwrap_or_else(|| "none".into());
        let bar = match bar_name.to_ascii_lowercase().as_str() {
            "none" => Bar::None,
            "rebar" => Bar::Rebar,
            "small" => Bar::Small,
            _ => {
                return Err(format!(
                    "KILN_EMULATE_BAR={bar_name}: expected none, rebar or small"
                ));
            }
        };
        let vram = bytes("KILN_EMULATE_VRAM_BYTES", GIB)?;
        let host = bytes("KILN_EMULATE_HOST_BYTES", GIB)?;
        let max_storage_range = match var("KILN_EMULATE_MAX_STORAGE_RANGE") {
            None => None,
            Some(v) => Some(v.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                format!("KILN_EMULATE_MAX_STORAGE_RANGE={v}: expected a positive 32-bit number")
            })?),
        };
        let max_allocations = match var("KILN_EMULATE_MAX_ALLOCATIONS") {
            None => None,
            Some(v) => Some(v.parse::<u32>().ok().filter(|&n| n > 0).ok_or_else(|| {
                format!("KILN_EMULATE_MAX_ALLOCATIONS={v}: expected a positive 32-bit number")
            })?),
        };
        let lose_after_submits = match var("KILN_EMULATE_LOSE_AFTER_SUBMITS") {
            None => None,
            Some(v) => Some(v.parse::<u64>().ok().ok_or_else(|| {
                format!("KILN_EMULATE_LOSE_AFTER_SUBMITS={v}: expected a whole number")
            })?),
        };
        let lose_at_unix_s = match var("KILN_EMULATE_LOSE_AT_S") {
            None => None,
            Some(v) => {
                let at: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| *s >= 0.0)
                    .ok_or_else(|| format!("KILN_EMULATE_LOSE_AT_S={v}: expected seconds"))?;
                let epoch: f64 = var("KILN_FAKE_NVML_EPOCH")
                    .and_then(|e| e.parse().ok())
                    .ok_or_else(|| {
                        "KILN_EMULATE_LOSE_AT_S needs KILN_FAKE_NVML_EPOCH, the run's clock"
                            .to_owned()
                    })?;
                Some(epoch + at)
            }
        };
        let loss_wait_ms = match var("KILN_EMULATE_LOSS_WAIT_MS") {
            None => None,
            Some(v) => Some(v.parse::<u64>().ok().ok_or_else(|| {
                format!("KILN_EMULATE_LOSS_WAIT_MS={v}: expected a whole number of milliseconds")
            })?),
        };
        let pci = match var("KILN_EMULATE_PCI_ADDRESS") {
            None => None,
            Some(v) => Some(pci_address(&v).ok_or_else(|| {
                format!("KILN_EMULATE_PCI_ADDRESS={v}: expected domain:bus:device.function (0000:3b:00.0)")
            })?),
        };
        let uuid = match var("KILN_EMULATE_UUID") {
            None => None,
            Some(v) => Some(uuid_bytes(&v).ok_or_else(|| {
                format!("KILN_EMULATE_UUID={v}: expected 32 hex digits (dashes and GPU- allowed)")
            })?),
        };
        let log = std::env::var_os("KILN_EMULATE_LOG")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from);

        use vk::MemoryHeapFlags as H;
        use vk::MemoryPropertyFlags as M;
        let mut heaps = vec![
            FakeHeap {
                size: vram,
                flags: H::DEVICE_LOCAL,
            },
            FakeHeap {
                size: host,
                flags: H::empty(),
            },
        ];
        let mut types = vec![
            FakeType {
                flags: M::DEVICE_LOCAL,
                heap: 0,
            },
            FakeType {
                flags: M::HOST_VISIBLE | M::HOST_COHERENT,
                heap: 1,
            },
            FakeType {
                flags: M::HOST_VISIBLE | M::HOST_COHERENT | M::HOST_CACHED,
                heap: 1,
            },
        ];
        let bar_type = M::DEVICE_LOCAL | M::HOST_VISIBLE | M::HOST_COHERENT;
        match bar {
            Bar::None => {}
            Bar::Rebar => types.push(FakeType {
                flags: bar_type,
                heap: 0,
            }),
            Bar::Small => {
                heaps.push(FakeHeap {
                    size: SMALL_BAR_BYTES,
                    flags: H::DEVICE_LOCAL,
                });
                types.push(FakeType {
                    flags: bar_type,
                    heap: 2,
                });
            }
        }
        Ok(Config {
            vendor_id,
            device_id,
            device_name,
            driver_version,
            max_storage_range,
            max_allocations,
            lose_after_submits,
            lose_at_unix_s,
            loss_wait_ms,
            pci,
            uuid,
            log,
            heaps,
            types,
        })
    }

    /// Appends one event line to the log, when there is one. The file is opened per
    /// line so that several processes can share it.
    pub fn log(&self, line: std::fmt::Arguments) {
        let Some(path) = &self.log else { return };
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            // One write per line: appends of a short line do not interleave.
            let _ = file.write_all(format!("{line}\n").as_bytes());
            let _ = file.flush();
        }
    }
}

/// `0000:3b:00.0` as its four numbers.
fn pci_address(text: &str) -> Option<[u32; 4]> {
    let (domain, rest) = text.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    Some([hex(domain)?, hex(bus)?, hex(device)?, hex(function)?])
}

/// A UUID as NVML or Vulkan writes it (`GPU-6d657361-...`, or the bare 32 digits) as its
/// 16 bytes.
fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let digits: String = text
        .trim_start_matches("GPU-")
        .chars()
        .filter(|c| *c != '-')
        .collect();
    if digits.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(digits.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// A dotted driver version (`550.90.07`) packed as `vendor_id`'s driver packs it in
/// `VkPhysicalDeviceProperties::driverVersion`: NVIDIA 10.8.8.6 bits, others Vulkan's 10.10.12.
fn pack_version(vendor_id: u32, text: &str) -> Option<u32> {
    let parts: Vec<u32> = text
        .split('.')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let part = |i: usize| parts.get(i).copied().unwrap_or(0);
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    Some(if vendor_id == 0x10DE {
        (part(0) << 22) | (part(1) << 14) | (part(2) << 6) | part(3)
    } else {
        (part(0) << 22) | (part(1) << 12) | part(2)
    })
}

/// `device_local|host_visible|...`, the names kiln prints.
pub fn flag_names(flags: vk::MemoryPropertyFlags) -> String {
    use vk::MemoryPropertyFlags as M;
    let names: Vec<&str> = [
        (M::DEVICE_LOCAL, "device_local"),
        (M::HOST_VISIBLE, "host_visible"),
        (M::HOST_COHERENT, "host_coherent"),
        (M::HOST_CACHED, "host_cached"),
        (M::LAZILY_ALLOCATED, "lazily_allocated"),
        (M::PROTECTED, "protected"),
    ]
    .iter()
    .filter(|(f, _)| flags.contains(*f))
    .map(|(_, n)| *n)
    .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join("|")
    }
}
