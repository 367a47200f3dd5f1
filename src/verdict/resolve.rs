//! Which finding explains which, decided in one place, for the card and a watched
//! application alike. The rules ([`super::rules`], [`super::watch`]) each read the evidence
//! alone and say what they see; this table then says, of the findings of one device, which
//! is the cause of which: a cause the evidence shows (the power supply, heat, an overclock,
//! the environment) explains the symptom it produced, a hardware fault explains its
//! consequences, and in a watch the card's own fault is the application's cause, which
//! explains its failure. The rows apply in the table's order, each to the whole set of
//! findings, so that the result never depends on the order the rules ran in.
//!
//! A slow rate's own explanation (heat, power, a setting, another process in the phase it
//! was measured in) is read by the rate rule from the same evidence those causes' rules
//! read, and named in its code (`COMPUTE_RATE_LOW_THROTTLED`): it needs the phase the rate
//! was measured in, which a finding does not carry.

use crate::finding::{Class, Clock, Confidence, Finding, FindingCode, Remedy, Severity};

/// Which findings are a row's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A finding of this code.
    Code(FindingCode),
    /// A finding of this code of weight (major or worse, of a judged class): one its rule
    /// found cost the run, where the same code is a note when it cost nothing.
    Weighs(FindingCode),
    /// Clocks above their rated maximum, this clock among them (`CLOCKS_ABOVE_MAXIMUM`).
    Overclock(Clock),
    /// A hardware finding that decides a device (major or worse, at least medium
    /// confidence).
    DecisiveHardware,
    /// Any finding of the environment's (heat, power, the slot, a setting, a tenant).
    Environment,
    /// A finding that says what a watched application's trouble was (its cause, or that
    /// its memory was not seen), but not that it could not be judged.
    Application,
    /// A "could not test" finding of weight (evidence missing, an interrupted run, a
    /// watch that saw none of the application's memory).
    CouldNotTest,
    /// A watched application's finding of why it lost its device.
    TheLoss,
    /// A hardware finding that decides a device (as [`Cause::DecisiveHardware`]) whose
    /// next step is of this kind.
    DecisiveWithRemedy(Remedy),
}

/// Which findings are a row's symptom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symptom {
    /// A finding of this code.
    Code(FindingCode),
    /// A hardware finding of wrong results that an overclock of this clock explains
    /// ([`crate::finding::CodeInfo::overclocked`]).
    ErrorsAt(Clock),
    /// A watched application's finding of why it lost its device.
    OfTheLoss,
    /// A finding of any of these codes.
    AnyOf(&'static [FindingCode]),
    /// A hardware finding whose next step is of this kind.
    HardwareWithRemedy(Remedy),
    /// A watched application's trouble, whatever it was: what a cause of the card's is
    /// said for, as the application's cause.
    TheApplication,
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
        /// The kind of next step it takes, where the cause changes it (a double-bit error
        /// whose row remap is pending is reset and retested, not sent back).
        remedy: Option<Remedy>,
    },
    /// In a watch, the causes are the application's cause: said as one finding of `code`
    /// (critical), with every cause's summary and how the application failed, and the
    /// leading cause's confidence, action and kind of next step: one situation, one step.
    IsTheCause {
        /// The finding's code.
        code: FindingCode,
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
        cause: Cause::Code(FindingCode::NvlinkFabricDown),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::NvlinkDown),
        why: "the same NVLinks down on every GPU are the fabric's, said once; each GPU's own finding would call them its own",
    },
    Row {
        cause: Cause::Code(FindingCode::EccCorrectedRateHigh),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::XidEccRate),
        why: "Xid 92 is the driver's word for the corrected-error rate the memory finding measured and names",
    },
    Row {
        cause: Cause::Code(FindingCode::RetiredPagesLimit),
        relation: Relation::Absorbs,
        symptom: Symptom::AnyOf(&[FindingCode::RetiredPages, FindingCode::RetiredPagesHistory]),
        why: "the card's pages past DCGM's limit: that finding says the count over its life, the pages this run retired and a retirement pending, so neither is said again",
    },
    Row {
        cause: Cause::Code(FindingCode::RetiredPages),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::RetiredPagesHistory),
        why: "a card that retired pages during the run, or waits to retire one, fails for them already: its count under the limit is not said beside them a second time",
    },
    Row {
        cause: Cause::Code(FindingCode::RowRemapFailure),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::RowRemapHistory),
        why: "a failed remap fails the card, its evidence holding the rows remapped: the count is not said beside it a second time",
    },
    Row {
        cause: Cause::Code(FindingCode::RowRemapPending),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::RowRemapHistory),
        why: "a pending remap's evidence holds the rows remapped: the count is not said beside it a second time",
    },
    Row {
        cause: Cause::Code(FindingCode::RowRemapBanksLow),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::RowRemapHistory),
        why: "banks running out of spare rows say the card's remaps with the warning they are: the count is not said beside them a second time",
    },
    Row {
        cause: Cause::Code(FindingCode::EccUncorrectable),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::SramHistory),
        why: "uncorrectable errors during the run fail the card and count the SRAM's among them: its count over the card's life is not said beside them",
    },
    Row {
        cause: Cause::Code(FindingCode::ThermalThrottle),
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::MemoryHot),
        why: "the thermal finding names the memory's temperature already",
    },
    Row {
        cause: Cause::Code(FindingCode::FanFailed),
        relation: Relation::Explains {
            class: Class::Hardware,
            severity: None,
            said: ", its fan failing ({cause})",
            action: "follow the fan finding ({cause}): the card's cooler, not the room's cooling",
            remedy: Some(Remedy::Rma),
        },
        symptom: Symptom::Code(FindingCode::ThermalThrottle),
        why: "a card that slows for heat with its fan stopped or far below its share is slowed by its own cooler, not by the room",
    },
    Row {
        cause: Cause::Overclock(Clock::Shader),
        relation: Relation::Explains {
            class: Class::Environment,
            severity: None,
            said: " while clocked above its maximum",
            action: super::rules::RESTORE_STOCK_CLOCKS,
            remedy: None,
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
            remedy: None,
        },
        symptom: Symptom::ErrorsAt(Clock::Memory),
        why: "VRAM errors made with the memory clock over its maximum are the settings', not the card's",
    },
    Row {
        cause: Cause::Code(FindingCode::RowRemapPending),
        relation: Relation::Explains {
            class: Class::Hardware,
            severity: None,
            said: ", with the row remap that handles it pending ({cause})",
            action: super::rules::RESET_AND_RETEST,
            remedy: Some(Remedy::ResetAndRetest),
        },
        symptom: Symptom::AnyOf(&[
            FindingCode::EccUncorrectable,
            FindingCode::XidMemoryHardware,
            FindingCode::XidRowRemap,
            FindingCode::RetiredPages,
        ]),
        why: "uncorrectable errors whose row remap is pending were handled by the card: NVIDIA's guidance is a reset, which applies the remap, and a retest, and an RMA only if the remap fails or the errors come back",
    },
    Row {
        cause: Cause::Code(FindingCode::RowRemapFailure),
        relation: Relation::Explains {
            class: Class::Hardware,
            severity: None,
            said: ", which no spare row was left to handle ({cause})",
            action: super::rules::REMAP_FAILED,
            remedy: Some(Remedy::Rma),
        },
        symptom: Symptom::AnyOf(&[
            FindingCode::EccUncorrectable,
            FindingCode::XidMemoryHardware,
            FindingCode::XidRowRemap,
            FindingCode::RowRemapPending,
            FindingCode::RetiredPages,
        ]),
        why: "a row remap that failed is NVIDIA's RMA criterion: the errors it could not handle, and a remap said pending beside it, are the card's to send back",
    },
    Row {
        cause: Cause::Code(FindingCode::EccUncorrectable),
        relation: Relation::Explains {
            class: Class::Hardware,
            severity: None,
            said: ": the driver's word for the uncorrectable errors counted ({cause})",
            action: "follow {cause}",
            remedy: None,
        },
        symptom: Symptom::Code(FindingCode::XidMemoryHardware),
        why: "the memory hardware Xids (double-bit, contained and uncontained errors) are the driver's words for the uncorrectable errors the memory's counters count: one fault, weighed and acted on once",
    },
    Row {
        cause: Cause::DecisiveWithRemedy(Remedy::Rma),
        relation: Relation::Explains {
            class: Class::Hardware,
            severity: None,
            said: ", beside the card's own fault ({cause})",
            action: "follow {cause}: the card goes back whatever its slot and power do",
            remedy: Some(Remedy::Rma),
        },
        symptom: Symptom::HardwareWithRemedy(Remedy::CheckPlatform),
        why: "a card whose own fault its vendor's criteria or its wrong results prove goes back: a fall off the bus or a link down beside it asks no check of the slot first",
    },
    Row {
        cause: Cause::DecisiveHardware,
        relation: Relation::Explains {
            class: Class::Info,
            severity: Some(Severity::Note),
            said: ": the same loss, weighed once by the fault that came with it ({cause})",
            action: "follow {cause}",
            remedy: None,
        },
        symptom: Symptom::Code(FindingCode::DeviceLostHardware),
        why: "a device lost with hardware Xids is the loss those Xids' findings weigh, with the vendor's next step for them: said once, not as a second fault with a step of its own",
    },
    Row {
        cause: Cause::DecisiveHardware,
        relation: Relation::Explains {
            class: Class::Info,
            severity: Some(Severity::Note),
            said: ": the driver's recovery action after the hardware fault ({cause})",
            action: "follow {cause}",
            remedy: None,
        },
        symptom: Symptom::Code(FindingCode::XidRecoveryAction),
        why: "Xid 154 states the action the Xid before it needs; beside that Xid's hardware finding it is the same situation, which that finding weighs with one next step",
    },
    Row {
        cause: Cause::DecisiveHardware,
        relation: Relation::IsTheCause {
            code: FindingCode::AppCardFault,
        },
        symptom: Symptom::TheApplication,
        why: "in a watch, the card's own hardware fault of weight is the application's cause, whatever else its memory did",
    },
    Row {
        cause: Cause::DecisiveHardware,
        relation: Relation::Explains {
            class: Class::Info,
            severity: Some(Severity::Note),
            said: ", beside a hardware fault ({cause}): its consequence, not the application's",
            action: "follow the hardware finding ({cause})",
            remedy: None,
        },
        symptom: Symptom::Code(FindingCode::XidApplication),
        why: "an application's Xid beside a hardware fault of weight is the fault's consequence, whoever's process raised it",
    },
    Row {
        cause: Cause::Weighs(FindingCode::XidOtherProcess),
        relation: Relation::Explains {
            class: Class::Environment,
            severity: None,
            said: ", after another process's fault on the GPU with none of kiln's own ({cause})",
            action: "rerun with the GPU to the test alone (drain the node, or --wait-idle): another process's fault ({cause}) cost this run; the card only if the loss comes back with the GPU to itself",
            remedy: None,
        },
        symptom: Symptom::AnyOf(&[
            FindingCode::DeviceLostApplication,
            FindingCode::DeviceLostTimeout,
            FindingCode::DeviceHang,
            FindingCode::WorkerCrashed,
        ]),
        why: "kiln's own device lost after another process's fault, with no fault of kiln's own and no hardware Xid, is that process's doing: the environment, rerun with the GPU to the test alone",
    },
    Row {
        cause: Cause::Environment,
        relation: Relation::Explains {
            class: Class::Environment,
            severity: None,
            said: ", explained by its environment ({cause})",
            action: "fix what its environment findings name ({cause}), then compare again",
            remedy: None,
        },
        symptom: Symptom::Code(FindingCode::PeerSlower),
        why: "a device slower than its peers where its own heat, power, slot or settings hold it back is not shown slow by itself",
    },
    Row {
        cause: Cause::Code(FindingCode::AppCardFault),
        relation: Relation::Absorbs,
        symptom: Symptom::OfTheLoss,
        why: "a device lost beside the card's own fault is the card's doing, not a timeout's or a neighbour's",
    },
    Row {
        cause: Cause::Code(FindingCode::AppMemoryUnseen),
        relation: Relation::Absorbs,
        symptom: Symptom::OfTheLoss,
        why: "a loss is called a timeout or a neighbour's doing by what the memory did, which was not seen",
    },
    Row {
        cause: Cause::TheLoss,
        relation: Relation::Explains {
            class: Class::Info,
            severity: Some(Severity::Note),
            said: ": the same loss of the application's device, weighed once ({cause})",
            action: "follow {cause}",
            remedy: None,
        },
        symptom: Symptom::AnyOf(&[
            FindingCode::XidApplication,
            FindingCode::XidTimeout,
            FindingCode::DriverTimeoutReset,
        ]),
        why: "the Xid or the OS's reset that came with a watched application's lost device is that loss, which its own finding weighs and says once, with one thing to do",
    },
    Row {
        cause: Cause::Application,
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::AppExit),
        why: "an application that ended in an error is its own failure only where nothing on the GPU explains it",
    },
    Row {
        cause: Cause::Application,
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::AppNotJudged),
        why: "what went unseen of the application's memory hides no cause once one is found",
    },
    Row {
        cause: Cause::CouldNotTest,
        relation: Relation::Absorbs,
        symptom: Symptom::Code(FindingCode::AppNotJudged),
        why: "a watch that could not be judged whole (interrupted, evidence lost, no memory seen) says so already",
    },
];

/// What resolution knows beyond the findings: in a watch, how the application failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    /// A watch (`kiln watch`), not a test.
    pub watch: Option<Watched>,
}

/// What a watch adds to resolution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Watched {
    /// How the application first failed, in words (`12.3 s into the watch (...)`), where
    /// it did.
    pub failed: Option<String>,
}

impl Cause {
    /// Whether `f` is this cause.
    fn is(self, f: &Finding) -> bool {
        match self {
            Cause::Code(code) => f.code == code,
            Cause::Weighs(code) => {
                f.code == code && f.severity <= Severity::Major && super::settle::judged(f)
            }
            Cause::Overclock(clock) => {
                f.code == FindingCode::ClocksAboveMaximum && f.facts.clocks_over.contains(&clock)
            }
            Cause::DecisiveHardware => {
                f.class == Class::Hardware
                    && f.severity <= Severity::Major
                    && f.confidence <= Confidence::Medium
            }
            Cause::Environment => f.class == Class::Environment,
            Cause::Application => f.code.info().application && f.code != FindingCode::AppNotJudged,
            Cause::CouldNotTest => f.class == Class::CouldNotTest && f.severity <= Severity::Major,
            Cause::TheLoss => f.facts.of_a_loss,
            Cause::DecisiveWithRemedy(remedy) => {
                Cause::DecisiveHardware.is(f) && f.remedy() == remedy
            }
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
            Symptom::OfTheLoss => f.facts.of_a_loss,
            Symptom::AnyOf(codes) => codes.contains(&f.code),
            Symptom::HardwareWithRemedy(remedy) => {
                f.class == Class::Hardware && f.remedy() == remedy
            }
            Symptom::TheApplication => f.code.info().application,
        }
    }
}

/// The findings of one device with the table applied: what a cause absorbs is gone, what it
/// explains says so. A finding is never its own cause.
pub fn resolve(mut findings: Vec<Finding>, context: &Context) -> Vec<Finding> {
    for row in TABLE {
        let causes: Vec<&Finding> = findings
            .iter()
            .filter(|f| row.cause.is(f) && !row.symptom.is(f))
            .collect();
        if causes.is_empty() {
            continue;
        }
        let codes: Vec<FindingCode> =
            causes
                .iter()
                .map(|f| f.code)
                .fold(Vec::new(), |mut all, c| {
                    if !all.contains(&c) {
                        all.push(c);
                    }
                    all
                });
        let named = codes
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
                remedy,
            } => {
                for f in findings.iter_mut().filter(|f| row.symptom.is(f)) {
                    f.class = class;
                    if let Some(s) = severity {
                        f.severity = s;
                    }
                    if remedy.is_some() {
                        f.facts.remedy = remedy;
                    }
                    f.summary.push_str(&said.replace("{cause}", &named));
                    f.action = action.replace("{cause}", &named);
                }
            }
            Relation::IsTheCause { code } => {
                let Some(watched) = &context.watch else {
                    continue;
                };
                let said = the_cause(code, &causes, watched);
                // Listed first among the application's findings.
                let at = findings
                    .iter()
                    .position(|f| row.symptom.is(f))
                    .unwrap_or(findings.len());
                findings.insert(at, said);
            }
        }
    }
    findings
}

/// The finding that says `causes` are a watched application's cause: as sure as its
/// leading cause (the most serious, then the surest), whose next step it gives, so that
/// one situation reads one way.
fn the_cause(code: FindingCode, causes: &[&Finding], watched: &Watched) -> Finding {
    let lead = causes
        .iter()
        .min_by_key(|f| (f.severity, f.confidence))
        .copied();
    let codes: Vec<&str> = causes.iter().map(|f| f.code.name()).collect();
    let mut summary = format!(
        "the card: {}",
        causes
            .iter()
            .map(|f| f.summary.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    );
    if let Some(failed) = &watched.failed {
        summary.push_str(&format!("; the application failed {failed}"));
    }
    let mut said = crate::finding::finding(
        code,
        Severity::Critical,
        lead.map_or(Confidence::Medium, |f| f.confidence),
        summary,
        crate::finding::evidence(&CardFindings { findings: codes }),
        &lead.map_or_else(String::new, |f| f.action.clone()),
    );
    said.facts.remedy = lead.map(|f| f.remedy());
    said
}

crate::evidence! {
    /// The evidence of a cause said for the application: the causes' findings, by code.
    struct CardFindings<'a> {
        findings: Vec<&'a str> => "Findings",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::finding;

    fn found(code: FindingCode, severity: Severity) -> Finding {
        finding(
            code,
            severity,
            Confidence::High,
            code.name().to_owned(),
            crate::finding::Evidence::default(),
            "its own action",
        )
    }

    /// A finding of `code` with nothing in its evidence.
    fn bare(code: FindingCode, severity: Severity) -> Finding {
        found(code, severity)
    }

    /// The findings of a device that was tested, not watched, resolved.
    fn resolve_alone(findings: Vec<Finding>) -> Vec<Finding> {
        resolve(findings, &Context::default())
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
            codes(&resolve_alone(vec![lost.clone(), psu.clone()])),
            [("PSU_COMBINED_LOAD", Class::Environment)]
        );
        assert_eq!(
            codes(&resolve_alone(vec![lost.clone()])),
            [("DEVICE_LOST_TIMEOUT", Class::Software)]
        );

        // An overclock of the memory clock explains VRAM errors, not compute errors.
        let vram = bare(FindingCode::VramStuckBit, Severity::Critical);
        let compute = bare(FindingCode::ComputeMismatch, Severity::Critical);
        let mut memory_over = found(FindingCode::ClocksAboveMaximum, Severity::Major);
        memory_over.facts.clocks_over = vec![Clock::Memory];
        let resolved = resolve_alone(vec![vram.clone(), compute.clone(), memory_over]);
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
        let resolved = resolve_alone(vec![app_xid.clone(), compute.clone()]);
        assert_eq!(resolved[0].class, Class::Info);
        assert_eq!(resolved[0].severity, Severity::Note);
        assert!(resolved[0].summary.contains("(COMPUTE_MISMATCH)"));
        let minor = bare(FindingCode::VramTransientError, Severity::Minor);
        let resolved = resolve_alone(vec![app_xid.clone(), minor]);
        assert_eq!(resolved[0].class, Class::Software);

        // The environment explains a device slower than its peers; a note does not.
        let peer = bare(FindingCode::PeerSlower, Severity::Major);
        let heat = bare(FindingCode::ThermalThrottle, Severity::Major);
        let resolved = resolve_alone(vec![peer.clone(), heat]);
        assert_eq!(resolved[0].class, Class::Environment);
        assert!(resolved[0].summary.contains("(THERMAL_THROTTLE)"));
        let slot = bare(FindingCode::PcieSlotLimits, Severity::Note);
        assert_eq!(resolve_alone(vec![peer, slot])[0].class, Class::Hardware);

        // Pages past the vendor's limit say the run's pages and the card's count; under
        // the limit, pages the run retired say the card's fault and the count goes.
        let limit = bare(FindingCode::RetiredPagesLimit, Severity::Critical);
        let retired = bare(FindingCode::RetiredPages, Severity::Critical);
        let history = bare(FindingCode::RetiredPagesHistory, Severity::Note);
        assert_eq!(
            codes(&resolve_alone(vec![retired.clone(), limit.clone()])),
            [("RETIRED_PAGES_LIMIT", Class::Hardware)]
        );
        assert_eq!(
            codes(&resolve_alone(vec![retired.clone(), history.clone()])),
            [("RETIRED_PAGES", Class::Hardware)]
        );
        assert_eq!(
            codes(&resolve_alone(vec![history])),
            [("RETIRED_PAGES_HISTORY", Class::Info)]
        );

        // Uncorrectable errors in the run hold the SRAM's; alone, its count is said.
        let sram = bare(FindingCode::SramHistory, Severity::Note);
        let ecc = bare(FindingCode::EccUncorrectable, Severity::Critical);
        assert_eq!(
            codes(&resolve_alone(vec![ecc, sram.clone()])),
            [("ECC_UNCORRECTABLE", Class::Hardware)]
        );
        assert_eq!(
            codes(&resolve_alone(vec![sram])),
            [("SRAM_HISTORY", Class::Info)]
        );

        // A failed or pending remap holds the card's remapped rows; alone, they are said.
        let remaps = bare(FindingCode::RowRemapHistory, Severity::Note);
        let pending = bare(FindingCode::RowRemapPending, Severity::Major);
        assert_eq!(
            codes(&resolve_alone(vec![pending, remaps.clone()])),
            [("ROW_REMAP_PENDING", Class::Hardware)]
        );
        assert_eq!(
            codes(&resolve_alone(vec![remaps])),
            [("ROW_REMAP_HISTORY", Class::Info)]
        );
    }

    /// The kinds of next step of `findings`, in order.
    fn remedies(findings: &[Finding]) -> Vec<(&str, Remedy)> {
        findings
            .iter()
            .map(|f| (f.code.name(), f.remedy()))
            .collect()
    }

    #[test]
    fn one_situation_has_one_next_step_and_an_rma_only_where_the_vendor_says() {
        use Remedy::{CheckPlatform, OwnAction, ResetAndRetest, Rma};
        // A double-bit error whose row remap is pending: reset and retest, every finding of
        // it; alone, with nothing to handle it, the card goes back.
        let dbe = bare(FindingCode::EccUncorrectable, Severity::Critical);
        let xid_48 = bare(FindingCode::XidMemoryHardware, Severity::Critical);
        let pending = bare(FindingCode::RowRemapPending, Severity::Major);
        let resolved = resolve_alone(vec![dbe.clone(), xid_48.clone(), pending.clone()]);
        assert_eq!(
            remedies(&resolved),
            [
                ("ECC_UNCORRECTABLE", ResetAndRetest),
                ("XID_MEMORY_HARDWARE", ResetAndRetest),
                ("ROW_REMAP_PENDING", ResetAndRetest)
            ]
        );
        assert_eq!(resolved[0].action, super::super::rules::RESET_AND_RETEST);
        assert_eq!(resolved[1].action, "follow ECC_UNCORRECTABLE");
        assert_eq!(
            remedies(&resolve_alone(vec![dbe.clone()])),
            [("ECC_UNCORRECTABLE", Rma)]
        );
        // The remap failed beside it: NVIDIA's criterion, an RMA for all of it.
        let failed = bare(FindingCode::RowRemapFailure, Severity::Critical);
        let resolved = resolve_alone(vec![dbe, pending, failed]);
        assert!(
            resolved.iter().all(|f| f.remedy() == Rma),
            "{:?}",
            remedies(&resolved)
        );

        // A device lost with Xid 79 is one loss: the Xid's finding weighs it with its
        // step (the platform first), the loss and Xid 154's recovery action are notes
        // pointing at it. Alone, each stands.
        let off_bus = bare(FindingCode::XidFallenOffBus, Severity::Critical);
        let lost = bare(FindingCode::DeviceLostHardware, Severity::Major);
        let recovery = bare(FindingCode::XidRecoveryAction, Severity::Critical);
        let resolved = resolve_alone(vec![off_bus.clone(), lost.clone(), recovery.clone()]);
        assert_eq!(
            codes(&resolved),
            [
                ("XID_FALLEN_OFF_BUS", Class::Hardware),
                ("DEVICE_LOST_HARDWARE", Class::Info),
                ("XID_RECOVERY_ACTION", Class::Info)
            ]
        );
        assert_eq!(resolved[0].remedy(), CheckPlatform);
        assert!(
            resolved[1..]
                .iter()
                .all(|f| f.action == "follow XID_FALLEN_OFF_BUS" && f.remedy() == OwnAction)
        );
        assert_eq!(
            codes(&resolve_alone(vec![recovery])),
            [("XID_RECOVERY_ACTION", Class::Software)]
        );
        assert_eq!(
            codes(&resolve_alone(vec![lost])),
            [("DEVICE_LOST_HARDWARE", Class::Hardware)]
        );

        // Beside the card's own proven fault, a fall off the bus asks no check of the slot:
        // the card goes back. Beside a fault the card handled, it keeps its own step.
        let stuck = bare(FindingCode::VramStuckBit, Severity::Critical);
        let resolved = resolve_alone(vec![stuck, off_bus.clone()]);
        assert_eq!(
            remedies(&resolved),
            [("VRAM_STUCK_BIT", Rma), ("XID_FALLEN_OFF_BUS", Rma)]
        );
        assert_eq!(
            resolved[1].action,
            "follow VRAM_STUCK_BIT: the card goes back whatever its slot and power do"
        );
        let pending = bare(FindingCode::RowRemapPending, Severity::Major);
        assert_eq!(
            remedies(&resolve_alone(vec![pending, off_bus.clone()])),
            [
                ("ROW_REMAP_PENDING", ResetAndRetest),
                ("XID_FALLEN_OFF_BUS", CheckPlatform)
            ]
        );

        // In a watch, the card as the application's cause is as sure as its leading cause
        // and gives its step, never an RMA path of its own.
        let mut off_bus = off_bus;
        off_bus.confidence = Confidence::Medium;
        off_bus.action = "reseat it".into();
        let mut app_lost = bare(FindingCode::AppDriverTimeout, Severity::Major);
        app_lost.facts.of_a_loss = true;
        let resolved = resolve_watched(vec![off_bus, app_lost], None);
        let cause = resolved
            .iter()
            .find(|f| f.code == FindingCode::AppCardFault)
            .unwrap();
        assert_eq!(
            (cause.confidence, cause.action.as_str(), cause.remedy()),
            (Confidence::Medium, "reseat it", CheckPlatform)
        );
    }

    #[test]
    fn another_process_s_fault_explains_kiln_s_loss_only_where_it_weighs() {
        // The xids rule weighs another process's Xid where kiln's own device was lost
        // after it with no fault of kiln's own: the loss is then the environment's.
        let lost = bare(FindingCode::DeviceLostApplication, Severity::Major);
        let mut weighs = bare(FindingCode::XidOtherProcess, Severity::Major);
        weighs.class = Class::Environment;
        assert_eq!(
            codes(&resolve_alone(vec![lost.clone(), weighs])),
            [
                ("DEVICE_LOST_APPLICATION", Class::Environment),
                ("XID_OTHER_PROCESS", Class::Environment)
            ]
        );
        // The near miss: another process's Xid said as a note explains nothing.
        let mut note = bare(FindingCode::XidOtherProcess, Severity::Note);
        note.class = Class::Info;
        assert_eq!(
            codes(&resolve_alone(vec![lost, note])),
            [
                ("DEVICE_LOST_APPLICATION", Class::Software),
                ("XID_OTHER_PROCESS", Class::Info)
            ]
        );
    }

    #[test]
    fn resolution_does_not_depend_on_the_order_of_the_findings_within_a_class() {
        let lost = bare(FindingCode::DeviceLostTimeout, Severity::Major);
        let psu = bare(FindingCode::PsuCombinedLoad, Severity::Critical);
        let hot = bare(FindingCode::MemoryHot, Severity::Note);
        let heat = bare(FindingCode::ThermalThrottle, Severity::Major);
        let a = resolve_alone(vec![lost.clone(), psu.clone(), hot.clone(), heat.clone()]);
        let b = resolve_alone(vec![heat, hot, psu, lost]);
        let mut a = codes(&a);
        let mut b = codes(&b);
        a.sort();
        b.sort();
        assert_eq!(a, b);
    }

    /// The findings of a watched device, resolved.
    fn resolve_watched(findings: Vec<Finding>, failed: Option<&str>) -> Vec<Finding> {
        resolve(
            findings,
            &Context {
                watch: Some(Watched {
                    failed: failed.map(str::to_owned),
                }),
            },
        )
    }

    #[test]
    fn in_a_watch_the_card_s_fault_is_the_application_s_cause_and_explains_its_failure() {
        let off_bus = bare(FindingCode::XidFallenOffBus, Severity::Critical);
        let mut lost = bare(FindingCode::AppDriverTimeout, Severity::Major);
        lost.facts.of_a_loss = true;
        let exit = bare(FindingCode::AppExit, Severity::Major);
        let resolved = resolve_watched(
            vec![off_bus.clone(), lost.clone(), exit.clone()],
            Some("21.1 s into the watch (vkQueueSubmit: the device was lost)"),
        );
        assert_eq!(
            codes(&resolved),
            [
                ("XID_FALLEN_OFF_BUS", Class::Hardware),
                ("APP_CARD_FAULT", Class::Hardware)
            ],
            "the card's fault absorbs the loss and the error it caused"
        );
        assert_eq!(
            resolved[1].summary,
            "the card: XID_FALLEN_OFF_BUS; the application failed 21.1 s into the watch (vkQueueSubmit: the device was lost)"
        );
        assert_eq!(
            resolved[1].evidence.json()["findings"][0],
            "XID_FALLEN_OFF_BUS"
        );
        // The near misses: a test, not a watch, says no application's cause; a minor
        // hardware finding is no cause of weight.
        assert_eq!(
            codes(&resolve_alone(vec![off_bus.clone()])),
            [("XID_FALLEN_OFF_BUS", Class::Hardware)]
        );
        let minor = bare(FindingCode::VramTransientError, Severity::Minor);
        let resolved = resolve_watched(vec![minor, lost.clone()], None);
        assert!(
            resolved.iter().all(|f| f.code != FindingCode::AppCardFault),
            "{:?}",
            codes(&resolved)
        );
        assert!(
            resolved
                .iter()
                .any(|f| f.code == FindingCode::AppDriverTimeout)
        );
    }

    #[test]
    fn a_watched_loss_is_said_once_and_what_was_unseen_yields_to_a_cause() {
        // The Xid that came with the loss is that loss: a note pointing at the one
        // finding that weighs it, with one thing to do.
        let xid = bare(FindingCode::XidApplication, Severity::Major);
        let mut lost = bare(FindingCode::AppDriverTimeout, Severity::Major);
        lost.facts.of_a_loss = true;
        let resolved = resolve_watched(vec![xid.clone(), lost], None);
        assert_eq!(
            (resolved[0].class, resolved[0].severity),
            (Class::Info, Severity::Note)
        );
        assert_eq!(resolved[0].action, "follow APP_DRIVER_TIMEOUT");
        // The near miss: an Xid with no loss of the application's stands.
        let alone = resolve_watched(vec![xid], None);
        assert_eq!(alone[0].class, Class::Software);
        // A cause found hides nothing: what went unseen yields to it; alone, it stands.
        let unseen = bare(FindingCode::AppNotJudged, Severity::Major);
        let leak = bare(FindingCode::AppMemoryLeak, Severity::Major);
        assert_eq!(
            codes(&resolve_watched(vec![leak, unseen.clone()], None)),
            [("APP_MEMORY_LEAK", Class::Software)]
        );
        let interrupted = bare(FindingCode::RunInterrupted, Severity::Major);
        assert_eq!(
            codes(&resolve_watched(vec![interrupted, unseen.clone()], None)),
            [("RUN_INTERRUPTED", Class::CouldNotTest)]
        );
        assert_eq!(
            codes(&resolve_watched(vec![unseen], None)),
            [("APP_NOT_JUDGED", Class::CouldNotTest)]
        );
    }
}
