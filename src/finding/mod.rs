//! Findings: what the evidence says, with a stable code, a class (hardware, environment,
//! software), a severity, a confidence, the evidence itself, and what to do about it.
//!
//! Every code kiln can give is one [`FindingCode`], and the catalogue ([`FindingCode::ALL`],
//! [`FindingCode::info`]) says of each its class, the `kiln health` fault it becomes, whether
//! that fault stays open until cleared, and its meaning in one line. The rules, the node
//! check, the reports and the docs' table of findings all read it; no code's spelling
//! decides anything.

mod codes;
pub mod evidence;

pub use codes::{Clock, CodeInfo, FindingCode, HealthCode, HealthFault, HealthKind, Remedy};
pub use evidence::{
    Bytes, BytesPerIteration, BytesPerMinute, Celsius, Evidence, Figure, GBps, Hex, InUnit, Mhz,
    Micros, Millijoules, Millis, PerMinute, PerSecond, Percent, RateName, Row, Rows, Said, Seconds,
    Share, Titled, Unit, Watts, Words,
};

use serde::{Deserialize, Serialize};

/// Whose problem a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The card itself: RMA it.
    Hardware,
    /// Its surroundings: cooling, power, slot, configuration.
    Environment,
    /// Driver, application, allocator: the card is fine.
    Software,
    /// The device could not be tested at all (Vulkan cannot see it): nothing is known of
    /// its health, so the run cannot pass.
    CouldNotTest,
    /// A fact worth knowing that judges nothing.
    Info,
}

impl Class {
    /// The class as evidence and metrics spell it (`hardware`, `could_not_test`).
    pub fn name(self) -> &'static str {
        match self {
            Class::Hardware => "hardware",
            Class::Environment => "environment",
            Class::Software => "software",
            Class::CouldNotTest => "could_not_test",
            Class::Info => "info",
        }
    }

    /// The class in words for people (`could not test`).
    pub fn word(self) -> &'static str {
        match self {
            Class::CouldNotTest => "could not test",
            other => other.name(),
        }
    }
}

impl Severity {
    /// The severity as evidence, metrics and people write it (`critical`).
    pub fn word(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Major => "major",
            Severity::Minor => "minor",
            Severity::Note => "note",
        }
    }
}

impl Confidence {
    /// The confidence in words (`high`).
    pub fn word(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

impl Finding {
    /// How it is rated, for people: `hardware: critical, high confidence`.
    pub fn rating(&self) -> String {
        format!(
            "{}: {}, {} confidence",
            self.class.word(),
            self.severity.word(),
            self.confidence.word()
        )
    }
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Take the device out of service.
    Critical,
    /// Fix before trusting the device with work.
    Major,
    /// Watch it.
    Minor,
    /// For the record.
    Note,
}

/// How sure the rule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// Reproduced, or backed by the device's own counters.
    High,
    /// One line of evidence.
    Medium,
    /// Seen once, never repeated.
    Low,
}

/// One finding about one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Its code, from the catalogue.
    pub code: FindingCode,
    /// Whose problem it is.
    pub class: Class,
    /// How much it matters.
    pub severity: Severity,
    /// How sure the rule is.
    pub confidence: Confidence,
    /// One sentence.
    pub summary: String,
    /// The numbers and records it rests on, each in its unit and words.
    pub evidence: Evidence,
    /// What to do.
    pub action: String,
    /// What other parts of kiln read of it (the resolution, the reports, the node check),
    /// typed: `evidence` is for people and tools, and nothing reads it back by key.
    #[serde(skip)]
    pub facts: Facts,
}

/// The facts of a finding that other parts of kiln read, besides its code, class and
/// severity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// Found in this many of that many runs of its workload, where the workload ran more
    /// than once (a rerun to confirm).
    pub runs: Option<(usize, usize)>,
    /// The clocks an overclock's finding saw above their maximum.
    pub clocks_over: Vec<Clock>,
    /// The most serious Xid behind an Xid finding.
    pub worst_xid: Option<u32>,
    /// It says why a watched application lost its device.
    pub of_a_loss: bool,
    /// The phase it was found in, where one.
    pub phase: Option<String>,
    /// Its own figure in that phase, in a few words (`100% of the vram phase`): what a
    /// finding said once for several phases says of each other phase, so that no phase is
    /// said to be "the same" as one whose figure differs.
    pub in_phase: Option<String>,
    /// That figure as a number (the share of the phase's samples, 0..1): of several phases
    /// with the same severity, the one with the largest leads, so that a headline never
    /// says a smaller figure than the evidence under it shows.
    pub in_phase_share: Option<f64>,
    /// The workload whose own result proved it, where one did: its JUnit case holds it.
    pub workload: Option<String>,
    /// The next step's kind where the resolution set it for the situation the finding is
    /// part of (a double-bit error with its row remap pending is reset and retested, not
    /// sent back); else its code's ([`Finding::remedy`]).
    pub remedy: Option<Remedy>,
}

impl Finding {
    /// The kind of next step it asks for: the one its situation set, else, for a fault of
    /// the card's, its code's; any other class (an overclock's errors, a consequence said
    /// as a note) follows its own action.
    pub fn remedy(&self) -> Remedy {
        match (self.facts.remedy, self.class) {
            (Some(r), _) => r,
            (None, Class::Hardware) => self.code.info().remedy(),
            (None, _) => Remedy::OwnAction,
        }
    }
}

/// A finding's evidence from the record its rule fills (declared with
/// [`evidence!`](crate::evidence)): as report.json carries it and as people read it.
pub fn evidence<T: Serialize + Said + ?Sized>(of: &T) -> Evidence {
    Evidence::of(of)
}

/// A finding, from its parts, of its code's class (a rule that finds the evidence says
/// otherwise sets the class after).
pub fn finding(
    code: FindingCode,
    severity: Severity,
    confidence: Confidence,
    summary: String,
    evidence: Evidence,
    action: &str,
) -> Finding {
    Finding {
        code,
        class: code.class(),
        severity,
        confidence,
        summary,
        evidence,
        action: action.into(),
        facts: Facts::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_is_named_as_the_evidence_spells_it() {
        for class in [
            Class::Hardware,
            Class::Environment,
            Class::Software,
            Class::CouldNotTest,
            Class::Info,
        ] {
            assert_eq!(serde_json::to_value(class).unwrap(), class.name());
        }
    }
}
