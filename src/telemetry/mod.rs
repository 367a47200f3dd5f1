//! Telemetry: a sidecar thread samples every source on a fixed schedule and snapshots
//! counters around every phase, into `telemetry.jsonl` beside the events.
//!
//! Telemetry sits below the inventory: it reads devices (NVML, sysfs, the kernel log) and
//! imports nothing of `crate::inventory`, which builds its list of the machine's GPUs on
//! NVML's listing here.

pub mod kmsg;
pub mod nvml;
pub mod record;
pub mod replay;
pub mod sidecar;
pub mod summary;
pub mod sysfs;
pub mod throttle;

use self::record::{Readings, TelemetryData};

/// A telemetry source (NVML, sysfs, the kernel log, a recorded file).
pub trait Source: Send {
    /// Stable name, written into every record.
    fn name(&self) -> &'static str;

    /// Once at the start: identity, and what cannot be read here (said once).
    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        Vec::new()
    }

    /// Gauges (and events since the last call) for every device the source covers.
    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)>;

    /// Counters per device, read at a phase boundary.
    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        Vec::new()
    }
}

/// A device the live sources watch: its place in the run and how to find it. A Vulkan
/// device, or a GPU of the machine's inventory that Vulkan cannot see (`kiln health`).
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The index every record names it by.
    pub index: usize,
    /// Its name, for notes.
    pub name: String,
    /// UUID body, lower case without `GPU-` (`deviceUUID` in Vulkan's terms), when known.
    pub uuid: Option<String>,
    /// PCI address `0000:05:00.0`, when known.
    pub pci_address: Option<String>,
}

impl From<&crate::gpu::DeviceInfo> for Target {
    fn from(d: &crate::gpu::DeviceInfo) -> Target {
        Target {
            index: d.index,
            name: d.name.clone(),
            uuid: Some(d.device_uuid.clone()),
            pci_address: d.pci_address.clone(),
        }
    }
}

/// The live sources for these Vulkan devices, and the facts about what is missing (each
/// said once, for the report's notes).
pub fn live_sources(devices: &[crate::gpu::DeviceInfo]) -> (Vec<Box<dyn Source>>, Vec<String>) {
    let targets: Vec<Target> = devices.iter().map(Target::from).collect();
    live_sources_for(&targets)
}

/// The live sources for these targets, and the facts about what is missing.
pub fn live_sources_for(devices: &[Target]) -> (Vec<Box<dyn Source>>, Vec<String>) {
    let mut notes = Vec::new();
    let nvml = nvml::NvmlSource::for_targets(devices);
    if let nvml::NvmlStatus::Missing { message, .. } = nvml.status() {
        notes.push(message.clone());
    }
    let with_pci: Vec<(usize, String)> = devices
        .iter()
        .filter_map(|d| d.pci_address.clone().map(|p| (d.index, p)))
        .collect();
    for d in devices.iter().filter(|d| d.pci_address.is_none()) {
        notes.push(format!(
            "device {} ({}) reports no PCI address: no sysfs PCIe link, AER or hwmon telemetry, and no kernel-log Xid can be tied to it",
            d.index, d.name
        ));
    }
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(nvml),
        Box::new(sysfs::SysfsSource::new(
            // The machine as the inventory reads it (a fixture tree in tests).
            &sysfs::system_root(),
            with_pci.clone(),
        )),
        Box::new(kmsg::KmsgSource::new(&with_pci)),
    ];
    (sources, notes)
}
