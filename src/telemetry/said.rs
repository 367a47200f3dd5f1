//! How the telemetry's records read in a finding's evidence: a signal's reading in its
//! catalogue words and unit, a gauge's statistics in one line, an Xid, a driver reset and
//! a process each as a record of words, and a phase's throttle shares by their reasons.

use std::collections::BTreeMap;

use super::process::Process;
use super::record::{DriverReset, XidChannel, XidEvent};
use super::signals::{self, Name, Signal, Values};
use super::summary::Stat;
use super::throttle::ThrottleReason;
use crate::finding::{Micros, Millis, Rows, Said, Unit, Words};

impl Signal {
    /// Its words for people, from its line in the catalogue up to the line's first clause
    /// (`Uncorrectable ECC errors since the driver loaded`).
    pub fn words(&self) -> String {
        let about = self.about;
        let cut = about
            .find(['(', ':', ';', '.'])
            .map_or(about, |at| &about[..at]);
        let cut = cut.trim().trim_end_matches(',');
        crate::text::upper_first(cut.strip_prefix("The ").unwrap_or(cut))
    }

    /// The unit its figures are said in.
    pub fn said_in(&self) -> Unit {
        shown(self.unit)
    }
}

/// The unit a figure of a signal's unit is said in.
fn shown(unit: signals::Unit) -> Unit {
    match unit {
        signals::Unit::Celsius => Unit::Celsius,
        signals::Unit::Watts => Unit::Watts,
        signals::Unit::Millijoules => Unit::Millijoules,
        signals::Unit::Megahertz => Unit::Megahertz,
        signals::Unit::Percent => Unit::Percent,
        signals::Unit::Bytes => Unit::Bytes,
        _ => Unit::None,
    }
}

impl Name<'_> {
    /// A family member's words for people: `Fan 0`, `RAS gfx uncorrectable errors`.
    pub fn words(&self) -> String {
        match self {
            Name::Fixed(s) => s.words(),
            Name::Fan(i) => format!("Fan {i}"),
            Name::EccAt { total, location } => format!("{} in {location}", total.words()),
            Name::Ras { block, uncorrected } => format!(
                "RAS {block} {}",
                if *uncorrected {
                    "uncorrectable errors"
                } else {
                    "corrected errors"
                }
            ),
            Name::Hwmon(rest) => format!("Sensor {}", rest.replace('_', " ")),
            Name::Nvlink { link, part } => format!("NVLink {link} {}", part.name()),
        }
    }

    /// The unit a member's figures are said in: its signal's, a fan's percent, a hwmon
    /// sensor's by the unit its name ends with.
    pub fn said_in(&self) -> Unit {
        match self {
            Name::Fixed(s) => s.said_in(),
            Name::EccAt { total, .. } => total.said_in(),
            Name::Fan(_) => Unit::Percent,
            Name::Hwmon(rest) => {
                let suffix = rest.rsplit('_').next().unwrap_or("");
                [
                    signals::Unit::Celsius,
                    signals::Unit::Watts,
                    signals::Unit::Millijoules,
                    signals::Unit::Megahertz,
                    signals::Unit::Percent,
                    signals::Unit::Bytes,
                ]
                .into_iter()
                .find(|u| u.suffix() == Some(suffix))
                .map_or(Unit::None, shown)
            }
            Name::Ras { .. } | Name::Nvlink { .. } => Unit::None,
        }
    }
}

impl<T: Said> Said for Values<T> {
    /// Each reading under its signal's words, in its signal's unit.
    fn say(&self, words: &str, _: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            for (signal, value) in &self.0 {
                value.say(&signal.words(), signal.said_in(), rows);
            }
        });
    }
}

/// Readings by the names they have in records (a phase's counters, every one that grew):
/// each said by what its name names in the catalogue, in its unit.
pub struct ByName<'a, T>(pub &'a BTreeMap<String, T>);

impl<T: serde::Serialize> serde::Serialize for ByName<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<T: Said> Said for ByName<'_, T> {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            for (name, value) in self.0 {
                match Name::parse(name) {
                    Some(n) => value.say(&n.words(), n.said_in(), rows),
                    None => value.say(
                        &crate::text::upper_first(&name.replace('_', " ")),
                        unit,
                        rows,
                    ),
                }
            }
        });
    }
}

/// A phase's share of samples under each throttle reason, by the reason's name.
pub struct Throttled<'a>(pub &'a BTreeMap<String, f64>);

impl serde::Serialize for Throttled<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Said for Throttled<'_> {
    fn say(&self, words: &str, _: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            for (name, share) in self.0 {
                let reason = crate::text::upper_first(super::throttle::label_of(name));
                share.say(&reason, Unit::Share, rows);
            }
        });
    }
}

impl Said for Stat {
    /// A statistic in one line: `median 83 °C (80 °C to 86 °C, 35 samples)`.
    fn line(&self, unit: Unit) -> Option<String> {
        let samples = crate::text::count(self.samples as u64, "sample");
        if self.min == self.max {
            return Some(format!("{} ({samples})", self.median.line(unit)?));
        }
        Some(format!(
            "median {} ({} to {}, {samples})",
            self.median.line(unit)?,
            self.min.line(unit)?,
            self.max.line(unit)?
        ))
    }
    fn is_fact(&self) -> bool {
        true
    }
}

impl Said for XidChannel {
    /// How the Xid reached kiln, in words (`the kernel log`, `NVML's Xid event`).
    fn line(&self, _: Unit) -> Option<String> {
        Some(
            match self {
                XidChannel::KernelLog => "the kernel log",
                XidChannel::NvmlXidEvent => "NVML's Xid event",
                XidChannel::NvmlEccEvent => "NVML's ECC event",
                XidChannel::NvmlGpuLost => "NVML answering that the GPU is lost",
                XidChannel::EventLog => "the Windows System event log",
            }
            .to_owned(),
        )
    }
    fn is_fact(&self) -> bool {
        true
    }
}

impl Said for XidEvent {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            Words::Said("PCI bus id").say(&self.bus_id, unit, rows);
            Words::Said("Code").say(&self.code, unit, rows);
            Words::Said("PID").say(&self.pid, unit, rows);
            Words::Said("Process").say(&self.process, unit, rows);
            Words::Said("Message").say(&self.message, unit, rows);
            Words::Said("Kernel time").say(&self.kernel_us.map(Micros), unit, rows);
            Words::Said("Before the run").say(&self.before_run, unit, rows);
            Words::Said("Time into the run").say(&self.t_ms.map(Millis), unit, rows);
            Words::Said("Seen by").say(&self.seen_by, unit, rows);
        });
    }
}

impl Said for DriverReset {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            Words::Said("Driver").say(&self.driver, unit, rows);
            Words::Said("Logged at (Unix time)").say(&self.logged_unix_us.map(Micros), unit, rows);
            Words::Said("Before the run").say(&self.before_run, unit, rows);
            Words::Said("Evidence").say(&self.evidence, unit, rows);
            Words::Said("Time into the run").say(&self.t_ms.map(Millis), unit, rows);
        });
    }
}

impl Said for Process {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            Words::Said("PID").say(&self.pid, unit, rows);
            Words::Said("Memory used").say(&self.used_bytes.map(crate::finding::Bytes), unit, rows);
            Words::Said("Name").say(&self.name, unit, rows);
        });
    }
}

impl signals::NvlinkPart {
    /// What it counts, for people (`Flit CRC errors`).
    pub const fn words(self) -> &'static str {
        match self {
            signals::NvlinkPart::State => "State",
            signals::NvlinkPart::Replay => "Replays",
            signals::NvlinkPart::Recovery => "Recoveries",
            signals::NvlinkPart::CrcFlit => "Flit CRC errors",
            signals::NvlinkPart::CrcData => "Data CRC errors",
        }
    }
}

impl Said for ThrottleReason {
    fn line(&self, _: Unit) -> Option<String> {
        Some(self.label().to_owned())
    }
    fn is_fact(&self) -> bool {
        true
    }
}
