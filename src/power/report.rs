//! What a power target achieved over one load, and why it was not held where it was not.

use super::*;

/// How a power target ended.
///
/// The outcome can change during a run (held at first, throttled once the card is hot).
/// The report gives the worst state seen once the target was first reached, so that a
/// target held for a minute and then lost to heat reads as lost, with the reason; before
/// it is reached, the card is still warming up to the load, and nothing then counts
/// against it unless the target is never reached at all. Worst first: `Throttled`, then
/// `AtLoadLimit`, then `AtMinimumLoad`, then `Held` (or `Unsettled`, never reached).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PowerOutcome {
    /// The power came within the band of the target, and the card was never seen unable
    /// to keep it there.
    Held,
    /// The duty sat at 1.0 for [`PINNED_SAMPLES`] samples (over at least [`PINNED_MIN`])
    /// with the power below the band, and no environment throttle reason set: the card
    /// draws less than the target at full load.
    AtLoadLimit {
        /// The power at full load (the mean of the later half of the latest such
        /// stretch, once the card has settled to it), in watts.
        full_load_w: f64,
    },
    /// As `AtLoadLimit`, but with an environment throttle reason
    /// ([`ENVIRONMENT_REASONS`]) set: heat or power delivery holds the card back.
    Throttled {
        /// The environment reasons seen while it was held below the target.
        reasons: Vec<String>,
    },
    /// The duty sat at its floor ([`MIN_DUTY`]) with the power above the band: the card
    /// draws more than the target even at the lightest load.
    AtMinimumLoad {
        /// The power at the lightest load, in watts (as `full_load_w`).
        min_load_w: f64,
    },
    /// The power never came within the band, and the duty was never pinned long enough
    /// to say why (a load too short for the loop to settle).
    Unsettled,
    /// No usable power and limit readings within [`TELEMETRY_GRACE`] of the load's start,
    /// or no feed at all: the target cannot be held, and the load ran flat out.
    NoTelemetry,
}

/// What a power target achieved over one load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerTargetReport {
    /// The target, in percent of the enforced limit.
    pub target_pct: u32,
    /// The target in watts, on the latest limit read.
    pub target_w: Option<f64>,
    /// The latest enforced power limit read, in watts.
    pub limit_w: Option<f64>,
    /// Seconds from the load's start until the controller first saw a sample within the
    /// band (it sees a sample at its next period boundary, at most one period late).
    pub reached_after_s: Option<f64>,
    /// Share of the samples from the first within the band on that lie within it.
    pub within_band_share: Option<f64>,
    /// Mean power of the samples from the first within the band on (of every sample
    /// when the band was never reached), in watts.
    pub mean_w: Option<f64>,
    /// The duty over the load, weighted by time.
    pub mean_duty: f64,
    /// Samples with a usable power reading the controller acted on.
    pub samples: u32,
    /// How it ended.
    pub outcome: PowerOutcome,
}

impl PowerTargetReport {
    /// The report in one line, for the text report.
    pub fn line(&self) -> String {
        let target = match (self.target_w, self.limit_w) {
            (Some(t), Some(l)) => format!("{}% ({t:.0} W of {l:.0} W)", self.target_pct),
            _ => format!("{}%", self.target_pct),
        };
        let held = match (self.reached_after_s, self.within_band_share) {
            (Some(after), Some(share)) => format!(
                "reached after {after:.1} s, {:.0}% of {} samples within {:.0}% since",
                share * 100.0,
                self.samples,
                BAND_FRACTION * 100.0
            ),
            _ => format!("not reached in {} samples", self.samples),
        };
        let mean = self
            .mean_w
            .map(|w| format!(", mean {w:.0} W"))
            .unwrap_or_default();
        let why = self.why_not().map(|w| format!(": {w}")).unwrap_or_default();
        format!(
            "power target {target}: {held}{mean}, mean duty {:.2}{why}",
            self.mean_duty
        )
    }

    /// One plain sentence saying why the target was not held; None when it was.
    pub fn why_not(&self) -> Option<String> {
        let target = match self.target_w {
            Some(w) => format!("the {w:.0} W target"),
            None => format!("the {}% target", self.target_pct),
        };
        match &self.outcome {
            PowerOutcome::Held => None,
            PowerOutcome::AtLoadLimit { full_load_w } => Some(format!(
                "the card draws only {full_load_w:.0} W at full load, below {target}: it is at the limit of its load"
            )),
            PowerOutcome::Throttled { reasons } => Some(format!(
                "throttled ({}) below {target}: cooling or power delivery holds it back",
                reasons.join(", ")
            )),
            PowerOutcome::AtMinimumLoad { min_load_w } => Some(format!(
                "the card draws {min_load_w:.0} W even at the lightest load ({:.0}% duty), above {target}: the target is below what it draws when barely loaded",
                MIN_DUTY * 100.0
            )),
            PowerOutcome::Unsettled => Some(format!(
                "the power never came within {:.0}% of {target} before the load ended",
                BAND_FRACTION * 100.0
            )),
            PowerOutcome::NoTelemetry => {
                Some("no power telemetry: the target cannot be held; the load ran flat out".into())
            }
        }
    }
}
