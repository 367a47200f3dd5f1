//! Telemetry per phase and device, for `report.json`: gauge statistics, time under each
//! throttle reason, counter deltas, and the Xids seen during the phase.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::record::{Reading, Readings, TelemetryData, TelemetryRecord, XidEvent};
use super::throttle;

/// Gauges summarised by min/median/max.
pub const GAUGES: [&str; 14] = [
    "gpu_temp_c",
    "hbm_temp_c",
    "power_w",
    "power_limit_enforced_w",
    "power_limit_default_w",
    "clock_sm_mhz",
    "clock_mem_mhz",
    "clock_graphics_mhz",
    "pcie_gen",
    "pcie_gen_max",
    "pcie_width",
    "pcie_width_max",
    "mem_used_bytes",
    "util_gpu_pct",
];

/// Min, median and max of a gauge over a phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    /// Smallest reading.
    pub min: f64,
    /// Median reading.
    pub median: f64,
    /// Largest reading.
    pub max: f64,
    /// Readings.
    pub samples: usize,
}

/// Telemetry of one device over one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTelemetry {
    /// Vulkan device index.
    pub device: usize,
    /// The phase.
    pub phase: String,
    /// Phase start (the `before` snapshot), ms since the run started.
    pub start_ms: f64,
    /// Phase end (the `after` snapshot).
    pub end_ms: f64,
    /// Samples in the phase.
    pub samples: usize,
    /// Gauge statistics, for gauges with at least one number.
    pub gauges: BTreeMap<String, Stat>,
    /// Share of samples (0..1) under each throttle reason that occurred.
    pub throttle_share: BTreeMap<String, f64>,
    /// Counter after minus before, for counters numeric at both ends.
    pub counter_deltas: BTreeMap<String, f64>,
    /// Counters not supported (or unreadable) at either end.
    pub counters_unavailable: Vec<String>,
    /// Xids during the phase.
    pub xids: Vec<XidEvent>,
}

fn stat(mut values: Vec<f64>) -> Option<Stat> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    Some(Stat {
        min: values[0],
        median,
        max: values[n - 1],
        samples: n,
    })
}

/// Summarises every (device, phase) that has both a `before` and an `after` snapshot.
/// Each boundary is the run of consecutive snapshot records with the same phase and
/// `when` (one per source); a later `before` opens a new phase.
pub fn summarize(records: &[TelemetryRecord]) -> Vec<PhaseTelemetry> {
    let mut open: BTreeMap<(usize, String), (f64, Readings)> = BTreeMap::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < records.len() {
        let TelemetryData::Snapshot { phase, when, .. } = &records[i].data else {
            i += 1;
            continue;
        };
        let t_ms = records[i].t_ms;
        let mut boundary: BTreeMap<usize, Readings> = BTreeMap::new();
        while let Some(r) = records.get(i) {
            match (&r.data, r.device) {
                (
                    TelemetryData::Snapshot {
                        phase: p,
                        when: w,
                        counters,
                    },
                    Some(device),
                ) if p == phase && w == when => {
                    boundary.entry(device).or_default().extend(counters.clone());
                    i += 1;
                }
                _ => break,
            }
        }
        for (device, counters) in boundary {
            let key = (device, phase.clone());
            if when == "before" {
                open.insert(key, (t_ms, counters));
            } else if let Some((start_ms, before)) = open.remove(&key) {
                let mut p = window(records, device, phase, start_ms, t_ms);
                add_deltas(&mut p, &before, &counters);
                out.push(p);
            }
        }
        if i < records.len() && !matches!(records[i].data, TelemetryData::Snapshot { .. }) {
            i += 1;
        }
    }
    out
}

fn add_deltas(p: &mut PhaseTelemetry, before: &Readings, after: &Readings) {
    for (key, a) in after {
        match (before.get(key).and_then(Reading::number), a.number()) {
            (Some(b), Some(a)) => {
                p.counter_deltas.insert(key.clone(), a - b);
            }
            _ => p.counters_unavailable.push(key.clone()),
        }
    }
}

fn window(
    records: &[TelemetryRecord],
    device: usize,
    phase: &str,
    start_ms: f64,
    end_ms: f64,
) -> PhaseTelemetry {
    let inside = |r: &&TelemetryRecord| r.t_ms >= start_ms && r.t_ms <= end_ms;
    let mut gauges: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut throttled: BTreeMap<String, usize> = BTreeMap::new();
    let mut samples = 0;
    let mut xids = Vec::new();
    for r in records.iter().filter(inside) {
        match &r.data {
            TelemetryData::Sample { readings } if r.device == Some(device) => {
                samples += 1;
                for g in GAUGES {
                    if let Some(v) = readings.get(g).and_then(Reading::number) {
                        gauges.entry(g).or_default().push(v);
                    }
                }
                if let Some(mask) = readings
                    .get("throttle_reasons_mask")
                    .and_then(Reading::number)
                {
                    for reason in throttle::decode(mask as u64) {
                        *throttled.entry(reason).or_default() += 1;
                    }
                }
            }
            TelemetryData::Xid { xid }
                if !xid.before_run && (r.device == Some(device) || r.device.is_none()) =>
            {
                xids.push(xid.clone());
            }
            _ => {}
        }
    }
    PhaseTelemetry {
        device,
        phase: phase.to_owned(),
        start_ms,
        end_ms,
        samples,
        gauges: gauges
            .into_iter()
            .filter_map(|(k, v)| stat(v).map(|s| (k.to_owned(), s)))
            .collect(),
        throttle_share: throttled
            .into_iter()
            .map(|(k, n)| (k, n as f64 / samples.max(1) as f64))
            .collect(),
        counter_deltas: BTreeMap::new(),
        counters_unavailable: Vec::new(),
        xids,
    }
}
