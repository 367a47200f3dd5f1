//! `kiln bench watch -- CMD`: what watching costs an application. The command runs
//! plainly and watched, in turns: watched means with kiln's layer tracing it into a ring
//! and a watcher draining that ring into `trace.jsonl` and reading its processes every
//! `interval` (a second, by default), as `kiln watch` does. Each run's wall time is taken from start to exit; the result is the ratio
//! of the medians, measured in one sitting.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::error::AppError;

/// What the benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct WatchBench {
    /// The command.
    pub command: Vec<String>,
    /// Wall time of each plain run, seconds.
    pub plain_s: Vec<f64>,
    /// Wall time of each watched run, seconds.
    pub watched_s: Vec<f64>,
    /// Median watched over median plain: 1.02 is 2% slower.
    pub ratio: f64,
    /// Allocations the layer recorded in the watched runs.
    pub traced_records: u64,
}

/// Why `kiln bench watch` without a command is refused (by `check_flags` before anything
/// starts, and here for a caller that skipped it).
pub const NEEDS_A_COMMAND: &str = "kiln bench watch needs a command after `--`";

/// Runs `command` `runs` times each way, alternating, and compares.
pub fn bench(command: &[String], runs: usize, interval: Duration) -> Result<WatchBench, AppError> {
    let program = command
        .first()
        .ok_or_else(|| AppError::Usage(NEEDS_A_COMMAND.into()))?;
    if crate::platform::process::find_program(program).is_none() {
        return Err(AppError::Usage(format!(
            "cannot start {}: no such program (not a runnable file, nor on PATH)",
            crate::text::quote(program)
        )));
    }
    let library = crate::cmd::watch::trace::layer_library().map_err(AppError::Usage)?;
    let scratch = std::env::temp_dir().join(format!("kiln-bench-watch-{}", std::process::id()));
    let mut out = WatchBench {
        command: command.to_vec(),
        plain_s: Vec::new(),
        watched_s: Vec::new(),
        ratio: 0.0,
        traced_records: 0,
    };
    let result = (|| {
        for i in 0..runs {
            // Alternate which goes first, so that a machine warming up favours neither.
            let order = if i % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            };
            for watched in order {
                if watched {
                    let dir = scratch.join(format!("run-{i}"));
                    let (secs, records) = watched_run(command, &dir, &library, interval)?;
                    out.watched_s.push(secs);
                    out.traced_records += records;
                } else {
                    out.plain_s.push(plain_run(command)?);
                }
            }
        }
        Ok::<(), AppError>(())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result?;
    let plain = crate::cmd::bench::median(&mut out.plain_s.clone());
    let watched = crate::cmd::bench::median(&mut out.watched_s.clone());
    out.ratio = if plain > 0.0 { watched / plain } else { 0.0 };
    Ok(out)
}

fn spawn_error(command: &[String], e: std::io::Error) -> AppError {
    AppError::Usage(format!(
        "cannot start {}: {e}",
        crate::text::quote(&command.join(" "))
    ))
}

fn plain_run(command: &[String]) -> Result<f64, AppError> {
    let started = Instant::now();
    let status = Command::new(&command[0])
        .args(&command[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| spawn_error(command, e))?;
    let secs = started.elapsed().as_secs_f64();
    ran(command, status)?;
    Ok(secs)
}

fn ran(command: &[String], status: std::process::ExitStatus) -> Result<(), AppError> {
    if status.success() {
        Ok(())
    } else {
        Err(AppError::Start(format!(
            "{} failed ({status}): the benchmark needs a command that succeeds",
            crate::text::quote(&command.join(" "))
        )))
    }
}

/// One watched run: the layer in its environment, the ring drained and its processes read
/// every `interval` while it runs. Its wall time, and the records the layer wrote.
fn watched_run(
    command: &[String],
    dir: &PathBuf,
    library: &std::path::Path,
    interval: Duration,
) -> Result<(f64, u64), AppError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| AppError::Start(format!("could not make {}: {e}", dir.display())))?;
    let started_unix_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut tracer = crate::cmd::watch::trace::Tracer::start(dir, library, started_unix_ns)?;
    let proc_root = crate::platform::process::proc_root();
    let started = Instant::now();
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .envs(tracer.env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| spawn_error(command, e))?;
    let mut last_drain = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| spawn_error(command, e))? {
            break status;
        }
        // The exit is noticed within 10 ms; the ring drained and the processes read on the
        // watch's own schedule.
        std::thread::sleep(Duration::from_millis(10));
        tracer.drain_if_behind(started.elapsed().as_secs_f64() * 1e3);
        if last_drain.elapsed() >= interval {
            last_drain = Instant::now();
            tracer.drain(false, started.elapsed().as_secs_f64() * 1e3);
            let _ = crate::platform::process::descendants(&proc_root, child.id());
        }
    };
    let secs = started.elapsed().as_secs_f64();
    tracer.drain(true, secs * 1e3);
    ran(command, status)?;
    let trace = crate::evidence::trace::read_trace(dir)?;
    let records = trace.map_or(0, |t| t.records.len() as u64);
    Ok((secs, records))
}

/// The benchmark for people.
pub fn summary(b: &WatchBench) -> String {
    let mut plain = b.plain_s.clone();
    let mut watched = b.watched_s.clone();
    format!(
        "{}: {} runs each way; median {:.3} s plain, {:.3} s watched (kiln's layer and watcher): {:+.1}% ({} trace records)\n",
        crate::text::quote(&b.command.join(" ")),
        b.plain_s.len(),
        crate::cmd::bench::median(&mut plain),
        crate::cmd::bench::median(&mut watched),
        (b.ratio - 1.0) * 100.0,
        b.traced_records
    )
}
