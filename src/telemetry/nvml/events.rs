//! Xid and ECC events: the event set NVML fills, registered per GPU and waited on by a
//! thread of its own, and the records made of an event, a refusal to watch and a lost GPU.

use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, channel};

use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;

use super::{NvmlSource, normalise_bus_id, num};
use crate::platform;
use crate::telemetry::record::{
    Reading, Readings, TelemetryData, XID_FALLEN_OFF_THE_BUS, XidChannel, XidEvent,
};
use crate::telemetry::signals;

/// What the event thread sends: an event, a GPU it found lost, or why it stopped watching.
pub(super) enum EventMessage {
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

impl NvmlSource {
    /// Xid and ECC events arrive on their own thread, with its own NVML handle. The
    /// thread says why when it stops (a lost GPU ends an event set's wait with an error):
    /// a silent stop would read as "no Xid since".
    pub(super) fn spawn_events(&self) -> Option<Receiver<EventMessage>> {
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
pub(super) fn events_refused(device: Option<usize>, why: &Reading) -> TelemetryData {
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
        cause: Some(format!("{}{cause}", super::super::cause::EVENTS_REFUSED)),
    }
}

/// The record of a GPU NVML answers `GPU_IS_LOST` for, as the Xid it is (79, fallen off the
/// bus: NVML's words for the same state), with the last readings before it.
pub(super) fn lost_event(last: Option<&Readings>) -> XidEvent {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
