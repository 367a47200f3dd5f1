//! `kiln run`: discover, select, test every device, keep the evidence, report.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::error::AppError;
use crate::evidence::{
    DeviceErrorKind, Event, EventSink, EventWriter, EvidenceError, JsonlWriter, Manifest, RunDir,
    default_run_dir, utc_timestamp,
};
use crate::gpu::DeviceInfo;
use crate::select::{Selection, select_for_run};
use crate::telemetry;
use crate::telemetry::record::{Reading, Readings, TelemetryData};
use crate::telemetry::sidecar::{RealClock, Sidecar};
use crate::telemetry::signals;
use crate::verdict::thresholds::Thresholds;
use crate::verdict::{Report, exit_code};
use crate::worker::{GO, WORKER_ARG, WorkerJob, WorkerMessage};
use crate::workload::compute::{ComputeConfig, ComputeTest};
use crate::workload::fragment::{FragmentConfig, FragmentTest};
use crate::workload::pcie::{PcieConfig, PcieTest};
use crate::workload::vram::{VramConfig, VramTest};
use crate::workload::{Workload, WorkloadError};

/// Everything `kiln run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The profile the plan came from (bundled name or path), for the manifest.
    pub profile: String,
    /// Device selectors (index, UUID, PCI address); empty: every GPU.
    pub devices: Vec<String>,
    /// Time budget per device, shared by the workloads by weight.
    pub duration: Option<Duration>,
    /// The workloads to run on every device, in order.
    pub plan: Vec<PlannedWorkload>,
    /// Stop a device's remaining workloads after the first that fails.
    pub stop_on_first_failure: bool,
    /// Rerun a workload that found something, to confirm it.
    pub confirm: Option<crate::profile::Confirm>,
    /// Wait for an idle, cool GPU before starting and between workloads.
    pub wait_idle: bool,
    /// Run directory.
    pub out: Option<PathBuf>,
    /// Bound on every wait for the device.
    pub fence_timeout: Duration,
    /// Show progress bars (only when stderr is a terminal).
    pub progress: bool,
    /// Telemetry sampling interval; None turns the sidecar off.
    pub telemetry_interval: Option<Duration>,
    /// Thresholds of the verdict rules.
    pub thresholds: Thresholds,
    /// The watchdog: a device with no progress for this long is abandoned as hung.
    pub step_timeout: Duration,
    /// Hooks for tests of the orchestration.
    pub test_hooks: TestHooks,
}

/// Hooks that only tests use: several contexts on one device, and a planted hang.
#[derive(Debug, Clone, Default)]
pub struct TestHooks {
    /// Open every selected device this many times, each as a device of its own (0 or 1:
    /// once).
    pub replicate: usize,
    /// The device (by its place in the run) whose worker stops responding.
    pub hang_slot: Option<usize>,
    /// The device (by its place in the run) whose worker dies, as a driver crash would
    /// kill it.
    pub crash_slot: Option<usize>,
    /// The device (by its place in the run) whose worker loops in host-side work that
    /// shows progress but never answers a stop.
    pub busy_slot: Option<usize>,
}

/// One workload of a plan and its share of the device's time budget.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PlannedWorkload {
    /// Parts of the budget (memory usually three to one for each other workload).
    pub weight: u32,
    /// What to run.
    pub config: WorkloadConfig,
}

/// A workload and its settings.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "workload", rename_all = "snake_case")]
pub enum WorkloadConfig {
    /// The VRAM pattern test.
    Vram(VramConfig),
    /// Verified compute saturation.
    Compute(ComputeConfig),
    /// PCIe bandwidth and transfer integrity.
    Pcie(PcieConfig),
    /// Allocator fragmentation and leak torture.
    Fragment(FragmentConfig),
    /// The VRAM test and the compute load at once, on two contexts of the device: the
    /// most heat and power it can be made to take.
    Heat {
        /// The VRAM test's settings.
        vram: VramConfig,
        /// The compute load's settings.
        compute: ComputeConfig,
    },
}

impl WorkloadConfig {
    /// Which workload this is.
    pub fn name(&self) -> WorkloadName {
        match self {
            WorkloadConfig::Vram(_) => WorkloadName::Vram,
            WorkloadConfig::Compute(_) => WorkloadName::Compute,
            WorkloadConfig::Pcie(_) => WorkloadName::Pcie,
            WorkloadConfig::Fragment(_) => WorkloadName::Fragment,
            WorkloadConfig::Heat { .. } => WorkloadName::Heat,
        }
    }

    /// The VRAM test's settings, where this workload has a VRAM test (`vram`, `heat`).
    pub fn vram(&self) -> Option<&VramConfig> {
        match self {
            WorkloadConfig::Vram(v) | WorkloadConfig::Heat { vram: v, .. } => Some(v),
            _ => None,
        }
    }

    /// The workload with default settings.
    pub fn default_of(name: WorkloadName) -> WorkloadConfig {
        match name {
            WorkloadName::Vram => WorkloadConfig::Vram(VramConfig::default()),
            WorkloadName::Compute => WorkloadConfig::Compute(ComputeConfig::default()),
            WorkloadName::Pcie => WorkloadConfig::Pcie(PcieConfig::default()),
            WorkloadName::Fragment => WorkloadConfig::Fragment(FragmentConfig::default()),
            WorkloadName::Heat => WorkloadConfig::Heat {
                vram: VramConfig::default(),
                compute: ComputeConfig::default(),
            },
        }
    }

    /// The workloads to run at once (one, or two for `heat`), ready to run.
    pub fn build(&self) -> Vec<Box<dyn Workload + Send>> {
        match self {
            WorkloadConfig::Vram(c) => vec![Box::new(VramTest { config: c.clone() })],
            WorkloadConfig::Compute(c) => vec![Box::new(ComputeTest { config: c.clone() })],
            WorkloadConfig::Pcie(c) => vec![Box::new(PcieTest { config: c.clone() })],
            WorkloadConfig::Fragment(c) => vec![Box::new(FragmentTest { config: c.clone() })],
            WorkloadConfig::Heat { vram, compute } => vec![
                Box::new(VramTest {
                    config: vram.clone(),
                }),
                Box::new(ComputeTest {
                    config: compute.clone(),
                }),
            ],
        }
    }
}

/// The workloads `kiln run` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadName {
    /// The VRAM pattern test.
    Vram,
    /// Verified compute saturation.
    Compute,
    /// PCIe bandwidth and transfer integrity.
    Pcie,
    /// Allocator fragmentation and leak torture.
    Fragment,
    /// VRAM and compute at once, for heat.
    Heat,
}

impl WorkloadName {
    /// Every workload, in the order they are listed.
    pub const ALL: [WorkloadName; 5] = [
        WorkloadName::Vram,
        WorkloadName::Compute,
        WorkloadName::Pcie,
        WorkloadName::Fragment,
        WorkloadName::Heat,
    ];

    /// The name in evidence and reports (`vram`, `heat`).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadName::Vram => "vram",
            WorkloadName::Compute => "compute",
            WorkloadName::Pcie => "pcie",
            WorkloadName::Fragment => "fragment",
            WorkloadName::Heat => "heat",
        }
    }

    /// Parses a comma-separated list (`vram,compute`).
    pub fn parse_list(list: &str) -> Result<Vec<WorkloadName>, String> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let w = WorkloadName::ALL
                .into_iter()
                .find(|w| w.as_str() == name)
                .ok_or_else(|| {
                    format!(
                        "unknown workload {} (known: {})",
                        crate::text::quote(name),
                        WorkloadName::ALL.map(WorkloadName::as_str).join(", ")
                    )
                })?;
            if !out.contains(&w) {
                out.push(w);
            }
        }
        if out.is_empty() {
            return Err("no workload named".into());
        }
        Ok(out)
    }
}

/// Signals received during a run: the first stops the workloads at their next step, the
/// second ends the run at once.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

fn install_signal_handler() {
    SIGNALS.store(0, Ordering::SeqCst);
    // One handler per process: a second run in the same process keeps the first.
    let _ = ctrlc::set_handler(|| {
        SIGNALS.fetch_add(1, Ordering::SeqCst);
    });
}

/// The devices of a run: each with its place in the run (`info.index`, the name every
/// record uses) and its index in Vulkan's enumeration.
fn slots(devices: Vec<DeviceInfo>, replicate: usize) -> Vec<(usize, DeviceInfo)> {
    if replicate <= 1 {
        return devices.into_iter().map(|d| (d.index, d)).collect();
    }
    // Test only: the same device opened by several workers, each its own context.
    let mut out = Vec::new();
    for d in devices {
        for copy in 0..replicate {
            let mut info = d.clone();
            info.index = out.len();
            info.name = format!("{} (context {copy})", d.name);
            out.push((d.index, info));
        }
    }
    out
}

/// Runs the test on every selected device, all at once, each in its own worker process,
/// and writes the run directory.
pub fn run(opts: &RunOptions) -> Result<Report, AppError> {
    let started = Instant::now();
    let started_utc = utc_timestamp(SystemTime::now());
    let Selection {
        devices,
        stand_in,
        not_tested,
        mut notes,
    } = select_for_run(&opts.devices)?;
    // What the user asked of each device must fit it: refused before anything starts.
    check_sizes(&devices, &opts.plan)?;
    let slots = slots(devices, opts.test_hooks.replicate);
    let infos: Vec<DeviceInfo> = slots.iter().map(|(_, info)| info.clone()).collect();
    let dir_path = opts.out.clone().unwrap_or_else(default_run_dir);
    // A run directory that cannot be made is the user's choice to fix: a usage error.
    let run_dir = RunDir::create(&dir_path).map_err(|e| AppError::Usage(e.to_string()))?;
    let settings = serde_json::json!({
        "profile": &opts.profile,
        "duration_s": opts.duration.map(|d| d.as_secs_f64()),
        "fence_timeout_s": opts.fence_timeout.as_secs_f64(),
        "step_timeout_s": opts.step_timeout.as_secs_f64(),
        "telemetry_interval_s": opts.telemetry_interval.map(|d| d.as_secs_f64()),
        "stop_on_first_failure": opts.stop_on_first_failure,
        "plan": &opts.plan,
    });
    let mut manifest = Manifest::new(infos.clone(), settings, started_utc);
    manifest.stand_in = stand_in;
    manifest.not_tested = not_tested;
    run_dir.write_manifest(&manifest)?;
    let mut events = run_dir.events(started)?;
    let latest = Latest::default();
    let mut latest_from = None;
    let sidecar = match opts.telemetry_interval {
        // Nothing to watch when no device can be tested.
        _ if infos.is_empty() => None,
        Some(interval) => {
            let (sidecar, readings, telemetry_notes) =
                start_telemetry(&run_dir, &infos, interval, started)?;
            notes.extend(telemetry_notes);
            latest_from = Some(readings);
            Some(sidecar)
        }
        None => {
            notes.push("telemetry off (--telemetry-interval 0): no temperature, power, clock or counter evidence".into());
            None
        }
    };
    for note in &notes {
        events.emit(
            None,
            Event::Note {
                message: note.clone(),
            },
        );
    }
    if let Some(s) = &sidecar {
        preflight(s, &infos, opts.telemetry_interval.unwrap_or_default());
    }
    install_signal_handler();
    let latest = latest_from.unwrap_or(latest);
    if opts.wait_idle && !infos.is_empty() {
        wait_until_idle(&infos, &latest, &mut events);
    }
    if !slots.is_empty() {
        supervise(opts, &slots, &mut events, sidecar.as_ref(), &latest)?;
    }
    if let Some(s) = sidecar {
        s.stop();
    }
    // The run's own evidence unreadable is a run that could not be judged, not a usage error.
    let mut report = crate::verdict::judge_dir(run_dir.path(), &opts.thresholds, true)
        .map_err(|e| AppError::Start(format!("the run's evidence could not be read back: {e}")))?;
    report.wall_s = started.elapsed().as_secs_f64();
    if let Err(e) = events.check() {
        report
            .notes
            .push(format!("some evidence could not be written: {e}"));
    }
    events.emit(
        None,
        Event::RunEnd {
            exit_code: report.exit_code,
            result: report.result.word().to_lowercase(),
        },
    );
    crate::report::write_all(run_dir.path(), &report).map_err(|e| {
        AppError::Evidence(EvidenceError::Io {
            path: run_dir.path().to_owned(),
            message: e.to_string(),
        })
    })?;
    Ok(report)
}

/// Before any load: the counters (ECC, remaps, retired pages, replays, AER) and a second of
/// idle samples (throttle reasons, clocks, temperature, power at rest) as a phase of its
/// own, `preflight`, so that what was wrong before kiln touched the card is told apart from
/// what its load did. The identity (driver, other processes) and the Xid history were read
/// when the sidecar started.
fn preflight(sidecar: &Sidecar, devices: &[DeviceInfo], interval: Duration) {
    for d in devices {
        sidecar.snapshot(Some(d.index), PREFLIGHT, "before");
    }
    std::thread::sleep((interval * 3).max(Duration::from_secs(1)));
    for d in devices {
        sidecar.snapshot(Some(d.index), PREFLIGHT, "after");
    }
}

/// The phase of idle evidence taken before any load.
pub const PREFLIGHT: &str = "preflight";

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
    /// When the worker was asked to stop (its stdin closed).
    stop_asked: Option<Instant>,
    /// When its output closed: it is ending.
    closed_at: Option<Instant>,
    done: bool,
    finished: bool,
    bar: indicatif::ProgressBar,
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
        self.bar.finish_and_clear();
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
fn supervise(
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
        let mut stdin = child.stdin.take();
        if let Some(pipe) = stdin.as_mut() {
            let line = serde_json::to_string(&job).unwrap_or_default() + "\n";
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
        let bar = bars.add(indicatif::ProgressBar::new_spinner());
        bar.set_prefix(format!("GPU{} {}", info.index, info.name));
        bar.set_style(
            indicatif::ProgressStyle::with_template("{prefix} {spinner} {elapsed} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
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
            stop_asked: None,
            closed_at: None,
            done: false,
            finished: false,
            bar,
        });
    }
    drop(tx);
    let workers_started = Instant::now();
    // Some steps idle on purpose (the retention test): the watchdog allows for them.
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
    let patience = opts.step_timeout + opts.fence_timeout + idle_allowance;
    let mut stopping = false;
    while workers.iter().any(|w| !w.finished) {
        let signals = SIGNALS.load(Ordering::SeqCst);
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
        reap(&mut workers, events);
        bound_by_time(opts, &mut workers, workers_started, idle_allowance, events);
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
/// not counted) is asked to stop, and a worker that has not ended a step timeout after
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
            let allowed = budget + opts.step_timeout + idle_allowance + w.waited_now();
            if started.elapsed() > allowed {
                events.emit(
                    Some(w.slot),
                    Event::Note {
                        message: format!(
                            "still running {:.0} s past its {:.0} s budget{}: asked to stop",
                            (started.elapsed() - budget - w.waited_now()).as_secs_f64(),
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
        w.bar.finish_and_clear();
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
            .map(|m| idleness(m.get(&w.slot)))
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

/// Before any load, waits (up to [`WAIT_IDLE_MAX`]) until every device is idle and cool,
/// and says what it waited for.
fn wait_until_idle(devices: &[DeviceInfo], latest: &Latest, events: &mut EventWriter) {
    let started = Instant::now();
    loop {
        let states: Vec<(usize, Idleness)> = devices
            .iter()
            .map(|d| {
                let state = latest
                    .lock()
                    .map(|m| idleness(m.get(&d.index)))
                    .unwrap_or(Idleness::Unknown);
                (d.index, state)
            })
            .collect();
        let busy: Vec<String> = states
            .iter()
            .filter_map(|(i, s)| match s {
                Idleness::Busy(why) => Some(format!("GPU{i} {why}")),
                _ => None,
            })
            .collect();
        let unknown: Vec<String> = states
            .iter()
            .filter(|(_, s)| *s == Idleness::Unknown)
            .map(|(i, _)| format!("GPU{i}"))
            .collect();
        let message = if busy.is_empty() {
            (!unknown.is_empty()).then(|| {
                format!(
                    "--wait-idle: no utilisation or temperature reading for {}, so whether it is idle cannot be told: not waiting",
                    unknown.join(", ")
                )
            })
            .or_else(|| {
                (started.elapsed() > Duration::from_secs(1)).then(|| {
                    format!(
                        "--wait-idle: waited {:.0} s for every GPU to be idle and cool",
                        started.elapsed().as_secs_f64()
                    )
                })
            })
        } else if started.elapsed() > WAIT_IDLE_MAX || SIGNALS.load(Ordering::SeqCst) > 0 {
            Some(format!(
                "--wait-idle: still not idle and cool after {:.0} s ({}): starting anyway",
                started.elapsed().as_secs_f64(),
                busy.join("; ")
            ))
        } else {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        };
        if let Some(message) = message {
            events.emit(None, Event::Note { message });
        }
        return;
    }
}

/// One message from a worker: evidence into the events, a snapshot request to the
/// sidecar, progress to the display.
fn relay(w: &mut WorkerHandle, line: &str, events: &mut EventWriter, sidecar: Option<&Sidecar>) {
    let Ok(message) = serde_json::from_str::<WorkerMessage>(line) else {
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
                Event::WorkloadStart { workload, .. } => {
                    w.running = Some(workload.clone());
                    w.bar.set_message(workload.clone());
                }
                Event::Step {
                    workload,
                    algorithm,
                    pass,
                    op,
                    ..
                } => w
                    .bar
                    .set_message(format!("{workload} {algorithm} pass {pass} {op}")),
                Event::WorkloadEnd { .. } => w.running = None,
                _ => {}
            }
            w.bar.tick();
            events.emit(record.device, record.event);
        }
        WorkerMessage::Snapshot { phase, when } => {
            if let Some(s) = sidecar {
                s.snapshot(Some(w.slot), &phase, &when);
            }
        }
        WorkerMessage::Alive => w.bar.tick(),
        WorkerMessage::WaitIdle => {
            w.waiting_since = Some(Instant::now());
            w.bar.set_message("waiting for the GPU to be idle and cool");
        }
        WorkerMessage::WaitTurn => {
            w.turn_since.get_or_insert_with(Instant::now);
            w.bar.set_message("waiting for its turn at the PCIe probe");
        }
        WorkerMessage::Done => w.done = true,
    }
}

/// Starts the sidecar writing `telemetry.jsonl`; returns it and the facts about what
/// cannot be read here.
fn start_telemetry(
    run_dir: &RunDir,
    devices: &[DeviceInfo],
    interval: Duration,
    started: Instant,
) -> Result<(Sidecar, Latest, Vec<String>), AppError> {
    let (sources, notes) = telemetry::live_sources(devices);
    let mut out = JsonlWriter::create(&run_dir.path().join("telemetry.jsonl"))?;
    let latest = Latest::default();
    let keep = Arc::clone(&latest);
    let sidecar = Sidecar::spawn(
        sources,
        interval,
        Arc::new(RealClock::new(started)),
        Box::new(move |record| {
            if let (Some(d), TelemetryData::Sample { readings }) = (record.device, &record.data)
                && let Ok(mut map) = keep.lock()
            {
                map.insert(d, readings.clone());
            }
            out.append(&record)
        }),
    )
    .map_err(|e| AppError::Start(format!("could not start the telemetry thread: {e}")))?;
    Ok((sidecar, latest, notes))
}

/// Each device's latest telemetry sample, for deciding when it is idle.
type Latest = Arc<Mutex<BTreeMap<usize, Readings>>>;

/// Busier than this (GPU utilisation, %) is not idle.
pub const IDLE_UTIL_PCT: f64 = 10.0;
/// Hotter than this (GPU temperature, °C) is not cool: datacenter GPUs idle at 30-45 °C
/// and run at 60-85 °C.
pub const COOL_TEMP_C: f64 = 50.0;
/// The longest `--wait-idle` waits for one device before starting anyway (and saying so).
pub const WAIT_IDLE_MAX: Duration = Duration::from_secs(600);

/// Whether a device is idle and cool, from its latest telemetry.
#[derive(Debug, Clone, PartialEq)]
pub enum Idleness {
    /// Idle and cool: start.
    Idle,
    /// Busy or hot, and why.
    Busy(String),
    /// No utilisation or temperature reading: it cannot be told.
    Unknown,
}

/// Judges idleness from a device's latest readings (utilisation and temperature).
pub fn idleness(readings: Option<&Readings>) -> Idleness {
    let value = |key: &str| readings.and_then(|r| r.get(key)).and_then(Reading::number);
    let (util, temp) = (
        value(signals::UTIL_GPU_PCT.name),
        value(signals::GPU_TEMP_C.name),
    );
    if util.is_none() && temp.is_none() {
        return Idleness::Unknown;
    }
    let mut why = Vec::new();
    if let Some(u) = util.filter(|u| *u > IDLE_UTIL_PCT) {
        why.push(format!("{u:.0}% busy"));
    }
    if let Some(t) = temp.filter(|t| *t > COOL_TEMP_C) {
        why.push(format!("{t:.0} °C"));
    }
    if why.is_empty() {
        Idleness::Idle
    } else {
        Idleness::Busy(why.join(", "))
    }
}

/// What `kiln run` would do, without doing it (`--dry-run`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Plan {
    /// The profile.
    pub profile: String,
    /// Time budget per device; devices run in parallel, so this is also the run's.
    pub duration_s: Option<f64>,
    /// Facts about the selection (a CPU device only).
    pub notes: Vec<String>,
    /// Per device.
    pub devices: Vec<DevicePlan>,
}

/// One device's part of the plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DevicePlan {
    /// Vulkan index.
    pub index: usize,
    /// Name.
    pub name: String,
    /// `deviceUUID`.
    pub uuid: String,
    /// PCI address, when known.
    pub pci_address: Option<String>,
    /// VRAM each VRAM workload will test (the largest, when several differ).
    pub vram_bytes: Option<u64>,
    /// Size of the device-local heap.
    pub heap_bytes: Option<u64>,
    /// The workloads, in order, with their share of the budget.
    pub workloads: Vec<PlannedStep>,
}

/// One workload in a device's plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlannedStep {
    /// Which workload.
    pub workload: WorkloadName,
    /// Its weight.
    pub weight: u32,
    /// Its first share of the budget (what earlier workloads leave goes to later ones).
    pub budget_s: Option<f64>,
    /// What it will do.
    pub detail: String,
}

/// Checks what the plan asks of every device's memory against what the device has: a
/// `--vram-bytes` larger than the free memory, or a `--reserve` that leaves nothing, is a
/// usage error before the run starts (the device's own state is the workload's to record).
pub fn check_sizes(devices: &[DeviceInfo], plan: &[PlannedWorkload]) -> Result<(), AppError> {
    for info in devices {
        for v in plan.iter().filter_map(|p| p.config.vram()) {
            match crate::workload::vram::plan_size(info, v) {
                Err(WorkloadError::Config(why)) => return Err(AppError::Usage(why)),
                Ok(_) | Err(WorkloadError::Gpu(_)) => {}
            }
        }
    }
    Ok(())
}

/// Discovers and selects the devices and plans the run, starting nothing.
pub fn dry_run(opts: &RunOptions) -> Result<Plan, AppError> {
    let Selection {
        devices,
        stand_in: _,
        not_tested,
        mut notes,
    } = select_for_run(&opts.devices)?;
    check_sizes(&devices, &opts.plan)?;
    for n in &not_tested {
        notes.push(format!(
            "{} at {} will not be tested: {}",
            n.gpu.name,
            n.gpu.pci_address.as_deref().unwrap_or("an unknown address"),
            n.cause.message
        ));
    }
    let total_weight: u32 = opts.plan.iter().map(|p| p.weight).sum::<u32>().max(1);
    let mut plans = Vec::new();
    for info in &devices {
        let mut vram_bytes = None;
        let mut heap_bytes = None;
        let mut steps = Vec::new();
        for p in &opts.plan {
            let sized = match p
                .config
                .vram()
                .map(|v| crate::workload::vram::plan_size(info, v))
            {
                Some(Ok(sizing)) => {
                    vram_bytes = vram_bytes.max(Some(sizing.sized_bytes));
                    heap_bytes = Some(sizing.heap_bytes);
                    format!("{} GiB", gib(sizing.sized_bytes))
                }
                // The device's state (no memory free): the run would record it.
                Some(Err(e)) => format!("no memory ({e})"),
                None => String::new(),
            };
            let detail = match &p.config {
                WorkloadConfig::Vram(c) => {
                    format!(
                        "{sized} with {}, {}",
                        c.algorithms
                            .iter()
                            .map(|a| a.name())
                            .collect::<Vec<_>>()
                            .join(", "),
                        match c.passes {
                            Some(1) => "1 pass".into(),
                            Some(n) => format!("{n} passes"),
                            None => "passes until the budget ends".into(),
                        }
                    )
                }
                WorkloadConfig::Compute(c) => format!(
                    "{} load, fp32/int32/fp16 verified{}",
                    shape_name(&c.shape),
                    c.rounds
                        .map(|r| format!(", {r} rounds"))
                        .unwrap_or_default()
                ),
                WorkloadConfig::Pcie(c) => format!(
                    "transfers from {} KiB to {} MiB, each way and both, verified",
                    c.min_bytes >> 10,
                    c.max_bytes >> 20
                ),
                WorkloadConfig::Fragment(_) => {
                    "allocate and free under a memory cap; fragmentation and leaks".into()
                }
                WorkloadConfig::Heat { compute, .. } => format!(
                    "{sized} of VRAM patterns and {} compute at once, for heat",
                    shape_name(&compute.shape)
                ),
            };
            steps.push(PlannedStep {
                workload: p.config.name(),
                weight: p.weight,
                budget_s: opts
                    .duration
                    .map(|d| d.as_secs_f64() * f64::from(p.weight) / f64::from(total_weight)),
                detail,
            });
        }
        plans.push(DevicePlan {
            index: info.index,
            name: info.name.clone(),
            uuid: info.device_uuid.clone(),
            pci_address: info.pci_address.clone(),
            vram_bytes,
            heap_bytes,
            workloads: steps,
        });
    }
    Ok(Plan {
        profile: opts.profile.clone(),
        duration_s: opts.duration.map(|d| d.as_secs_f64()),
        notes,
        devices: plans,
    })
}

fn shape_name(shape: &crate::workload::compute::LoadShape) -> String {
    match shape {
        crate::workload::compute::LoadShape::Steady => "steady".to_owned(),
        crate::workload::compute::LoadShape::Pulsed { on_ms, off_ms } => {
            format!("pulsed ({on_ms} ms on / {off_ms} ms off)")
        }
        crate::workload::compute::LoadShape::Sweep => "swept 10%..100%".to_owned(),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.2}", crate::units::to_gib(bytes))
}

/// The plan for people.
pub fn plan_summary(plan: &Plan) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "plan: profile {}, {} device(s) in parallel, {}",
        plan.profile,
        plan.devices.len(),
        match plan.duration_s {
            Some(s) => format!("about {s:.0} s per device plus start-up"),
            None => "no time budget: each workload runs its passes".into(),
        }
    );
    for note in &plan.notes {
        let _ = writeln!(out, "note: {note}");
    }
    for d in &plan.devices {
        let _ = writeln!(
            out,
            "GPU{} {} ({}){}",
            d.index,
            d.name,
            d.pci_address.as_deref().unwrap_or("no PCI address"),
            match (d.vram_bytes, d.heap_bytes) {
                (Some(v), Some(h)) => format!(": {} of {} GiB of VRAM to test", gib(v), gib(h)),
                _ => String::new(),
            }
        );
        for s in &d.workloads {
            let _ = writeln!(
                out,
                "  {:<9} {}{}",
                s.workload.as_str(),
                s.budget_s
                    .map(|b| format!("~{b:.0} s: "))
                    .unwrap_or_default(),
                s.detail
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(util: Option<f64>, temp: Option<f64>) -> Readings {
        let mut r = Readings::new();
        if let Some(u) = util {
            r.insert("util_gpu_pct".into(), Reading::Number(u));
        }
        if let Some(t) = temp {
            r.insert("gpu_temp_c".into(), Reading::Number(t));
        }
        r.insert("power_w".into(), Reading::Number(300.0));
        r
    }

    #[test]
    fn idleness_reads_utilisation_and_temperature() {
        assert_eq!(idleness(None), Idleness::Unknown);
        assert_eq!(idleness(Some(&readings(None, None))), Idleness::Unknown);
        assert_eq!(
            idleness(Some(&readings(Some(0.0), Some(34.0)))),
            Idleness::Idle
        );
        assert_eq!(idleness(Some(&readings(None, Some(40.0)))), Idleness::Idle);
        assert_eq!(
            idleness(Some(&readings(Some(97.0), Some(71.0)))),
            Idleness::Busy("97% busy, 71 °C".into())
        );
        assert_eq!(
            idleness(Some(&readings(Some(2.0), Some(63.0)))),
            Idleness::Busy("63 °C".into()),
            "an idle card still hot from the last workload is not ready"
        );
    }
}
