//! Which finding explains which, decided in one place. The rules ([`super::rules`]) each
//! read the evidence alone and say what they see; this table then says, of the findings of
//! one device, which is the cause of which: a cause the evidence shows (the power supply,
//! heat, an overclock, the environment) explains the symptom it produced, and a hardware
//! fault explains its consequences. The rows apply in the table's order, each to the whole
//! set of findings, so that the result never depends on the order the rules ran in.
//!
//! A slow rate's own explanation (heat, power, a setting, another process in the phase it
//! was measured in) is read by the rate rule from the same evidence those causes' rules
//! read, and named in its code (`COMPUTE_RATE_LOW_THROTTLED`): it needs the phase the rate
//! was measured in, which a finding does not carry.

use crate::finding::{Class, Clock, Confidence, Finding, FindingCode, Severity};

/// Which findings are a row's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A finding of this code.
    Code(FindingCode),
    /// Clocks above their rated maximum, this clock among them (`CLOCKS_ABOVE_MAXIMUM`).
    Overclock(Clock),
    /// A hardware finding that decides a device (major or worse, at least medium
    /// confidence).
    DecisiveHardware,
    /// Any finding of the environment's (heat, power, the slot, a setting, a tenant).
    Environment,
}

/// Which findings are a row's symptom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symptom {
    /// A finding of this code.
    Code(FindingCode),
    /// A hardware finding of wrong results that an overclock of this clock explains
    /// ([`crate::finding::CodeInfo::overclocked`]).
    ErrorsAt(Clock),
}

/// What a cause does to its symptom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The cause's finding says what the symptom's would, and why: the symptom goes.
    Absorbs,
    /// The symptom stands as the cause's doing: it takes `class` (and `severity`, where
    /// given), its summary adds `said` (`{cause}` is the cause's codes) and its action is
    /// `action` (`{cause}` likewise).
    Explains {
        /// The class it takes.
        class: Class,
        /// The severity it takes, where the cause leaves it nothing to weigh.
        severity: Option<Severity>,
        /// Added to its summary.
        said: &'static str,
        /// Its action.
        action: &'static str,
    },
}

/// One row: a cause, what it does, its symptom, and why, for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The cause.
    pub cause: Cause,
    /// What it does.
    pub relation: Relation,
    /// The symptom.
    pub symptom: Symptom,
    /// Why, in one line.
    pub why: &'static str,
}

/// The table, applied row by row in this order.
pub const TABLE: &[Row] = &[
    Row {
        cause: Cause::Code(FindingCode::PsuCombinedLoad),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::DeviceLostTimeout),
        why: "a card lost only under the CPU's and the GPU's load together, after the GPU's heaviest load alone ran clean: the power supply, not a timeout",
    },
    Row {
        cause: Cause::Code(FindingCode::PsuCombinedLoad),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::DeviceLostHardware),
        why: "the same loss with its Xids: the power supply's",
    },
    Row {
        cause: Cause::Code(FindingCode::PsuCombinedLoad),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::XidFallenOffBus),
        why: "a card off the bus only under the combined load: the power supply's",
    },
    Row {
        cause: Cause::Code(FindingCode::PsuCombinedLoad),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::DriverTimeoutReset),
        why: "the OS's reset of a card that stopped answering under the combined load: the power supply's",
    },
    Row {
        cause: Cause::Code(FindingCode::EccCorrectedRateHigh),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::XidEccRate),
        why: "Xid 92 is the driver's word for the corrected-error rate the memory finding measured and names",
    },
    Row {
        cause: Cause::Code(FindingCode::ThermalThrottle),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::MemoryHot),
        why: "the thermal finding names the memory's temperature already",
    },
    Row {
        cause: Cause::Overclock(Clock::Shader),
        relation: Relation::Explains {
            class: Class::Environment,
            severity: None,
            said: " while clocked above its maximum",
            action: super::rules::RESTORE_STOCK_CLOCKS,
        },
        symptom: Symptom::ErrorsAt(Clock::Shader),
        why: "wrong results made with the shader clock over its maximum are the settings', not the card's",
    },
    Row {
        cause: Cause::Overclock(Clock::Memory),
        relation: Relation::Explains {
            class: Class::Environment,
            severity: None,
            said: " while clocked above its maximum",
            action: super::rules::RESTORE_STOCK_CLOCKS,
        },
        symptom: Symptom::ErrorsAt(Clock::Memory),
        why: "VRAM errors made with the memory clock over its maximum are the settings', not the card's",
    },
    Row {
        cause: Cause::DecisiveHardware,
        relation: Relation::Explains {
            class: Class::Info,
            severity: Some(Severity::Note),
            said: ", beside a hardware fault ({cause}): its consequence, not the application's",
            action: "follow the hardware finding ({cause})",
        },
        symptom: Symptom::Code(FindingCode::XidApplication),
        why: "an application's Xid beside a hardware fault of weight is the fault's consequence, whoever's process raised it",
    },
    Row {
        cause: Cause::Environment,
        relation: Relation::Explains {
            class: Class::Environment,
            severity: None,
            said: ", explained by its environment ({cause})",
            action: "fix what its environment findings name ({cause}), then compare again",
        },
        symptom: Symptom::Code(FindingCode::PeerSlower),
        why: "a device slower than its peers where its own heat, power, slot or settings hold it back is not shown slow by itself",
    },
];

impl Cause {
    /// Whether `f` is this cause.
    fn is(self, f: &Finding) -> bool {
        match self {
            Cause::Code(code) => f.code == code,
            Cause::Overclock(clock) => {
                f.code == FindingCode::ClocksAboveMaximum && f.facts.clocks_over.contains(&clock)
            }
            Cause::DecisiveHardware => {
                f.class == Class::Hardware
                    && f.severity <= Severity::Major
                    && f.confidence <= Confidence::Medium
            }
            Cause::Environment => f.class == Class::Environment,
        }
    }
}

impl Symptom {
    /// Whether `f` is this symptom.
    fn is(self, f: &Finding) -> bool {
        match self {
            Symptom::Code(code) => f.code == code,
            Symptom::ErrorsAt(clock) => {
                f.class == Class::Hardware && f.code.info().overclocked == Some(clock)
            }
        }
    }
}

/// The findings of one device with the table applied: what a cause absorbs is gone, what it
/// explains says so. A finding is never its own cause.
pub fn resolve(mut findings: Vec<Finding>) -> Vec<Finding> {
    for row in TABLE {
        let causes: Vec<FindingCode> = findings
            .iter()
            .filter(|f| row.cause.is(f) && !row.symptom.is(f))
            .map(|f| f.code)
            .fold(Vec::new(), |mut all, c| {
                if !all.contains(&c) {
                    all.push(c);
                }
                all
            });
        if causes.is_empty() {
            continue;
        }
        let named = causes
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", ");
        match row.relation {
            Relation::Absorbs => findings.retain(|f| !row.symptom.is(f)),
            Relation::Explains {
                class,
                severity,
                said,
                action,
            } => {
                for f in findings.iter_mut().filter(|f| row.symptom.is(f)) {
                    f.class = class;
                    if let Some(s) = severity {
                        f.severity = s;
                    }
                    f.summary.push_str(&said.replace("{cause}", &named));
                    f.action = action.replace("{cause}", &named);
                }
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::finding;

    fn found(code: FindingCode, severity: Severity, evidence: serde_json::Value) -> Finding {
        finding(
            code,
            severity,
            Confidence::High,
            code.name().to_owned(),
            evidence,
            "its own action",
        )
    }

    /// A finding of `code` with nothing in its evidence.
    fn bare(code: FindingCode, severity: Severity) -> Finding {
        found(code, severity, serde_json::json!({}))
    }

    fn codes(f: &[Finding]) -> Vec<(&str, Class)> {
        f.iter().map(|f| (f.code.name(), f.class)).collect()
    }

    #[test]
    fn every_row_applies_and_its_near_miss_does_not() {
        // The power supply absorbs the loss it explains; without it the loss stands.
        let lost = bare(FindingCode::DeviceLostTimeout, Severity::Major);
        let psu = bare(FindingCode::PsuCombinedLoad, Severity::Critical);
        assert_eq!(
            codes(&resolve(vec![lost.clone(), psu.clone()])),
            [("PSU_COMBINED_LOAD", Class::Environment)]
        );
        assert_eq!(
            codes(&resolve(vec![lost.clone()])),
            [("DEVICE_LOST_TIMEOUT", Class::Software)]
        );

        // An overclock of the memory clock explains VRAM errors, not compute errors.
        let vram = bare(FindingCode::VramStuckBit, Severity::Critical);
        let compute = bare(FindingCode::ComputeMismatch, Severity::Critical);
        let mut memory_over = found(
            FindingCode::ClocksAboveMaximum,
            Severity::Major,
            serde_json::json!({"sm": null, "memory": ["vram", 12000.0, 10501.0]}),
        );
        memory_over.facts.clocks_over = vec![Clock::Memory];
        let resolved = resolve(vec![vram.clone(), compute.clone(), memory_over]);
        assert_eq!(
            codes(&resolved),
            [
                ("VRAM_STUCK_BIT", Class::Environment),
                ("COMPUTE_MISMATCH", Class::Hardware),
                ("CLOCKS_ABOVE_MAXIMUM", Class::Environment)
            ]
        );
        assert!(
            resolved[0]
                .summary
                .ends_with("while clocked above its maximum")
        );
        assert_eq!(
            resolved[0].action,
            super::super::rules::RESTORE_STOCK_CLOCKS
        );

        // A hardware fault of weight makes an application's Xid its consequence; a minor
        // one does not.
        let app_xid = bare(FindingCode::XidApplication, Severity::Major);
        let resolved = resolve(vec![app_xid.clone(), compute.clone()]);
        assert_eq!(resolved[0].class, Class::Info);
        assert_eq!(resolved[0].severity, Severity::Note);
        assert!(resolved[0].summary.contains("(COMPUTE_MISMATCH)"));
        let minor = bare(FindingCode::VramTransientError, Severity::Minor);
        let resolved = resolve(vec![app_xid.clone(), minor]);
        assert_eq!(resolved[0].class, Class::Software);

        // The environment explains a device slower than its peers; a note does not.
        let peer = bare(FindingCode::PeerSlower, Severity::Major);
        let heat = bare(FindingCode::ThermalThrottle, Severity::Major);
        let resolved = resolve(vec![peer.clone(), heat]);
        assert_eq!(resolved[0].class, Class::Environment);
        assert!(resolved[0].summary.contains("(THERMAL_THROTTLE)"));
        let slot = bare(FindingCode::PcieSlotLimits, Severity::Note);
        assert_eq!(resolve(vec![peer, slot])[0].class, Class::Hardware);
    }

    #[test]
    fn resolution_does_not_depend_on_the_order_of_the_findings_within_a_class() {
        let lost = bare(FindingCode::DeviceLostTimeout, Severity::Major);
        let psu = bare(FindingCode::PsuCombinedLoad, Severity::Critical);
        let hot = bare(FindingCode::MemoryHot, Severity::Note);
        let heat = bare(FindingCode::ThermalThrottle, Severity::Major);
        let a = resolve(vec![lost.clone(), psu.clone(), hot.clone(), heat.clone()]);
        let b = resolve(vec![heat, hot, psu, lost]);
        let mut a = codes(&a);
        let mut b = codes(&b);
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }
}
