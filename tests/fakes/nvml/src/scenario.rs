//! The scripted NVIDIA node the fake answers for: a JSON file (`KILN_FAKE_NVML`) naming the
//! driver and each GPU's identity, a timeline of its readings, its processes, its events,
//! the calls it refuses or does not support, and when it falls off the bus.
//!
//! ```json
//! {"driver_version": "550.90.07", "gpus": [{
//!     "uuid": "GPU-6d657361-3232-2e33-2e36-000000000000", "bus_id": "00000000:3B:00.0",
//!     "timeline": [{"at_s": 0, "temp_c": 38}, {"at_s": 5, "temp_c": 84, "throttle": 32}],
//!     "processes": [{"pid": 4242, "bytes": 2147483648, "from_s": 2, "name": "python3",
//!                    "timeline": [[5, 4294967296], [6, 2147483648]]}],
//!     "nvlinks": 18, "nvlink_down": [3], "nvlink_replay": {"7": 12},
//!     "remap_banks": [2550, 6, 2, 1, 1], "sram_threshold": 1,
//!     "kiln_workers_listed": true,
//!     "events": [{"at_s": 3, "kind": "xid", "xid": 48}, {"at_s": 3, "kind": "dbe"}],
//!     "refuse": ["processes"], "unsupported": ["ecc"], "lost_at_s": 8,
//!     "errors": {"nvmlDeviceGetPcieThroughput": "unknown", "counters": "timeout"},
//!     "latency_ms": {"nvmlDeviceGetPcieThroughput": 20}}]}
//! ```
//!
//! Times are seconds since `KILN_FAKE_NVML_EPOCH` (Unix seconds, set by the test when it
//! starts kiln, so that every process of a run shares one clock), else since the library
//! was loaded.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// The readings of a healthy, idle H200 SXM: what a timeline entry changes.
fn healthy_h200() -> Map<String, Value> {
    const HEALTHY: &str = r#"{
        "temp_c": 38, "hbm_temp_c": 41, "power_w": 92, "power_limit_w": 700,
        "power_default_w": 700, "energy_mj": 1.2e9,
        "sm_mhz": 1980, "mem_mhz": 3201, "gfx_mhz": 1980,
        "sm_max_mhz": 1980, "mem_max_mhz": 3201, "gfx_max_mhz": 1980,
        "throttle": 0, "violation_power_ns": 0, "violation_thermal_ns": 0,
        "util_gpu": 0, "util_mem": 0,
        "mem_total_bytes": 150754820096, "mem_used_bytes": 536870912,
        "pstate": 0, "pcie_gen": 5, "pcie_width": 16, "pcie_gen_max": 5, "pcie_width_max": 16,
        "pcie_tx_kbps": 1200, "pcie_rx_kbps": 900, "replays": 0,
        "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
        "ecc_corrected_aggregate": 0, "ecc_uncorrected_aggregate": 0,
        "retired_sbe": 0, "retired_dbe": 0, "retired_pending": 0,
        "remapped_cor": 0, "remapped_unc": 0, "remap_pending": 0, "remap_failure": 0,
        "recovery_action": 0,
        "slowdown_c": 90, "shutdown_c": 92, "gpu_max_c": 87, "mem_max_c": 95,
        "fans": 0, "fan_pct": 0,
        "nvlinks": 18, "nvlink_down": [], "nvlink_remote": 0,
        "nvlink_replay": {}, "nvlink_recovery": {}, "nvlink_crc_flit": {}, "nvlink_crc_data": {},
        "remap_banks": [2560, 0, 0, 0, 0],
        "sram_unc_parity": 0, "sram_unc_secded": 0, "sram_cor": 0, "sram_threshold": 0,
        "persistence": 1, "compute_mode": 0, "app_mhz": 1980, "app_default_mhz": 1980
    }"#;
    serde_json::from_str(HEALTHY).unwrap_or_default()
}

/// One GPU of the node.
pub struct Gpu {
    pub spec: Map<String, Value>,
    timeline: Vec<(f64, Map<String, Value>)>,
    pub processes: Vec<Process>,
    pub events: Vec<Event>,
    pub lost_at_s: Option<f64>,
    /// Whether the process lists name the loading process's children (kiln's workers)
    /// beside the scenario's processes, as a real driver lists every process on the GPU.
    pub kiln_workers_listed: bool,
    refuse: Vec<String>,
    unsupported: Vec<String>,
    errors: BTreeMap<String, String>,
    latency: BTreeMap<String, f64>,
}

/// Another process holding memory on the GPU.
#[derive(Clone)]
pub struct Process {
    pub pid: u32,
    pub bytes: u64,
    /// `[[at_s, bytes], ...]`: what it holds from each time on (before the first, `bytes`).
    pub timeline: Vec<(f64, u64)>,
    pub from_s: f64,
    pub until_s: Option<f64>,
    pub graphics: bool,
    /// What `nvmlSystemGetProcessName` says for it; without one the call says not found.
    pub name: Option<String>,
}

impl Process {
    /// The memory it holds at `now`.
    pub fn bytes_at(&self, now: f64) -> u64 {
        self.timeline
            .iter()
            .take_while(|(at, _)| *at <= now)
            .last()
            .map_or(self.bytes, |(_, b)| *b)
    }
}

/// An NVML event the GPU raises.
pub struct Event {
    pub at_s: f64,
    /// NVML's event type bit (`nvmlEventTypeXidCriticalError` = 0x8, double-bit ECC 0x2,
    /// single-bit 0x1).
    pub kind: u64,
    pub data: u64,
}

/// The whole node.
pub struct Scenario {
    pub driver_version: String,
    pub cuda_version: i32,
    /// The error `nvmlInit` answers with, if any.
    pub init_error: Option<String>,
    pub gpus: Vec<Gpu>,
    epoch: Epoch,
}

enum Epoch {
    Unix(f64),
    Loaded(Instant),
}

fn f64_of(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Groups of calls the scenario refuses or does not support, by the names it gives them;
/// `counters` is every counter read at a phase boundary.
fn expand(groups: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for g in groups {
        if g == "counters" {
            out.extend(
                [
                    "ecc",
                    "retired_pages",
                    "remap",
                    "recovery",
                    "replays",
                    "nvlink",
                    "sram",
                ]
                .map(String::from),
            );
        } else {
            out.push(g);
        }
    }
    out
}

impl Gpu {
    fn read(spec: &Value) -> Gpu {
        let obj = spec.as_object().cloned().unwrap_or_default();
        let mut timeline: Vec<(f64, Map<String, Value>)> = obj
            .get("timeline")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        let e = e.as_object()?;
                        Some((f64_of(e.get("at_s")).unwrap_or(0.0), e.clone()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
        let processes = obj
            .get("processes")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|p| Process {
                        pid: p["pid"].as_u64().unwrap_or(1) as u32,
                        bytes: p["bytes"].as_u64().unwrap_or(0),
                        timeline: p["timeline"]
                            .as_array()
                            .map(|t| {
                                t.iter()
                                    .filter_map(|e| {
                                        Some((e.get(0)?.as_f64()?, e.get(1)?.as_u64()?))
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        from_s: f64_of(p.get("from_s")).unwrap_or(0.0),
                        until_s: f64_of(p.get("until_s")),
                        graphics: p["kind"] == "graphics",
                        name: p["name"].as_str().map(str::to_owned),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let events = obj
            .get("events")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|e| {
                        let (kind, data) = match e["kind"].as_str() {
                            Some("dbe") => (0x2, 0),
                            Some("sbe") => (0x1, 0),
                            _ => (0x8, e["xid"].as_u64().unwrap_or(0)),
                        };
                        Event {
                            at_s: f64_of(e.get("at_s")).unwrap_or(0.0),
                            kind,
                            data,
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let map_of = |key: &str| -> BTreeMap<String, Value> {
            obj.get(key)
                .and_then(Value::as_object)
                .map(|m| m.clone().into_iter().collect())
                .unwrap_or_default()
        };
        Gpu {
            lost_at_s: f64_of(obj.get("lost_at_s")),
            kiln_workers_listed: obj.get("kiln_workers_listed") == Some(&Value::Bool(true)),
            refuse: expand(strings(obj.get("refuse"))),
            unsupported: expand(strings(obj.get("unsupported"))),
            // By symbol, by group (`counters` standing for its groups) or `*` for every call.
            errors: map_of("errors")
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_str()?.to_owned())))
                .flat_map(|(k, v)| expand(vec![k]).into_iter().map(move |k| (k, v.clone())))
                .collect(),
            latency: map_of("latency_ms")
                .into_iter()
                .filter_map(|(k, v)| Some((k, v.as_f64()?)))
                .collect(),
            processes,
            events,
            timeline,
            spec: obj,
        }
    }

    /// A text of its identity (`uuid`, `name`, ...), or `default`.
    pub fn text(&self, key: &str, default: &str) -> String {
        self.spec
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .to_owned()
    }

    /// A number of its identity, or `default`.
    pub fn number(&self, key: &str, default: u64) -> u64 {
        self.spec
            .get(key)
            .and_then(Value::as_u64)
            .unwrap_or(default)
    }

    /// Its readings at `t` seconds: the healthy card's, with the readings its spec gives
    /// beside its identity (`"fans": 2`) and then every timeline entry up to `t` laid over
    /// them in order.
    pub fn state_at(&self, t: f64) -> State {
        let mut state = healthy_h200();
        // A reading given beside the identity holds from the start.
        for (k, v) in &self.spec {
            if state.contains_key(k) {
                state.insert(k.clone(), v.clone());
            }
        }
        for (at, entry) in &self.timeline {
            if *at > t {
                break;
            }
            for (k, v) in entry {
                state.insert(k.clone(), v.clone());
            }
        }
        State(state)
    }

    /// True when it has fallen off the bus by `t`.
    pub fn lost(&self, t: f64) -> bool {
        self.lost_at_s.is_some_and(|at| t >= at)
    }

    /// The error a call of `symbol` in `group` answers with, by the scenario's name for it
    /// (`no_permission`, `not_supported`, ...), if any.
    pub fn error_for(&self, symbol: &str, group: &str) -> Option<String> {
        let given = [symbol, group, "*"]
            .iter()
            .find_map(|k| self.errors.get(*k));
        if let Some(e) = given {
            return Some(e.clone());
        }
        if self.refuse.iter().any(|g| g == group) {
            return Some("no_permission".into());
        }
        if self.unsupported.iter().any(|g| g == group) {
            return Some("not_supported".into());
        }
        None
    }

    /// How long a call of `symbol` takes on this GPU.
    pub fn latency(&self, symbol: &str) -> Option<Duration> {
        self.latency
            .get(symbol)
            .or_else(|| self.latency.get("*"))
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
    }
}

/// A GPU's readings at one moment.
pub struct State(Map<String, Value>);

impl State {
    /// A reading as a number (0 when the scenario gives none).
    pub fn f(&self, key: &str) -> f64 {
        f64_of(self.0.get(key)).unwrap_or(0.0)
    }

    /// A reading as an unsigned integer.
    pub fn u(&self, key: &str) -> u64 {
        self.f(key).max(0.0) as u64
    }

    /// A reading that is a list of numbers (`nvlink_down`, `remap_banks`).
    pub fn list(&self, key: &str) -> Vec<u64> {
        self.0
            .get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    }

    /// One entry of a reading that is a map by number (`nvlink_replay`'s link 7); 0 where
    /// it gives none.
    pub fn at(&self, key: &str, index: u64) -> u64 {
        self.0
            .get(key)
            .and_then(|m| m.get(index.to_string()))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }
}

impl Scenario {
    /// The scenario at `KILN_FAKE_NVML`; one that cannot be read answers every `nvmlInit`
    /// with an error (and says why on stderr), as a broken driver would.
    pub fn load() -> Scenario {
        let epoch = std::env::var("KILN_FAKE_NVML_EPOCH")
            .ok()
            .and_then(|e| e.parse::<f64>().ok())
            .map_or_else(|| Epoch::Loaded(Instant::now()), Epoch::Unix);
        let broken = |why: String| {
            eprintln!("fake libnvidia-ml: {why}");
            Scenario {
                driver_version: String::new(),
                cuda_version: 0,
                init_error: Some("unknown".into()),
                gpus: Vec::new(),
                epoch: Epoch::Loaded(Instant::now()),
            }
        };
        let Some(path) = std::env::var_os("KILN_FAKE_NVML") else {
            return broken("KILN_FAKE_NVML names no scenario".into());
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => return broken(format!("{}: {e}", path.to_string_lossy())),
        };
        let spec: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => return broken(format!("{}: {e}", path.to_string_lossy())),
        };
        Scenario {
            driver_version: spec["driver_version"]
                .as_str()
                .unwrap_or("550.90.07")
                .to_owned(),
            cuda_version: spec["cuda_version"].as_i64().unwrap_or(12040) as i32,
            init_error: spec["init"].as_str().map(str::to_owned),
            gpus: spec["gpus"]
                .as_array()
                .map(|a| a.iter().map(Gpu::read).collect())
                .unwrap_or_default(),
            epoch,
        }
    }

    /// Seconds on the scenario's clock.
    pub fn now(&self) -> f64 {
        match self.epoch {
            Epoch::Unix(at) => {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(at)
                    - at
            }
            Epoch::Loaded(at) => at.elapsed().as_secs_f64(),
        }
    }
}
