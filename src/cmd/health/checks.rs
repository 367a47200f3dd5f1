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

/// How a group of readings was read.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum GroupRead {
    /// At least one of its readings is a number.
    Read,
    /// Every reading says the card does not have it.
    NotSupported,
    /// None could be read, for this reason (`no_permission`, `gpu_lost`, ...).
    Failed(String),
    /// No source offered it.
    Absent,
}

pub(super) fn group_read(readings: Option<&Readings>, belongs: fn(Name) -> bool) -> GroupRead {
    let mut read = GroupRead::Absent;
    let ours = |k: &String| Name::parse(k).is_some_and(belongs);
    for (_, r) in readings.into_iter().flatten().filter(|(k, _)| ours(k)) {
        match r {
            Reading::Number(_) => return GroupRead::Read,
            Reading::Unavailable { unavailable } if unavailable != "not_supported" => {
                if !matches!(read, GroupRead::Failed(_)) {
                    read = GroupRead::Failed(unavailable.clone());
                }
            }
            _ => {
                if read == GroupRead::Absent {
                    read = GroupRead::NotSupported;
                }
            }
        }
    }
    read
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
/// check.
pub(super) fn health_phase(device: usize, seen: Vec<XidEvent>) -> PhaseTelemetry {
    // One fault, however many ways it came (the kernel log, NVML's events), is one.
    let mut xids = Vec::new();
    for x in seen {
        crate::telemetry::record::add_xid(&mut xids, x);
    }
    PhaseTelemetry {
        device,
        phase: "health".into(),
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
