//! Replays a recorded `telemetry.jsonl` through the same path as live sources, so that
//! everything downstream (summaries, the verdict) is testable without a GPU.

use std::collections::VecDeque;
use std::path::Path;

use super::record::{Readings, TelemetryData, TelemetryRecord};
use super::{Gap, Source};
use crate::fsutil::{FileError, read_jsonl};

/// A recorded file as a source: identity and facts at start, one recorded tick per
/// sample, and the recorded snapshots in order at each phase boundary.
pub struct ReplaySource {
    /// The recorded identity and gaps: played at `start`, and what `status` and
    /// `identity` say.
    preamble: Vec<TelemetryRecord>,
    ticks: VecDeque<Vec<TelemetryRecord>>,
    snapshots: VecDeque<Vec<TelemetryRecord>>,
}

impl ReplaySource {
    /// Loads a recorded file.
    pub fn open(path: &Path) -> Result<ReplaySource, FileError> {
        let (records, _) = read_jsonl::<TelemetryRecord>(path)?;
        Ok(Self::from_records(records))
    }

    /// Groups recorded records into ticks (by sample time) and snapshots (by boundary).
    pub fn from_records(records: Vec<TelemetryRecord>) -> ReplaySource {
        let mut preamble = Vec::new();
        let mut ticks: VecDeque<Vec<TelemetryRecord>> = VecDeque::new();
        let mut snapshots: VecDeque<Vec<TelemetryRecord>> = VecDeque::new();
        let mut last_tick_ms = f64::NAN;
        let mut last_snapshot: Option<(String, String)> = None;
        for r in records {
            match &r.data {
                TelemetryData::Header { .. } | TelemetryData::Missed { .. } => {}
                TelemetryData::Identity { .. } | TelemetryData::Unavailable { .. } => {
                    preamble.push(r)
                }
                TelemetryData::Snapshot { phase, when, .. } => {
                    let key = (phase.clone(), when.clone());
                    if last_snapshot.as_ref() != Some(&key) || snapshots.is_empty() {
                        snapshots.push_back(Vec::new());
                        last_snapshot = Some(key);
                    }
                    if let Some(group) = snapshots.back_mut() {
                        group.push(r);
                    }
                }
                TelemetryData::Sample { .. }
                | TelemetryData::Xid { .. }
                | TelemetryData::DriverReset { .. } => {
                    last_snapshot = None;
                    if r.t_ms != last_tick_ms || ticks.is_empty() {
                        ticks.push_back(Vec::new());
                        last_tick_ms = r.t_ms;
                    }
                    if let Some(group) = ticks.back_mut() {
                        group.push(r);
                    }
                }
            }
        }
        ReplaySource {
            preamble,
            ticks,
            snapshots,
        }
    }

    /// Recorded ticks not yet played.
    pub fn ticks_left(&self) -> usize {
        self.ticks.len()
    }
}

impl Source for ReplaySource {
    fn name(&self) -> &'static str {
        "replay"
    }

    /// What the recording says could not be read.
    fn status(&self) -> Vec<Gap> {
        self.preamble
            .iter()
            .filter_map(|r| match &r.data {
                TelemetryData::Unavailable {
                    message,
                    missing,
                    cause,
                } => Some(Gap {
                    device: r.device,
                    message: message.clone(),
                    missing: missing.clone(),
                    cause: cause.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The recorded identity of the device, every source's fields together.
    fn identity(&self, device: usize) -> Option<Readings> {
        self.preamble
            .iter()
            .filter(|r| r.device == Some(device))
            .filter_map(|r| match &r.data {
                TelemetryData::Identity { fields } => Some(fields),
                _ => None,
            })
            .fold(None, |all: Option<Readings>, fields| {
                let mut all = all.unwrap_or_default();
                all.extend(fields.clone());
                Some(all)
            })
    }

    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.preamble
            .iter()
            .map(|r| (r.device, r.data.clone()))
            .collect()
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.ticks
            .pop_front()
            .unwrap_or_default()
            .into_iter()
            .map(|r| (r.device, r.data))
            .collect()
    }

    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        self.snapshots
            .pop_front()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|r| match (r.device, r.data) {
                (Some(d), TelemetryData::Snapshot { counters, .. }) => Some((d, counters)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::record::Reading;

    #[test]
    fn a_recording_says_what_it_recorded_of_identity_and_gaps() {
        let records: Vec<TelemetryRecord> = [
            r#"{"t_ms":0,"device":0,"source":"nvml","kind":"identity","fields":{"name":"H100","serial":"1"}}"#,
            r#"{"t_ms":0,"device":0,"source":"sysfs","kind":"identity","fields":{"serial":"2","vbios":"v"}}"#,
            r#"{"t_ms":0,"source":"kmsg","kind":"unavailable","message":"no log","missing":["xid"],"cause":"no_permission"}"#,
        ]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        let mut source = ReplaySource::from_records(records);
        let identity = source.identity(0).unwrap();
        assert_eq!(identity["name"], Reading::Text("H100".into()));
        assert_eq!(
            identity["serial"],
            Reading::Text("2".into()),
            "later fields win"
        );
        assert_eq!(source.identity(1), None);
        let gaps = source.status();
        assert_eq!(gaps.len(), 1);
        assert_eq!(gaps[0].cause.as_deref(), Some("no_permission"));
        assert_eq!(source.start().len(), 3);
        assert_eq!(source.status(), gaps, "still known after the start");
    }
}
