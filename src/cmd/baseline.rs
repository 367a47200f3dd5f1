//! `kiln baseline`: floors per product and rate from the run directories of a fleet's
//! healthy cards ([`crate::verdict::baseline`]), written as a thresholds file, and the cards
//! across every node given that fall behind them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::AppError;
use crate::exit_code;
use crate::finding::{Class, FindingCode, Severity};
use crate::telemetry::signals;
use crate::thresholds::Thresholds;
use crate::units::{rate_said as said, rate_words};
use crate::verdict::baseline::{self, Behind, Built, CardId, Fleet, Measured, ProductFloors};

/// Where run directories may lie below a folder given: a node's folder of runs in a
/// shared directory (`runs/node07/2026-12-01T10-00-00`), at most this deep.
const SEARCH_DEPTH: usize = 3;

/// What `kiln baseline` found, as `--json` prints it.
#[derive(Debug, Serialize)]
pub struct BaselineReport {
    /// The run directories read.
    pub runs: usize,
    /// Every card read, each once (its latest run), with its rates.
    pub devices: Vec<Measured>,
    /// The other runs of a card read more than once, each with the run that counts.
    pub repeated: Vec<String>,
    /// The floors, what had too few cards, and the devices not used.
    pub built: Built,
    /// With `--judge`: the devices behind their product's floor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub behind: Option<Vec<Behind>>,
    /// Run directories that could not be read, each with why.
    pub unreadable: Vec<String>,
    /// The exit code.
    pub exit_code: i32,
    /// The floors file written (`--out`), if one was: none when no floor was drawn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floors_written: Option<PathBuf>,
    /// The floors file judged against (`--against`), if one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub against: Option<PathBuf>,
}

/// The thresholds file a baseline writes: what `--thresholds` reads.
#[derive(Serialize)]
struct FloorsFile<'a> {
    baseline: &'a BTreeMap<String, ProductFloors>,
}

/// The run directories at or below `path`: `path` itself when it holds a manifest, else
/// those in the folders below it.
fn run_dirs(path: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if path.join("manifest.json").is_file() {
        out.push(path.to_owned());
        return;
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        run_dirs(&d, depth - 1, out);
    }
}

/// `dirs` each once, in the order found: a run directory given twice, or reached twice
/// (through a link, or as a folder given and a folder inside it), is one run.
fn distinct(dirs: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = std::collections::BTreeSet::new();
    dirs.into_iter()
        .filter(|dir| seen.insert(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone())))
        .collect()
}

/// Refuses an `--out` that would replace a file of a run: one inside a run directory (a
/// folder holding a manifest.json, the run's own files or any folder below it, followed
/// through links), or a run directory itself. A floors file belongs beside the runs, and a
/// run's evidence is never written over.
fn out_usable(out: &Path) -> Result<(), AppError> {
    // Where the file would go, as the system resolves it: the nearest folder above it that
    // exists, its links followed, with the rest of the path laid on it; and where an
    // existing file (a link) points.
    let mut existing = out;
    let mut rest = Vec::new();
    while !existing.exists() {
        let (Some(parent), Some(name)) = (existing.parent(), existing.file_name()) else {
            break;
        };
        rest.push(name);
        existing = parent;
    }
    let base = if existing.as_os_str().is_empty() {
        Path::new(".")
    } else {
        existing
    };
    let mut resolved = std::fs::canonicalize(base).unwrap_or_else(|_| base.to_owned());
    resolved.extend(rest.iter().rev());
    let targets = [Some(resolved), std::fs::canonicalize(out).ok()];
    for target in targets.iter().flatten() {
        if let Some(run) = target
            .ancestors()
            .find(|a| a.join("manifest.json").is_file())
        {
            return Err(AppError::Usage(format!(
                "--out {} lies inside the run directory {}: write the floors outside every run directory",
                out.display(),
                run.display()
            )));
        }
    }
    Ok(())
}

/// The findings that do not keep a card out of a baseline: its rates against the product's
/// figures and its peers, which the baseline judges again, and notes.
fn keeps_it_healthy(code: FindingCode, class: Class, severity: Severity) -> bool {
    matches!(class, Class::Info)
        || severity >= Severity::Minor
        || matches!(
            code,
            FindingCode::VramBandwidthLow
                | FindingCode::ComputeRateLow
                | FindingCode::RateBelowSpecShare
                | FindingCode::PeerSlower
        )
}

/// Every GPU of the run at `dir`, as a baseline reads it.
fn measured(dir: &Path) -> Result<Vec<Measured>, String> {
    let evidence = crate::rundir::RunEvidence::read(dir).map_err(|e| e.to_string())?;
    let report =
        crate::verdict::judge_evidence(&evidence, None, None).map_err(|e| e.to_string())?;
    let node = evidence.manifest.host.clone();
    let started_utc = evidence.manifest.started_utc.clone();
    Ok(report
        .devices
        .iter()
        .filter(|d| d.kind.is_gpu() && !d.stand_in)
        .map(|d| {
            let mut runs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for w in &d.workloads {
                // Rates beside another load, or of a run cut short, are not the card's.
                if !w.reported() || w.together_with().is_some() || w.summary.envelope().cut_short()
                {
                    continue;
                }
                for (name, value) in w.summary.rates() {
                    runs.entry(name.to_owned()).or_default().push(value);
                }
            }
            let against: Vec<&str> = d
                .findings
                .iter()
                .filter(|f| !keeps_it_healthy(f.code, f.class, f.severity))
                .map(|f| f.code.name())
                .collect();
            Measured {
                node: node.clone(),
                run: crate::text::printable(&dir.display().to_string()).into_owned(),
                index: d.index,
                uuid: d.uuid.clone(),
                card: CardId::of(
                    &node,
                    d.setup.identity_text(signals::UUID),
                    d.setup.vendor_id,
                    &d.uuid,
                    d.setup.identity_text(signals::SERIAL),
                ),
                started_utc: started_utc.clone(),
                product: d.name.clone(),
                driver: d
                    .setup
                    .identity_text(signals::DRIVER_VERSION)
                    .map_or_else(|| d.driver.clone(), str::to_owned),
                unhealthy: (!against.is_empty()).then(|| against.join(", ")),
                rates: runs
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, crate::verdict::rules::rates::median(v)?)))
                    .collect(),
            }
        })
        .collect())
}

/// A card behind its fleet: where (node, GPU, UUID), the rate in words and units against
/// the fleet's, and the run directory that holds its own evidence of why.
fn behind_line(b: &Behind) -> String {
    format!(
        "{} GPU{} {}: {} {}, {:.0}% below the fleet's median {} (floor {}); its run: {}",
        b.node,
        b.index,
        b.uuid,
        rate_words(&b.rate),
        said(&b.rate, b.value),
        100.0 * b.share_below_median,
        said(&b.rate, b.median),
        said(&b.rate, b.floor),
        crate::text::printable(&b.run)
    )
}

/// Whether the build drew no floor at all (too few cards for any).
fn no_floor(built: &Built) -> bool {
    built.products.values().all(|p| p.rates.is_empty())
}

/// The summary for people.
pub fn summary(r: &BaselineReport, out: Option<&Path>) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} read: {}",
        crate::text::count(r.runs as u64, "run"),
        crate::text::count(r.devices.len() as u64, "GPU")
    );
    for line in &r.unreadable {
        let _ = writeln!(s, "not read: {line}");
    }
    for line in &r.repeated {
        let _ = writeln!(s, "counted once: {line}");
    }
    for (product, p) in &r.built.products {
        let _ = writeln!(
            s,
            "{product}: {} (drivers {})",
            p.source,
            p.drivers.join(", ")
        );
        for (rate, f) in &p.rates {
            let _ = writeln!(
                s,
                "  {}: floor {}, median {} of {} cards, spread {}",
                rate_words(rate),
                said(rate, f.floor),
                said(rate, f.median),
                f.cards,
                said(rate, f.sigma)
            );
        }
        for b in &p.left_out {
            let _ = writeln!(s, "  left out: {}", behind_line(b));
        }
    }
    for line in &r.built.too_few {
        let _ = writeln!(s, "no floor: {line}");
    }
    for line in &r.built.not_used {
        let _ = writeln!(s, "not used (not healthy): {line}");
    }
    if let Some(behind) = &r.behind {
        if behind.is_empty() {
            let _ = writeln!(s, "behind the fleet: none");
        }
        for b in behind {
            let _ = writeln!(s, "behind the fleet: {}", behind_line(b));
        }
    }
    match out {
        _ if no_floor(&r.built) && r.against.is_none() => {
            let _ = writeln!(
                s,
                "no floor written: too few healthy cards for any floor (each rests on at least {} cards of one product){}",
                baseline::MIN_CARDS,
                out.map(|p| format!("; {} left as it was", p.display()))
                    .unwrap_or_default()
            );
        }
        _ => {
            if let Some(path) = &r.floors_written {
                let _ = writeln!(
                    s,
                    "floors written to {} (use it with --thresholds)",
                    path.display()
                );
            }
        }
    }
    s
}

/// `kiln baseline`.
pub fn command(args: crate::cmd::cli::BaselineArgs) -> Result<i32, AppError> {
    let mut dirs = Vec::new();
    for path in &args.runs {
        if !path.is_dir() {
            return Err(AppError::Usage(format!(
                "{} is not a directory of runs",
                path.display()
            )));
        }
        let before = dirs.len();
        run_dirs(path, SEARCH_DEPTH, &mut dirs);
        if dirs.len() == before {
            return Err(AppError::Usage(format!(
                "{} holds no run directory (none with a manifest.json at most {SEARCH_DEPTH} folders down)",
                path.display()
            )));
        }
    }
    let dirs = distinct(dirs);
    if let Some(out) = &args.out {
        out_usable(out)?;
    }
    let against: Option<Thresholds> = match &args.against {
        Some(_) => Some(crate::cmd::edge::thresholds(&args.against)?),
        None => None,
    };
    let mut devices = Vec::new();
    let mut unreadable = Vec::new();
    for dir in &dirs {
        match measured(dir) {
            Ok(found) => devices.extend(found),
            Err(why) => unreadable
                .push(crate::text::printable(&format!("{}: {why}", dir.display())).into_owned()),
        }
    }
    let fleet = Fleet::of(devices);
    let date = crate::evidence::utc_timestamp(std::time::SystemTime::now());
    let built = baseline::build(&fleet, date.get(..10).unwrap_or(&date));
    let floors = match &against {
        Some(t) => &t.baseline,
        None => &built.products,
    };
    let behind = (args.judge || against.is_some()).then(|| baseline::behind(&fleet, floors));
    // Too few cards for any floor: nothing is written, and the file says so by its absence
    // (never "floors written" over an empty one).
    let drew_none = no_floor(&built) && against.is_none();
    if let Some(path) = args.out.as_ref().filter(|_| !drew_none) {
        let text = serde_json::to_vec_pretty(&FloorsFile {
            baseline: &built.products,
        })
        .map_err(|e| AppError::Usage(format!("the floors could not be written: {e}")))?;
        crate::fsutil::write_atomic(path, &text).map_err(|e| {
            AppError::Usage(format!(
                "{}: the floors could not be written: {e}",
                path.display()
            ))
        })?;
    }
    let exit = if fleet.cards.is_empty() || drew_none {
        exit_code::INCONCLUSIVE
    } else if behind.as_ref().is_some_and(|b| !b.is_empty()) {
        exit_code::ENVIRONMENT
    } else {
        exit_code::HEALTHY
    };
    let report = BaselineReport {
        runs: dirs.len(),
        devices: fleet.cards,
        repeated: fleet.repeated,
        built,
        behind,
        unreadable,
        exit_code: exit,
        floors_written: args.out.clone().filter(|_| !drew_none),
        against: args.against.clone(),
    };
    let text = summary(&report, args.out.as_deref());
    crate::cmd::edge::print_result(args.json, &report, &text);
    Ok(exit)
}
