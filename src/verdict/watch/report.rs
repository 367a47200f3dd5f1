//! The application's part of a watch's report: where its memory figures came from, its
//! iterations, the cause found, what kiln could not see, its timeline per process and its
//! trace in counts. Data only: [`super::Watch`] builds it once resolution has run.

use serde::{Deserialize, Serialize};

use crate::finding::FindingCode;

/// Where the application's memory figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The driver's per-process figure (NVML on NVIDIA, DRM fdinfo on amdgpu, xe, i915).
    Driver,
    /// The sum of the application's live allocations, from kiln's Vulkan layer.
    Trace,
    /// Neither: nothing of its memory is known.
    None,
}

/// Where the iterations came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IterationSource {
    /// Lines of its output that matched `--iteration`.
    Output,
    /// The period of its own memory use.
    Period,
    /// None found: its memory is judged over time.
    None,
}

/// The cause the watch found, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Diagnosis {
    /// Nothing wrong with the card, the machine or the application's memory.
    Healthy,
    /// A leak.
    Leak,
    /// A step needs more memory than the card has.
    OverTheLimit,
    /// Fragmentation or an allocation limit.
    Fragmentation,
    /// Another process took the memory.
    OtherProcess,
    /// The device lost to a driver timeout or the application's own work.
    DriverTimeout,
    /// The card.
    Card,
    /// The application crashed or exited with an error, and nothing on the GPU explains
    /// it: its own failure.
    ApplicationFailed,
    /// Not enough was seen to judge (interrupted, no memory figures, no GPU).
    NotJudged,
}

impl Diagnosis {
    /// The cause a finding code gives, if it gives one.
    pub fn of(code: FindingCode) -> Option<Diagnosis> {
        Some(match code {
            FindingCode::AppMemoryLeak => Diagnosis::Leak,
            FindingCode::AppOverMemoryLimit => Diagnosis::OverTheLimit,
            FindingCode::AppFragmentation => Diagnosis::Fragmentation,
            FindingCode::AppOtherProcess => Diagnosis::OtherProcess,
            FindingCode::AppDriverTimeout => Diagnosis::DriverTimeout,
            FindingCode::AppCardFault => Diagnosis::Card,
            FindingCode::AppExit => Diagnosis::ApplicationFailed,
            _ => return None,
        })
    }

    /// As the report and the metrics spell it (`over_the_limit`).
    pub fn name(self) -> &'static str {
        match self {
            Diagnosis::Healthy => "healthy",
            Diagnosis::Leak => "leak",
            Diagnosis::OverTheLimit => "over_the_limit",
            Diagnosis::Fragmentation => "fragmentation",
            Diagnosis::OtherProcess => "other_process",
            Diagnosis::DriverTimeout => "driver_timeout",
            Diagnosis::Card => "card",
            Diagnosis::ApplicationFailed => "application_failed",
            Diagnosis::NotJudged => "not_judged",
        }
    }

    /// In words for people.
    pub fn word(self) -> &'static str {
        match self {
            Diagnosis::Healthy => "healthy",
            Diagnosis::Leak => "a leak",
            Diagnosis::OverTheLimit => "over the memory limit",
            Diagnosis::Fragmentation => "fragmentation",
            Diagnosis::OtherProcess => "another process",
            Diagnosis::DriverTimeout => "a driver timeout",
            Diagnosis::Card => "the card",
            Diagnosis::ApplicationFailed => "the application's own failure",
            Diagnosis::NotJudged => "not judged",
        }
    }
}

/// One process's memory over the watch, for the timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessMemory {
    /// Its pid (0: the application as the trace sums it).
    pub pid: u32,
    /// Its name, where the system gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// One of the watched application's processes.
    pub watched: bool,
    /// (ms since the watch started, bytes), at most [`TIMELINE_POINTS`] of them.
    pub points: Vec<[f64; 2]>,
}

/// The most points a timeline keeps per process: enough for a chart, few enough for a
/// report of an hours-long watch.
pub const TIMELINE_POINTS: usize = 600;

/// A size class of the trace's allocations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeClass {
    /// The class holds sizes above half of this, up to it.
    pub up_to_bytes: u64,
    /// Allocations made.
    pub allocations: u64,
    /// Of them freed.
    pub frees: u64,
    /// Allocations refused.
    pub refused: u64,
}

/// What the trace holds, in counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceSummary {
    /// Processes that loaded kiln's layer.
    pub attached: u64,
    /// Allocations, frees and refusals, over every size class.
    pub allocations: u64,
    /// Frees.
    pub frees: u64,
    /// Refused allocations.
    pub refused: u64,
    /// Records lost before kiln read them.
    pub lost_records: u64,
    /// Calls that returned `VK_ERROR_DEVICE_LOST` (each device's first and the rest).
    pub device_lost_calls: u64,
    /// Calls other than `vkAllocateMemory` that answered out-of-memory (`vkCreateBuffer`).
    #[serde(default)]
    pub out_of_memory_calls: u64,
    /// Of the frees, those made after the last iteration of an application that ended:
    /// its exit's teardown, not its steps. A trace whose every free is one of these freed
    /// nothing while it ran (a leak's allocations, released by its exit).
    #[serde(default)]
    pub frees_at_exit: u64,
}

impl TraceSummary {
    /// The frees in words, as they came: `70 frees, all of them at its exit`, so that a
    /// leak's trace never reads as every allocation freed while it ran.
    pub fn frees_words(&self) -> String {
        let frees = crate::text::count(self.frees, "free");
        match self.frees_at_exit {
            0 => frees,
            1 if self.frees == 1 => format!("{frees}, as the application exited"),
            n if n == self.frees => format!("{frees}, all of them as the application exited"),
            n => format!("{frees}, {n} of them as the application exited"),
        }
    }
}

/// What kiln could not see of the application, with why and what would let it see: a
/// watch never reads as "healthy" past what it saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unseen {
    /// What was unseen.
    #[serde(flatten)]
    pub what: UnseenKind,
    /// It could hide a cause: the watch is not judged (`APP_NOT_JUDGED` says it).
    #[serde(default)]
    pub decisive: bool,
}

/// A kind of thing kiln could not see of the application.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UnseenKind {
    /// Too few iterations, or too short a span, to judge a leak.
    TooShort {
        /// Why, with what to do.
        said: String,
    },
    /// kiln's layer stopped tracing a process (a failure of its own, caught before it
    /// could reach the application): nothing later of it is in the trace.
    TraceStopped {
        /// When, ms since the watch started.
        at_ms: f64,
        /// The call the layer was in.
        call: String,
    },
    /// The layer never loaded into the application: why, as far as its libraries and
    /// the loader's variables tell.
    NoTrace {
        /// Why, with what to do.
        said: String,
    },
    /// The driver's per-process figure and the trace tell different stories (one climbs
    /// as a leak, the other not): which was believed, and why.
    SourcesDisagree {
        /// Both stories, and the one believed.
        said: String,
    },
}

impl crate::finding::Said for Unseen {
    /// What was unseen, in words, and whether it decides the verdict.
    fn say(&self, words: &str, unit: crate::finding::Unit, rows: &mut crate::finding::Rows) {
        use crate::finding::Words;
        rows.within(words, |rows| {
            Words::Said("Said").say(&self.words(), unit, rows);
            Words::Said("Decides the verdict").say(&self.decisive, unit, rows);
        });
    }
}

impl Unseen {
    /// In words for people.
    pub fn words(&self) -> String {
        match &self.what {
            UnseenKind::TooShort { said }
            | UnseenKind::NoTrace { said }
            | UnseenKind::SourcesDisagree { said } => said.clone(),
            UnseenKind::TraceStopped { at_ms, call } => format!(
                "kiln's trace stopped {:.1} s into the watch (its layer failed in {call}, caught before it reached the application): the application's allocations after that are not in the trace",
                at_ms / 1e3
            ),
        }
    }
}

/// The application's part of a watch's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApplicationReport {
    /// Its command line (empty when attached to a running process).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Its first process.
    pub pid: Option<u32>,
    /// Attached with `--pid`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub attached: bool,
    /// Every process of it seen.
    pub pids: Vec<u32>,
    /// Its exit code, when it exited and kiln could know it.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// When it ended, ms since the watch started; None when the watch stopped first.
    pub ended_ms: Option<f64>,
    /// Its processes that ignored kiln's request to stop (at an interrupt) until kiln killed
    /// them: the application itself is among them when its `signal` is kiln's kill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub killed: Option<crate::evidence::Killed>,
    /// The device its memory lived on (its index), where one was seen.
    pub device: Option<usize>,
    /// Where its memory figures came from.
    pub memory_source: MemorySource,
    /// Its highest memory.
    pub peak_bytes: u64,
    /// The memory it could have had: the card's (or the heap's) size.
    pub budget_bytes: Option<u64>,
    /// Its iterations, ms since the watch started.
    pub iterations_ms: Vec<f64>,
    /// Where they came from.
    pub iterations_from: IterationSource,
    /// Its lowest memory in each iteration: (ms, bytes).
    pub baselines: Vec<[f64; 2]>,
    /// The cause found.
    pub diagnosis: Diagnosis,
    /// What kiln could not see, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<Unseen>,
    /// Memory per process over the watch: the application's first.
    pub timeline: Vec<ProcessMemory>,
    /// Allocations by size class, from the trace (classes with none left out).
    pub histogram: Vec<SizeClass>,
    /// What the trace held, when there was one.
    pub trace: Option<TraceSummary>,
    /// `--alert` crossings.
    pub alerts: usize,
    /// Moments worth marking on its timeline: its failures, as they were said.
    pub moments: Vec<Moment>,
}

impl ApplicationReport {
    /// How kiln ended the processes that ignored its request to stop, in words (lower case,
    /// no full stop): `it ignored kiln's request to stop (SIGTERM) for 5.0 s, kiln's grace,
    /// and kiln killed it (SIGKILL)`. None when kiln killed none.
    pub fn killed_words(&self) -> Option<String> {
        let k = self.killed.as_ref()?;
        let unheeded = if k.at_second_signal {
            format!("for {:.1} s, until a second signal", k.unheeded_ms / 1e3)
        } else {
            format!("for {:.1} s, kiln's grace", k.unheeded_ms / 1e3)
        };
        let itself = self.pid.is_some_and(|p| k.pids.contains(&p));
        let others = (k.pids.len() - usize::from(itself)) as u64;
        Some(if itself {
            let with = if others > 0 {
                format!(" and {}", crate::text::count(others, "other process of it"))
            } else {
                String::new()
            };
            format!(
                "it ignored kiln's request to stop (SIGTERM) {unheeded}, and kiln killed it{with} (SIGKILL)"
            )
        } else {
            format!(
                "it stopped when asked, but {} of it ignored kiln's request to stop (SIGTERM) {unheeded}, and kiln killed {} (SIGKILL)",
                crate::text::count(others, "process"),
                if others == 1 { "it" } else { "them" }
            )
        })
    }
}

/// A moment of the watch worth marking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moment {
    /// When, ms since the watch started.
    pub t_ms: f64,
    /// What happened, in a few words.
    pub what: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diagnosis_is_named_as_the_report_spells_it() {
        for d in [
            Diagnosis::Healthy,
            Diagnosis::Leak,
            Diagnosis::OverTheLimit,
            Diagnosis::Fragmentation,
            Diagnosis::OtherProcess,
            Diagnosis::DriverTimeout,
            Diagnosis::Card,
            Diagnosis::NotJudged,
        ] {
            assert_eq!(serde_json::to_value(d).unwrap(), d.name());
        }
    }
}

#[cfg(test)]
mod frees_tests {
    use super::*;

    fn trace(frees: u64, frees_at_exit: u64) -> TraceSummary {
        TraceSummary {
            attached: 1,
            allocations: 40,
            frees,
            refused: 0,
            lost_records: 0,
            device_lost_calls: 0,
            out_of_memory_calls: 0,
            frees_at_exit,
        }
    }

    #[test]
    fn frees_made_only_at_exit_are_said_as_such() {
        assert_eq!(
            trace(40, 40).frees_words(),
            "40 frees, all of them as the application exited"
        );
        assert_eq!(
            trace(40, 12).frees_words(),
            "40 frees, 12 of them as the application exited"
        );
        // The near miss: frees made while it ran are said as counts alone.
        assert_eq!(trace(40, 0).frees_words(), "40 frees");
    }
}
