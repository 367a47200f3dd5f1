//! Telemetry: a sidecar thread samples every source on a fixed schedule and snapshots
//! counters around every phase, into `telemetry.jsonl` beside the events.
//!
//! Telemetry sits below the inventory: it reads devices (NVML, sysfs, the kernel log) and
//! imports nothing of `crate::inventory`, which builds its list of the machine's GPUs on
//! NVML's listing here.

pub mod eventlog;
pub mod fdinfo;
pub mod gpu_counters;
pub mod gpu_metrics;
pub mod kmsg;
pub mod nvml;
pub mod process;
pub mod reading;
pub mod record;
pub mod replay;
pub mod said;
pub mod sidecar;
pub mod signals;
pub mod summary;
pub mod sysfs;
pub mod throttle;
pub mod xid_line;

use self::record::{Readings, TelemetryData};

/// The sampling interval of a run unless a flag or profile says otherwise.
pub const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(200);

/// A telemetry source (NVML, sysfs, the kernel log, a recorded file): one module behind
/// this trait, and one line in [`live_sources_for`] for a live one.
pub trait Source: Send {
    /// Stable name, written into every record.
    fn name(&self) -> &'static str;

    /// What this source cannot read here, and why, as far as it knows now: some sources
    /// find out only by trying, in `start`. Empty when it reads everything it covers.
    fn status(&self) -> Vec<Gap> {
        Vec::new()
    }

    /// Who a device is, as this source sees it (name, serial, VBIOS, driver); None for a
    /// device it does not cover or cannot tell.
    fn identity(&self, _device: usize) -> Option<Readings> {
        None
    }

    /// How the source found each device it was given, or why it did not.
    fn matches(&self) -> Vec<Match> {
        Vec::new()
    }

    /// Once at the start: the records of each device's identity and of what cannot be
    /// read here (said once), and any history worth keeping (Xids logged before the run).
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

/// What a source cannot read here, and why: a fact said once (a record at the start, a
/// note in the report), never a reading of zero.
#[derive(Debug, Clone, PartialEq)]
pub struct Gap {
    /// The device it concerns; None for the source as a whole.
    pub device: Option<usize>,
    /// One sentence, with the fix where there is one.
    pub message: String,
    /// The signals therefore missing (`nvml`, `xid`, `pcie_link`, ...).
    pub missing: Vec<String>,
    /// Why, as a stable word the verdict can act on (one of [`cause`]), where the source
    /// knows.
    pub cause: Option<String>,
}

impl Gap {
    /// The record that says it.
    pub fn record(self) -> (Option<usize>, TelemetryData) {
        (
            self.device,
            TelemetryData::Unavailable {
                message: self.message,
                missing: self.missing,
                cause: self.cause,
            },
        )
    }
}

/// The stable words a [`Gap`] gives as its cause: recorded in `telemetry.jsonl`, and
/// acted on by the verdict and `kiln health`.
pub mod cause {
    /// No NVML library: no NVIDIA driver installed.
    pub const NVML_MISSING: &str = "nvml_missing";
    /// The NVIDIA libraries are there, the kernel driver is not loaded.
    pub const DRIVER_NOT_LOADED: &str = "driver_not_loaded";
    /// NVML and the kernel driver differ in version (upgraded without a reboot).
    pub const VERSION_MISMATCH: &str = "version_mismatch";
    /// Access refused.
    pub const NO_PERMISSION: &str = "no_permission";
    /// NVML failed to start for another reason.
    pub const NVML_FAILED: &str = "nvml_failed";
    /// NVML works but has no device with this device's UUID or PCI address.
    pub const NO_NVML_DEVICE: &str = "no_nvml_device";
    /// Neither `/dev/kmsg` nor `journalctl -k` can be read: no Xid line is seen. Its own
    /// word, so that a kernel log kiln may not read is never taken for NVML refusing it.
    pub const KERNEL_LOG_UNREADABLE: &str = "kernel_log_unreadable";
    /// The prefix of the cause of a GPU whose Xid and ECC events NVML will not watch
    /// (`events_no_permission`, ...).
    pub const EVENTS_REFUSED: &str = "events_";
    /// Every cause of NVML not starting: with any of them nothing NVML says is known.
    pub const NVML_DOWN: [&str; 5] = [
        NVML_MISSING,
        DRIVER_NOT_LOADED,
        VERSION_MISMATCH,
        NO_PERMISSION,
        NVML_FAILED,
    ];
}

/// kiln's own processes beside this one (the run's workers, by pid): another process on a
/// GPU is a tenant, kiln's own are not.
static OWN_PROCESSES: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Records that `pid` is one of kiln's own processes (a worker it started).
pub fn claim_process(pid: u32) {
    if let Ok(mut own) = OWN_PROCESSES.lock()
        && !own.contains(&pid)
    {
        own.push(pid);
    }
}

/// True for this process and every process claimed with [`claim_process`].
pub fn is_own_process(pid: u32) -> bool {
    pid == std::process::id() || OWN_PROCESSES.lock().is_ok_and(|own| own.contains(&pid))
}

/// How a source matched a device it was given to its own device, or why it did not.
#[derive(Debug, Clone, PartialEq)]
pub struct Match {
    /// The device's index in the run.
    pub device: usize,
    /// The source's own index of the device (NVML's index), when matched.
    pub index: Option<u32>,
    /// `uuid`, `pci`, or why there is no match.
    pub by: String,
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
    /// NVML's index, where the inventory took the GPU from NVML's list: a GPU lost before
    /// kiln started answers nothing else, and is still this GPU.
    pub nvml_index: Option<u32>,
    /// Vulkan's `deviceLUID`, where the driver gives one (Windows): how the OS's GPU
    /// counters name the adapter.
    pub luid: Option<[u8; 8]>,
}

impl From<&crate::gpu::DeviceInfo> for Target {
    fn from(d: &crate::gpu::DeviceInfo) -> Target {
        Target {
            index: d.index,
            name: d.name.clone(),
            uuid: Some(d.device_uuid.clone()),
            pci_address: d.pci_address.clone(),
            nvml_index: None,
            luid: d.luid,
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
    // Every live source, in the order they are read: adding one is one line here.
    let mut sources: Vec<Box<dyn Source>> = vec![
        Box::new(nvml::NvmlSource::for_targets(devices)),
        Box::new(kmsg::KmsgSource::for_targets(devices)),
        Box::new(gpu_counters::GpuCountersSource::for_targets(devices)),
    ];
    // Under the machine's root, as the inventory reads it (a fixture tree in tests), where
    // the kernel has sysfs.
    if crate::platform::pci::SYSFS {
        let root = sysfs::system_root();
        sources.insert(1, Box::new(sysfs::SysfsSource::for_targets(&root, devices)));
        sources.push(Box::new(fdinfo::FdinfoSource::for_targets(&root, devices)));
    }
    // What a source as a whole cannot read is a note; a device's gaps are its records'.
    let mut notes: Vec<String> = sources
        .iter()
        .flat_map(|s| s.status())
        .filter(|g| g.device.is_none())
        .map(|g| g.message)
        .collect();
    for d in devices.iter().filter(|d| d.pci_address.is_none()) {
        notes.push(format!(
            "device {} ({}) reports no PCI address: {}",
            d.index,
            d.name,
            if crate::platform::pci::SYSFS {
                "no sysfs PCIe link, AER or hwmon telemetry, and no kernel-log Xid can be tied to it"
            } else {
                "no Xid or PCIe error of the event log can be tied to it"
            }
        ));
    }
    (sources, notes)
}

/// (index, PCI address) of the targets that have one: the devices the sources that find
/// a device by its place on the bus (sysfs, the kernel log) can cover.
fn with_pci(devices: &[Target]) -> Vec<(usize, String)> {
    devices
        .iter()
        .filter_map(|d| d.pci_address.clone().map(|p| (d.index, p)))
        .collect()
}
