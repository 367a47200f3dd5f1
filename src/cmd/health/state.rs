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
    /// Only a person clears it (`--clear`), never a passing run: a damaged state file's
    /// lost faults are not cured by a test that passed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) by_hand: bool,
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
/// every GPU and the node), recording who cleared what and when; returns the sentence
/// that confirms it (what was cleared, or that nothing open matched).
pub(super) fn clear(
    state: &mut State,
    code: &str,
    opts: &HealthOptions,
    scope_keys: &[String],
) -> Result<String, HealthError> {
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
    let what = if all {
        "open fault".to_owned()
    } else {
        format!("open {} fault", code.trim().to_ascii_uppercase())
    };
    let said = if gone.is_empty() {
        format!("--clear {}: no {what} to clear", code.trim())
    } else {
        let codes: Vec<String> = gone
            .iter()
            .map(|o| match o.fault.gpu {
                Some(g) => format!("{} on GPU{g}", o.fault.code),
                None => o.fault.code.to_string(),
            })
            .collect();
        format!(
            "cleared {} ({}), recorded in the state file",
            crate::text::count(gone.len() as u64, &what),
            codes.join(", ")
        )
    };
    for o in gone {
        state.record_cleared(o, &now, by.clone());
    }
    Ok(said)
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
        .partition(|o| !o.by_hand && passed_after(o).is_some());
    state.open = kept;
    for o in gone {
        let run = passed_after(&o).unwrap_or_default();
        state.record_cleared(o, now, format!("a full run that passed after it ({run})"));
    }
}

/// The state in `path` (none: a fresh one), with an earlier kiln's layout moved to per-GPU
/// state and, after a reboot, every kernel-log position from the start of the new boot's
/// log. Returns it and whether the node rebooted since. A path that is not a regular file
/// (a FIFO, a device) or cannot be read is refused: opening a FIFO would wait without end,
/// and a state that cannot be read must not be written over. A damaged file is kept
/// beside ([`set_aside`]) and its loss is an open fault only a person clears.
pub(super) fn load(
    path: Option<&Path>,
    keys: &[String],
    system: &System,
    notes: &mut Vec<String>,
) -> Result<(State, bool), HealthError> {
    let mut state = State::default();
    if let Some(path) = path
        && std::fs::symlink_metadata(path).is_ok()
    {
        let bytes = crate::fsutil::read_regular(path).map_err(|e| {
            HealthError(match e {
                crate::fsutil::FileError::NotAFile { what, .. } => {
                    format!("--state {}: {what}, not a state file", path.display())
                }
                other => format!("--state {other}: left as it is"),
            })
        })?;
        match serde_json::from_slice::<State>(&bytes) {
            Ok(s) => state = s,
            Err(e) => {
                let now = utc_timestamp(SystemTime::now());
                let kept = set_aside(path, &now).map_err(|moved| {
                    HealthError(format!(
                        "the state file {} is damaged ({e}) and could not be kept aside ({moved}): it is left as it is; move it away by hand",
                        path.display()
                    ))
                })?;
                let fault = damaged_fault(&bytes, &kept);
                notes.push(format!(
                    "state file {} was damaged ({e}): kept as {}, and a fresh one started",
                    path.display(),
                    kept.display()
                ));
                state.open.push(OpenFault {
                    key: NODE.into(),
                    fault,
                    since_utc: now,
                    by_hand: true,
                });
            }
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
    Ok((state, rebooted))
}

/// Moves a damaged state file aside, to `<name>.damaged-<UTC time>` beside it (never over
/// another), and returns where it went.
fn set_aside(path: &Path, now_utc: &str) -> std::io::Result<std::path::PathBuf> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let stamp: String = now_utc
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .collect();
    let mut kept = path.with_file_name(format!("{name}.damaged-{stamp}"));
    let mut n = 1;
    while std::fs::symlink_metadata(&kept).is_ok() {
        n += 1;
        kept = path.with_file_name(format!("{name}.damaged-{stamp}-{n}"));
    }
    std::fs::rename(path, &kept)?;
    Ok(kept)
}

/// The open faults a damaged state file held, as far as its text can be read: each fault's
/// code, its GPU's UUID where given, and the exit code it asked for. Read from the text,
/// not the JSON, so that a file cut short still gives the faults before the cut.
fn faults_held(bytes: &[u8]) -> Vec<(String, Option<String>, Option<i32>)> {
    let text = String::from_utf8_lossy(bytes);
    // The open faults come before the cleared ones, which name codes too.
    let open = match text.find("\"open\"") {
        Some(start) => {
            let rest = &text[start..];
            &rest[..rest.find("\"cleared\"").unwrap_or(rest.len())]
        }
        None => return Vec::new(),
    };
    let fault = regex::Regex::new(
        r#"(?:"uuid"\s*:\s*"([^"]{1,80})"\s*,\s*)?"code"\s*:\s*"(KILN-[A-Z]{2,3}-[0-9]{3})"(?:\s*,\s*"exit_code"\s*:\s*([0-9]))?"#,
    );
    let Ok(fault) = fault else {
        return Vec::new();
    };
    fault
        .captures_iter(open)
        .map(|c| {
            (
                c[2].to_owned(),
                c.get(1).map(|u| u.as_str().to_owned()),
                c.get(3).and_then(|x| x.as_str().parse().ok()),
            )
        })
        .collect()
}

/// The fault a damaged state file leaves: what it held, as far as it can be read, and
/// where it was kept. It asks for the most serious exit code among the faults it held (a
/// lost hardware fault still fails the node as hardware), else "could not check".
fn damaged_fault(bytes: &[u8], kept: &Path) -> Fault {
    /// The most faults named in the message: the rest are counted.
    const NAMED: usize = 4;
    let held = faults_held(bytes);
    let exit = held
        .iter()
        .filter_map(|(_, _, e)| *e)
        .filter(|e| (1..=crate::exit_code::INCONCLUSIVE).contains(e))
        .min()
        .unwrap_or(crate::exit_code::INCONCLUSIVE);
    let mut named: Vec<String> = held
        .iter()
        .take(NAMED)
        .map(|(code, uuid, _)| match uuid {
            Some(u) => format!("{code} ({})", crate::text::printable(u)),
            None => code.clone(),
        })
        .collect();
    if held.len() > NAMED {
        named.push(format!("{} more", held.len() - NAMED));
    }
    let what = if held.is_empty() {
        "no open fault could be read from it".to_owned()
    } else {
        format!("it held {}", named.join(", "))
    };
    Fault::node(
        super::codes::STATE_DAMAGED,
        exit,
        format!(
            "state file damaged, kept as {}: {what}; look, then --clear {}",
            kept.file_name().unwrap_or_default().to_string_lossy(),
            super::codes::STATE_DAMAGED
        ),
    )
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

    fn no_machine(root: &Path) -> System {
        System {
            root: root.to_owned(),
            env: BTreeMap::new(),
            nvml: false,
        }
    }

    /// A state holding two open faults, written as kiln writes it.
    fn with_faults() -> Vec<u8> {
        let fault = |code: &str, exit_code: i32, uuid: Option<&str>| OpenFault {
            key: uuid.unwrap_or(NODE).to_owned(),
            fault: Fault {
                gpu: uuid.map(|_| 0),
                uuid: uuid.map(str::to_owned),
                code: HealthCode::parse(code).unwrap(),
                exit_code,
                message: "what it was".into(),
                open_since: None,
                next: String::new(),
            },
            since_utc: "2026-12-01T10:00:00Z".into(),
            by_hand: false,
        };
        let state = State {
            open: vec![
                fault("KILN-RUN-002", 4, None),
                fault("KILN-XID-079", 1, Some("GPU-4b494c4e-0001")),
            ],
            cleared: vec![Cleared {
                key: NODE.into(),
                code: HealthCode::parse("KILN-PCI-002").unwrap(),
                message: "cleared long ago".into(),
                since_utc: "2026-11-01T10:00:00Z".into(),
                cleared_utc: "2026-11-02T10:00:00Z".into(),
                by: "--clear by ops".into(),
            }],
            ..State::default()
        };
        serde_json::to_vec_pretty(&state).unwrap()
    }

    #[test]
    fn a_damaged_state_is_kept_aside_and_its_faults_keep_the_node_failing_until_cleared_by_hand() {
        let dir = tempfile::tempdir().unwrap();
        let system = no_machine(dir.path());
        let path = dir.path().join("health-state.json");
        let whole = with_faults();
        // Cut short mid-record, as a full disk or a crash leaves it.
        std::fs::write(&path, &whole[..whole.len() * 3 / 4]).unwrap();
        let mut notes = Vec::new();
        let (mut state, _) = load(Some(&path), &[], &system, &mut notes).unwrap();
        let kept: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("health-state.json.damaged-"))
            .collect();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(
            !path.exists(),
            "moved, not copied: the fresh state takes its place"
        );
        assert_eq!(
            std::fs::read(dir.path().join(&kept[0])).unwrap(),
            &whole[..whole.len() * 3 / 4],
            "kept byte for byte"
        );
        assert!(notes.iter().any(|n| n.contains(&kept[0])), "{notes:?}");
        assert_eq!(state.open.len(), 1);
        let o = &state.open[0];
        assert!(o.by_hand);
        assert_eq!(o.fault.code, crate::cmd::health::codes::STATE_DAMAGED);
        // The hardware fault it held still fails the node as hardware; the cleared one is
        // not named as held.
        assert_eq!(o.fault.exit_code, crate::exit_code::HARDWARE);
        assert!(
            o.fault.message.contains("KILN-RUN-002"),
            "{}",
            o.fault.message
        );
        assert!(
            o.fault.message.contains("KILN-XID-079 (GPU-4b494c4e-0001)"),
            "{}",
            o.fault.message
        );
        assert!(
            !o.fault.message.contains("KILN-PCI-002"),
            "{}",
            o.fault.message
        );
        // A passing run does not clear it; a person does.
        let report = serde_json::json!({
            "schema": "kiln.report/1", "tool_version": "0", "run_id": "r", "run_dir": "r",
            "host": "h", "started_utc": "2099-01-01T00:00:00Z", "finished_utc": "",
            "wall_s": 1.0, "result": "pass", "exit_code": 0, "notes": [], "devices": []
        });
        let run = runs::Run {
            id: "r".into(),
            started_utc: "2099-01-01T00:00:00Z".into(),
            age: Duration::ZERO,
            report: serde_json::from_value(report).unwrap(),
        };
        clear_by_passing_runs(&mut state, &[run], "2099-01-02T00:00:00Z");
        assert_eq!(state.open.len(), 1, "a pass is no cure for lost faults");
        // A second damaged file the same second is kept beside the first, never over it.
        std::fs::write(&path, b"{").unwrap();
        let (again, _) = load(Some(&path), &[], &system, &mut notes).unwrap();
        assert_eq!(
            again.open[0].fault.exit_code,
            crate::exit_code::INCONCLUSIVE
        );
        assert!(
            again.open[0]
                .fault
                .message
                .contains("no open fault could be read"),
            "{}",
            again.open[0].fault.message
        );
        let kept_now = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".damaged-")
            })
            .count();
        assert_eq!(kept_now, 2);
    }

    #[test]
    fn a_whole_state_loads_as_it_was_and_a_path_that_is_no_file_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let system = no_machine(dir.path());
        let path = dir.path().join("state.json");
        std::fs::write(&path, with_faults()).unwrap();
        let mut notes = Vec::new();
        let (state, _) = load(Some(&path), &[], &system, &mut notes).unwrap();
        assert_eq!(state.open.len(), 2);
        assert!(state.open.iter().all(|o| !o.by_hand));
        assert!(notes.is_empty(), "{notes:?}");
        let (fresh, _) = load(
            Some(&dir.path().join("none.json")),
            &[],
            &system,
            &mut notes,
        )
        .unwrap();
        assert!(fresh.open.is_empty());
        let err = load(Some(dir.path()), &[], &system, &mut notes).unwrap_err();
        assert!(
            err.to_string().ends_with("a directory, not a state file"),
            "{err}"
        );
        assert!(dir.path().is_dir());
    }

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
