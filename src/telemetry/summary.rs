//! Telemetry per phase and device, for `report.json`: gauge statistics, time under each
//! throttle reason, counter deltas, and the Xids seen during the phase.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::process::Process;
use super::record::{
    Boundary, DriverReset, Reading, Readings, TelemetryData, TelemetryRecord, XidEvent, add_reset,
    add_xid,
};
use super::signals;
use super::throttle::{self, ThrottleReason};

/// Gauges summarised by min/median/max (each fan's speed too, by its family's name:
/// [`signals::FAN_SPEED_PCT`]).
pub const GAUGES: [&str; 23] = [
    signals::GPU_TEMP_C.name,
    signals::GPU_HOTSPOT_TEMP_C.name,
    signals::HBM_TEMP_C.name,
    signals::POWER_W.name,
    signals::POWER_LIMIT_ENFORCED_W.name,
    signals::POWER_LIMIT_DEFAULT_W.name,
    signals::CLOCK_SM_MHZ.name,
    signals::CLOCK_SM_MAX_MHZ.name,
    signals::CLOCK_MEM_MHZ.name,
    signals::CLOCK_MEM_MAX_MHZ.name,
    signals::CLOCK_GRAPHICS_MHZ.name,
    signals::CLOCK_SM_APP_MHZ.name,
    signals::CLOCK_SM_APP_DEFAULT_MHZ.name,
    signals::PCIE_GEN.name,
    signals::PCIE_GEN_MAX.name,
    signals::PCIE_WIDTH.name,
    signals::PCIE_WIDTH_MAX.name,
    signals::PCIE_SLOT_GEN_MAX.name,
    signals::PCIE_SLOT_WIDTH_MAX.name,
    signals::MEM_USED_BYTES.name,
    signals::UTIL_GPU_PCT.name,
    signals::UTIL_MEM_PCT.name,
    signals::FAN0_RPM.name,
];

/// The pseudo-phase that holds what happened between two phases, or after the last one:
/// Xids and counter growth that no phase's window covers still belong to the run.
pub const BETWEEN_PHASES: &str = "between_phases";

/// The phase of idle evidence taken before any load: what was wrong before kiln touched
/// the card, told apart from what its load did.
pub const PREFLIGHT: &str = "preflight";

/// The phase of a GPU a run could only observe (no Vulkan driver drives it): from the end
/// of its preflight to the end of the run.
pub const OBSERVED: &str = "observed";

/// The pseudo-phase of a GPU a run could only observe that holds its counts since the
/// driver loaded, as they stood when the run began (NVML's volatile ECC counts, amdgpu's
/// RAS counts): an observation of a few seconds sees nothing grow, and these are what
/// `kiln health` judges on its first check.
pub const SINCE_DRIVER_LOAD: &str = "since_driver_load";

/// `kiln health`'s one phase, judged against what its state file kept from the last
/// check: what it reads came since that check.
pub const HEALTH: &str = "health";

/// `kiln health`'s one phase with no earlier check to compare with (no state file, or a
/// GPU it has not checked before): what it reads came since boot (the kernel log from
/// its start, the counts since the driver loaded), never "since the last check".
pub const HEALTH_SINCE_BOOT: &str = "health_since_boot";

/// Whether `phase` is `kiln health`'s ([`HEALTH`] or [`HEALTH_SINCE_BOOT`]).
pub fn is_health(phase: &str) -> bool {
    phase == HEALTH || phase == HEALTH_SINCE_BOOT
}

/// What a health phase judged was read over, in words.
pub fn health_words(phase: &str) -> &'static str {
    if phase == HEALTH_SINCE_BOOT {
        "since boot"
    } else {
        "since the last check"
    }
}

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
    /// Share of samples (0..1) under each throttle reason that occurred, by the reason's
    /// name (unknown bits as `0x…`).
    pub throttle_share: BTreeMap<String, f64>,
    /// Samples that said which throttle reasons held (none held is a reading too): where
    /// none did, the reasons are unknown, not absent.
    #[serde(default)]
    pub reasons_read: usize,
    /// Counter after minus before, for counters numeric at both ends.
    pub counter_deltas: BTreeMap<String, f64>,
    /// Counter values at the phase's end: standing states (a pending remap, a failed
    /// one) are read here even when nothing moved during the phase.
    #[serde(default)]
    pub counters_after: BTreeMap<String, f64>,
    /// Counters not supported (or unreadable) at either end.
    pub counters_unavailable: Vec<String>,
    /// Xids during the phase.
    pub xids: Vec<XidEvent>,
    /// The display driver resets after a timeout (Windows' TDR) during the phase.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_resets: Vec<DriverReset>,
    /// Other processes seen on the GPU during the phase (the most memory each held), by
    /// pid: a tenant that arrives after the start is as much the environment's as one
    /// there before. Reports of an older kiln give them as `pid:bytes:name` text.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "crate::telemetry::process::deserialize_list"
    )]
    pub other_processes: Vec<Process>,
    /// When each of them was first seen in the phase, ms since the run started, by pid: a
    /// process that arrives mid-phase splits its rates into before and after.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub processes_first_ms: BTreeMap<u32, f64>,
}

impl PhaseTelemetry {
    /// The counts since the driver loaded as they stood when `p` began (its counters at
    /// its end less what they grew by), as the phase [`SINCE_DRIVER_LOAD`]: lifetime
    /// totals are left out (a card that logged errors years ago is not failing for them
    /// today), the states (a pending remap) are read at `p`'s start.
    pub fn since_driver_load(p: &PhaseTelemetry) -> PhaseTelemetry {
        let before: BTreeMap<String, f64> = p
            .counters_after
            .iter()
            .map(|(k, after)| (k.clone(), after - p.counter_deltas.get(k).unwrap_or(&0.0)))
            .collect();
        PhaseTelemetry {
            device: p.device,
            phase: SINCE_DRIVER_LOAD.into(),
            start_ms: p.start_ms,
            end_ms: p.start_ms,
            samples: 0,
            gauges: BTreeMap::new(),
            throttle_share: BTreeMap::new(),
            reasons_read: 0,
            counter_deltas: before
                .iter()
                .filter(|(k, _)| signals::counts_since_driver_load(k))
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            counters_after: before,
            counters_unavailable: p.counters_unavailable.clone(),
            xids: Vec::new(),
            driver_resets: Vec::new(),
            other_processes: Vec::new(),
            processes_first_ms: BTreeMap::new(),
        }
    }

    /// The share of the phase's samples (0..1) under a throttle reason; 0 where it never
    /// held.
    pub fn throttle_share_of(&self, reason: ThrottleReason) -> f64 {
        self.throttle_share
            .get(reason.name())
            .copied()
            .unwrap_or(0.0)
    }

    /// A gauge's statistics over the phase; None where it gave no number.
    pub fn gauge(&self, signal: signals::Signal) -> Option<&Stat> {
        self.gauges.get(signal.name)
    }

    /// What a counter grew by over the phase; None where it was not read at both ends.
    pub fn grew(&self, signal: signals::Signal) -> Option<f64> {
        self.counter_deltas.get(signal.name).copied()
    }

    /// What a counter grew by over the phase, 0 where it was not read at both ends: for
    /// errors, which count only where they were counted.
    pub fn grew_or_0(&self, signal: signals::Signal) -> f64 {
        self.grew(signal).unwrap_or(0.0)
    }

    /// A counter's or a state's value at the phase's end.
    pub fn after(&self, signal: signals::Signal) -> Option<f64> {
        self.counters_after.get(signal.name).copied()
    }

    /// Every counter's growth over the phase, by what it names (names the catalogue does
    /// not have are left out).
    pub fn growth(&self) -> impl Iterator<Item = (signals::Name<'_>, f64)> {
        named(&self.counter_deltas)
    }

    /// Every counter's and state's value at the phase's end, by what it names.
    pub fn ending(&self) -> impl Iterator<Item = (signals::Name<'_>, f64)> {
        named(&self.counters_after)
    }
}

/// A map of values by name, read as what each name names.
fn named(values: &BTreeMap<String, f64>) -> impl Iterator<Item = (signals::Name<'_>, f64)> {
    values
        .iter()
        .filter_map(|(k, v)| Some((signals::Name::parse(k)?, *v)))
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
    // Every boundary's counters per device, in time order, for the gaps between phases.
    let mut boundaries: BTreeMap<usize, Vec<(f64, Readings)>> = BTreeMap::new();
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
            let trail = boundaries.entry(device).or_default();
            if when == Boundary::Before.as_str() {
                trail.push((t_ms, counters.clone()));
                open.insert(key, (t_ms, counters));
            } else if let Some((start_ms, before)) = open.remove(&key) {
                trail.push((t_ms, counters.clone()));
                let mut p = window(records, device, phase, start_ms, t_ms);
                add_deltas(&mut p, &before, &counters);
                out.push(p);
            }
        }
        if i < records.len() && !matches!(records[i].data, TelemetryData::Snapshot { .. }) {
            i += 1;
        }
    }
    out.extend(between_phases(records, &out, &boundaries));
    out
}

/// What no phase covers, per device: counter growth from one phase's closing snapshot to
/// the next one's opening snapshot, and Xids outside every phase's window (between two
/// phases, or after the last). Judged like a phase of its own, so that an event of the
/// run is never lost for landing in a gap.
fn between_phases(
    records: &[TelemetryRecord],
    phases: &[PhaseTelemetry],
    boundaries: &BTreeMap<usize, Vec<(f64, Readings)>>,
) -> Vec<PhaseTelemetry> {
    let mut out = Vec::new();
    for (&device, trail) in boundaries {
        let own: Vec<&PhaseTelemetry> = phases.iter().filter(|p| p.device == device).collect();
        let (Some(first), Some(last)) = (trail.first(), trail.last()) else {
            continue;
        };
        let covered = |t: f64| own.iter().any(|p| t >= p.start_ms && t <= p.end_ms);
        // Growth across each gap: a snapshot to the next, where no phase spans them.
        let mut gaps: BTreeMap<String, f64> = BTreeMap::new();
        for pair in trail.windows(2) {
            let ((t0, c0), (t1, c1)) = (&pair[0], &pair[1]);
            if own.iter().any(|p| p.start_ms <= *t0 && p.end_ms >= *t1) {
                continue;
            }
            for (key, after) in c1 {
                if let (Some(a), Some(b)) = (after.number(), c0.get(key).and_then(Reading::number))
                    && a > b
                {
                    *gaps.entry(key.clone()).or_default() += a - b;
                }
            }
        }
        let (xids, driver_resets) = run_events(records.iter().filter(|r| !covered(r.t_ms)), device);
        if gaps.values().all(|v| *v <= 0.0) && xids.is_empty() && driver_resets.is_empty() {
            continue;
        }
        let end_ms = records.last().map_or(last.0, |r| r.t_ms.max(last.0));
        out.push(PhaseTelemetry {
            device,
            phase: BETWEEN_PHASES.to_owned(),
            start_ms: first.0,
            end_ms,
            samples: 0,
            gauges: BTreeMap::new(),
            throttle_share: BTreeMap::new(),
            reasons_read: 0,
            counter_deltas: gaps,
            counters_after: BTreeMap::new(),
            counters_unavailable: Vec::new(),
            xids,
            driver_resets,
            other_processes: Vec::new(),
            processes_first_ms: BTreeMap::new(),
        });
    }
    out
}

/// The Xids and driver resets of the run (not its history) among `records` that concern
/// `device`, each fault once however many ways it came.
fn run_events<'a>(
    records: impl Iterator<Item = &'a TelemetryRecord>,
    device: usize,
) -> (Vec<XidEvent>, Vec<DriverReset>) {
    let mut xids = Vec::new();
    let mut resets = Vec::new();
    for r in records.filter(|r| r.device == Some(device) || r.device.is_none()) {
        match &r.data {
            TelemetryData::Xid { xid } if !xid.before_run => add_xid(
                &mut xids,
                XidEvent {
                    t_ms: Some(r.t_ms),
                    ..xid.clone()
                },
            ),
            TelemetryData::DriverReset { reset } if !reset.before_run => add_reset(
                &mut resets,
                DriverReset {
                    t_ms: Some(r.t_ms),
                    ..reset.clone()
                },
            ),
            _ => {}
        }
    }
    (xids, resets)
}

fn add_deltas(p: &mut PhaseTelemetry, before: &Readings, after: &Readings) {
    for (key, a) in after {
        if let Some(value) = a.number() {
            p.counters_after.insert(key.clone(), value);
        }
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
    // Shares are of the samples that carry throttle reasons: another source's samples of
    // the same device (sysfs has none) must not dilute them.
    let mut with_reasons = 0usize;
    let mut samples = 0;
    let mut tenants: BTreeMap<u32, Process> = BTreeMap::new();
    let mut first_ms: BTreeMap<u32, f64> = BTreeMap::new();
    for r in records.iter().filter(inside) {
        match &r.data {
            // A sample with no reading (a source whose every call failed) is no sample: a
            // phase of them must read as unwatched, never as watched and calm.
            TelemetryData::Sample { readings }
                if r.device == Some(device) && readings.values().any(|v| v.number().is_some()) =>
            {
                samples += 1;
                for g in GAUGES {
                    if let Some(v) = readings.get(g).and_then(Reading::number) {
                        gauges.entry(g).or_default().push(v);
                    }
                }
                // A card has as many fans as it has (none on a passive data-centre card).
                for (name, reading) in readings {
                    if (signals::FAN_SPEED_PCT.matches)(name)
                        && let Some(v) = reading.number()
                    {
                        gauges.entry(name.as_str()).or_default().push(v);
                    }
                }
                if let Some(list) = readings
                    .get(signals::OTHER_PROCESSES_NOW.name)
                    .and_then(Reading::processes)
                {
                    for p in list {
                        first_ms.entry(p.pid).or_insert(r.t_ms);
                        let most = tenants.entry(p.pid).or_insert_with(|| p.clone());
                        most.used_bytes = most.used_bytes.max(p.used_bytes);
                        most.name = most.name.take().or(p.name);
                    }
                }
                if let Some(reasons) = throttle::reasons_of(readings) {
                    with_reasons += 1;
                    for reason in reasons {
                        *throttled.entry(reason.to_owned()).or_default() += 1;
                    }
                }
            }
            _ => {}
        }
    }
    let (xids, driver_resets) = run_events(records.iter().filter(inside), device);
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
            .map(|(k, n)| (k, n as f64 / with_reasons.max(1) as f64))
            .collect(),
        reasons_read: with_reasons,
        counter_deltas: BTreeMap::new(),
        counters_after: BTreeMap::new(),
        counters_unavailable: Vec::new(),
        xids,
        driver_resets,
        other_processes: tenants.into_values().collect(),
        processes_first_ms: first_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(t_ms: f64, source: &str, data: serde_json::Value) -> TelemetryRecord {
        let mut v = data;
        v["t_ms"] = t_ms.into();
        v["device"] = 0.into();
        v["source"] = source.into();
        serde_json::from_value(v).unwrap()
    }

    fn snapshot(t_ms: f64, when: &str, counters: serde_json::Value) -> TelemetryRecord {
        record(
            t_ms,
            "nvml",
            serde_json::json!({"kind": "snapshot", "phase": "vram", "when": when, "counters": counters}),
        )
    }

    #[test]
    fn shares_are_of_the_samples_that_carry_the_signal() {
        // NVML says capped on every sample; sysfs samples the same device between them
        // with no throttle mask and its own link readings.
        let mut records = vec![snapshot(0.0, "before", serde_json::json!({}))];
        for i in 0..10 {
            let t = 10.0 + 20.0 * f64::from(i);
            records.push(record(
                t,
                "nvml",
                serde_json::json!({"kind": "sample", "readings": {
                "throttle_reasons_mask": 4, "gpu_temp_c": 60.0 + f64::from(i), "pcie_width": 16}}),
            ));
            records.push(record(
                t + 1.0,
                "sysfs",
                serde_json::json!({"kind": "sample", "readings": {
                "pcie_width": 8, "pcie_gen": 4}}),
            ));
        }
        records.push(snapshot(300.0, "after", serde_json::json!({})));
        let phase = &summarize(&records)[0];
        assert_eq!(phase.samples, 20, "every sample record of the device");
        assert_eq!(
            phase.throttle_share.get("sw_power_cap"),
            Some(&1.0),
            "capped 100% of the time reads 100%, not 50%"
        );
        let temp = &phase.gauges["gpu_temp_c"];
        assert_eq!((temp.samples, temp.min, temp.max), (10, 60.0, 69.0));
        assert_eq!(phase.gauges["pcie_width"].samples, 20);
        assert_eq!(phase.gauges["pcie_gen"].samples, 10);
    }

    #[test]
    fn every_fan_a_card_has_is_summarised_and_one_not_read_is_not() {
        let mut records = vec![snapshot(0.0, "before", serde_json::json!({}))];
        for i in 0..4 {
            records.push(record(
                10.0 + 20.0 * f64::from(i),
                "nvml",
                serde_json::json!({"kind": "sample", "readings": {
                "fan0_speed_pct": 30 + 10 * i, "fan1_speed_pct": 0,
                "fan2_speed_pct": {"unavailable": "not_supported"}}}),
            ));
        }
        records.push(snapshot(300.0, "after", serde_json::json!({})));
        let phase = &summarize(&records)[0];
        let fan0 = &phase.gauges["fan0_speed_pct"];
        assert_eq!((fan0.samples, fan0.min, fan0.max), (4, 30.0, 60.0));
        assert_eq!(phase.gauges["fan1_speed_pct"].max, 0.0);
        assert!(!phase.gauges.contains_key("fan2_speed_pct"));
    }

    #[test]
    fn a_phase_is_read_by_signal_and_its_families_by_what_they_name() {
        let records = vec![
            snapshot(
                0.0,
                "before",
                serde_json::json!({"pcie_replays": 5, "nvlink2_crc_flit": 10,
                    "ras_gfx_ue": 0, "nvlink2_state": 1, "made_up_counter": 1}),
            ),
            record(
                10.0,
                "nvml",
                serde_json::json!({"kind": "sample", "readings": {"gpu_temp_c": 70}}),
            ),
            snapshot(
                60_000.0,
                "after",
                serde_json::json!({"pcie_replays": 9, "nvlink2_crc_flit": 13,
                    "ras_gfx_ue": 2, "nvlink2_state": 0, "made_up_counter": 4}),
            ),
        ];
        let phase = &summarize(&records)[0];
        assert_eq!(phase.gauge(signals::GPU_TEMP_C).map(|g| g.max), Some(70.0));
        assert_eq!(phase.gauge(signals::POWER_W), None);
        assert_eq!(phase.grew(signals::PCIE_REPLAYS), Some(4.0));
        assert_eq!(phase.grew(signals::AER_FATAL), None, "never read");
        assert_eq!(phase.grew_or_0(signals::AER_FATAL), 0.0);
        let grown: Vec<_> = phase.growth().collect();
        assert!(grown.contains(&(
            signals::Name::Nvlink {
                link: 2,
                part: signals::NvlinkPart::CrcFlit
            },
            3.0
        )));
        assert!(grown.contains(&(
            signals::Name::Ras {
                block: "gfx",
                uncorrected: true
            },
            2.0
        )));
        assert_eq!(
            grown.len(),
            4,
            "a name the catalogue lacks is left out: {grown:?}"
        );
        let down = phase.ending().any(|(n, v)| {
            n == signals::Name::Nvlink {
                link: 2,
                part: signals::NvlinkPart::State,
            } && v == 0.0
        });
        assert!(down, "the link's state at the end");
    }

    #[test]
    fn a_sample_with_no_reading_is_no_sample() {
        // A source whose every call failed (a lost GPU, a refused library) wrote records
        // that hold no number: the phase reads as unwatched, never as watched and calm.
        let mut records = vec![snapshot(0.0, "before", serde_json::json!({}))];
        for i in 0..5 {
            records.push(record(
                10.0 + 20.0 * f64::from(i),
                "nvml",
                serde_json::json!({"kind": "sample", "readings": {
                    "gpu_temp_c": {"unavailable": "gpu_lost"}, "power_w": {"unavailable": "gpu_lost"}}}),
            ));
        }
        records.push(record(
            120.0,
            "nvml",
            serde_json::json!({"kind": "sample", "readings": {}}),
        ));
        records.push(snapshot(300.0, "after", serde_json::json!({})));
        assert_eq!(summarize(&records)[0].samples, 0);
    }

    #[test]
    fn what_lands_between_phases_belongs_to_the_run() {
        let xid = |t: f64, code: u32| {
            record(
                t,
                "kmsg",
                serde_json::json!({"kind": "xid", "xid": {"bus_id": null, "code": code, "pid": null,
                    "process": null, "message": "x", "kernel_us": null, "before_run": false}}),
            )
        };
        let boundary = |t: f64, phase: &str, when: &str, ecc: u32| {
            record(
                t,
                "nvml",
                serde_json::json!({"kind": "snapshot", "phase": phase, "when": when,
                    "counters": {"ecc_uncorrected_volatile": ecc, "remap_pending": 1}}),
            )
        };
        let records = vec![
            boundary(0.0, "vram", "before", 0),
            xid(50.0, 13),
            boundary(100.0, "vram", "after", 0),
            xid(120.0, 48),
            boundary(150.0, "compute", "before", 1),
            boundary(250.0, "compute", "after", 1),
            xid(300.0, 79),
        ];
        let phases = summarize(&records);
        let names: Vec<&str> = phases.iter().map(|p| p.phase.as_str()).collect();
        assert_eq!(names, vec!["vram", "compute", BETWEEN_PHASES]);
        assert_eq!(phases[0].xids.len(), 1);
        let gap = &phases[2];
        let codes: Vec<Option<u32>> = gap.xids.iter().map(|x| x.code).collect();
        assert_eq!(codes, vec![Some(48), Some(79)]);
        assert_eq!(
            gap.counter_deltas.get("ecc_uncorrected_volatile"),
            Some(&1.0)
        );
        // Standing values are kept at every phase's end.
        assert_eq!(phases[1].counters_after.get("remap_pending"), Some(&1.0));
    }

    #[test]
    fn counts_since_the_driver_loaded_are_read_at_a_phase_s_start() {
        let mut p: PhaseTelemetry = serde_json::from_value(serde_json::json!({
            "device": 2, "phase": "preflight", "start_ms": 10.0, "end_ms": 1010.0,
            "samples": 5, "gauges": {}, "throttle_share": {}, "counters_unavailable": [],
            "xids": [], "counter_deltas": {}
        }))
        .unwrap();
        // 3 uncorrectable counts since the driver loaded, 1 of them during the phase; a
        // lifetime total of 9, and a pending remap.
        p.counters_after
            .insert("ecc_uncorrected_volatile".into(), 3.0);
        p.counter_deltas
            .insert("ecc_uncorrected_volatile".into(), 1.0);
        p.counters_after
            .insert("ecc_uncorrected_aggregate".into(), 9.0);
        p.counters_after.insert("remap_pending".into(), 1.0);
        let since = PhaseTelemetry::since_driver_load(&p);
        assert_eq!(since.phase, SINCE_DRIVER_LOAD);
        assert_eq!(since.device, 2);
        assert_eq!(
            since.counter_deltas,
            BTreeMap::from([("ecc_uncorrected_volatile".to_owned(), 2.0)]),
            "the volatile count as it stood at the start, never the lifetime total"
        );
        assert_eq!(since.counters_after["remap_pending"], 1.0);
    }
}
