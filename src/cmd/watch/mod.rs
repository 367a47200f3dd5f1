//! `kiln watch`: is it the card or the software? The same shape as `kiln run`, with the
//! user's application in place of kiln's workloads: select the devices, start the
//! telemetry, start the application (or find the running one) with kiln's layer in its
//! environment, record its processes, iterations, failures and allocations as they
//! happen, and when it ends judge the run directory ([`crate::verdict`]) and write the
//! reports. [`watch`] reads top to bottom in that order; the application's side is in
//! [`app`], the allocation trace's in [`trace`], and ending it at an interrupt in [`stop`].

pub mod app;
mod live;
pub mod stop;
pub mod trace;

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant, SystemTime};

use regex::Regex;

use crate::error::AppError;
use crate::evidence::{
    AppFailure, Event, EventSink, EventWriter, EvidenceFile, Manifest, RunDir, RunSettings,
    WatchSettings, utc_timestamp,
};
use crate::platform::process;
use crate::select::{Selection, select_for_run};
use crate::telemetry::record::Boundary;
use crate::thresholds::Thresholds;
use crate::verdict::Report;
use app::{Heard, Launch, Listener};

/// What to watch.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start this command (`kiln watch -- CMD ARGS`).
    Command(Vec<String>),
    /// Attach to this running process and its children (`--pid`).
    Pid(u32),
}

/// Everything `kiln watch` was asked to do.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    /// The application.
    pub target: Target,
    /// Device selectors (default: every GPU).
    pub devices: Vec<String>,
    /// How often the application's memory and the device are read.
    pub interval: Duration,
    /// An iteration's line of output.
    pub iteration: Option<Regex>,
    /// Inject kiln's layer for the allocation trace.
    pub trace: bool,
    /// Share of the budget at which to alert (0..1).
    pub alert_share: Option<f64>,
    /// The command run once when the alert fires (`sh -c`).
    pub on_alert: Option<String>,
    /// Run directory.
    pub out: Option<PathBuf>,
    /// Thresholds of the verdict rules.
    pub thresholds: Thresholds,
    /// Show the live line (only when stderr is a terminal).
    pub live: bool,
}

/// The phase the telemetry of a watch is summarised as.
pub const WATCH_PHASE: &str = "watch";

/// How long the watch waits for the application's output to drain after it ended (a
/// child it left behind may hold the pipe open).
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// Watches the application until it ends, writes the run directory and returns the
/// verdict.
pub fn watch(opts: &WatchOptions) -> Result<Report, AppError> {
    crate::cmd::run::catch_signals();
    let started = Instant::now();
    let started_utc = utc_timestamp(SystemTime::now());
    let started_unix_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let proc_root = process::proc_root();
    // What is to be watched must be there before anything is made.
    match &opts.target {
        Target::Command(command) => {
            let program = command.first().ok_or_else(|| {
                AppError::Usage("no command to watch: give one after `--`, or --pid".into())
            })?;
            if crate::platform::process::find_program(program).is_none() {
                return Err(AppError::Usage(format!(
                    "cannot start {}: no such program (not a runnable file, nor on PATH)",
                    crate::text::quote(program)
                )));
            }
        }
        Target::Pid(pid) => {
            if !process::alive(&proc_root, *pid) {
                return Err(AppError::Usage(format!(
                    "--pid {pid}: no such process is running (it may have ended already)"
                )));
            }
        }
    }
    let Selection {
        devices,
        stand_in,
        not_tested,
        mut notes,
    } = select_for_run(&opts.devices, crate::select::Job::Watch)?;
    let run_dir =
        RunDir::create_at(opts.out.as_deref()).map_err(|e| AppError::Usage(e.to_string()))?;
    let (command, pid) = match &opts.target {
        Target::Command(c) => (c.clone(), None),
        Target::Pid(p) => (Vec::new(), Some(*p)),
    };
    // Only an application kiln starts can carry its layer.
    let layer = match (&opts.target, opts.trace) {
        (Target::Command(_), true) => match trace::layer_library() {
            Ok(lib) => Some(lib),
            Err(why) => {
                notes.push(why);
                None
            }
        },
        (Target::Pid(_), true) => {
            notes.push("no allocation trace: kiln can load its layer only into an application it starts (kiln watch -- CMD)".into());
            None
        }
        (_, false) => {
            notes.push("no allocation trace (--no-trace): the application's memory is read from the driver alone".into());
            None
        }
    };
    let settings = RunSettings {
        telemetry_interval_s: Some(opts.interval.as_secs_f64()),
        watch: Some(WatchSettings {
            command: command.clone(),
            pid,
            interval_s: opts.interval.as_secs_f64(),
            iteration: opts.iteration.as_ref().map(|r| r.as_str().to_owned()),
            trace: layer.is_some(),
            alert_share: opts.alert_share,
            loader_environment: LOADER_VARIABLES
                .iter()
                .filter_map(|k| {
                    let v = std::env::var(k).ok().filter(|v| !v.is_empty())?;
                    Some(((*k).to_owned(), v))
                })
                .collect(),
        }),
        thresholds: Some(opts.thresholds.clone()),
        ..RunSettings::default()
    };
    let telemetry_on = !devices.is_empty();
    let mut manifest = Manifest::new(devices.clone(), settings, started_utc);
    manifest.stand_in = stand_in;
    manifest.not_tested = not_tested;
    let mut files = EvidenceFile::written_by(telemetry_on);
    if layer.is_some() {
        files.push(EvidenceFile::Trace);
    }
    manifest.evidence = Some(files);
    run_dir.write_manifest(&manifest)?;
    let mut events = run_dir.events(started)?;
    for d in &devices {
        events.emit(
            Some(d.index),
            Event::DeviceStart {
                info: Box::new(d.clone()),
            },
        );
    }
    let (sidecar, latest) = if telemetry_on {
        let targets: Vec<crate::telemetry::Target> =
            devices.iter().map(crate::telemetry::Target::from).collect();
        let (s, latest, telemetry_notes) = crate::cmd::run::start_telemetry(
            &run_dir,
            &targets,
            opts.interval,
            started,
            &crate::cmd::run::TestHooks::default(),
        )?;
        notes.extend(telemetry_notes);
        (Some(s), Some(latest))
    } else {
        (None, None)
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
        for d in &devices {
            s.snapshot(Some(d.index), WATCH_PHASE, Boundary::Before);
        }
    }
    let mut tracer = match &layer {
        Some(lib) => Some(trace::Tracer::start(run_dir.path(), lib, started_unix_ns)?),
        None => None,
    };
    let live = live::Live::new(opts.live, &notes);
    let (heard_tx, heard) = channel();
    let listener = Listener::new(opts.iteration.clone());
    let (mut child, root, output) = match &opts.target {
        Target::Command(command) => {
            let mut env = tracer.as_ref().map(trace::Tracer::env).unwrap_or_default();
            // Python buffers its output when it goes to a pipe: iterations would be
            // marked late, and the last lines before a crash lost.
            if std::env::var_os("PYTHONUNBUFFERED").is_none() {
                env.push(("PYTHONUNBUFFERED".into(), "1".into()));
            }
            let launch = Launch {
                command: command.clone(),
                env,
            };
            let show = live.printer();
            let (child, threads) =
                app::start(&launch, &listener, &heard_tx, show).map_err(|e| {
                    AppError::Usage(format!(
                        "cannot start {}: {e}",
                        crate::text::quote(&command.join(" "))
                    ))
                })?;
            let pid = child.id();
            (Some(child), pid, threads)
        }
        Target::Pid(pid) => (None, *pid, Vec::new()),
    };
    drop(heard_tx);
    events.emit(
        None,
        Event::AppStart {
            command,
            pid: root,
            attached: child.is_none(),
        },
    );
    let mut state = Watching {
        root,
        known: vec![root],
        iterations: 0,
        alerted: false,
        killed: None,
        last_error: None,
        libraries: Vec::new(),
    };
    let mut next_tick = Instant::now();
    // Only an application kiln started is ever asked to stop, or killed.
    let mut stopping: Option<stop::Stop> = None;
    let ending = loop {
        state.listen(&heard, &mut events, Duration::from_millis(50));
        let end = state.ended(&mut child, &proc_root);
        match (stopping.as_mut(), child.as_mut()) {
            (Some(s), Some(c)) => {
                // Asked to stop: the watch ends when nothing of it runs any more.
                if s.follow(&proc_root, root, end.is_some()) {
                    break end;
                }
                if s.due() {
                    state.killed = s.kill(&proc_root, c, end.is_some());
                    break end.or_else(|| stop::reaped(c));
                }
            }
            _ if end.is_some() => break end,
            _ => {}
        }
        if crate::cmd::run::signals_received() > 0 && stopping.is_none() {
            events.emit(
                None,
                Event::Interrupted {
                    message:
                        "interrupted by a signal while the application ran: the watch ends with it"
                            .into(),
                },
            );
            if child.is_some() {
                stopping = Some(stop::Stop::ask(&proc_root, root));
            } else {
                break None;
            }
        }
        if let Some(t) = tracer.as_mut() {
            t.drain_if_behind(started.elapsed().as_secs_f64() * 1e3);
        }
        if Instant::now() >= next_tick {
            // On the interval's grid, unless a tick ran over it: then from now.
            next_tick = (next_tick + opts.interval).max(Instant::now());
            state.tick(&proc_root, &mut events);
            if let Some(t) = tracer.as_mut() {
                t.drain(false, started.elapsed().as_secs_f64() * 1e3);
            }
            let now = live::Now::read(latest.as_ref(), &state.known, tracer.as_ref(), &devices);
            live.show(&now, state.iterations, started.elapsed());
            if let (Some(share), Some(budget)) = (opts.alert_share, now.budget_bytes)
                && !state.alerted
                && now.app_bytes as f64 >= share * budget as f64
            {
                state.alerted = true;
                events.emit(
                    None,
                    Event::Alert {
                        share: now.app_bytes as f64 / budget as f64,
                        bytes: now.app_bytes,
                        budget_bytes: budget,
                    },
                );
                if let Some(cmd) = &opts.on_alert {
                    live::run_alert(cmd, root, now.app_bytes, budget, run_dir.path());
                }
            }
        }
    };
    match (ending, state.killed.take()) {
        (Some(end), killed) => events.emit(
            None,
            Event::AppEnd {
                exit_code: end.code,
                signal: end.signal,
                killed,
            },
        ),
        (None, Some(killed)) => events.emit(
            None,
            Event::Note {
                message: stop::not_reaped(&killed),
            },
        ),
        (None, None) => {}
    }
    // What the application said last is the evidence of how it ended.
    let waited = Instant::now();
    while output.iter().any(|t| !t.is_finished()) && waited.elapsed() < OUTPUT_GRACE {
        state.listen(&heard, &mut events, Duration::from_millis(20));
    }
    state.listen(&heard, &mut events, Duration::ZERO);
    if let Some(line) = state.last_error.take() {
        events.emit(
            None,
            Event::AppSaid {
                failure: AppFailure::Error,
                line,
            },
        );
    }
    if let Some(t) = tracer.as_mut() {
        t.drain(ending.is_some(), started.elapsed().as_secs_f64() * 1e3);
        t.finish(&mut events);
    }
    if let Some(s) = &sidecar {
        for d in &devices {
            s.snapshot(Some(d.index), WATCH_PHASE, Boundary::After);
        }
    }
    if let Some(s) = sidecar {
        s.stop();
    }
    live.clear();
    // The notes were said above the live line already, when there was one.
    let said = if opts.live { notes.len() } else { 0 };
    crate::cmd::run::finish(&run_dir, &mut events, started, said)
}

/// The Vulkan loader's variables that decide which driver an application opens and which
/// layers load: recorded with the watch, for why the trace may have seen nothing.
const LOADER_VARIABLES: [&str; 5] = [
    "VK_DRIVER_FILES",
    "VK_ICD_FILENAMES",
    "VK_ADD_DRIVER_FILES",
    "VK_LOADER_DRIVERS_SELECT",
    "VK_LOADER_LAYERS_DISABLE",
];

/// The watch's own state between ticks.
struct Watching {
    /// The application's first process.
    root: u32,
    /// Every process of it seen so far.
    known: Vec<u32>,
    /// Iterations marked so far.
    iterations: u64,
    /// `--alert` has fired.
    alerted: bool,
    /// The processes of the application kiln killed when they did not stop as asked.
    killed: Option<crate::evidence::Killed>,
    /// The last line of its output that said an error, written at its end.
    last_error: Option<String>,
    /// The GPU libraries each of its processes was seen to load.
    libraries: Vec<(u32, String)>,
}

impl Watching {
    /// Records what the application's output said, waiting at most `wait` for the first.
    fn listen(&mut self, heard: &Receiver<Heard>, events: &mut EventWriter, wait: Duration) {
        let mut first = heard.recv_timeout(wait).ok();
        while let Some(h) = first.take().or_else(|| heard.try_recv().ok()) {
            match h {
                Heard::Iteration(line) => {
                    self.iterations += 1;
                    events.emit(
                        None,
                        Event::Iteration {
                            n: self.iterations,
                            line,
                        },
                    );
                }
                Heard::Failure(failure, line) => {
                    events.emit(None, Event::AppSaid { failure, line });
                }
                Heard::Error(line) => self.last_error = Some(line),
            }
        }
    }

    /// How the application ended, once it has.
    fn ended(
        &mut self,
        child: &mut Option<std::process::Child>,
        proc_root: &std::path::Path,
    ) -> Option<process::Ending> {
        match child {
            Some(c) => match c.try_wait() {
                Ok(Some(status)) => Some(process::ending(status)),
                Ok(None) => None,
                // It cannot be asked about: it is gone as far as the watch can tell.
                Err(_) => Some(process::Ending {
                    code: None,
                    signal: None,
                }),
            },
            // Not kiln's child: how it ended is not kiln's to know.
            None => (!process::alive(proc_root, self.root)).then_some(process::Ending {
                code: None,
                signal: None,
            }),
        }
    }

    /// Records the application's processes that appeared since the last tick.
    fn tick(&mut self, proc_root: &std::path::Path, events: &mut EventWriter) {
        let new: Vec<u32> = process::descendants(proc_root, self.root)
            .into_iter()
            .filter(|p| !self.known.contains(p))
            .collect();
        if !new.is_empty() {
            self.known.extend(&new);
            events.emit(None, Event::AppProcesses { pids: new });
        }
        // The GPU libraries each process loaded, as they appear.
        for pid in self.known.clone() {
            let Some(names) = process::libraries(proc_root, pid) else {
                continue;
            };
            let fresh: Vec<String> = crate::evidence::gpu_apis::gpu_libraries(&names)
                .into_iter()
                .map(|(_, n)| n)
                .filter(|n| !self.libraries.contains(&(pid, n.clone())))
                .collect();
            if !fresh.is_empty() {
                self.libraries
                    .extend(fresh.iter().map(|n| (pid, n.clone())));
                events.emit(
                    None,
                    Event::AppLibraries {
                        pid,
                        libraries: fresh,
                    },
                );
            }
        }
    }
}

/// `kiln watch`.
pub fn command(args: crate::cmd::cli::WatchArgs) -> Result<i32, AppError> {
    use std::io::IsTerminal;
    crate::cmd::run::catch_signals();
    let (target, thresholds) = check(&args)?;
    let opts = WatchOptions {
        target,
        devices: args.devices,
        interval: args.interval,
        iteration: args.iteration,
        trace: !args.no_trace,
        alert_share: args.alert.map(|p| p / 100.0),
        on_alert: args.on_alert,
        out: args.out,
        thresholds,
        live: std::io::stderr().is_terminal(),
    };
    let report = watch(&opts)?;
    let text = crate::report::terminal::summary(
        &report,
        crate::report::terminal::Style {
            verbose: args.verbose,
            notes_said: report.notes_said,
        },
    );
    // The application's output is stdout's: the verdict goes to stderr, and the report
    // to stdout only when asked.
    crate::cmd::edge::err(&text);
    if args.json {
        crate::cmd::edge::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ));
    }
    Ok(report.exit_code)
}

/// What `kiln watch` checks before it starts: what to watch, and the thresholds to judge
/// it by.
pub fn check(
    args: &crate::cmd::cli::WatchArgs,
) -> Result<(Target, crate::thresholds::Thresholds), AppError> {
    Ok((
        target(args)?,
        crate::cmd::edge::thresholds(&args.thresholds)?,
    ))
}

/// What `kiln watch` was asked to watch: a command after `--` or a running process,
/// never both or neither.
pub fn target(args: &crate::cmd::cli::WatchArgs) -> Result<Target, AppError> {
    match (args.pid, args.command.is_empty()) {
        (Some(pid), true) => {
            if args.iteration.is_some() {
                return Err(AppError::Usage(
                    "--iteration reads the application's output, which kiln has only for a command it starts (kiln watch -- CMD): leave it out with --pid".into(),
                ));
            }
            Ok(Target::Pid(pid))
        }
        (None, false) => Ok(Target::Command(args.command.clone())),
        _ => Err(AppError::Usage(
            "say what to watch: a command after `--` (kiln watch -- python train.py) or a running process (--pid PID)".into(),
        )),
    }
}
