//! The checks of one GPU: which groups of readings could be read, the growth of its
//! counters, and the one phase the verdict's rules judge.

use std::collections::BTreeMap;

use super::read::number;
use super::state::GpuState;
use crate::telemetry::record::{Reading, Readings, XidEvent};
use crate::telemetry::signals::{self, Name, Signal};
use crate::telemetry::summary::{GAUGES, PhaseTelemetry, Stat};

/// A group of readings a node check judges, named for people.
pub(super) struct Group {
    pub(super) name: &'static str,
    /// Whether a reading, by what its name names, is the group's.
    pub(super) holds: fn(Name) -> bool,
    /// Read from the gauges rather than the counters.
    pub(super) gauges: bool,
}

/// Whether `name` is one of `of`.
fn one_of(name: Name, of: &[Signal]) -> bool {
    matches!(name, Name::Fixed(s) if of.contains(s))
}

/// Every group, in the order they are said.
pub(super) const GROUPS: [Group; 8] = [
    Group {
        name: "ECC",
        holds: |n| one_of(n, &signals::ECC_TOTALS) || matches!(n, Name::EccAt { .. }),
        gauges: false,
    },
    Group {
        name: "row remapping",
        holds: |n| {
            one_of(
                n,
                &[
                    signals::REMAPPED_CORRECTABLE,
                    signals::REMAPPED_UNCORRECTABLE,
                    signals::REMAP_PENDING,
                    signals::REMAP_FAILURE,
                    signals::REMAP_BANKS_MAX,
                    signals::REMAP_BANKS_HIGH,
                    signals::REMAP_BANKS_PARTIAL,
                    signals::REMAP_BANKS_LOW,
                    signals::REMAP_BANKS_NONE,
                ],
            )
        },
        gauges: false,
    },
    Group {
        name: "retired pages",
        holds: |n| {
            one_of(
                n,
                &[
                    signals::RETIRED_PAGES_SBE,
                    signals::RETIRED_PAGES_DBE,
                    signals::RETIRED_PAGES_PENDING,
                    signals::RETIRED_PAGES_FAILED,
                ],
            )
        },
        gauges: false,
    },
    Group {
        name: "SRAM",
        holds: |n| {
            one_of(
                n,
                &[
                    signals::SRAM_UNCORRECTED_PARITY,
                    signals::SRAM_UNCORRECTED_SECDED,
                    signals::SRAM_CORRECTED,
                    signals::SRAM_THRESHOLD_EXCEEDED,
                ],
            )
        },
        gauges: false,
    },
    Group {
        name: "RAS",
        holds: |n| one_of(n, &[signals::RAS_UNCORRECTED_OTHER]) || matches!(n, Name::Ras { .. }),
        gauges: false,
    },
    Group {
        name: "NVLink",
        holds: |n| matches!(n, Name::Nvlink { .. }),
        gauges: false,
    },
    Group {
        name: "PCIe link",
        holds: |n| {
            one_of(
                n,
                &[
                    signals::PCIE_GEN,
                    signals::PCIE_GEN_MAX,
                    signals::PCIE_WIDTH,
                    signals::PCIE_WIDTH_MAX,
                    signals::PCIE_SPEED_GTS,
                    signals::PCIE_SPEED_MAX_GTS,
                ],
            )
        },
        gauges: true,
    },
    Group {
        name: "recovery action",
        holds: |n| one_of(n, &[signals::RECOVERY_ACTION]),
        gauges: false,
    },
];

/// The groups that tell a GPU's memory health: one that the card has but that cannot be
/// read leaves the GPU unchecked.
pub(super) const MEMORY_GROUPS: [&str; 3] = ["ECC", "row remapping", "retired pages"];

/// The word a reading carries for a call the card does not support.
const NOT_SUPPORTED: &str = "not_supported";

/// The word a reading carries for a call this driver's NVML does not have (an optional
/// call added in a later driver): nothing failed, the driver cannot be asked.
const FUNCTION_NOT_FOUND: &str = "function_not_found";

/// How a group of readings was read.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum GroupRead {
    /// At least one of its readings is a number.
    Read,
    /// No reading is a number and none failed: the card says it does not have them (any
    /// other reading is a call this driver lacks).
    NotSupported,
    /// Every reading is a call this driver lacks: not read, yet nothing failed.
    Lacking,
    /// None could be read, and a call the card has failed: why, each reason once, the one
    /// that matters most first (`gpu_lost`, `no_permission`, `timeout`, ...).
    Failed(Vec<String>),
    /// No source offered it.
    Absent,
}

/// How a group of readings was read, deciding by kind: a number reads it; a call this
/// driver lacks (`function_not_found`) counts as the card not having it, since the driver
/// was never asked and nothing failed; any other word is a real failure, which outweighs
/// both.
pub(super) fn group_read(readings: Option<&Readings>, belongs: fn(Name) -> bool) -> GroupRead {
    let (mut any, mut unsupported) = (false, false);
    let mut failed: Vec<String> = Vec::new();
    for (_, r) in ours(readings, belongs) {
        any = true;
        match r {
            Reading::Number(_) => return GroupRead::Read,
            Reading::Unavailable { unavailable } if unavailable == FUNCTION_NOT_FOUND => {}
            Reading::Unavailable { unavailable } if unavailable != NOT_SUPPORTED => {
                if !failed.contains(unavailable) {
                    failed.push(unavailable.clone());
                }
            }
            _ => unsupported = true,
        }
    }
    if !failed.is_empty() {
        // Stable: reasons of one rank stay in the order met.
        failed.sort_by_key(|w| failure_rank(w));
        GroupRead::Failed(failed)
    } else if unsupported {
        GroupRead::NotSupported
    } else if any {
        GroupRead::Lacking
    } else {
        GroupRead::Absent
    }
}

/// The readings of a group, by name.
fn ours(
    readings: Option<&Readings>,
    belongs: fn(Name) -> bool,
) -> impl Iterator<Item = (&String, &Reading)> {
    readings
        .into_iter()
        .flatten()
        .filter(move |(k, _)| Name::parse(k).is_some_and(belongs))
}

/// Which failure a person needs to hear of first: a lost GPU, then a refusal (which they
/// can grant), then a timeout; an unknown error last, as it tells the least.
fn failure_rank(word: &str) -> u8 {
    match word {
        "gpu_lost" => 0,
        "no_permission" => 1,
        "timeout" => 2,
        "unknown" => 4,
        _ => 3,
    }
}

/// A reason in words, as the first line says it (`no permission`, `GPU lost`).
pub(super) fn in_words(word: &str) -> String {
    match word {
        "gpu_lost" => "GPU lost".to_owned(),
        other => other.replace('_', " "),
    }
}

/// The readings of a group that are calls this driver lacks, by name.
pub(super) fn lacking(readings: Option<&Readings>, belongs: fn(Name) -> bool) -> Vec<&str> {
    ours(readings, belongs)
        .filter(|(_, r)| {
            matches!(r, Reading::Unavailable { unavailable } if unavailable == FUNCTION_NOT_FOUND)
        })
        .map(|(k, _)| k.as_str())
        .collect()
}

/// The optional NVML calls a driver may lack (added in later drivers), by the reading
/// kiln records in their place, with what they tell: so that a note names the call a
/// person can look up. A call not listed is named by its reading.
const OPTIONAL_CALLS: [(&str, &str, &str); 2] = [
    (
        signals::REMAP_BANKS_NONE.name,
        "nvmlDeviceGetRowRemapperHistogram",
        "the row-remapper bank histogram",
    ),
    (
        signals::SRAM_THRESHOLD_EXCEEDED.name,
        "nvmlDeviceGetSramEccErrorStatus",
        "the SRAM ECC status",
    ),
];

/// What the notes say of the readings of `group` that are calls this driver lacks: that
/// they are not checked, each known call by its name; the others by their readings, or
/// as the group's where the driver has none of its calls.
pub(super) fn lacking_notes(group: &str, keys: &[&str], whole_group: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let mut unnamed = Vec::new();
    for key in keys {
        match OPTIONAL_CALLS.iter().find(|(k, _, _)| k == key) {
            Some((_, call, what)) => {
                notes.push(format!("the driver lacks {call}: {what} is not checked"))
            }
            None => unnamed.push(*key),
        }
    }
    if whole_group && !unnamed.is_empty() {
        notes.push(format!(
            "the driver lacks the NVML calls for {group}: {group} is not checked"
        ));
    } else if !unnamed.is_empty() {
        let calls = if unnamed.len() == 1 { "call" } else { "calls" };
        notes.push(format!(
            "the driver lacks the NVML {calls} for {} ({group}): not checked",
            unnamed.join(", ")
        ));
    }
    notes
}

/// One sample as a phase's gauge statistics (min = median = max).
pub(super) fn gauges_of(readings: Option<&Readings>) -> BTreeMap<String, Stat> {
    GAUGES
        .iter()
        .filter_map(|g| {
            let v = number(readings, g)?;
            Some((
                (*g).to_owned(),
                Stat {
                    min: v,
                    median: v,
                    max: v,
                    samples: 1,
                },
            ))
        })
        .collect()
}

/// The counters' growth since the last check. On a first check, the volatile counts
/// (since the driver loaded) are the growth and lifetime totals are not: a card that
/// logged errors years ago is not failing today for that.
pub(super) fn growth(now: &Readings, before: Option<&GpuState>) -> BTreeMap<String, f64> {
    now.iter()
        .filter_map(|(k, v)| {
            let v = v.number()?;
            let grown = match before.and_then(|b| b.counters.get(k)) {
                Some(b) => v - b,
                None if before.is_some() => 0.0,
                // Counts since the driver loaded: NVML's volatile ECC, amdgpu's RAS.
                None if signals::counts_since_driver_load(k) => v,
                None => 0.0,
            };
            Some((k.clone(), grown))
        })
        .collect()
}

/// The one phase a health check judges: what was read now, and the Xids since the last
/// check (`since_last_check`: the state file kept one for this GPU), else since boot.
pub(super) fn health_phase(
    device: usize,
    seen: Vec<XidEvent>,
    since_last_check: bool,
) -> PhaseTelemetry {
    // One fault, however many ways it came (the kernel log, NVML's events), is one.
    let mut xids = Vec::new();
    for x in seen {
        crate::telemetry::record::add_xid(&mut xids, x);
    }
    PhaseTelemetry {
        device,
        phase: if since_last_check {
            crate::telemetry::summary::HEALTH
        } else {
            crate::telemetry::summary::HEALTH_SINCE_BOOT
        }
        .into(),
        start_ms: 0.0,
        end_ms: 0.0,
        samples: 0,
        gauges: BTreeMap::new(),
        throttle_share: BTreeMap::new(),
        reasons_read: 0,
        counter_deltas: BTreeMap::new(),
        counters_after: BTreeMap::new(),
        counters_unavailable: Vec::new(),
        xids,
        driver_resets: Vec::new(),
        other_processes: Vec::new(),
        processes_first_ms: BTreeMap::new(),
    }
}

/// The Xids of `device` (None: those tied to no GPU) newer than `position`, and the
/// newest kernel time among them.
pub(super) fn new_xids(
    all: &[(Option<usize>, XidEvent)],
    device: Option<usize>,
    position: u64,
) -> (Vec<XidEvent>, u64) {
    let mut newest = 0;
    let xids = all
        .iter()
        .filter(|(d, _)| *d == device)
        .filter(|(_, x)| {
            let at = x.kernel_us.unwrap_or(0);
            at == 0 || at > position
        })
        .map(|(_, x)| {
            newest = newest.max(x.kernel_us.unwrap_or(0));
            let mut x = x.clone();
            // Everything since the last check belongs to this check.
            x.before_run = false;
            x
        })
        .collect();
    (xids, newest)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row-remapping group's readings, each given as a number or a word.
    fn remap(readings: &[(&str, Option<&str>)]) -> Readings {
        readings
            .iter()
            .map(|(k, w)| {
                let r = match w {
                    None => Reading::Number(0.0),
                    Some(w) => Reading::Unavailable {
                        unavailable: (*w).to_owned(),
                    },
                };
                ((*k).to_owned(), r)
            })
            .collect()
    }

    fn remap_read(readings: &[(&str, Option<&str>)]) -> GroupRead {
        group_read(Some(&remap(readings)), GROUPS[1].holds)
    }

    #[test]
    fn a_call_the_driver_lacks_counts_as_not_supported_never_as_a_failure() {
        assert_eq!(GROUPS[1].name, "row remapping");
        // A GeForce on an older driver: the fields not supported, the histogram missing.
        let geforce = [
            ("remap_banks_none", Some("function_not_found")),
            ("remap_failure", Some("not_supported")),
            ("remapped_correctable", Some("not_supported")),
        ];
        assert_eq!(remap_read(&geforce), GroupRead::NotSupported);
        // A data-centre card on the same driver: read, the histogram said as missing.
        let read = remap(&[
            ("remap_banks_none", Some("function_not_found")),
            ("remap_failure", None),
        ]);
        assert_eq!(group_read(Some(&read), GROUPS[1].holds), GroupRead::Read);
        assert_eq!(lacking(Some(&read), GROUPS[1].holds), ["remap_banks_none"]);
        assert_eq!(
            lacking_notes("row remapping", &["remap_banks_none"], false),
            [
                "the driver lacks nvmlDeviceGetRowRemapperHistogram: the row-remapper bank histogram is not checked"
            ]
        );
        // Every call missing: not read, and not failed either.
        assert_eq!(
            remap_read(&[("remap_banks_none", Some("function_not_found"))]),
            GroupRead::Lacking
        );
        assert_eq!(remap_read(&[]), GroupRead::Absent);
        // By kind, not by call: any other reading the driver lacks is said by its name.
        assert_eq!(
            lacking_notes("row remapping", &["remap_failure", "remap_pending"], false),
            [
                "the driver lacks the NVML calls for remap_failure, remap_pending (row remapping): not checked"
            ]
        );
        assert_eq!(
            lacking_notes("ECC", &["ecc_corrected_volatile"], true),
            ["the driver lacks the NVML calls for ECC: ECC is not checked"]
        );
    }

    #[test]
    fn a_real_failure_outweighs_a_missing_call_and_each_reason_is_kept() {
        // The missing histogram comes first by name; the refusal is what matters.
        let refused = [
            ("remap_banks_none", Some("function_not_found")),
            ("remap_failure", Some("no_permission")),
            ("remap_pending", Some("no_permission")),
        ];
        assert_eq!(
            remap_read(&refused),
            GroupRead::Failed(vec!["no_permission".into()])
        );
        // Not supported does not hide a failure either.
        assert_eq!(
            remap_read(&[
                ("remap_failure", Some("not_supported")),
                ("remap_pending", Some("timeout")),
            ]),
            GroupRead::Failed(vec!["timeout".into()])
        );
        // Two reasons in one group: both, the refusal before the unknown error.
        assert_eq!(
            remap_read(&[
                ("remap_failure", Some("unknown")),
                ("remap_pending", Some("no_permission")),
            ]),
            GroupRead::Failed(vec!["no_permission".into(), "unknown".into()])
        );
        assert_eq!(in_words("no_permission"), "no permission");
        assert_eq!(in_words("gpu_lost"), "GPU lost");
    }

    #[test]
    fn growth_on_a_first_check_is_the_volatile_counts_only() {
        let mut now = Readings::new();
        now.insert("ecc_uncorrected_volatile".into(), Reading::Number(2.0));
        now.insert("ecc_uncorrected_aggregate".into(), Reading::Number(9.0));
        let first = growth(&now, None);
        assert_eq!(first["ecc_uncorrected_volatile"], 2.0);
        assert_eq!(first["ecc_uncorrected_aggregate"], 0.0);
        let before = GpuState {
            xid_kernel_us: 0,
            counters: BTreeMap::from([
                ("ecc_uncorrected_volatile".to_owned(), 2.0),
                ("ecc_uncorrected_aggregate".to_owned(), 8.0),
            ]),
            xid_resets: BTreeMap::new(),
        };
        let later = growth(&now, Some(&before));
        assert_eq!(later["ecc_uncorrected_volatile"], 0.0);
        assert_eq!(later["ecc_uncorrected_aggregate"], 1.0);
    }
}
