//! One device's test, in a process of its own. `kiln run` starts one worker per device
//! (the same binary, with [`WORKER_ARG`]) so that a driver crash or a hang in one device's
//! process cannot take the others, or their evidence, with it: the parent owns the run
//! directory and the telemetry, and a worker only sends messages on its stdout.
//!
//! What the two say to each other is in [`super::protocol`].

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::protocol::{GO, WORKER_ARG, WorkerJob, WorkerMessage, parse_readings};
use crate::evidence::{DeviceErrorKind, Event, EventRecord, EventSink};
use crate::exit_code;
use crate::gpu::{DeviceContext, DeviceInfo, Vulkan};
use crate::power::PowerFeed;
use crate::telemetry::record::Boundary;
use crate::workload::registry::{PlannedWorkload, WorkloadConfig};
use crate::workload::{RunControl, Workload, WorkloadError, WorkloadOutcome, WorkloadStatus};

/// The worker's stdout, shared by the test and the heartbeat.
#[derive(Clone)]
struct Pipe(Arc<Mutex<std::io::Stdout>>);

impl Pipe {
    fn send(&self, message: &WorkerMessage) {
        let Some(line) = message.to_line() else {
            return;
        };
        // A parent that is gone cannot be told; the stdin watcher stops the work.
        if let Ok(mut out) = self.0.lock() {
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
    }
}

/// Sends events to the parent, naming the device by its place in the run.
#[derive(Clone)]
struct PipeSink {
    pipe: Pipe,
    slot: usize,
    started: Instant,
}

impl EventSink for PipeSink {
    fn emit(&mut self, device: Option<usize>, event: Event) {
        self.pipe.send(&WorkerMessage::Event(EventRecord {
            t_ms: self.started.elapsed().as_secs_f64() * 1e3,
            device: device.map(|_| self.slot),
            event,
        }));
    }
}

/// Runs as a worker when the first argument is [`WORKER_ARG`], and exits; otherwise
/// returns. Every binary that calls [`super::run`] calls this first.
pub fn main_if_worker() {
    if std::env::args().nth(1).as_deref() == Some(WORKER_ARG) {
        std::process::exit(worker_main());
    }
}

fn worker_main() -> i32 {
    let mut line = String::new();
    let job: WorkerJob = match std::io::stdin().lock().read_line(&mut line) {
        Ok(_) => match WorkerJob::parse(&line) {
            Ok(job) => job,
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "kiln worker: the job is not valid ({e})");
                return exit_code::USAGE;
            }
        },
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "kiln worker: no job on stdin ({e})");
            return exit_code::USAGE;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    // The parent closes stdin to ask for a stop, and a parent that dies closes it too:
    // no worker keeps loading a GPU for nobody.
    // Each `go` line answers a wait for an idle device.
    // Each `readings` line is the device's latest telemetry sample, for a power target.
    let (resume, resumed) = std::sync::mpsc::channel::<()>();
    let feed = PowerFeed::default();
    let watcher = Arc::clone(&stop);
    let fed = feed.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin()
            .lock()
            .read_line(&mut line)
            .is_ok_and(|n| n > 0)
        {
            if let Some(readings) = parse_readings(&line) {
                fed.update(readings);
            } else if line.trim() == GO && resume.send(()).is_err() {
                break;
            }
            line.clear();
        }
        watcher.store(true, Ordering::Relaxed);
    });
    let on_signal = Arc::clone(&stop);
    let _ = ctrlc::set_handler(move || on_signal.store(true, Ordering::Relaxed));
    let pipe = Pipe(Arc::new(Mutex::new(std::io::stdout())));
    let mut sink = PipeSink {
        pipe: pipe.clone(),
        slot: job.info.index,
        started: Instant::now(),
    };
    test_device(&job, &stop, &resumed, &pipe, &mut sink, &feed);
    pipe.send(&WorkerMessage::Done);
    0
}

/// Waits for this worker's turn at the lock file `lock` (held until the returned file is
/// dropped), telling the parent it is alive meanwhile. None when the lock cannot be
/// taken here (the workload then runs without it) or a stop came first.
fn take_turn(lock: &std::path::Path, stop: &AtomicBool, pipe: &Pipe) -> Option<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock)
        .ok()?;
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Some(file),
            Err(std::fs::TryLockError::WouldBlock) if !stop.load(Ordering::Relaxed) => {
                if !said {
                    pipe.send(&WorkerMessage::WaitTurn);
                    said = true;
                }
                pipe.send(&WorkerMessage::Alive);
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(_) => return None,
        }
    }
}

/// Asks the parent to say when the device is idle and cool again, and waits for its `go`
/// (or a stop).
fn wait_for_idle(stop: &AtomicBool, resumed: &Receiver<()>, pipe: &Pipe) {
    pipe.send(&WorkerMessage::WaitIdle);
    while !stop.load(Ordering::Relaxed) {
        match resumed.recv_timeout(Duration::from_millis(100)) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Sends [`WorkerMessage::Alive`] each time the device has finished more work or a
/// workload said it is alive (`alive`, an idle step), until the test ends.
fn heartbeat(pipe: Pipe, completed: Arc<AtomicU64>, alive: Arc<AtomicU64>, ended: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let count = || {
            completed
                .load(Ordering::Relaxed)
                .wrapping_add(alive.load(Ordering::Relaxed))
        };
        let mut seen = count();
        while !ended.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(250));
            let now = count();
            if now != seen {
                seen = now;
                pipe.send(&WorkerMessage::Alive);
            }
        }
    });
}

fn test_device(
    job: &WorkerJob,
    stop: &Arc<AtomicBool>,
    resumed: &Receiver<()>,
    pipe: &Pipe,
    events: &mut PipeSink,
    feed: &PowerFeed,
) {
    let device = Some(job.info.index);
    events.emit(
        device,
        Event::DeviceStart {
            info: Box::new(job.info.clone()),
        },
    );
    let opened = Vulkan::new().and_then(|vulkan| {
        let physical = vulkan
            .devices()?
            .into_iter()
            .find(|d| d.index == job.vulkan_index)
            .ok_or_else(|| crate::gpu::GpuError::NoSuchDevice {
                selector: job.vulkan_index.to_string(),
            })?;
        let ctx = DeviceContext::open(&vulkan, &physical)?;
        Ok((vulkan, physical, ctx))
    });
    let (vulkan, physical, ctx) = match opened {
        Ok(v) => v,
        Err(e) => {
            events.emit(
                device,
                Event::DeviceError {
                    error: DeviceErrorKind::Open,
                    message: format!("could not open the device: {e}"),
                },
            );
            return;
        }
    };
    let mut device_ctx = Contexts {
        vulkan,
        physical,
        main: ctx,
        second: None,
        fence_timeout: job.fence_timeout,
    };
    device_ctx.main.set_fence_timeout(job.fence_timeout);
    let ended = Arc::new(AtomicBool::new(false));
    let alive = Arc::new(AtomicU64::new(0));
    heartbeat(
        pipe.clone(),
        device_ctx.main.completed_counter(),
        Arc::clone(&alive),
        Arc::clone(&ended),
    );
    let shared = Shared {
        stop,
        feed,
        alive: &alive,
        phase: crate::workload::cadence::SharedPhase::default(),
    };
    // A workload that runs all along (the resident region) starts first, on a context of
    // its own, and the VRAM tests in turn leave it the memory it holds.
    let (beside, in_turn) = beside_and_in_turn(job);
    let finish = Arc::new(AtomicBool::new(false));
    let alongside = start_alongside(
        &beside,
        in_turn.is_empty(),
        &device_ctx,
        &shared,
        &finish,
        job.duration,
        events,
    );
    // Each workload gets its weight's share of the budget, less when those before it ran
    // over (the time left is shared by the weights left), never more: a workload that
    // ends early (a fixed number of passes) shortens the run instead of lengthening the
    // next one.
    let device_deadline = job.duration.map(|d| Instant::now() + d);
    let weight_total = crate::workload::registry::weight_in_turn(&in_turn);
    let mut weight_left = weight_total;
    // A run weighing `weight` gets its part of the time left among `weight_left`, never
    // more than its weight's share of the whole.
    let share = |weight: u32, weight_left: u32| {
        device_deadline.zip(job.duration).map(|(end, whole)| {
            let left = end.saturating_duration_since(Instant::now()) * weight / weight_left.max(1);
            left.min(whole * weight / weight_total)
        })
    };
    for (i, planned) in in_turn.iter().enumerate() {
        if job.wait_idle && i > 0 {
            wait_for_idle(stop, resumed, pipe);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if job.crash_for_test {
            std::process::abort();
        }
        if job.busy_for_test {
            // As host-side work stuck in a loop that keeps calling the device: progress
            // every tick, deaf to stops.
            events.emit(
                device,
                Event::Note {
                    message: "test hook: host-side work that never answers a stop".into(),
                },
            );
            loop {
                pipe.send(&WorkerMessage::Alive);
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        if job.hang_for_test {
            // As a driver call that never returns: deaf to stdin and signals alike. Said
            // first, so that a test can tell the hang began.
            events.emit(
                device,
                Event::Note {
                    message: "test hook: a device call that never returns".into(),
                },
            );
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        // One device at a time on the host's PCIe links: devices behind one switch
        // share its uplink, and a probe measured beside another would read as a slow slot.
        let _turn = match (&planned.config, &job.pcie_lock) {
            (WorkloadConfig::Pcie(_), Some(lock)) => take_turn(lock, stop, pipe),
            _ => None,
        };
        let budget = share(planned.weight, weight_left);
        weight_left = weight_left.saturating_sub(planned.weight);
        let mut failed = run_planned(planned, budget, &mut device_ctx, &shared, pipe, events);
        // To confirm: a workload that found something runs again, with the same seeds, so
        // the report can say whether it reproduces. The reruns together weigh as their
        // workload once more and share the time left with the workloads after it:
        // confirming a finding never runs the device past its budget, nor starves what
        // comes after. Weights are counted in parts of a rerun (each rerun weighs its
        // workload's weight over the reruns) so that each gets an equal part.
        if failed && let Some(confirm) = job.confirm {
            let name = planned.config.name().as_str();
            let mut parts_left = (weight_left + planned.weight) * confirm.repeat.max(1);
            for rerun in 1..=confirm.repeat {
                if job.wait_idle {
                    wait_for_idle(stop, resumed, pipe);
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let budget = share(planned.weight, parts_left);
                parts_left = parts_left.saturating_sub(planned.weight);
                let label = format!("confirm {} of {}", rerun + 1, confirm.repeat + 1);
                if budget.is_some_and(|b| b < RERUN_LEAST.max(planned.config.least_time())) {
                    events.emit(
                        device,
                        Event::Note {
                            message: format!("{name}: {label} not run: the time budget is spent"),
                        },
                    );
                    continue;
                }
                events.emit(
                    device,
                    Event::Confirm {
                        workload: name.into(),
                        run: rerun + 1,
                        runs: confirm.repeat + 1,
                        budget_s: budget.map(|b| b.as_secs_f64()),
                    },
                );
                failed |= run_planned(planned, budget, &mut device_ctx, &shared, pipe, events);
            }
        }
        if failed && job.stop_on_first_failure {
            events.emit(
                device,
                Event::Note {
                    message: format!(
                        "{} failed: the profile stops this device at its first failure",
                        planned.config.name().as_str()
                    ),
                },
            );
            break;
        }
    }
    // The workloads in turn have ended (with none, the one alongside ran for the budget).
    finish.store(true, Ordering::Relaxed);
    if let Some(running) = alongside {
        let results = running.join().unwrap_or_else(|_| {
            events.emit(
                device,
                Event::DeviceError {
                    error: DeviceErrorKind::Workload,
                    message: "the thread running the workload alongside the others panicked".into(),
                },
            );
            Vec::new()
        });
        report_outcomes(results, None, stop, events);
    }
    ended.store(true, Ordering::Relaxed);
    validation_notes(events);
}

/// The plan's workloads that run all along (the resident region), and the others, in
/// turn, told what memory those hold.
fn beside_and_in_turn(job: &WorkerJob) -> (Vec<PlannedWorkload>, Vec<PlannedWorkload>) {
    crate::workload::registry::with_room_beside(&job.plan, &job.info)
        .into_iter()
        .partition(|p| p.config.runs_alongside())
}

/// What a thread running workloads gives back: each part's name and result.
type PartResults = Vec<(&'static str, Result<WorkloadOutcome, WorkloadError>)>;

/// Starts the workloads that run all along on a context of their own, with the device's
/// whole budget, until `finish`. `alone`: nothing runs in turn, so their waits between
/// checks keep the watchdog from taking the device for hung; beside others, only the
/// others' progress does, so that a hang of theirs is still seen.
fn start_alongside(
    beside: &[PlannedWorkload],
    alone: bool,
    contexts: &Contexts,
    shared: &Shared,
    finish: &Arc<AtomicBool>,
    duration: Option<Duration>,
    events: &mut PipeSink,
) -> Option<std::thread::JoinHandle<PartResults>> {
    if beside.is_empty() {
        return None;
    }
    let mut ctx = contexts.open_another("a context for the resident region", events)?;
    let mut control = shared.control(duration);
    control.finish = Arc::clone(finish);
    if !alone {
        control.alive = Arc::new(AtomicU64::new(0));
    }
    let mut sink = events.clone();
    let mut workloads: Vec<Box<dyn Workload + Send>> =
        beside.iter().flat_map(|p| p.config.build()).collect();
    Some(std::thread::spawn(move || {
        workloads
            .iter_mut()
            .map(|w| (w.name(), w.run(&mut ctx, &control, &mut sink)))
            .collect()
    }))
}

/// The least time worth a confirmation rerun: below it, the rerun is said not to have run.
const RERUN_LEAST: Duration = Duration::from_secs(1);

/// Validation messages kept as evidence per worker, at most (all of them go to stderr).
const VALIDATION_NOTES_MAX: usize = 50;

/// Records what a validation layer said (when one is active) as the device's notes: the
/// first messages whole, then how many more there were.
fn validation_notes(events: &mut PipeSink) {
    use std::sync::atomic::AtomicUsize;
    static KEPT: AtomicUsize = AtomicUsize::new(0);
    let messages = crate::gpu::take_validation_messages();
    if messages.is_empty() {
        return;
    }
    let device = Some(events.slot);
    let room = VALIDATION_NOTES_MAX.saturating_sub(KEPT.load(Ordering::Relaxed));
    for m in messages.iter().take(room) {
        events.emit(device, Event::Note { message: m.clone() });
    }
    KEPT.fetch_add(messages.len().min(room), Ordering::Relaxed);
    if messages.len() > room {
        events.emit(
            device,
            Event::Note {
                message: format!(
                    "{} more Vulkan validation messages (on stderr)",
                    messages.len() - room
                ),
            },
        );
    }
}

/// The device's contexts: the main one, and a second opened on first need for workloads
/// that run at once.
struct Contexts {
    vulkan: Arc<Vulkan>,
    physical: DeviceInfo,
    main: DeviceContext,
    second: Option<DeviceContext>,
    fence_timeout: Duration,
}

impl Contexts {
    /// Another context on the device, with the run's fence timeout; where it cannot be
    /// opened, says so (`what`: "a second context for heat") and gives none.
    fn open_another(&self, what: &str, events: &mut PipeSink) -> Option<DeviceContext> {
        match DeviceContext::open(&self.vulkan, &self.physical) {
            Ok(mut c) => {
                c.set_fence_timeout(self.fence_timeout);
                Some(c)
            }
            Err(e) => {
                events.emit(
                    Some(events.slot),
                    Event::DeviceError {
                        error: DeviceErrorKind::Open,
                        message: format!("could not open {what}: {e}"),
                    },
                );
                None
            }
        }
    }
}

/// What every workload's control shares with the worker: the stop, the power target's
/// feed and the heartbeat's count of deliberate waits.
struct Shared<'a> {
    stop: &'a Arc<AtomicBool>,
    feed: &'a PowerFeed,
    alive: &'a Arc<AtomicU64>,
    /// The device's load phase, shared by its workloads.
    phase: crate::workload::cadence::SharedPhase,
}

impl Shared<'_> {
    /// A workload's control with a time budget of `budget` from now, sharing all of these.
    fn control(&self, budget: Option<Duration>) -> RunControl {
        let mut c = RunControl::new(budget);
        c.stop = Arc::clone(self.stop);
        c.power = Some(self.feed.clone());
        c.alive = Arc::clone(self.alive);
        c.phase = self.phase.clone();
        c
    }
}

/// Runs one planned workload (two at once for `heat`) between counter snapshots and
/// records how each ended; true when one failed.
fn run_planned(
    planned: &PlannedWorkload,
    budget: Option<Duration>,
    contexts: &mut Contexts,
    shared: &Shared,
    pipe: &Pipe,
    events: &mut PipeSink,
) -> bool {
    let device = Some(events.slot);
    let stop = shared.stop;
    let control = || shared.control(budget);
    let mut workloads = planned.config.build();
    let phase = planned.config.name().as_str();
    let snapshot = |when: Boundary| {
        pipe.send(&WorkerMessage::Snapshot {
            phase: phase.into(),
            when,
        })
    };
    snapshot(Boundary::Before);
    let mut results = Vec::new();
    if let [first, second] = workloads.as_mut_slice() {
        if contexts.second.is_none()
            && let Some(mut c) =
                contexts.open_another(&format!("a second context for {phase}"), events)
        {
            // One heartbeat for both: either context working is the device alive.
            c.share_completed_counter(contexts.main.completed_counter());
            contexts.second = Some(c);
        }
        if let Some(ctx2) = contexts.second.as_mut() {
            let mut sink2 = events.clone();
            let (c1, c2) = (control(), control());
            let main = &mut contexts.main;
            let (r1, r2) = std::thread::scope(|s| {
                let other = s.spawn(|| second.run(ctx2, &c2, &mut sink2));
                let r1 = first.run(main, &c1, events);
                (r1, other.join())
            });
            results.push((first.name(), r1));
            match r2 {
                Ok(r) => {
                    results.push((second.name(), r));
                    results.extend(second.beside().into_iter().map(|o| (second.name(), Ok(o))));
                }
                Err(_) => events.emit(
                    device,
                    Event::DeviceError {
                        error: DeviceErrorKind::Workload,
                        message: format!("{}: the thread running it panicked", second.name()),
                    },
                ),
            }
        }
    } else {
        for w in workloads.iter_mut() {
            let r = w.run(&mut contexts.main, &control(), events);
            results.push((w.name(), r));
            results.extend(w.beside().into_iter().map(|o| (w.name(), Ok(o))));
        }
    }
    snapshot(Boundary::After);
    validation_notes(events);
    let together = (results.len() > 1).then_some(phase);
    report_outcomes(results, together, stop, events)
}

/// Records how each part ended (`together`: the load they ran inside of, at once);
/// true when one failed.
fn report_outcomes(
    results: PartResults,
    together: Option<&str>,
    stop: &AtomicBool,
    events: &mut PipeSink,
) -> bool {
    let device = Some(events.slot);
    let mut failed = false;
    for (name, result) in results {
        match result {
            Ok(mut outcome) => {
                // A stop asked for while it ran ended it before its plan did, whatever
                // the workload itself noticed.
                if stop.load(Ordering::Relaxed) {
                    outcome.stopped_on_request();
                }
                failed |= outcome.status == WorkloadStatus::Failed;
                if let Some(phase) = together.filter(|p| *p != outcome.workload) {
                    outcome.summary.envelope_mut().together_with = Some(phase.to_owned());
                }
                events.emit(
                    device,
                    Event::WorkloadEnd {
                        workload: outcome.workload.clone(),
                        status: outcome.status,
                        headline: outcome.headline.clone(),
                        summary: outcome.summary.to_json(),
                    },
                );
            }
            Err(e) => events.emit(
                device,
                Event::DeviceError {
                    error: DeviceErrorKind::Workload,
                    message: format!("{name}: {e}"),
                },
            ),
        }
    }
    failed
}
