//! `kiln compare RUN_A RUN_B` (and `kiln run --baseline DIR`): the burn-in-then-months-
//! later view. Devices are matched by UUID, or by serial number where the UUID differs
//! (a card moved to another host); for each: findings that are new, rates that drifted
//! beyond a tolerance, and the lifetime counters (ECC, retired pages, remapped rows) that
//! grew in between.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use crate::evidence::RunSettings;
use crate::exit_code;
use crate::finding::{Class, FindingCode};
use crate::rundir::RunEvidence;
use crate::telemetry::signals;
use crate::verdict::rules::rates;
use crate::verdict::{DeviceReport, Report, VerdictError, judge_evidence};

/// Counters that only grow over a card's life (they survive reboots): growth between two
/// runs is wear.
const LIFETIME_COUNTERS: [&str; 7] = [
    signals::ECC_UNCORRECTED_AGGREGATE.name,
    signals::ECC_CORRECTED_AGGREGATE.name,
    signals::RETIRED_PAGES_SBE.name,
    signals::RETIRED_PAGES_DBE.name,
    signals::REMAPPED_CORRECTABLE.name,
    signals::REMAPPED_UNCORRECTABLE.name,
    signals::REMAP_FAILURE.name,
];

/// A finding in the later run that the earlier did not have.
#[derive(Debug, Clone, Serialize)]
pub struct NewFinding {
    /// Its code.
    pub code: FindingCode,
    /// Its class.
    pub class: Class,
    /// Its sentence.
    pub summary: String,
}

/// A rate that moved.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    /// Which rate (`vram_gib_per_s`, `compute_fp32_gops`, `pcie_h2d_gbps`, ...).
    pub rate: String,
    /// Earlier.
    pub before: f64,
    /// Later.
    pub after: f64,
    /// (after - before) / before.
    pub change: f64,
    /// How much the rate moved within either run on its own (its samples' spread, as a
    /// share of its median): a change within it is noise, not drift.
    pub noise: f64,
}

/// A lifetime counter that grew.
#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    /// Which counter.
    pub counter: String,
    /// Earlier.
    pub before: f64,
    /// Later.
    pub after: f64,
}

/// What changed for one device.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceChange {
    /// The device's name.
    pub name: String,
    /// Its UUID in the later run.
    pub uuid: String,
    /// `uuid` or `serial`.
    pub matched_by: String,
    /// Results, earlier and later.
    pub result_before: String,
    /// The later result.
    pub result_after: String,
    /// Findings the later run has and the earlier had not (information aside).
    pub new_findings: Vec<NewFinding>,
    /// Codes the earlier run had and the later has not.
    pub gone_findings: Vec<FindingCode>,
    /// Rates slower by more than the tolerance.
    pub slower: Vec<Drift>,
    /// Rates faster by more than the tolerance (for the record).
    pub faster: Vec<Drift>,
    /// Lifetime counters that grew.
    pub counters_grown: Vec<Growth>,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The earlier run's directory.
    pub before: String,
    /// The later run's directory.
    pub after: String,
    /// A rate may move this share before it counts.
    pub tolerance: f64,
    /// Matched devices.
    pub devices: Vec<DeviceChange>,
    /// Devices of the earlier run the later does not have.
    pub missing: Vec<String>,
    /// Devices of the later run the earlier did not have.
    pub added: Vec<String>,
    /// The runs that did not go to their end (one still running, killed, or stopped by a
    /// signal), each said with its directory: what they lack cannot be compared, so the
    /// comparison is inconclusive, never "nothing worse".
    pub unfinished: Vec<String>,
    /// How the two runs were asked for differently (profile, time budget, workloads and
    /// their settings): their rates are then not measured the same way.
    pub warnings: Vec<String>,
    /// 0 nothing worse; 1 new hardware findings or grown error counters; 2 new
    /// environment findings; 3 new software findings; 4 a device is missing or a run
    /// unfinished; 5 only a
    /// drift: a rate slower beyond the tolerance and the runs' own noise.
    pub exit_code: i32,
}

fn serial(d: &DeviceReport) -> Option<&str> {
    d.setup
        .identity
        .get(signals::SERIAL.name)
        .and_then(crate::telemetry::record::Reading::text)
        .filter(|s| !s.is_empty())
}

fn label(d: &DeviceReport) -> String {
    format!("GPU{} {} [{}]", d.index, d.name, d.uuid)
}

/// How much `rate` moved within one run, as a share of its median: the spread between
/// the 10th and 90th percentiles of the samples taken as it ran (compute, matrix, the VRAM
/// test's sweeps), or for PCIe the sustained phase's slowest round against its median. 0
/// when the run kept too few samples to tell.
fn spread(d: &DeviceReport, rate: &str) -> f64 {
    let mut samples: Vec<f64> = d
        .rate_samples
        .iter()
        .filter(|s| s.name == rate && s.value.is_finite() && s.value > 0.0)
        .map(|s| s.value)
        .collect();
    if samples.len() >= 3 {
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        let median = at(0.5);
        return if median > 0.0 {
            (at(0.9) - at(0.1)) / median
        } else {
            0.0
        };
    }
    if rate.starts_with("pcie_") {
        return d
            .workloads
            .iter()
            .find_map(|w| match &w.summary {
                crate::workload::WorkloadResult::Pcie(p) => p.sustained.as_ref(),
                _ => None,
            })
            .filter(|s| s.h2d_gbps > 0.0)
            .map_or(0.0, |s| {
                ((s.h2d_gbps - s.min_h2d_gbps) / s.h2d_gbps).max(0.0)
            });
    }
    0.0
}

/// The runs' own noise beside a drift, when they measured one.
fn noise_said(noise: f64) -> String {
    if noise > 0.0 {
        format!(", beyond the runs' own noise of {:.0}%", noise * 100.0)
    } else {
        String::new()
    }
}

/// Compares two run directories.
pub fn compare(before: &Path, after: &Path, tolerance: f64) -> Result<Comparison, VerdictError> {
    let (ea, eb) = (RunEvidence::read(before)?, RunEvidence::read(after)?);
    // Each run by its own thresholds: the verdict it gave, not one judged anew.
    let (a, b) = (
        judge_evidence(&ea, None, None)?,
        judge_evidence(&eb, None, None)?,
    );
    let mut c = compare_reports(&a, &b, &ea.last_counters(), &eb.last_counters(), tolerance);
    c.warnings = differences(&ea.manifest.settings, &eb.manifest.settings);
    Ok(c)
}

/// How two runs' settings differ in what their rates depend on, in words.
fn differences(a: &RunSettings, b: &RunSettings) -> Vec<String> {
    let mut out = Vec::new();
    if a.profile != b.profile {
        let shown = |p: &Option<String>| p.clone().unwrap_or_else(|| "none".into());
        out.push(format!(
            "the runs used different profiles ({} then {}): their rates are not measured the same way",
            shown(&a.profile),
            shown(&b.profile)
        ));
    }
    if a.duration_s != b.duration_s {
        let budget = |v: Option<f64>| match v {
            Some(s) => format!("{s:.0} s"),
            None => "none, a fixed number of passes".into(),
        };
        out.push(format!(
            "the runs had different time budgets ({} then {}): rates from runs of different lengths are not comparable",
            budget(a.duration_s),
            budget(b.duration_s)
        ));
    }
    // Plans compare as they are written: the same workloads, settings and shares.
    if a.plan != b.plan {
        out.push(
            "the runs planned different workloads or settings (sizes, algorithms, shapes): their rates are not measured the same way".into(),
        );
    }
    out
}

/// Compares two reports, given each device's last counters.
pub fn compare_reports(
    a: &Report,
    b: &Report,
    counters_a: &BTreeMap<usize, BTreeMap<String, f64>>,
    counters_b: &BTreeMap<usize, BTreeMap<String, f64>>,
    tolerance: f64,
) -> Comparison {
    let mut devices = Vec::new();
    let mut matched_a = Vec::new();
    let mut added = Vec::new();
    for db in &b.devices {
        let by_uuid = a.devices.iter().find(|da| da.uuid == db.uuid);
        let by_serial =
            || serial(db).and_then(|s| a.devices.iter().find(|da| serial(da) == Some(s)));
        let (da, how) = match (by_uuid, by_serial()) {
            (Some(d), _) => (d, "uuid"),
            (None, Some(d)) => (d, "serial"),
            (None, None) => {
                added.push(label(db));
                continue;
            }
        };
        matched_a.push(da.index);
        let codes_a: Vec<FindingCode> = da.findings.iter().map(|f| f.code).collect();
        let codes_b: Vec<FindingCode> = db.findings.iter().map(|f| f.code).collect();
        let new_findings = db
            .findings
            .iter()
            .filter(|f| f.class != Class::Info && !codes_a.contains(&f.code))
            .map(|f| NewFinding {
                code: f.code,
                class: f.class,
                summary: f.summary.clone(),
            })
            .collect();
        let mut gone_findings: Vec<FindingCode> = codes_a
            .iter()
            .filter(|c| !codes_b.contains(c))
            .copied()
            .collect();
        gone_findings.dedup();
        let (ra, rb) = (rates(&da.workloads), rates(&db.workloads));
        let mut slower = Vec::new();
        let mut faster = Vec::new();
        for (name, after) in &rb {
            let Some((_, before)) = ra.iter().find(|(n, _)| n == name) else {
                continue;
            };
            let change = (after - before) / before;
            let noise = spread(da, name).max(spread(db, name));
            let drift = Drift {
                rate: name.to_string(),
                before: *before,
                after: *after,
                change,
                noise,
            };
            let beyond = tolerance.max(noise);
            if change < -beyond {
                slower.push(drift);
            } else if change > beyond {
                faster.push(drift);
            }
        }
        let empty = BTreeMap::new();
        let (ca, cb) = (
            counters_a.get(&da.index).unwrap_or(&empty),
            counters_b.get(&db.index).unwrap_or(&empty),
        );
        let counters_grown = LIFETIME_COUNTERS
            .iter()
            .filter_map(|k| {
                let (x, y) = (ca.get(*k)?, cb.get(*k)?);
                (y > x).then(|| Growth {
                    counter: k.to_string(),
                    before: *x,
                    after: *y,
                })
            })
            .collect();
        devices.push(DeviceChange {
            name: db.name.clone(),
            uuid: db.uuid.clone(),
            matched_by: how.into(),
            result_before: da.result.word().to_lowercase(),
            result_after: db.result.word().to_lowercase(),
            new_findings,
            gone_findings,
            slower,
            faster,
            counters_grown,
        });
    }
    let missing: Vec<String> = a
        .devices
        .iter()
        .filter(|d| !matched_a.contains(&d.index))
        .map(label)
        .collect();
    let worse = |d: &DeviceChange| -> Option<i32> {
        let class_code = |c: Class| match c {
            Class::Hardware => exit_code::HARDWARE,
            Class::Environment => exit_code::ENVIRONMENT,
            Class::CouldNotTest => exit_code::INCONCLUSIVE,
            _ => exit_code::SOFTWARE,
        };
        let mut codes: Vec<i32> = d.new_findings.iter().map(|f| class_code(f.class)).collect();
        if !d.counters_grown.is_empty() {
            codes.push(exit_code::HARDWARE);
        }
        if !d.slower.is_empty() {
            codes.push(exit_code::DRIFT);
        }
        codes.into_iter().min()
    };
    let unfinished: Vec<String> = [("earlier", a), ("later", b)]
        .into_iter()
        .filter_map(|(which, r)| {
            unfinished(r).map(|why| format!("the {which} run, {}, {why}", r.run_dir))
        })
        .collect();
    let mut exit = devices.iter().filter_map(worse).min();
    if !missing.is_empty() || !unfinished.is_empty() {
        exit = Some(exit.map_or(exit_code::INCONCLUSIVE, |e| e.min(exit_code::INCONCLUSIVE)));
    }
    Comparison {
        before: a.run_dir.clone(),
        after: b.run_dir.clone(),
        tolerance,
        devices,
        missing,
        added,
        unfinished,
        warnings: Vec::new(),
        exit_code: exit.unwrap_or(exit_code::HEALTHY),
    }
}

/// Why the run of report `r` did not go to its end, in words; None where it did.
fn unfinished(r: &Report) -> Option<&'static str> {
    if r.interrupted {
        Some("was stopped by a signal: what it did not run cannot be compared")
    } else if r.incomplete {
        Some(
            "did not finish (it is still running, or it was killed): its evidence stops part way, so what it lacks cannot be compared",
        )
    } else {
        None
    }
}

/// The comparison for people.
pub fn summary(c: &Comparison) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compare: {} -> {} (rates may move {:.0}%)",
        crate::text::printable(&c.before),
        crate::text::printable(&c.after),
        c.tolerance * 100.0
    );
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for d in &c.devices {
        let _ = writeln!(
            out,
            "{} [{}] (matched by {}): {} -> {}",
            d.name, d.uuid, d.matched_by, d.result_before, d.result_after
        );
        for f in &d.new_findings {
            let _ = writeln!(out, "  new {} ({}): {}", f.code, f.class.word(), f.summary);
        }
        for code in &d.gone_findings {
            let _ = writeln!(out, "  gone {code}");
        }
        for s in &d.slower {
            let _ = writeln!(
                out,
                "  slower {}: {} -> {} ({:+.0}%{})",
                crate::units::rate_words(&s.rate),
                crate::units::rate_said(&s.rate, s.before),
                crate::units::rate_said(&s.rate, s.after),
                s.change * 100.0,
                noise_said(s.noise)
            );
        }
        for s in &d.faster {
            let _ = writeln!(
                out,
                "  faster {}: {} -> {} ({:+.0}%{})",
                crate::units::rate_words(&s.rate),
                crate::units::rate_said(&s.rate, s.before),
                crate::units::rate_said(&s.rate, s.after),
                s.change * 100.0,
                noise_said(s.noise)
            );
        }
        for g in &d.counters_grown {
            let _ = writeln!(out, "  grew {}: {} -> {}", g.counter, g.before, g.after);
        }
        if d.new_findings.is_empty() && d.slower.is_empty() && d.counters_grown.is_empty() {
            let _ = writeln!(
                out,
                "  {}",
                if c.unfinished.is_empty() {
                    "nothing worse"
                } else {
                    "nothing worse in what both runs hold (a run is unfinished)"
                }
            );
        }
    }
    for u in &c.unfinished {
        let _ = writeln!(out, "unfinished: {u}");
    }
    for m in &c.missing {
        let _ = writeln!(out, "missing: {m} is not in the later run");
    }
    for a in &c.added {
        let _ = writeln!(out, "added: {a} was not in the earlier run");
    }
    let _ = writeln!(
        out,
        "exit {}{}",
        c.exit_code,
        match c.exit_code {
            exit_code::DRIFT => ": a drift, not a fault (no new finding, no error counter grew)",
            exit_code::HEALTHY => ": nothing worse",
            exit_code::INCONCLUSIVE if !c.unfinished.is_empty() =>
                ": inconclusive, a run is unfinished",
            exit_code::INCONCLUSIVE if !c.missing.is_empty() =>
                ": inconclusive, a device is missing",
            _ => "",
        }
    );
    out
}

/// `kiln compare`.
pub fn command(args: crate::cmd::cli::CompareArgs) -> Result<i32, crate::error::AppError> {
    let c = compare(&args.before, &args.after, args.tolerance / 100.0)
        .map_err(|e| crate::error::AppError::Usage(e.to_string()))?;
    crate::cmd::edge::print_result(args.json, &c, &summary(&c));
    Ok(c.exit_code)
}
