//! `kiln health`: a node check for schedulers, in seconds and with no load. It reads what
//! the driver already knows (ECC, row remapping and retired pages, Xids since the last
//! check, the PCIe link, the GPU count, whether the driver is loaded) and the age and
//! verdict of the last full run, and says the most serious problem in one line with a
//! stable fault code, e.g. `GPU1 GPU-2222...: ECC uncorrectable +2 [KILN-MEM-002]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::inventory::InventoryGpu;
use crate::report::exit_code;
use crate::telemetry::record::{Reading, Readings, TelemetryData, XidEvent};
use crate::telemetry::{Source, Target};
use crate::verdict::findings::Class;
use crate::verdict::xid;

/// What `kiln health` is asked to check.
#[derive(Debug, Clone, Default)]
pub struct HealthOptions {
    /// The number of GPUs the node should have.
    pub expect_gpus: Option<usize>,
    /// Where the last check's Xid position and counters are kept (none: every Xid since
    /// boot counts, and counters are judged as they stand).
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
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
}

impl Fault {
    /// The one-line message: device, what, code.
    pub fn line(&self) -> String {
        let who = match (self.gpu, &self.uuid) {
            (Some(i), Some(u)) => format!("GPU{i} {}: ", short_uuid(u)),
            (Some(i), None) => format!("GPU{i}: "),
            _ => String::new(),
        };
        format!("{who}{} [{}]", self.message, self.code)
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
    /// What was checked, for people.
    pub checked: Vec<String>,
}

/// Kept between checks: where the kernel log was read to, and each GPU's counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    /// Kernel time (µs since boot) of the newest Xid already reported.
    xid_kernel_us: u64,
    /// Counters per GPU UUID.
    counters: BTreeMap<String, BTreeMap<String, f64>>,
}

/// The longest first line, as schedulers keep reasons short.
pub const LINE_MAX: usize = 256;

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
    r.and_then(|r| r.get(key)).and_then(Reading::number)
}

fn text<'a>(r: Option<&'a Readings>, key: &str) -> Option<&'a str> {
    r.and_then(|r| r.get(key)).and_then(Reading::text)
}

/// The sources to read, the machine's GPUs (index, UUID when known), and what cannot be
/// read.
struct Opened {
    sources: Vec<Box<dyn Source>>,
    gpus: Vec<(usize, Option<String>)>,
    /// The inventory the GPUs come from (empty for a recording).
    inventory: Vec<InventoryGpu>,
    notes: Vec<String>,
}

fn open(opts: &HealthOptions) -> Opened {
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
            let inventory = crate::inventory::read(&crate::inventory::System::from_env());
            let targets: Vec<Target> = inventory
                .gpus
                .iter()
                .enumerate()
                .map(|(index, g)| Target {
                    index,
                    name: g.name.clone(),
                    uuid: g
                        .uuid
                        .as_deref()
                        .map(|u| u.trim_start_matches("GPU-").to_ascii_lowercase()),
                    pci_address: g.pci_address.clone(),
                })
                .collect();
            let gpus = targets.iter().map(|t| (t.index, t.uuid.clone())).collect();
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

/// Runs the check.
pub fn check(opts: &HealthOptions) -> Health {
    let mut checked = Vec::new();
    let Opened {
        mut sources,
        gpus: gpu_devices,
        inventory,
        mut notes,
    } = open(opts);
    let seen = read_sources(&mut sources, opts.replay.is_some());
    notes.extend(seen.notes.iter().cloned());
    // GPUs: the machine's inventory, or in a recording those it names.
    let mut gpus: BTreeMap<usize, Option<String>> = gpu_devices
        .iter()
        .map(|(i, u)| (*i, u.as_ref().map(|u| format!("GPU-{u}"))))
        .collect();
    for (d, fields) in &seen.identity {
        gpus.insert(*d, text(Some(fields), "uuid").map(str::to_owned));
    }
    // No state file yet is a first check; a damaged one is said, then replaced.
    let mut state = State::default();
    if let Some(path) = opts.state.as_deref()
        && let Ok(bytes) = std::fs::read(path)
    {
        match serde_json::from_slice::<State>(&bytes) {
            Ok(s) => state = s,
            Err(e) => checked.push(format!(
                "state file {} unreadable ({e}): starting afresh",
                path.display()
            )),
        }
    }
    let first_check = state.counters.is_empty() && state.xid_kernel_us == 0;
    let mut faults = Vec::new();
    let mut fault = |gpu: Option<usize>, code: &str, exit: i32, message: String| {
        let uuid = gpu.and_then(|g| gpus.get(&g).cloned().flatten());
        faults.push(Fault {
            gpu,
            uuid,
            code: code.into(),
            exit_code: exit,
            message,
        });
    };
    // The driver.
    let cause = |c: &str| seen.causes.iter().any(|x| x == c);
    if cause("driver_not_loaded") {
        fault(
            None,
            "KILN-DRV-001",
            exit_code::SOFTWARE,
            "NVIDIA kernel driver not loaded".into(),
        );
    }
    if cause("version_mismatch") {
        fault(
            None,
            "KILN-DRV-002",
            exit_code::SOFTWARE,
            "NVML and kernel driver versions differ (reboot after the upgrade)".into(),
        );
    }
    // An NVIDIA GPU on the PCI bus that a working NVML does not list has fallen off the
    // bus or failed to initialise: present for the count, but not a working GPU.
    let nvml_works = !seen.causes.iter().any(|c| {
        matches!(
            c.as_str(),
            "nvml_missing"
                | "driver_not_loaded"
                | "version_mismatch"
                | "no_permission"
                | "nvml_failed"
        )
    });
    for i in unreachable(&inventory, nvml_works) {
        fault(
            Some(i),
            "KILN-CNT-002",
            exit_code::HARDWARE,
            format!(
                "{} is on the PCI bus but NVML cannot reach it (fallen off the bus or failed to initialise: see the kernel log)",
                inventory[i].pci_address.as_deref().unwrap_or("a GPU")
            ),
        );
    }
    checked.push("driver".to_owned());
    // The count.
    if let Some(want) = opts.expect_gpus {
        if gpus.len() < want {
            fault(
                None,
                "KILN-CNT-001",
                exit_code::HARDWARE,
                format!("{} of {want} GPUs found", gpus.len()),
            );
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
            .unwrap_or_else(|| "no Vulkan GPU found".into());
        fault(
            None,
            "KILN-NOT-001",
            exit_code::INCONCLUSIVE,
            format!("no GPU to check: {why}"),
        );
    }
    // Counters, per GPU.
    let counter_names = [
        "ecc_uncorrected_volatile",
        "ecc_uncorrected_aggregate",
        "remap_failure",
        "remap_pending",
        "retired_pages_pending",
        "retired_pages_dbe",
    ];
    for (&g, uuid) in &gpus {
        let counters = seen.counters.get(&g);
        let now = |k: &str| number(counters, k);
        let key = uuid.clone().unwrap_or_else(|| format!("gpu{g}"));
        let before = state.counters.get(&key).cloned().unwrap_or_default();
        if counters.is_none() {
            if !gpus.is_empty()
                && seen
                    .causes
                    .iter()
                    .any(|c| c == "nvml_missing" || c == "no_nvml_device")
            {
                fault(
                    Some(g),
                    "KILN-NOT-002",
                    exit_code::INCONCLUSIVE,
                    "no ECC, remap or retired-page counters (NVML not available)".into(),
                );
            }
            continue;
        }
        if now("remap_failure").is_some_and(|v| v > 0.0) {
            fault(
                Some(g),
                "KILN-MEM-001",
                exit_code::HARDWARE,
                "row remapping failed: no spare rows left".into(),
            );
        }
        // Uncorrectable errors: the growth since the last check, or, on the first, the
        // volatile count since the driver loaded.
        let grown = |k: &str| {
            now(k).map(|v| {
                v - before
                    .get(k)
                    .copied()
                    .unwrap_or(if first_check { 0.0 } else { v })
            })
        };
        let ecc = if first_check {
            now("ecc_uncorrected_volatile")
        } else {
            grown("ecc_uncorrected_aggregate").or(grown("ecc_uncorrected_volatile"))
        };
        if let Some(n) = ecc.filter(|n| *n > 0.0) {
            fault(
                Some(g),
                "KILN-MEM-002",
                exit_code::HARDWARE,
                format!("ECC uncorrectable +{n:.0}"),
            );
        }
        if now("remap_pending").is_some_and(|v| v > 0.0) {
            fault(
                Some(g),
                "KILN-MEM-003",
                exit_code::HARDWARE,
                "row remap pending: reset the GPU, then retest".into(),
            );
        }
        if now("retired_pages_pending").is_some_and(|v| v > 0.0) {
            fault(
                Some(g),
                "KILN-MEM-004",
                exit_code::HARDWARE,
                format!(
                    "page retirement pending ({:.0} double-bit pages retired): reset the GPU, then retest",
                    now("retired_pages_dbe").unwrap_or(0.0)
                ),
            );
        }
        let mut kept = BTreeMap::new();
        for k in counter_names {
            if let Some(v) = now(k) {
                kept.insert(k.to_owned(), v);
            }
        }
        state.counters.insert(key, kept);
        // The link: width below the maximum (the generation drops at idle by design).
        let gauges = seen.gauges.get(&g);
        if let (Some(w), Some(wm)) = (
            number(gauges, "pcie_width"),
            number(gauges, "pcie_width_max"),
        ) && w < wm
        {
            fault(
                Some(g),
                "KILN-PCI-001",
                exit_code::ENVIRONMENT,
                format!("PCIe link x{w:.0} of x{wm:.0}"),
            );
        }
    }
    checked.push("ECC, row remapping, retired pages, PCIe link width".to_owned());
    // Xids since the last check.
    let mut newest = state.xid_kernel_us;
    // One fault per device and code, however many lines (a storm of Xid 13 is one fault).
    let mut counted: BTreeMap<(Option<usize>, u32), usize> = BTreeMap::new();
    for (device, xid) in &seen.xids {
        let at = xid.kernel_us.unwrap_or(0);
        if at != 0 && at <= state.xid_kernel_us {
            continue;
        }
        newest = newest.max(at);
        let code = xid::code_of(xid.code, &xid.message);
        if let Some(code) = code.filter(|c| xid::lookup(*c).is_some()) {
            *counted.entry((*device, code)).or_default() += 1;
        }
    }
    for ((device, code), n) in counted {
        let Some(row) = xid::lookup(code) else {
            continue;
        };
        let (class, what) = (row.class, row.meaning);
        let exit = match class {
            Class::Hardware => exit_code::HARDWARE,
            Class::Environment => exit_code::ENVIRONMENT,
            _ => exit_code::SOFTWARE,
        };
        let times = if n > 1 {
            format!(" x{n}")
        } else {
            String::new()
        };
        fault(
            device,
            &format!("KILN-XID-{code:03}"),
            exit,
            format!("Xid {code}{times} ({what})"),
        );
    }
    state.xid_kernel_us = newest;
    checked.push(if first_check {
        "Xids since boot".to_owned()
    } else {
        "Xids since the last check".to_owned()
    });
    // The last full run.
    if let Some(max_age) = opts.max_age {
        let dir = opts
            .runs
            .clone()
            .unwrap_or_else(|| PathBuf::from("kiln-runs"));
        match last_run(&dir) {
            None => fault(
                None,
                "KILN-RUN-003",
                exit_code::INCONCLUSIVE,
                format!("no full run in {}", dir.display()),
            ),
            Some((age, report)) => {
                if age > max_age {
                    fault(
                        None,
                        "KILN-RUN-001",
                        exit_code::INCONCLUSIVE,
                        format!(
                            "last full run is {:.0} h old (max {:.0} h)",
                            age.as_secs_f64() / 3600.0,
                            max_age.as_secs_f64() / 3600.0
                        ),
                    );
                }
                let code = report["exit_code"].as_i64().unwrap_or(4) as i32;
                if code != exit_code::HEALTHY {
                    let worst = report["devices"]
                        .as_array()
                        .and_then(|d| d.iter().find(|d| d["result"] != "pass"));
                    fault(
                        worst.and_then(|d| d["index"].as_u64()).map(|i| i as usize),
                        "KILN-RUN-002",
                        code,
                        format!(
                            "last full run: {}",
                            worst
                                .and_then(|d| d["reason"].as_str())
                                .unwrap_or("not a pass")
                        ),
                    );
                }
            }
        }
        checked.push(format!("last full run in {}", dir.display()));
    }
    if let Some(path) = &opts.state
        && let Err(e) = crate::evidence::write_json_atomic(path, &state)
    {
        // The next check then reports these Xids again: better than missing new ones.
        checked.push(format!("state not saved ({e})"));
    }
    if let Some(only) = &opts.only_nvml {
        let index_of = |g: usize| {
            number(seen.identity.get(&g), "nvml_index")
                .map(|i| i as u32)
                .or_else(|| inventory.get(g).and_then(|gpu| gpu.nvml_index))
        };
        let known: Vec<u32> = gpus.keys().filter_map(|&g| index_of(g)).collect();
        if known.is_empty() {
            // Nothing can be chosen by NVML index: every GPU's faults stay, and that is said.
            faults.push(Fault {
                gpu: None,
                uuid: None,
                code: "KILN-NOT-003".into(),
                exit_code: exit_code::INCONCLUSIVE,
                message:
                    "--gpus names NVML indices, and no GPU's could be read: every GPU was checked"
                        .into(),
            });
        } else {
            // A job's GPU the node no longer shows is a GPU gone, not a GPU to skip.
            for missing in only.iter().filter(|o| !known.contains(o)) {
                faults.push(Fault {
                    gpu: None,
                    uuid: None,
                    code: "KILN-CNT-001".into(),
                    exit_code: exit_code::HARDWARE,
                    message: format!("GPU {missing} (NVML index, from --gpus) not found"),
                });
            }
            let chosen = |g: usize| index_of(g).is_some_and(|i| only.contains(&i));
            faults.retain(|f| f.gpu.is_none_or(chosen));
        }
        checked.push(format!(
            "only GPUs {}",
            only.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    // Most serious first: hardware, environment, software, could not check.
    faults.sort_by_key(|f| f.exit_code);
    let exit = faults.first().map_or(exit_code::HEALTHY, |f| f.exit_code);
    let mut line = match faults.first() {
        None => format!("OK: {} GPUs healthy [KILN-OK-000]", gpus.len()),
        Some(f) if faults.len() > 1 => format!("{} (+{} more)", f.line(), faults.len() - 1),
        Some(f) => f.line(),
    };
    if line.len() > LINE_MAX {
        let mut cut = LINE_MAX - 3;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push_str("...");
    }
    Health {
        line,
        exit_code: exit,
        gpus: gpus.len(),
        faults,
        checked,
    }
}

/// The newest run under `dir` with a report: its age and report.
fn last_run(dir: &Path) -> Option<(Duration, serde_json::Value)> {
    let mut best: Option<(SystemTime, serde_json::Value)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path().join("report.json");
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let Ok(modified) = meta.modified() else {
            continue;
        };
        if best.as_ref().is_some_and(|(t, _)| *t >= modified) {
            continue;
        }
        if let Ok(Ok(report)) = std::fs::read(&path).map(|b| serde_json::from_slice(&b)) {
            best = Some((modified, report));
        }
    }
    best.map(|(t, r)| (SystemTime::now().duration_since(t).unwrap_or_default(), r))
}

/// The check for people: the first line, then every fault and what was checked.
pub fn summary(h: &Health) -> String {
    let mut out = format!("{}\n", h.line);
    for f in &h.faults {
        out.push_str(&format!("fault: {}\n", f.line()));
    }
    out.push_str(&format!(
        "checked: {} GPUs; {}\n",
        h.gpus,
        h.checked.join("; ")
    ));
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
}
