//! How a load moves over time, for the loads that verify work at every level of it: a
//! sweep of duty cycles from 10% to 100% (cards boost highest at partial load, and some
//! fail there), and full load broken by pauses long enough for the card to fall to idle
//! clocks (errors at the switches between load and idle). Each unit of work is labelled
//! with the [`LoadPoint`] it ran at, so a wrong result names the duty, the clock and the
//! phase it came at.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::RunControl;
use crate::finding::Unit;
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::telemetry::signals;

/// How the load is applied over time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "shape")]
pub enum LoadShape {
    /// Full load throughout.
    Steady,
    /// Full load for `on_ms`, idle for `off_ms`, repeated: power-delivery transients.
    Pulsed {
        /// Loaded time per period.
        on_ms: u64,
        /// Idle time per period.
        off_ms: u64,
    },
    /// Load levels 10%, 20% ... 100% of each period, each for a tenth of the budget.
    Sweep,
    /// Full load for `hold_ms`, then a pause until the card falls to idle clocks (at
    /// least `pause_ms`), repeated: results checked as the clocks fall, at idle and as
    /// they rise again.
    Pauses {
        /// Loaded time between pauses.
        hold_ms: u64,
        /// The least pause.
        pause_ms: u64,
    },
}

impl LoadShape {
    /// The shape in a few words (`pulsed (100 ms on / 100 ms off)`).
    pub fn name(&self) -> String {
        match self {
            LoadShape::Steady => "steady".to_owned(),
            LoadShape::Pulsed { on_ms, off_ms } => {
                format!("pulsed ({on_ms} ms on / {off_ms} ms off)")
            }
            LoadShape::Sweep => "swept 10%..100%".to_owned(),
            LoadShape::Pauses { hold_ms, pause_ms } => format!(
                "paused ({} loaded, then at least {} idle)",
                crate::units::duration_rounded_up(Duration::from_millis(*hold_ms)),
                crate::units::duration_rounded_up(Duration::from_millis(*pause_ms))
            ),
        }
    }
}

/// Where a load stands between full load and idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadPhase {
    /// Loaded (or no pause schedule).
    Load,
    /// The load just stopped: the clocks are falling.
    RampDown,
    /// The card at idle clocks, in a pause.
    Idle,
    /// The load just resumed after a rest: the clocks are rising.
    RampUp,
}

impl LoadPhase {
    /// In words.
    pub fn word(self) -> &'static str {
        match self {
            LoadPhase::Load => "under load",
            LoadPhase::RampDown => "at the ramp down",
            LoadPhase::Idle => "at idle clocks",
            LoadPhase::RampUp => "at the ramp up",
        }
    }

    fn code(self) -> u8 {
        match self {
            LoadPhase::Load => 0,
            LoadPhase::RampDown => 1,
            LoadPhase::Idle => 2,
            LoadPhase::RampUp => 3,
        }
    }

    fn of_code(code: u8) -> LoadPhase {
        match code {
            1 => LoadPhase::RampDown,
            2 => LoadPhase::Idle,
            3 => LoadPhase::RampUp,
            _ => LoadPhase::Load,
        }
    }
}

/// The device's load phase, shared by the workloads on it: the load that pauses sets
/// it, and the resident region checks its memory at each change.
#[derive(Debug, Clone, Default)]
pub struct SharedPhase(Arc<AtomicU8>);

impl SharedPhase {
    /// Says the phase now.
    pub fn set(&self, phase: LoadPhase) {
        self.0.store(phase.code(), Ordering::Relaxed);
    }

    /// The phase now.
    pub fn get(&self) -> LoadPhase {
        LoadPhase::of_code(self.0.load(Ordering::Relaxed))
    }
}

/// Which rounds a planted fault corrupts (detector tests): a card wrong only at some
/// points of its load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InjectWhen {
    /// Rounds at a duty below this.
    BelowDuty(f64),
    /// Rounds away from full load: at a ramp or at idle.
    AwayFromLoad,
}

impl InjectWhen {
    /// True when a round at `at` carries the fault.
    pub fn applies(self, at: &LoadPoint) -> bool {
        match self {
            InjectWhen::BelowDuty(d) => at.duty < d,
            InjectWhen::AwayFromLoad => at.phase != LoadPhase::Load,
        }
    }
}

/// What a unit of work ran at.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadPoint {
    /// The share of each period under load.
    pub duty: f64,
    /// The shader clock the telemetry last read, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    /// Where it stood between load and idle.
    pub phase: LoadPhase,
}

/// A clock read, as a clause to follow other words (`, shader clock 2610 MHz`); nothing
/// where none was read.
pub fn clock_words(mhz: Option<f64>) -> String {
    mhz.map(|c| format!(", shader clock {c:.0} MHz"))
        .unwrap_or_default()
}

impl LoadPoint {
    /// In words (`at 30% load, shader clock 2610 MHz`, `at the ramp up, shader clock
    /// 1410 MHz`).
    pub fn words(&self) -> String {
        let clock = clock_words(self.clock_mhz);
        match self.phase {
            LoadPhase::Load => format!("at {:.0}% load{clock}", self.duty * 100.0),
            other => format!("{}{clock}", other.word()),
        }
    }
}

/// The shader clock the telemetry read last, MHz.
pub fn clock_now(control: &RunControl) -> Option<f64> {
    control
        .power
        .as_ref()
        .and_then(|f| f.number(signals::CLOCK_SM_MHZ.name))
}

/// One level of a sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelResult {
    /// Target share of each period under load.
    pub duty: f64,
    /// Achieved operations per wall second, in 10^9.
    pub gops_per_wall_s: f64,
    /// The highest shader clock read once the level had settled (its later half; any
    /// time in it where no read fell then), MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    /// Wrong results at this level.
    #[serde(default)]
    pub faults: u64,
}

impl LevelResult {
    /// In words (`load 30%: 41.2 Gop per wall second, shader clock 2610 MHz`).
    pub fn line(&self) -> String {
        format!(
            "load {:.0}%: {:.1} Gop per wall second{}{}",
            self.duty * 100.0,
            self.gops_per_wall_s,
            clock_words(self.clock_mhz),
            if self.faults > 0 {
                format!(", {}", crate::text::count(self.faults, "wrong result"))
            } else {
                String::new()
            }
        )
    }
}

/// Duty levels 10%, 20% ... 100%, each held for a tenth of the budget (at least
/// [`DutySweep::LEVEL_LEAST`], so that the card settles at each), the clock each reached.
pub struct DutySweep {
    step: Duration,
    started: Instant,
    level: usize,
    level_started: Instant,
    ops: u64,
    faults: u64,
    /// The highest clock read in the level's later half, once it had settled.
    clock_mhz: Option<f64>,
    /// The highest read before, for a level whose later half no read fell in.
    clock_early_mhz: Option<f64>,
    /// The levels done.
    levels: Vec<LevelResult>,
}

impl DutySweep {
    /// Levels in a sweep.
    pub const LEVELS: usize = 10;
    /// The least time a level is held where the budget allows it.
    pub const LEVEL_LEAST: Duration = Duration::from_secs(1);

    /// A sweep over `budget` (one second a level without one).
    pub fn new(budget: Option<Duration>) -> DutySweep {
        DutySweep {
            step: budget.map_or(Self::LEVEL_LEAST, |b| b / Self::LEVELS as u32),
            started: Instant::now(),
            level: 0,
            level_started: Instant::now(),
            ops: 0,
            faults: 0,
            clock_mhz: None,
            clock_early_mhz: None,
            levels: Vec::new(),
        }
    }

    fn duty_of(level: usize) -> f64 {
        (level + 1) as f64 / Self::LEVELS as f64
    }

    /// The duty now, moving to the next level when this one's time is up; reads the
    /// clock once the level has settled.
    pub fn duty(&mut self, control: &RunControl) -> f64 {
        // By the clock: a level that a long round overran is closed, not stretched.
        let due = ((self.started.elapsed().as_nanos() / self.step.as_nanos().max(1)) as usize)
            .min(Self::LEVELS - 1);
        while self.level < due {
            self.close();
            self.level += 1;
        }
        if let Some(c) = clock_now(control) {
            let settled = self.level_started.elapsed() >= self.step / 2;
            let slot = if settled {
                &mut self.clock_mhz
            } else {
                &mut self.clock_early_mhz
            };
            *slot = Some(slot.map_or(c, |m| m.max(c)));
        }
        Self::duty_of(self.level)
    }

    /// Counts work done at this level: operations (two per multiply-add), and wrong
    /// results.
    pub fn worked(&mut self, ops: u64, faults: u64) {
        self.ops += ops;
        self.faults += faults;
    }

    fn close(&mut self) {
        self.levels.push(LevelResult {
            duty: Self::duty_of(self.level),
            gops_per_wall_s: self.ops as f64
                / self.level_started.elapsed().as_secs_f64().max(1e-9)
                / 1e9,
            clock_mhz: self.clock_mhz.take().or(self.clock_early_mhz.take()),
            faults: self.faults,
        });
        self.ops = 0;
        self.faults = 0;
        self.clock_early_mhz = None;
        self.level_started = Instant::now();
    }

    /// The levels, the one under way closed if it did any work.
    pub fn finish(mut self) -> Vec<LevelResult> {
        if self.ops > 0 || self.faults > 0 {
            self.close();
        }
        self.levels
    }
}

/// Full load broken by pauses: `hold` under load, then a pause of at least `pause` that
/// lasts until the card reached idle clocks and was checked there (as the telemetry reads them, at most twice
/// `pause`), checked with a few units of work as the clocks fall and once at idle, then
/// the load again, its first seconds the ramp up.
pub struct PauseCycle {
    hold: Duration,
    pause: Duration,
    state: Cycle,
    /// What the pauses did so far.
    seen: PausesReport,
    shared: SharedPhase,
}

enum Cycle {
    Loading {
        since: Instant,
    },
    Pausing {
        since: Instant,
        checks: u32,
        idle_since: Option<Instant>,
    },
}

/// How a load's pauses went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PausesReport {
    /// Pauses begun.
    pub pauses: u32,
    /// Of those, the pauses in which the telemetry read the shader clock at idle.
    pub idle_reached: u32,
    /// The highest shader clock read under load, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_mhz: Option<f64>,
    /// The lowest shader clock read in a pause, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_mhz: Option<f64>,
}

impl PausesReport {
    /// In words.
    pub fn line(&self) -> String {
        if self.pauses == 0 {
            return format!("no pause: {}", Self::NONE_FITTED);
        }
        let clocks = match (self.loaded_mhz, self.idle_mhz) {
            (Some(l), Some(i)) => format!(
                "; shader clock {l:.0} MHz under load, {i:.0} MHz at its lowest in a pause ({} of {} pauses reached idle clocks)",
                self.idle_reached, self.pauses
            ),
            _ => "; no shader clock was read, so the pauses were timed, not seen".into(),
        };
        format!(
            "{}{clocks}",
            crate::text::count(u64::from(self.pauses), "pause")
        )
    }
}

impl PausesReport {
    /// Why a load with pauses paused never: its time ran out under load.
    pub const NONE_FITTED: &'static str = "the load ended before its first pause was due (a shortened run), so the clocks' falls and rises were not tested";
}

/// How long the first load after a pause counts as its ramp up.
pub const RAMP_UP: Duration = Duration::from_secs(2);
/// When, after the load stops, its falling clocks are checked.
const RAMP_DOWN_CHECKS: [Duration; 3] = [
    Duration::from_millis(300),
    Duration::from_millis(1500),
    Duration::from_secs(3),
];
/// How long the clocks are taken to fall where no clock is read.
const RAMP_DOWN_UNREAD: Duration = Duration::from_secs(3);
/// A clock at or below this share of the loaded clock is idle.
const IDLE_SHARE: f64 = 0.5;

impl PauseCycle {
    /// A cycle of `hold` under load and pauses of `pause`, publishing its phase to
    /// `shared`.
    pub fn new(hold: Duration, pause: Duration, shared: SharedPhase) -> PauseCycle {
        shared.set(LoadPhase::Load);
        PauseCycle {
            hold,
            pause,
            state: Cycle::Loading {
                since: Instant::now(),
            },
            seen: PausesReport {
                pauses: 0,
                idle_reached: 0,
                loaded_mhz: None,
                idle_mhz: None,
            },
            shared,
        }
    }

    /// Whether to run a unit of work now, and at which phase: None is rest.
    pub fn next(&mut self, control: &RunControl) -> Option<LoadPhase> {
        let clock = clock_now(control);
        let phase = match &mut self.state {
            Cycle::Loading { since } => {
                if since.elapsed() >= self.hold {
                    self.seen.pauses += 1;
                    self.state = Cycle::Pausing {
                        since: Instant::now(),
                        checks: 0,
                        idle_since: None,
                    };
                    self.shared.set(LoadPhase::RampDown);
                    return None;
                }
                if since.elapsed() >= Duration::from_millis(500)
                    && let Some(c) = clock
                {
                    self.seen.loaded_mhz = Some(self.seen.loaded_mhz.map_or(c, |m| m.max(c)));
                }
                if self.seen.pauses > 0 && since.elapsed() < RAMP_UP {
                    LoadPhase::RampUp
                } else {
                    LoadPhase::Load
                }
            }
            Cycle::Pausing {
                since,
                checks,
                idle_since,
            } => {
                let idle_now = match (clock, self.seen.loaded_mhz) {
                    (Some(c), Some(loaded)) => c <= loaded * IDLE_SHARE,
                    _ => since.elapsed() >= RAMP_DOWN_UNREAD,
                };
                if let Some(c) = clock {
                    self.seen.idle_mhz = Some(self.seen.idle_mhz.map_or(c, |m| m.min(c)));
                }
                if idle_now && idle_since.is_none() {
                    *idle_since = Some(Instant::now());
                    if clock.is_some() && self.seen.loaded_mhz.is_some() {
                        self.seen.idle_reached += 1;
                    }
                    self.shared.set(LoadPhase::Idle);
                }
                // Over once the least pause has passed and the idle check ran (a card slow
                // to fall still gets it), or at twice the least pause whatever the clock.
                let idle_checked = *checks > RAMP_DOWN_CHECKS.len() as u32;
                let over = since.elapsed() >= self.pause && idle_checked
                    || since.elapsed() >= self.pause * 2;
                if over {
                    self.state = Cycle::Loading {
                        since: Instant::now(),
                    };
                    self.shared.set(LoadPhase::RampUp);
                    return Some(LoadPhase::RampUp);
                }
                // A few checks as the clocks fall, then one at idle.
                let due = RAMP_DOWN_CHECKS
                    .get(*checks as usize)
                    .is_some_and(|at| since.elapsed() >= *at && idle_since.is_none());
                let idle_check = idle_since.is_some_and(|t| t.elapsed() >= Duration::from_secs(1))
                    && *checks < RAMP_DOWN_CHECKS.len() as u32 + 1;
                if due {
                    *checks += 1;
                    return Some(LoadPhase::RampDown);
                }
                if idle_check {
                    *checks = RAMP_DOWN_CHECKS.len() as u32 + 1;
                    return Some(LoadPhase::Idle);
                }
                return None;
            }
        };
        if phase == LoadPhase::Load && self.shared.get() != LoadPhase::Load {
            self.shared.set(LoadPhase::Load);
        }
        Some(phase)
    }

    /// The load is over: the device is said to be under load (no more pauses). What the
    /// pauses did.
    pub fn end(&self) -> PausesReport {
        self.shared.set(LoadPhase::Load);
        self.seen
    }
}

/// The finding of wrong results that came only below full load in a sweep, where the card
/// boosts highest (`PEAK_CLOCK_ERRORS`): each level's count with the clock it reached, and
/// the clean 100% level's clock. `points` are where each recorded wrong result came. None
/// when they came at full load too, the full level did no work, or nothing was recorded or
/// a record does not say where it came.
pub fn partial_load_only(
    levels: &[LevelResult],
    points: &[Option<LoadPoint>],
    faults: u64,
    evidence: crate::finding::Evidence,
) -> Option<Finding> {
    let points: Vec<LoadPoint> = points.iter().copied().collect::<Option<_>>()?;
    if points.is_empty() {
        return None;
    }
    let full = levels
        .iter()
        .find(|l| l.duty >= 1.0 && l.gops_per_wall_s > 0.0)?;
    if full.faults > 0 || points.iter().any(|p| p.duty >= 1.0) {
        return None;
    }
    let at: Vec<String> = levels
        .iter()
        .filter(|l| l.faults > 0)
        .map(|l| {
            let point = LoadPoint {
                duty: l.duty,
                clock_mhz: l.clock_mhz,
                phase: LoadPhase::Load,
            };
            format!("{} {}", l.faults, point.words())
        })
        .collect();
    let clock = clock_words(full.clock_mhz);
    Some(finding(
        FindingCode::PeakClockErrors,
        Severity::Critical,
        Confidence::High,
        format!(
            "{faults} wrong results only at partial load, where the card boosts highest: {}; none at 100% load{clock}",
            if at.is_empty() {
                points
                    .iter()
                    .map(LoadPoint::words)
                    .collect::<Vec<_>>()
                    .join(", ")
            } else {
                at.join(", ")
            }
        ),
        evidence,
        MARGINAL,
    ))
}

/// What to do about wrong results found only at some points of the load.
pub const MARGINAL: &str = "a marginal part: take the GPU out of service and RMA it with this report (first make sure nothing overclocks it)";

crate::said_by_name!(LoadPhase);

crate::said_record!(LoadPoint {
    duty => "Duty" in Unit::Share,
    clock_mhz => "Shader clock" in Unit::Megahertz,
    phase => "Load phase",
});

crate::said_record!(LevelResult {
    duty => "Duty" in Unit::Share,
    gops_per_wall_s => "Rate" in Unit::Named("Gop/s"),
    clock_mhz => "Shader clock" in Unit::Megahertz,
    faults => "Faults",
});

crate::said_record!(PausesReport {
    pauses => "Pauses",
    idle_reached => "Idle reached",
    loaded_mhz => "Shader clock under load" in Unit::Megahertz,
    idle_mhz => "Shader clock at idle" in Unit::Megahertz,
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::PowerFeed;
    use crate::telemetry::reading::{Reading, Readings};

    /// A control whose telemetry reads the shader clock at `mhz`.
    fn control_at(mhz: f64) -> RunControl {
        let mut control = RunControl::new(None);
        let feed = PowerFeed::default();
        set_clock(&feed, mhz);
        control.power = Some(feed);
        control
    }

    fn set_clock(feed: &PowerFeed, mhz: f64) {
        let mut r = Readings::new();
        r.insert(signals::CLOCK_SM_MHZ.name.into(), Reading::Number(mhz));
        feed.update(r);
    }

    /// The phases `cycle` says over `for_ms`, each once in a row, asked every 10 ms.
    fn phases(cycle: &mut PauseCycle, control: &RunControl, for_ms: u64) -> Vec<Option<LoadPhase>> {
        let mut out: Vec<Option<LoadPhase>> = Vec::new();
        let end = Instant::now() + Duration::from_millis(for_ms);
        while Instant::now() < end {
            let p = cycle.next(control);
            if out.last() != Some(&p) {
                out.push(p);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        out
    }

    /// A pause lasts until the clock falls to idle, is checked as it falls and at idle,
    /// and the load after it starts with its ramp up; the shared phase follows.
    #[test]
    fn a_pause_checks_the_falling_clock_idle_and_the_ramp_up() {
        let control = control_at(1980.0);
        let shared = SharedPhase::default();
        let mut cycle = PauseCycle::new(
            Duration::from_millis(700),
            Duration::from_millis(1500),
            shared.clone(),
        );
        assert_eq!(
            phases(&mut cycle, &control, 600),
            vec![Some(LoadPhase::Load)]
        );
        // The hold is over: a rest, the clock still high, then a check as it falls.
        let falling: Vec<Option<LoadPhase>> = phases(&mut cycle, &control, 700)
            .into_iter()
            .skip_while(|p| *p == Some(LoadPhase::Load))
            .collect();
        assert_eq!(falling[0], None, "{falling:?}");
        assert!(falling.contains(&Some(LoadPhase::RampDown)), "{falling:?}");
        assert_eq!(shared.get(), LoadPhase::RampDown);
        // Idle clocks (below half the loaded 1980 MHz): one check at idle, then the load.
        set_clock(control.power.as_ref().unwrap(), 210.0);
        let idle = phases(&mut cycle, &control, 1700);
        assert!(idle.contains(&Some(LoadPhase::Idle)), "{idle:?}");
        assert_eq!(idle.last(), Some(&Some(LoadPhase::RampUp)), "{idle:?}");
        assert_eq!(shared.get(), LoadPhase::RampUp);
        set_clock(control.power.as_ref().unwrap(), 1980.0);
        let report = cycle.end();
        assert_eq!(
            (
                report.pauses,
                report.idle_reached,
                report.loaded_mhz,
                report.idle_mhz
            ),
            (1, 1, Some(1980.0), Some(210.0))
        );
        assert!(report.line().contains("1980 MHz under load, 210 MHz at its lowest in a pause (1 of 1 pauses reached idle clocks)"), "{}", report.line());
        assert_eq!(shared.get(), LoadPhase::Load);
    }

    /// With no clock read, a pause lasts twice its least time and says it was timed.
    #[test]
    fn a_pause_without_a_clock_is_timed_and_says_so() {
        let control = RunControl::new(None);
        let mut cycle = PauseCycle::new(
            Duration::from_millis(50),
            Duration::from_millis(100),
            SharedPhase::default(),
        );
        let started = Instant::now();
        let seen = phases(&mut cycle, &control, 400);
        assert_eq!(
            seen[..3],
            [Some(LoadPhase::Load), None, Some(LoadPhase::RampUp)],
            "{seen:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(250));
        let report = cycle.end();
        assert!(report.pauses >= 1 && report.idle_reached == 0, "{report:?}");
        assert!(
            report
                .line()
                .contains("no shader clock was read, so the pauses were timed")
        );
    }

    /// A load whose time ran out before its first pause says that the clock transitions
    /// were not tested, never that no clock was read.
    #[test]
    fn a_load_too_short_to_pause_says_its_transitions_were_not_tested() {
        let control = control_at(1980.0);
        let mut cycle = PauseCycle::new(
            Duration::from_secs(60),
            Duration::from_millis(100),
            SharedPhase::default(),
        );
        let _ = phases(&mut cycle, &control, 50);
        let report = cycle.end();
        assert_eq!(report.pauses, 0, "{report:?}");
        let line = report.line();
        assert!(
            line.starts_with("no pause: the load ended before its first pause"),
            "{line}"
        );
        assert!(line.contains("were not tested"), "{line}");
        assert!(!line.contains("no shader clock was read"), "{line}");
    }

    /// A sweep over a second: ten levels in order, each with its work, clock and faults.
    fn swept(fault_below: f64) -> Vec<LevelResult> {
        let control = control_at(2520.0);
        let mut sweep = DutySweep::new(Some(Duration::from_millis(1000)));
        let end = Instant::now() + Duration::from_millis(1000);
        while Instant::now() < end {
            let duty = sweep.duty(&control);
            sweep.worked(1_000_000, u64::from(duty < fault_below));
            std::thread::sleep(Duration::from_millis(4));
        }
        sweep.finish()
    }

    #[test]
    fn a_sweep_records_each_level_its_work_clock_and_faults() {
        let levels = swept(0.35);
        let duties: Vec<f64> = levels.iter().map(|l| l.duty).collect();
        let expected: Vec<f64> = (1..=10).map(|i| f64::from(i) / 10.0).collect();
        assert_eq!(duties.len(), 10, "{levels:?}");
        for (d, e) in duties.iter().zip(&expected) {
            assert!((d - e).abs() < 1e-9, "{duties:?}");
        }
        for l in &levels {
            assert!(l.gops_per_wall_s > 0.0, "{l:?}");
            assert_eq!(l.clock_mhz, Some(2520.0), "{l:?}");
            assert_eq!(l.faults > 0, l.duty < 0.35, "{l:?}");
        }
        let line = levels[0].line();
        assert!(
            line.starts_with("load 10%: ")
                && line.contains("Gop per wall second, shader clock 2520 MHz, ")
                && line.ends_with("wrong results"),
            "{line}"
        );
        assert!(
            levels[9].line().ends_with("shader clock 2520 MHz"),
            "{}",
            levels[9].line()
        );
    }

    fn point(duty: f64) -> Option<LoadPoint> {
        Some(LoadPoint {
            duty,
            clock_mhz: Some(2520.0),
            phase: LoadPhase::Load,
        })
    }

    /// Faults below full load with a clean 100% level are the peak clock's; faults at 100%
    /// too, a 100% level that did no work, or a record that does not say where, are not.
    #[test]
    fn errors_only_below_full_load_are_the_peak_clocks_and_nothing_else_is() {
        let levels = swept(0.35);
        let faults: u64 = levels.iter().map(|l| l.faults).sum();
        let found =
            partial_load_only(&levels, &[point(0.1), point(0.3)], faults, json()).expect("found");
        assert_eq!(found.code, FindingCode::PeakClockErrors);
        assert!(
            found.summary.contains("at 10% load, shader clock 2520 MHz")
                && found
                    .summary
                    .contains("none at 100% load, shader clock 2520 MHz"),
            "{}",
            found.summary
        );
        let everywhere = swept(2.0);
        let all: u64 = everywhere.iter().map(|l| l.faults).sum();
        assert!(partial_load_only(&everywhere, &[point(0.1), point(1.0)], all, json()).is_none());
        let mut idle_full = levels.clone();
        if let Some(full) = idle_full.last_mut() {
            full.gops_per_wall_s = 0.0;
        }
        assert!(partial_load_only(&idle_full, &[point(0.1)], faults, json()).is_none());
        assert!(partial_load_only(&levels, &[point(0.1), None], faults, json()).is_none());
        assert!(partial_load_only(&levels, &[], faults, json()).is_none());
    }

    fn json() -> crate::finding::Evidence {
        crate::finding::Evidence::default()
    }
}
