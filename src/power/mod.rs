//! Power target: a feedback loop that sets a load's duty cycle (the share of each load
//! period spent dispatching work) so that board power holds at a chosen percentage of the
//! enforced power limit, read from the telemetry sidecar's samples.
//!
//! The loop is pure: a workload asks [`PowerController::duty`] at each of its period
//! boundaries, and the sidecar's samples reach it through a [`PowerFeed`]. At the end,
//! [`PowerController::report`] says whether the target was held, and if not, why
//! ([`PowerOutcome`], [`PowerTargetReport::why_not`]).
//!
//! The law, per new sample (P board power, u the duty that drew it, T the target):
//!
//! ```text
//! slope_w = clamp(P / u, 0.7 x limit, 4 x limit)         the card's watts per unit duty
//! e       = T - P
//! u      += (KP x (e - e_prev) + KI_PER_S x dt_s x e) / slope_w,  clamped to [0.05, 1]
//! ```
//!
//! An integral controller with a small proportional lead, in velocity form (it moves the
//! duty, so clamping it never winds anything up), scaled by an online estimate of how
//! many watts a unit of duty buys. Why each number is what it is: see [`KP`],
//! [`KI_PER_S`], [`SLOPE_PRIOR_OF_LIMIT`].
//!
//! In parts: this module the law's numbers, the pacer and the feed; `controller` the
//! loop itself; `report` what it says at the end.

mod controller;
mod report;

pub use controller::PowerController;
pub use report::{PowerOutcome, PowerTargetReport};

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::telemetry::reading::number;
use crate::telemetry::record::Readings;
use crate::telemetry::signals;
use crate::telemetry::throttle::{self, ThrottleReason};

/// Half-width of the band the power is held in, as a fraction of the target (±5%).
pub const BAND_FRACTION: f64 = 0.05;

/// The lowest duty the controller sets: some work keeps flowing, so the card never
/// drops to rest between periods and the loop never loses sight of it.
pub const MIN_DUTY: f64 = 0.05;

/// How long a load waits for a usable power reading before it gives up the target and
/// runs flat out: a few samples at the default 1 s interval, and a sidecar that has
/// started late or missed a tick still gets through.
pub const TELEMETRY_GRACE: Duration = Duration::from_secs(5);

/// Consecutive samples with the duty pinned (at 1.0 below the band, or at its floor
/// above it) before the card, not the loop, is taken to be what stops the target.
pub const PINNED_SAMPLES: usize = 3;

/// ... and the least time those samples must span. At 200 ms sampling, three samples
/// are a fraction of the card's own lag: a card still warming up to full load would read
/// as one that cannot reach the target.
pub const PINNED_MIN: Duration = Duration::from_secs(2);

/// Proportional gain on the change of the error between samples (dimensionless: watts
/// of error change over watts per unit duty).
///
/// It is the lead that damps the card's lag. For a card whose power follows the duty
/// with a first-order lag of `tau` seconds, the loop's characteristic equation is
/// `tau s^2 + (1 + r KP) s + r KI = 0` (`r`: the true slope over the estimate, at most 1,
/// see [`SLOPE_PRIOR_OF_LIMIT`]), so the damping ratio is
/// `(1 + r KP) / (2 sqrt(tau r KI))`: 0.59 at `tau` 2 s and `r` 1, 0.64 at `r` 0.8. It is
/// kept small because it acts on each sample's noise too: readings scattered by 1% move
/// the duty by about 0.3 x 1.4 x 1% of itself per sample (the slope estimate is near
/// P / u), a tenth of the band.
pub const KP: f64 = 0.3;

/// Integral gain, per second of time between samples.
///
/// On a card without lag, one second of error moves the duty by 60% of the way to the
/// target (times `r` <= 1): never past it, whatever the interval (the time between
/// samples counts at most [`MAX_STEP`]). With the lead, the sampled loop on such a card
/// stays stable while `r (2 KP + KI dt) < 2`, so the slope may be underestimated by a
/// factor of up to 1.6 (as it is, briefly, while the power lags a falling duty) before
/// it would ring. Larger values settle a lagging card no faster
/// (the damping above falls as `1/sqrt(KI)`); smaller ones only slow the approach.
pub const KI_PER_S: f64 = 0.6;

/// The most time between two samples the integral counts: a sidecar that missed ticks
/// does not make the next step larger than one second's.
pub const MAX_STEP: Duration = Duration::from_secs(1);

/// The slope prior and floor, as a fraction of the enforced limit (watts per unit duty).
///
/// The estimate is the secant `P / u`: for any card whose power rises with the duty and
/// flattens (concave, capped at the limit) from a non-negative idle power, the secant
/// through zero is at least the local slope, so the loop's gain on the card is at most
/// its design value (`r <= 1`), never above it. The floor covers the first samples of a
/// load, when the power still lags far behind a full duty and the secant says little:
/// 0.7 x limit is a card that idles near 15% of its limit and draws near 85% at full load,
/// the shape of a datacenter card under a matrix load.
pub const SLOPE_PRIOR_OF_LIMIT: f64 = 0.7;

/// The slope ceiling, as a fraction of the enforced limit: near the duty floor the secant
/// holds mostly idle power; capping it keeps the steps there from vanishing.
pub const SLOPE_MAX_OF_LIMIT: f64 = 4.0;

/// The throttle reasons that mean the environment holds the card back (heat, a slowdown
/// signal, the system's power brake). `sw_power_cap` is the limit itself, which the
/// target is a share of; `gpu_idle` and the clock settings say nothing of the card's
/// surroundings.
pub const ENVIRONMENT_REASONS: [ThrottleReason; 4] = [
    ThrottleReason::HwSlowdown,
    ThrottleReason::SwThermalSlowdown,
    ThrottleReason::HwThermalSlowdown,
    ThrottleReason::HwPowerBrakeSlowdown,
];

/// `power_target` of a profile's workload, `--power-target`: percent of the enforced
/// power limit.
pub const POWER_TARGET: crate::limits::Bounds<u64> = crate::limits::Bounds { min: 1, max: 100 };

/// The load period of a duty-cycled load: long enough that a card's power follows the
/// average of its bursts, short enough that the bursts stay well inside one telemetry
/// interval.
pub const LOAD_PERIOD: Duration = Duration::from_millis(200);

/// Paces a duty-cycled load: before each unit of work it says whether to work now or
/// rest, so that the share of each period spent working is the duty asked for. A unit
/// that overruns its period's share is not paid back: the power target's loop absorbs
/// that (it moves the duty until the power is right), and a fixed shape runs slightly
/// heavier than asked.
#[derive(Debug, Clone)]
pub struct Pacer {
    period: Duration,
    period_start: std::time::Instant,
    busy: Duration,
}

impl Pacer {
    /// A pacer with periods of `period`, the first starting now.
    pub fn new(period: Duration) -> Pacer {
        Pacer {
            period,
            period_start: std::time::Instant::now(),
            busy: Duration::ZERO,
        }
    }

    /// How long to rest before the next unit of work at `duty` (zero: work now), at most
    /// 50 ms so that a stop is seen promptly.
    pub fn rest(&mut self, duty: f64) -> Duration {
        if self.period_start.elapsed() >= self.period {
            self.period_start = std::time::Instant::now();
            self.busy = Duration::ZERO;
        }
        if self.busy.as_secs_f64() < duty * self.period.as_secs_f64() {
            return Duration::ZERO;
        }
        self.period
            .saturating_sub(self.period_start.elapsed())
            .min(Duration::from_millis(50))
    }

    /// Counts `took` of work in the current period.
    pub fn worked(&mut self, took: Duration) {
        self.busy += took;
    }
}

/// The latest telemetry sample of one device, shared between the sidecar (which
/// updates it) and a load's controller (which reads it). Clones share the same sample.
#[derive(Debug, Clone, Default)]
pub struct PowerFeed {
    inner: Arc<Mutex<FeedState>>,
}

/// The sample and its sequence number (0 before the first).
#[derive(Debug, Default)]
struct FeedState {
    sequence: u64,
    readings: Option<Readings>,
}

impl PowerFeed {
    /// Replaces the sample with a newer one; the sequence number grows by one. A poisoned
    /// lock drops the sample: the controller then reads no new sample, which it handles.
    pub fn update(&self, readings: Readings) {
        if let Ok(mut state) = self.inner.lock() {
            state.sequence = state.sequence.wrapping_add(1);
            state.readings = Some(readings);
        }
    }

    /// The sequence number and readings of the latest sample; None before the first, or
    /// when the lock is poisoned (a reader treats that as no reading).
    pub fn latest(&self) -> Option<(u64, Readings)> {
        let state = self.inner.lock().ok()?;
        let readings = state.readings.clone()?;
        Some((state.sequence, readings))
    }

    /// The latest sample's number under `key` (a signal's name), where it was read.
    pub fn number(&self, key: &str) -> Option<f64> {
        let state = self.inner.lock().ok()?;
        crate::telemetry::reading::number(state.readings.as_ref()?, key)
    }
}
