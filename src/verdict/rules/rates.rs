//! The card against its product: every rate a workload measured held to the product's floor
//! ([`crate::product`]), and the settings that hold a card below what its product does (an
//! administrator's power cap, locked clocks, a sync-boost group), as one rule whichever rate
//! or clock shows it. A rate below its floor is the configuration's where a setting held the
//! clocks, the environment's where heat, power or other tenants did, and the card's only
//! where nothing explains it.

use crate::finding::{
    Confidence, Figure, Finding, FindingCode, RateName, Severity, evidence, finding,
};
use crate::product::{self, Product, Provenance, Rate};
use crate::telemetry::process::Process;
use crate::telemetry::record::Reading;
use crate::telemetry::signals::{self, Signal};
use crate::telemetry::summary::PhaseTelemetry;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::workload::WorkloadOutcome;

use super::settings::{HEAT_AND_POWER, Held, OWN_LIMITS, held_for_heat, loaded, settings_in};

crate::evidence! {
    /// A rate against its floor, with where the floor comes from: the evidence of every
    /// finding of a slow rate. Every figure is in `unit`, the product's (GB/s, TFLOP/s), as
    /// the finding's sentence says them: one number per fact.
    struct AgainstFloor {
        rate: RateName<'static> => hidden,
        unit: &'static str => hidden,
        measured: Figure => "Measured",
        floor: Figure => "Floor",
        floor_source: String => "Floor from",
        floor_provenance: Provenance => "Floor rests on",
        reference: Option<Figure> => "Healthy card's rate",
        spec: Option<Figure> => "Spec sheet (as kiln's kernel issues it)",
    }
    title(r) = crate::units::rate_words(r.rate.0);
}

impl AgainstFloor {
    /// `measured` against `floor`, both in the workload's unit.
    fn new(rate: Rate, measured: f64, floor: &Floor) -> AgainstFloor {
        let in_spec = |v: f64| Figure {
            value: rate.to_spec_unit(v),
            unit: rate.spec_unit(),
        };
        AgainstFloor {
            rate: RateName(rate.name()),
            unit: rate.spec_unit(),
            measured: in_spec(measured),
            floor: in_spec(floor.value),
            floor_source: floor.source.clone(),
            floor_provenance: floor.provenance,
            reference: floor.reference.map(in_spec),
            spec: floor.spec.map(in_spec),
        }
    }
}

crate::evidence! {
    /// The evidence of the slow rates of one run: the phase, each rate against its floor,
    /// and what in the environment explains them.
    struct BelowFloors<'a> {
        phase: &'a str => "Phase",
        explained_by: &'a [String] => "Explained by",
        rates: &'a [AgainstFloor] => "Rates",
    }
}

crate::evidence! {
    /// The evidence of `PRODUCT_UNKNOWN`.
    struct Unknown<'a> {
        name: &'a str => "Name",
    }
}

/// A rate's floor on this device: the site's own, else the product's reference times
/// `floor_share`. In the workload's unit, with its source and where it comes from.
struct Floor {
    value: f64,
    source: String,
    provenance: Provenance,
    /// The product's reference, in the workload's unit, where the floor rests on it.
    reference: Option<f64>,
    /// The spec sheet's figure as kiln's kernel can issue it, in the workload's unit.
    spec: Option<f64>,
}

impl Floor {
    /// How sure a rate `measured` below this floor is slow: a floor that rests on a share
    /// nobody measured on a GPU decides nothing (None: a note); below a measured or the
    /// site's floor it is a call (medium), and a sure one at two thirds of the floor or
    /// less (half the reference at DCGM's 0.75), or below the site's baseline (the same
    /// product's healthy cards, with their drivers and cooling, reach it).
    fn confidence(&self, measured: f64) -> Option<Confidence> {
        match self.provenance {
            Provenance::SpecShare => None,
            Provenance::Baseline => Some(Confidence::High),
            _ if measured <= self.value * 2.0 / 3.0 => Some(Confidence::High),
            _ => Some(Confidence::Medium),
        }
    }
}

/// A rate's floor on the device called `name`: the site's baseline for its product, else
/// the site's floor for the rate, else the product's reference times `floor_share`.
fn floor_of(name: &str, product: Option<&Product>, rate: Rate, t: &Thresholds) -> Option<Floor> {
    let reference = product.and_then(|p| p.reference(rate));
    let unit = rate.to_spec_unit(1.0);
    if let Some((floors, f)) = t
        .baseline
        .get(name)
        .and_then(|b| b.rates.get(rate.name()).map(|f| (b, f)))
    {
        return Some(Floor {
            value: f.floor,
            source: floors.source.clone(),
            provenance: Provenance::Baseline,
            reference: reference.as_ref().map(|r| r.value / unit),
            spec: reference.map(|r| r.spec / unit),
        });
    }
    let site = match rate {
        Rate::Vram if t.vram_floor_gbps > 0.0 => Some((
            t.vram_floor_gbps / rate.to_spec_unit(1.0),
            "the site's floor (vram_floor_gbps)".to_owned(),
        )),
        _ => t
            .floors
            .get(rate.name())
            .map(|v| (*v, format!("the site's floor (floors.{})", rate.name()))),
    };
    match (site, reference) {
        (Some((value, source)), reference) => Some(Floor {
            value,
            source,
            provenance: Provenance::Site,
            reference: reference.as_ref().map(|r| r.value / unit),
            spec: reference.map(|r| r.spec / unit),
        }),
        (None, Some(reference)) => Some(Floor {
            value: t.floor_share * reference.value / unit,
            source: format!("{:.0}% of {}", 100.0 * t.floor_share, reference.source),
            provenance: reference.provenance,
            reference: Some(reference.value / unit),
            spec: Some(reference.spec / unit),
        }),
        (None, None) => None,
    }
}

/// A rate in the product's unit, in words: `fp32 compute 41.0 TFLOP/s` (giga below one
/// tera, for a CPU device's).
fn said(rate: Rate, measured: f64) -> String {
    let (v, unit) = in_unit(rate, measured, measured);
    let digits = if v >= 100.0 { 0 } else { 1 };
    format!("{} {v:.digits$} {unit}", rate.label())
}

/// A measured value in the unit a reference value reads best in: the product's
/// (`TFLOP/s`), or giga where the reference is below one tera (a CPU device's).
fn in_unit(rate: Rate, value: f64, reference: f64) -> (f64, String) {
    let unit = rate.spec_unit();
    match unit.strip_prefix('T') {
        Some(rest) if rate.to_spec_unit(reference) < 1.0 => {
            (rate.to_spec_unit(value) * 1e3, format!("G{rest}"))
        }
        _ => (rate.to_spec_unit(value), unit.to_owned()),
    }
}

/// The memory at its hottest under load where it came within `thermal_margin_c` of its
/// rated limit (the driver's, or the product's published one): the phase, the memory's
/// and the GPU's highest temperatures and the limit, °C. None where no memory sensor was
/// read, no limit is known, it stayed cooler, or it reached the limit where the throttle
/// status was read (that status, and the thresholds a site sets for it, judge whether it
/// slowed the card).
pub fn memory_near_limit<'a>(
    device: &'a DeviceEvidence,
    t: &Thresholds,
) -> Option<(&'a PhaseTelemetry, f64, Option<f64>, f64)> {
    let limit = device
        .setup
        .identity_of(signals::TEMP_MEM_MAX_C)
        .and_then(Reading::number)
        .or_else(|| product::lookup(&device.name).and_then(|p| p.memory_temp_limit_c))?;
    let (phase, hottest) = device
        .telemetry
        .iter()
        .filter(|p| loaded(p))
        .filter_map(|p| Some((p, p.gauge(signals::HBM_TEMP_C)?.max)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let gpu = phase.gauge(signals::GPU_TEMP_C).map(|g| g.max);
    let judged_by_status = hottest >= limit && phase.reasons_read > 0;
    (hottest >= limit - t.thermal_margin_c && !judged_by_status)
        .then_some((phase, hottest, gpu, limit))
}

/// Whether any phase read the GPU's temperature but none its memory's: a card whose
/// memory has no sensor the driver shows (a GeForce's GDDR6X through NVML, which reads
/// HBM parts only).
pub fn memory_temperature_unread(telemetry: &[PhaseTelemetry]) -> bool {
    let read = |signal: Signal| telemetry.iter().any(|p| p.gauge(signal).is_some());
    read(signals::GPU_TEMP_C) && !read(signals::HBM_TEMP_C)
}

/// A process that started using the GPU during the test.
pub struct Arrival<'a> {
    /// The process (the most memory it held in the phase).
    pub process: Process,
    /// The phase it was first seen in.
    pub phase: &'a PhaseTelemetry,
    /// When, ms since the run started.
    pub first_ms: f64,
}

/// The processes that started using the GPU during the test (not among `tenants`, those
/// there at the start), each once, in the phase it was first seen in.
pub fn arrivals<'a>(device: &'a DeviceEvidence, tenants: &[Process]) -> Vec<Arrival<'a>> {
    let mut out: Vec<Arrival> = Vec::new();
    for p in &device.telemetry {
        for process in &p.other_processes {
            let pid = process.pid;
            if tenants.iter().any(|t| t.pid == pid) || out.iter().any(|a| a.process.pid == pid) {
                continue;
            }
            out.push(Arrival {
                process: process.clone(),
                phase: p,
                first_ms: p
                    .processes_first_ms
                    .get(&pid)
                    .copied()
                    .unwrap_or(p.start_ms),
            });
        }
    }
    out
}

/// The median of some values; None of none.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// The median of a rate over the samples of a phase's window before (or from) a moment.
fn rate_between(device: &DeviceEvidence, name: &str, from_ms: f64, to_ms: f64) -> Option<f64> {
    median(
        device
            .rate_samples
            .iter()
            .filter(|r| r.name == name && r.t_ms >= from_ms && r.t_ms < to_ms)
            .map(|r| r.value)
            .collect(),
    )
}

/// How far from a process's first sighting a rate sample is still not clearly on one side
/// of its arrival: the process list is read once a second (it may have come up to a second
/// before it was seen), and a rate sample covers the second before it.
const ARRIVAL_BLUR_MS: f64 = 1000.0;

/// What a process's arrival did to the rates of its phase, for every rate measured clearly
/// on both sides of it: in words (`fp32 compute 50.1 TFLOP/s before it, 24.9 after
/// (-50%)`), and the change as a share (-0.5).
pub fn before_and_after(device: &DeviceEvidence, a: &Arrival) -> Vec<(String, f64)> {
    let mut names: Vec<&str> = device
        .rate_samples
        .iter()
        .filter(|r| r.t_ms >= a.phase.start_ms && r.t_ms <= a.phase.end_ms)
        .map(|r| r.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let before =
                rate_between(device, name, a.phase.start_ms, a.first_ms - ARRIVAL_BLUR_MS)?;
            let after = rate_between(
                device,
                name,
                a.first_ms + ARRIVAL_BLUR_MS,
                a.phase.end_ms + 1.0,
            )?;
            let share = after / before - 1.0;
            let change = 100.0 * share;
            // Both in the first one's unit, the rate named once.
            let words = match Rate::from_name(name) {
                Some(rate) => {
                    let ((b, unit), (a, _)) =
                        (in_unit(rate, before, before), in_unit(rate, after, before));
                    format!(
                        "{} {b:.1} {unit} before it, {a:.1} after ({change:+.0}%)",
                        rate.label()
                    )
                }
                None => format!("{name} {before:.1} before it, {after:.1} after ({change:+.0}%)"),
            };
            Some((words, share))
        })
        .collect()
}

/// Whether a rate of any run fell below its floor with the processes `tenants` on the GPU
/// (a floor that rests on a share nobody measured left out, as the rate rule leaves it):
/// what those there from the start may have cost, whatever else the rate rule names.
pub fn slow_beside(device: &DeviceEvidence, t: &Thresholds, tenants: &[Process]) -> bool {
    let (mut held, mut slow) = (Vec::new(), Vec::new());
    for (w, phase) in super::runs(device) {
        rates_of_run(device, w, phase, t, tenants, &mut held, &mut slow);
    }
    !held.is_empty()
        || slow.iter().any(|f| {
            matches!(
                f.code,
                FindingCode::ComputeRateLowThrottled
                    | FindingCode::BandwidthLowThrottled
                    | FindingCode::ComputeRateLow
                    | FindingCode::VramBandwidthLow
            )
        })
}

/// What in a phase explains a slow rate that no setting does: clocks throttled for heat or
/// power (the card at its own power limit included), heat where no throttle status was
/// read, or other processes on the GPU.
fn environment_explanation(
    p: Option<&PhaseTelemetry>,
    setup: &crate::verdict::Setup,
    t: &Thresholds,
    tenants: usize,
) -> Vec<String> {
    let mut why: Vec<String> = p
        .map(|p| {
            HEAT_AND_POWER
                .iter()
                .chain(OWN_LIMITS.iter())
                .filter_map(|r| {
                    let share = p.throttle_share_of(*r);
                    (share > t.throttle_share).then(|| {
                        format!(
                            "{} {:.0}% of the {} phase",
                            r.label(),
                            share * 100.0,
                            p.phase
                        )
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(hot) = p.and_then(|p| held_for_heat(p, setup, t)) {
        why.push(hot);
    }
    if tenants > 0 {
        why.push(if tenants == 1 {
            "another process on the GPU".to_owned()
        } else {
            format!("{tenants} other processes on the GPU")
        });
    }
    why
}

/// The codes of a slow rate: unexplained (the card), and explained by the environment.
fn codes(rate: Rate) -> (FindingCode, FindingCode) {
    match rate {
        Rate::Vram => (
            FindingCode::VramBandwidthLow,
            FindingCode::BandwidthLowThrottled,
        ),
        _ => (
            FindingCode::ComputeRateLow,
            FindingCode::ComputeRateLowThrottled,
        ),
    }
}

/// One run of a workload's rates against its product's floors. A rate a setting explains
/// goes into `held` (the configuration's finding names every rate it held); the rest give
/// their findings here, per run, so that reruns count.
pub fn rates_of_run(
    device: &DeviceEvidence,
    w: &WorkloadOutcome,
    phase: Option<&PhaseTelemetry>,
    t: &Thresholds,
    tenants: &[Process],
    held: &mut Vec<Held>,
    out: &mut Vec<Finding>,
) {
    // Rates measured beside another load, or by a run cut short, are not the device's.
    if w.together_with().is_some() || w.summary.envelope().cut_short() {
        return;
    }
    let product = product::lookup(&device.name);
    let settings = phase
        .map(|p| settings_in(p, &device.setup, t))
        .unwrap_or_default();
    let (mut why, arrived) = what_else_held(device, phase, t, tenants);
    // The slow rates of the run by the code they give: each code once, naming every rate.
    let mut slow: Vec<(FindingCode, Vec<String>, Vec<AgainstFloor>, Confidence)> = Vec::new();
    // Rates under a floor that rests on a share nobody measured on a GPU: said, never a call.
    let mut noted: Vec<(String, AgainstFloor)> = Vec::new();
    for (name, measured) in w.summary.rates() {
        let Some(rate) = Rate::from_name(name) else {
            continue;
        };
        let Some(floor) = floor_of(&device.name, product, rate, t) else {
            continue;
        };
        if measured.is_nan() || measured <= 0.0 || measured >= floor.value {
            continue;
        }
        let mut alone_until = String::new();
        let measured = match arrived {
            Some((p, at)) => match rate_between(device, name, p.start_ms, at - ARRIVAL_BLUR_MS) {
                // Fast enough until the other process came: its finding says the rest.
                Some(alone) if alone >= floor.value => continue,
                Some(alone) => {
                    alone_until = " before another process came".into();
                    alone
                }
                None => {
                    let came = format!(
                        "another process that started using the GPU {:.1} s into the phase",
                        (at - p.start_ms) / 1e3
                    );
                    if !why.contains(&came) {
                        why.push(came);
                    }
                    measured
                }
            },
            None => measured,
        };
        let under = shortfall(rate, measured, &floor, product);
        let shown = format!(
            "{}{alone_until}{under} (floor {})",
            said(rate, measured),
            figure(rate, floor.value)
        );
        let evidence = AgainstFloor::new(rate, measured, &floor);
        let Some(confidence) = floor.confidence(measured) else {
            let share = floor
                .spec
                .map(|spec| {
                    format!(
                        ", {:.0}% of the spec sheet's {} {}",
                        100.0 * measured / spec,
                        figure(rate, spec),
                        rate.spec_unit()
                    )
                })
                .unwrap_or_default();
            noted.push((
                format!(
                    "{}{alone_until}{share} (floor {})",
                    said(rate, measured),
                    figure(rate, floor.value)
                ),
                evidence,
            ));
            continue;
        };
        if !settings.is_empty() {
            held.extend(settings.iter().map(|setting| Held {
                setting: setting.clone(),
                phase: w.workload.clone(),
                shown_by: shown.clone(),
            }));
            continue;
        }
        let code = if why.is_empty() {
            codes(rate).0
        } else {
            codes(rate).1
        };
        match slow.iter_mut().find(|(c, ..)| *c == code) {
            Some((_, lines, rates, surest)) => {
                lines.push(shown);
                rates.push(evidence);
                *surest = (*surest).min(confidence);
            }
            None => slow.push((code, vec![shown], vec![evidence], confidence)),
        }
    }
    say_slow(w, &why, noted, slow, out);
}

/// The findings of a run's slow rates: those under a floor nobody measured, a note; the
/// rest by the code they give, a call where nothing explains them.
fn say_slow(
    w: &WorkloadOutcome,
    why: &[String],
    noted: Vec<(String, AgainstFloor)>,
    slow: Vec<(FindingCode, Vec<String>, Vec<AgainstFloor>, Confidence)>,
    out: &mut Vec<Finding>,
) {
    if !noted.is_empty() {
        let (lines, rates): (Vec<String>, Vec<AgainstFloor>) = noted.into_iter().unzip();
        let names: Vec<&str> = rates.iter().map(|r| r.rate.0).collect();
        out.push(finding(
            FindingCode::RateBelowSpecShare,
            Severity::Note,
            Confidence::High,
            format!(
                "{}{}: below a floor that rests on a share of the spec sheet kiln's kernel has not been measured to reach on a GPU, so no call",
                lines.join("; "),
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" (beside {})", why.join(", "))
                }
            ),
            evidence(&BelowFloors {
                phase: &w.workload,
                rates: &rates,
                explained_by: why,
            }),
            &format!(
                "set floors from the site's healthy cards of this product ({} in a --thresholds file) to hold these rates to a measured floor",
                names
                    .iter()
                    .map(|n| format!("floors.{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    for (code, lines, rates, confidence) in slow {
        let evidence = evidence(&BelowFloors {
            phase: &w.workload,
            rates: &rates,
            explained_by: why,
        });
        out.push(if why.is_empty() {
            finding(
                code,
                Severity::Major,
                confidence,
                format!("{}, with nothing to explain it", lines.join("; ")),
                evidence,
                "rerun with the GPU alone, cool and at default clocks; RMA if it stays below the floor",
            )
        } else {
            finding(
                code,
                Severity::Minor,
                Confidence::High,
                format!("{}, explained by {}", lines.join("; "), why.join(", ")),
                evidence,
                "fix what held the card back, then rerun: the card is not shown slow by itself",
            )
        });
    }
}

/// What else held the card back in a run's phase: its environment's explanation (heat,
/// power, other processes there all phase long), and another process that arrived during
/// the phase, with when (its rate is judged on the part before it came).
fn what_else_held<'a>(
    device: &'a DeviceEvidence,
    phase: Option<&'a PhaseTelemetry>,
    t: &Thresholds,
    tenants: &[Process],
) -> (Vec<String>, Option<(&'a PhaseTelemetry, f64)>) {
    let came = arrivals(device, tenants);
    // Other processes on the GPU all phase long: those there when the test started, and
    // those that came before this phase and were still there in it (between the phases,
    // or in an earlier one).
    let through = tenants.len()
        + phase.map_or(0, |p| {
            p.other_processes
                .iter()
                .filter(|o| !tenants.iter().any(|t| t.pid == o.pid))
                .filter(|o| {
                    came.iter()
                        .any(|a| a.process.pid == o.pid && !std::ptr::eq(a.phase, p))
                })
                .count()
        });
    let why = environment_explanation(phase, &device.setup, t, through);
    // Another process that arrived during the phase: the rate is judged on the part of the
    // phase before it came, where there is one; without one, the process explains it.
    let arrived = phase.and_then(|p| {
        came.iter()
            .filter(|a| std::ptr::eq(a.phase, p))
            .map(|a| a.first_ms)
            .min_by(f64::total_cmp)
            .map(|at| (p, at))
    });
    (why, arrived)
}

/// A figure of `rate` in its product's unit, to a tenth below 100.
fn figure(rate: Rate, v: f64) -> String {
    let v = rate.to_spec_unit(v);
    let digits = if v >= 100.0 { 0 } else { 1 };
    format!("{v:.digits$}")
}

/// How far `measured` falls short of what a healthy card of the product reaches, in words:
/// a shortfall of more than half as the share reached ("100% under" of a rate at a
/// thousandth of its reference reads as nonsense).
fn shortfall(rate: Rate, measured: f64, floor: &Floor, product: Option<&Product>) -> String {
    match (floor.reference, product) {
        (Some(r), Some(p)) if measured < 0.5 * r => format!(
            ", {}% of the {} {} a healthy {} reaches",
            crate::units::significant(100.0 * measured / r),
            figure(rate, r),
            rate.spec_unit(),
            p.name
        ),
        (Some(r), Some(p)) => format!(
            ", {:.0}% under the {} {} a healthy {} reaches",
            100.0 * (1.0 - measured / r),
            figure(rate, r),
            rate.spec_unit(),
            p.name
        ),
        _ => String::new(),
    }
}

/// The product rule: a GPU kiln has no figures for.
pub fn product_unknown_rule(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    product_unknown(device, t, &mut out);
    out
}

/// A GPU kiln has no product figures for: its rates were checked for stability, not for
/// speed, said once (unless the site gave a floor for every rate it measured).
pub fn product_unknown(device: &DeviceEvidence, t: &Thresholds, out: &mut Vec<Finding>) {
    if !device.kind.is_gpu() || product::lookup(&device.name).is_some() {
        return;
    }
    let measured: Vec<Rate> = device
        .workloads
        .iter()
        .filter(|w| w.reported())
        .flat_map(|w| w.summary.rates())
        .filter_map(|(name, _)| Rate::from_name(name))
        .collect();
    if measured.is_empty()
        || measured
            .iter()
            .all(|r| floor_of(&device.name, None, *r, t).is_some())
    {
        return;
    }
    out.push(finding(
        FindingCode::ProductUnknown,
        Severity::Note,
        Confidence::High,
        format!(
            "kiln has no product figures for {}: its results were verified and its stability judged, but its rates were not held to a floor",
            device.name
        ),
        evidence(&Unknown { name: &device.name }),
        "set floors (vram_floor_gbps, floors) in a thresholds file from this product's healthy cards",
    ));
}

#[cfg(test)]
mod tests {
    use super::super::testing::{computed_at, said};
    use crate::finding::{Class, Severity};
    use crate::thresholds::Thresholds;

    #[test]
    fn a_gpu_kiln_has_no_figures_for_is_said_once_and_only_then() {
        let t = Thresholds::default();
        let mut unknown = computed_at(20_000.0);
        unknown.name = "Contoso GX 9".into();
        assert_eq!(
            said(&super::product_unknown_rule(&unknown, &t)),
            [("PRODUCT_UNKNOWN", Class::Info, Severity::Note)]
        );
        // The near misses: a product kiln knows, and one whose every rate has a site floor.
        assert!(super::product_unknown_rule(&computed_at(20_000.0), &t).is_empty());
        let floored = Thresholds {
            floors: [
                ("compute_fp32_gops".to_owned(), 1.0),
                ("compute_int32_gops".to_owned(), 1.0),
            ]
            .into(),
            ..Thresholds::default()
        };
        assert!(super::product_unknown_rule(&unknown, &floored).is_empty());
    }
}
