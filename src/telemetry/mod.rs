//! Telemetry: a sidecar thread samples every source on a fixed schedule and snapshots
//! counters around every phase, into `telemetry.jsonl` beside the events.

pub mod kmsg;
pub mod nvml;
pub mod record;
pub mod replay;
pub mod sidecar;
pub mod summary;
pub mod sysfs;
pub mod throttle;

use self::record::{Readings, TelemetryData};

/// A telemetry source (NVML, sysfs, the kernel log, a recorded file).
pub trait Source: Send {
    /// Stable name, written into every record.
    fn name(&self) -> &'static str;

    /// Once at the start: identity, and what cannot be read here (said once).
    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        Vec::new()
    }

    /// Gauges (and events since the last call) for every device the source covers.
    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)>;

    /// Counters per device, read at a phase boundary.
    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        Vec::new()
    }
}
