//! `kiln health`: a node check for schedulers, in seconds and with no load. It reads what
//! the driver already knows (counters, new Xids, the PCIe link, the GPU count, whether the
//! driver is loaded) and the age and verdict of the last full run, judges it with the same
//! rules as a run's verdict, and says the most serious problem in one line with a stable
//! fault code, e.g. `GPU1 GPU-2222...: ECC uncorrectable +2 [KILN-MEM-002]`.
//!
//! Fault events (an Xid, ECC growth, a failed run) stay open in the state file until a
//! person clears them (`--clear`) or a full run passes on that GPU after them: a scheduler
//! must not un-drain a node by itself because the event scrolled past.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::evidence::{parse_utc_timestamp, utc_timestamp};
use crate::finding::{Class, Finding, Severity};
use crate::inventory::{InventoryGpu, System};
use crate::telemetry::record::{Reading, Readings, TelemetryData, XidEvent};
use crate::telemetry::summary::{GAUGES, PhaseTelemetry, Stat};
use crate::telemetry::{Source, cause, signals};
use crate::verdict::{DeviceReport, Setup, exit_code};
use crate::verdict::{rules, thresholds::Thresholds};

/// What `kiln health` is asked to check.
#[derive(Debug, Clone, Default)]
pub struct HealthOptions {
    /// The number of GPUs the node should have.
    pub expect_gpus: Option<usize>,
    /// Where positions, counters and open faults are kept between checks (none: every Xid
    /// since boot counts, counters are judged as they stand, and nothing stays open).
    pub state: Option<PathBuf>,
    /// The directory holding full runs (`kiln run --out` folders).
    pub runs: Option<PathBuf>,
    /// The last full run must be younger than this, and its verdict a pass.
    pub max_age: Option<Duration>,
    /// A recorded telemetry file to read instead of the live sources (tests, and checking
    /// a recording).
    pub replay: Option<PathBuf>,
    /// Only these GPUs, by NVML index (a Slurm job's `SLURM_JOB_GPUS`); faults of the
    /// node as a whole are kept.
    pub only_nvml: Option<Vec<u32>>,
    /// Clear open faults with this code (`KILN-XID-079`) or `all` before checking,
    /// recording who and when in the state file.
    pub clear: Option<String>,
}

/// Why a check could not be made as asked: one sentence (exit 64).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct HealthError(String);

/// One problem found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// The device, by index, when the fault is one device's.
    pub gpu: Option<usize>,
    /// Its UUID (`GPU-...`), when known.
    pub uuid: Option<String>,
    /// Stable fault code (`KILN-MEM-002`).
    pub code: String,
    /// The exit code this fault asks for (1 hardware, 2 environment, 3 software, 4 could
    /// not check).
    pub exit_code: i32,
    /// What is wrong, in a few words.
    pub message: String,
    /// For a fault that stays open: when it was first seen (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_since: Option<String>,
}

impl Fault {
    /// The one-line message: device, what, code.
    pub fn line(&self) -> String {
        let who = match (self.gpu, &self.uuid) {
            (Some(i), Some(u)) => format!("GPU{i} {}: ", short_uuid(u)),
            (Some(i), None) => format!("GPU{i}: "),
            _ => String::new(),
        };
        let open = self
            .open_since
            .as_deref()
            .map(|t| format!(" (open since {t})"))
            .unwrap_or_default();
        format!("{who}{}{open} [{}]", self.message, self.code)
    }
}

fn short_uuid(uuid: &str) -> String {
    let bare = uuid.trim_start_matches("GPU-");
    format!("GPU-{}...", bare.chars().take(8).collect::<String>())
}

/// The result of a health check.
#[derive(Debug, Clone, Serialize)]
pub struct Health {
    /// The first line: the most serious fault, or that all is well; at most 256 characters.
    pub line: String,
    /// 0 healthy, 1 hardware, 2 environment, 3 software, 4 could not check.
    pub exit_code: i32,
    /// GPUs found.
    pub gpus: usize,
    /// Every fault, most serious first.
    pub faults: Vec<Fault>,
    /// What was seen that does not fail the node (a lone Xid 45, a high single-bit ECC
    /// rate): worth a look, not a drain.
    pub noted: Vec<String>,
    /// What was checked, for people: only what was read.
    pub checked: Vec<String>,
    /// What limited the check or the state (a source that could not be read, a state
    /// file that could not be saved), each said once.
    pub notes: Vec<String>,
}

/// The longest first line, as schedulers keep reasons short.
pub const LINE_MAX: usize = 256;

/// How many cleared faults the state file remembers.
const CLEARED_KEPT: usize = 200;

/// A GPU's own part of the state: its kernel-log position and counters at the last check.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct GpuState {
    /// Kernel time (µs since boot) of the newest of its Xids already reported.
    #[serde(default)]
    xid_kernel_us: u64,
    /// Its counters at the last check.
    #[serde(default)]
    counters: BTreeMap<String, f64>,
    /// Its Xids that need a reset or a reboot, by code: the resets seen since each first
    /// came, so that one that comes back after two is known for what it is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    xid_resets: BTreeMap<u32, XidHistory>,
}

/// One Xid code's history on one GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct XidHistory {
    /// Resets (or reboots) of the GPU seen since the code first came.
    resets: u32,
    /// When it last came (UTC).
    last_seen_utc: String,
}

/// Resets after which an Xid that needs one is the hardware's: it came back twice after
/// the cure its own catalogue row prescribes (gpud's policy, REFERENCE.md §6).
const RESETS_BEFORE_INSPECTION: u32 = 2;

/// How long an Xid's history is kept after it last came.
const XID_HISTORY_KEPT: Duration = Duration::from_secs(14 * 24 * 3600);

/// Whether the GPU was reset (or the node rebooted) since the last check: a new boot, a
/// count since driver load that went back (a reset clears the volatile ECC counts and the
/// energy), or a recovery action the driver asked for that is no longer asked.
fn reset_since(now: &Readings, before: Option<&GpuState>, rebooted: bool) -> bool {
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
fn escalate(
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
struct OpenFault {
    /// The GPU's key (`GPU-...` UUID, else PCI address, else `gpu<N>`; `node` for the
    /// node as a whole).
    key: String,
    /// The fault as it was reported.
    fault: Fault,
    /// When it was first seen (UTC).
    since_utc: String,
}

/// A cleared fault, for the record.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Cleared {
    key: String,
    code: String,
    message: String,
    since_utc: String,
    cleared_utc: String,
    /// Who (`--clear` by a user) or what (a passing run) cleared it.
    by: String,
}

/// Kept between checks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    /// The boot the kernel-log positions belong to: after a reboot they start over.
    #[serde(default)]
    boot_id: Option<String>,
    /// Per GPU key, and `node` for Xids no GPU can be tied to.
    #[serde(default)]
    gpus: BTreeMap<String, GpuState>,
    /// Faults that stay until cleared.
    #[serde(default)]
    open: Vec<OpenFault>,
    /// The most recent clearings.
    #[serde(default)]
    cleared: Vec<Cleared>,
    /// Before per-GPU state (state files of earlier kilns): one position for all GPUs.
    #[serde(default, skip_serializing)]
    xid_kernel_us: u64,
    /// Before per-GPU state: counters per UUID.
    #[serde(default, skip_serializing)]
    counters: BTreeMap<String, BTreeMap<String, f64>>,
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
const NODE: &str = "node";

/// What the sources said, per device.
#[derive(Default)]
struct Seen {
    identity: BTreeMap<usize, Readings>,
    gauges: BTreeMap<usize, Readings>,
    counters: BTreeMap<usize, Readings>,
    xids: Vec<(Option<usize>, XidEvent)>,
    causes: Vec<String>,
    notes: Vec<String>,
}

fn read_sources(sources: &mut [Box<dyn Source>], replay: bool) -> Seen {
    let mut seen = Seen::default();
    let take = |seen: &mut Seen, records: Vec<(Option<usize>, TelemetryData)>| {
        for (device, data) in records {
            match (device, data) {
                (Some(d), TelemetryData::Identity { fields }) => {
                    seen.identity.entry(d).or_default().extend(fields);
                }
                (Some(d), TelemetryData::Sample { readings }) => {
                    seen.gauges.entry(d).or_default().extend(readings);
                }
                (d, TelemetryData::Xid { xid }) => seen.xids.push((d, xid)),
                (_, TelemetryData::Unavailable { message, cause, .. }) => {
                    seen.causes.extend(cause);
                    seen.notes.push(message);
                }
                _ => {}
            }
        }
    };
    for s in sources.iter_mut() {
        let start = s.start();
        take(&mut seen, start);
    }
    for s in sources.iter_mut() {
        // A recording is read to its end: all of it is "since the last check".
        let rounds = if replay { 100_000 } else { 1 };
        for _ in 0..rounds {
            let tick = s.sample();
            if tick.is_empty() && replay {
                break;
            }
            take(&mut seen, tick);
        }
        loop {
            let snap = s.snapshot();
            if snap.is_empty() {
                break;
            }
            for (d, counters) in snap {
                seen.counters.entry(d).or_default().extend(counters);
            }
            if !replay {
                break;
            }
        }
    }
    seen
}

fn number(r: Option<&Readings>, key: &str) -> Option<f64> {
    r.and_then(|r| crate::telemetry::reading::number(r, key))
}

fn text<'a>(r: Option<&'a Readings>, key: &str) -> Option<&'a str> {
    r.and_then(|r| crate::telemetry::reading::text(r, key))
}

/// One GPU as the check sees it.
#[derive(Debug, Clone, Default)]
struct Gpu {
    index: usize,
    name: String,
    /// `GPU-...`, when known.
    uuid: Option<String>,
    pci_address: Option<String>,
    vendor_id: Option<u32>,
    nvml_index: Option<u32>,
}

impl Gpu {
    /// Its key in the state file.
    fn key(&self) -> String {
        self.uuid
            .clone()
            .or_else(|| self.pci_address.clone())
            .unwrap_or_else(|| format!("gpu{}", self.index))
    }
}

/// The sources to read, the machine's GPUs, and what cannot be read.
struct Opened {
    sources: Vec<Box<dyn Source>>,
    gpus: Vec<Gpu>,
    /// The inventory the GPUs come from (empty for a recording).
    inventory: Vec<InventoryGpu>,
    notes: Vec<String>,
}

fn open(opts: &HealthOptions, system: &System) -> Opened {
    match &opts.replay {
        Some(path) => match crate::telemetry::replay::ReplaySource::open(path) {
            Ok(r) => Opened {
                sources: vec![Box::new(r)],
                gpus: Vec::new(),
                inventory: Vec::new(),
                notes: Vec::new(),
            },
            Err(e) => Opened {
                sources: Vec::new(),
                gpus: Vec::new(),
                inventory: Vec::new(),
                notes: vec![e.to_string()],
            },
        },
        None => {
            // The GPUs the machine has (NVML, sysfs), whether or not Vulkan can see them:
            // a node whose GPUs only Vulkan misses still has them, and still has counters.
            let inventory = crate::inventory::read(system);
            let gpus: Vec<Gpu> = inventory
                .gpus
                .iter()
                .enumerate()
                .map(|(index, g)| Gpu {
                    index,
                    name: g.name.clone(),
                    uuid: g.uuid.clone(),
                    pci_address: g.pci_address.clone(),
                    vendor_id: Some(g.vendor_id),
                    nvml_index: g.nvml_index,
                })
                .collect();
            let targets = crate::inventory::targets(&inventory.gpus);
            let (sources, mut notes) = crate::telemetry::live_sources_for(&targets);
            notes.extend(inventory.notes.iter().cloned());
            Opened {
                sources,
                gpus,
                inventory: inventory.gpus,
                notes,
            }
        }
    }
}

/// The inventory's NVIDIA GPUs that the nvidia driver holds on the PCI bus but a working
/// NVML does not list: fallen off the bus, or failed to initialise.
fn unreachable(inventory: &[InventoryGpu], nvml_works: bool) -> Vec<usize> {
    if !nvml_works {
        return Vec::new();
    }
    inventory
        .iter()
        .enumerate()
        .filter(|(_, g)| {
            g.vendor_id == 0x10de
                && g.kernel_driver.as_deref() == Some("nvidia")
                && !g.seen_by.iter().any(|s| s == "nvml")
        })
        .map(|(i, _)| i)
        .collect()
}

/// How a finding of the verdict's rules reads in `kiln health`: its stable fault code,
/// and whether it is an event that stays open until cleared (a state that is read anew at
/// every check is not kept). Findings not listed here (throttling at one idle sample,
/// other tenants of a busy node) are not the node check's to judge.
fn fault_code(finding: &Finding) -> Option<(String, bool)> {
    let fixed = |code: &str, sticky: bool| Some((code.to_owned(), sticky));
    match finding.code.as_str() {
        "ROW_REMAP_FAILURE" => fixed("KILN-MEM-001", false),
        "ECC_UNCORRECTABLE" => fixed("KILN-MEM-002", true),
        "ROW_REMAP_PENDING" => fixed("KILN-MEM-003", false),
        "RETIRED_PAGES" => fixed("KILN-MEM-004", true),
        "RAS_UNCORRECTABLE" => fixed("KILN-RAS-001", true),
        "PCIE_LINK_DEGRADED" => fixed("KILN-PCI-001", false),
        "PCIE_AER_ERRORS" => fixed("KILN-PCI-002", true),
        "DRIVER_NOT_LOADED" => fixed("KILN-DRV-001", false),
        "DRIVER_VERSION_MISMATCH" => fixed("KILN-DRV-002", false),
        "RECOVERY_ACTION_PENDING" => fixed("KILN-DRV-003", false),
        "ECC_MODE_PENDING" => fixed("KILN-CFG-001", false),
        "ROW_REMAP_BANKS_LOW" => fixed("KILN-MEM-005", false),
        "SRAM_THRESHOLD_EXCEEDED" => fixed("KILN-MEM-006", false),
        "NVLINK_ERRORS" => fixed("KILN-NVL-001", true),
        "NVLINK_DOWN" => fixed("KILN-NVL-002", false),
        code if code.starts_with("XID_") || code == "AUX_POWER_MISSING" => {
            let xid = finding
                .evidence
                .get("worst_code")
                .and_then(|c| c.as_u64())?;
            Some((format!("KILN-XID-{xid:03}"), true))
        }
        _ => None,
    }
}

fn class_exit(class: Class) -> i32 {
    match class {
        Class::Hardware => exit_code::HARDWARE,
        Class::Environment => exit_code::ENVIRONMENT,
        Class::Software => exit_code::SOFTWARE,
        _ => exit_code::INCONCLUSIVE,
    }
}

/// One sample as a phase's gauge statistics (min = median = max).
fn gauges_of(readings: Option<&Readings>) -> BTreeMap<String, Stat> {
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
fn growth(now: &Readings, before: Option<&GpuState>) -> BTreeMap<String, f64> {
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

/// The boot this kernel log belongs to.
fn boot_id(system: &System) -> Option<String> {
    let path = system.root.join("proc/sys/kernel/random/boot_id");
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Who is clearing a fault, for the record.
fn who() -> String {
    ["SUDO_USER", "USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown user".into())
}

/// A group of readings a node check judges, named for people.
struct Group {
    name: &'static str,
    /// Whether a reading is the group's.
    holds: fn(&str) -> bool,
    /// Read from the gauges rather than the counters.
    gauges: bool,
}

/// Every group, in the order they are said.
const GROUPS: [Group; 8] = [
    Group {
        name: "ECC",
        holds: |k| k.starts_with("ecc_"),
        gauges: false,
    },
    Group {
        name: "row remapping",
        holds: |k| k.starts_with("remap"),
        gauges: false,
    },
    Group {
        name: "retired pages",
        holds: |k| k.starts_with("retired_pages"),
        gauges: false,
    },
    Group {
        name: "SRAM",
        holds: |k| k.starts_with("sram_"),
        gauges: false,
    },
    Group {
        name: "RAS",
        holds: |k| k.starts_with("ras_"),
        gauges: false,
    },
    Group {
        name: "NVLink",
        holds: |k| signals::nvlink_part(k).is_some(),
        gauges: false,
    },
    Group {
        name: "PCIe link",
        holds: |k| {
            ["pcie_gen", "pcie_width", "pcie_speed"]
                .iter()
                .any(|p| k.starts_with(p))
        },
        gauges: true,
    },
    Group {
        name: "recovery action",
        holds: |k| k == signals::RECOVERY_ACTION.name,
        gauges: false,
    },
];

/// The groups that tell a GPU's memory health: one that the card has but that cannot be
/// read leaves the GPU unchecked.
const MEMORY_GROUPS: [&str; 3] = ["ECC", "row remapping", "retired pages"];

/// How a group of readings was read.
#[derive(Debug, Clone, PartialEq)]
enum GroupRead {
    /// At least one of its readings is a number.
    Read,
    /// Every reading says the card does not have it.
    NotSupported,
    /// None could be read, for this reason (`no_permission`, `gpu_lost`, ...).
    Failed(String),
    /// No source offered it.
    Absent,
}

fn group_read(readings: Option<&Readings>, belongs: fn(&str) -> bool) -> GroupRead {
    let mut read = GroupRead::Absent;
    for (_, r) in readings.into_iter().flatten().filter(|(k, _)| belongs(k)) {
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

/// Why a GPU has no counters at all, in words: NVML's own reason, a GPU NVML answers lost
/// for, or no NVML device for it.
fn no_counters_why(seen: &Seen, gpu: usize) -> String {
    let lost = seen
        .xids
        .iter()
        .any(|(d, x)| *d == Some(gpu) && x.code == Some(79));
    if lost {
        return "the GPU is lost: NVML answers GPU_IS_LOST".into();
    }
    let said = |c: &str| seen.causes.iter().any(|x| x == c);
    let why = [
        (cause::NVML_MISSING, "NVML not available"),
        (
            cause::DRIVER_NOT_LOADED,
            "the NVIDIA kernel driver is not loaded",
        ),
        (
            cause::VERSION_MISMATCH,
            "NVML and the kernel driver differ in version",
        ),
        (cause::NO_PERMISSION, "NVML refused access (no permission)"),
        (cause::NVML_FAILED, "NVML failed to start"),
        (
            cause::NO_NVML_DEVICE,
            "NVML has no device with this GPU's UUID or PCI address",
        ),
    ]
    .into_iter()
    .find(|(c, _)| said(c));
    why.map_or("NVML read none", |(_, w)| w).to_owned()
}

/// Runs the check.
pub fn check(opts: &HealthOptions) -> Result<Health, HealthError> {
    let system = System::from_env();
    let mut checked = Vec::new();
    let mut noted = Vec::new();
    let Opened {
        mut sources,
        gpus: listed,
        inventory,
        mut notes,
    } = open(opts, &system);
    let seen = read_sources(&mut sources, opts.replay.is_some());
    notes.extend(seen.notes.iter().cloned());
    // GPUs: the machine's inventory, or in a recording those it names.
    let mut gpus: BTreeMap<usize, Gpu> = listed.into_iter().map(|g| (g.index, g)).collect();
    for (d, fields) in &seen.identity {
        let g = gpus.entry(*d).or_insert_with(|| Gpu {
            index: *d,
            ..Gpu::default()
        });
        if let Some(u) = text(Some(fields), signals::UUID.name) {
            g.uuid = Some(u.to_owned());
        }
        if let Some(n) = text(Some(fields), signals::NAME.name) {
            g.name = n.to_owned();
        }
        if let Some(i) = number(Some(fields), signals::NVML_INDEX.name) {
            g.nvml_index = Some(i as u32);
        }
    }
    // A job's GPUs, by NVML index: an index the node does not have is a usage error; with
    // no index readable, nothing can be chosen, every GPU is checked, and that is said.
    let mut in_scope: Vec<usize> = gpus.keys().copied().collect();
    let mut faults = Vec::new();
    if let Some(only) = &opts.only_nvml {
        let known: Vec<u32> = gpus.values().filter_map(|g| g.nvml_index).collect();
        if known.is_empty() {
            faults.push(Fault {
                gpu: None,
                uuid: None,
                code: "KILN-NOT-003".into(),
                exit_code: exit_code::INCONCLUSIVE,
                message:
                    "--gpus names NVML indices, and no GPU's could be read: every GPU was checked"
                        .into(),
                open_since: None,
            });
        } else {
            if let Some(missing) = only.iter().find(|o| !known.contains(o)) {
                let mut have = known.clone();
                have.sort();
                return Err(HealthError(format!(
                    "--gpus {missing}: this node has no GPU with NVML index {missing} (it has {})",
                    have.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            in_scope.retain(|g| gpus[g].nvml_index.is_some_and(|i| only.contains(&i)));
        }
    }
    // The state: per GPU, after a reboot from the start of the new boot's log.
    let mut state = State::default();
    if let Some(path) = opts.state.as_deref()
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
    let keys: Vec<String> = gpus.values().map(Gpu::key).collect();
    state.migrate(&keys);
    let boot = boot_id(&system);
    let rebooted = boot.is_some() && state.boot_id.is_some() && state.boot_id != boot;
    if rebooted {
        for g in state.gpus.values_mut() {
            g.xid_kernel_us = 0;
        }
        notes.push("a new boot since the last check: its kernel log read from the start".into());
    }
    state.boot_id = boot.or(state.boot_id.take());
    if let Some(code) = &opts.clear {
        clear(&mut state, code, opts, &gpus, &in_scope)?;
    }
    let now_utc = utc_timestamp(SystemTime::now());
    let mut events: Vec<(String, Fault)> = Vec::new();
    // The driver.
    let caused = |c: &str| seen.causes.iter().any(|x| x == c);
    let nvml_works = !seen
        .causes
        .iter()
        .any(|c| cause::NVML_DOWN.contains(&c.as_str()));
    for i in unreachable(&inventory, nvml_works) {
        faults.push(Fault {
            gpu: Some(i),
            uuid: None,
            code: "KILN-CNT-002".into(),
            exit_code: exit_code::HARDWARE,
            message: format!(
                "{} is on the PCI bus but NVML cannot reach it (fallen off the bus or failed to initialise: see the kernel log)",
                inventory[i].pci_address.as_deref().unwrap_or("a GPU")
            ),
            open_since: None,
        });
    }
    // The count.
    if let Some(want) = opts.expect_gpus {
        if gpus.len() < want {
            faults.push(node_fault(
                "KILN-CNT-001",
                exit_code::HARDWARE,
                format!("{} of {want} GPUs found", gpus.len()),
            ));
        }
        checked.push(format!("GPU count (expect {want})"));
    }
    if gpus.is_empty() && opts.expect_gpus.is_none() {
        // The reason without the list of signals it costs (`...: no temperature, ...`).
        let why = notes
            .first()
            .map(|n| match (n.find("): no "), n.find(": no ")) {
                (Some(i), _) => n[..=i].to_owned(),
                (None, Some(i)) => n[..i].to_owned(),
                _ => n.clone(),
            })
            .unwrap_or_else(|| "no GPU found".into());
        faults.push(node_fault(
            "KILN-NOT-001",
            exit_code::INCONCLUSIVE,
            format!("no GPU to check: {why}"),
        ));
    }
    // Each GPU in scope, judged by the verdict's own rules on what was read now.
    let thresholds = Thresholds::default();
    let mut node_findings: Vec<Finding> = Vec::new();
    let mut read_groups = std::collections::BTreeSet::new();
    let mut unsupported_groups = std::collections::BTreeSet::new();
    for &g in &in_scope {
        let gpu = &gpus[&g];
        let key = gpu.key();
        let before = state.gpus.get(&key).cloned();
        let counters = seen.counters.get(&g);
        let vendor_counters = counters.is_some_and(|c| c.values().any(|v| v.number().is_some()));
        let readings = seen.gauges.get(&g).is_some_and(|r| !r.is_empty());
        let nvidia = gpu.vendor_id == Some(0x10de) || gpu.uuid.is_some();
        let groups: Vec<(&str, GroupRead)> = GROUPS
            .iter()
            .map(|group| {
                let from = if group.gauges {
                    seen.gauges.get(&g)
                } else {
                    counters
                };
                (group.name, group_read(from, group.holds))
            })
            .collect();
        for (name, read) in &groups {
            match read {
                GroupRead::Read => read_groups.insert(*name),
                GroupRead::NotSupported => unsupported_groups.insert(*name),
                _ => false,
            };
        }
        // Memory health the card has but that could not be read is not checked: named,
        // each with why, and the GPU could not be checked.
        let failed: Vec<String> = groups
            .iter()
            .filter(|(name, _)| MEMORY_GROUPS.contains(name))
            .filter_map(|(name, read)| match read {
                GroupRead::Failed(why) => Some(format!("{name} ({})", why.replace('_', " "))),
                _ => None,
            })
            .collect();
        let none = groups
            .iter()
            .filter(|(name, _)| MEMORY_GROUPS.contains(name))
            .all(|(_, read)| *read == GroupRead::Absent);
        let message = if !failed.is_empty() {
            Some(format!("could not read {}", failed.join(", ")))
        } else if nvidia && (none || !vendor_counters) {
            let unsupported = !none
                && groups
                    .iter()
                    .filter(|(name, _)| MEMORY_GROUPS.contains(name))
                    .all(|(_, read)| *read != GroupRead::Read);
            let why = if unsupported {
                "NVML answers not supported for every counter and sensor".to_owned()
            } else {
                no_counters_why(&seen, g)
            };
            Some(format!("no ECC, remap or retired-page counters ({why})"))
        } else if !nvidia && !vendor_counters && !readings {
            Some("nothing readable for this GPU (no vendor counters or sensors)".into())
        } else {
            None
        };
        if let Some(message) = message {
            faults.push(Fault {
                gpu: Some(g),
                uuid: gpu.uuid.clone(),
                code: "KILN-NOT-002".into(),
                exit_code: exit_code::INCONCLUSIVE,
                message,
                open_since: None,
            });
        }
        let position = before.as_ref().map_or(0, |b| b.xid_kernel_us);
        let (xids, newest) = new_xids(&seen.xids, Some(g), position);
        let now_counters = counters.cloned().unwrap_or_default();
        // An Xid that a reset should cure, back after two: the card's, not the software's.
        let mut xid_resets = before
            .as_ref()
            .map(|b| b.xid_resets.clone())
            .unwrap_or_default();
        let codes_now: Vec<u32> = xids
            .iter()
            .filter_map(|x| crate::verdict::xid::code_of(x.code, &x.message))
            .collect();
        let reset = reset_since(&now_counters, before.as_ref(), rebooted);
        let back = escalate(&mut xid_resets, &codes_now, reset, &now_utc);
        let mut phase = health_phase(g, xids);
        phase.samples = usize::from(readings);
        phase.gauges = gauges_of(seen.gauges.get(&g));
        phase.counter_deltas = growth(&now_counters, before.as_ref());
        phase.counters_after = now_counters
            .iter()
            .filter_map(|(k, v)| v.number().map(|v| (k.clone(), v)))
            .collect();
        let setup = Setup {
            vendor_id: gpu.vendor_id.unwrap_or(0),
            vulkan_driver_version: String::new(),
            identity: seen.identity.get(&g).cloned().unwrap_or_default(),
            source_problems: seen.causes.clone(),
            // A node check starts no worker: whose an Xid is, is not known here.
            kiln_pids: Vec::new(),
        };
        let device = DeviceReport::observed(
            g,
            &gpu.name,
            gpu.uuid.as_deref().unwrap_or(""),
            gpu.pci_address.clone(),
            setup,
            phase,
        );
        for f in rules::judge(&device, &thresholds) {
            // The installation is the node's, said once.
            if f.code.starts_with("DRIVER_") {
                if !node_findings.iter().any(|n| n.code == f.code) {
                    node_findings.push(f);
                }
                continue;
            }
            place(&f, Some(gpu), &key, &mut faults, &mut events, &mut noted);
        }
        // Said instead of the Xid's own fault: the hardware's, whatever its catalogue row.
        for (code, resets) in back {
            let meaning = crate::verdict::xid::lookup(code).map_or("", |x| x.meaning);
            let fault = Fault {
                gpu: Some(g),
                uuid: gpu.uuid.clone(),
                code: format!("KILN-XID-{code:03}"),
                exit_code: exit_code::HARDWARE,
                message: format!(
                    "Xid {code} ({meaning}) came back after {resets} resets that should have cured it: the GPU, not the software; inspect the hardware"
                ),
                open_since: None,
            };
            let same = |f: &Fault| f.gpu == Some(g) && f.code == fault.code;
            faults.retain(|f| !same(f));
            events.retain(|(_, f)| !same(f));
            noted.retain(|n| !n.contains(&format!("[{}]", fault.code)));
            events.push((key.clone(), fault.clone()));
            faults.push(fault);
        }
        let mut kept = GpuState {
            xid_kernel_us: position.max(newest),
            counters: BTreeMap::new(),
            xid_resets,
        };
        for (k, v) in &now_counters {
            if let Some(v) = v.number() {
                kept.counters.insert(k.clone(), v);
            }
        }
        state.gpus.insert(key, kept);
    }
    // Driver faults once, and Xids no GPU can be tied to, for the node as a whole.
    for f in &node_findings {
        place(f, None, NODE, &mut faults, &mut events, &mut noted);
    }
    if caused(cause::DRIVER_NOT_LOADED)
        && !node_findings.iter().any(|f| f.code == "DRIVER_NOT_LOADED")
    {
        faults.push(node_fault(
            "KILN-DRV-001",
            exit_code::SOFTWARE,
            "NVIDIA kernel driver not loaded".into(),
        ));
    }
    if caused(cause::VERSION_MISMATCH)
        && !node_findings
            .iter()
            .any(|f| f.code == "DRIVER_VERSION_MISMATCH")
    {
        faults.push(node_fault(
            "KILN-DRV-002",
            exit_code::SOFTWARE,
            "NVML and kernel driver versions differ (reboot after the upgrade)".into(),
        ));
    }
    checked.push("driver".to_owned());
    if opts.only_nvml.is_none() {
        let position = state.gpus.get(NODE).map_or(0, |n| n.xid_kernel_us);
        let (xids, newest) = new_xids(&seen.xids, None, position);
        if !xids.is_empty() {
            let node = DeviceReport::observed(
                usize::MAX,
                "node",
                "",
                None,
                Setup::default(),
                health_phase(usize::MAX, xids),
            );
            for f in rules::judge(&node, &thresholds) {
                place(&f, None, NODE, &mut faults, &mut events, &mut noted);
            }
        }
        state.gpus.entry(NODE.into()).or_default().xid_kernel_us = position.max(newest);
    }
    // Only what was read is checked; what the cards do not have is said as such.
    let in_order = |set: &std::collections::BTreeSet<&str>| -> Vec<&str> {
        GROUPS
            .iter()
            .map(|g| g.name)
            .filter(|n| set.contains(n))
            .collect()
    };
    let read_groups = in_order(&read_groups);
    if !read_groups.is_empty() {
        checked.push(read_groups.join(", "));
    }
    let unsupported: Vec<&str> = in_order(&unsupported_groups)
        .into_iter()
        .filter(|n| !read_groups.contains(n))
        .collect();
    if !unsupported.is_empty() {
        notes.push(format!(
            "not supported by the card: {}",
            unsupported.join(", ")
        ));
    }
    checked.push(if position_known(&state) {
        "Xids since the last check".to_owned()
    } else {
        "Xids since boot".to_owned()
    });
    // The last full run.
    let runs_dir = opts
        .runs
        .clone()
        .unwrap_or_else(|| PathBuf::from("kiln-runs"));
    if let Some(max_age) = opts.max_age {
        match last_run(&runs_dir) {
            None => faults.push(node_fault(
                "KILN-RUN-003",
                exit_code::INCONCLUSIVE,
                format!("no full run in {}", runs_dir.display()),
            )),
            Some(run) => {
                if run.age > max_age {
                    faults.push(node_fault(
                        "KILN-RUN-001",
                        exit_code::INCONCLUSIVE,
                        format!(
                            "last full run is {:.0} h old (max {:.0} h)",
                            run.age.as_secs_f64() / 3600.0,
                            max_age.as_secs_f64() / 3600.0
                        ),
                    ));
                }
                let code = run.report["exit_code"].as_i64().unwrap_or(4) as i32;
                if code != exit_code::HEALTHY {
                    let worst = run.report["devices"]
                        .as_array()
                        .and_then(|d| d.iter().find(|d| d["result"] != "pass"));
                    let fault = Fault {
                        gpu: worst.and_then(|d| d["index"].as_u64()).map(|i| i as usize),
                        uuid: None,
                        code: "KILN-RUN-002".into(),
                        exit_code: code,
                        message: format!(
                            "last full run: {}",
                            worst
                                .and_then(|d| d["reason"].as_str())
                                .unwrap_or("not a pass")
                        ),
                        open_since: None,
                    };
                    // The node's: a run that passes after it clears it.
                    faults.push(fault.clone());
                    events.push((NODE.into(), fault));
                }
            }
        }
        checked.push(format!("last full run in {}", runs_dir.display()));
    }
    // Events join the open faults; a full run that passed on the GPU since clears them.
    let opened_before: Vec<(String, String)> = state
        .open
        .iter()
        .map(|o| (o.key.clone(), o.fault.code.clone()))
        .collect();
    for (key, fault) in events {
        if !state
            .open
            .iter()
            .any(|o| o.key == key && o.fault.code == fault.code)
        {
            state.open.push(OpenFault {
                key,
                fault,
                since_utc: now_utc.clone(),
            });
        }
    }
    clear_by_passing_runs(&mut state, &runs_dir, &now_utc);
    let scope_keys: Vec<String> = in_scope.iter().map(|g| gpus[g].key()).collect();
    for o in &state.open {
        if o.key != NODE && !scope_keys.contains(&o.key) {
            continue;
        }
        if !opened_before.contains(&(o.key.clone(), o.fault.code.clone())) {
            continue; // new in this check: already among the faults, as seen now
        }
        // Still open from before, seen again now or not: said with its date.
        match faults
            .iter_mut()
            .find(|f| f.code == o.fault.code && f.gpu == o.fault.gpu)
        {
            Some(f) => f.open_since = Some(o.since_utc.clone()),
            None => {
                let mut f = o.fault.clone();
                f.open_since = Some(o.since_utc.clone());
                faults.push(f);
            }
        }
    }
    if !state.open.is_empty() {
        notes.push(format!(
            "{} open fault(s) stay until `kiln health --clear CODE|all` or a passing full run",
            state.open.len()
        ));
    }
    if let Some(path) = &opts.state {
        state.cleared.truncate(CLEARED_KEPT);
        if let Err(e) = crate::evidence::write_json_atomic(path, &state) {
            // The next check then reports these Xids again: better than missing new ones.
            notes.push(format!("state not saved ({e})"));
        }
    }
    if let Some(only) = &opts.only_nvml {
        checked.push(format!(
            "only GPUs {}",
            only.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    // Most serious first: hardware, environment, software, could not check; within one,
    // the counters' direct evidence before the kernel log's lines, the link, the driver.
    faults.sort_by_key(|f| (f.exit_code, kind_rank(&f.code)));
    let exit = faults.first().map_or(exit_code::HEALTHY, |f| f.exit_code);
    let mut line = match faults.first() {
        None => format!(
            "OK: {} healthy [KILN-OK-000]",
            crate::text::count(in_scope.len() as u64, "GPU")
        ),
        Some(f) if faults.len() > 1 => format!("{} (+{} more)", f.line(), faults.len() - 1),
        Some(f) => f.line(),
    };
    if line.chars().count() > LINE_MAX {
        let code = faults
            .first()
            .map(|f| format!(" [{}]", f.code))
            .unwrap_or_default();
        let keep = LINE_MAX - code.chars().count() - 3;
        line = format!("{}...{code}", line.chars().take(keep).collect::<String>());
    }
    let mut said = std::collections::BTreeSet::new();
    notes.retain(|n| said.insert(n.clone()));
    Ok(Health {
        line,
        exit_code: exit,
        gpus: gpus.len(),
        faults,
        noted,
        checked,
        notes,
    })
}

/// The order of fault kinds within one exit code.
fn kind_rank(code: &str) -> usize {
    [
        "KILN-MEM", "KILN-RAS", "KILN-CNT", "KILN-XID", "KILN-NVL", "KILN-PCI", "KILN-DRV",
        "KILN-CFG", "KILN-RUN", "KILN-NOT",
    ]
    .iter()
    .position(|k| code.starts_with(k))
    .unwrap_or(usize::MAX)
}

/// The one phase a health check judges: what was read now, and the Xids since the last
/// check.
fn health_phase(device: usize, seen: Vec<XidEvent>) -> PhaseTelemetry {
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
        other_processes: Vec::new(),
        processes_first_ms: BTreeMap::new(),
    }
}

/// A fault of the node as a whole.
fn node_fault(code: &str, exit: i32, message: String) -> Fault {
    Fault {
        gpu: None,
        uuid: None,
        code: code.into(),
        exit_code: exit,
        message,
        open_since: None,
    }
}

/// True when the state holds a kernel-log position from an earlier check.
fn position_known(state: &State) -> bool {
    state.gpus.values().any(|g| g.xid_kernel_us > 0)
}

/// The Xids of `device` (None: those tied to no GPU) newer than `position`, and the
/// newest kernel time among them.
fn new_xids(
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

/// Puts a finding where it belongs: a fault now (a state read at every check), an event
/// that stays open, or a note (minor: worth a look, not a drain).
fn place(
    f: &Finding,
    gpu: Option<&Gpu>,
    key: &str,
    faults: &mut Vec<Fault>,
    events: &mut Vec<(String, Fault)>,
    noted: &mut Vec<String>,
) {
    let Some((code, sticky)) = fault_code(f) else {
        return;
    };
    let who = gpu.map_or(String::new(), |g| format!("GPU{} ", g.index));
    if f.severity > Severity::Major {
        noted.push(format!("{who}{} [{code}]", f.summary));
        return;
    }
    let fault = Fault {
        gpu: gpu.map(|g| g.index),
        uuid: gpu.and_then(|g| g.uuid.clone()),
        code,
        exit_code: class_exit(f.class),
        message: f.summary.clone(),
        open_since: None,
    };
    if sticky {
        events.push((key.to_owned(), fault.clone()));
    }
    faults.push(fault);
}

/// `--clear CODE|all`: removes the matching open faults (of the `--gpus` given, else of
/// every GPU and the node), recording who cleared what and when.
fn clear(
    state: &mut State,
    code: &str,
    opts: &HealthOptions,
    gpus: &BTreeMap<usize, Gpu>,
    in_scope: &[usize],
) -> Result<(), HealthError> {
    if opts.state.is_none() {
        return Err(HealthError(
            "--clear needs --state FILE: open faults live in the state file".into(),
        ));
    }
    let all = code.eq_ignore_ascii_case("all");
    let code = code.trim().to_ascii_uppercase();
    if !all && !code.starts_with("KILN-") {
        return Err(HealthError(format!(
            "--clear {}: not a fault code (KILN-XID-079, ...) or `all`",
            crate::text::quote(&code)
        )));
    }
    let keys: Vec<String> = in_scope.iter().map(|g| gpus[g].key()).collect();
    let now = utc_timestamp(SystemTime::now());
    let by = format!("--clear by {}", who());
    let (gone, kept): (Vec<OpenFault>, Vec<OpenFault>) =
        std::mem::take(&mut state.open).into_iter().partition(|o| {
            (all || o.fault.code == code) && (opts.only_nvml.is_none() || keys.contains(&o.key))
        });
    state.open = kept;
    for o in gone {
        state.record_cleared(o, &now, by.clone());
    }
    Ok(())
}

/// Clears the open faults of each GPU on which a full run passed after the fault was seen.
fn clear_by_passing_runs(state: &mut State, runs: &Path, now: &str) {
    if state.open.is_empty() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    // (start, GPU key, run) of every device that passed a full run, by UUID and by PCI
    // address; and the node's key for a run that passed as a whole.
    let mut passes: Vec<(String, String, String)> = Vec::new();
    for entry in entries.flatten() {
        let Some(run) = read_run(&entry.path()) else {
            continue;
        };
        if run.report["exit_code"] == 0 {
            passes.push((run.started_utc.clone(), NODE.into(), run.id.clone()));
        }
        for d in run.report["devices"].as_array().into_iter().flatten() {
            if d["result"] != "pass" {
                continue;
            }
            let uuid = d["uuid"]
                .as_str()
                .filter(|u| !u.is_empty())
                .map(|u| format!("GPU-{u}"));
            let pci = d["pci_address"].as_str().map(str::to_owned);
            for id in uuid.into_iter().chain(pci) {
                passes.push((
                    run.started_utc.clone(),
                    id.to_ascii_lowercase(),
                    run.id.clone(),
                ));
            }
        }
    }
    let (gone, kept): (Vec<OpenFault>, Vec<OpenFault>) =
        std::mem::take(&mut state.open).into_iter().partition(|o| {
            passes
                .iter()
                .any(|(start, id, _)| *id == o.key.to_ascii_lowercase() && *start > o.since_utc)
        });
    state.open = kept;
    for o in gone {
        let run = passes
            .iter()
            .find(|(start, id, _)| *id == o.key.to_ascii_lowercase() && *start > o.since_utc)
            .map(|(_, _, run)| run.clone())
            .unwrap_or_default();
        state.record_cleared(o, now, format!("a full run that passed after it ({run})"));
    }
}

/// A full run as the check reads it: when it started (its manifest), its report, and how
/// old it is.
struct Run {
    id: String,
    started_utc: String,
    age: Duration,
    report: serde_json::Value,
}

fn read_run(dir: &Path) -> Option<Run> {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).ok()?).ok()?;
    let started_utc = manifest["started_utc"].as_str()?.to_owned();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).ok()?).ok()?;
    let age = parse_utc_timestamp(&started_utc)
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    Some(Run {
        id: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        started_utc,
        age,
        report,
    })
}

/// The full run that started last (by its manifest, not by when a file was last written:
/// rebuilding an old run's report must not make it the latest).
fn last_run(dir: &Path) -> Option<Run> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| read_run(&e.path()))
        .max_by(|a, b| a.started_utc.cmp(&b.started_utc))
}

/// The check as Prometheus metrics for node_exporter's textfile collector
/// (`kiln-health.prom`): the exit code, the GPUs found, one series per open fault (with
/// dcgm-exporter's `gpu` and `UUID` labels where the fault is one GPU's) and when it ran.
pub fn metrics(h: &Health, hostname: &str, now: SystemTime) -> String {
    use crate::report::prometheus::{counted, escape, gauge};
    let host = format!("Hostname=\"{}\"", escape(hostname));
    let mut out = String::new();
    gauge(
        &mut out,
        "kiln_health_exit_code",
        "The last kiln health check's exit code: 0 healthy, 1 hardware, 2 environment, 3 software, 4 could not check.",
        &[(host.clone(), f64::from(h.exit_code))],
    );
    gauge(
        &mut out,
        "kiln_health_gpus",
        "GPUs the last kiln health check found.",
        &[(host.clone(), h.gpus as f64)],
    );
    // Two open events of one code on one GPU are one series with a count.
    let faults = counted(h.faults.iter().map(|f| {
        let mut labels = String::new();
        if let Some(g) = f.gpu {
            labels.push_str(&format!("gpu=\"{g}\","));
        }
        if let Some(u) = &f.uuid {
            labels.push_str(&format!("UUID=\"{}\",", escape(u)));
        }
        labels.push_str(&format!(
            "code=\"{}\",exit_code=\"{}\",{host}",
            escape(&f.code),
            f.exit_code
        ));
        labels
    }));
    gauge(
        &mut out,
        "kiln_health_fault",
        "Faults of the last kiln health check by code (open faults stay until cleared).",
        &faults,
    );
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    gauge(
        &mut out,
        "kiln_health_last_check_timestamp_seconds",
        "When the last kiln health check ran, in Unix seconds.",
        &[(host, secs as f64)],
    );
    out
}

/// The check for people: the first line, then every fault, what was noted and checked.
pub fn summary(h: &Health) -> String {
    let mut out = format!("{}\n", h.line);
    for f in &h.faults {
        out.push_str(&format!("fault: {}\n", f.line()));
    }
    for n in &h.noted {
        out.push_str(&format!("noted: {n}\n"));
    }
    out.push_str(&format!(
        "checked: {}; {}\n",
        crate::text::count(h.gpus as u64, "GPU"),
        h.checked.join("; ")
    ));
    for n in &h.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(address: &str, driver: &str, seen_by: &[&str]) -> InventoryGpu {
        InventoryGpu {
            pci_address: Some(address.into()),
            vendor_id: 0x10de,
            device_id: Some(0x2335),
            name: "NVIDIA H200".into(),
            uuid: None,
            nvml_index: None,
            kernel_driver: Some(driver.into()),
            mig_enabled: None,
            seen_by: seen_by.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn a_gpu_the_driver_holds_but_nvml_cannot_reach_is_named() {
        let node = vec![
            gpu("0000:19:00.0", "nvidia", &["sysfs", "nvml"]),
            gpu("0000:3b:00.0", "nvidia", &["sysfs"]),
            gpu("0000:4c:00.0", "vfio-pci", &["sysfs"]),
        ];
        assert_eq!(unreachable(&node, true), vec![1]);
        assert!(
            unreachable(&node, false).is_empty(),
            "without a working NVML nothing can be said"
        );
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
