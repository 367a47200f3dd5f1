//! The one loop that drives a verified load (compute, matrix) through its cadence: each
//! round at the duty the power target or the shape sets, rests between, the pauses to idle
//! clocks (whose phase the resident region checks at), the budget, stop requests, the
//! rates over stretches, and a device failure ending it. What a round is, and what
//! happens between two, is the workload's: its [`Rounds`].

use std::time::{Duration, Instant};

use super::cadence::{
    DutySweep, LevelResult, LoadPhase, LoadPoint, LoadShape, PauseCycle, PausesReport, clock_now,
};
use super::{RateStretch, RunControl, STOPPED_ON_REQUEST};
use crate::evidence::EventSink;
use crate::gpu::GpuResult;
use crate::power::{LOAD_PERIOD, Pacer, PowerController, PowerTargetReport};

/// How a verified load runs over time, besides its rounds.
#[derive(Debug, Clone, Copy)]
pub struct Cadence {
    /// The load's shape.
    pub shape: LoadShape,
    /// Hold board power at this percentage of the enforced limit by setting the duty (a
    /// steady load only).
    pub power_target: Option<u32>,
    /// Rounds to run when there is no time budget.
    pub rounds: Option<u32>,
    /// The kinds the rounds take in turn (at least one).
    pub kinds: usize,
}

/// What one round did, counted at its level of a duty sweep.
#[derive(Debug, Clone, Copy)]
pub struct Worked {
    /// Operations (two per multiply-add).
    pub ops: u64,
    /// Wrong results.
    pub faults: u64,
}

/// What the cadence itself saw over the load, for the workload's report.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Why the load stopped before its plan finished, if it did.
    pub stopped_early: Option<String>,
    /// What the power target achieved, where one was set.
    pub power: Option<PowerTargetReport>,
    /// The duty sweep's levels (none unless the shape is a sweep).
    pub levels: Vec<LevelResult>,
    /// What the pauses did (none unless the shape pauses).
    pub pauses: Option<PausesReport>,
}

/// A verified load's rounds: the part of [`drive`] that differs between workloads.
pub trait Rounds: Sized {
    /// The workload's name in its `Rates` events.
    const NAME: &'static str;
    /// Its rates' scale: operations per second times this (1e-9 for 10^9 per second).
    const RATE_SCALE: f64;

    /// Each kind's running totals for its `Rates` events: its rate's name, its operations
    /// and the seconds they took.
    fn totals(&self) -> Vec<(&'static str, u64, f64)>;

    /// Round `round`, of kind `k`, run `at` that point of the load.
    fn round(
        &mut self,
        round: u32,
        k: usize,
        at: LoadPoint,
        events: &mut dyn EventSink,
    ) -> GpuResult<Worked>;

    /// After a round that took `took` has been counted. By value, so that a load may
    /// rebuild what it holds on the device (matrix grows its products under a power
    /// target, `hold`, that full duty cannot reach). A failure here ends the load at
    /// once: nothing more is collected and [`Rounds::ran`] is not called.
    fn between(
        self,
        _took: Duration,
        _hold: Option<&mut PowerController>,
        _events: &mut dyn EventSink,
    ) -> GpuResult<Self> {
        Ok(self)
    }

    /// The rounds are over: collects work still under way, before the power target's
    /// report is taken.
    fn finish(&mut self, _events: &mut dyn EventSink) {}

    /// Takes what the cadence saw into the workload's report.
    fn ran(&mut self, ran: Ran);
}

/// Runs `rounds` in `cadence` until the rounds asked for, the budget, a stop request, the
/// hard deadline, or a device failure, which is the error returned.
pub fn drive<R: Rounds>(
    mut rounds: R,
    cadence: &Cadence,
    control: &RunControl,
    events: &mut dyn EventSink,
    device: Option<usize>,
) -> GpuResult<()> {
    let started = Instant::now();
    let budget = control
        .deadline
        .map(|d| d.saturating_duration_since(started));
    let mut round = 0u32;
    let mut hold = cadence.power_target.map(PowerController::new);
    let mut pacer = Pacer::new(match cadence.shape {
        LoadShape::Pulsed { on_ms, off_ms } if hold.is_none() => {
            Duration::from_millis(on_ms + off_ms)
        }
        _ => LOAD_PERIOD,
    });
    let mut sweep = (cadence.shape == LoadShape::Sweep).then(|| DutySweep::new(budget));
    let mut pauses = match cadence.shape {
        LoadShape::Pauses { hold_ms, pause_ms } => Some(PauseCycle::new(
            Duration::from_millis(hold_ms),
            Duration::from_millis(pause_ms),
            control.phase.clone(),
        )),
        _ => None,
    };
    // A pulsed load's first round after each rest is its edge: the ramp up.
    let mut rested = false;
    let mut stopped_early = None;
    let mut stretch = RateStretch::starting(&rounds.totals());
    let result = loop {
        if cadence.rounds.is_some_and(|n| round >= n) {
            break Ok(());
        }
        if control.stop_requested() {
            stopped_early = Some(STOPPED_ON_REQUEST.into());
            break Ok(());
        }
        // Every kind gets at least one verified round, even past the budget (the hard
        // deadline still holds): a run that never checked int32 has not checked it.
        if cadence.rounds.is_none() && control.out_of_time() && round as usize >= cadence.kinds {
            break Ok(());
        }
        if control.stopped() {
            stopped_early = Some("stopped at the hard deadline".into());
            break Ok(());
        }
        // The share of each period spent under load: the power target's, or the shape's;
        // a load with pauses says itself when to work.
        let mut phase = LoadPhase::Load;
        let duty = match (&mut hold, cadence.shape) {
            (Some(hold), _) => hold.duty(started.elapsed(), control.power.as_ref()),
            (None, LoadShape::Steady) => 1.0,
            (None, LoadShape::Pulsed { on_ms, off_ms }) => {
                on_ms as f64 / (on_ms + off_ms).max(1) as f64
            }
            (None, LoadShape::Sweep) => sweep.as_mut().map_or(1.0, |s| s.duty(control)),
            (None, LoadShape::Pauses { .. }) => {
                match pauses.as_mut().and_then(|p| p.next(control)) {
                    Some(p) => {
                        phase = p;
                        1.0
                    }
                    None => {
                        control.still_alive();
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                }
            }
        };
        let rest = pacer.rest(duty);
        if !rest.is_zero() {
            rested = true;
            std::thread::sleep(rest);
            continue;
        }
        if matches!(cadence.shape, LoadShape::Pulsed { .. }) && std::mem::take(&mut rested) {
            phase = LoadPhase::RampUp;
        }
        let at = LoadPoint {
            duty,
            clock_mhz: clock_now(control),
            phase,
        };
        let k = round as usize % cadence.kinds;
        let t = Instant::now();
        let worked = match rounds.round(round, k, at, events) {
            Ok(w) => w,
            Err(e) => break Err(e),
        };
        let took = t.elapsed();
        pacer.worked(took);
        if let Some(s) = &mut sweep {
            s.worked(worked.ops, worked.faults);
        }
        round += 1;
        stretch.emit_if_due(R::NAME, &rounds.totals(), R::RATE_SCALE, events, device);
        rounds = rounds.between(took, hold.as_mut(), events)?;
    };
    rounds.finish(events);
    rounds.ran(Ran {
        stopped_early,
        power: hold.map(|h| h.report(started.elapsed())),
        levels: sweep.map(DutySweep::finish).unwrap_or_default(),
        pauses: pauses.map(|p| p.end()),
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::MemorySink;
    use crate::gpu::GpuError;

    /// Rounds that do nothing on a device, each step written in `log`.
    struct Fake<'a> {
        log: &'a mut Vec<String>,
        /// The round whose device fails.
        fail_round: Option<u32>,
        /// The steps between rounds fail.
        fail_between: bool,
    }

    impl Rounds for Fake<'_> {
        const NAME: &'static str = "fake";
        const RATE_SCALE: f64 = 1.0;

        fn totals(&self) -> Vec<(&'static str, u64, f64)> {
            Vec::new()
        }

        fn round(
            &mut self,
            round: u32,
            k: usize,
            at: LoadPoint,
            _events: &mut dyn EventSink,
        ) -> GpuResult<Worked> {
            if self.fail_round == Some(round) {
                return Err(GpuError::Unsupported("a fake failure".into()));
            }
            self.log
                .push(format!("round {round} kind {k} duty {}", at.duty));
            Ok(Worked { ops: 1, faults: 0 })
        }

        fn between(
            self,
            _took: Duration,
            _hold: Option<&mut PowerController>,
            _events: &mut dyn EventSink,
        ) -> GpuResult<Self> {
            if self.fail_between {
                return Err(GpuError::Unsupported("a fake failure between".into()));
            }
            Ok(self)
        }

        fn finish(&mut self, _events: &mut dyn EventSink) {
            self.log.push("finish".into());
        }

        fn ran(&mut self, ran: Ran) {
            self.log.push(format!(
                "ran, stopped early: {:?}, power: {}, levels: {}, pauses: {}",
                ran.stopped_early,
                ran.power.is_some(),
                ran.levels.len(),
                ran.pauses.is_some()
            ));
        }
    }

    fn steady(rounds: Option<u32>, kinds: usize) -> Cadence {
        Cadence {
            shape: LoadShape::Steady,
            power_target: None,
            rounds,
            kinds,
        }
    }

    /// The log of `fake` driven in `cadence` under `control`, and the loop's result.
    fn driven(
        cadence: &Cadence,
        control: &RunControl,
        fail_round: Option<u32>,
        fail_between: bool,
    ) -> (Vec<String>, GpuResult<()>) {
        let mut log = Vec::new();
        let fake = Fake {
            log: &mut log,
            fail_round,
            fail_between,
        };
        let result = drive(fake, cadence, control, &mut MemorySink::default(), Some(0));
        (log, result)
    }

    #[test]
    fn the_rounds_asked_for_take_the_kinds_in_turn_at_full_duty() {
        let (log, result) = driven(&steady(Some(3), 2), &RunControl::new(None), None, false);
        assert!(result.is_ok());
        assert_eq!(
            log,
            [
                "round 0 kind 0 duty 1",
                "round 1 kind 1 duty 1",
                "round 2 kind 0 duty 1",
                "finish",
                "ran, stopped early: None, power: false, levels: 0, pauses: false",
            ]
        );
    }

    #[test]
    fn every_kind_gets_one_round_past_the_budget() {
        let control = RunControl::new(Some(Duration::ZERO));
        let (log, _) = driven(&steady(None, 3), &control, None, false);
        let rounds = log.iter().filter(|l| l.starts_with("round")).count();
        assert_eq!(rounds, 3, "{log:?}");
        assert!(
            log.last()
                .is_some_and(|l| l.contains("stopped early: None"))
        );
    }

    #[test]
    fn a_stop_request_ends_the_load_and_says_so() {
        let control = RunControl::new(None);
        control
            .stop
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let (log, result) = driven(&steady(Some(3), 1), &control, None, false);
        assert!(result.is_ok());
        assert_eq!(log.len(), 2, "{log:?}");
        assert!(log[1].contains(STOPPED_ON_REQUEST), "{log:?}");
    }

    /// A failed round ends the loop with its error, and what the cadence saw is still
    /// reported; a failure between rounds ends it at once.
    #[test]
    fn a_device_failure_ends_the_load_with_its_error() {
        let (log, result) = driven(&steady(Some(5), 1), &RunControl::new(None), Some(1), false);
        assert!(result.is_err());
        assert_eq!(log.len(), 3, "{log:?}");
        assert_eq!(log[1], "finish");
        let (log, result) = driven(&steady(Some(5), 1), &RunControl::new(None), None, true);
        assert!(result.is_err());
        assert_eq!(log, ["round 0 kind 0 duty 1"]);
    }

    /// A sweep reports its levels, pauses their report, and a power target without
    /// telemetry its own.
    #[test]
    fn the_cadences_own_reports_follow_the_shape() {
        let shaped = |shape: LoadShape, power_target: Option<u32>| {
            let cadence = Cadence {
                shape,
                power_target,
                rounds: Some(2),
                kinds: 1,
            };
            let (log, _) = driven(&cadence, &RunControl::new(None), None, false);
            log.last().cloned().unwrap_or_default()
        };
        assert!(shaped(LoadShape::Sweep, None).contains("levels: 1"));
        assert!(shaped(LoadShape::Steady, Some(80)).contains("power: true"));
        let pauses = LoadShape::Pauses {
            hold_ms: 60_000,
            pause_ms: 1_000,
        };
        assert!(shaped(pauses, None).contains("pauses: true"));
    }
}
