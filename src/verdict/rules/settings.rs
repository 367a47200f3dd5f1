//! The settings that can hold a card below what its product does (an administrator's power
//! cap, locked clocks, a sync-boost group) and heat that held it with no throttle status,
//! read from a phase's telemetry and the card's identity: what the rates rule and the
//! configuration rule both weigh a rate by.

use crate::product::Vendor;
use crate::telemetry::record::Reading;
use crate::telemetry::signals::{self, Signal};
use crate::telemetry::summary::{
    BETWEEN_PHASES, OBSERVED, PREFLIGHT, PhaseTelemetry, SINCE_DRIVER_LOAD,
};
use crate::telemetry::throttle::ThrottleReason;
use crate::thresholds::Thresholds;

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
pub(super) fn loaded(p: &PhaseTelemetry) -> bool {
    ![
        PREFLIGHT,
        BETWEEN_PHASES,
        crate::telemetry::summary::HEALTH,
        crate::telemetry::summary::HEALTH_SINCE_BOOT,
        OBSERVED,
        SINCE_DRIVER_LOAD,
    ]
    .contains(&p.phase.as_str())
        && p.gauge(signals::UTIL_GPU_PCT)
            .is_none_or(|u| u.median >= 50.0)
}

/// Throttle reasons of heat and power delivery: the environment's, not a setting's.
pub(super) const HEAT_AND_POWER: [ThrottleReason; 4] = [
    ThrottleReason::HwSlowdown,
    ThrottleReason::HwThermalSlowdown,
    ThrottleReason::SwThermalSlowdown,
    ThrottleReason::HwPowerBrakeSlowdown,
];

/// Limits the card holds itself to by design (its own power limit, its board's limits, its
/// reliability policy): they explain a rate below a reference, and set nothing to restore.
pub(super) const OWN_LIMITS: [ThrottleReason; 3] = [
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
pub(super) fn named_reason(p: &PhaseTelemetry, t: &Thresholds) -> bool {
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
pub(super) fn clock_of(
    p: &PhaseTelemetry,
    setting: &Setting,
    vendor_id: u32,
) -> Option<(String, f64)> {
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
