//! The state file: what `kiln health` keeps between checks (per GPU, its kernel-log
//! position, counters and Xid history; the open faults; the latest clearings), and how it
//! changes: a reset counted, a fault cleared by hand or by a passing run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::runs;
use super::{Fault, HealthError, HealthOptions};
use crate::evidence::{parse_utc_timestamp, utc_timestamp};
use crate::finding::HealthCode;
use crate::inventory::System;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// How many cleared faults the state file remembers.
pub(super) const CLEARED_KEPT: usize = 200;

/// A GPU's own part of the state: its kernel-log position and counters at the last check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct GpuState {
    /// Kernel time (µs since boot) of the newest of its Xids already reported.
    #[serde(default)]
    pub(super) xid_kernel_us: u64,
    /// Its counters at the last check.
    #[serde(default)]
    pub(super) counters: BTreeMap<String, f64>,
    /// Its Xids that need a reset or a reboot, by code: the resets seen since each first
    /// came, so that one that comes back after two is known for what it is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) xid_resets: BTreeMap<u32, XidHistory>,
}

/// One Xid code's history on one GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct XidHistory {
    /// Resets (or reboots) of the GPU seen since the code first came.
    pub(super) resets: u32,
    /// When it last came (UTC).
    pub(super) last_seen_utc: String,
}

/// Resets after which an Xid that needs one is the hardware's: it came back twice after
/// the cure its own catalogue row prescribes (after gpud's Xid reboot threshold of 2, leptonai/gpud's `xid/threshold.go`).
pub(super) const RESETS_BEFORE_INSPECTION: u32 = 2;

/// How long an Xid's history is kept after it last came.
pub(super) const XID_HISTORY_KEPT: Duration = Duration::from_secs(14 * 24 * 3600);

/// Whether the GPU was reset (or the node rebooted) since the last check: a new boot, a
/// count since driver load that went back (a reset clears the volatile ECC counts and the
/// energy), or a recovery action the driver asked for that is no longer asked.
pub(super) fn reset_since(now: &Readings, before: Option<&GpuState>, rebooted: bool) -> bool {
    let Some(before) = before else {
        return false;
    };
    let went_back = now.iter().any(|(k, v)| {
        let (Some(v), Some(b)) = (v.number(), before.counters.get(k)) else {
            return false;
        };
        (signals::counts_since_driver_load(k) || k == signals::ENERGY_MJ.name) && v < *b
    });
    let action_done = before
        .counters
        .get(signals::RECOVERY_ACTION.name)
        .is_some_and(|b| *b > 0.0)
        && now
            .get(signals::RECOVERY_ACTION.name)
            .and_then(Reading::number)
            == Some(0.0);
    rebooted || went_back || action_done
}

/// Carries a GPU's Xid history to this check: a reset counts against every code already
/// seen, then each code that needs a reset and came now is recorded. Returns the codes that
/// came back after [`RESETS_BEFORE_INSPECTION`] resets, with how many.
pub(super) fn escalate(
    history: &mut BTreeMap<u32, XidHistory>,
    codes_now: &[u32],
    reset: bool,
    now_utc: &str,
) -> Vec<(u32, u32)> {
    let now = parse_utc_timestamp(now_utc);
    history.retain(|_, h| match (now, parse_utc_timestamp(&h.last_seen_utc)) {
        (Some(n), Some(then)) => n
            .duration_since(then)
            .map_or(true, |age| age <= XID_HISTORY_KEPT),
        _ => true,
    });
    if reset {
        for h in history.values_mut() {
            h.resets += 1;
        }
    }
    let mut back = Vec::new();
    for &code in codes_now {
        if !crate::verdict::xid::lookup(code).is_some_and(|x| x.resolution.needs_reset()) {
            continue;
        }
        let h = history.entry(code).or_default();
        if h.resets >= RESETS_BEFORE_INSPECTION && !back.iter().any(|(c, _)| *c == code) {
            back.push((code, h.resets));
        }
        h.last_seen_utc = now_utc.to_owned();
    }
    back
}

/// A fault event that stays until cleared.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(super) struct OpenFault {
    /// The GPU's key (`GPU-...` UUID, else PCI address, else `gpu<N>`; `node` for the
    /// node as a whole).
    pub(super) key: String,
    /// The fault as it was reported.
    pub(super) fault: Fault,
    /// When it was first seen (UTC).
    pub(super) since_utc: String,
}

/// A cleared fault, for the record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Cleared {
    pub(super) key: String,
    pub(super) code: HealthCode,
    pub(super) message: String,
    pub(super) since_utc: String,
    pub(super) cleared_utc: String,
    /// Who (`--clear` by a user) or what (a passing run) cleared it.
    pub(super) by: String,
}

/// Kept between checks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct State {
    /// The boot the kernel-log positions belong to: after a reboot they start over.
    #[serde(default)]
    pub(super) boot_id: Option<String>,
    /// Per GPU key, and `node` for Xids no GPU can be tied to.
    #[serde(default)]
    pub(super) gpus: BTreeMap<String, GpuState>,
    /// Faults that stay until cleared.
    #[serde(default)]
    pub(super) open: Vec<OpenFault>,
    /// The most recent clearings.
    #[serde(default)]
    pub(super) cleared: Vec<Cleared>,
    /// Before per-GPU state (state files of earlier kilns): one position for all GPUs.
    #[serde(default, skip_serializing)]
    pub(super) xid_kernel_us: u64,
    /// Before per-GPU state: counters per UUID.
    #[serde(default, skip_serializing)]
    pub(super) counters: BTreeMap<String, BTreeMap<String, f64>>,
}

impl State {
    /// Records a cleared fault, newest first.
    fn record_cleared(&mut self, o: OpenFault, now: &str, by: String) {
        self.cleared.insert(
            0,
            Cleared {
                key: o.key,
                code: o.fault.code,
                message: o.fault.message,
                since_utc: o.since_utc,
                cleared_utc: now.to_owned(),
                by,
            },
        );
    }

    /// Moves an earlier kiln's single position and counters into per-GPU state.
    fn migrate(&mut self, keys: &[String]) {
        if self.xid_kernel_us == 0 && self.counters.is_empty() {
            return;
        }
        for key in keys.iter().chain(std::iter::once(&NODE.to_owned())) {
            let g = self.gpus.entry(key.clone()).or_default();
            g.xid_kernel_us = g.xid_kernel_us.max(self.xid_kernel_us);
            if let Some(c) = self.counters.remove(key) {
                g.counters = c;
            }
        }
        self.xid_kernel_us = 0;
        self.counters.clear();
    }
}

/// The state key of Xids and faults that belong to no one GPU.
pub(super) const NODE: &str = "node";

/// The boot this kernel log belongs to.
pub(super) fn boot_id(system: &System) -> Option<String> {
    let path = system.root.join("proc/sys/kernel/random/boot_id");
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Who is clearing a fault, for the record.
pub(super) fn who() -> String {
    ["SUDO_USER", "USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown user".into())
}

/// True when the state holds a kernel-log position from an earlier check.
pub(super) fn position_known(state: &State) -> bool {
    state.gpus.values().any(|g| g.xid_kernel_us > 0)
}

/// `--clear CODE|all`: removes the matching open faults (of the `--gpus` given, else of
/// every GPU and the node), recording who cleared what and when.
pub(super) fn clear(
    state: &mut State,
    code: &str,
    opts: &HealthOptions,
    scope_keys: &[String],
) -> Result<(), HealthError> {
    if opts.state.is_none() {
        return Err(HealthError(
            "--clear needs --state FILE: open faults live in the state file".into(),
        ));
    }
    let all = code.trim().eq_ignore_ascii_case("all");
    let wanted = HealthCode::parse(&code.trim().to_ascii_uppercase());
    if !all && wanted.is_none() {
        return Err(HealthError(format!(
            "--clear {}: not a fault code (KILN-XID-079, ...) or `all`",
            crate::text::quote(code.trim())
        )));
    }
    let now = utc_timestamp(SystemTime::now());
    let by = format!("--clear by {}", who());
    let (gone, kept): (Vec<OpenFault>, Vec<OpenFault>) =
        std::mem::take(&mut state.open).into_iter().partition(|o| {
            (all || Some(o.fault.code) == wanted)
                && (opts.only_nvml.is_none() || scope_keys.contains(&o.key))
        });
    state.open = kept;
    for o in gone {
        state.record_cleared(o, &now, by.clone());
    }
    Ok(())
}

/// Clears the open faults of each GPU on which a full run passed after the fault was seen
/// (and the node's, where a run passed as a whole).
pub(super) fn clear_by_passing_runs(state: &mut State, runs: &[runs::Run], now: &str) {
    if state.open.is_empty() {
        return;
    }
    // (start, GPU key, run) of every device that passed a full run, by UUID and by PCI
    // address; and the node's key for a run that passed as a whole.
    let mut passes: Vec<(&str, String, &str)> = Vec::new();
    for run in runs {
        if run.report.exit_code == crate::exit_code::HEALTHY {
            passes.push((&run.started_utc, NODE.into(), &run.id));
        }
        for key in run.passed_gpus() {
            passes.push((&run.started_utc, key, &run.id));
        }
    }
    let passed_after = |o: &OpenFault| {
        passes
            .iter()
            .find(|(start, key, _)| {
                *key == o.key.to_ascii_lowercase() && *start > o.since_utc.as_str()
            })
            .map(|(_, _, run)| (*run).to_owned())
    };
    let (gone, kept): (Vec<OpenFault>, Vec<OpenFault>) = std::mem::take(&mut state.open)
        .into_iter()
        .partition(|o| passed_after(o).is_some());
    state.open = kept;
    for o in gone {
        let run = passed_after(&o).unwrap_or_default();
        state.record_cleared(o, now, format!("a full run that passed after it ({run})"));
    }
}

/// The state in `path` (none: a fresh one), with an earlier kiln's layout moved to per-GPU
/// state and, after a reboot, every kernel-log position from the start of the new boot's
/// log. Returns it and whether the node rebooted since; an unreadable file is said in
/// `notes` and started afresh.
pub(super) fn load(
    path: Option<&Path>,
    keys: &[String],
    system: &System,
    notes: &mut Vec<String>,
) -> (State, bool) {
    let mut state = State::default();
    if let Some(path) = path
        && let Ok(bytes) = std::fs::read(path)
    {
        match serde_json::from_slice::<State>(&bytes) {
            Ok(s) => state = s,
            Err(e) => notes.push(format!(
                "state file {} unreadable ({e}): starting afresh",
                path.display()
            )),
        }
    }
    state.migrate(keys);
    let boot = boot_id(system);
    let rebooted = boot.is_some() && state.boot_id.is_some() && state.boot_id != boot;
    if rebooted {
        for g in state.gpus.values_mut() {
            g.xid_kernel_us = 0;
        }
        notes.push("a new boot since the last check: its kernel log read from the start".into());
    }
    state.boot_id = boot.or(state.boot_id.take());
    (state, rebooted)
}

/// Writes the state to `path`, keeping the latest clearings; a failure is said in `notes`
/// (the next check then reports these Xids again: better than missing new ones).
pub(super) fn save(state: &mut State, path: &Path, notes: &mut Vec<String>) {
    state.cleared.truncate(CLEARED_KEPT);
    if let Err(e) = crate::evidence::write_json_atomic(path, state) {
        notes.push(format!("state not saved ({e})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_xid_a_reset_should_cure_is_the_hardware_s_after_two_resets() {
        let mut h = BTreeMap::new();
        let t = |day: u32| format!("2026-12-{day:02}T10:00:00Z");
        // Xid 79 (a reboot cures it, says the catalogue), then a reboot, then again.
        assert!(escalate(&mut h, &[79], false, &t(1)).is_empty());
        assert!(
            escalate(&mut h, &[79], true, &t(2)).is_empty(),
            "back after one"
        );
        assert_eq!(escalate(&mut h, &[79], true, &t(3)), vec![(79, 2)]);
        // An application's Xid is cured by restarting it: never escalated.
        let mut app = BTreeMap::new();
        for day in 1..=4 {
            assert!(escalate(&mut app, &[13], true, &t(day)).is_empty());
        }
        assert!(app.is_empty(), "not even kept");
        // Resets with no Xid since: nothing comes back; an old history is let go.
        let mut quiet = BTreeMap::new();
        escalate(&mut quiet, &[48], false, &t(1));
        escalate(&mut quiet, &[], true, &t(2));
        escalate(&mut quiet, &[], true, &t(3));
        assert_eq!(quiet[&48].resets, 2);
        assert!(escalate(&mut quiet, &[], false, &t(20)).is_empty());
        assert!(quiet.is_empty(), "a fortnight after it last came");
    }

    #[test]
    fn a_reset_is_seen_in_the_counts_it_clears_and_the_action_it_answers() {
        let before = GpuState {
            xid_kernel_us: 0,
            counters: BTreeMap::from([
                ("ecc_corrected_volatile".to_owned(), 40.0),
                ("ecc_corrected_aggregate".to_owned(), 900.0),
                ("energy_mj".to_owned(), 8.0e9),
                ("recovery_action".to_owned(), 1.0),
            ]),
            xid_resets: BTreeMap::new(),
        };
        let reading = |pairs: &[(&str, f64)]| -> Readings {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Reading::Number(*v)))
                .collect()
        };
        let same = reading(&[
            ("ecc_corrected_volatile", 41.0),
            ("ecc_corrected_aggregate", 901.0),
            ("energy_mj", 8.1e9),
            ("recovery_action", 1.0),
        ]);
        assert!(!reset_since(&same, Some(&before), false));
        assert!(reset_since(&same, Some(&before), true), "a reboot");
        let cleared = reading(&[("ecc_corrected_volatile", 0.0), ("energy_mj", 8.1e9)]);
        assert!(reset_since(&cleared, Some(&before), false));
        let answered = reading(&[("energy_mj", 8.2e9), ("recovery_action", 0.0)]);
        assert!(reset_since(&answered, Some(&before), false));
        assert!(
            !reset_since(&same, None, true),
            "no earlier check: nothing to compare"
        );
    }
}
