//! The records of `telemetry.jsonl`: gauges sampled on a schedule, counters snapshotted
//! around every phase, Xid events, and what could not be read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Schema of `telemetry.jsonl`.
pub const TELEMETRY_SCHEMA: &str = "kiln.telemetry/1";

/// One reading: a number, a word, or why there is none. A signal the device does not
/// support is recorded as such, never as zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reading {
    /// A number in the unit its name says.
    Number(f64),
    /// A word (`P0`, a list of throttle reasons).
    Text(String),
    /// No value: `not_supported`, `no_permission`, or an error in words.
    Unavailable {
        /// Why.
        unavailable: String,
    },
}

impl Reading {
    /// The reading for a signal the device does not support.
    pub fn not_supported() -> Reading {
        Reading::Unavailable {
            unavailable: "not_supported".into(),
        }
    }

    /// The number, if this is one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Reading::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The word, if this is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Reading::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// Readings by stable name (the unit is part of the name: `gpu_temp_c`, `power_w`).
pub type Readings = BTreeMap<String, Reading>;

/// A sample's readings as recorded: a recording that carries only the throttle mask reads
/// with its reasons decoded, as a live source gives them.
fn recorded_sample<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Readings, D::Error> {
    let mut readings = Readings::deserialize(d)?;
    super::throttle::decode_recorded(&mut readings);
    Ok(readings)
}

/// An Xid (or "fallen off the bus") line from the kernel log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct XidEvent {
    /// PCI bus id as the driver printed it (`0000:05:00`), when it did.
    pub bus_id: Option<String>,
    /// The Xid code; None for "fallen off the bus" lines that carry none.
    pub code: Option<u32>,
    /// Process id, when the line names one.
    pub pid: Option<u32>,
    /// Process name, when the line names one.
    pub process: Option<String>,
    /// The rest of the message.
    pub message: String,
    /// Kernel timestamp in microseconds since boot, when known.
    pub kernel_us: Option<u64>,
    /// True for lines logged before the run started (history, not evidence of this run).
    pub before_run: bool,
    /// When the run saw it, in milliseconds since the run started: set in a phase's
    /// summary from the record that carried it (the record itself has its time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ms: Option<f64>,
}

/// One line of `telemetry.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetryRecord {
    /// Milliseconds since the run started, on the same clock as `events.jsonl`.
    pub t_ms: f64,
    /// Vulkan index of the device the record concerns, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<usize>,
    /// The source (`nvml`, `sysfs`, `kmsg`, `replay`, `sidecar`).
    pub source: String,
    /// What it says.
    #[serde(flatten)]
    pub data: TelemetryData,
}

/// What a telemetry record says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TelemetryData {
    /// First line of the file.
    Header {
        /// `TELEMETRY_SCHEMA`.
        schema: String,
        /// Sampling interval.
        interval_ms: f64,
    },
    /// Gauges read at a tick.
    Sample {
        /// The readings. Read from a file, a throttle mask without its reasons is decoded.
        #[serde(deserialize_with = "recorded_sample")]
        readings: Readings,
    },
    /// Counters read at a phase boundary.
    Snapshot {
        /// The phase (`vram`, ...).
        phase: String,
        /// Which side of the phase ([`Boundary::as_str`]: `before` or `after`).
        when: String,
        /// The counters.
        counters: Readings,
    },
    /// Who the device is, as this source sees it.
    Identity {
        /// Identity fields.
        fields: Readings,
    },
    /// An Xid event.
    Xid {
        /// The event.
        xid: XidEvent,
    },
    /// A source or signal that cannot be read here, said once.
    Unavailable {
        /// One sentence, with the fix where there is one.
        message: String,
        /// The signals therefore missing.
        missing: Vec<String>,
        /// Why, as a stable word the verdict can act on (`driver_not_loaded`,
        /// `version_mismatch`, ...), where the source knows.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<String>,
    },
    /// Ticks the sidecar could not keep (sampling took longer than the interval).
    Missed {
        /// How many ticks were skipped.
        ticks: u64,
    },
}

/// Which side of a phase a counter snapshot was taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundary {
    /// As the phase starts.
    Before,
    /// As it ends.
    After,
}

impl Boundary {
    /// The word in the evidence.
    pub fn as_str(self) -> &'static str {
        match self {
            Boundary::Before => "before",
            Boundary::After => "after",
        }
    }
}
