//! What a watch's events say of the application, gathered in order by the run's fold.

use std::collections::BTreeSet;

use crate::evidence::{AppFailure, Event, Killed};

/// What a watch's events say of the application, gathered in order.
#[derive(Debug, Clone, Default)]
pub struct AppEvents {
    /// Its command line (empty when attached).
    pub command: Vec<String>,
    /// Its first process.
    pub pid: Option<u32>,
    /// Attached to a running process (`--pid`).
    pub attached: bool,
    /// When it started (or was attached to), ms since the watch started.
    pub started_ms: f64,
    /// Every process of it seen.
    pub pids: BTreeSet<u32>,
    /// Iterations its output marked, ms.
    pub marks: Vec<f64>,
    /// Failures its output said, with when.
    pub said: Vec<(f64, AppFailure, String)>,
    /// Alerts raised.
    pub alerts: usize,
    /// How and when it ended: (ms, exit code, signal).
    pub end: Option<(f64, Option<i32>, Option<i32>)>,
    /// Its processes kiln killed when they did not stop as asked.
    pub killed: Option<Killed>,
    /// When a signal first interrupted the watch, ms.
    pub interrupted_ms: Option<f64>,
    /// The last line of its output that said an error of another kind.
    pub last_error: Option<String>,
    /// The GPU libraries its processes were seen to load: (pid, file name).
    pub libraries: Vec<(u32, String)>,
}

impl AppEvents {
    /// Takes what an event says of the application; other events are left alone.
    pub fn take(&mut self, t_ms: f64, event: &Event) {
        match event {
            Event::AppStart {
                command,
                pid,
                attached,
            } => {
                self.command = command.clone();
                self.pid = Some(*pid);
                self.attached = *attached;
                self.started_ms = t_ms;
                self.pids.insert(*pid);
            }
            Event::AppProcesses { pids } => self.pids.extend(pids),
            Event::AppLibraries { pid, libraries } => self
                .libraries
                .extend(libraries.iter().map(|l| (*pid, l.clone()))),
            Event::Iteration { .. } => self.marks.push(t_ms),
            Event::AppSaid {
                failure: AppFailure::Error,
                line,
            } => self.last_error = Some(line.clone()),
            Event::AppSaid { failure, line } => self.said.push((t_ms, *failure, line.clone())),
            Event::Alert { .. } => self.alerts += 1,
            Event::AppEnd {
                exit_code,
                signal,
                killed,
            } => {
                self.end = Some((t_ms, *exit_code, *signal));
                self.killed.clone_from(killed);
            }
            Event::Interrupted { .. } if self.interrupted_ms.is_none() => {
                self.interrupted_ms = Some(t_ms);
            }
            _ => {}
        }
    }
}
