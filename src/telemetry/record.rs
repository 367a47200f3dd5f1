//! The records of `telemetry.jsonl`: gauges sampled on a schedule, counters snapshotted
//! around every phase, Xid events, and what could not be read.

use serde::{Deserialize, Serialize};

pub use super::reading::{Reading, Readings};

/// Schema of `telemetry.jsonl`.
pub const TELEMETRY_SCHEMA: &str = "kiln.telemetry/2";

/// A sample's readings as recorded: a recording that carries only the throttle mask reads
/// with its reasons decoded, as a live source gives them.
fn recorded_sample<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Readings, D::Error> {
    let mut readings = Readings::deserialize(d)?;
    super::throttle::decode_recorded(&mut readings);
    Ok(readings)
}

/// A way an Xid reaches kiln. One fault often comes by several (the driver's Xid 48 line
/// in the kernel log, NVML's critical-Xid event and its double-bit ECC event): it is
/// counted once, with every way that saw it named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XidChannel {
    /// A line of the kernel log (`NVRM: Xid ...`).
    KernelLog,
    /// NVML's critical-Xid event.
    NvmlXidEvent,
    /// NVML's ECC event (a double-bit error is recorded as the Xid 48 the driver logs).
    NvmlEccEvent,
    /// NVML answering `GPU_IS_LOST` (recorded as Xid 79).
    NvmlGpuLost,
    /// An event of Windows' System log (nvlddmkm's text carries the Xid).
    EventLog,
}

/// How far apart (ms, by when kiln saw them) two records of one fault can be and still be
/// one: each way is read within a tick or two of the fault, and the journal's reader a
/// second later at most.
pub const SAME_FAULT_MS: f64 = 3_000.0;

/// An Xid (or "fallen off the bus") line from the kernel log, or an NVML event.
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
    /// Every way it was seen; empty in evidence written before kiln named them (see
    /// [`XidEvent::channels`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seen_by: Vec<XidChannel>,
}

/// Xid 79: the GPU has fallen off the bus.
pub const XID_FALLEN_OFF_THE_BUS: u32 = 79;

/// An Xid's code: the one given, or 79 for the "fallen off the bus" line older drivers
/// print without one.
pub fn xid_code(code: Option<u32>, message: &str) -> Option<u32> {
    code.or_else(|| {
        message
            .contains("fallen off the bus")
            .then_some(XID_FALLEN_OFF_THE_BUS)
    })
}

impl XidEvent {
    /// Its code: the one given, or 79 for a "fallen off the bus" line that gives none.
    pub fn code(&self) -> Option<u32> {
        xid_code(self.code, &self.message)
    }

    /// The ways it was seen: as recorded, else read from the words kiln wrote for it.
    pub fn channels(&self) -> Vec<XidChannel> {
        if !self.seen_by.is_empty() {
            return self.seen_by.clone();
        }
        let words = &self.message;
        vec![if words.contains("GPU_IS_LOST") {
            XidChannel::NvmlGpuLost
        } else if words.contains("ECC error (NVML event)") {
            XidChannel::NvmlEccEvent
        } else if words.contains("(NVML event)") {
            XidChannel::NvmlXidEvent
        } else {
            XidChannel::KernelLog
        }]
    }

    /// True when `other` is this fault seen another way: the same code, seen by none of
    /// the same ways, within [`SAME_FAULT_MS`] (a record without a time is of the same
    /// moment, as in a node check).
    fn same_fault(&self, other: &XidEvent) -> bool {
        let near = match (self.t_ms, other.t_ms) {
            (Some(a), Some(b)) => (a - b).abs() <= SAME_FAULT_MS,
            _ => true,
        };
        let mine = self.channels();
        near && self.code().is_some()
            && self.code() == other.code()
            && self.before_run == other.before_run
            && !other.channels().iter().any(|c| mine.contains(c))
    }

    /// Folds in `other`, the same fault seen another way: every way named, and what only
    /// one way says (the process, the bus, the kernel's time) kept. The kernel log's words
    /// are kept over NVML's, which carry no text.
    fn absorb(&mut self, other: XidEvent) {
        let mut seen = self.channels();
        seen.extend(other.channels());
        seen.sort();
        seen.dedup();
        if other
            .channels()
            .iter()
            .any(|c| matches!(c, XidChannel::KernelLog | XidChannel::EventLog))
        {
            self.message = other.message;
        }
        self.seen_by = seen;
        self.bus_id = self.bus_id.take().or(other.bus_id);
        self.pid = self.pid.or(other.pid);
        self.process = self.process.take().or(other.process);
        self.kernel_us = self.kernel_us.or(other.kernel_us);
        self.t_ms = match (self.t_ms, other.t_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Adds `event` to `xids`, folded into the first record of the same fault seen another way
/// where there is one: a fault is counted once, however many ways it came.
pub fn add_xid(xids: &mut Vec<XidEvent>, event: XidEvent) {
    match xids.iter_mut().find(|x| x.same_fault(&event)) {
        Some(x) => x.absorb(event),
        None => xids.push(event),
    }
}

/// Windows reset the display driver after a timeout (TDR): the System log's `Display`
/// event 4101, or a watchdog report Windows wrote for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriverReset {
    /// The driver reset (`nvlddmkm`, `amdkmdag`, `igfx`), as the log names it.
    pub driver: String,
    /// When the OS logged it, in microseconds since the Unix epoch, when known.
    pub logged_unix_us: Option<u64>,
    /// True for resets logged before the run (history, not evidence of this run).
    pub before_run: bool,
    /// What says so: the event, or a watchdog report's path.
    pub evidence: Vec<String>,
    /// When the run saw it, in milliseconds since the run started (set in a phase's
    /// summary from the record that carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t_ms: Option<f64>,
}

/// How far apart (ms) two records of one reset can be: the event and the watchdog report
/// Windows writes for it land within a minute of each other.
pub const SAME_RESET_MS: f64 = 60_000.0;

/// Adds `reset` to `resets`, folded into one within [`SAME_RESET_MS`] of it: a reset is
/// counted once, with everything that says so.
pub fn add_reset(resets: &mut Vec<DriverReset>, reset: DriverReset) {
    let near = |r: &DriverReset| match (r.t_ms, reset.t_ms) {
        (Some(a), Some(b)) => (a - b).abs() <= SAME_RESET_MS,
        _ => false,
    };
    match resets.iter_mut().find(|r| near(r)) {
        Some(r) => {
            for e in reset.evidence {
                if !r.evidence.contains(&e) {
                    r.evidence.push(e);
                }
            }
            if r.driver.is_empty() {
                r.driver = reset.driver;
            }
        }
        None => resets.push(reset),
    }
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
    /// The OS reset the display driver after a timeout.
    DriverReset {
        /// The reset.
        reset: DriverReset,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn xid(code: u32, t_ms: f64, channel: XidChannel, message: &str) -> XidEvent {
        XidEvent {
            bus_id: None,
            code: Some(code),
            pid: None,
            process: None,
            message: message.into(),
            kernel_us: None,
            before_run: false,
            t_ms: Some(t_ms),
            seen_by: vec![channel],
        }
    }

    #[test]
    fn one_fault_seen_three_ways_is_one_with_every_way_named() {
        let mut xids = Vec::new();
        add_xid(
            &mut xids,
            xid(
                48,
                1_000.0,
                XidChannel::NvmlXidEvent,
                "critical Xid (NVML event)",
            ),
        );
        add_xid(
            &mut xids,
            xid(
                48,
                1_010.0,
                XidChannel::NvmlEccEvent,
                "double-bit ECC error (NVML event)",
            ),
        );
        let mut line = xid(
            48,
            1_600.0,
            XidChannel::KernelLog,
            "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
        );
        line.pid = Some(4242);
        line.kernel_us = Some(77_000_000);
        add_xid(&mut xids, line);
        assert_eq!(xids.len(), 1, "{xids:?}");
        let x = &xids[0];
        assert_eq!(
            x.seen_by,
            [
                XidChannel::KernelLog,
                XidChannel::NvmlXidEvent,
                XidChannel::NvmlEccEvent
            ]
        );
        // The driver's words, pid and time are kept; the first sight is when it happened.
        assert!(x.message.starts_with("An uncorrectable double bit error"));
        assert_eq!(
            (x.pid, x.kernel_us, x.t_ms),
            (Some(4242), Some(77_000_000), Some(1_000.0))
        );
    }

    #[test]
    fn two_faults_stay_two_however_they_came() {
        let mut xids = Vec::new();
        // Two lines of the same way are two faults, even at once.
        add_xid(&mut xids, xid(48, 1_000.0, XidChannel::KernelLog, "a"));
        add_xid(&mut xids, xid(48, 1_001.0, XidChannel::KernelLog, "b"));
        // Each NVML event pairs with one of them.
        add_xid(&mut xids, xid(48, 1_002.0, XidChannel::NvmlXidEvent, "c"));
        add_xid(&mut xids, xid(48, 1_003.0, XidChannel::NvmlXidEvent, "d"));
        assert_eq!(xids.len(), 2, "{xids:?}");
        assert!(xids.iter().all(|x| x.seen_by.len() == 2));
        // Another code, or the same code a minute later, is another fault.
        add_xid(&mut xids, xid(94, 1_004.0, XidChannel::NvmlEccEvent, "e"));
        add_xid(&mut xids, xid(48, 61_000.0, XidChannel::NvmlEccEvent, "f"));
        assert_eq!(xids.len(), 4, "{xids:?}");
    }

    #[test]
    fn old_evidence_says_its_way_by_its_words() {
        let mut old = xid(79, 0.0, XidChannel::KernelLog, "");
        old.seen_by.clear();
        old.message = "GPU is lost: NVML answers GPU_IS_LOST (no reading before it)".into();
        assert_eq!(old.channels(), [XidChannel::NvmlGpuLost]);
        old.message = "double-bit ECC error (NVML event)".into();
        assert_eq!(old.channels(), [XidChannel::NvmlEccEvent]);
        old.message = "critical Xid (NVML event)".into();
        assert_eq!(old.channels(), [XidChannel::NvmlXidEvent]);
        old.message = "GPU has fallen off the bus.".into();
        old.code = None;
        assert_eq!(old.channels(), [XidChannel::KernelLog]);
        assert_eq!(old.code(), Some(79));
    }
}
