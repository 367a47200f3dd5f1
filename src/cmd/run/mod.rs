//! `kiln run`: select the devices, start the telemetry, test every device at once (each
//! in a worker process of its own), then judge the run directory and write the reports.
//! [`run`] reads top to bottom in that order; each step's detail lives in its own module:
//! the worker processes in [`supervisor`] (parent side), [`worker`] (device side) and
//! [`protocol`] (what they say to each other), `--wait-idle` in [`idle`] and `--dry-run`
//! in [`plan`].

mod idle;
mod options;
mod plan;
mod progress;
pub mod protocol;
mod supervisor;
pub mod worker;

pub use idle::{COOL_TEMP_C, IDLE_UTIL_PCT, Idleness, WAIT_IDLE_MAX, idleness};
pub use options::options;
pub use plan::{
    DevicePlan, Plan, PlannedStep, check_duration, check_sizes, dry_run, least_duration,
    plan_summary,
};
pub use worker::main_if_worker;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::cmd::cli::RunArgs;
use crate::cmd::edge::{print_report, print_result, publish_run_metrics, textfile_dir_usable};
use crate::error::AppError;
use crate::evidence::{
    Event, EventSink, EventWriter, EvidenceError, EvidenceFile, JsonlWriter, Manifest, RunDir,
    RunSettings, utc_timestamp,
};
use crate::exit_code;
use crate::gpu::DeviceInfo;
use crate::select::{Selection, select_for_run};
use crate::telemetry;
use crate::telemetry::record::{Boundary, Readings, TelemetryData};
use crate::telemetry::sidecar::{RealClock, Sidecar};
use crate::telemetry::summary::{OBSERVED, PREFLIGHT};
use crate::thresholds::Thresholds;
use crate::verdict::Report;
use crate::workload::registry::PlannedWorkload;

/// Everything `kiln run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The profile the plan came from (bundled name or path), for the manifest.
    pub profile: String,
    /// The file the profile was read from (None: kiln's built-in copy).
    pub profile_file: Option<PathBuf>,
    /// The profile's own time budget, for the manifest.
    pub profile_duration: Option<Duration>,
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
    /// A recorded telemetry file replayed instead of the live sources.
    pub telemetry_replay: Option<PathBuf>,
}

/// Signals received during a run: the first stops the workloads at their next step, the
/// second ends the run at once.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

/// How many signals this run (or watch) has received.
pub fn signals_received() -> usize {
    SIGNALS.load(Ordering::SeqCst)
}

/// How long kiln may take to end after a second signal (the run's own answer: its workers
/// killed, the interrupted verdict and its reports written) before it ends at once: a
/// wait that never looks at the signals (a driver that does not answer, a file system that
/// hangs) must not make kiln deaf to them.
const SECOND_SIGNAL_PATIENCE: Duration = Duration::from_secs(10);

/// Counts SIGINT, SIGTERM and SIGHUP from now on, instead of dying of them: installed first
/// thing in a run (by `kiln run` before it reads its profile, and by [`run`] for any other
/// caller), so that a signal at any moment (choosing the devices, the preflight) ends in an
/// interrupted verdict and its reports. Every wait is bounded all the same: after a second
/// signal kiln ends within [`SECOND_SIGNAL_PATIENCE`] whatever it is waiting on, and at a
/// third at once. Installing it again changes nothing.
pub fn catch_signals() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        // One handler per process; one that cannot be installed leaves the default
        // action, which ends the run with no report, as before any run. The handler runs
        // on a thread of its own, so it can end the process while the main thread waits.
        let _ = ctrlc::set_handler(|| {
            let n = SIGNALS.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 2 {
                std::thread::spawn(|| {
                    std::thread::sleep(SECOND_SIGNAL_PATIENCE);
                    end_now(&format!(
                        "a second signal went unanswered for {} s: ended at once (`kiln verdict` rebuilds the report from the run directory, if one was made)",
                        SECOND_SIGNAL_PATIENCE.as_secs()
                    ));
                });
            } else if n >= 3 {
                end_now("a third signal: ended at once (`kiln verdict` rebuilds the report from the run directory, if one was made)");
            }
        });
    });
}

/// Ends kiln now, saying why, as an interrupted run ends (inconclusive).
fn end_now(why: &str) {
    eprintln!("kiln: {why}");
    std::process::exit(crate::exit_code::INCONCLUSIVE);
}

/// What the run records when a signal came before any workload started.
const INTERRUPTED_BEFORE_WORK: &str =
    "interrupted by a signal before any workload started: nothing was tested";

/// The bound on each wait for the device, from the one asked for (flag or profile) and the
/// step timeout: a wait must end below the watchdog's patience, so that a device that stops
/// answering is recorded by its own timeout (what it was waiting for) rather than as a hang.
/// Unasked, it is the default or half the step timeout, whichever is shorter; asked at or
/// above the step timeout, it could never fire, and is refused with the sentence why.
pub fn fence_timeout_for(
    asked: Option<Duration>,
    step_timeout: Duration,
) -> Result<Duration, String> {
    match asked {
        Some(fence) if fence >= step_timeout => Err(format!(
            "the fence timeout ({:.1} s) must be shorter than the step timeout ({:.1} s): the watchdog would abandon a device before any wait for it could time out",
            fence.as_secs_f64(),
            step_timeout.as_secs_f64()
        )),
        Some(fence) => Ok(fence),
        None => Ok(crate::gpu::DEFAULT_FENCE_TIMEOUT.min(step_timeout / 2)),
    }
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
    catch_signals();
    let started = Instant::now();
    let started_utc = utc_timestamp(SystemTime::now());
    let Selection {
        devices,
        stand_in,
        mut not_tested,
        mut notes,
    } = select_for_run(&opts.devices, crate::select::Job::Test)?;
    // What the user asked of each device must fit it: refused before anything starts.
    check_sizes(&devices, &opts.plan)?;
    let slots = slots(devices, opts.test_hooks.replicate);
    let infos: Vec<DeviceInfo> = slots.iter().map(|(_, info)| info.clone()).collect();
    let observed = observe_untestable(&infos, &mut not_tested);
    // A run directory that cannot be made, or is another run's, is the user's choice to
    // fix: a usage error. One of kiln's own naming is never another run's.
    let run_dir =
        RunDir::create_at(opts.out.as_deref()).map_err(|e| AppError::Usage(e.to_string()))?;
    let settings = RunSettings {
        profile: Some(opts.profile.clone()),
        duration_s: opts.duration.map(|d| d.as_secs_f64()),
        profile_duration_s: opts.profile_duration.map(|d| d.as_secs_f64()),
        fence_timeout_s: Some(opts.fence_timeout.as_secs_f64()),
        step_timeout_s: Some(opts.step_timeout.as_secs_f64()),
        telemetry_interval_s: opts.telemetry_interval.map(|d| d.as_secs_f64()),
        stop_on_first_failure: opts.stop_on_first_failure,
        plan: serde_json::to_value(&opts.plan).ok(),
        workloads: None,
        watch: None,
        thresholds: Some(opts.thresholds.clone()),
    };
    // Nothing to watch when no device can be tested or observed.
    let telemetry_interval = opts
        .telemetry_interval
        .filter(|_| !infos.is_empty() || !observed.is_empty());
    let mut manifest = Manifest::new(infos.clone(), settings, started_utc);
    manifest.stand_in = stand_in;
    manifest.not_tested = not_tested;
    manifest.evidence = Some(EvidenceFile::written_by(telemetry_interval.is_some()));
    run_dir.write_manifest(&manifest)?;
    let mut events = run_dir.events(started)?;
    let latest = Latest::default();
    let mut latest_from = None;
    let sidecar = match telemetry_interval {
        Some(interval) => {
            let mut targets: Vec<telemetry::Target> =
                infos.iter().map(telemetry::Target::from).collect();
            targets.extend(observed.iter().cloned());
            let (sidecar, readings, telemetry_notes) =
                start_telemetry(&run_dir, &targets, interval, started, &opts.test_hooks)?;
            notes.extend(telemetry_notes);
            latest_from = Some(readings);
            Some(sidecar)
        }
        None if infos.is_empty() => None,
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
    // At a terminal the notes come before the bars, when they matter (the CPU device
    // standing in for a GPU is worth knowing before the wait, not after it).
    if opts.progress {
        use std::io::Write;
        let mut stderr = std::io::stderr().lock();
        for note in &notes {
            let _ = writeln!(stderr, "note: {note}");
        }
    }
    if let Some(s) = &sidecar {
        preflight(s, &infos, &observed, telemetry_interval.unwrap_or_default());
    }
    let latest = latest_from.unwrap_or(latest);
    if opts.wait_idle && !infos.is_empty() && signals_received() == 0 {
        idle::wait_until_idle(&infos, &latest, &mut events, opts.progress);
    }
    if signals_received() > 0 {
        events.emit(
            None,
            Event::Interrupted {
                message: INTERRUPTED_BEFORE_WORK.into(),
            },
        );
    } else if !slots.is_empty() {
        supervisor::supervise(opts, &slots, &mut events, sidecar.as_ref(), &latest)?;
    }
    if let Some(s) = sidecar {
        // What the run did to the GPUs it could only observe: their counters at its end.
        for o in &observed {
            s.snapshot(Some(o.index), OBSERVED, Boundary::After);
        }
        s.stop();
    }
    let notes_said = if opts.progress { notes.len() } else { 0 };
    finish(&run_dir, &mut events, started, notes_said)
}

/// The end of a run (or a watch): its run directory judged, the `run_end` record written
/// with the verdict's exit code, and the reports. The run's own evidence unreadable is a
/// run that could not be judged, not a usage error.
pub(crate) fn finish(
    run_dir: &RunDir,
    events: &mut EventWriter,
    started: Instant,
    notes_said: usize,
) -> Result<Report, AppError> {
    // The run is judged by the thresholds its manifest recorded, as any rebuild of it is.
    let evidence = crate::rundir::RunEvidence::read(run_dir.path())
        .map_err(|e| AppError::Start(format!("the run's evidence could not be read back: {e}")))?;
    // What the run knows at its end that its directory does not hold yet.
    let live = crate::verdict::LiveEnd {
        wall_s: started.elapsed().as_secs_f64(),
        finished_utc: utc_timestamp(SystemTime::now()),
        notes: events
            .check()
            .err()
            .map(|e| format!("some evidence could not be written: {e}"))
            .into_iter()
            .collect(),
        notes_said,
    };
    let report = crate::verdict::judge_evidence(&evidence, None, Some(live))
        .map_err(|e| AppError::Start(format!("the run's evidence could not be judged: {e}")))?;
    events.emit(
        None,
        Event::RunEnd {
            exit_code: report.exit_code,
            result: report.result.word().to_lowercase(),
        },
    );
    crate::report::write_all(&evidence, &report).map_err(|e| {
        AppError::Evidence(EvidenceError::File(crate::fsutil::FileError::Io {
            path: run_dir.path().to_owned(),
            message: crate::text::io_words(&e),
        }))
    })?;
    Ok(report)
}

/// Before any load: the counters (ECC, remaps, retired pages, replays, AER) and a second of
/// idle samples (throttle reasons, clocks, temperature, power at rest) as a phase of its
/// own, `preflight`, so that what was wrong before kiln touched the card is told apart from
/// what its load did. The identity (driver, other processes) and the Xid history were read
/// when the sidecar started. A signal cuts the idle second short (the counters are still
/// read after it).
///
/// A GPU the run can only observe has the same preflight, then one phase, `observed`, from
/// its end to the run's.
fn preflight(
    sidecar: &Sidecar,
    devices: &[DeviceInfo],
    observed: &[telemetry::Target],
    interval: Duration,
) {
    let indices: Vec<usize> = devices
        .iter()
        .map(|d| d.index)
        .chain(observed.iter().map(|o| o.index))
        .collect();
    for &i in &indices {
        sidecar.snapshot(Some(i), PREFLIGHT, Boundary::Before);
    }
    let idle_until = Instant::now() + (interval * 3).max(Duration::from_secs(1));
    while Instant::now() < idle_until && signals_received() == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    for &i in &indices {
        sidecar.snapshot(Some(i), PREFLIGHT, Boundary::After);
    }
    for o in observed {
        sidecar.snapshot(Some(o.index), OBSERVED, Boundary::Before);
    }
}

/// The GPUs Vulkan cannot see that the run can still observe: a compute-only accelerator
/// (AMD Instinct) that no Vulkan driver drives has its RAS counters, sensors and link read
/// all run long, under the next free device indices, each recorded in its `NotTested`.
/// A GPU that Vulkan would see once its cause is fixed (a driver missing) is not watched:
/// its test, not its telemetry, is what to come back for.
fn observe_untestable(
    infos: &[DeviceInfo],
    not_tested: &mut [crate::evidence::NotTested],
) -> Vec<telemetry::Target> {
    let mut next = infos.iter().map(|d| d.index + 1).max().unwrap_or(0);
    let mut observed = Vec::new();
    for n in not_tested.iter_mut().filter(|n| n.gpu.compute_only) {
        let Some(pci_address) = n.gpu.pci_address.clone() else {
            continue;
        };
        n.observed_as = Some(next);
        observed.push(telemetry::Target {
            index: next,
            name: n.gpu.name.clone(),
            uuid: n.gpu.uuid.clone(),
            pci_address: Some(pci_address),
            nvml_index: n.gpu.nvml_index,
            luid: None,
        });
        next += 1;
    }
    observed
}

/// Starts the sidecar writing `telemetry.jsonl`; returns it and the facts about what
/// cannot be read here.
pub(crate) fn start_telemetry(
    run_dir: &RunDir,
    devices: &[telemetry::Target],
    interval: Duration,
    started: Instant,
    hooks: &TestHooks,
) -> Result<(Sidecar, Latest, Vec<String>), AppError> {
    let (sources, notes) = match &hooks.telemetry_replay {
        Some(path) => {
            let replay = telemetry::replay::ReplaySource::open(path)
                .map_err(|e| AppError::Usage(e.to_string()))?;
            (
                vec![Box::new(replay) as Box<dyn telemetry::Source>],
                Vec::new(),
            )
        }
        None => telemetry::live_sources_for(devices),
    };
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
                let entry = map.entry(d).or_insert((0, Readings::new()));
                *entry = (entry.0 + 1, readings.clone());
            }
            out.append(&record)
        }),
    )
    .map_err(|e| AppError::Start(format!("could not start the telemetry thread: {e}")))?;
    Ok((sidecar, latest, notes))
}

/// Each device's latest telemetry sample and how many it has had, for deciding when it
/// is idle and for a power target's loop (which takes every new sample, even one that
/// reads the same as the last).
pub(crate) type Latest = Arc<Mutex<BTreeMap<usize, (u64, Readings)>>>;

/// `kiln run`.
pub fn command(args: RunArgs) -> Result<i32, AppError> {
    // From the first moment: a signal while the profile, the baseline or the devices are
    // read gives an interrupted verdict, not a run killed before it wrote anything.
    catch_signals();
    let opts = prepare(&args)?;
    if args.dry_run {
        let plan = dry_run(&opts)?;
        print_result(args.json, &plan, &plan_summary(&plan));
        return Ok(exit_code::HEALTHY);
    }
    let (report, text, code) = tested(&args, &opts)?;
    print_report(args.json, &report, &text);
    Ok(code)
}

/// Everything `kiln run` checks before it starts: the profile with the flags laid over
/// it and the devices they select, the textfile directory, and the baseline (one that
/// cannot be compared is a usage error now, not a finished run that quietly skipped the
/// comparison). The run's options, or the one sentence that refuses them.
pub fn prepare(args: &RunArgs) -> Result<RunOptions, AppError> {
    use std::io::IsTerminal;
    let profile =
        crate::profile::load(&args.profile).map_err(|e| AppError::Usage(e.to_string()))?;
    let opts = options(args, profile, std::io::stderr().is_terminal())?;
    // A textfile directory that cannot take the metrics is found now, not hours later.
    if let Some(dir) = &args.textfile_dir {
        textfile_dir_usable(dir)?;
    }
    if let Some(base) = &args.baseline {
        crate::verdict::rebuild(base, None)
            .map_err(|e| AppError::Usage(format!("--baseline {}: {e}", base.display())))?;
    }
    Ok(opts)
}

/// Runs the test `opts` describes and judges it: the report, its summary (with the
/// baseline's comparison and where the metrics went) and the exit code.
pub(crate) fn tested(args: &RunArgs, opts: &RunOptions) -> Result<(Report, String, i32), AppError> {
    let report = run(opts)?;
    let mut text = crate::report::terminal::summary(
        &report,
        crate::report::terminal::Style {
            verbose: args.verbose,
            notes_said: report.notes_said,
        },
    );
    let mut code = report.exit_code;
    if let Some(base) = &args.baseline {
        let run_dir = std::path::Path::new(&report.run_dir);
        match crate::cmd::compare::compare(base, run_dir, 0.10) {
            Ok(c) => {
                text.push_str(&crate::cmd::compare::summary(&c));
                if let Err(e) =
                    crate::evidence::write_json_atomic(&run_dir.join("compare.json"), &c)
                {
                    text.push_str(&format!("compare.json not written: {e}\n"));
                }
                // The verdict stands; a regression against the baseline fails a pass.
                if code == exit_code::HEALTHY {
                    code = c.exit_code;
                }
            }
            Err(e) => {
                text.push_str(&format!(
                    "baseline not compared: {e}; the run cannot pass what it was asked to check\n"
                ));
                if code == exit_code::HEALTHY {
                    code = exit_code::INCONCLUSIVE;
                }
            }
        }
    }
    if let Some(dir) = &args.textfile_dir {
        text.push_str(&publish_run_metrics(
            dir,
            std::path::Path::new(&report.run_dir),
        ));
    }
    Ok((report, text, code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wait_for_the_device_ends_below_the_watchdogs_patience() {
        let s = Duration::from_secs;
        // Unasked: the default, or half a short step timeout.
        assert_eq!(fence_timeout_for(None, s(30)), Ok(s(10)));
        assert_eq!(
            fence_timeout_for(None, s(3)),
            Ok(Duration::from_millis(1500))
        );
        // Asked below the step timeout: as asked.
        assert_eq!(fence_timeout_for(Some(s(20)), s(30)), Ok(s(20)));
        // At or above it, it could never fire: refused, saying why.
        for asked in [s(30), s(60)] {
            let why = fence_timeout_for(Some(asked), s(30)).unwrap_err();
            assert!(
                why.contains("must be shorter than the step timeout (30.0 s)"),
                "{why}"
            );
        }
    }
}
