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
use crate::telemetry::signals;

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

impl LoadPoint {
    /// In words (`at 30% load, SM clock 2610 MHz`, `at the ramp up, SM clock 1410 MHz`).
    pub fn words(&self) -> String {
        let clock = self
            .clock_mhz
            .map(|c| format!(", shader clock {c:.0} MHz"))
            .unwrap_or_default();
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
    /// The highest shader clock read once the level had settled (its later half), MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_mhz: Option<f64>,
    /// Wrong results at this level.
    #[serde(default)]
    pub faults: u64,
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
    clock_mhz: Option<f64>,
    /// The levels done.
    pub levels: Vec<LevelResult>,
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
        if self.level_started.elapsed() >= self.step / 2
            && let Some(c) = clock_now(control)
        {
            self.clock_mhz = Some(self.clock_mhz.map_or(c, |m| m.max(c)));
        }
        Self::duty_of(self.level)
    }

    /// Where the sweep stands, for the work about to run.
    pub fn point(&self, control: &RunControl) -> LoadPoint {
        LoadPoint {
            duty: Self::duty_of(self.level),
            clock_mhz: clock_now(control),
            phase: LoadPhase::Load,
        }
    }

    /// Counts work done at this level: operations, and wrong results.
    pub fn worked(&mut self, ops: u64, faults: u64) {
        self.ops += ops;
        self.faults += faults;
    }

    fn close(&mut self) {
        self.levels.push(LevelResult {
            duty: Self::duty_of(self.level),
            gops_per_wall_s: self.ops as f64 * 2.0
                / self.level_started.elapsed().as_secs_f64().max(1e-9)
                / 1e9,
            clock_mhz: self.clock_mhz.take(),
            faults: self.faults,
        });
        self.ops = 0;
        self.faults = 0;
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
/// lasts until the card reached idle clocks (as the telemetry reads them, at most twice
/// `pause`), checked with a few units of work as the clocks fall and once at idle, then
/// the load again, its first seconds the ramp up.
pub struct PauseCycle {
    hold: Duration,
    pause: Duration,
    state: Cycle,
    /// The highest shader clock read under load, MHz.
    loaded_mhz: Option<f64>,
    /// The pauses begun.
    pub pauses: u32,
    /// Pauses in which the telemetry read the clock at idle, and the lowest it read.
    pub idle_reached: u32,
    /// The lowest shader clock read in a pause, MHz.
    pub idle_mhz: Option<f64>,
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
            loaded_mhz: None,
            pauses: 0,
            idle_reached: 0,
            idle_mhz: None,
            shared,
        }
    }

    /// Whether to run a unit of work now, and at which phase: None is rest.
    pub fn next(&mut self, control: &RunControl) -> Option<LoadPhase> {
        let clock = clock_now(control);
        let phase = match &mut self.state {
            Cycle::Loading { since } => {
                if since.elapsed() >= self.hold {
                    self.pauses += 1;
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
                    self.loaded_mhz = Some(self.loaded_mhz.map_or(c, |m| m.max(c)));
                }
                if self.pauses > 0 && since.elapsed() < RAMP_UP {
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
                let idle_now = match (clock, self.loaded_mhz) {
                    (Some(c), Some(loaded)) => c <= loaded * IDLE_SHARE,
                    _ => since.elapsed() >= RAMP_DOWN_UNREAD,
                };
                if let Some(c) = clock {
                    self.idle_mhz = Some(self.idle_mhz.map_or(c, |m| m.min(c)));
                }
                if idle_now && idle_since.is_none() {
                    *idle_since = Some(Instant::now());
                    if clock.is_some() && self.loaded_mhz.is_some() {
                        self.idle_reached += 1;
                    }
                    self.shared.set(LoadPhase::Idle);
                }
                let over = since.elapsed() >= self.pause && idle_since.is_some()
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
        PausesReport {
            pauses: self.pauses,
            idle_reached: self.idle_reached,
            loaded_mhz: self.loaded_mhz,
            idle_mhz: self.idle_mhz,
        }
    }
}
