//! NVIDIA telemetry through NVML: gauges every tick, counters around every phase, Xid and
//! ECC events from an event set on a dedicated thread, and each device's identity.
//! Signals a device does not support are recorded as not supported, never as zero.

/// The NVML calls nvml-wrapper lacks: unsafe FFI, fenced like `gpu/`'s.
#[allow(unsafe_code)]
pub mod ffi;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, MemoryLocation, PcieUtilCounter, PerformancePolicy,
    RetirementCause, TemperatureSensor, TemperatureThreshold,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;

use super::process::Process;
use super::record::{
    Reading, Readings, TelemetryData, XID_FALLEN_OFF_THE_BUS, XidChannel, XidEvent,
};
use super::{Gap, Match, Source, Target, cause};
use super::{signals, throttle};
use crate::gpu::DeviceInfo;
use crate::platform;

/// Field ids without a wrapper method (REFERENCE.md §1).
const FIELD_MEMORY_TEMP: u32 = 82;
const FIELD_REMAPPED_COR: u32 = 142;
const FIELD_REMAPPED_UNC: u32 = 143;
const FIELD_REMAP_PENDING: u32 = 144;
const FIELD_REMAP_FAILURE: u32 = 145;
/// `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`: 0 none, 1 GPU reset, 2 node reboot, 3 drain
/// peer-to-peer, 4 drain and reset.
const FIELD_RECOVERY_ACTION: u32 = 230;

/// The signals NVML would have given: named when NVML is missing.
pub const NVML_SIGNALS: &str = "GPU and HBM temperature, power and power limits, energy, clocks, throttle reasons, \
     ECC, SRAM and row-remapping counters, retired pages, PCIe link and replays, NVLink, and Xid events from NVML";

/// Explains an NVML initialisation failure as a fact of the environment: why (the cause
/// one of [`cause::NVML_DOWN`]), and what is therefore missing.
pub fn explain(e: &NvmlError) -> Gap {
    let (cause, why) = match e {
        NvmlError::LibloadingError(_) => (
            cause::NVML_MISSING,
            format!(
                "NVML is not available ({} not found: no NVIDIA driver)",
                platform::nvidia::LIBRARY
            ),
        ),
        NvmlError::DriverNotLoaded => (
            cause::DRIVER_NOT_LOADED,
            "the NVIDIA kernel driver is not loaded".to_owned(),
        ),
        NvmlError::LibRmVersionMismatch => (
            cause::VERSION_MISMATCH,
            "NVML and the NVIDIA kernel driver differ in version (driver upgraded without a reboot)"
                .to_owned(),
        ),
        NvmlError::NoPermission => (
            cause::NO_PERMISSION,
            "NVML refused access (no permission)".to_owned(),
        ),
        e => (cause::NVML_FAILED, format!("NVML failed to start ({e})")),
    };
    Gap {
        device: None,
        message: format!("{why}: no {NVML_SIGNALS}"),
        missing: vec![signals::group::NVML.into()],
        cause: Some(cause.into()),
    }
}

/// What the event thread sends: an event, a GPU it found lost, or why it stopped watching.
enum EventMessage {
    /// An Xid or ECC event of the GPU with this UUID.
    Event(String, XidEvent),
    /// The GPU of this NVML index answers `GPU_IS_LOST`: its events end there, and the
    /// thread goes on watching the others.
    Lost(u32),
    /// NVML would not watch the events of the GPU of this NVML index (registration refused
    /// or failed), with the reading that says why.
    Refused(u32, Reading),
    /// The thread ended, and why.
    Stopped(String),
}

/// The stable word a reading carries when NVML answers `GPU_IS_LOST`.
const GPU_LOST: &str = "gpu_lost";

/// The most NVML calls a tick makes for one GPU, its handle included (the test suite holds
/// kiln to it through the fake NVML's call log). At the default 200 ms interval eight GPUs
/// then cost well under a tick even where each call takes a millisecond.
pub const CALLS_PER_TICK: usize = 15;

/// How often the slow readings are taken: PCIe throughput (each call blocks for its ~20 ms
/// sampling window on a real driver), the fans and the other processes on the GPU. They
/// are read on their own thread, so that the tick never waits for them.
pub const SLOW_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// NVML as a telemetry source.
pub struct NvmlSource {
    nvml: Option<Nvml>,
    matches: Vec<Match>,
    /// Why NVML cannot be used, when it cannot.
    down: Option<Gap>,
    events: Option<Receiver<EventMessage>>,
    stop_events: Arc<AtomicBool>,
    /// The devices NVML has reported lost, each said once (as an Xid 79, its own or
    /// NVML's), and read no more.
    lost: Vec<usize>,
    /// Each device's last gauges before it was lost, for the record of the loss.
    last: std::collections::BTreeMap<usize, Readings>,
    /// Each device's properties that do not change while kiln runs, read once.
    fixed: std::collections::BTreeMap<usize, Readings>,
    /// The slow readings, from their own thread, by NVML index.
    slow: Option<Receiver<(u32, Readings)>>,
    /// Slow readings not yet laid into a sample, by device.
    fresh: std::collections::BTreeMap<usize, Readings>,
}

/// A reading, or why there is none: a stable word for the failures the evidence and the
/// rules act on (`not_supported`, `no_permission`, `gpu_lost`, `function_not_found` for a
/// call this driver lacks, `timeout`, `unknown`), else NVML's own words. Never a zero.
fn num(r: Result<f64, NvmlError>) -> Reading {
    let word = match r {
        Ok(v) => return Reading::Number(v),
        Err(NvmlError::NotSupported) => return Reading::not_supported(),
        Err(NvmlError::NoPermission) => "no_permission".to_owned(),
        Err(NvmlError::GpuLost) => GPU_LOST.to_owned(),
        Err(NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)) => {
            "function_not_found".to_owned()
        }
        Err(NvmlError::Timeout) => "timeout".to_owned(),
        Err(NvmlError::Unknown) => "unknown".to_owned(),
        Err(e) => e.to_string(),
    };
    Reading::Unavailable { unavailable: word }
}

fn text(r: Result<String, NvmlError>) -> Reading {
    match r {
        Ok(v) => Reading::Text(v),
        Err(e) => match num(Err(e)) {
            Reading::Number(_) => Reading::not_supported(),
            other => other,
        },
    }
}

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
    /// Initialises NVML and matches every Vulkan device to its NVML device.
    pub fn new(devices: &[DeviceInfo]) -> NvmlSource {
        let targets: Vec<Target> = devices.iter().map(Target::from).collect();
        NvmlSource::for_targets(&targets)
    }

    /// Initialises NVML and matches every target (a Vulkan device, or a GPU of the
    /// machine's inventory) to its NVML device.
    pub fn for_targets(devices: &[Target]) -> NvmlSource {
        let nvml = Nvml::init();
        let (nvml, down) = match nvml {
            Ok(n) => (Some(n), None),
            Err(e) => (None, Some(explain(&e))),
        };
        let matches = devices
            .iter()
            .map(|d| match &nvml {
                None => Match {
                    device: d.index,
                    index: None,
                    by: "no NVML".into(),
                },
                Some(n) => match_device(n, d),
            })
            .collect();
        NvmlSource {
            nvml,
            matches,
            down,
            events: None,
            stop_events: Arc::new(AtomicBool::new(false)),
            lost: Vec::new(),
            last: std::collections::BTreeMap::new(),
            fixed: std::collections::BTreeMap::new(),
            slow: None,
            fresh: std::collections::BTreeMap::new(),
        }
    }

    fn matched(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        self.matches
            .iter()
            .filter_map(|m| m.index.map(|i| (m.device, i)))
    }

    /// What is missing for a device NVML has no match for.
    fn unmatched(m: &Match) -> Gap {
        Gap {
            device: Some(m.device),
            message: format!("device {} has no NVML device ({})", m.device, m.by),
            missing: vec![signals::group::NVML.into()],
            cause: Some(cause::NO_NVML_DEVICE.into()),
        }
    }

    /// Xid and ECC events arrive on their own thread, with its own NVML handle. The
    /// thread says why when it stops (a lost GPU ends an event set's wait with an error):
    /// a silent stop would read as "no Xid since".
    fn spawn_events(&self) -> Option<Receiver<EventMessage>> {
        let indices: Vec<u32> = self.matched().map(|(_, i)| i).collect();
        if indices.is_empty() || platform::nvidia::NO_EVENTS.is_some() {
            return None;
        }
        let (tx, rx) = channel();
        let stop = self.stop_events.clone();
        std::thread::Builder::new()
            .name("kiln-nvml-events".into())
            .spawn(move || {
                let stopped = |why: String| {
                    let _ = tx.send(EventMessage::Stopped(why));
                };
                let nvml = match Nvml::init() {
                    Ok(n) => n,
                    Err(e) => return stopped(format!("NVML would not start for it: {e}")),
                };
                let kinds = EventTypes::CRITICAL_XID_ERROR
                    | EventTypes::DOUBLE_BIT_ECC_ERROR
                    | EventTypes::SINGLE_BIT_ECC_ERROR;
                let mut watched = indices;
                let refused = |i: u32, why: Reading| tx.send(EventMessage::Refused(i, why)).is_ok();
                // A lost GPU ends a set's wait with an error for every GPU in it, and a failed
                // registration releases the set: either way the set is made again from the
                // GPUs still watched, so that the others stay watched. A GPU that refused is
                // said once and dropped.
                'build: while !watched.is_empty() {
                    let mut set = match nvml.create_event_set() {
                        Ok(s) => s,
                        Err(e) => return stopped(format!("no event set: {e}")),
                    };
                    for i in watched.clone() {
                        let Ok(device) = nvml.device_by_index(i) else {
                            continue;
                        };
                        // Register only what the device supports (a device that supports
                        // none is not watched by NVML: said by its support, not a refusal).
                        let supported = match platform::nvidia::supported_events(&device) {
                            Ok(types) => types,
                            Err(e) => {
                                if !refused(i, num(Err(e))) {
                                    return;
                                }
                                watched.retain(|&w| w != i);
                                continue;
                            }
                        };
                        let wanted = kinds & supported;
                        if wanted.is_empty() {
                            continue;
                        }
                        set = match platform::nvidia::register_events(&device, wanted, set) {
                            Ok(s) => s,
                            Err(e) => {
                                if !refused(i, num(Err(e))) {
                                    return;
                                }
                                watched.retain(|&w| w != i);
                                continue 'build;
                            }
                        };
                    }
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        match set.wait(500) {
                            Ok(data) => {
                                let uuid = data.device.uuid().unwrap_or_default();
                                let event = event_of(&data);
                                if tx.send(EventMessage::Event(uuid, event)).is_err() {
                                    return;
                                }
                            }
                            Err(NvmlError::Timeout) => {}
                            Err(NvmlError::GpuLost) => break,
                            Err(e) => return stopped(format!("waiting for events failed: {e}")),
                        }
                    }
                    let (lost, live): (Vec<u32>, Vec<u32>) = watched.iter().partition(|&&i| {
                        matches!(nvml.device_by_index(i), Err(NvmlError::GpuLost))
                    });
                    if lost.is_empty() {
                        return stopped("waiting for events failed: a GPU is lost".into());
                    }
                    for i in lost {
                        if tx.send(EventMessage::Lost(i)).is_err() {
                            return;
                        }
                    }
                    if live.is_empty() {
                        return stopped("every watched GPU is lost".into());
                    }
                    watched = live;
                }
            })
            .ok()?;
        Some(rx)
    }

    /// The slow readings ([`slow_at`]) of every matched GPU, every [`SLOW_INTERVAL`], on a
    /// thread with its own NVML handle. A GPU that answers `GPU_IS_LOST` is read no more
    /// (the tick records the loss).
    fn spawn_slow(&self) -> Option<Receiver<(u32, Readings)>> {
        let mut watched: Vec<u32> = self.matched().map(|(_, i)| i).collect();
        if watched.is_empty() {
            return None;
        }
        let (tx, rx) = channel();
        let stop = self.stop_events.clone();
        std::thread::Builder::new()
            .name("kiln-nvml-slow".into())
            .spawn(move || {
                let nvml = match Nvml::init() {
                    Ok(n) => n,
                    Err(e) => {
                        // Said as each slow reading's failure, never as silence.
                        let failed = num(Err(e));
                        for i in watched {
                            let _ = tx.send((i, slow_failed(&failed)));
                        }
                        return;
                    }
                };
                let mut fans = std::collections::BTreeMap::new();
                while !watched.is_empty() {
                    let round = std::time::Instant::now();
                    let mut lost = Vec::new();
                    for &i in &watched {
                        let readings = match nvml.device_by_index(i) {
                            Ok(d) => {
                                let count = match fans.get(&i) {
                                    Some(known) => Clone::clone(known),
                                    None => d.num_fans().map_err(|e| num(Err(e))),
                                };
                                // The count is read once, unless its failure may pass.
                                if count.as_ref().err().is_none_or(|why| !passing(why)) {
                                    fans.insert(i, count.clone());
                                }
                                slow_at(&d, &count)
                            }
                            Err(e) => slow_failed(&num(Err(e))),
                        };
                        if is_lost(&readings) {
                            lost.push(i);
                        } else if tx.send((i, readings)).is_err() {
                            return;
                        }
                    }
                    watched.retain(|i| !lost.contains(i));
                    while round.elapsed() < SLOW_INTERVAL {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(50));
                    }
                }
            })
            .ok()?;
        Some(rx)
    }

    /// Lays the slow readings that arrived since the last tick aside, by device.
    fn take_slow(&mut self) {
        let Some(slow) = &self.slow else {
            return;
        };
        for (index, readings) in slow.try_iter() {
            if let Some(m) = self.matches.iter().find(|m| m.index == Some(index)) {
                self.fresh.entry(m.device).or_default().extend(readings);
            }
        }
    }

    fn identity_at(nvml: &Nvml, index: u32) -> Readings {
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
        f
    }

    /// The device's gauges read on the tick, or `GpuLost` when NVML answers that it is lost
    /// (for its handle, or for any reading): a lost device's tick is no sample. Only what
    /// moves from tick to tick is read here; what never changes is read once
    /// ([`fixed_at`]), what is slow or slowly changing on its own schedule ([`slow_at`]),
    /// and the cumulative counters at phase boundaries ([`NvmlSource::counters`]), so that
    /// a tick costs at most [`CALLS_PER_TICK`] calls.
    fn gauges(nvml: &Nvml, index: u32) -> Result<Readings, NvmlError> {
        let mut g = Readings::new();
        let d = nvml.device_by_index(index)?;
        g.insert(
            signals::GPU_TEMP_C.name.into(),
            num(d.temperature(TemperatureSensor::Gpu).map(f64::from)),
        );
        let [hbm] = fields(&d, [FIELD_MEMORY_TEMP]);
        g.insert(signals::HBM_TEMP_C.name.into(), hbm);
        g.insert(
            signals::POWER_W.name.into(),
            num(d.power_usage().map(|mw| f64::from(mw) / 1e3)),
        );
        // An administrator's cap or the driver's power brake moves it: read every tick.
        g.insert(
            signals::POWER_LIMIT_ENFORCED_W.name.into(),
            num(d.enforced_power_limit().map(|mw| f64::from(mw) / 1e3)),
        );
        for (now, clock) in [
            (signals::CLOCK_SM_MHZ, Clock::SM),
            (signals::CLOCK_MEM_MHZ, Clock::Memory),
            (signals::CLOCK_GRAPHICS_MHZ, Clock::Graphics),
        ] {
            g.insert(now.name.into(), num(d.clock_info(clock).map(f64::from)));
        }
        match ffi::clocks_event_reasons(&d) {
            Ok(mask) => {
                g.insert(
                    signals::THROTTLE_REASONS_MASK.name.into(),
                    Reading::Number(mask as f64),
                );
                // Decoded here, at the source: what reads the samples takes reasons.
                g.insert(
                    signals::THROTTLE_REASONS.name.into(),
                    throttle::reading(mask),
                );
            }
            Err(e) => {
                g.insert(signals::THROTTLE_REASONS_MASK.name.into(), num(Err(e)));
            }
        }
        match d.utilization_rates() {
            Ok(u) => {
                g.insert(
                    signals::UTIL_GPU_PCT.name.into(),
                    Reading::Number(f64::from(u.gpu)),
                );
                g.insert(
                    signals::UTIL_MEM_PCT.name.into(),
                    Reading::Number(f64::from(u.memory)),
                );
            }
            Err(e) => {
                g.insert(signals::UTIL_GPU_PCT.name.into(), num(Err(e)));
            }
        }
        match d.memory_info() {
            Ok(m) => {
                g.insert(
                    signals::MEM_USED_BYTES.name.into(),
                    Reading::Number(m.used as f64),
                );
                g.insert(
                    signals::MEM_FREE_BYTES.name.into(),
                    Reading::Number(m.free as f64),
                );
                g.insert(
                    signals::MEM_TOTAL_BYTES.name.into(),
                    Reading::Number(m.total as f64),
                );
            }
            Err(e) => {
                g.insert(signals::MEM_USED_BYTES.name.into(), num(Err(e)));
            }
        }
        g.insert(
            signals::PSTATE.name.into(),
            text(d.performance_state().map(|p| format!("P{}", p.as_c()))),
        );
        // A link that retrains under load shows for moments: its state is read every tick.
        g.insert(
            signals::PCIE_GEN.name.into(),
            num(d.current_pcie_link_gen().map(f64::from)),
        );
        g.insert(
            signals::PCIE_WIDTH.name.into(),
            num(d.current_pcie_link_width().map(f64::from)),
        );
        if is_lost(&g) {
            return Err(NvmlError::GpuLost);
        }
        Ok(g)
    }

    fn counters(nvml: &Nvml, index: u32) -> Readings {
        let mut c = Readings::new();
        let Ok(d) = nvml.device_by_index(index) else {
            return c;
        };
        for (total, error, counter) in [
            (
                signals::ECC_CORRECTED_VOLATILE,
                MemoryError::Corrected,
                EccCounter::Volatile,
            ),
            (
                signals::ECC_CORRECTED_AGGREGATE,
                MemoryError::Corrected,
                EccCounter::Aggregate,
            ),
            (
                signals::ECC_UNCORRECTED_VOLATILE,
                MemoryError::Uncorrected,
                EccCounter::Volatile,
            ),
            (
                signals::ECC_UNCORRECTED_AGGREGATE,
                MemoryError::Uncorrected,
                EccCounter::Aggregate,
            ),
        ] {
            c.insert(
                total.name.into(),
                num(d.total_ecc_errors(error, counter).map(|v| v as f64)),
            );
            // In the order of `signals::ECC_LOCATIONS`.
            let locations = [
                MemoryLocation::Device,
                MemoryLocation::L1Cache,
                MemoryLocation::L2Cache,
                MemoryLocation::RegisterFile,
            ];
            for (place, location) in signals::ECC_LOCATIONS.iter().zip(locations) {
                c.insert(
                    signals::ecc_at(total, place),
                    num(d
                        .memory_error_counter(error, counter, location)
                        .map(|v| v as f64)),
                );
            }
        }
        for (key, cause) in [
            (
                signals::RETIRED_PAGES_SBE.name,
                RetirementCause::MultipleSingleBitEccErrors,
            ),
            (
                signals::RETIRED_PAGES_DBE.name,
                RetirementCause::DoubleBitEccError,
            ),
        ] {
            c.insert(
                key.into(),
                num(d.retired_pages(cause).map(|p| p.len() as f64)),
            );
        }
        c.insert(
            signals::RETIRED_PAGES_PENDING.name.into(),
            num(d
                .are_pages_pending_retired()
                .map(|p| f64::from(u8::from(p)))),
        );
        let keys = [
            signals::REMAPPED_CORRECTABLE.name,
            signals::REMAPPED_UNCORRECTABLE.name,
            signals::REMAP_PENDING.name,
            signals::REMAP_FAILURE.name,
            signals::RECOVERY_ACTION.name,
        ];
        let values = fields(
            &d,
            [
                FIELD_REMAPPED_COR,
                FIELD_REMAPPED_UNC,
                FIELD_REMAP_PENDING,
                FIELD_REMAP_FAILURE,
                FIELD_RECOVERY_ACTION,
            ],
        );
        for (key, value) in keys.into_iter().zip(values) {
            c.insert(key.into(), value);
        }
        // How close each memory bank is to its last spare row, and the SRAM's own RMA flag.
        match ffi::row_remapper_histogram(&d) {
            Ok(h) => {
                for (signal, banks) in [
                    (signals::REMAP_BANKS_MAX, h.max),
                    (signals::REMAP_BANKS_HIGH, h.high),
                    (signals::REMAP_BANKS_PARTIAL, h.partial),
                    (signals::REMAP_BANKS_LOW, h.low),
                    (signals::REMAP_BANKS_NONE, h.none),
                ] {
                    c.insert(signal.name.into(), Reading::Number(f64::from(banks)));
                }
            }
            Err(e) => {
                c.insert(signals::REMAP_BANKS_NONE.name.into(), num(Err(e)));
            }
        }
        match ffi::sram_ecc_status(&d) {
            Ok(s) => {
                for (signal, value) in [
                    (
                        signals::SRAM_UNCORRECTED_PARITY,
                        s.uncorrected_parity as f64,
                    ),
                    (
                        signals::SRAM_UNCORRECTED_SECDED,
                        s.uncorrected_secded as f64,
                    ),
                    (signals::SRAM_CORRECTED, s.corrected as f64),
                    (
                        signals::SRAM_THRESHOLD_EXCEEDED,
                        f64::from(u8::from(s.threshold_exceeded)),
                    ),
                ] {
                    c.insert(signal.name.into(), Reading::Number(value));
                }
            }
            Err(e) => {
                c.insert(signals::SRAM_THRESHOLD_EXCEEDED.name.into(), num(Err(e)));
            }
        }
        nvlinks(&d, &mut c);
        // Cumulative time held below the requested clocks: its growth over a phase is the
        // time the phase was capped.
        for (signal, policy) in [
            (signals::VIOLATION_POWER_NS, PerformancePolicy::Power),
            (signals::VIOLATION_THERMAL_NS, PerformancePolicy::Thermal),
        ] {
            c.insert(
                signal.name.into(),
                num(d.violation_status(policy).map(|v| v.violation_time as f64)),
            );
        }
        c.insert(
            signals::PCIE_REPLAYS.name.into(),
            num(d.pcie_replay_counter().map(f64::from)),
        );
        c.insert(
            signals::ENERGY_MJ.name.into(),
            num(d.total_energy_consumption().map(|e| e as f64)),
        );
        c
    }
}

/// The most NVLinks NVML numbers (`NVML_NVLINK_MAX_LINKS` of the headers kiln is built
/// with; an H100's 18).
const NVLINK_MAX_LINKS: u32 = 18;

/// Every NVLink of the device, at a phase boundary: whether it is up, and its error
/// counters. A GPU without NVLink answers `NotSupported` for link 0, and a link past its
/// last `NotSupported` or `InvalidArg` (drivers differ): nothing more is asked then. A link
/// whose state cannot be read for another reason says why, never "down".
fn nvlinks(d: &nvml_wrapper::Device, c: &mut Readings) {
    use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
    for link in 0..NVLINK_MAX_LINKS {
        let l = d.link_wrapper_for(link);
        match l.is_active() {
            Err(NvmlError::NotSupported | NvmlError::InvalidArg) => break,
            state => {
                let failed = state.is_err();
                c.insert(
                    signals::nvlink(link, signals::NvlinkPart::State),
                    num(state.map(|up| f64::from(u8::from(up)))),
                );
                if failed {
                    break;
                }
            }
        }
        for (part, counter) in signals::NvlinkPart::COUNTERS.into_iter().zip([
            ErrorCounter::DlReplay,
            ErrorCounter::DlRecovery,
            ErrorCounter::DlCrcFlit,
            ErrorCounter::DlCrcData,
        ]) {
            c.insert(
                signals::nvlink(link, part),
                num(l.error_counter(counter).map(|v| v as f64)),
            );
        }
    }
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
fn fixed_cached(
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

/// True for a failure that may pass (a timeout, an unknown error, a lost GPU): what failed
/// so is read again.
fn passing(reading: &Reading) -> bool {
    matches!(reading, Reading::Unavailable { unavailable }
        if [GPU_LOST, "timeout", "unknown"].contains(&unavailable.as_str()))
}

/// True when no reading failed for a passing cause: what is settled need not be read again.
fn settled(readings: &Readings) -> bool {
    !readings.values().any(passing)
}

/// Every slow reading failed, and why.
fn slow_failed(why: &Reading) -> Readings {
    [
        signals::PCIE_TX_KBPS.name.to_owned(),
        signals::PCIE_RX_KBPS.name.to_owned(),
        signals::OTHER_PROCESSES_NOW.name.to_owned(),
        signals::fan_speed_pct(0),
    ]
    .into_iter()
    .map(|k| (k, why.clone()))
    .collect()
}

/// The slow readings: PCIe throughput each way, every fan (`fans` is the device's count,
/// read once), and the other processes on the GPU.
fn slow_at(d: &nvml_wrapper::Device, fans: &Result<u32, Reading>) -> Readings {
    let mut s = Readings::new();
    s.insert(
        signals::PCIE_TX_KBPS.name.into(),
        num(d.pcie_throughput(PcieUtilCounter::Send).map(f64::from)),
    );
    s.insert(
        signals::PCIE_RX_KBPS.name.into(),
        num(d.pcie_throughput(PcieUtilCounter::Receive).map(f64::from)),
    );
    match fans {
        Ok(n) => {
            for i in 0..*n {
                s.insert(
                    signals::fan_speed_pct(i),
                    num(d.fan_speed(i).map(f64::from)),
                );
            }
        }
        Err(why) => {
            s.insert(signals::fan_speed_pct(0), why.clone());
        }
    }
    s.insert(signals::OTHER_PROCESSES_NOW.name.into(), other_processes(d));
    s
}

/// A process's name as the driver says it, made safe for a process list; `None` where it
/// will not say (a driver or a fake NVML without the call, a process gone).
fn process_name(d: &nvml_wrapper::Device, pid: u32) -> Option<String> {
    /// NVML's own bound on a process name.
    const NAME_MAX: usize = 64;
    let name = d.nvml().sys_process_name(pid, NAME_MAX).ok()?;
    let name: String = name
        .trim()
        .chars()
        .map(|c| {
            if c == ',' || c == ':' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Other processes on the GPU (kiln's own, its workers too, left out), or why the list could not be read: a refused or failed list is unknown, never
/// "none". A card that lists no processes of one kind (no graphics engine) is read from the
/// other.
fn other_processes(d: &nvml_wrapper::Device) -> Reading {
    let mut processes = Vec::new();
    let mut readable = false;
    for list in [
        d.running_compute_processes(),
        d.running_graphics_processes(),
    ] {
        match list {
            Ok(list) => {
                readable = true;
                for p in list.into_iter().filter(|p| !super::is_own_process(p.pid)) {
                    processes.push(Process {
                        pid: p.pid,
                        used_bytes: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b),
                            UsedGpuMemory::Unavailable => None,
                        },
                        name: process_name(d, p.pid),
                    });
                }
            }
            Err(NvmlError::NotSupported) => {}
            Err(e) => return num(Err(e)),
        }
    }
    if readable {
        Reading::Processes(processes)
    } else {
        Reading::not_supported()
    }
}

/// An NVML event as an Xid record: a critical Xid by its number, a double-bit ECC error as
/// Xid 48 (what the driver logs for one), a single-bit one by name.
fn event_of(data: &nvml_wrapper::struct_wrappers::event::EventData) -> XidEvent {
    let ((code, message), channel) = if data.event_type.contains(EventTypes::CRITICAL_XID_ERROR) {
        let said = match data.event_data {
            Some(XidError::Value(v)) => (Some(v as u32), "critical Xid (NVML event)".to_owned()),
            _ => (
                None,
                "critical Xid of unknown value (NVML event)".to_owned(),
            ),
        };
        (said, XidChannel::NvmlXidEvent)
    } else if data.event_type.contains(EventTypes::DOUBLE_BIT_ECC_ERROR) {
        (
            (Some(48), "double-bit ECC error (NVML event)".to_owned()),
            XidChannel::NvmlEccEvent,
        )
    } else {
        (
            (None, "single-bit ECC error (NVML event)".to_owned()),
            XidChannel::NvmlEccEvent,
        )
    };
    XidEvent {
        bus_id: data
            .device
            .pci_info()
            .ok()
            .and_then(|p| normalise_bus_id(&p.bus_id)),
        code,
        pid: None,
        process: None,
        message,
        kernel_us: None,
        before_run: false,
        t_ms: None,
        seen_by: vec![channel],
    }
}

/// The gap of a GPU whose Xid and ECC events NVML would not watch: named with its cause
/// word (`no_permission`, ...), never a quiet "no Xid since".
fn events_refused(device: Option<usize>, why: &Reading) -> TelemetryData {
    let cause = match why {
        Reading::Unavailable { unavailable } => unavailable.clone(),
        _ => "unknown".to_owned(),
    };
    let which = device.map_or_else(|| "a GPU".to_owned(), |d| format!("device {d}"));
    TelemetryData::Unavailable {
        message: format!(
            "NVML would not watch {which}'s Xid and ECC events ({}): its Xids are seen only in the kernel log, where that is readable",
            cause.replace('_', " ")
        ),
        missing: vec![signals::group::NVML_EVENTS.into()],
        cause: Some(format!("{}{cause}", super::cause::EVENTS_REFUSED)),
    }
}

/// The record of a GPU NVML answers `GPU_IS_LOST` for, as the Xid it is (79, fallen off the
/// bus: NVML's words for the same state), with the last readings before it.
fn lost_event(last: Option<&Readings>) -> XidEvent {
    let said = |key: &str, unit: &str| {
        last.and_then(|r| r.get(key))
            .and_then(Reading::number)
            .map(|v| format!("{v:.0} {unit}"))
    };
    let readings: Vec<String> = [
        said(signals::GPU_TEMP_C.name, "°C"),
        said(signals::POWER_W.name, "W"),
        said(signals::CLOCK_SM_MHZ.name, "MHz SM"),
    ]
    .into_iter()
    .flatten()
    .chain(
        last.and_then(|r| r.get(signals::THROTTLE_REASONS.name))
            .and_then(Reading::text)
            .filter(|t| !t.is_empty())
            .map(|t| format!("throttled: {t}")),
    )
    .collect();
    let last_words = if readings.is_empty() {
        "no reading before it".to_owned()
    } else {
        format!("last readings {}", readings.join(", "))
    };
    XidEvent {
        bus_id: None,
        code: Some(XID_FALLEN_OFF_THE_BUS),
        pid: None,
        process: None,
        message: format!(
            "GPU is lost: NVML answers GPU_IS_LOST, the GPU has fallen off the bus or is otherwise inaccessible ({last_words})"
        ),
        kernel_us: None,
        before_run: false,
        t_ms: None,
        seen_by: vec![XidChannel::NvmlGpuLost],
    }
}

/// Field values in one call (NVML's way to read many at once), each its reading: a field
/// the device does not have is not supported, and a failed call is every field's failure.
fn fields<const N: usize>(d: &nvml_wrapper::Device, ids: [u32; N]) -> [Reading; N] {
    use nvml_wrapper::enums::device::SampleValue;
    let mut out: [Reading; N] = std::array::from_fn(|_| Reading::not_supported());
    match d.field_values_for(&ids.map(FieldId)) {
        Ok(values) => {
            for (slot, value) in out.iter_mut().zip(values) {
                *slot = match value.and_then(|sample| sample.value) {
                    Ok(SampleValue::F64(v)) => Reading::Number(v),
                    Ok(SampleValue::U32(v)) => Reading::Number(f64::from(v)),
                    Ok(SampleValue::U64(v)) => Reading::Number(v as f64),
                    Ok(SampleValue::I64(v)) => Reading::Number(v as f64),
                    Err(e) => num(Err(e)),
                };
            }
        }
        Err(e) => {
            let failed = num(Err(e));
            out = std::array::from_fn(|_| failed.clone());
        }
    }
    out
}

/// True when any reading says the GPU is lost.
fn is_lost(readings: &Readings) -> bool {
    readings
        .values()
        .any(|r| matches!(r, Reading::Unavailable { unavailable } if unavailable == GPU_LOST))
}

fn match_device(nvml: &Nvml, info: &Target) -> Match {
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

impl Source for NvmlSource {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn status(&self) -> Vec<Gap> {
        match &self.down {
            Some(down) => vec![down.clone()],
            None => self
                .matches
                .iter()
                .filter(|m| m.index.is_none())
                .map(Self::unmatched)
                .collect(),
        }
    }

    /// The identity of the NVML device matched to `device`, if any.
    fn identity(&self, device: usize) -> Option<Readings> {
        let nvml = self.nvml.as_ref()?;
        let m = self.matches.iter().find(|m| m.device == device)?;
        Some(Self::identity_at(nvml, m.index?))
    }

    fn matches(&self) -> Vec<Match> {
        self.matches.clone()
    }

    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        // Events and the slow readings are only wanted while sampling: `kiln list` matches
        // without them.
        self.events = self.spawn_events();
        self.slow = self.spawn_slow();
        if let Some(down) = &self.down {
            return vec![down.clone().record()];
        }
        // What never changes is read before the first tick, so that no tick pays for it.
        if let Some(nvml) = &self.nvml {
            for (device, i) in self.matched().collect::<Vec<_>>() {
                fixed_cached(&mut self.fixed, nvml, device, i);
            }
        }
        let mut out: Vec<(Option<usize>, TelemetryData)> = self
            .matches
            .iter()
            .map(|m| match self.identity(m.device) {
                Some(mut fields) => {
                    fields.insert(signals::MATCHED_BY.name.into(), Reading::Text(m.by.clone()));
                    (Some(m.device), TelemetryData::Identity { fields })
                }
                None => Self::unmatched(m).record(),
            })
            .collect();
        // Where the OS has no NVML events, said once: Xids then come from its own log.
        if let Some(why) = platform::nvidia::NO_EVENTS
            && self.matched().next().is_some()
        {
            out.push(
                Gap {
                    device: None,
                    message: why.to_owned(),
                    missing: vec![signals::group::NVML_EVENTS.into()],
                    cause: None,
                }
                .record(),
            );
        }
        out
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.take_slow();
        let Some(nvml) = &self.nvml else {
            return Vec::new();
        };
        let mut out: Vec<(Option<usize>, TelemetryData)> = Vec::new();
        let mut lost_now = Vec::new();
        let matched: Vec<(usize, u32)> = self.matched().collect();
        for (device, i) in matched {
            if self.lost.contains(&device) {
                continue;
            }
            match Self::gauges(nvml, i) {
                Ok(mut readings) => {
                    // A tick whose every call failed stays a sample with no reading: what
                    // was read once, or on the slow schedule, must not make it one.
                    if readings.values().any(|r| r.number().is_some()) {
                        readings.extend(fixed_cached(&mut self.fixed, nvml, device, i));
                        readings.extend(self.fresh.remove(&device).unwrap_or_default());
                    }
                    self.last.insert(device, readings.clone());
                    out.push((Some(device), TelemetryData::Sample { readings }));
                }
                Err(NvmlError::GpuLost) => lost_now.push(device),
                // Any other failure of the handle reads as a sample that says it.
                Err(e) => out.push((
                    Some(device),
                    TelemetryData::Sample {
                        readings: Readings::from([(
                            signals::GPU_TEMP_C.name.to_owned(),
                            num(Err(e)),
                        )]),
                    },
                )),
            }
        }
        if let Some(events) = &self.events {
            for message in events.try_iter() {
                let (uuid, xid) = match message {
                    EventMessage::Event(uuid, xid) => (uuid, xid),
                    EventMessage::Lost(index) => {
                        if let Some(m) = self.matches.iter().find(|m| m.index == Some(index)) {
                            lost_now.push(m.device);
                        }
                        continue;
                    }
                    EventMessage::Refused(index, why) => {
                        let device = self
                            .matches
                            .iter()
                            .find(|m| m.index == Some(index))
                            .map(|m| m.device);
                        out.push((device, events_refused(device, &why)));
                        continue;
                    }
                    EventMessage::Stopped(why) => {
                        out.push((
                            None,
                            TelemetryData::Unavailable {
                                message: format!(
                                    "NVML's Xid and ECC event watch stopped ({why}): later events are seen only in the kernel log"
                                ),
                                missing: vec![signals::group::NVML_EVENTS.into()],
                                cause: None,
                            },
                        ));
                        continue;
                    }
                };
                let body = uuid.trim_start_matches("GPU-").to_ascii_lowercase();
                let device = self
                    .matches
                    .iter()
                    .find(|m| {
                        m.index.is_some()
                            && nvml_uuid(nvml, m.index).as_deref() == Some(body.as_str())
                    })
                    .map(|m| m.device);
                // The driver's own Xid 79 records the loss: NVML's answer later says the same.
                if let Some(d) = device
                    && xid.code == Some(XID_FALLEN_OFF_THE_BUS)
                    && !self.lost.contains(&d)
                {
                    self.lost.push(d);
                }
                out.push((device, TelemetryData::Xid { xid }));
            }
        }
        for device in lost_now {
            if self.lost.contains(&device) {
                continue;
            }
            self.lost.push(device);
            out.push((
                Some(device),
                TelemetryData::Xid {
                    xid: lost_event(self.last.get(&device)),
                },
            ));
        }
        out
    }

    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        let Some(nvml) = &self.nvml else {
            return Vec::new();
        };
        // A lost device's counters cannot be read: its loss is the record.
        self.matched()
            .filter(|(device, _)| !self.lost.contains(device))
            .map(|(device, i)| (device, Self::counters(nvml, i)))
            .collect()
    }
}

fn nvml_uuid(nvml: &Nvml, index: Option<u32>) -> Option<String> {
    let d = nvml.device_by_index(index?).ok()?;
    Some(
        d.uuid()
            .ok()?
            .trim_start_matches("GPU-")
            .to_ascii_lowercase(),
    )
}

impl Drop for NvmlSource {
    fn drop(&mut self) {
        self.stop_events.store(true, Ordering::Relaxed);
    }
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

    #[test]
    fn a_lost_gpu_is_recorded_as_the_xid_it_is_with_its_last_readings() {
        let last = Readings::from([
            (signals::GPU_TEMP_C.name.to_owned(), Reading::Number(83.4)),
            (signals::POWER_W.name.to_owned(), Reading::Number(612.0)),
            (
                signals::THROTTLE_REASONS.name.to_owned(),
                Reading::Text("hw_slowdown".into()),
            ),
        ]);
        let event = lost_event(Some(&last));
        assert_eq!(event.code, Some(79));
        assert!(event.message.contains("GPU_IS_LOST"), "{}", event.message);
        assert!(
            event
                .message
                .ends_with("(last readings 83 °C, 612 W, throttled: hw_slowdown)"),
            "{}",
            event.message
        );
        assert!(lost_event(None).message.ends_with("(no reading before it)"));
        // Read as a reading, every failure kiln can meet is its stable word, never a
        // number.
        for (error, word) in [
            (NvmlError::GpuLost, GPU_LOST),
            (NvmlError::NoPermission, "no_permission"),
            (NvmlError::NotSupported, "not_supported"),
            (NvmlError::FunctionNotFound, "function_not_found"),
            (
                NvmlError::FailedToLoadSymbol("nvmlDeviceGetFieldValues".into()),
                "function_not_found",
            ),
            (NvmlError::Timeout, "timeout"),
            (NvmlError::Unknown, "unknown"),
        ] {
            assert_eq!(
                num(Err(error)),
                Reading::Unavailable {
                    unavailable: word.into()
                }
            );
        }
    }

    #[test]
    fn a_missing_nvml_is_a_fact_that_names_the_missing_signals() {
        let Gap { cause, message, .. } = explain(&NvmlError::DriverNotLoaded);
        assert_eq!(cause.as_deref(), Some("driver_not_loaded"));
        assert!(
            message.contains("not loaded")
                && message.contains("throttle reasons")
                && message.contains("Xid")
        );
        let Gap { cause, message, .. } = explain(&NvmlError::LibRmVersionMismatch);
        assert_eq!(cause.as_deref(), Some("version_mismatch"));
        assert!(message.contains("without a reboot"));
    }
}
