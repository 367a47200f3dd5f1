//! What a person at the terminal sees while a run goes on: per device a bar over its whole
//! plan with the percent done and the time left, the planned workload running now by its
//! own name (`heat`, not the parts it runs), which of how many and its step, the card's
//! temperature and power as the telemetry last read them, and the running count of what
//! went wrong. The time left is the plan's budget less the time worked, never a rate's
//! guess: a wait (for an idle, cool card) says its target and the reading now instead.

use std::time::Duration;

use crate::evidence::Event;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// The bar's resolution when the plan has no time budget: per workload.
const PER_WORKLOAD: u64 = 1000;

/// The longest live line, in columns: it must not wrap on a terminal of 100.
pub const LINE_MAX: usize = 100;

/// The columns the bar's template takes before the message, with a prefix of `GPU0`:
/// `GPU0 [================]  42% `.
const TEMPLATE_COLUMNS: usize = 29;

/// The columns of [`DRAINING`] before the message: `GPU0 [================] `.
const DRAINING_COLUMNS: usize = 24;

/// The bar while the device works on its plan; the message starts with the time left.
const WORKING: &str = "{prefix} [{bar:16}] {percent:>3}% {msg}";
/// The bar once the plan's time is spent and a phase drains: full, with no percent that
/// would sit at 99%; the message says what is finishing.
const DRAINING: &str = "{prefix} [{bar:16}] {msg}";

/// What a device waits for, said until its next event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// For the card to be idle and cool before its next workload (`--wait-idle`).
    IdleAndCool,
    /// For its turn at the PCIe probe, which other devices share.
    PcieTurn,
}

/// One device's line.
pub struct DeviceProgress {
    bars: indicatif::MultiProgress,
    bar: indicatif::ProgressBar,
    /// `GPU0`: the bar's prefix, and the start of each line in the scrollback.
    label: String,
    /// The run's time budget, when it has one: the bar then measures time.
    budget: Option<Duration>,
    /// Planned workloads.
    planned: usize,
    /// Workloads ended.
    ended: usize,
    /// The running one, and what it does now.
    running: Option<String>,
    step: Option<String>,
    /// Whether the bar shows [`DRAINING`] now.
    draining: bool,
    /// What went wrong so far, by the noun its workload counts it in (`wrong read`,
    /// `wrong result`), in the order first seen: the words and counts the summary gives.
    faults: Vec<(&'static str, u64)>,
    /// What the device waits for, when it waits.
    waiting: Option<Wait>,
    /// The confirmation run under way (`confirm 2 of 4`), if one is.
    rerun: Option<String>,
    /// The VRAM passes since the last line in the scrollback.
    pass: Option<PassTally>,
    /// When the last line of passes was said.
    pass_said: std::time::Instant,
}

/// How often at most the scrollback gets a line of VRAM passes: a small buffer passes in
/// milliseconds, and a screen of lines would bury the bars. A pass that found errors is
/// said at once.
const PASS_LINE_EVERY: Duration = Duration::from_secs(10);

/// The VRAM passes since the last line in the scrollback, as their steps come.
struct PassTally {
    /// The first and the last pass counted.
    passes: (u32, u32),
    /// The algorithms run, in order.
    algorithms: Vec<String>,
    bytes: u64,
    wall_ns: u64,
    errors: u64,
}

impl PassTally {
    /// `vram pass 1: own-address, random: 1.75 GiB swept, 0 errors, 14.2 GiB/s`, as
    /// memtest_vulkan says its passes.
    fn line(&self) -> String {
        let gib = crate::units::to_gib(self.bytes);
        let rate = if self.wall_ns > 0 {
            format!(", {:.1} GiB/s", gib / (self.wall_ns as f64 / 1e9))
        } else {
            String::new()
        };
        let passes = match self.passes {
            (a, b) if a == b => format!("pass {a}"),
            (a, b) => format!("passes {a}-{b}"),
        };
        format!(
            "vram {passes}: {}: {gib:.2} GiB swept, {}{rate}",
            self.algorithms.join(", "),
            crate::text::count(self.errors, crate::workload::fault_noun("vram"))
        )
    }
}

/// The bar's style from its template (the default bar should the template not parse).
fn style(template: &str) -> indicatif::ProgressStyle {
    indicatif::ProgressStyle::with_template(template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// The workload whose note says it found one wrong result, element or transfer.
fn fault_note_of(message: &str) -> Option<&'static str> {
    [
        ("compute mismatch", "compute"),
        ("matrix mismatch", "matrix"),
        ("pcie corruption", "pcie"),
    ]
    .iter()
    .find(|(start, _)| message.starts_with(start))
    .map(|(_, workload)| *workload)
}

impl DeviceProgress {
    /// A line for device `label` (`GPU0`) among `bars`, after a line naming it (`name`)
    /// and its plan in the scrollback.
    pub fn new(
        bars: &indicatif::MultiProgress,
        label: String,
        name: &str,
        planned: usize,
        budget: Option<Duration>,
    ) -> DeviceProgress {
        let length = match budget {
            Some(b) => b.as_millis().max(1) as u64,
            None => planned.max(1) as u64 * PER_WORKLOAD,
        };
        let _ = bars.println(format!(
            "{label} {name}: {}{}",
            crate::text::count(planned as u64, "workload"),
            budget
                .map(|b| format!(", at most {}", crate::units::duration_rounded_up(b)))
                .unwrap_or_default()
        ));
        let bar = bars.add(indicatif::ProgressBar::new(length));
        bar.set_prefix(label.clone());
        bar.set_style(style(WORKING));
        DeviceProgress {
            bars: bars.clone(),
            bar,
            label,
            budget,
            planned,
            ended: 0,
            running: None,
            step: None,
            draining: false,
            faults: Vec::new(),
            waiting: None,
            rerun: None,
            pass: None,
            pass_said: std::time::Instant::now(),
        }
    }

    /// Says a line in the scrollback, above the bars (nothing when they are hidden).
    fn say(&self, line: &str) {
        let _ = self.bars.println(format!("{} {line}", self.label));
    }

    /// Says the VRAM passes counted since the last line, if any.
    fn end_pass(&mut self) {
        if let Some(p) = self.pass.take() {
            self.say(&p.line());
            self.pass_said = std::time::Instant::now();
        }
    }

    /// Takes in one of the device's events.
    pub fn event(&mut self, event: &Event) {
        self.waiting = None;
        match event {
            // The planned workload's name comes with its phase ([`Self::phase`]): the
            // parts it runs (`vram` and `compute` inside `heat`) only name it where no
            // phase was said.
            Event::WorkloadStart { workload, .. } => {
                if self.running.is_none() {
                    self.running = Some(workload.clone());
                }
                self.step = None;
            }
            Event::Step {
                workload,
                algorithm,
                pass,
                op,
                errors,
                bytes,
                wall_ns,
                ..
            } => {
                self.step = Some(format!("{algorithm} p{pass} {op}"));
                self.count_faults(workload, *errors);
                if workload == "vram" {
                    // At the start of a new pass, the passes before it are said when a
                    // line is due, or at once when they found errors.
                    let due = self.pass.as_ref().is_some_and(|p| {
                        p.passes.1 != *pass
                            && (p.errors > 0 || self.pass_said.elapsed() >= PASS_LINE_EVERY)
                    });
                    if due {
                        self.end_pass();
                    }
                    let p = self.pass.get_or_insert_with(|| PassTally {
                        passes: (*pass, *pass),
                        algorithms: Vec::new(),
                        bytes: 0,
                        wall_ns: 0,
                        errors: 0,
                    });
                    p.passes.1 = *pass;
                    if !p.algorithms.contains(algorithm) {
                        p.algorithms.push(algorithm.clone());
                    }
                    p.bytes += bytes;
                    p.wall_ns += wall_ns;
                    p.errors += errors;
                }
            }
            Event::WorkloadEnd { .. } => {
                self.end_pass();
                self.step = None;
            }
            Event::Confirm { run, runs, .. } => {
                self.rerun = Some(format!("confirm {run} of {runs}"));
            }
            Event::Note { message } => {
                if let Some(workload) = fault_note_of(message) {
                    self.count_faults(workload, 1);
                }
            }
            _ => {}
        }
    }

    /// A planned workload's phase begins or ends (`phase`: its name, `heat`): the line
    /// names it whatever parts it runs, and it counts once however many parts end.
    pub fn phase(&mut self, phase: &str, when: crate::telemetry::record::Boundary) {
        use crate::telemetry::record::Boundary;
        self.waiting = None;
        match when {
            Boundary::Before => {
                self.running = Some(phase.to_owned());
                self.step = None;
            }
            Boundary::After => {
                self.end_pass();
                self.running = None;
                self.step = None;
                // A rerun is not another planned workload.
                if self.rerun.take().is_none() {
                    self.ended += 1;
                }
            }
        }
    }

    /// Counts `n` faults of `workload` under its noun.
    fn count_faults(&mut self, workload: &str, n: u64) {
        if n == 0 {
            return;
        }
        let noun = crate::workload::fault_noun(workload);
        match self.faults.iter_mut().find(|(w, _)| *w == noun) {
            Some((_, count)) => *count += n,
            None => self.faults.push((noun, n)),
        }
    }

    /// The device waits (for an idle card, for its turn), said until its next event.
    pub fn wait(&mut self, why: Wait) {
        self.waiting = Some(why);
    }

    /// Redraws with the time spent on the plan (waits not counted) and the newest sample.
    pub fn refresh(&mut self, working: Duration, latest: Option<&Readings>) {
        // Past its budget, a phase still drains: the bar is full, with no percent held
        // at 99%, and the line says what is finishing.
        let over = self.budget.is_some_and(|b| working > b);
        let position = match self.budget {
            Some(b) => working.min(b).as_millis() as u64,
            None => self.ended.min(self.planned) as u64 * PER_WORKLOAD,
        };
        self.bar.set_position(position);
        if over != self.draining {
            self.draining = over;
            self.bar
                .set_style(style(if over { DRAINING } else { WORKING }));
        }
        let columns = crate::platform::console::columns()
            .map_or(LINE_MAX, |c| c.saturating_sub(1).min(LINE_MAX));
        let left = self
            .budget
            .filter(|_| self.waiting.is_none() && !over)
            .map(|b| b.saturating_sub(working));
        self.bar
            .set_message(self.message(latest, over, left, columns));
    }

    /// The line after the bar: the time left on the plan's budget (`left`, when it has
    /// one and the device works), the planned workload (which of how many, or which
    /// rerun) and its step, the card's temperature and power, and what went wrong so
    /// far, cut to fit `columns` with the bar (the terminal's, at most [`LINE_MAX`]): the
    /// step gives way first, the card's readings only on a terminal too narrow for them,
    /// never the count. Past the budget it says what is finishing; in a wait, its target
    /// and the reading now.
    fn message(
        &self,
        latest: Option<&Readings>,
        over_budget: bool,
        left: Option<Duration>,
        columns: usize,
    ) -> String {
        let eta = left
            .map(|l| format!("ETA {:>4} ", crate::units::duration_rounded_up(l)))
            .unwrap_or_default();
        let what = match (self.waiting, &self.running) {
            (Some(Wait::IdleAndCool), _) => super::idle::wait_words(latest),
            (Some(Wait::PcieTurn), _) => "waiting for its turn at the PCIe probe".to_owned(),
            (None, Some(w)) => format!(
                "{}{w} {}{}",
                if over_budget { "finishing " } else { "" },
                match &self.rerun {
                    Some(r) => r.clone(),
                    None => format!(
                        "{}/{}",
                        (self.ended + 1).min(self.planned.max(1)),
                        self.planned
                    ),
                },
                self.step
                    .as_deref()
                    .map(|s| format!(": {s}"))
                    .unwrap_or_default()
            ),
            (None, None) if self.ended >= self.planned => "done".into(),
            (None, None) => "starting".into(),
        };
        // A wait's own words say the reading it waits on.
        let waited_on = latest;
        let latest = if self.waiting.is_some() { None } else { latest };
        let number = |key: &str| latest.and_then(|r| r.get(key)).and_then(Reading::number);
        let mut kept = Vec::new();
        if let Some(t) = number(signals::GPU_TEMP_C.name) {
            kept.push(format!("{t:.0}°C"));
        }
        if let Some(p) = number(signals::POWER_W.name) {
            kept.push(format!("{p:.0} W"));
        }
        let faults = if self.faults.is_empty() {
            "no faults".to_owned()
        } else {
            self.faults
                .iter()
                .map(|(noun, n)| crate::text::count(*n, noun))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let template = if over_budget {
            DRAINING_COLUMNS
        } else {
            TEMPLATE_COLUMNS
        };
        let room = columns
            .saturating_sub(template + self.label.len().saturating_sub(4) + eta.chars().count());
        // The step gives way first; the card's readings go only where even the workload's
        // name (`vram 1/…`) would not fit beside them and the count.
        const STEP_AT_LEAST: usize = 8;
        while !kept.is_empty()
            && kept.iter().map(|k| k.chars().count() + 3).sum::<usize>()
                + faults.chars().count()
                + 3
                + STEP_AT_LEAST
                > room
        {
            kept.remove(0);
        }
        kept.push(faults);
        let kept = kept.join(" | ");
        let room = room.saturating_sub(kept.chars().count() + 3);
        // A wait's sentence too long for the room left says its target and reading short.
        let what = match self.waiting {
            Some(Wait::IdleAndCool) if what.chars().count() > room => {
                super::idle::wait_words_short(waited_on)
            }
            _ => what,
        };
        format!("{eta}{} | {kept}", crate::text::cut(&what, room))
    }

    /// Clears the line: the summary follows.
    pub fn finish(&mut self) {
        self.end_pass();
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(p: &DeviceProgress, latest: Option<&Readings>) -> String {
        p.message(latest, false, None, LINE_MAX)
    }

    fn phase(p: &mut DeviceProgress, name: &str, when: crate::telemetry::record::Boundary) {
        p.phase(name, when);
    }

    fn step(algorithm: &str, pass: u32, op: &str, errors: u64) -> Event {
        Event::Step {
            workload: "vram".into(),
            algorithm: algorithm.into(),
            pass,
            step: 1,
            op: op.into(),
            pattern: String::new(),
            bytes: 1 << 30,
            gpu_ns: 0,
            wall_ns: 100_000_000,
            errors,
            completed: true,
        }
    }

    #[test]
    fn the_line_says_which_workload_its_step_the_card_and_what_went_wrong() {
        let bars =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let mut p = DeviceProgress::new(
            &bars,
            "GPU0".into(),
            "NVIDIA H200",
            3,
            Some(Duration::from_secs(60)),
        );
        assert_eq!(line(&p, None), "starting | no faults");
        p.event(&Event::WorkloadStart {
            workload: "vram".into(),
            settings: serde_json::Value::Null,
        });
        p.event(&step("own-address", 0, "verify", 2));
        let mut readings = Readings::new();
        readings.insert("gpu_temp_c".into(), Reading::Number(71.4));
        readings.insert("power_w".into(), Reading::Number(612.0));
        assert_eq!(
            line(&p, Some(&readings)),
            "vram 1/3: own-address p0 verify | 71°C | 612 W | 2 wrong reads"
        );
        p.wait(Wait::IdleAndCool);
        let mut quiet = DeviceProgress::new(&bars, "GPU1".into(), "NVIDIA H200", 3, None);
        quiet.wait(Wait::IdleAndCool);
        assert_eq!(
            line(&quiet, Some(&readings)),
            "waiting for the GPU to be idle and under 50 °C: 71 °C now | no faults"
        );
        p.event(&Event::Note {
            message: "compute mismatch (redundant_run): FP32 item 7".into(),
        });
        p.wait(Wait::IdleAndCool);
        // With less room beside the count, the wait says its target and reading short.
        assert_eq!(
            line(&p, Some(&readings)),
            "waiting: idle, under 50 °C; 71 °C now | 2 wrong reads, 1 wrong result"
        );
        // Half the budget spent is half the bar, and the time left is the budget's rest,
        // not a rate's guess: none is said while the device waits.
        p.refresh(Duration::from_secs(30), None);
        assert_eq!(p.bar.position(), 30_000);
        assert!(!p.bar.message().contains("ETA"), "{}", p.bar.message());
        p.event(&step("own-address", 1, "verify", 0));
        p.refresh(Duration::from_secs(30), None);
        assert!(
            p.bar.message().starts_with("ETA  30s vram 1/3"),
            "{}",
            p.bar.message()
        );
        assert!(line(&p, None).ends_with("2 wrong reads, 1 wrong result"));
        // Past the budget, a phase that drains shows a full bar with no percent (never
        // held at 99%) and says what is finishing.
        p.refresh(Duration::from_secs(75), None);
        assert_eq!(p.bar.position(), 60_000);
        assert!(p.draining);
        assert!(
            p.bar.message().starts_with("finishing vram 1/3"),
            "{}",
            p.bar.message()
        );
    }

    #[test]
    fn the_line_names_the_planned_workload_not_the_parts_it_runs() {
        use crate::telemetry::record::Boundary;
        let bars =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let mut p = DeviceProgress::new(&bars, "GPU0".into(), "NVIDIA H200", 13, None);
        // `heat` runs `vram` and `compute` at once: the line says heat, and its two parts'
        // ends count as one planned workload.
        phase(&mut p, "heat", Boundary::Before);
        for part in ["vram", "compute"] {
            p.event(&Event::WorkloadStart {
                workload: part.into(),
                settings: serde_json::Value::Null,
            });
        }
        assert!(
            line(&p, None).starts_with("heat 1/13"),
            "{}",
            line(&p, None)
        );
        for part in ["vram", "compute"] {
            p.event(&Event::WorkloadEnd {
                workload: part.into(),
                status: crate::workload::WorkloadStatus::Passed,
                headline: String::new(),
                summary: serde_json::Value::Null,
            });
        }
        phase(&mut p, "heat", Boundary::After);
        assert_eq!(p.ended, 1);
        // The near miss: a workload that runs alone is named as itself.
        phase(&mut p, "compute", Boundary::Before);
        assert!(
            line(&p, None).starts_with("compute 2/13"),
            "{}",
            line(&p, None)
        );
    }

    #[test]
    fn a_rerun_is_labelled_and_the_line_fits_a_terminal_of_100_columns() {
        let bars =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let mut p = DeviceProgress::new(
            &bars,
            "GPU0".into(),
            "NVIDIA H200",
            4,
            Some(Duration::from_secs(1800)),
        );
        use crate::telemetry::record::Boundary;
        phase(&mut p, "vram", Boundary::Before);
        p.event(&Event::WorkloadEnd {
            workload: "vram".into(),
            status: crate::workload::WorkloadStatus::Failed,
            headline: String::new(),
            summary: serde_json::Value::Null,
        });
        phase(&mut p, "vram", Boundary::After);
        p.event(&Event::Confirm {
            workload: "vram".into(),
            run: 2,
            runs: 4,
            budget_s: Some(120.0),
        });
        phase(&mut p, "vram", Boundary::Before);
        p.event(&step(
            "moving-inversions-with-a-long-name",
            12,
            "verify descending",
            483,
        ));
        let mut readings = Readings::new();
        readings.insert("gpu_temp_c".into(), Reading::Number(83.0));
        readings.insert("power_w".into(), Reading::Number(699.6));
        let said = p.message(Some(&readings), true, None, LINE_MAX);
        assert!(said.starts_with("finishing vram confirm 2 of 4"), "{said}");
        assert!(said.ends_with("83°C | 700 W | 483 wrong reads"), "{said}");
        assert!(
            DRAINING_COLUMNS + said.chars().count() <= LINE_MAX,
            "{} columns: {said}",
            DRAINING_COLUMNS + said.chars().count()
        );
        // The rerun's end does not count as another planned workload.
        phase(&mut p, "vram", Boundary::After);
        assert_eq!(p.ended, 1);
    }

    #[test]
    fn on_a_narrow_terminal_the_step_gives_way_then_the_readings_never_the_count() {
        let bars =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let mut p = DeviceProgress::new(&bars, "GPU0".into(), "NVIDIA H200", 1, None);
        p.event(&Event::WorkloadStart {
            workload: "vram".into(),
            settings: serde_json::Value::Null,
        });
        p.event(&step("moving-inversions", 3, "verify descending", 1234));
        let mut readings = Readings::new();
        readings.insert("gpu_temp_c".into(), Reading::Number(38.0));
        readings.insert("power_w".into(), Reading::Number(92.0));
        // 80 columns: the step is cut, the readings and the count stay whole.
        let at_80 = p.message(Some(&readings), false, None, 79);
        assert!(at_80.starts_with("vram 1/1"), "{at_80}");
        assert!(at_80.ends_with("38°C | 92 W | 1234 wrong reads"), "{at_80}");
        assert!(TEMPLATE_COLUMNS + at_80.chars().count() <= 79, "{at_80}");
        // 60 columns: the readings go before the workload's name would; the count stays.
        let at_60 = p.message(Some(&readings), false, None, 59);
        assert!(at_60.ends_with(" | 1234 wrong reads"), "{at_60}");
        assert!(!at_60.contains("°C"), "{at_60}");
        assert!(TEMPLATE_COLUMNS + at_60.chars().count() <= 59, "{at_60}");
    }

    #[test]
    fn vram_passes_are_one_line_with_their_size_errors_and_rate() {
        let mut tally = PassTally {
            passes: (1, 1),
            algorithms: vec!["own-address".into(), "random".into()],
            bytes: 2 << 30,
            wall_ns: 200_000_000,
            errors: 0,
        };
        assert_eq!(
            tally.line(),
            "vram pass 1: own-address, random: 2.00 GiB swept, 0 wrong reads, 10.0 GiB/s"
        );
        tally.passes.1 = 40;
        tally.errors = 1;
        assert!(
            tally
                .line()
                .starts_with("vram passes 1-40: own-address, random")
        );
        assert!(tally.line().contains("1 wrong read,"));
    }

    #[test]
    fn a_pass_that_found_errors_is_said_at_once_and_quiet_ones_wait_their_turn() {
        let bars =
            indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden());
        let mut p = DeviceProgress::new(&bars, "GPU0".into(), "x", 1, None);
        p.event(&step("own-address", 0, "verify", 0));
        p.event(&step("own-address", 1, "verify", 0));
        assert!(p.pass.is_some(), "a quiet pass waits for its line");
        assert_eq!(p.pass.as_ref().map(|t| t.passes), Some((0, 1)));
        p.event(&step("own-address", 2, "verify", 3));
        p.event(&step("own-address", 3, "verify", 0));
        assert_eq!(
            p.pass.as_ref().map(|t| t.passes),
            Some((3, 3)),
            "the pass with errors was said when the next began"
        );
    }
}
