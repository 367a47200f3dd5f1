//! `--wait-idle`: a device is idle and cool before a workload starts, as far as its
//! telemetry can tell.

use std::time::{Duration, Instant};

use super::{Latest, signals_received};
use crate::evidence::{Event, EventSink, EventWriter};
use crate::gpu::DeviceInfo;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// Before any load, waits (up to [`WAIT_IDLE_MAX`]) until every device is idle and cool,
/// and says what it waited for.
pub(super) fn wait_until_idle(devices: &[DeviceInfo], latest: &Latest, events: &mut EventWriter) {
    let started = Instant::now();
    loop {
        let states: Vec<(usize, Idleness)> = devices
            .iter()
            .map(|d| {
                let state = latest
                    .lock()
                    .map(|m| idleness(m.get(&d.index).map(|(_, r)| r)))
                    .unwrap_or(Idleness::Unknown);
                (d.index, state)
            })
            .collect();
        let busy: Vec<String> = states
            .iter()
            .filter_map(|(i, s)| match s {
                Idleness::Busy(why) => Some(format!("GPU{i} {why}")),
                _ => None,
            })
            .collect();
        let unknown: Vec<String> = states
            .iter()
            .filter(|(_, s)| *s == Idleness::Unknown)
            .map(|(i, _)| format!("GPU{i}"))
            .collect();
        let message = if busy.is_empty() {
            (!unknown.is_empty()).then(|| {
                format!(
                    "--wait-idle: no utilisation or temperature reading for {}, so whether it is idle cannot be told: not waiting",
                    unknown.join(", ")
                )
            })
            .or_else(|| {
                (started.elapsed() > Duration::from_secs(1)).then(|| {
                    format!(
                        "--wait-idle: waited {:.0} s for every GPU to be idle and cool",
                        started.elapsed().as_secs_f64()
                    )
                })
            })
        } else if started.elapsed() > WAIT_IDLE_MAX || signals_received() > 0 {
            Some(format!(
                "--wait-idle: still not idle and cool after {:.0} s ({}): starting anyway",
                started.elapsed().as_secs_f64(),
                busy.join("; ")
            ))
        } else {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        };
        if let Some(message) = message {
            events.emit(None, Event::Note { message });
        }
        return;
    }
}

/// Busier than this (GPU utilisation, %) is not idle.
pub const IDLE_UTIL_PCT: f64 = 10.0;
/// Hotter than this (GPU temperature, °C) is not cool: datacenter GPUs idle at 30-45 °C
/// and run at 60-85 °C.
pub const COOL_TEMP_C: f64 = 50.0;
/// The longest `--wait-idle` waits for one device before starting anyway (and saying so).
pub const WAIT_IDLE_MAX: Duration = Duration::from_secs(600);

/// Whether a device is idle and cool, from its latest telemetry.
#[derive(Debug, Clone, PartialEq)]
pub enum Idleness {
    /// Idle and cool: start.
    Idle,
    /// Busy or hot, and why.
    Busy(String),
    /// No utilisation or temperature reading: it cannot be told.
    Unknown,
}

/// Judges idleness from a device's latest readings (utilisation and temperature).
pub fn idleness(readings: Option<&Readings>) -> Idleness {
    let value = |key: &str| readings.and_then(|r| r.get(key)).and_then(Reading::number);
    let (util, temp) = (
        value(signals::UTIL_GPU_PCT.name),
        value(signals::GPU_TEMP_C.name),
    );
    if util.is_none() && temp.is_none() {
        return Idleness::Unknown;
    }
    let mut why = Vec::new();
    if let Some(u) = util.filter(|u| *u > IDLE_UTIL_PCT) {
        why.push(format!("{u:.0}% busy"));
    }
    if let Some(t) = temp.filter(|t| *t > COOL_TEMP_C) {
        why.push(format!("{t:.0} °C"));
    }
    if why.is_empty() {
        Idleness::Idle
    } else {
        Idleness::Busy(why.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(util: Option<f64>, temp: Option<f64>) -> Readings {
        let mut r = Readings::new();
        if let Some(u) = util {
            r.insert("util_gpu_pct".into(), Reading::Number(u));
        }
        if let Some(t) = temp {
            r.insert("gpu_temp_c".into(), Reading::Number(t));
        }
        r.insert("power_w".into(), Reading::Number(300.0));
        r
    }

    #[test]
    fn idleness_reads_utilisation_and_temperature() {
        assert_eq!(idleness(None), Idleness::Unknown);
        assert_eq!(idleness(Some(&readings(None, None))), Idleness::Unknown);
        assert_eq!(
            idleness(Some(&readings(Some(0.0), Some(34.0)))),
            Idleness::Idle
        );
        assert_eq!(idleness(Some(&readings(None, Some(40.0)))), Idleness::Idle);
        assert_eq!(
            idleness(Some(&readings(Some(97.0), Some(71.0)))),
            Idleness::Busy("97% busy, 71 °C".into())
        );
        assert_eq!(
            idleness(Some(&readings(Some(2.0), Some(63.0)))),
            Idleness::Busy("63 °C".into()),
            "an idle card still hot from the last workload is not ready"
        );
    }
}
