//! The settings that hold a card below what its product does (an administrator's power cap,
//! locked clocks, a sync-boost group), as one rule whichever rate or clock shows it: a rate
//! below its floor is the configuration's where a setting held the clocks, and a setting
//! that held them within the floors is said as such.

use crate::finding::{Confidence, Finding, FindingCode, Severity, evidence, finding};
use crate::product::{self, Vendor};
use crate::telemetry::signals::{self, Signal, Values};
use crate::telemetry::summary::Stat;
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;

use super::rates::rates_of_run;
use super::settings::{Held, Setting, clock_of, settings_in};

/// The code of a configuration holding the card below its product.
pub const CONFIG_LIMITS_CARD: FindingCode = FindingCode::ConfigLimitsCard;

crate::evidence! {
    /// The evidence of `CONFIG_LIMITS_CARD`: each setting, what it held, how to restore
    /// it, and the card's other settings that are not as its product ships them.
    struct Configuration<'a> {
        other_settings: Vec<Values<&'a str>> => "Other settings",
        settings: Vec<SettingHeld<'a>> => "Settings",
    }
}

crate::evidence! {
    /// A setting and what it held.
    struct SettingHeld<'a> {
        setting: &'static str => "Setting",
        words: String => "In words",
        held: Vec<HeldIn<'a>> => "Held",
        restore: String => "To restore",
    }
}

crate::evidence! {
    /// What a setting held, and in which phase.
    struct HeldIn<'a> {
        phase: &'a str => "Phase",
        shown_by: &'a str => "Shown by",
    }
}

crate::evidence! {
    /// The evidence of a setting that held the clocks within the product's floors: its
    /// phases, and the last one's limits and clocks.
    struct HeldWithin<'a> {
        setting: &'static str => "Setting",
        phases: &'a [&'a str] => "Phases",
        #[serde(flatten)]
        readings: &'a Values<&'a Stat> => flat,
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
    let seen = settings_seen(device, t, &mut held);
    let floor_share = t.floor_share;
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
        out.push(limits_the_card(device, vendor, &by_setting));
    }
    held_within(&seen, &by_setting, vendor, floor_share, out);
}

/// A setting seen holding the clocks: its phase, the clock it held there in words, and that
/// phase's limits and clocks.
type Seen<'a> = (Setting, String, Option<String>, Values<&'a Stat>);

/// Every setting seen holding the clocks in a phase, with the clock it held; one that held
/// a clock below `floor_share` of its maximum (the card's own maximum is its product's)
/// is added to `held`: it holds the card below its product.
fn settings_seen<'a>(
    device: &'a DeviceEvidence,
    t: &Thresholds,
    held: &mut Vec<Held>,
) -> Vec<Seen<'a>> {
    // Every setting seen holding the clocks, with its phase, the clock it held there and
    // that phase's limits and clocks as evidence.
    let mut seen: Vec<Seen> = Vec::new();
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
    seen
}

/// `CONFIG_LIMITS_CARD`: every setting that held the card below its product, each with
/// what showed it and how to restore it, and the card's other settings its product does
/// not ship.
fn limits_the_card(
    device: &DeviceEvidence,
    vendor: Option<Vendor>,
    by_setting: &[(Setting, Vec<&Held>)],
) -> Finding {
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
    finding(
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
    )
}

/// The settings that held the clocks without holding the card below its product: a note
/// each (`ADMIN_POWER_CAP`, `CLOCKS_LOCKED`), with the phases they held them in. A power
/// cap far below the card's default (under `floor_share` of it, the share the floors
/// allow a rate to lose: the power it measurably took) is minor, not a note: said where
/// people look, though the card stayed within its floors.
fn held_within(
    seen: &[Seen],
    by_setting: &[(Setting, Vec<&Held>)],
    vendor: Option<Vendor>,
    floor_share: f64,
    out: &mut Vec<Finding>,
) {
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
        let (code, severity, summary) = match setting {
            Setting::PowerCap {
                enforced_w,
                default_w,
            } if *default_w > 0.0 && enforced_w / default_w < floor_share => (
                FindingCode::AdminPowerCap,
                Severity::Minor,
                format!(
                    "{} capped {held} {during}: {:.0}% of the card's default power, far below it, though the card stayed within its product's floors",
                    setting.words(),
                    100.0 * enforced_w / default_w
                ),
            ),
            Setting::PowerCap { .. } => (
                FindingCode::AdminPowerCap,
                Severity::Note,
                format!(
                    "{} capped {held} {during}, and the card stayed within its product's floors",
                    setting.words()
                ),
            ),
            _ => (
                FindingCode::ClocksLocked,
                Severity::Note,
                format!(
                    "{} held {held} {during}, and the card stayed within its product's floors",
                    setting.words()
                ),
            ),
        };
        out.push(finding(
            code,
            severity,
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

#[cfg(test)]
mod tests {
    use super::super::testing::{device, gauge, phase, said};
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
        // Capped far below its default (400 W of 700 W, under the floors' share), the clock
        // still within its floors at 85%: a minor finding people see, not a note.
        let far = super::configuration_rule(&capped(400.0, 1683.0, 0.9), &t);
        assert_eq!(
            said(&far),
            [("ADMIN_POWER_CAP", Class::Info, Severity::Minor)]
        );
        assert!(
            far[0].summary.contains("57% of the card's default power"),
            "{}",
            far[0].summary
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
}
