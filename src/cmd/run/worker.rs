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

use super::plan::{Split, seconds};
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
    // Each workload gets its weight's share of the budget whatever ran before it, never
    // more (see `Split`): a workload that ends early shortens the run, and one that runs
    // over moves the device's end instead of taking from the next.
    let weight_total = crate::workload::registry::weight_in_turn(&in_turn);
    let mut clock = Clock {
        began: Instant::now(),
        split: job.duration.map(|d| Split::new(d, weight_total)),
        reruns_took: false,
    };
    let mut weight_left = weight_total;
    for (i, planned) in in_turn.iter().enumerate() {
        if job.wait_idle && i > 0 {
            let waiting = Instant::now();
            wait_for_idle(stop, resumed, pipe);
            clock.waited(waiting.elapsed());
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
        let waiting = Instant::now();
        let _turn = match (&planned.config, &job.pcie_lock) {
            (WorkloadConfig::Pcie(_), Some(lock)) => take_turn(lock, stop, pipe),
            _ => None,
        };
        clock.waited(waiting.elapsed());
        let given = clock.given(planned.weight, weight_left);
        weight_left = weight_left.saturating_sub(planned.weight);
        let started = clock.now();
        let mut failed = run_planned(planned, given, &mut device_ctx, &shared, pipe, events);
        clock.ran(planned, given, started, pipe, events);
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
                    let waiting = Instant::now();
                    wait_for_idle(stop, resumed, pipe);
                    clock.waited(waiting.elapsed());
                }
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                // A rerun's time is its part of what is left, taken from the workloads
                // after it: it has no share of the plan's to be held to.
                let budget = clock.given(planned.weight, parts_left).map(|g| g.budget);
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
                let given = budget.map(|budget| Given {
                    budget,
                    share: None,
                });
                clock.reruns_took = true;
                let started = clock.now();
                failed |= run_planned(planned, given, &mut device_ctx, &shared, pipe, events);
                clock.ran(planned, given, started, pipe, events);
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
        report_outcomes(results, None, None, stop, events);
    }
    ended.store(true, Ordering::Relaxed);
    validation_notes(events);
}

/// What the worker gives one run of a workload: its time budget and the share of the
/// budget the plan promised it (none for a rerun, which has no share of its own, nor once
/// reruns have taken time from the workloads after them, as the plan says they do).
#[derive(Debug, Clone, Copy)]
struct Given {
    budget: Duration,
    share: Option<Duration>,
}

impl Given {
    /// Why the run counts as cut short, when it was given less than half the share the
    /// plan promised: a workload held to a fraction of its time, whatever held it so,
    /// never reads as a pass.
    fn short_of_share(&self) -> Option<String> {
        let share = self.share?;
        (self.budget * 2 < share).then(|| {
            format!(
                "given {} s of its planned {} s share of the time budget",
                seconds(self.budget.as_secs_f64()),
                seconds(share.as_secs_f64())
            )
        })
    }
}

/// The device's clock for its budget: when its first workload started, and how the
/// budget is shared (none without a budget).
struct Clock {
    began: Instant,
    split: Option<Split>,
    /// Reruns to confirm a finding have taken time from the workloads after them: their
    /// shares no longer hold.
    reruns_took: bool,
}

impl Clock {
    /// Time since the first workload started.
    fn now(&self) -> Duration {
        self.began.elapsed()
    }

    /// Time spent waiting, which the budget does not count.
    fn waited(&mut self, wait: Duration) {
        if let Some(split) = &mut self.split {
            split.waited(wait);
        }
    }

    /// What a run weighing `weight` is given now, `weight_left` being its weight and that
    /// of every run after it.
    fn given(&self, weight: u32, weight_left: u32) -> Option<Given> {
        self.split.as_ref().map(|split| Given {
            budget: split.budget(weight, weight_left, self.now()),
            share: (!self.reruns_took).then(|| split.share(weight)),
        })
    }

    /// A run of `planned` given `given`, started at `started`, has ended: what it ran over
    /// moves the device's end, the parent is told (its bound on the device's time moves
    /// with it), and an overrun of a tenth of what it was given or more is said.
    fn ran(
        &mut self,
        planned: &PlannedWorkload,
        given: Option<Given>,
        started: Duration,
        pipe: &Pipe,
        events: &mut PipeSink,
    ) {
        let (Some(split), Some(given)) = (self.split.as_mut(), given) else {
            return;
        };
        let ended = self.began.elapsed();
        let overrun = split.ran(given.budget, started, ended);
        if overrun.is_zero() {
            return;
        }
        pipe.send(&WorkerMessage::Overran(overrun));
        if overrun * 10 >= given.budget {
            let device = Some(events.slot);
            events.emit(
                device,
                Event::Note {
                    message: format!(
                        "{} took {} s of the {} s it was given (its setup, first measurement or the step under way cannot be cut short): the device's test ends {} s later, and the workloads after it keep their time",
                        planned.config.name().as_str(),
                        seconds(ended.saturating_sub(started).as_secs_f64()),
                        seconds(given.budget.as_secs_f64()),
                        seconds(overrun.as_secs_f64())
                    ),
                },
            );
        }
    }
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
    given: Option<Given>,
    contexts: &mut Contexts,
    shared: &Shared,
    pipe: &Pipe,
    events: &mut PipeSink,
) -> bool {
    let device = Some(events.slot);
    let stop = shared.stop;
    let control = || shared.control(given.map(|g| g.budget));
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
    let short = given.and_then(|g| g.short_of_share());
    report_outcomes(results, together, short.as_deref(), stop, events)
}

/// Records how each part ended (`together`: the load they ran inside of, at once;
/// `short`: why the run was given too little of its share to count as whole); true when
/// one failed.
fn report_outcomes(
    results: PartResults,
    together: Option<&str>,
    short: Option<&str>,
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
                if let Some(why) = short {
                    outcome.mark_cut_short(why);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::WorkloadOutcome;

    /// A PCIe probe that passed, as its `workload_end` writes it.
    fn passed_probe() -> WorkloadOutcome {
        let written = serde_json::json!({
            "workload": "pcie",
            "status": "passed",
            "headline": "6 transfers verified",
            "summary": {
                "corruption": [], "device_error": null, "findings": [],
                "largest_bytes": 4096, "link": null, "peak_bidir_gbps": 0.36,
                "peak_d2h_gbps": 0.18, "peak_h2d_gbps": 0.18, "readback_memory": [],
                "sizes": [{"bidir_gbps": 0.36, "bytes": 4096, "d2h_gbps": 0.18,
                    "d2h_latency_us": 22.2, "h2d_gbps": 0.18, "h2d_latency_us": 22.6}],
                "staging_in_host_memory": false, "stopped_early": null,
                "transfers_verified": 6, "upload_memory": [], "wall_s": 0.0035
            }
        });
        serde_json::from_value(written).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_run_given_far_less_than_its_share_is_cut_short_never_a_pass() {
        let ms = Duration::from_millis;
        let starved = Given {
            budget: Duration::from_micros(3500),
            share: Some(ms(600)),
        };
        let why = starved.short_of_share().unwrap_or_default();
        assert_eq!(
            why,
            "given 0.004 s of its planned 0.60 s share of the time budget"
        );
        let mut outcome = passed_probe();
        assert_eq!(outcome.status, WorkloadStatus::Passed);
        outcome.mark_cut_short(&why);
        assert_eq!(outcome.status, WorkloadStatus::Incomplete);
        assert!(outcome.headline.contains(&why), "{}", outcome.headline);
        // Its share, or half of it, is a run as planned; a rerun, or a run after reruns
        // took from it, has no share to hold.
        for whole in [
            Given {
                budget: ms(600),
                share: Some(ms(600)),
            },
            Given {
                budget: ms(300),
                share: Some(ms(600)),
            },
            Given {
                budget: ms(10),
                share: None,
            },
        ] {
            assert_eq!(whole.short_of_share(), None, "{whole:?}");
        }
    }
}
