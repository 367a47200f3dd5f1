//! Ending the application kiln started, when a signal interrupts the watch: it is asked
//! first (SIGTERM), its processes are followed while it stops, and what of it has not
//! stopped when the grace runs out, or when a second signal comes, is killed (SIGKILL). A
//! process the watch attached to with `--pid` is not kiln's to end: nothing here is used
//! for it.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::evidence::Killed;
use crate::platform::process;

/// How long the application kiln started has to stop once asked, before kiln kills what is
/// left of it. Five seconds: time for an application that handles SIGTERM to save its
/// state and let go of the device, and short enough that kiln, when a supervisor stops it
/// with a grace of its own (`docker stop`'s 10 s, the shortest common one; Slurm's 30 s,
/// systemd's 90 s), has killed the application and written its report before that grace
/// runs out and the supervisor kills kiln, leaving the application behind. A second signal
/// does not wait for it.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long kiln waits for the application it killed to end: one blocked in the kernel (in
/// a GPU driver, most often) ends only when the kernel lets it, and the watch must not
/// hang on it.
const KILL_WAIT: Duration = Duration::from_secs(2);

/// How often the wait for a killed application looks again.
const KILL_POLL: Duration = Duration::from_millis(20);

/// An application asked to stop.
pub struct Stop {
    /// When it was asked.
    asked: Instant,
    /// Its processes other than its first, still running at the last look: found as the
    /// first one's descendants, which they are only while it runs (once it ends, what it
    /// left is the init process's). A pid is kept only while it runs, and looked at every
    /// pass of the watch, so that one reused by an unrelated process in between would have
    /// to come round the whole pid space in that time.
    left: Vec<u32>,
    /// Its first process had ended at the last look, and what it left was asked to stop.
    root_ended: bool,
}

impl Stop {
    /// Asks the application, whose first process is `root`, to stop, its processes noted
    /// before the request (one that stops at once takes its children's tie to it along).
    pub fn ask(proc_root: &Path, root: u32) -> Stop {
        let left = process::descendants(proc_root, root);
        process::ask_to_stop(root);
        Stop {
            asked: Instant::now(),
            left,
            root_ended: false,
        }
    }

    /// Looks at the application again: its processes noted while its first one runs
    /// (`ended` false); once that one has ended, what it left running is asked to stop as
    /// well, once. True when nothing of it runs any more.
    pub fn follow(&mut self, proc_root: &Path, root: u32, ended: bool) -> bool {
        if !ended {
            self.note(proc_root, root);
        }
        self.left.retain(|p| process::alive(proc_root, *p));
        if ended && !self.root_ended {
            self.root_ended = true;
            for p in &self.left {
                process::ask_to_stop(*p);
            }
        }
        ended && self.left.is_empty()
    }

    /// The application's processes that are not noted yet, noted.
    fn note(&mut self, proc_root: &Path, root: u32) {
        for p in process::descendants(proc_root, root) {
            if !self.left.contains(&p) {
                self.left.push(p);
            }
        }
    }

    /// The grace has run out, or a second signal came: what is left is to be killed.
    pub fn due(&self) -> bool {
        self.asked.elapsed() >= STOP_GRACE || crate::cmd::run::signals_received() > 1
    }

    /// Kills what is left of the application: its first process while it runs (`ended`
    /// false) first, so that it can start no more, then every other process of it noted.
    /// None when there was nothing left to kill.
    pub fn kill(&mut self, proc_root: &Path, child: &mut Child, ended: bool) -> Option<Killed> {
        let unheeded = self.asked.elapsed();
        let mut pids = Vec::new();
        if !ended {
            self.note(proc_root, child.id());
            // Through its handle: a first process already ended is never signalled.
            if child.kill().is_ok() {
                pids.push(child.id());
            }
        }
        for p in &self.left {
            if process::alive(proc_root, *p) && process::kill(*p) {
                pids.push(*p);
            }
        }
        (!pids.is_empty()).then(|| Killed {
            unheeded_ms: unheeded.as_secs_f64() * 1e3,
            at_second_signal: unheeded < STOP_GRACE,
            pids,
        })
    }
}

/// How the killed application ended, once it has; None when it had not after
/// [`KILL_WAIT`].
pub fn reaped(child: &mut Child) -> Option<process::Ending> {
    let waited = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(process::ending(status)),
            // It cannot be asked about: gone as far as the watch can tell.
            Err(_) => {
                return Some(process::Ending {
                    code: None,
                    signal: None,
                });
            }
            Ok(None) if waited.elapsed() >= KILL_WAIT => return None,
            Ok(None) => std::thread::sleep(KILL_POLL),
        }
    }
}

/// What the watch says when the application it killed had not ended [`KILL_WAIT`] later.
pub fn not_reaped(killed: &Killed) -> String {
    format!(
        "the application ignored kiln's request to stop (SIGTERM) for {:.1} s and kiln killed it (SIGKILL), but it had not ended {:.0} s later: a process blocked in the kernel (in a GPU driver, most often) ends only when the kernel lets it",
        killed.unheeded_ms / 1e3,
        KILL_WAIT.as_secs_f64()
    )
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// Waits (boundedly) until `check` holds.
    fn until(what: &str, mut check: impl FnMut() -> bool) {
        let started = Instant::now();
        while !check() {
            assert!(started.elapsed() < Duration::from_secs(10), "never {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// An application that stops when asked but leaves behind a process that ignores the
    /// request: what it left is asked in its turn, and then killed, and only that.
    #[test]
    fn what_an_application_leaves_running_when_it_stops_is_asked_then_killed() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("left.pid");
        let proc_root = process::proc_root();
        // The first process a shell that becomes `sleep` (ended by SIGTERM), beside it one
        // that ignores SIGTERM.
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("(trap '' TERM; exec sleep 30) & echo $! > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; exec sleep 30")
            .arg("sh")
            .arg(&pid_file)
            .spawn()
            .unwrap();
        let root = child.id();
        until("both exec'd", || {
            let left = std::fs::read_to_string(&pid_file).unwrap_or_default();
            process::name(&proc_root, root).as_deref() == Some("sleep")
                && left
                    .trim()
                    .parse()
                    .is_ok_and(|p| process::name(&proc_root, p).as_deref() == Some("sleep"))
        });
        let left: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let mut stop = Stop::ask(&proc_root, root);
        // The first process ends; what it left is asked, and ignores it.
        until("the first process ended", || {
            let ended = child.try_wait().unwrap().is_some();
            !stop.follow(&proc_root, root, ended) && ended
        });
        assert_eq!(stop.left, [left]);
        std::thread::sleep(Duration::from_millis(100));
        assert!(!stop.follow(&proc_root, root, true));
        assert!(process::alive(&proc_root, left), "SIGTERM is ignored");
        let killed = stop.kill(&proc_root, &mut child, true).unwrap();
        assert_eq!(killed.pids, [left]);
        assert!(killed.at_second_signal, "killed before the grace ran out");
        until("what it left is gone", || !process::alive(&proc_root, left));
        assert_eq!(
            process::ending(child.wait().unwrap()).signal,
            Some(15),
            "the first process stopped as asked"
        );
        assert!(stop.follow(&proc_root, root, true));
        assert_eq!(
            stop.kill(&proc_root, &mut child, true),
            None,
            "nothing left"
        );
    }
}
