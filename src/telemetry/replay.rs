//! Replays a recorded `telemetry.jsonl` through the same path as live sources, so that
//! everything downstream (summaries, the verdict) is testable without a GPU.

use std::collections::VecDeque;
use std::path::Path;

use super::Source;
use super::record::{Readings, TelemetryData, TelemetryRecord};
use crate::evidence::{EvidenceResult, read_jsonl};

/// A recorded file as a source: identity and facts at start, one recorded tick per
/// sample, and the recorded snapshots in order at each phase boundary.
pub struct ReplaySource {
    preamble: Vec<TelemetryRecord>,
    ticks: VecDeque<Vec<TelemetryRecord>>,
    snapshots: VecDeque<Vec<TelemetryRecord>>,
}

impl ReplaySource {
    /// Loads a recorded file.
    pub fn open(path: &Path) -> EvidenceResult<ReplaySource> {
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
                TelemetryData::Sample { .. } | TelemetryData::Xid { .. } => {
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

    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.preamble
            .drain(..)
            .map(|r| (r.device, r.data))
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
