//! What NVML says of a GPU once: its identity (names, UUID, serial, VBIOS, driver), the
//! properties that never change while kiln runs, which NVML device is which, and the
//! machine's inventory of GPUs as NVML lists them.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureThreshold};
use nvml_wrapper::error::NvmlError;

use super::gauges::other_processes;
use super::{NvmlSource, explain, num, settled, text};
use crate::platform;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::{Gap, Match, Target, signals};

/// Normalises a PCI bus id (`00000000:3B:00.0`) to `domain:bus:device.function` in the
/// form Vulkan's `VK_EXT_pci_bus_info` gives (`0000:3b:00.0`).
pub fn normalise_bus_id(id: &str) -> Option<String> {
    let (domain, rest) = id.trim().split_once(':')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    Some(format!("{domain:04x}:{}", rest.to_ascii_lowercase()))
}

/// A PCI address as Vulkan's extension gives it (`0000:3b:00.0`) written as NVML and
/// dcgm-exporter write it: an eight-digit domain, upper-case hex (`00000000:3B:00.0`).
pub fn nvml_bus_id(address: &str) -> Option<String> {
    let (domain, rest) = address.split_once(':')?;
    let (bus, rest) = rest.split_once(':')?;
    let (device, function) = rest.split_once('.')?;
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    Some(format!(
        "{:08X}:{:02X}:{:02X}.{:X}",
        hex(domain)?,
        hex(bus)?,
        hex(device)?,
        hex(function)?
    ))
}

impl NvmlSource {
    pub(super) fn identity_at(nvml: &Nvml, index: u32) -> Readings {
        let mut f = Readings::new();
        let Ok(d) = nvml.device_by_index(index) else {
            return f;
        };
        f.insert(
            signals::NVML_INDEX.name.into(),
            Reading::Number(f64::from(index)),
        );
        f.insert(signals::NAME.name.into(), text(d.name()));
        f.insert(signals::UUID.name.into(), text(d.uuid()));
        f.insert(signals::SERIAL.name.into(), text(d.serial()));
        f.insert(
            signals::BOARD_PART_NUMBER.name.into(),
            text(d.board_part_number()),
        );
        f.insert(signals::VBIOS.name.into(), text(d.vbios_version()));
        f.insert(
            signals::INFOROM_IMAGE.name.into(),
            text(d.info_rom_image_version()),
        );
        f.insert(
            signals::PCI_BUS_ID.name.into(),
            text(d.pci_info().map(|p| p.bus_id)),
        );
        // The subsystem id holds the board maker's vendor id in its low 16 bits.
        f.insert(
            signals::PCI_SUBSYSTEM_VENDOR_ID.name.into(),
            match d.pci_info().map(|p| p.pci_sub_system_id) {
                Ok(Some(id)) => Reading::Number(f64::from(id & 0xffff)),
                Ok(None) => Reading::not_supported(),
                Err(e) => num(Err(e)),
            },
        );
        f.insert(
            signals::MINOR_NUMBER.name.into(),
            num(platform::nvidia::minor_number(&d).map(f64::from)),
        );
        f.insert(
            signals::DRIVER_VERSION.name.into(),
            text(nvml.sys_driver_version()),
        );
        f.insert(
            signals::CUDA_DRIVER_VERSION.name.into(),
            num(nvml.sys_cuda_driver_version().map(f64::from)),
        );
        f.insert(
            signals::ECC_ENABLED.name.into(),
            text(
                d.is_ecc_enabled()
                    .map(|e| format!("{}", e.currently_enabled)),
            ),
        );
        // A mode change waiting for a reset: the card is tested in a mode it will leave.
        f.insert(
            signals::ECC_ENABLED_PENDING.name.into(),
            text(d.is_ecc_enabled().map(|e| format!("{}", e.pending_enabled))),
        );
        for (key, threshold) in [
            (
                signals::TEMP_SLOWDOWN_C.name,
                TemperatureThreshold::Slowdown,
            ),
            (
                signals::TEMP_SHUTDOWN_C.name,
                TemperatureThreshold::Shutdown,
            ),
            (signals::TEMP_GPU_MAX_C.name, TemperatureThreshold::GpuMax),
            (
                signals::TEMP_MEM_MAX_C.name,
                TemperatureThreshold::MemoryMax,
            ),
        ] {
            f.insert(
                key.into(),
                num(d.temperature_threshold(threshold).map(f64::from)),
            );
        }
        // Settings that shape how the GPU serves work: said where a configuration finding
        // names what holds the card.
        f.insert(
            signals::PERSISTENCE_MODE.name.into(),
            text(
                platform::nvidia::persistence_mode(&d)
                    .map(|on| if on { "on" } else { "off" }.to_owned()),
            ),
        );
        f.insert(
            signals::COMPUTE_MODE.name.into(),
            text(d.compute_mode().map(|m| {
                use nvml_wrapper::enum_wrappers::device::ComputeMode;
                match m {
                    ComputeMode::Default => "default",
                    ComputeMode::ExclusiveThread => "exclusive_thread",
                    ComputeMode::Prohibited => "prohibited",
                    ComputeMode::ExclusiveProcess => "exclusive_process",
                }
                .to_owned()
            })),
        );
        f.insert(signals::OTHER_PROCESSES.name.into(), other_processes(&d));
        f.insert(
            signals::NVLINK_SWITCH_LINKS.name.into(),
            num(nvlink_switch_links(&d)),
        );
        f
    }
}

/// How many of the device's NVLinks end at an NVSwitch: asked link by link until the
/// driver has no more (`NotSupported` or `InvalidArg`, as for the links' state); a GPU
/// without NVLink answers for none.
fn nvlink_switch_links(d: &nvml_wrapper::Device) -> Result<f64, NvmlError> {
    use super::ffi::{NvlinkRemote, nvlink_remote};
    let mut switches = 0u32;
    for link in 0..super::counters::NVLINK_MAX_LINKS {
        match nvlink_remote(d, link) {
            Ok(remote) => switches += u32::from(remote == NvlinkRemote::Switch),
            Err(NvmlError::NotSupported | NvmlError::InvalidArg) if link > 0 => break,
            Err(e) => return Err(e),
        }
    }
    Ok(f64::from(switches))
}

/// What does not change while kiln runs: the clocks' maximums, the default power limit and
/// the link's maximum. Read once per device and laid into every sample.
fn fixed_at(nvml: &Nvml, index: u32) -> Readings {
    let mut f = Readings::new();
    let d = match nvml.device_by_index(index) {
        Ok(d) => d,
        Err(e) => {
            f.insert(signals::CLOCK_SM_MAX_MHZ.name.into(), num(Err(e)));
            return f;
        }
    };
    for (max, clock) in [
        (signals::CLOCK_SM_MAX_MHZ, Clock::SM),
        (signals::CLOCK_MEM_MAX_MHZ, Clock::Memory),
        (signals::CLOCK_GRAPHICS_MAX_MHZ, Clock::Graphics),
    ] {
        f.insert(max.name.into(), num(d.max_clock_info(clock).map(f64::from)));
    }
    f.insert(
        signals::POWER_LIMIT_DEFAULT_W.name.into(),
        num(d
            .power_management_limit_default()
            .map(|mw| f64::from(mw) / 1e3)),
    );
    // The application clock target, against its default: a target set below it holds the
    // card (with the applications-clocks reason) until `nvidia-smi -rac`.
    for (signal, read) in [
        (
            signals::CLOCK_SM_APP_MHZ,
            d.applications_clock(Clock::Graphics),
        ),
        (
            signals::CLOCK_SM_APP_DEFAULT_MHZ,
            d.default_applications_clock(Clock::Graphics),
        ),
    ] {
        f.insert(signal.name.into(), num(read.map(f64::from)));
    }
    f.insert(
        signals::PCIE_GEN_MAX.name.into(),
        num(d.max_pcie_link_gen().map(f64::from)),
    );
    f.insert(
        signals::PCIE_WIDTH_MAX.name.into(),
        num(d.max_pcie_link_width().map(f64::from)),
    );
    f
}

/// The fixed properties of `device` (NVML index `index`): from `cache`, else read, and kept
/// there once settled.
pub(super) fn fixed_cached(
    cache: &mut std::collections::BTreeMap<usize, Readings>,
    nvml: &Nvml,
    device: usize,
    index: u32,
) -> Readings {
    if let Some(f) = cache.get(&device) {
        return f.clone();
    }
    let f = fixed_at(nvml, index);
    if settled(&f) {
        cache.insert(device, f.clone());
    }
    f
}

pub(super) fn match_device(nvml: &Nvml, info: &Target) -> Match {
    let count = nvml.device_count().unwrap_or(0);
    let mut by_pci = None;
    for i in 0..count {
        let d = match nvml.device_by_index(i) {
            Ok(d) => d,
            // Lost before kiln started: known only by the index it was listed under, and
            // watched so that its loss is recorded, never taken for a GPU NVML lacks.
            Err(NvmlError::GpuLost) if info.nvml_index == Some(i) => {
                return Match {
                    device: info.index,
                    index: Some(i),
                    by: "nvml_index".into(),
                };
            }
            Err(_) => continue,
        };
        if let Ok(uuid) = d.uuid() {
            let body = uuid.trim_start_matches("GPU-").to_ascii_lowercase();
            if info.uuid.as_deref() == Some(body.as_str()) {
                return Match {
                    device: info.index,
                    index: Some(i),
                    by: "uuid".into(),
                };
            }
        }
        if let (Some(pci), Ok(p)) = (&info.pci_address, d.pci_info())
            && normalise_bus_id(&p.bus_id).as_deref() == Some(pci.as_str())
        {
            by_pci = Some(i);
        }
    }
    match by_pci {
        Some(i) => Match {
            device: info.index,
            index: Some(i),
            by: "pci".into(),
        },
        None => Match {
            device: info.index,
            index: None,
            by: "no NVML device has this UUID or PCI address".into(),
        },
    }
}

pub(super) fn nvml_uuid(nvml: &Nvml, index: Option<u32>) -> Option<String> {
    let d = nvml.device_by_index(index?).ok()?;
    Some(
        d.uuid()
            .ok()?
            .trim_start_matches("GPU-")
            .to_ascii_lowercase(),
    )
}

/// One GPU as NVML lists it, for the machine's inventory of GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct NvmlGpu {
    /// NVML's index of the GPU.
    pub index: u32,
    /// NVML's UUID (`GPU-xxxxxxxx-...`), when it answers.
    pub uuid: Option<String>,
    /// Marketing name, when it answers.
    pub name: Option<String>,
    /// PCI address in the form Vulkan gives (`0000:3b:00.0`), when it answers.
    pub pci_address: Option<String>,
    /// The 16-bit PCI device id, when it answers.
    pub pci_device_id: Option<u32>,
    /// Whether MIG mode is on now; None where the GPU has no MIG.
    pub mig_enabled: Option<bool>,
}

/// Lists every GPU NVML counts. A GPU whose handle cannot be got (a GPU fallen off the bus
/// shows this way) still yields an entry, with only its index known.
pub fn inventory() -> Result<Vec<NvmlGpu>, Gap> {
    let nvml = Nvml::init().map_err(|e| explain(&e))?;
    let count = nvml.device_count().map_err(|e| explain(&e))?;
    let gpus = (0..count)
        .map(|index| {
            let Ok(d) = nvml.device_by_index(index) else {
                return NvmlGpu {
                    index,
                    uuid: None,
                    name: None,
                    pci_address: None,
                    pci_device_id: None,
                    mig_enabled: None,
                };
            };
            let pci = d.pci_info().ok();
            NvmlGpu {
                index,
                uuid: d.uuid().ok(),
                name: d.name().ok(),
                pci_address: pci.as_ref().and_then(|p| normalise_bus_id(&p.bus_id)),
                // NVML packs the device id in the high half and the vendor id in the low.
                pci_device_id: pci.map(|p| p.pci_device_id >> 16),
                mig_enabled: d.mig_mode().ok().map(|m| m.current == 1),
            }
        })
        .collect();
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_normalise_to_the_vulkan_form() {
        assert_eq!(
            normalise_bus_id("00000000:3B:00.0").as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(
            normalise_bus_id("0000:05:00.0").as_deref(),
            Some("0000:05:00.0")
        );
        assert_eq!(normalise_bus_id("garbage"), None);
    }

    #[test]
    fn pci_addresses_are_written_as_nvml_writes_them() {
        assert_eq!(
            nvml_bus_id("0000:3b:00.0").as_deref(),
            Some("00000000:3B:00.0")
        );
        assert_eq!(
            nvml_bus_id("0001:c1:1f.7").as_deref(),
            Some("00000001:C1:1F.7")
        );
        assert_eq!(nvml_bus_id("3b:00.0"), None);
        assert_eq!(nvml_bus_id("zz:zz:zz.z"), None);
        // The two forms go both ways.
        assert_eq!(
            nvml_bus_id("0000:3b:00.0")
                .and_then(|id| normalise_bus_id(&id))
                .as_deref(),
            Some("0000:3b:00.0")
        );
    }
}
