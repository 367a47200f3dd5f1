//! The `kiln` binary: parse the command line, call the library, map the outcome to an
//! exit code (see the README's table).

#![deny(unsafe_code)]

use std::io::IsTerminal;

use kiln::cli::{
    BenchArgs, Cli, Command, CompareArgs, HealthArgs, ListArgs, MonitorArgs, ReportArgs, RunArgs,
    SelftestArgs, VerdictArgs, WatchArgs,
};
use kiln::error::AppError;
use kiln::verdict::exit_code;
use kiln::workload::vram::engine::AccessLayout;

fn main() {
    kiln::run::main_if_worker();
    // Test only: KILN_TEST_DOUBLE_CLICKED takes the double-click's path from a script,
    // whose console is never kiln's own.
    if std::env::args_os().len() == 1
        && (kiln::platform::console::opened_for_kiln()
            || std::env::var_os("KILN_TEST_DOUBLE_CLICKED").is_some())
    {
        std::process::exit(double_clicked());
    }
    let cli = match Cli::from_env() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                std::process::exit(0);
            }
            // Whole, and with any value it echoes cut to a sane length.
            say_error(&kiln::cli::usage_sentence(&e.render().to_string()));
            std::process::exit(exit_code::USAGE);
        }
    };
    let code = match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            say_error(&sentence_of(&e));
            e.exit_code()
        }
    };
    std::process::exit(code);
}

/// A failed command's one sentence: for a GPU that Vulkan cannot reach, why, per GPU.
fn sentence_of(e: &AppError) -> String {
    match e {
        AppError::Gpu(g) => kiln::select::explain_for_gpus(g).unwrap_or_else(|| e.to_string()),
        e => e.to_string(),
    }
}

/// Writes to stdout. A reader that has gone away (`kiln list --json | head -1`) is not
/// an error of kiln's: the rest of the output is dropped and the command ends with its
/// own exit code, without a panic.
fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// Writes to stderr, quietly dropping what a closed stderr cannot take.
fn err(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The one sentence of a failed command, with any runaway word (a 100 kB argument echoed
/// back by a parser) cut to a sane length.
fn say_error(sentence: &str) {
    const LONGEST: usize = 200;
    let words: Vec<String> = sentence
        .split(' ')
        .map(|w| {
            let n = w.chars().count();
            if n > LONGEST {
                format!(
                    "{}... ({n} characters)",
                    w.chars().take(60).collect::<String>()
                )
            } else {
                w.to_owned()
            }
        })
        .collect();
    err(&format!("kiln: {}\n", words.join(" ")));
}

fn dispatch(command: Command) -> Result<i32, AppError> {
    match command {
        Command::List(args) => list(args),
        Command::Run(args) => run(*args),
        Command::Selftest(args) => selftest(args),
        Command::Bench(args) => bench(args),
        Command::Monitor(args) => monitor(args),
        Command::Watch(args) => watch(*args),
        Command::Verdict(args) => verdict(args),
        Command::Report(args) => report(args),
        Command::Health(args) => health(args),
        Command::Compare(args) => compare(args),
        Command::Completions(args) => {
            out(&kiln::completions::completions(
                &kiln::cli::Cli::definition(),
                args.shell,
            ));
            Ok(exit_code::HEALTHY)
        }
        Command::Man => {
            out(&kiln::completions::man_page(&kiln::cli::Cli::definition()));
            Ok(exit_code::HEALTHY)
        }
    }
}

fn list(args: ListArgs) -> Result<i32, AppError> {
    use kiln::inventory::{System, VulkanState};
    let system = System::from_env();
    let inventory = kiln::inventory::read(&system);
    let (devices, missing) = match kiln::gpu::Vulkan::new().and_then(|v| v.devices()) {
        Ok(devices) => {
            let missing =
                kiln::select::not_visible(&system, &inventory, &devices, &VulkanState::Started);
            (devices, missing)
        }
        // GPUs that Vulkan cannot reach at all: each is named with its cause, and the
        // listing could not show what was asked (exit 4).
        Err(e) if !inventory.gpus.is_empty() => {
            let state = kiln::select::vulkan_state(&e);
            let missing = kiln::select::not_visible(&system, &inventory, &[], &state);
            err(&kiln::list::not_visible(&missing));
            if args.json {
                out("[]\n");
            }
            return Ok(exit_code::INCONCLUSIVE);
        }
        Err(e) => return Err(e.into()),
    };
    let nvml = kiln::telemetry::nvml::NvmlSource::new(&devices);
    if args.json {
        out(&format!("{}\n", kiln::list::json(&devices, &nvml)));
        err(&kiln::list::not_visible(&missing));
    } else {
        out(&kiln::list::table(&devices, &nvml));
        out(&kiln::list::not_visible(&missing));
    }
    Ok(exit_code::HEALTHY)
}

fn watch(args: WatchArgs) -> Result<i32, AppError> {
    use kiln::watch::{Target, WatchOptions};
    kiln::run::catch_signals();
    let target = match (args.pid, args.command.is_empty()) {
        (Some(pid), true) => {
            if args.iteration.is_some() {
                return Err(AppError::Usage(
                    "--iteration reads the application's output, which kiln has only for a command it starts (kiln watch -- CMD): leave it out with --pid".into(),
                ));
            }
            Target::Pid(pid)
        }
        (None, false) => Target::Command(args.command),
        _ => {
            return Err(AppError::Usage(
                "say what to watch: a command after `--` (kiln watch -- python train.py) or a running process (--pid PID)".into(),
            ));
        }
    };
    let opts = WatchOptions {
        target,
        devices: args.devices,
        interval: args.interval,
        iteration: args.iteration,
        trace: !args.no_trace,
        alert_share: args.alert.map(|p| p / 100.0),
        on_alert: args.on_alert,
        out: args.out,
        thresholds: thresholds(&args.thresholds)?,
        live: std::io::stderr().is_terminal(),
    };
    let report = kiln::watch::watch(&opts)?;
    let text = kiln::report::text::summary(
        &report,
        kiln::report::text::Style {
            verbose: args.verbose,
            notes_said: report.notes_said,
        },
    );
    // The application's output is stdout's: the verdict goes to stderr, and the report
    // to stdout only when asked.
    err(&text);
    if args.json {
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ));
    }
    Ok(report.exit_code)
}

fn run(args: RunArgs) -> Result<i32, AppError> {
    // From the first moment: a signal while the profile, the baseline or the devices are
    // read gives an interrupted verdict, not a run killed before it wrote anything.
    kiln::run::catch_signals();
    let profile = kiln::profile::load(&args.profile).map_err(|e| AppError::Usage(e.to_string()))?;
    let opts = kiln::run::options(&args, profile, std::io::stderr().is_terminal())?;
    // A textfile directory that cannot take the metrics is found now, not hours later.
    if let Some(dir) = &args.textfile_dir {
        textfile_dir_usable(dir)?;
    }
    // A baseline is judged before the test starts: one that cannot be compared is a usage
    // error now, not a finished run that quietly skipped the comparison.
    if let Some(base) = &args.baseline {
        kiln::verdict::rebuild(base, &Default::default())
            .map_err(|e| AppError::Usage(format!("--baseline {}: {e}", base.display())))?;
    }
    if args.dry_run {
        let plan = kiln::run::dry_run(&opts)?;
        print_result(args.json, &plan, &kiln::run::plan_summary(&plan));
        return Ok(exit_code::HEALTHY);
    }
    let (report, text, code) = tested(&args, &opts)?;
    print_report(args.json, &report, &text);
    Ok(code)
}

/// Runs the test `opts` describes and judges it: the report, its summary (with the
/// baseline's comparison and where the metrics went) and the exit code.
fn tested(
    args: &RunArgs,
    opts: &kiln::run::RunOptions,
) -> Result<(kiln::verdict::Report, String, i32), AppError> {
    let report = kiln::run::run(opts)?;
    let mut text = kiln::report::text::summary(
        &report,
        kiln::report::text::Style {
            verbose: args.verbose,
            notes_said: report.notes_said,
        },
    );
    let mut code = report.exit_code;
    if let Some(base) = &args.baseline {
        let run_dir = std::path::Path::new(&report.run_dir);
        match kiln::compare::compare(base, run_dir, 0.10) {
            Ok(c) => {
                text.push_str(&kiln::compare::summary(&c));
                if let Err(e) = kiln::evidence::write_json_atomic(&run_dir.join("compare.json"), &c)
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

/// kiln started from Explorer with no arguments (a buyer double-clicking kiln.exe): the
/// quick check of every GPU, the verdict in plain words, where the report is, and a
/// window that stays open until Enter (or `o` and Enter, to see the report first).
fn double_clicked() -> i32 {
    out(
        "kiln checks every GPU in this computer, about a minute each. Close games and other GPU programs meanwhile.\n\n",
    );
    let run = || -> Result<(kiln::verdict::Report, i32), AppError> {
        kiln::run::catch_signals();
        // Test only: flags added to the quick check (a smaller one under Wine).
        let extra = std::env::var("KILN_TEST_DOUBLE_CLICK_ARGS").unwrap_or_default();
        let words = ["kiln", "run"].into_iter().chain(extra.split_whitespace());
        let args = match Cli::from_args(words).map(|c| c.command) {
            Ok(Command::Run(args)) => *args,
            _ => {
                return Err(AppError::Usage(
                    "the quick check could not be set up".into(),
                ));
            }
        };
        let profile =
            kiln::profile::load(&args.profile).map_err(|e| AppError::Usage(e.to_string()))?;
        let opts = kiln::run::options(&args, profile, std::io::stderr().is_terminal())?;
        let (report, text, code) = tested(&args, &opts)?;
        print_report(false, &report, &text);
        Ok((report, code))
    };
    let (code, page) = match run() {
        Ok((report, code)) => {
            out(&format!(
                "\n{}",
                kiln::report::text::in_plain_words(&report, code)
            ));
            let page = std::path::Path::new(&report.run_dir).join("report.html");
            (code, page.is_file().then_some(page))
        }
        Err(e) => {
            say_error(&sentence_of(&e));
            (e.exit_code(), None)
        }
    };
    if page.is_some() {
        out("\nPress Enter to close this window, or type o and Enter to open the report first.\n");
    } else {
        out("\nPress Enter to close this window.\n");
    }
    let mut answer = String::new();
    let _ = std::io::stdin().read_line(&mut answer);
    if let Some(page) = page
        && answer.trim().eq_ignore_ascii_case("o")
        && let Err(e) = kiln::platform::browser::open(&page)
    {
        say_error(&format!(
            "the report could not be opened ({e}): it is {}",
            page.display()
        ));
        let _ = std::io::stdin().read_line(&mut answer);
    }
    code
}

/// Refuses a `--textfile-dir` that is not a directory, as a usage error.
fn textfile_dir_usable(dir: &std::path::Path) -> Result<(), AppError> {
    kiln::report::check_textfile_dir(dir).map_err(AppError::Usage)
}

/// Copies a run's metrics into node_exporter's textfile directory; says in a line where
/// they went or why they did not (the run's own verdict stands either way).
fn publish_run_metrics(textfile_dir: &std::path::Path, run_dir: &std::path::Path) -> String {
    let file = kiln::report::METRICS_FILE;
    let published = std::fs::read(run_dir.join(file))
        .map_err(|e| format!("{}: {e}", run_dir.join(file).display()))
        .and_then(|bytes| kiln::report::publish_metrics(textfile_dir, file, &bytes));
    match published {
        Ok(path) => format!("metrics: {}\n", path.display()),
        Err(e) => format!("metrics not published: {e}\n"),
    }
}

fn compare(args: CompareArgs) -> Result<i32, AppError> {
    let c = kiln::compare::compare(&args.before, &args.after, args.tolerance / 100.0)
        .map_err(|e| AppError::Usage(e.to_string()))?;
    print_result(args.json, &c, &kiln::compare::summary(&c));
    Ok(c.exit_code)
}

fn health(args: HealthArgs) -> Result<i32, AppError> {
    if let Some(dir) = &args.textfile_dir {
        textfile_dir_usable(dir)?;
    }
    let h = kiln::health::check(&kiln::health::HealthOptions {
        expect_gpus: args.expect_gpus,
        state: args.state,
        runs: args.runs,
        max_age: args.max_age,
        replay: args.telemetry_replay,
        only_nvml: args.gpus,
        clear: args.clear,
    })
    .map_err(|e| AppError::Usage(e.to_string()))?;
    if args.json {
        // JSON alone, so that `kiln health --json | jq .` works: the line is its `line`.
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&h).unwrap_or_default()
        ));
    } else {
        out(&kiln::health::summary(&h));
    }
    if let Some(dir) = &args.textfile_dir {
        let now = std::time::SystemTime::now();
        let metrics = kiln::health::metrics(&h, &kiln::evidence::hostname(), now);
        // stdout stays the check's alone: a problem publishing goes to stderr, and the
        // node's health decides the exit code.
        if let Err(e) = kiln::report::publish_metrics(dir, "kiln-health.prom", metrics.as_bytes()) {
            err(&format!("kiln: metrics not published: {e}\n"));
        }
    }
    Ok(h.exit_code)
}

fn selftest(args: SelftestArgs) -> Result<i32, AppError> {
    let opts = kiln::selftest::SelftestOptions {
        devices: args.devices,
        faults: args.faults,
        runs: args.runs,
        bytes: args.vram_bytes,
        seed: args.seed,
        fence_timeout: kiln::gpu::DEFAULT_FENCE_TIMEOUT,
    };
    let report = kiln::selftest::selftest(&opts)?;
    let text = kiln::selftest::summary(&report);
    print_result(args.json, &report, &text);
    Ok(if report.passed {
        exit_code::HEALTHY
    } else {
        exit_code::SOFTWARE
    })
}

fn bench(args: BenchArgs) -> Result<i32, AppError> {
    // Each benchmark takes its own options; one given to another would be ignored.
    for (set, flag, only) in [
        (args.bytes.is_some(), "--bytes", &["vram"][..]),
        (args.repeat.is_some(), "--repeat", &["vram"]),
        (args.layout.is_some(), "--layout", &["vram"]),
        (
            args.duration.is_some(),
            "--duration",
            &["compute", "matrix", "telemetry"],
        ),
        (
            args.interval.is_some(),
            "--interval",
            &["telemetry", "watch"],
        ),
        (args.runs.is_some(), "--runs", &["watch"]),
        (!args.command.is_empty(), "a command", &["watch"]),
    ] {
        if set && !only.contains(&args.what.as_str()) {
            return Err(AppError::Usage(format!(
                "{flag} applies to `kiln bench {}`, not `kiln bench {}`: it would be ignored",
                only.join("` and `kiln bench "),
                args.what
            )));
        }
    }
    if args.what == "matrix" {
        let (device, report, notes) =
            kiln::bench::bench_matrix(&kiln::bench::ComputeBenchOptions {
                device: args.device,
                duration: args.duration.unwrap_or(std::time::Duration::from_secs(6)),
                fence_timeout: kiln::gpu::DEFAULT_FENCE_TIMEOUT,
            })?;
        let mut text: String = notes.iter().map(|n| format!("note: {n}\n")).collect();
        text.push_str(&format!("device {device}\n"));
        text.push_str(&kiln::workload::matrix::bench_summary(&report));
        print_result(args.json, &report, &text);
        return Ok(if report.faults == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::HARDWARE
        });
    }
    if args.what == "watch" {
        let report = kiln::watch::bench::bench(
            &args.command,
            args.runs.unwrap_or(5) as usize,
            args.interval.unwrap_or(std::time::Duration::from_secs(1)),
        )?;
        print_result(args.json, &report, &kiln::watch::bench::summary(&report));
        return Ok(exit_code::HEALTHY);
    }
    if args.what == "telemetry" {
        let report =
            kiln::bench_telemetry::bench_telemetry(&kiln::bench_telemetry::TelemetryBenchOptions {
                duration: args.duration.unwrap_or(std::time::Duration::from_secs(10)),
                interval: args.interval.unwrap_or(kiln::telemetry::DEFAULT_INTERVAL),
            });
        print_result(args.json, &report, &kiln::bench_telemetry::summary(&report));
        // Missed ticks are the sidecar's own failure to keep up: software.
        return Ok(if report.missed_ticks == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::SOFTWARE
        });
    }
    if args.what == "pcie" {
        let report = kiln::bench::bench_pcie(args.device, kiln::gpu::DEFAULT_FENCE_TIMEOUT)?;
        print_result(args.json, &report, &kiln::bench::pcie_summary(&report));
        return Ok(if report.corrupted == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::HARDWARE
        });
    }
    if args.what == "compute" {
        let report = kiln::bench::bench_compute(&kiln::bench::ComputeBenchOptions {
            device: args.device,
            duration: args.duration.unwrap_or(std::time::Duration::from_secs(5)),
            fence_timeout: kiln::gpu::DEFAULT_FENCE_TIMEOUT,
        })?;
        print_result(args.json, &report, &kiln::bench::compute_summary(&report));
        return Ok(if report.faults == 0 {
            exit_code::HEALTHY
        } else {
            exit_code::HARDWARE
        });
    }
    let opts = kiln::bench::BenchOptions {
        device: args.device,
        bytes: args.bytes.unwrap_or(kiln::units::GIB),
        repeat: args.repeat.unwrap_or(5),
        layout: args.layout.map(AccessLayout::from),
        fence_timeout: kiln::gpu::DEFAULT_FENCE_TIMEOUT,
    };
    let report = kiln::bench::bench_vram(&opts)?;
    print_result(args.json, &report, &kiln::bench::summary(&report));
    Ok(exit_code::HEALTHY)
}

fn monitor(args: MonitorArgs) -> Result<i32, AppError> {
    kiln::monitor::monitor(&kiln::monitor::MonitorOptions {
        devices: args.devices,
        interval: args.interval,
        duration: args.duration,
        json: args.json,
        redraw: std::io::stdout().is_terminal(),
    })
}

fn verdict(args: VerdictArgs) -> Result<i32, AppError> {
    if let Some(dir) = &args.textfile_dir {
        textfile_dir_usable(dir)?;
    }
    let mut report = kiln::verdict::rebuild(&args.run_dir, &thresholds(&args.thresholds)?)
        .map_err(|e| AppError::Usage(e.to_string()))?;
    // The rebuilt reports join the evidence (atomically); a read-only directory keeps its own.
    if let Err(e) = kiln::report::write_all(&args.run_dir, &report) {
        report
            .notes
            .push(format!("the rebuilt report could not be saved: {e}"));
    }
    let mut text = kiln::report::text::summary(
        &report,
        kiln::report::text::Style {
            verbose: args.verbose,
            notes_said: 0,
        },
    );
    if let Some(dir) = &args.textfile_dir {
        text.push_str(&publish_run_metrics(dir, &args.run_dir));
    }
    print_report(args.json, &report, &text);
    Ok(report.exit_code)
}

fn thresholds(
    path: &Option<std::path::PathBuf>,
) -> Result<kiln::verdict::thresholds::Thresholds, AppError> {
    match path {
        Some(p) => kiln::verdict::thresholds::Thresholds::load(p).map_err(AppError::Usage),
        None => Ok(Default::default()),
    }
}

fn report(args: ReportArgs) -> Result<i32, AppError> {
    let report = kiln::verdict::rebuild(&args.run_dir, &Default::default())
        .map_err(|e| AppError::Usage(e.to_string()))?;
    kiln::report::write_all(&args.run_dir, &report).map_err(|e| {
        AppError::Usage(format!(
            "{}: the reports could not be written: {e}",
            args.run_dir.display()
        ))
    })?;
    if args.rma {
        // The page printed for the desk, where a browser can print it; its absence is
        // said, never fatal: the page itself carries everything.
        let pdf = args.run_dir.join("report.pdf");
        let _ = std::fs::remove_file(&pdf);
        if let Err(why) = kiln::report::pdf::print(&args.run_dir.join("report.html"), &pdf) {
            err(&format!("kiln: {why}\n"));
        }
        let path = kiln::report::rma::bundle(&args.run_dir, args.bundle.as_deref())
            .map_err(|e| AppError::Usage(format!("the RMA bundle could not be written: {e}")))?;
        out(&format!("RMA bundle: {}\n", path.display()));
        // The bundle is written: that is what this command was asked for. The card's own
        // result is in the bundle (and in `kiln verdict`'s exit code), and a failing card
        // is exactly the one whose bundle is wanted.
        return Ok(exit_code::HEALTHY);
    }
    out(&format!("reports rebuilt in {}\n", args.run_dir.display()));
    Ok(report.exit_code)
}

/// Prints a run's report as [`print_result`] does, its result words coloured where the
/// summary goes to a terminal that wants colour.
fn print_report(json: bool, report: &kiln::verdict::Report, summary: &str) {
    use std::io::IsTerminal;
    let terminal = if json {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    if terminal && kiln::report::text::colour_wanted() {
        print_result(json, report, &kiln::report::text::coloured(report, summary));
    } else {
        print_result(json, report, summary);
    }
}

/// Prints a command's result: with `--json` the JSON on stdout and the summary on stderr,
/// else the summary on stdout.
fn print_result<T: serde::Serialize>(json: bool, value: &T, summary: &str) {
    if json {
        err(summary);
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ));
    } else {
        out(summary);
    }
}
