//! What a person at the terminal sees while a run goes on: per device a bar over its whole
//! plan with the percent done and the time left, the workload running now (which of how
//! many, its step), the card's temperature and power as the telemetry last read them, and
//! the running count of what went wrong.

use std::time::Duration;

use crate::evidence::Event;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// The bar's resolution when the plan has no time budget: per workload.
const PER_WORKLOAD: u64 = 1000;

/// One device's line.
pub struct DeviceProgress {
    bar: indicatif::ProgressBar,
    /// The run's time budget, when it has one: the bar then measures time.
    budget: Option<Duration>,
    /// Planned workloads.
    planned: usize,
    /// Workloads ended.
    ended: usize,
    /// The running one, and what it does now.
    running: Option<String>,
    step: Option<String>,
    /// Wrong words, results, elements and transfers seen so far.
    faults: u64,
    /// What the device waits for, when it waits.
    waiting: Option<&'static str>,
}

/// A note of a workload that says it found a wrong result, element or transfer.
fn is_fault_note(message: &str) -> bool {
    ["compute mismatch", "matrix mismatch", "pcie corruption"]
        .iter()
        .any(|p| message.starts_with(p))
}

impl DeviceProgress {
    /// A line for device `label` among `bars`.
    pub fn new(
        bars: &indicatif::MultiProgress,
        label: String,
        planned: usize,
        budget: Option<Duration>,
    ) -> DeviceProgress {
        let length = match budget {
            Some(b) => b.as_millis().max(1) as u64,
            None => planned.max(1) as u64 * PER_WORKLOAD,
        };
        let bar = bars.add(indicatif::ProgressBar::new(length));
        bar.set_prefix(label);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:24}] {percent:>3}% {elapsed_precise} ETA {eta_precise} {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        DeviceProgress {
            bar,
            budget,
            planned,
            ended: 0,
            running: None,
            step: None,
            faults: 0,
            waiting: None,
        }
    }

    /// Takes in one of the device's events.
    pub fn event(&mut self, event: &Event) {
        self.waiting = None;
        match event {
            Event::WorkloadStart { workload, .. } => {
                self.running = Some(workload.clone());
                self.step = None;
            }
            Event::Step {
                algorithm,
                pass,
                op,
                errors,
                ..
            } => {
                self.step = Some(format!("{algorithm} pass {pass} {op}"));
                self.faults += errors;
            }
            Event::WorkloadEnd { .. } => {
                self.running = None;
                self.step = None;
                self.ended += 1;
            }
            Event::Note { message } if is_fault_note(message) => self.faults += 1,
            _ => {}
        }
    }

    /// The device waits (for an idle card, for its turn), said until its next event.
    pub fn wait(&mut self, why: &'static str) {
        self.waiting = Some(why);
    }

    /// Redraws with the time spent on the plan (waits not counted) and the newest sample.
    pub fn refresh(&self, working: Duration, latest: Option<&Readings>) {
        let position = match self.budget {
            Some(b) => working.min(b).as_millis() as u64,
            None => self.ended.min(self.planned) as u64 * PER_WORKLOAD,
        };
        self.bar.set_position(position);
        self.bar.set_message(self.message(latest));
    }

    /// The line after the bar: the workload (which of how many) and its step, the card's
    /// temperature and power, and what went wrong so far.
    fn message(&self, latest: Option<&Readings>) -> String {
        let mut parts = Vec::new();
        match (self.waiting, &self.running) {
            (Some(why), _) => parts.push(why.to_owned()),
            (None, Some(w)) => parts.push(format!(
                "{w} ({} of {}){}",
                (self.ended + 1).min(self.planned.max(1)),
                self.planned,
                self.step
                    .as_deref()
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default()
            )),
            (None, None) if self.ended >= self.planned => parts.push("done".into()),
            (None, None) => parts.push("starting".into()),
        }
        let number = |key: &str| latest.and_then(|r| r.get(key)).and_then(Reading::number);
        let mut gauges = Vec::new();
        if let Some(t) = number(signals::GPU_TEMP_C.name) {
            gauges.push(format!("{t:.0} °C"));
        }
        if let Some(p) = number(signals::POWER_W.name) {
            gauges.push(format!("{p:.0} W"));
        }
        if !gauges.is_empty() {
            parts.push(gauges.join(" "));
        }
        parts.push(if self.faults == 0 {
            "nothing wrong so far".into()
        } else {
            format!("{} so far", crate::text::count(self.faults, "fault"))
        });
        parts.join(" | ")
    }

    /// Clears the line: the summary follows.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(p: &DeviceProgress, latest: Option<&Readings>) -> String {
        p.message(latest)
    }

    #[test]
    fn the_line_says_which_workload_its_step_the_card_and_what_went_wrong() {
        let bars =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let mut p = DeviceProgress::new(&bars, "GPU0".into(), 3, Some(Duration::from_secs(60)));
        assert_eq!(line(&p, None), "starting | nothing wrong so far");
        p.event(&Event::WorkloadStart {
            workload: "vram".into(),
            settings: serde_json::Value::Null,
        });
        p.event(&Event::Step {
            workload: "vram".into(),
            algorithm: "own-address".into(),
            pass: 0,
            step: 1,
            op: "verify".into(),
            pattern: String::new(),
            bytes: 0,
            gpu_ns: 0,
            wall_ns: 0,
            errors: 2,
            completed: true,
        });
        let mut readings = Readings::new();
        readings.insert("gpu_temp_c".into(), Reading::Number(71.4));
        readings.insert("power_w".into(), Reading::Number(612.0));
        assert_eq!(
            line(&p, Some(&readings)),
            "vram (1 of 3): own-address pass 0 verify | 71 °C 612 W | 2 faults so far"
        );
        p.event(&Event::Note {
            message: "compute mismatch (redundant_run): FP32 item 7".into(),
        });
        p.wait("waiting for the GPU to be idle and cool");
        assert!(
            line(&p, None).starts_with("waiting for the GPU"),
            "{}",
            line(&p, None)
        );
        // Half the budget spent is half the bar.
        p.refresh(Duration::from_secs(30), None);
        assert_eq!(p.bar.position(), 30_000);
        assert!(line(&p, None).ends_with("3 faults so far"));
    }
}
