//! The card against its product: every rate a workload measured held to the product's floor
//! ([`crate::product`]), and the settings that hold a card below what its product does (an
//! administrator's power cap, locked clocks, a sync-boost group), as one rule whichever rate
//! or clock shows it. A rate below its floor is the configuration's where a setting held the
//! clocks, the environment's where heat, power or other tenants did, and the card's only
//! where nothing explains it.

use serde::Serialize;

use crate::finding::{Confidence, Finding, FindingCode, Severity, evidence, finding};
use crate::product::{self, Product, Provenance, Rate, Vendor};
use crate::telemetry::process::Process;
use crate::telemetry::record::Reading;
use crate::telemetry::signals::{self, Signal, Values};
use crate::telemetry::summary::{BETWEEN_PHASES, PREFLIGHT, PhaseTelemetry, Stat};
use crate::telemetry::throttle::ThrottleReason;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::workload::WorkloadOutcome;

/// The code of a configuration holding the card below its product.
pub const CONFIG_LIMITS_CARD: FindingCode = FindingCode::ConfigLimitsCard;

/// A setting that can hold a card below what its product does, with what it held.
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    /// An enforced power limit below the card's default, holding the clocks (the software
    /// power cap): an administrator's cap.
    PowerCap {
        /// The limit in force, W.
        enforced_w: f64,
        /// The card's default limit, W.
        default_w: f64,
    },
    /// Locked or application clocks holding the shader clock (the applications clocks
    /// setting reason: `nvidia-smi -lgc` or `-ac`), with the application clock target and
    /// its default where NVML gave them.
    LockedClocks {
        /// The application clock target and its default, MHz, where the target is below it.
        target: Option<(f64, f64)>,
        /// Whether the driver named the reason; a lock seen only in the clock is inferred.
        named: bool,
    },
    /// The memory clock held below its maximum under load with nothing thermal or
    /// power-related holding it: locked memory clocks.
    MemoryClock,
    /// A sync-boost group holding the card to the slowest of its group.
    SyncBoost,
    /// The display clock setting holding the clocks.
    DisplayClock,
}

impl Setting {
    /// Its name in evidence (`power_cap`).
    pub fn key(&self) -> &'static str {
        match self {
            Setting::PowerCap { .. } => "power_cap",
            Setting::LockedClocks { .. } => "locked_clocks",
            Setting::MemoryClock => "memory_clock",
            Setting::SyncBoost => "sync_boost",
            Setting::DisplayClock => "display_clock",
        }
    }

    /// What it is, in words.
    pub fn words(&self) -> String {
        match self {
            Setting::PowerCap {
                enforced_w,
                default_w,
            } => format!(
                "an administrator's power limit of {enforced_w:.0} W (the card's default {default_w:.0} W)"
            ),
            Setting::LockedClocks {
                target: Some((target, default)),
                ..
            } => {
                format!("application clocks set to {target:.0} MHz (the default {default:.0} MHz)")
            }
            Setting::LockedClocks { target: None, .. } => "locked or application clocks".into(),
            Setting::MemoryClock => "a locked memory clock".into(),
            Setting::SyncBoost => "a sync-boost group".into(),
            Setting::DisplayClock => "the display clock setting".into(),
        }
    }

    /// How to restore the product's own setting, on this vendor's card.
    pub fn restore(&self, vendor: Option<Vendor>) -> String {
        match (self, vendor) {
            (
                Setting::PowerCap {
                    default_w: d,
                    enforced_w: _,
                },
                Some(Vendor::Amd),
            ) => {
                format!(
                    "restore the default power cap of {d:.0} W (rocm-smi --resetpoweroverdrive)"
                )
            }
            (Setting::PowerCap { default_w: d, .. }, Some(Vendor::Intel)) => {
                format!("restore the default power limit of {d:.0} W (hwmon power1_max)")
            }
            (Setting::PowerCap { default_w: d, .. }, _) => {
                format!("restore the default power limit (nvidia-smi -pl {d:.0})")
            }
            (Setting::LockedClocks { .. }, _) => {
                "reset locked and application clocks (nvidia-smi -rgc; nvidia-smi -rac)".into()
            }
            (Setting::MemoryClock, _) => "reset the locked memory clock (nvidia-smi -rmc)".into(),
            (Setting::SyncBoost, _) => {
                "take the GPU out of its sync-boost group (dcgmi config --set -s 0)".into()
            }
            (Setting::DisplayClock, _) => {
                "turn off what holds the display clock (a display on a compute card)".into()
            }
        }
    }
}

/// A setting seen holding a card below its product in one phase, and what showed it.
#[derive(Debug, Clone)]
pub struct Held {
    /// The setting.
    pub setting: Setting,
    /// The phase it held the card in.
    pub phase: String,
    /// What showed it: a rate under its floor, or a clock under its share of its maximum.
    pub shown_by: String,
}

/// Whether a phase ran a load: busy (where utilisation is read) and not the idle evidence
/// around the workloads.
fn loaded(p: &PhaseTelemetry) -> bool {
    ![PREFLIGHT, BETWEEN_PHASES, "health"].contains(&p.phase.as_str())
        && p.gauge(signals::UTIL_GPU_PCT)
            .is_none_or(|u| u.median >= 50.0)
}

/// Throttle reasons of heat and power delivery: the environment's, not a setting's.
const HEAT_AND_POWER: [ThrottleReason; 4] = [
    ThrottleReason::HwSlowdown,
    ThrottleReason::HwThermalSlowdown,
    ThrottleReason::SwThermalSlowdown,
    ThrottleReason::HwPowerBrakeSlowdown,
];

/// Limits the card holds itself to by design (its own power limit, its board's limits, its
/// reliability policy): they explain a rate below a reference, and set nothing to restore.
const OWN_LIMITS: [ThrottleReason; 3] = [
    ThrottleReason::SwPowerCap,
    ThrottleReason::BoardLimit,
    ThrottleReason::ReliabilityPolicy,
];

/// A clock's median and its maximum in a phase, where both were read.
pub(super) fn clock(p: &PhaseTelemetry, now: Signal, max: Signal) -> Option<(f64, f64)> {
    let (now, max) = (p.gauge(now)?, p.gauge(max)?);
    (max.min > 0.0).then_some((now.median, max.min))
}

/// Whether a phase's throttle status named a reason (other than idle) for more than
/// `throttle_share` of its samples.
fn named_reason(p: &PhaseTelemetry, t: &Thresholds) -> bool {
    ThrottleReason::ALL
        .iter()
        .filter(|r| **r != ThrottleReason::GpuIdle)
        .any(|r| p.throttle_share_of(*r) > t.throttle_share)
}

/// The settings holding the clocks in a loaded phase: each by the reason NVML gives for it
/// (the software power cap only with the limit below its default: a card at its own limit
/// runs as its product does), an SM clock below `floor_share` of its maximum with no reason
/// given at all (a lock a newer driver does not name), and a memory clock below 90% of its
/// maximum while the memory was busy, with no reason of heat or power for it.
pub fn settings_in(
    p: &PhaseTelemetry,
    setup: &crate::verdict::Setup,
    t: &Thresholds,
) -> Vec<Setting> {
    if !loaded(p) {
        return Vec::new();
    }
    let holds = |r: ThrottleReason| p.throttle_share_of(r) > t.throttle_share;
    let mut out = Vec::new();
    if holds(ThrottleReason::SwPowerCap)
        && let (Some(e), Some(d)) = (
            p.gauge(signals::POWER_LIMIT_ENFORCED_W),
            p.gauge(signals::POWER_LIMIT_DEFAULT_W),
        )
        && e.max < d.min
    {
        out.push(Setting::PowerCap {
            enforced_w: e.max,
            default_w: d.min,
        });
    }
    // The application clock target, where NVML gave one below its default.
    let target = clock(
        p,
        signals::CLOCK_SM_APP_MHZ,
        signals::CLOCK_SM_APP_DEFAULT_MHZ,
    )
    .filter(|(target, default)| target < default);
    for (reason, setting) in [
        (
            ThrottleReason::ApplicationsClocksSetting,
            Setting::LockedClocks {
                target,
                named: true,
            },
        ),
        (ThrottleReason::SyncBoost, Setting::SyncBoost),
        (ThrottleReason::DisplayClockSetting, Setting::DisplayClock),
    ] {
        if holds(reason) {
            out.push(setting);
        }
    }
    let heat_or_power = HEAT_AND_POWER.iter().any(|r| holds(*r));
    // Newer drivers no longer raise the applications-clocks reason (NVML 13 marks it
    // unused): an SM clock held far below its maximum under load while the driver names no
    // reason at all is a lock all the same, unless a sensor sat at its limit the while
    // (then heat held it: [`held_for_heat`]).
    if !named_reason(p, t)
        && p.reasons_read > 0
        && held_for_heat(p, setup, t).is_none()
        && let Some((sm, max)) = clock(p, signals::CLOCK_SM_MHZ, signals::CLOCK_SM_MAX_MHZ)
        && sm < t.floor_share * max
    {
        out.push(Setting::LockedClocks {
            target,
            named: false,
        });
    }
    // A memory clock power management lowered because the memory had little to do is not
    // a lock: only one held while the memory was busy is.
    let memory_busy = match p.gauge(signals::UTIL_MEM_PCT) {
        Some(u) => u.median >= 50.0,
        None => p.phase == crate::product::Rate::Vram.workload(),
    };
    if !heat_or_power
        && memory_busy
        && let Some((now, max)) = clock(p, signals::CLOCK_MEM_MHZ, signals::CLOCK_MEM_MAX_MHZ)
        && now < 0.9 * max
    {
        out.push(Setting::MemoryClock);
    }
    out
}

/// The shader clock as the vendor's people call it: NVIDIA's SM clock, AMD's graphics
/// clock (sclk), Intel's GT clock.
pub fn shader_clock(vendor_id: u32) -> &'static str {
    match Vendor::from_pci_id(vendor_id) {
        Some(Vendor::Amd) => "graphics clock",
        Some(Vendor::Intel) => "GT clock",
        _ => "SM clock",
    }
}

/// The clock a setting holds, in words, with its share of its maximum: `the SM clock at
/// 1275 of 1980 MHz (64%)`.
fn clock_of(p: &PhaseTelemetry, setting: &Setting, vendor_id: u32) -> Option<(String, f64)> {
    let (name, now, max) = match setting {
        Setting::MemoryClock => (
            "memory clock",
            signals::CLOCK_MEM_MHZ,
            signals::CLOCK_MEM_MAX_MHZ,
        ),
        _ => (
            shader_clock(vendor_id),
            signals::CLOCK_SM_MHZ,
            signals::CLOCK_SM_MAX_MHZ,
        ),
    };
    let (now, max) = clock(p, now, max)?;
    Some((
        format!(
            "the {name} at {now:.0} of {max:.0} MHz ({:.0}%)",
            100.0 * now / max
        ),
        now / max,
    ))
}

/// A rate against its floor, with where the floor comes from: the evidence of every finding
/// of a slow rate. Every figure is in `unit`, the product's (GB/s, TFLOP/s), as the
/// finding's sentence says them: one number per fact.
#[derive(Serialize)]
struct AgainstFloor {
    rate: &'static str,
    unit: &'static str,
    measured: f64,
    floor: f64,
    floor_source: String,
    floor_provenance: Provenance,
    reference: Option<f64>,
    spec: Option<f64>,
}

impl AgainstFloor {
    /// `measured` against `floor`, both in the workload's unit.
    fn new(rate: Rate, measured: f64, floor: &Floor) -> AgainstFloor {
        let in_spec = |v: f64| rate.to_spec_unit(v);
        AgainstFloor {
            rate: rate.name(),
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

/// The evidence of the slow rates of one run: the phase, each rate against its floor, and
/// what in the environment explains them.
#[derive(Serialize)]
struct BelowFloors<'a> {
    phase: &'a str,
    rates: &'a [AgainstFloor],
    explained_by: &'a [String],
}

/// The evidence of `CONFIG_LIMITS_CARD`: each setting, what it held, how to restore it, and
/// the card's other settings that are not as its product ships them.
#[derive(Serialize)]
struct Configuration<'a> {
    other_settings: Vec<Values<&'a str>>,
    settings: Vec<SettingHeld<'a>>,
}

/// A setting and what it held.
#[derive(Serialize)]
struct SettingHeld<'a> {
    setting: &'static str,
    words: String,
    held: Vec<HeldIn<'a>>,
    restore: String,
}

/// What a setting held, and in which phase.
#[derive(Serialize)]
struct HeldIn<'a> {
    phase: &'a str,
    shown_by: &'a str,
}

/// The evidence of a setting that held the clocks within the product's floors: its phases,
/// and the last one's limits and clocks.
#[derive(Serialize)]
struct HeldWithin<'a> {
    setting: &'static str,
    phases: &'a [&'a str],
    #[serde(flatten)]
    readings: &'a Values<&'a Stat>,
}

/// The evidence of `PRODUCT_UNKNOWN`.
#[derive(Serialize)]
struct Unknown<'a> {
    name: &'a str,
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

/// A card that held itself back for heat where no throttle status could be read (an amdgpu
/// whose `gpu_metrics` kiln cannot decode, a card with no such file): a sensor within
/// `thermal_margin_c` of the limit its driver protects it at, under load, with the SM clock
/// below 90% of its maximum. In words (`the junction at 108 °C, its limit 110 °C, with the SM
/// clock at 1550 of 2100 MHz`).
pub fn held_for_heat(
    p: &PhaseTelemetry,
    setup: &crate::verdict::Setup,
    t: &Thresholds,
) -> Option<String> {
    // A throttle status that names a reason decides by itself; one read that names none
    // says nothing against heat (an amdgpu's gpu_metrics may flag no thermal residency
    // while its junction sits at its limit and its clock stays down).
    if named_reason(p, t) || p.samples == 0 || !loaded(p) {
        return None;
    }
    let (sm, max) = clock(p, signals::CLOCK_SM_MHZ, signals::CLOCK_SM_MAX_MHZ)?;
    if sm >= 0.9 * max {
        return None;
    }
    [
        ("junction", signals::GPU_HOTSPOT_TEMP_C, signals::TEMP_HOTSPOT_MAX_C),
        ("memory", signals::HBM_TEMP_C, signals::TEMP_MEM_MAX_C),
        ("GPU", signals::GPU_TEMP_C, signals::TEMP_SLOWDOWN_C),
    ]
    .iter()
    .find_map(|(word, now, limit)| {
        let hottest = p.gauge(*now)?.max;
        let limit = setup.identity_of(*limit).and_then(Reading::number)?;
        (hottest >= limit - t.thermal_margin_c).then(|| {
            format!(
                "the {word} at {hottest:.0} °C, its limit {limit:.0} °C, with the {} at {sm:.0} of {max:.0} MHz",
                shader_clock(setup.vendor_id)
            )
        })
    })
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
    let mut why = environment_explanation(phase, &device.setup, t, through);
    // Another process that arrived during the phase: the rate is judged on the part of the
    // phase before it came, where there is one; without one, the process explains it.
    let arrived = phase.and_then(|p| {
        came.iter()
            .filter(|a| std::ptr::eq(a.phase, p))
            .map(|a| a.first_ms)
            .min_by(f64::total_cmp)
            .map(|at| (p, at))
    });
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
        let figure = |v: f64| {
            let v = rate.to_spec_unit(v);
            let digits = if v >= 100.0 { 0 } else { 1 };
            format!("{v:.digits$}")
        };
        // A shortfall of more than half is said as the share reached: "100% under" of a
        // rate at a thousandth of its reference reads as nonsense.
        let under = match (floor.reference, product) {
            (Some(r), Some(p)) if measured < 0.5 * r => format!(
                ", {}% of the {} {} a healthy {} reaches",
                crate::units::significant(100.0 * measured / r),
                figure(r),
                rate.spec_unit(),
                p.name
            ),
            (Some(r), Some(p)) => format!(
                ", {:.0}% under the {} {} a healthy {} reaches",
                100.0 * (1.0 - measured / r),
                figure(r),
                rate.spec_unit(),
                p.name
            ),
            _ => String::new(),
        };
        let shown = format!(
            "{}{alone_until}{under} (floor {})",
            said(rate, measured),
            figure(floor.value)
        );
        let evidence = AgainstFloor::new(rate, measured, &floor);
        let Some(confidence) = floor.confidence(measured) else {
            let share = floor
                .spec
                .map(|spec| {
                    format!(
                        ", {:.0}% of the spec sheet's {} {}",
                        100.0 * measured / spec,
                        figure(spec),
                        rate.spec_unit()
                    )
                })
                .unwrap_or_default();
            noted.push((
                format!(
                    "{}{alone_until}{share} (floor {})",
                    said(rate, measured),
                    figure(floor.value)
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
    if !noted.is_empty() {
        let (lines, rates): (Vec<String>, Vec<AgainstFloor>) = noted.into_iter().unzip();
        let names: Vec<&str> = rates.iter().map(|r| r.rate).collect();
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
                explained_by: &why,
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
            explained_by: &why,
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

/// The configuration rule: every setting that held the card below its product (shown by a
/// rate of a run, or by a clock), or that held its clocks within its floors.
pub fn configuration_rule(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let tenants = super::tenants::processes(device);
    let mut held = Vec::new();
    // The runs' rate findings are the results rule's; here only what the settings held.
    let mut theirs = Vec::new();
    for (w, phase) in super::runs(device) {
        rates_of_run(device, w, phase, t, &tenants, &mut held, &mut theirs);
    }
    let mut out = Vec::new();
    configuration(device, t, held, &mut out);
    out
}

/// The product rule: a GPU kiln has no figures for.
pub fn product_unknown_rule(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    product_unknown(device, t, &mut out);
    out
}

/// The configuration of the card against its product, once per device: one
/// `CONFIG_LIMITS_CARD` (environment, major) naming every setting that held the card below
/// its product, whichever rate or clock showed it, and how to restore each; a setting that
/// held the clocks but kept the card within its floors is a note (`ADMIN_POWER_CAP`,
/// `CLOCKS_LOCKED`).
pub fn configuration(
    device: &DeviceEvidence,
    t: &Thresholds,
    mut held: Vec<Held>,
    out: &mut Vec<Finding>,
) {
    // Every setting seen holding the clocks, with its phase, the clock it held there and
    // that phase's limits and clocks as evidence.
    let mut seen: Vec<(Setting, String, Option<String>, Values<&Stat>)> = Vec::new();
    for p in &device.telemetry {
        for setting in settings_in(p, &device.setup, t) {
            let clock = clock_of(p, &setting, device.setup.vendor_id);
            // Held below `floor_share` of its maximum (the card's own maximum is its
            // product's): the setting holds the card below its product.
            if let Some((words, share)) = &clock
                && *share < t.floor_share
            {
                held.push(Held {
                    setting: setting.clone(),
                    phase: p.phase.clone(),
                    shown_by: words.clone(),
                });
            }
            let clock = clock.map(|(words, _)| words);
            // The limits and clocks of the phase, those that were read.
            let gauges = |of: &[Signal]| {
                Values(of.iter().filter_map(|s| Some((*s, p.gauge(*s)?))).collect())
            };
            let evidence = gauges(&[
                signals::POWER_LIMIT_ENFORCED_W,
                signals::POWER_LIMIT_DEFAULT_W,
                signals::CLOCK_SM_MHZ,
                signals::CLOCK_SM_MAX_MHZ,
                signals::CLOCK_MEM_MHZ,
                signals::CLOCK_MEM_MAX_MHZ,
            ]);
            seen.push((setting, p.phase.clone(), clock, evidence));
        }
    }
    let vendor = product::lookup(&device.name)
        .map(|p| p.vendor)
        .or(Vendor::from_pci_id(device.setup.vendor_id));
    // Per setting, in the order first seen: its phases and what showed it.
    let mut by_setting: Vec<(Setting, Vec<&Held>)> = Vec::new();
    for h in &held {
        match by_setting
            .iter_mut()
            .find(|(s, _)| s.key() == h.setting.key())
        {
            Some((_, list)) => list.push(h),
            None => by_setting.push((h.setting.clone(), vec![h])),
        }
    }
    if !by_setting.is_empty() {
        let parts: Vec<String> = by_setting
            .iter()
            .map(|(s, list)| {
                // Each thing shown once, with every phase it was shown in.
                let mut shown: Vec<(&str, Vec<&str>)> = Vec::new();
                for h in list {
                    match shown.iter_mut().find(|(by, _)| *by == h.shown_by) {
                        Some((_, phases)) if !phases.contains(&h.phase.as_str()) => {
                            phases.push(&h.phase)
                        }
                        Some(_) => {}
                        None => shown.push((&h.shown_by, vec![&h.phase])),
                    }
                }
                let shown: Vec<String> = shown
                    .iter()
                    .map(|(by, phases)| {
                        let noun = if phases.len() == 1 { "phase" } else { "phases" };
                        format!("{by} in the {} {noun}", crate::text::list(phases))
                    })
                    .collect();
                format!("{} held {}", s.words(), shown.join("; "))
            })
            .collect();
        let restore: Vec<String> = by_setting.iter().map(|(s, _)| s.restore(vendor)).collect();
        // What else is set as the product does not ship it, for whoever restores.
        let other_settings: Vec<Values<&str>> = [signals::PERSISTENCE_MODE, signals::COMPUTE_MODE]
            .iter()
            .filter_map(|s| {
                let v = device.setup.identity_text(*s)?;
                (!["on", "default"].contains(&v)).then(|| Values(vec![(*s, v)]))
            })
            .collect();
        // A lock seen only in the clock (no reason named) is less sure than one the driver
        // named.
        let inferred = by_setting
            .iter()
            .all(|(s, _)| matches!(s, Setting::LockedClocks { named: false, .. }));
        out.push(finding(
            CONFIG_LIMITS_CARD,
            Severity::Major,
            if inferred {
                Confidence::Medium
            } else {
                Confidence::High
            },
            format!(
                "a configuration holds the card below its product: {}",
                parts.join("; ")
            ),
            evidence(&Configuration {
                other_settings,
                settings: by_setting
                    .iter()
                    .map(|(s, list)| SettingHeld {
                        setting: s.key(),
                        words: s.words(),
                        held: list
                            .iter()
                            .map(|h| HeldIn {
                                phase: &h.phase,
                                shown_by: &h.shown_by,
                            })
                            .collect(),
                        restore: s.restore(vendor),
                    })
                    .collect(),
            }),
            &format!(
                "{}, then rerun: the card is not shown slow by itself",
                restore.join("; ")
            ),
        ));
    }
    // Settings that held the clocks without holding the card below its product: noted.
    let holding = |key: &str| by_setting.iter().any(|(s, _)| s.key() == key);
    for key in ["power_cap", "locked_clocks"] {
        let phases: Vec<&str> = seen
            .iter()
            .filter(|(s, ..)| s.key() == key)
            .map(|(_, p, ..)| p.as_str())
            .fold(Vec::new(), |mut all, p| {
                if !all.contains(&p) {
                    all.push(p);
                }
                all
            });
        let Some((setting, _, clock, gauges)) = seen.iter().find(|(s, ..)| s.key() == key) else {
            continue;
        };
        let held = clock.as_deref().unwrap_or("the clocks");
        if holding(key) {
            continue;
        }
        let noun = if phases.len() == 1 { "phase" } else { "phases" };
        let during = format!("in the {} {noun}", crate::text::list(&phases));
        let (code, summary) = match setting {
            Setting::PowerCap { .. } => (
                FindingCode::AdminPowerCap,
                format!(
                    "{} capped {held} {during}, and the card stayed within its product's floors",
                    setting.words()
                ),
            ),
            _ => (
                FindingCode::ClocksLocked,
                format!(
                    "{} held {held} {during}, and the card stayed within its product's floors",
                    setting.words()
                ),
            ),
        };
        out.push(finding(
            code,
            Severity::Note,
            Confidence::High,
            summary,
            evidence(&HeldWithin {
                setting: setting.key(),
                phases: &phases,
                readings: gauges,
            }),
            &format!("{} if it is not intended", setting.restore(vendor)),
        ));
    }
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
    use super::super::testing::{computed_at, device, gauge, phase, said};
    use crate::finding::{Class, Confidence, Severity};
    use crate::thresholds::Thresholds;

    /// A loaded compute phase of an H200 (700 W by default) under an enforced power
    /// limit, its SM clock at `sm_mhz` of 1980 and the power cap named for `capped_share`
    /// of the samples.
    fn capped(enforced_w: f64, sm_mhz: f64, capped_share: f64) -> crate::verdict::DeviceEvidence {
        device(vec![phase(
            "compute",
            serde_json::json!({
                "gauges": {
                    "power_limit_enforced_w": gauge(enforced_w, enforced_w, enforced_w),
                    "power_limit_default_w": gauge(700.0, 700.0, 700.0),
                    "clock_sm_mhz": gauge(sm_mhz, sm_mhz, sm_mhz),
                    "clock_sm_max_mhz": gauge(1980.0, 1980.0, 1980.0),
                    "util_gpu_pct": gauge(99.0, 100.0, 100.0),
                },
                "throttle_share": {"sw_power_cap": capped_share},
            }),
        )])
    }

    #[test]
    fn an_administrators_power_cap_is_judged_by_what_it_held() {
        let t = Thresholds::default();
        // Capped at 400 W with the SM clock held at 55% of its maximum: the configuration
        // holds the card below its product, and the driver named it.
        let held = super::configuration_rule(&capped(400.0, 1100.0, 0.9), &t);
        assert_eq!(
            said(&held),
            [("CONFIG_LIMITS_CARD", Class::Environment, Severity::Major)]
        );
        assert_eq!(held[0].confidence, Confidence::High);
        assert!(
            held[0].summary.contains("power limit"),
            "{}",
            held[0].summary
        );
        // The near miss: capped at 650 W with the clock kept at 92%: a note.
        let kept = super::configuration_rule(&capped(650.0, 1820.0, 0.9), &t);
        assert_eq!(
            said(&kept),
            [("ADMIN_POWER_CAP", Class::Info, Severity::Note)]
        );
        // At the card's own limit, the cap is the product's: nothing.
        assert!(super::configuration_rule(&capped(700.0, 1100.0, 0.9), &t).is_empty());
        // Named for fewer samples than `throttle_share`, the clock at its maximum: nothing
        // held.
        assert!(super::configuration_rule(&capped(400.0, 1980.0, 0.04), &t).is_empty());
    }

    #[test]
    fn a_clock_held_low_with_no_reason_named_is_a_lock_unless_heat_held_it() {
        let t = Thresholds::default();
        let held_at = |gpu_temp_c: f64| {
            let mut d = capped(700.0, 990.0, 0.0);
            d.telemetry[0].gauges.insert(
                "gpu_temp_c".into(),
                serde_json::from_value(gauge(gpu_temp_c, gpu_temp_c, gpu_temp_c)).unwrap(),
            );
            d.setup.identity.insert(
                "temp_slowdown_c".into(),
                crate::telemetry::record::Reading::Number(90.0),
            );
            d
        };
        // Half its maximum, cool, and the driver names no reason: a lock it no longer
        // names (newer drivers), less sure than a named one.
        let locked = super::configuration_rule(&held_at(60.0), &t);
        assert_eq!(
            said(&locked),
            [("CONFIG_LIMITS_CARD", Class::Environment, Severity::Major)]
        );
        assert_eq!(locked[0].confidence, Confidence::Medium);
        // The near miss: the same clock with the GPU at its slowdown temperature is heat's.
        assert!(super::configuration_rule(&held_at(90.0), &t).is_empty());
    }

    #[test]
    fn a_memory_clock_is_held_only_while_the_memory_was_busy() {
        let t = Thresholds::default();
        let at = |util_mem_pct: f64| {
            let d = device(vec![phase(
                "vram",
                serde_json::json!({"gauges": {
                    "clock_mem_mhz": gauge(1593.0, 1593.0, 1593.0),
                    "clock_mem_max_mhz": gauge(3201.0, 3201.0, 3201.0),
                    "util_mem_pct": gauge(util_mem_pct, util_mem_pct, util_mem_pct),
                }}),
            )]);
            super::settings_in(&d.telemetry[0], &d.setup, &t)
        };
        assert_eq!(at(95.0), [super::Setting::MemoryClock]);
        assert!(at(10.0).is_empty(), "a memory clock lowered while idle");
    }

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
