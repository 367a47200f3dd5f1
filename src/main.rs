//! The `kiln` binary: parse the command line, call the library, map the outcome to an
//! exit code (see the README's table).

use std::io::IsTerminal;

use clap::Parser;
use kiln::cli::{
    BenchArgs, Cli, Command, ListArgs, MonitorArgs, ReportArgs, RunArgs, SelftestArgs, VerdictArgs,
};
use kiln::report::exit_code;
use kiln::run::AppError;
use kiln::workload::vram::VramConfig;
use kiln::workload::vram::algorithm::{self, Algorithm};
use kiln::workload::vram::engine::AccessLayout;

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                std::process::exit(0);
            }
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or("invalid command line");
            let sentence = first.trim_start_matches("error: ");
            eprintln!("kiln: {sentence} (see `kiln --help`)");
            std::process::exit(exit_code::USAGE);
        }
    };
    let code = match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kiln: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}

fn dispatch(command: Command) -> Result<i32, AppError> {
    match command {
        Command::List(args) => list(args),
        Command::Run(args) => run(*args),
        Command::Selftest(args) => selftest(args),
        Command::Bench(args) => bench(args),
        Command::Monitor(args) => monitor(args),
        Command::Verdict(args) => verdict(args),
        Command::Report(args) => report(args),
    }
}

fn list(args: ListArgs) -> Result<i32, AppError> {
    let vulkan = kiln::gpu::Vulkan::new()?;
    let devices = vulkan.devices()?;
    let nvml = kiln::telemetry::nvml::NvmlSource::new(&devices);
    if args.json {
        println!("{}", kiln::list::json(&devices, &nvml));
    } else {
        print!("{}", kiln::list::table(&devices, &nvml));
    }
    Ok(exit_code::HEALTHY)
}

fn layout(name: &Option<String>) -> Option<AccessLayout> {
    name.as_deref().and_then(AccessLayout::parse)
}

fn run(args: RunArgs) -> Result<i32, AppError> {
    let algorithms = match &args.algorithms {
        Some(list) => Algorithm::parse_list(list).map_err(AppError::Usage)?,
        None => algorithm::DEFAULT.to_vec(),
    };
    // A pass count alone means "exactly that many passes"; otherwise about a minute.
    let duration = match (args.duration, args.passes) {
        (Some(d), _) => Some(d),
        (None, Some(_)) => None,
        (None, None) => Some(std::time::Duration::from_secs(60)),
    };
    let vram = VramConfig {
        algorithms,
        bytes: args.vram.vram_bytes,
        percent: args.vram.vram_percent,
        reserve_bytes: args.vram.reserve,
        passes: args.passes,
        record_capacity: args.records,
        retest_cap: args.retest_cap,
        retention_delay: args.retention_delay,
        seed: args.seed.unwrap_or_else(|| VramConfig::default().seed),
        layout: layout(&args.vram.layout),
        max_buffer_bytes: args.vram.max_buffer,
        ..VramConfig::default()
    };
    let workloads =
        kiln::run::WorkloadName::parse_list(&args.workloads).map_err(AppError::Usage)?;
    let compute = kiln::workload::compute::ComputeConfig {
        shape: match args.load.as_str() {
            "pulsed" => kiln::workload::compute::LoadShape::Pulsed {
                on_ms: 100,
                off_ms: 100,
            },
            "sweep" => kiln::workload::compute::LoadShape::Sweep,
            _ => kiln::workload::compute::LoadShape::Steady,
        },
        rounds: args.passes.map(|p| p * 2),
        ..Default::default()
    };
    let opts = kiln::run::RunOptions {
        devices: args.devices,
        duration,
        workloads,
        vram,
        compute,
        pcie: kiln::workload::pcie::PcieConfig {
            max_bytes: args.pcie_max_bytes,
            ..Default::default()
        },
        fragment: Default::default(),
        out: args.out,
        fence_timeout: args.vram.fence_timeout,
        progress: std::io::stderr().is_terminal(),
        telemetry_interval: (!args.telemetry_interval.is_zero()).then_some(args.telemetry_interval),
        thresholds: thresholds(&args.thresholds)?,
    };
    let report = kiln::run::run(&opts)?;
    let text = kiln::report::text::summary(&report);
    print_result(args.json, &report, &text);
    Ok(report.exit_code)
}

fn selftest(args: SelftestArgs) -> Result<i32, AppError> {
    let opts = kiln::selftest::SelftestOptions {
        devices: args.devices,
        faults: args.faults,
        runs: args.runs,
        bytes: args.vram_bytes,
        seed: args.seed,
        fence_timeout: std::time::Duration::from_secs(10),
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
    if args.what == "pcie" {
        let report = kiln::bench::bench_pcie(args.device, std::time::Duration::from_secs(10))?;
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
            duration: args.duration,
            fence_timeout: std::time::Duration::from_secs(10),
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
        bytes: args.bytes,
        repeat: args.repeat,
        layout: layout(&args.layout),
        fence_timeout: std::time::Duration::from_secs(10),
    };
    let report = kiln::bench::bench_vram(&opts)?;
    print_result(args.json, &report, &kiln::bench::summary(&report));
    Ok(exit_code::HEALTHY)
}

fn monitor(args: MonitorArgs) -> Result<i32, AppError> {
    if args.interval.is_zero() {
        return Err(AppError::Usage(
            "--interval must be longer than zero".into(),
        ));
    }
    kiln::monitor::monitor(&kiln::monitor::MonitorOptions {
        devices: args.devices,
        interval: args.interval,
        duration: args.duration,
        json: args.json,
        redraw: std::io::stdout().is_terminal(),
    })
}

fn verdict(args: VerdictArgs) -> Result<i32, AppError> {
    let mut report = kiln::verdict::rebuild(&args.run_dir, &thresholds(&args.thresholds)?)
        .map_err(|e| AppError::Usage(e.to_string()))?;
    // The rebuilt reports join the evidence (atomically); a read-only directory keeps its own.
    if let Err(e) = kiln::report::write_all(&args.run_dir, &report) {
        report
            .notes
            .push(format!("the rebuilt report could not be saved: {e}"));
    }
    let text = kiln::report::text::summary(&report);
    print_result(args.json, &report, &text);
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
        let path = kiln::report::rma::bundle(&args.run_dir, args.bundle.as_deref())
            .map_err(|e| AppError::Usage(format!("the RMA bundle could not be written: {e}")))?;
        println!("RMA bundle: {}", path.display());
    } else {
        println!("reports rebuilt in {}", args.run_dir.display());
    }
    Ok(report.exit_code)
}

/// Prints a command's result: with `--json` the JSON on stdout and the summary on stderr,
/// else the summary on stdout.
fn print_result<T: serde::Serialize>(json: bool, value: &T, summary: &str) {
    if json {
        eprint!("{summary}");
        println!(
            "{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        );
    } else {
        print!("{summary}");
    }
}
