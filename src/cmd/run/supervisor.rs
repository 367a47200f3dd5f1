//! The parent's side of a run: a worker process per device, its evidence relayed into the
//! run's events, and the bounds that end a device's test whatever it is doing.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::idle::{Idleness, WAIT_IDLE_MAX, idleness};
use super::progress::{DeviceProgress, Wait};
use super::protocol::{GO, WORKER_ARG, WorkerJob, WorkerMessage, readings_line};
use super::{Latest, RunOptions, signals_received};
use crate::error::AppError;
use crate::evidence::{DeviceErrorKind, Event, EventSink, EventWriter};
use crate::exit_code;
use crate::gpu::DeviceInfo;
use crate::telemetry::sidecar::Sidecar;

/// A device's worker, as the parent sees it.
struct WorkerHandle {
    slot: usize,
    child: Child,
    /// Open while the worker may go on; closed to ask it to stop.
    stdin: Option<ChildStdin>,
    last_alive: Instant,
    /// The workload running now, for the hang's record.
    running: Option<String>,
    /// Since when the worker waits for its device to be idle.
    waiting_since: Option<Instant>,
    /// Since when the worker waits for its turn at the PCIe probe.
    turn_since: Option<Instant>,
    /// Time spent waiting (for an idle device, for a turn): not counted against the budget.
    waited: Duration,
    /// What its workloads ran past the time they were given: the device's test ends as
    /// much later.
    overran: Duration,
    /// When the worker was asked to stop (its stdin closed).
    stop_asked: Option<Instant>,
    /// When its output closed: it is ending.
    closed_at: Option<Instant>,
    done: bool,
    finished: bool,
    progress: DeviceProgress,
    /// The number of the telemetry sample last written to it (for a power target).
    sent: u64,
}

impl WorkerHandle {
    /// Asks the worker to stop at its next step (closing its stdin), once.
    fn ask_to_stop(&mut self) {
        self.stdin = None;
        self.stop_asked.get_or_insert_with(Instant::now);
    }

    /// Time spent waiting so far, the current wait included.
    fn waited_now(&self) -> Duration {
        self.waited
            + self.waiting_since.map_or(Duration::ZERO, |s| s.elapsed())
            + self.turn_since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Abandons the worker as hung, with `message` as the record: killed so that it frees
    /// the device if it ever returns, and not waited for, since a process stuck in the
    /// driver may never exit.
    fn abandon(&mut self, events: &mut EventWriter, message: String) {
        let _ = self.child.kill();
        let _ = self.child.try_wait();
        events.emit(
            Some(self.slot),
            Event::DeviceError {
                error: DeviceErrorKind::Hang,
                message,
            },
        );
        self.finished = true;
        self.progress.finish();
    }

    /// ` during <workload>` when one was running, for the record of how it ended.
    fn during(&self) -> String {
        self.running
            .as_deref()
            .map(|r| format!(" during {r}"))
            .unwrap_or_default()
    }
}

/// Starts a worker per device and relays their evidence into the run's events until
/// every one has finished, been abandoned as hung, or died; answers signals.
pub(super) fn supervise(
    opts: &RunOptions,
    slots: &[(usize, DeviceInfo)],
    events: &mut EventWriter,
    sidecar: Option<&Sidecar>,
    latest: &Latest,
) -> Result<(), AppError> {
    let exe = std::env::current_exe().map_err(|e| {
        AppError::Start(format!(
            "cannot find kiln's own executable to start workers: {e}"
        ))
    })?;
    let bars = indicatif::MultiProgress::with_draw_target(if opts.progress {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    });
    let (tx, rx) = mpsc::channel::<(usize, Option<String>)>();
    let mut workers = Vec::new();
    let pcie_lock = (slots.len() > 1)
        .then(|| std::env::temp_dir().join(format!("kiln-pcie-{}.lock", std::process::id())));
    for (vulkan_index, info) in slots {
        let job = WorkerJob {
            vulkan_index: *vulkan_index,
            info: info.clone(),
            duration: opts.duration,
            plan: opts.plan.clone(),
            stop_on_first_failure: opts.stop_on_first_failure,
            fence_timeout: opts.fence_timeout,
            confirm: opts.confirm,
            wait_idle: opts.wait_idle,
            pcie_lock: pcie_lock.clone(),
            hang_for_test: opts.test_hooks.hang_slot == Some(info.index),
            crash_for_test: opts.test_hooks.crash_slot == Some(info.index),
            busy_for_test: opts.test_hooks.busy_slot == Some(info.index),
        };
        let mut child = Command::new(&exe)
            .arg(WORKER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| AppError::Start(format!("cannot start a device worker: {e}")))?;
        // It ends with kiln, however kiln ends (a Job object on Windows).
        crate::platform::process::bind_to_kiln(&child);
        // Its GPU memory is kiln's own, never a tenant's, and its Xids are kiln's.
        crate::telemetry::claim_process(child.id());
        events.emit(Some(info.index), Event::Worker { pid: child.id() });
        let mut stdin = child.stdin.take();
        if let Some(pipe) = stdin.as_mut() {
            let line = job.to_line();
            // A worker that cannot read its job ends at once and is recorded as such.
            let _ = pipe.write_all(line.as_bytes());
            let _ = pipe.flush();
        }
        if let Some(out) = child.stdout.take() {
            let tx = tx.clone();
            let slot = info.index;
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    match line {
                        Ok(line) => {
                            if tx.send((slot, Some(line))).is_err() {
                                return;
                            }
                        }
                        Err(_) => break,
                    }
                }
                let _ = tx.send((slot, None));
            });
        }
        let progress = DeviceProgress::new(
            &bars,
            format!("GPU{}", info.index),
            &info.name,
            opts.plan.len(),
            opts.duration,
        );
        workers.push(WorkerHandle {
            slot: info.index,
            child,
            stdin,
            last_alive: Instant::now(),
            running: None,
            waiting_since: None,
            turn_since: None,
            waited: Duration::ZERO,
            overran: Duration::ZERO,
            stop_asked: None,
            closed_at: None,
            done: false,
            finished: false,
            progress,
            sent: 0,
        });
    }
    drop(tx);
    let workers_started = Instant::now();
    // Some steps idle on purpose (the retention test): the budget allows for them.
    let idle_allowance = opts
        .plan
        .iter()
        .filter_map(|p| p.config.vram())
        .filter(|v| {
            v.algorithms
                .contains(&crate::workload::vram::algorithm::Algorithm::Retention)
        })
        .map(|v| v.retention_delay)
        .max()
        .unwrap_or_default();
    // The watchdog's patience is the step timeout, as the README says: a deliberate wait
    // (an idle step, a wait for an idle device or a PCIe turn) shows as progress, and every
    // wait for the device is bounded below it (the fence timeout is shorter), so a device's
    // own timeout is recorded before the watchdog would call it a hang.
    let patience = opts.step_timeout;
    // A load holding a power target reads the device's power from the telemetry here.
    let feeds_telemetry = opts.plan.iter().any(|p| p.config.reads_telemetry());
    let mut stopping = false;
    while workers.iter().any(|w| !w.finished) {
        let signals = signals_received();
        if signals >= 1 && !stopping {
            stopping = true;
            events.emit(
                None,
                Event::Interrupted {
                    message: "interrupted by a signal: the workloads stopped at their next step, and this verdict covers what ran before".into(),
                },
            );
            for w in &mut workers {
                w.ask_to_stop();
            }
        }
        if signals >= 2 {
            for w in workers.iter_mut().filter(|w| !w.finished) {
                let _ = w.child.kill();
            }
            events.emit(
                None,
                Event::Note {
                    message: "a second signal ended the run at once: `kiln verdict` rebuilds the report from this directory".into(),
                },
            );
            let _ = events.check();
            // The screen left clean: no half-drawn bar above the shell's prompt.
            let _ = bars.clear();
            std::process::exit(exit_code::INCONCLUSIVE);
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((slot, Some(line))) => {
                if let Some(w) = workers.iter_mut().find(|w| w.slot == slot && !w.finished) {
                    w.last_alive = Instant::now();
                    relay(w, &line, events, sidecar);
                }
            }
            Ok((slot, None)) => {
                if let Some(w) = workers.iter_mut().find(|w| w.slot == slot && !w.finished) {
                    w.closed_at.get_or_insert_with(Instant::now);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            // Every output has closed: what is left is reaping them.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(20))
            }
        }
        answer_waits(&mut workers, latest, events);
        if feeds_telemetry {
            forward_readings(&mut workers, latest);
        }
        reap(&mut workers, events);
        bound_by_time(opts, &mut workers, workers_started, idle_allowance, events);
        if opts.progress {
            let map = latest.lock().ok();
            for w in workers.iter_mut().filter(|w| !w.finished) {
                let readings = map.as_ref().and_then(|m| m.get(&w.slot)).map(|(_, r)| r);
                w.progress.refresh(
                    workers_started.elapsed().saturating_sub(w.waited_now()),
                    readings,
                );
            }
        }
        for w in workers
            .iter_mut()
            .filter(|w| !w.finished && w.closed_at.is_none())
        {
            if w.last_alive.elapsed() > patience {
                let message = format!(
                    "no progress for {:.0} s{}: the watchdog abandoned the device",
                    patience.as_secs_f64(),
                    w.during()
                );
                w.abandon(events, message);
            }
        }
    }
    if let Some(lock) = pcie_lock {
        let _ = std::fs::remove_file(lock);
    }
    Ok(())
}

/// The bounds that hold whatever a worker is doing, host-side work included: a device
/// still running a step timeout past its budget (waits for an idle device or a PCIe turn
/// not counted, and what its workloads ran over the time they were given added, as its
/// worker says) is asked to stop, and a worker that has not ended a step timeout after
/// being asked is killed and recorded, so no input and no stuck loop outlives them.
fn bound_by_time(
    opts: &RunOptions,
    workers: &mut [WorkerHandle],
    started: Instant,
    idle_allowance: Duration,
    events: &mut EventWriter,
) {
    for w in workers
        .iter_mut()
        .filter(|w| !w.finished && w.closed_at.is_none())
    {
        if let Some(budget) = opts.duration
            && w.stop_asked.is_none()
        {
            let end = budget + w.overran + w.waited_now();
            if started.elapsed() > end + opts.step_timeout + idle_allowance {
                events.emit(
                    Some(w.slot),
                    Event::Note {
                        message: format!(
                            "still running {:.0} s past its {:.0} s budget{}: asked to stop",
                            (started.elapsed() - end).as_secs_f64(),
                            budget.as_secs_f64(),
                            w.during()
                        ),
                    },
                );
                w.ask_to_stop();
            }
        }
        if let Some(asked) = w.stop_asked
            && asked.elapsed() > opts.step_timeout
        {
            let message = format!(
                "did not stop within {:.0} s of being asked to{}: the worker was killed",
                opts.step_timeout.as_secs_f64(),
                w.during()
            );
            w.abandon(events, message);
        }
    }
}

/// How long a worker whose output has closed may take to exit (freeing its device)
/// before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Collects the workers whose output has closed, without blocking on any: one stuck in
/// the driver while tearing down must not stall the others' watchdog. A worker that
/// ends before saying it is done has crashed.
fn reap(workers: &mut [WorkerHandle], events: &mut EventWriter) {
    for w in workers.iter_mut().filter(|w| !w.finished) {
        let Some(closed) = w.closed_at else {
            continue;
        };
        let status = match w.child.try_wait() {
            Ok(Some(status)) => status.to_string(),
            Ok(None) if closed.elapsed() < EXIT_GRACE => continue,
            Ok(None) => {
                let _ = w.child.kill();
                format!(
                    "it did not exit {} s after its output closed and was killed",
                    EXIT_GRACE.as_secs()
                )
            }
            Err(e) => e.to_string(),
        };
        if !w.done {
            events.emit(
                Some(w.slot),
                Event::DeviceError {
                    error: DeviceErrorKind::Crash,
                    message: format!(
                        "the device's worker process ended before its test did ({status}){}",
                        w.during()
                    ),
                },
            );
        }
        w.finished = true;
        w.progress.finish();
    }
}

/// Lets each waiting worker go once its device is idle and cool, when that cannot be
/// told, or when it has waited [`WAIT_IDLE_MAX`]. A waiting worker is not hung.
fn answer_waits(workers: &mut [WorkerHandle], latest: &Latest, events: &mut EventWriter) {
    for w in workers.iter_mut().filter(|w| !w.finished) {
        let Some(since) = w.waiting_since else {
            continue;
        };
        w.last_alive = Instant::now();
        let state = latest
            .lock()
            .map(|m| idleness(m.get(&w.slot).map(|(_, r)| r)))
            .unwrap_or(Idleness::Unknown);
        let go = match state {
            Idleness::Idle | Idleness::Unknown => true,
            Idleness::Busy(why) if since.elapsed() > WAIT_IDLE_MAX => {
                events.emit(
                    Some(w.slot),
                    Event::Note {
                        message: format!(
                            "still not idle and cool after {:.0} s ({why}): the next workload starts anyway",
                            WAIT_IDLE_MAX.as_secs_f64()
                        ),
                    },
                );
                true
            }
            Idleness::Busy(_) => false,
        };
        if go {
            if let Some(since) = w.waiting_since.take() {
                w.waited += since.elapsed();
            }
            if let Some(pipe) = w.stdin.as_mut() {
                let _ = pipe.write_all(format!("{GO}\n").as_bytes());
                let _ = pipe.flush();
            }
        }
    }
}

/// Writes each device's newest telemetry sample to its worker, once: the power target's
/// loop acts on it (a worker that cannot be written to is ending anyway).
fn forward_readings(workers: &mut [WorkerHandle], latest: &Latest) {
    let Ok(map) = latest.lock() else {
        return;
    };
    for w in workers.iter_mut().filter(|w| !w.finished) {
        let Some((number, readings)) = map.get(&w.slot) else {
            continue;
        };
        if w.sent == *number {
            continue;
        }
        if let (Some(pipe), Some(line)) = (w.stdin.as_mut(), readings_line(readings)) {
            let _ = pipe.write_all(line.as_bytes());
            let _ = pipe.flush();
        }
        w.sent = *number;
    }
}

/// One message from a worker: evidence into the events, a snapshot request to the
/// sidecar, progress to the display.
fn relay(w: &mut WorkerHandle, line: &str, events: &mut EventWriter, sidecar: Option<&Sidecar>) {
    let Some(message) = WorkerMessage::parse(line) else {
        // Not a message: a library printing on stdout. Kept, not trusted.
        events.emit(
            Some(w.slot),
            Event::Note {
                message: format!(
                    "worker output: {}",
                    line.chars().take(200).collect::<String>()
                ),
            },
        );
        return;
    };
    match message {
        WorkerMessage::Event(record) => {
            // Any evidence after a wait for a turn means the turn came.
            if let Some(since) = w.turn_since.take() {
                w.waited += since.elapsed();
            }
            match &record.event {
                Event::WorkloadStart { workload, .. } => w.running = Some(workload.clone()),
                Event::WorkloadEnd { .. } => w.running = None,
                _ => {}
            }
            w.progress.event(&record.event);
            events.emit(record.device, record.event);
        }
        WorkerMessage::Snapshot { phase, when } => {
            w.progress.phase(&phase, when);
            if let Some(s) = sidecar {
                s.snapshot(Some(w.slot), &phase, when);
            }
        }
        WorkerMessage::Alive => {}
        WorkerMessage::WaitIdle => {
            w.waiting_since = Some(Instant::now());
            w.progress.wait(Wait::IdleAndCool);
        }
        WorkerMessage::WaitTurn => {
            w.turn_since.get_or_insert_with(Instant::now);
            w.progress.wait(Wait::PcieTurn);
        }
        WorkerMessage::Overran(by) => w.overran += by,
        WorkerMessage::Done => w.done = true,
    }
}
