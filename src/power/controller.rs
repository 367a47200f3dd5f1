//! The power-target loop: the duty at each period boundary, stepped on each new sample,
//! and the pinned stretches that say why a target could not be held.

use super::*;

/// Which way the duty is pinned while the power stays out of the band.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pin {
    /// At 1.0, below the band.
    Full,
    /// At [`MIN_DUTY`], above the band.
    Floor,
}

/// The most readings a pinned stretch keeps (its latest): two minutes at 200 ms, enough
/// to say where the card settled, and a load pinned for days holds no more.
const STRETCH_KEPT: usize = 600;

/// Consecutive samples with the duty pinned one way and the power out of the band.
#[derive(Debug, Clone)]
struct Stretch {
    pin: Pin,
    since: Duration,
    last: Duration,
    samples: usize,
    /// The latest readings (at most [`STRETCH_KEPT`]).
    powers_w: VecDeque<f64>,
    environment: BTreeSet<String>,
}

impl Stretch {
    fn new(pin: Pin, now: Duration) -> Stretch {
        Stretch {
            pin,
            since: now,
            last: now,
            samples: 0,
            powers_w: VecDeque::new(),
            environment: BTreeSet::new(),
        }
    }

    fn add(&mut self, now: Duration, power_w: f64, readings: &Readings) {
        self.last = now;
        self.samples = self.samples.saturating_add(1);
        if self.powers_w.len() == STRETCH_KEPT {
            self.powers_w.pop_front();
        }
        self.powers_w.push_back(power_w);
        self.environment.extend(environment_reasons(readings));
    }

    /// Long enough (in samples and in time) to be the card's doing, not the loop's.
    fn counts(&self) -> bool {
        self.samples >= PINNED_SAMPLES && self.last.saturating_sub(self.since) >= PINNED_MIN
    }

    /// The power the card settled at: the later half of the readings kept, so that the
    /// warm-up of a card pinned from a standstill does not pull it down.
    fn settled_w(&self) -> f64 {
        let later = self.powers_w.iter().skip(self.powers_w.len() / 2);
        let count = self.powers_w.len() - self.powers_w.len() / 2;
        later.sum::<f64>() / count.max(1) as f64
    }
}

/// What the stretches that count have shown, worst kept.
#[derive(Debug, Clone, Default, PartialEq)]
struct Findings {
    /// Environment reasons of stretches pinned at full duty while throttled.
    throttled: BTreeSet<String>,
    /// The settled power of the latest stretch pinned at full duty without them.
    full_load_w: Option<f64>,
    /// The settled power of the latest stretch pinned at the floor.
    min_load_w: Option<f64>,
}

impl Findings {
    fn add(&mut self, stretch: &Stretch) {
        if !stretch.counts() {
            return;
        }
        match stretch.pin {
            Pin::Full if !stretch.environment.is_empty() => {
                self.throttled.extend(stretch.environment.iter().cloned());
            }
            Pin::Full => self.full_load_w = Some(stretch.settled_w()),
            Pin::Floor => self.min_load_w = Some(stretch.settled_w()),
        }
    }

    /// The worst of them, if any.
    fn outcome(&self) -> Option<PowerOutcome> {
        if !self.throttled.is_empty() {
            return Some(PowerOutcome::Throttled {
                reasons: self.throttled.iter().cloned().collect(),
            });
        }
        if let Some(full_load_w) = self.full_load_w {
            return Some(PowerOutcome::AtLoadLimit { full_load_w });
        }
        self.min_load_w
            .map(|min_load_w| PowerOutcome::AtMinimumLoad { min_load_w })
    }
}

/// Sums over samples, for the band statistics.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    samples: u32,
    within: u32,
    sum_w: f64,
}

impl Tally {
    fn add(&mut self, power_w: f64, within: bool) {
        self.samples = self.samples.saturating_add(1);
        self.within = self.within.saturating_add(u32::from(within));
        self.sum_w += power_w;
    }

    fn share(&self) -> Option<f64> {
        (self.samples > 0).then(|| f64::from(self.within) / f64::from(self.samples))
    }

    fn mean_w(&self) -> Option<f64> {
        (self.samples > 0).then(|| self.sum_w / f64::from(self.samples))
    }
}

/// The power-target loop of one load: asked for the duty at each period boundary, it
/// acts on each new telemetry sample and keeps what the report needs.
#[derive(Debug, Clone)]
pub struct PowerController {
    target_pct: u32,
    duty: f64,
    /// The first call has been made (the feed's sample then predates the load).
    started: bool,
    /// Sequence number of the latest sample seen.
    seen: Option<u64>,
    /// Set once the target is given up for want of telemetry: flat out from then on.
    no_telemetry: bool,
    limit_w: Option<f64>,
    /// Time of the previous sample acted on (the load's start before the first).
    previous_at: Duration,
    /// The error of the previous sample acted on, for the lead.
    previous_error_w: Option<f64>,
    /// Time of the previous call and the duty-seconds so far, for the mean duty.
    last_call: Duration,
    duty_s: f64,
    reached_at: Option<Duration>,
    all: Tally,
    after_reach: Tally,
    stretch: Option<Stretch>,
    findings: Findings,
}

impl PowerController {
    /// A controller holding `target_pct` percent of the enforced limit (taken into
    /// 1..=100: a command line checks the range, this only keeps the loop sane).
    pub fn new(target_pct: u32) -> PowerController {
        PowerController {
            target_pct: target_pct.clamp(1, 100),
            // Flat out first: the first loaded samples say whether the card can reach
            // the target at all.
            duty: 1.0,
            started: false,
            seen: None,
            no_telemetry: false,
            limit_w: None,
            previous_at: Duration::ZERO,
            previous_error_w: None,
            last_call: Duration::ZERO,
            duty_s: 0.0,
            reached_at: None,
            all: Tally::default(),
            after_reach: Tally::default(),
            stretch: None,
            findings: Findings::default(),
        }
    }

    /// The duty for the next load period, in (0, 1]: called at each period boundary,
    /// `now` the time since the load began, `feed` the device's telemetry (None: there is
    /// none, and the load runs flat out). The duty changes only on a new sample: should
    /// the readings stop once the loop has begun, it stays where it was (the load the
    /// card last held the target with), and the report's sample count says how far the
    /// readings went.
    pub fn duty(&mut self, now: Duration, feed: Option<&PowerFeed>) -> f64 {
        self.duty_s += self.duty * now.saturating_sub(self.last_call).as_secs_f64();
        self.last_call = self.last_call.max(now);
        let first_call = !self.started;
        self.started = true;
        if self.no_telemetry {
            return self.duty;
        }
        let Some(feed) = feed else {
            if self.all.samples == 0 {
                self.give_up();
            }
            return self.duty;
        };
        if let Some((sequence, readings)) = feed.latest()
            && self.seen != Some(sequence)
        {
            self.seen = Some(sequence);
            // The sample there at the first call was read before the load began.
            if !first_call {
                self.on_sample(now, &readings);
            }
        }
        if self.all.samples == 0 && now >= TELEMETRY_GRACE {
            self.give_up();
        }
        self.duty
    }

    /// True once the load has run flat out long enough to count (a pinned stretch) with
    /// the power below the band and nothing of the environment holding the card back:
    /// more duty cannot help, a heavier load per period (a larger matrix) may.
    pub fn starved(&self) -> bool {
        self.stretch
            .as_ref()
            .is_some_and(|s| s.pin == Pin::Full && s.environment.is_empty() && s.counts())
    }

    /// The load got heavier (a larger matrix): the stretch pinned at full duty so far is
    /// closed (it stays the finding until the heavier load's own stretch counts or the
    /// target is reached), and the heavier load is judged afresh.
    pub fn load_changed(&mut self) {
        if let Some(stretch) = self.stretch.take() {
            self.findings.add(&stretch);
        }
    }

    /// The report as of `now` (time since the load began).
    pub fn report(&self, now: Duration) -> PowerTargetReport {
        let duty_s = self.duty_s + self.duty * now.saturating_sub(self.last_call).as_secs_f64();
        let elapsed_s = now.max(self.last_call).as_secs_f64();
        let mean_duty = if elapsed_s > 0.0 {
            duty_s / elapsed_s
        } else {
            self.duty
        };
        let outcome = if self.no_telemetry {
            PowerOutcome::NoTelemetry
        } else {
            // The open stretch counts as well as the closed ones.
            let mut findings = self.findings.clone();
            if let Some(stretch) = &self.stretch {
                findings.add(stretch);
            }
            findings.outcome().unwrap_or(if self.reached_at.is_some() {
                PowerOutcome::Held
            } else {
                PowerOutcome::Unsettled
            })
        };
        let reached = self.reached_at.is_some();
        PowerTargetReport {
            target_pct: self.target_pct,
            target_w: self.limit_w.map(|l| self.target_of(l)),
            limit_w: self.limit_w,
            reached_after_s: self.reached_at.map(|t| t.as_secs_f64()),
            within_band_share: if reached {
                self.after_reach.share()
            } else {
                None
            },
            mean_w: if reached {
                self.after_reach.mean_w()
            } else {
                self.all.mean_w()
            },
            mean_duty,
            samples: self.all.samples,
            outcome,
        }
    }

    /// No telemetry to steer by: flat out for the rest of the load.
    fn give_up(&mut self) {
        self.no_telemetry = true;
        self.duty = 1.0;
    }

    fn target_of(&self, limit_w: f64) -> f64 {
        f64::from(self.target_pct) / 100.0 * limit_w
    }

    /// One new sample: the statistics, then the step.
    fn on_sample(&mut self, now: Duration, readings: &Readings) {
        if let Some(limit_w) =
            number(readings, signals::POWER_LIMIT_ENFORCED_W.name).filter(|l| *l > 0.0)
        {
            self.limit_w = Some(limit_w);
        }
        // A sample without a power reading leaves the duty as it is.
        let (Some(power_w), Some(limit_w)) = (
            number(readings, signals::POWER_W.name).filter(|p| *p >= 0.0),
            self.limit_w,
        ) else {
            return;
        };
        let target_w = self.target_of(limit_w);
        // The duty in force while this sample was drawn.
        let applied = self.duty;
        self.observe(now, power_w, target_w, applied, readings);
        self.step(now, power_w, target_w, limit_w, applied);
    }

    /// Band statistics and pinned stretches.
    fn observe(
        &mut self,
        now: Duration,
        power_w: f64,
        target_w: f64,
        applied: f64,
        readings: &Readings,
    ) {
        let band_w = BAND_FRACTION * target_w;
        let within = (power_w - target_w).abs() <= band_w;
        if within && self.reached_at.is_none() {
            self.reached_at = Some(now);
            // What the card did while warming up to the load no longer counts, the
            // stretch this sample ends included.
            self.findings = Findings::default();
            self.stretch = None;
        }
        self.all.add(power_w, within);
        if self.reached_at.is_some() {
            self.after_reach.add(power_w, within);
        }
        let pin = if applied >= 1.0 && power_w < target_w - band_w {
            Some(Pin::Full)
        } else if applied <= MIN_DUTY && power_w > target_w + band_w {
            Some(Pin::Floor)
        } else {
            None
        };
        let continues = matches!((&self.stretch, pin), (Some(s), Some(p)) if s.pin == p);
        if !continues {
            if let Some(ended) = self.stretch.take() {
                self.findings.add(&ended);
            }
            self.stretch = pin.map(|pin| Stretch::new(pin, now));
        }
        if let Some(stretch) = &mut self.stretch {
            stretch.add(now, power_w, readings);
        }
    }

    /// The control law (see the module's documentation and the gains' comments).
    fn step(&mut self, now: Duration, power_w: f64, target_w: f64, limit_w: f64, applied: f64) {
        let slope_w = (power_w / applied.max(MIN_DUTY))
            .clamp(SLOPE_PRIOR_OF_LIMIT * limit_w, SLOPE_MAX_OF_LIMIT * limit_w);
        let error_w = target_w - power_w;
        let dt_s = now
            .saturating_sub(self.previous_at)
            .min(MAX_STEP)
            .as_secs_f64();
        let change_w = self.previous_error_w.map_or(0.0, |e| error_w - e);
        let step = (KP * change_w + KI_PER_S * dt_s * error_w) / slope_w;
        if step.is_finite() {
            self.duty = (self.duty + step).clamp(MIN_DUTY, 1.0);
        }
        self.previous_at = now;
        self.previous_error_w = Some(error_w);
    }
}

/// The environment throttle reasons a sample carries.
fn environment_reasons(readings: &Readings) -> Vec<String> {
    let Some(reasons) = throttle::reasons_of(readings) else {
        return Vec::new();
    };
    reasons
        .filter(|r| ENVIRONMENT_REASONS.iter().any(|e| e.name() == *r))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::record::Reading;

    const LIMIT_W: f64 = 700.0;

    fn sample(power_w: Option<f64>, reasons: &str) -> Readings {
        let mut r = Readings::new();
        r.insert(
            signals::POWER_W.name.into(),
            power_w.map_or_else(Reading::not_supported, Reading::Number),
        );
        r.insert(
            signals::POWER_LIMIT_ENFORCED_W.name.into(),
            Reading::Number(LIMIT_W),
        );
        r.insert(signals::GPU_TEMP_C.name.into(), Reading::Number(70.0));
        r.insert(
            signals::THROTTLE_REASONS.name.into(),
            Reading::Text(reasons.into()),
        );
        r
    }

    /// Drives a controller with one sample a second, each given by `power(t_s, duty)`,
    /// the controller asked every 100 ms; returns it and the duties it gave.
    fn drive(
        pct: u32,
        seconds: u64,
        mut power: impl FnMut(u64, f64) -> (Option<f64>, &'static str),
    ) -> (PowerController, Vec<f64>) {
        let feed = PowerFeed::default();
        let mut c = PowerController::new(pct);
        let mut duties = Vec::new();
        let mut duty = c.duty(Duration::ZERO, Some(&feed));
        for ms in (100..=seconds * 1000).step_by(100) {
            if ms.is_multiple_of(1000) {
                let (p, reasons) = power(ms / 1000, duty);
                feed.update(sample(p, reasons));
            }
            duty = c.duty(Duration::from_millis(ms), Some(&feed));
            duties.push(duty);
        }
        (c, duties)
    }

    fn at(seconds: u64) -> Duration {
        Duration::from_secs(seconds)
    }

    #[test]
    fn a_card_that_follows_the_duty_is_held_and_the_band_statistics_count_from_the_reach() {
        // A lag-free card: 90 W idle, 690 W at full load.
        let (c, duties) = drive(60, 60, |_, d| (Some(90.0 + 600.0 * d), ""));
        let r = c.report(at(60));
        assert_eq!(r.outcome, PowerOutcome::Held);
        assert_eq!(r.target_w, Some(420.0));
        assert_eq!(r.limit_w, Some(LIMIT_W));
        assert_eq!(r.samples, 60);
        let reached = r.reached_after_s.unwrap();
        assert!(reached <= 10.0, "reached after {reached} s");
        assert!(r.within_band_share.unwrap() > 0.95, "{r:?}");
        assert!((r.mean_w.unwrap() - 420.0).abs() < 10.0, "{r:?}");
        assert!((duties.last().unwrap() - 0.55).abs() < 0.02, "{duties:?}");
        assert!(r.why_not().is_none());
    }

    #[test]
    fn band_share_and_mean_follow_their_definitions() {
        // Below, below, in, out above, in, in: 3 of 4 within from the reach on.
        let powers = [300.0, 350.0, 420.0, 460.0, 430.0, 410.0];
        let feed = PowerFeed::default();
        let mut c = PowerController::new(60);
        c.duty(Duration::ZERO, Some(&feed));
        for (k, p) in powers.iter().enumerate() {
            feed.update(sample(Some(*p), ""));
            c.duty(at(k as u64 + 1), Some(&feed));
        }
        let r = c.report(at(6));
        assert_eq!(r.reached_after_s, Some(3.0));
        assert_eq!(r.within_band_share, Some(0.75));
        assert_eq!(r.mean_w, Some((420.0 + 460.0 + 430.0 + 410.0) / 4.0));
        assert_eq!(r.samples, 6);
        // Never reached: the mean of every sample, no share.
        let feed = PowerFeed::default();
        let mut c = PowerController::new(60);
        c.duty(Duration::ZERO, Some(&feed));
        feed.update(sample(Some(100.0), ""));
        c.duty(at(1), Some(&feed));
        feed.update(sample(Some(200.0), ""));
        c.duty(at(2), Some(&feed));
        let r = c.report(at(2));
        assert_eq!(r.reached_after_s, None);
        assert_eq!(r.within_band_share, None);
        assert_eq!(r.mean_w, Some(150.0));
        assert_eq!(r.outcome, PowerOutcome::Unsettled);
        assert!(r.why_not().unwrap().contains("420 W"));
    }

    #[test]
    fn a_card_short_of_the_target_at_full_load_is_at_its_load_limit() {
        // Warms up over a few seconds to 450 W, against a 560 W target.
        let (c, duties) = drive(80, 30, |t, _| {
            (Some(450.0 - 360.0 * (-(t as f64) / 2.0).exp()), "")
        });
        assert!(duties.iter().all(|d| *d == 1.0), "pinned flat out");
        let r = c.report(at(30));
        let PowerOutcome::AtLoadLimit { full_load_w } = r.outcome else {
            panic!("{r:?}");
        };
        assert!((full_load_w - 450.0).abs() < 5.0, "{full_load_w}");
        assert_eq!(
            r.why_not().unwrap(),
            "the card draws only 450 W at full load, below the 560 W target: it is at the limit of its load"
        );
    }

    #[test]
    fn the_power_cap_alone_is_the_limit_not_the_environment() {
        let (c, _) = drive(80, 10, |_, _| (Some(500.0), "sw_power_cap"));
        assert!(matches!(
            c.report(at(10)).outcome,
            PowerOutcome::AtLoadLimit { .. }
        ));
    }

    #[test]
    fn heat_that_holds_the_card_below_the_target_is_throttling() {
        let (c, _) = drive(80, 10, |_, _| {
            (Some(500.0), "sw_power_cap,hw_thermal_slowdown,gpu_idle")
        });
        let r = c.report(at(10));
        assert_eq!(
            r.outcome,
            PowerOutcome::Throttled {
                reasons: vec!["hw_thermal_slowdown".into()]
            }
        );
        assert_eq!(
            r.why_not().unwrap(),
            "throttled (hw_thermal_slowdown) below the 560 W target: cooling or power delivery holds it back"
        );
    }

    #[test]
    fn held_then_throttled_reports_the_throttling() {
        // Follows the duty for 20 s, then heat caps it at 480 W.
        let (c, _) = drive(80, 40, |t, d| {
            if t <= 20 {
                (Some(90.0 + 600.0 * d), "")
            } else {
                (Some(480.0_f64.min(90.0 + 600.0 * d)), "sw_thermal_slowdown")
            }
        });
        let r = c.report(at(40));
        assert!(r.reached_after_s.is_some());
        assert_eq!(
            r.outcome,
            PowerOutcome::Throttled {
                reasons: vec!["sw_thermal_slowdown".into()]
            }
        );
    }

    #[test]
    fn three_samples_short_of_the_target_in_under_two_seconds_are_not_the_cards_limit() {
        // Sampled every 200 ms: five samples at full duty below the band span 0.8 s, a
        // card still warming up to the load as far as anyone can tell.
        let feed = PowerFeed::default();
        let mut c = PowerController::new(80);
        c.duty(Duration::ZERO, Some(&feed));
        for ms in (200..=1000).step_by(200) {
            feed.update(sample(Some(300.0), "hw_slowdown"));
            assert_eq!(c.duty(Duration::from_millis(ms), Some(&feed)), 1.0);
        }
        assert_eq!(c.report(at(1)).outcome, PowerOutcome::Unsettled);
        // Two seconds of them are.
        for ms in (1200..=2200).step_by(200) {
            feed.update(sample(Some(300.0), "hw_slowdown"));
            c.duty(Duration::from_millis(ms), Some(&feed));
        }
        assert!(matches!(
            c.report(at(3)).outcome,
            PowerOutcome::Throttled { .. }
        ));
    }

    #[test]
    fn warming_up_to_the_load_before_the_target_is_reached_does_not_count() {
        // Pinned below the band for 6 s while the card warms up, then held.
        let (c, _) = drive(80, 40, |t, d| {
            let warm = 1.0 - (-(t as f64) / 3.0).exp();
            (Some(90.0 + 600.0 * d * warm), "")
        });
        let r = c.report(at(40));
        assert_eq!(r.outcome, PowerOutcome::Held, "{r:?}");
    }

    #[test]
    fn a_target_below_what_the_card_draws_barely_loaded_is_at_the_minimum_load() {
        // 5% of 700 W is 35 W; this card draws 90 W at rest.
        let (c, duties) = drive(5, 60, |_, d| (Some(90.0 + 600.0 * d), ""));
        assert_eq!(*duties.last().unwrap(), MIN_DUTY);
        let r = c.report(at(60));
        let PowerOutcome::AtMinimumLoad { min_load_w } = r.outcome else {
            panic!("{r:?}");
        };
        assert!((min_load_w - 120.0).abs() < 1.0, "{min_load_w}");
        assert!(r.why_not().unwrap().contains("35 W"));
    }

    #[test]
    fn without_a_feed_the_load_runs_flat_out_and_says_so() {
        let mut c = PowerController::new(80);
        for ms in (0..=10_000).step_by(100) {
            assert_eq!(c.duty(Duration::from_millis(ms), None), 1.0);
        }
        let r = c.report(at(10));
        assert_eq!(r.outcome, PowerOutcome::NoTelemetry);
        assert!((r.mean_duty - 1.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.samples, 0);
        assert_eq!(
            r.why_not().unwrap(),
            "no power telemetry: the target cannot be held; the load ran flat out"
        );
    }

    #[test]
    fn unavailable_power_for_the_grace_period_gives_up_the_target_for_good() {
        let (c, duties) = drive(80, 20, |t, d| {
            // Power appears only after the grace period: too late, the load stays flat out.
            (if t > 6 { Some(90.0 + 600.0 * d) } else { None }, "")
        });
        assert!(duties.iter().all(|d| *d == 1.0));
        assert_eq!(c.report(at(20)).outcome, PowerOutcome::NoTelemetry);
    }

    #[test]
    fn only_new_samples_move_the_duty_and_the_one_before_the_load_is_not_one() {
        let feed = PowerFeed::default();
        // Read while the card was idle, before the load.
        feed.update(sample(Some(90.0), ""));
        let mut c = PowerController::new(60);
        assert_eq!(c.duty(Duration::ZERO, Some(&feed)), 1.0);
        assert_eq!(c.duty(at(1), Some(&feed)), 1.0);
        assert_eq!(c.report(at(1)).samples, 0);
        feed.update(sample(Some(690.0), ""));
        let moved = c.duty(at(2), Some(&feed));
        assert!(moved < 1.0);
        assert_eq!(c.duty(Duration::from_millis(2100), Some(&feed)), moved);
        assert_eq!(c.report(at(3)).samples, 1);
    }

    #[test]
    fn a_poisoned_feed_reads_as_no_sample() {
        let feed = PowerFeed::default();
        feed.update(sample(Some(400.0), ""));
        let poisoner = feed.clone();
        let _ = std::thread::spawn(move || {
            let _guard = poisoner.inner.lock();
            panic!("poison the lock");
        })
        .join();
        assert!(feed.latest().is_none());
        feed.update(sample(Some(400.0), ""));
        assert!(feed.latest().is_none());
    }

    #[test]
    fn the_sequence_grows_with_each_update() {
        let feed = PowerFeed::default();
        assert!(feed.latest().is_none());
        feed.update(sample(Some(1.0), ""));
        feed.update(sample(Some(2.0), ""));
        let (sequence, readings) = feed.latest().unwrap();
        assert_eq!(sequence, 2);
        assert_eq!(readings[signals::POWER_W.name], Reading::Number(2.0));
    }

    #[test]
    fn the_mean_duty_is_weighted_by_time() {
        let feed = PowerFeed::default();
        let mut c = PowerController::new(60);
        c.duty(Duration::ZERO, Some(&feed));
        c.duty(at(1), Some(&feed));
        feed.update(sample(Some(690.0), ""));
        let d = c.duty(at(2), Some(&feed));
        let r = c.report(at(4));
        assert!((r.mean_duty - (2.0 + 2.0 * d) / 4.0).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn targets_are_taken_into_range_and_the_report_round_trips() {
        assert_eq!(PowerController::new(0).report(at(0)).target_pct, 1);
        assert_eq!(PowerController::new(150).report(at(0)).target_pct, 100);
        let (c, _) = drive(80, 10, |_, _| (Some(500.0), "hw_power_brake_slowdown"));
        let r = c.report(at(10));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["outcome"]["kind"], "throttled");
        assert_eq!(json["outcome"]["reasons"][0], "hw_power_brake_slowdown");
        let back: PowerTargetReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        let json = serde_json::to_value(PowerOutcome::NoTelemetry).unwrap();
        assert_eq!(json["kind"], "no_telemetry");
    }
}
