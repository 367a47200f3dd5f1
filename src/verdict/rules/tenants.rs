//! Other processes on the GPU: there when the test started, or arriving during it, each
//! with what its coming did to the rates.

use super::rates;
use crate::finding::{
    Confidence, Finding, FindingCode, Millis, Severity, Share, evidence, finding,
};
use crate::telemetry::process::Process;
use crate::telemetry::record::Reading;
use crate::telemetry::signals::{self, Values};
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::workload::WorkloadResult;

crate::evidence! {
    /// The evidence of `OTHER_TENANTS`: those there at the start (under the signal's
    /// name), those that came, and the share of a rate within a workload's own noise.
    struct Tenants<'a> {
        #[serde(flatten)]
        at_start: Values<&'a [Process]> => flat,
        held_share: Option<Share> => "Share of the card's memory they held",
        arrived: Vec<Came<'a>> => "Arrived during the run",
        cost_free_share: Share => "A rate within this share of its own is the workload's own noise",
    }
}

crate::evidence! {
    /// A process that came during the test: when, in which phase, and what the rates
    /// measured on both sides of its coming, in words and as a change.
    struct Came<'a> {
        process: &'a Process => "Process",
        phase: &'a str => "Phase",
        first_seen_ms: Millis => "First seen",
        rates: Vec<&'a str> => "Rates",
        rate_changes: Vec<Share> => "Rate changes",
    }
}

/// What a process on the GPU is, by its name. The name decides the words alone ("a desktop
/// session"), never the weight: that is what the process measurably cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantKind {
    /// A display server, a compositor, a desktop shell or a browser.
    Desktop,
    /// CUDA's Multi-Process Service (`nvidia-cuda-mps-server`, `nvidia-cuda-mps-control`).
    MpsServer,
    /// NVIDIA's persistence daemon (`nvidia-persistenced`).
    PersistenceDaemon,
    /// Anything else: a job.
    Other,
}

/// The executables of a desktop session: X and Wayland servers, compositors and shells,
/// and the browsers that draw on the GPU.
const DESKTOP: &[&str] = &[
    "xorg",
    "x",
    "xwayland",
    "gnome-shell",
    "kwin",
    "kwin_x11",
    "kwin_wayland",
    "plasmashell",
    "mutter",
    "sway",
    "weston",
    "hyprland",
    "wayfire",
    "cinnamon",
    "xfwm4",
    "compiz",
    "firefox",
    "firefox-bin",
    "chrome",
    "chromium",
    "chromium-browser",
    "msedge",
    "brave",
    "opera",
    "vivaldi",
];

impl TenantKind {
    /// What `p` is, by its executable's name (a path's last part, in any case).
    pub fn of(p: &Process) -> TenantKind {
        let Some(name) = p.name.as_deref() else {
            return TenantKind::Other;
        };
        let name = name.rsplit(['/', '\\']).next().unwrap_or(name);
        let name = name
            .strip_suffix(".exe")
            .unwrap_or(name)
            .to_ascii_lowercase();
        if name.starts_with("nvidia-cuda-mps") {
            TenantKind::MpsServer
        } else if name == "nvidia-persistenced" {
            TenantKind::PersistenceDaemon
        } else if DESKTOP.contains(&name.as_str()) {
            TenantKind::Desktop
        } else {
            TenantKind::Other
        }
    }

    /// In words, for those that have a name of their own.
    fn words(self) -> Option<&'static str> {
        match self {
            TenantKind::Desktop => Some("a desktop session"),
            TenantKind::MpsServer => Some("an MPS server"),
            TenantKind::PersistenceDaemon => Some("the persistence daemon"),
            TenantKind::Other => None,
        }
    }
}

/// What the processes there at the start held of the card's memory, where both are known:
/// (their bytes, the card's bytes). The card's memory is the driver's total, else its
/// product's, else the heap the VRAM test saw.
fn memory_held(device: &DeviceEvidence, tenants: &[Process]) -> Option<(u64, u64)> {
    let held = tenants.iter().map(|p| p.used_bytes).sum::<Option<u64>>()?;
    let total = device
        .telemetry
        .iter()
        .filter_map(|p| p.gauge(signals::MEM_TOTAL_BYTES).map(|g| g.max))
        .reduce(f64::max)
        .filter(|b| *b > 0.0)
        .map(|b| b as u64)
        .or_else(|| {
            crate::product::lookup(&device.name)
                .map(|p| (p.memory_gb * 1e9) as u64)
                .filter(|b| *b > 0)
        })
        .or_else(|| {
            device.workloads.iter().find_map(|w| match &w.summary {
                WorkloadResult::Vram(v) if v.sizing.heap_bytes > 0 => Some(v.sizing.heap_bytes),
                _ => None,
            })
        })?;
    Some((held, total))
}

/// What the processes there at the start cost the test, where it can be weighed: the
/// memory the VRAM sweep could not cover (their share of the card's), and whether a rate
/// fell below its floor while they were there. None where it cannot be weighed (a
/// process's memory or the card's not said).
fn start_cost(device: &DeviceEvidence, t: &Thresholds, tenants: &[Process]) -> Option<StartCost> {
    let (held, total) = memory_held(device, tenants)?;
    let swept = device
        .workloads
        .iter()
        .any(|w| matches!(w.summary, WorkloadResult::Vram(_)));
    Some(StartCost {
        held,
        total,
        memory: swept && held as f64 > COST_FREE_SHARE * total as f64,
        rate: rates::slow_beside(device, t, tenants),
    })
}

/// What the processes there at the start cost.
struct StartCost {
    /// Their memory, in all.
    held: u64,
    /// The card's.
    total: u64,
    /// Whether their memory was more than the VRAM sweep's coverage may lose at no cost.
    memory: bool,
    /// Whether a rate fell below its floor with them there.
    rate: bool,
}

/// The rule.
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let s = &device.setup;
    if s.watching {
        // A watched application's neighbours are judged by its own rule.
        return out;
    }
    let tenants = processes(device);
    // Those that came after the start, each with when and what its coming did to the rates.
    let arrived = rates::arrivals(device, &tenants);
    if tenants.is_empty() && arrived.is_empty() {
        return out;
    }
    let mut said = Vec::new();
    if !tenants.is_empty() {
        let listed: Vec<String> = tenants.iter().map(Process::said).collect();
        // One kind for all of them names them ("a desktop session"); a mix is listed.
        let kinds: Vec<TenantKind> = tenants.iter().map(TenantKind::of).collect();
        let kind = kinds
            .first()
            .filter(|k| kinds.iter().all(|o| o == *k))
            .and_then(|k| k.words());
        said.push(format!(
            "{}{} {} using the GPU when the test started",
            crate::text::list(&listed),
            kind.map(|k| format!(", {k},")).unwrap_or_default(),
            if tenants.len() == 1 { "was" } else { "were" }
        ));
    }
    // What the arrivals cost: every rate measured on both sides of each.
    let costs: Vec<Vec<(String, f64)>> = arrived
        .iter()
        .map(|a| rates::before_and_after(device, a))
        .collect();
    for (a, changes) in arrived.iter().zip(&costs) {
        let changes: Vec<&str> = changes.iter().map(|(words, _)| words.as_str()).collect();
        said.push(format!(
            "{} started using the GPU during the test, {:.1} s into the {} phase ({:.1} s into the run){}",
            a.process.said(),
            (a.first_ms - a.phase.start_ms) / 1e3,
            a.phase.phase,
            a.first_ms / 1e3,
            if changes.is_empty() {
                String::new()
            } else {
                format!(": {}", changes.join("; "))
            }
        ));
    }
    let start = (!tenants.is_empty())
        .then(|| start_cost(device, t, &tenants))
        .flatten();
    let mut f = finding(
        FindingCode::OtherTenants,
        Severity::Major,
        Confidence::High,
        said.join("; "),
        evidence(&Tenants {
            at_start: Values(vec![(signals::OTHER_PROCESSES, &tenants)]),
            held_share: start
                .as_ref()
                .map(|c| Share(c.held as f64 / c.total as f64)),
            arrived: arrived
                .iter()
                .zip(&costs)
                .map(|(a, changes)| Came {
                    process: &a.process,
                    phase: &a.phase.phase,
                    first_seen_ms: Millis(a.first_ms),
                    rates: changes.iter().map(|(words, _)| words.as_str()).collect(),
                    rate_changes: changes.iter().map(|(_, share)| Share(*share)).collect(),
                })
                .collect(),
            cost_free_share: Share(COST_FREE_SHARE),
        }),
        "rerun when the GPU is idle (drain the node, or --wait-idle)",
    );
    // Severity follows what the tenants cost. Those there at the start cost the memory
    // the VRAM sweep could not cover and any rate that fell below its floor beside them;
    // one that came later cost what the rates measured on both sides of its coming show.
    // Where none of it passes the workloads' own noise, they cost nothing measurable:
    // said, not held against the run. What cannot be weighed (a memory not said, an
    // arrival with no rate on both sides) stays of weight.
    let start_free = match &start {
        None => tenants.is_empty(),
        Some(c) => !c.memory && !c.rate,
    };
    let arrivals_free = costs.iter().all(|changes| {
        !changes.is_empty() && changes.iter().all(|(_, share)| *share > -COST_FREE_SHARE)
    });
    if let Some(c) = &start {
        let share = 100.0 * c.held as f64 / c.total as f64;
        f.summary.push_str(&format!(
            " (together {}, {share:.1}% of the card's {})",
            crate::units::format_bytes(c.held),
            crate::units::format_bytes(c.total)
        ));
        if c.memory {
            f.summary.push_str(&format!(
                ": memory the VRAM test could not cover, more than {:.0}% of the card",
                100.0 * COST_FREE_SHARE
            ));
        }
    }
    if start_free && arrivals_free {
        f.class = crate::finding::Class::Info;
        f.severity = Severity::Note;
        let mut why = Vec::new();
        if let Some(c) = &start {
            why.push(if c.held as f64 > COST_FREE_SHARE * c.total as f64 {
                "no rate fell below its floor beside them, and no VRAM test ran that their memory could take from".to_owned()
            } else {
                format!(
                    "no rate fell below its floor beside them, and they held no more than {:.0}% of the card's memory",
                    100.0 * COST_FREE_SHARE
                )
            });
        }
        if !arrived.is_empty() {
            why.push(format!(
                "no rate fell by {:.0}% or more",
                100.0 * COST_FREE_SHARE
            ));
        }
        f.summary.push_str(&format!(
            ": {}, so {} cost the test nothing measurable",
            why.join("; "),
            if tenants.len() + arrived.len() == 1 {
                "it"
            } else {
                "they"
            }
        ));
        f.action = "nothing for this run; keep other work off the GPU during tests (drain the node, or --wait-idle)".into();
    }
    out.push(f);
    out
}

/// A rate that fell by less than this share when another process came is within a
/// workload's own run-to-run noise, and memory held by others up to this share of the
/// card's moves the VRAM sweep's coverage by no more than its own sizing does (its reserve
/// alone is 2% or more of the heap): the process cost nothing measurable.
const COST_FREE_SHARE: f64 = 0.05;

/// Other processes on the GPU when the test started (`pid:bytes[:name]`), per the vendor
/// source.
pub(super) fn processes(device: &DeviceEvidence) -> Vec<Process> {
    device
        .setup
        .identity_of(signals::OTHER_PROCESSES)
        .and_then(Reading::processes)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{device, phase, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;
    use crate::verdict::RateSample;

    /// A process that came 30 s into a minute of compute, with kiln's fp32 rate a second
    /// at `before` until then and `after` from then.
    fn arrival(before: f64, after: f64) -> Vec<(&'static str, Class, Severity)> {
        let mut d = device(vec![phase(
            "compute",
            serde_json::json!({
                "other_processes": [{"pid": 5120, "used_bytes": 2u64 << 30}],
                "processes_first_ms": {"5120": 30_000.0},
            }),
        )]);
        d.rate_samples = (1..60)
            .map(|s| RateSample {
                t_ms: f64::from(s) * 1000.0,
                name: "compute_fp32_gops".into(),
                value: if s < 30 { before } else { after },
            })
            .collect();
        said(&super::judge(&d, &Thresholds::default()))
    }

    /// An H200 (141 GB) that swept its VRAM and computed fp32 at `fp32_gops` against the
    /// site's floor of 45000, with these processes (pid, MiB, name) on it from the start.
    fn there_from_the_start(
        tenants: &[(u32, u64, &str)],
        fp32_gops: f64,
    ) -> Vec<(&'static str, Class, Severity)> {
        let site = Thresholds {
            floors: [("compute_fp32_gops".to_owned(), 45_000.0)].into(),
            ..Thresholds::default()
        };
        use crate::telemetry::process::Process;
        use crate::telemetry::record::Reading;
        use crate::workload::{WorkloadOutcome, WorkloadResult, WorkloadStatus};
        let mut d = super::super::testing::computed_at(fp32_gops);
        let vram = serde_json::json!({"algorithms": [], "coverage": {"of_free": 0.9,
            "of_heap": 0.9, "of_sized": 1.0, "tested_bytes": 1u64 << 30}, "device_error": null,
            "errors_total": 0, "histograms": {"bit_position": [], "flipped_bits": [],
            "one_to_zero": 0, "zero_to_one": 0}, "layout": "contiguous", "records": [],
            "records_dropped": 0, "retests": [], "sizing": {"allocated_bytes": 1u64 << 30,
            "allocation_stopped_by": null, "buffer_count": 1, "free_at_start_bytes": 1u64 << 30,
            "free_source": "budget", "heap_bytes": 1u64 << 30, "max_buffer_bytes": 1u64 << 27,
            "reserve_bytes": 0, "sized_bytes": 1u64 << 30}, "stopped_early": null,
            "throughput": {"combined_gib_per_wall_s": 1.0, "rewrite": {"bytes": 0,
            "gib_per_s": 0.0, "gpu_s": 0.0}, "sweep_wall_s": 1.0, "timing_source": "wall",
            "verify": {"bytes": 0, "gib_per_s": 0.0, "gpu_s": 0.0}, "write": {"bytes": 0,
            "gib_per_s": 0.0, "gpu_s": 0.0}}, "wall_s": 1.0});
        d.workloads.push(WorkloadOutcome {
            workload: "vram".into(),
            status: WorkloadStatus::Passed,
            headline: "no errors".into(),
            summary: WorkloadResult::from_json("vram", vram),
        });
        d.setup.identity.insert(
            "other_processes".into(),
            Reading::Processes(
                tenants
                    .iter()
                    .map(|(pid, mib, name)| Process {
                        pid: *pid,
                        used_bytes: Some(mib << 20),
                        name: Some((*name).into()),
                    })
                    .collect(),
            ),
        );
        said(&super::judge(&d, &site))
    }

    #[test]
    fn a_tenant_there_from_the_start_weighs_the_memory_and_rates_it_cost() {
        // A desktop session of a few hundred MiB, the rates at the product's: a note.
        let desktop = [(2101, 312, "/usr/lib/xorg/Xorg"), (2388, 96, "gnome-shell")];
        assert_eq!(
            there_from_the_start(&desktop, 50_000.0),
            [("OTHER_TENANTS", Class::Info, Severity::Note)]
        );
        // An idle MPS server: a note.
        assert_eq!(
            there_from_the_start(&[(1873, 30, "nvidia-cuda-mps-server")], 50_000.0),
            [("OTHER_TENANTS", Class::Info, Severity::Note)]
        );
        // The near misses: the same desktop holding 12 GiB the sweep could not cover...
        assert_eq!(
            there_from_the_start(&[(2101, 12 << 10, "Xorg")], 50_000.0),
            [("OTHER_TENANTS", Class::Environment, Severity::Major)]
        );
        // ...and a small process beside a rate under its floor.
        assert_eq!(
            there_from_the_start(&[(1873, 30, "nvidia-cuda-mps-server")], 20_000.0)
                .iter()
                .find(|(code, ..)| *code == "OTHER_TENANTS"),
            Some(&("OTHER_TENANTS", Class::Environment, Severity::Major))
        );
    }

    #[test]
    fn a_name_decides_the_words_never_the_weight() {
        use super::TenantKind;
        use crate::telemetry::process::Process;
        let kind = |name: &str| {
            TenantKind::of(&Process {
                pid: 1,
                used_bytes: None,
                name: Some(name.into()),
            })
        };
        assert_eq!(kind("/usr/lib/xorg/Xorg"), TenantKind::Desktop);
        assert_eq!(kind("firefox"), TenantKind::Desktop);
        assert_eq!(kind("nvidia-cuda-mps-control"), TenantKind::MpsServer);
        assert_eq!(kind("nvidia-persistenced"), TenantKind::PersistenceDaemon);
        assert_eq!(kind("python3"), TenantKind::Other);
    }

    #[test]
    fn a_tenant_weighs_what_it_cost_the_rates() {
        assert_eq!(
            arrival(50_000.0, 25_000.0),
            [("OTHER_TENANTS", Class::Environment, Severity::Major)]
        );
        // The near miss: a rate 1% down is within a workload's own noise.
        assert_eq!(
            arrival(50_000.0, 49_500.0),
            [("OTHER_TENANTS", Class::Info, Severity::Note)]
        );
        // Just past the noise: a cost.
        assert_eq!(
            arrival(50_000.0, 47_400.0),
            [("OTHER_TENANTS", Class::Environment, Severity::Major)]
        );
    }
}
