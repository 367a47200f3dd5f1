//! `--wait-idle`: a device is idle and cool before a workload starts, as far as its
//! telemetry can tell.

use std::time::{Duration, Instant};

use super::{Latest, signals_received};
use crate::evidence::{Event, EventSink, EventWriter};
use crate::gpu::DeviceInfo;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// Before any load, waits (up to [`WAIT_IDLE_MAX`]) until every device is idle and cool,
/// and says what it waited for; at a terminal (`show`), each device's target and its
/// reading now while it waits, never a guess of how long it will take.
pub(super) fn wait_until_idle(
    devices: &[DeviceInfo],
    latest: &Latest,
    events: &mut EventWriter,
    show: bool,
) {
    let started = Instant::now();
    let line = indicatif::ProgressBar::with_draw_target(
        None,
        if show {
            indicatif::ProgressDrawTarget::stderr()
        } else {
            indicatif::ProgressDrawTarget::hidden()
        },
    );
    line.set_style(
        indicatif::ProgressStyle::with_template("{msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
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
            let said: Vec<String> = devices
                .iter()
                .filter(|d| {
                    matches!(
                        states.iter().find(|(i, _)| *i == d.index),
                        Some((_, Idleness::Busy(_)))
                    )
                })
                .map(|d| {
                    let words = latest
                        .lock()
                        .map(|m| wait_words(m.get(&d.index).map(|(_, r)| r)))
                        .unwrap_or_else(|_| wait_words(None));
                    format!("GPU{} {words}", d.index)
                })
                .collect();
            line.set_message(said.join("\n"));
            std::thread::sleep(Duration::from_millis(500));
            continue;
        };
        line.finish_and_clear();
        if let Some(message) = message {
            events.emit(None, Event::Note { message });
        }
        return;
    }
}

/// What a device waiting to be idle and cool waits for and where it stands, in words:
/// `waiting for the GPU to be idle and under 50 °C: 63 °C now`. The target and the
/// reading, never an estimate of the time left: a card cools at no steady rate.
pub fn wait_words(readings: Option<&Readings>) -> String {
    let (target, now) = wait_parts(readings);
    format!("waiting for the GPU to be idle and under {target}: {now}")
}

/// [`wait_words`] for a line with little room: `waiting: idle, under 50 °C; 63 °C now`.
pub fn wait_words_short(readings: Option<&Readings>) -> String {
    let (target, now) = wait_parts(readings);
    format!("waiting: idle, under {target}; {now}")
}

/// The wait's target temperature and the reading now, in words.
fn wait_parts(readings: Option<&Readings>) -> (String, String) {
    let value = |key: &str| readings.and_then(|r| r.get(key)).and_then(Reading::number);
    let mut now = Vec::new();
    if let Some(u) = value(signals::UTIL_GPU_PCT.name).filter(|u| *u > IDLE_UTIL_PCT) {
        now.push(format!("{u:.0}% busy"));
    }
    if let Some(t) = value(signals::GPU_TEMP_C.name) {
        now.push(format!("{t:.0} °C"));
    }
    let target = format!("{COOL_TEMP_C:.0} °C");
    if now.is_empty() {
        (target, "no reading yet".to_owned())
    } else {
        (target, format!("{} now", now.join(", ")))
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
    fn a_wait_says_its_target_and_the_reading_now() {
        assert_eq!(
            wait_words(Some(&readings(Some(2.0), Some(63.0)))),
            "waiting for the GPU to be idle and under 50 °C: 63 °C now"
        );
        assert_eq!(
            wait_words(Some(&readings(Some(97.0), Some(71.0)))),
            "waiting for the GPU to be idle and under 50 °C: 97% busy, 71 °C now"
        );
        assert_eq!(
            wait_words_short(Some(&readings(Some(2.0), Some(63.0)))),
            "waiting: idle, under 50 °C; 63 °C now"
        );
        // The near miss: nothing read yet says so, and never a time.
        assert_eq!(
            wait_words(None),
            "waiting for the GPU to be idle and under 50 °C: no reading yet"
        );
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
