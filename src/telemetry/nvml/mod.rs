//! NVIDIA telemetry through NVML: gauges every tick, counters around every phase, Xid and
//! ECC events from an event set on a dedicated thread, and each device's identity.
//! Signals a device does not support are recorded as not supported, never as zero.
//! One concern a file: `identity` (read once), `gauges` (every tick, and the slow
//! readings), `counters` (at phase boundaries), `events` (Xid and ECC); here the source,
//! its `Source` impl and the readings' failure words they share.

/// The NVML calls nvml-wrapper lacks: unsafe FFI, fenced like `gpu/`'s.
#[allow(unsafe_code)]
pub mod ffi;

mod counters;
mod events;
mod gauges;
mod identity;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;

use super::record::{Reading, Readings, TelemetryData, XID_FALLEN_OFF_THE_BUS};
use super::{Gap, Match, Source, Target, cause, signals};
use crate::gpu::DeviceInfo;
use crate::platform;
use events::{EventMessage, events_refused, lost_event};
use identity::{fixed_cached, match_device, nvml_uuid};

pub use gauges::{CALLS_PER_TICK, SLOW_INTERVAL};
pub use identity::{NvmlGpu, inventory, normalise_bus_id, nvml_bus_id};

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

/// The stable word a reading carries when NVML answers `GPU_IS_LOST`.
const GPU_LOST: &str = "gpu_lost";

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

    /// The newest CUDA version the driver supports, as NVML's integer (`12040` is 12.4);
    /// None where NVML is down or cannot say.
    pub fn cuda_driver_version(&self) -> Option<i32> {
        self.nvml.as_ref()?.sys_cuda_driver_version().ok()
    }

    /// The compute capability (major, minor) of the GPU at NVML index `index`; None where
    /// NVML is down or cannot say.
    pub fn compute_capability_at(&self, index: u32) -> Option<(u32, u32)> {
        let cc = self
            .nvml
            .as_ref()?
            .device_by_index(index)
            .ok()?
            .cuda_compute_capability()
            .ok()?;
        Some((u32::try_from(cc.major).ok()?, u32::try_from(cc.minor).ok()?))
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

impl Drop for NvmlSource {
    fn drop(&mut self) {
        self.stop_events.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_reads_as_its_stable_word() {
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
