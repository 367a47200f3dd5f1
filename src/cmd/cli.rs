//! Command-line definitions (clap) and the parsers of their values, bounded as the profile
//! keys are (sizes and durations are read by `units`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::limits::{Bounds, bounds};
use crate::text::quote;
use crate::units::{parse_duration, parse_size};

/// kiln: prove a GPU good or bad.
#[derive(Debug, Parser)]
#[command(name = "kiln", version = crate::VERSION, about = "GPU stress and health diagnostics", long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// The command line's definition, with the exit codes after `kiln --help`, as a
    /// scheduler's author needs them without the manual.
    pub fn definition() -> clap::Command {
        use clap::CommandFactory;
        use std::fmt::Write as _;
        let mut codes = String::from("Exit codes:\n");
        for (code, meaning) in crate::exit_code::MEANINGS {
            let _ = writeln!(codes, "  {code:>2}  {meaning}");
        }
        Self::command().after_help(codes.trim_end().to_owned())
    }

    /// Parses the process's arguments against [`Cli::definition`].
    pub fn from_env() -> Result<Self, clap::Error> {
        Self::from_args(std::env::args_os())
    }

    /// Parses these arguments (the program's name first), as the command line would be.
    pub fn from_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::FromArgMatches;
        let matches = Self::definition().try_get_matches_from(args)?;
        Self::from_arg_matches(&matches)
    }
}

/// clap's rendered error as one line, whole: the arguments it lists, its "did you mean",
/// and the usage it shows, so that a script's log keeps all of it on the line it greps.
pub fn usage_sentence(rendered: &str) -> String {
    let mut head = String::new();
    let mut listed = Vec::new();
    let mut tips = Vec::new();
    let mut usage = None;
    for line in rendered.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with("For more information") {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("error: ") {
            head = rest.to_owned();
        } else if let Some(tip) = trimmed.strip_prefix("tip: ") {
            tips.push(match tip.split_once(" exists: ") {
                Some((_, candidates)) => format!("did you mean {candidates}?"),
                None => tip.to_owned(),
            });
        } else if let Some(u) = trimmed.strip_prefix("Usage: ") {
            usage = Some(u.to_owned());
        } else if head.is_empty() {
            head = trimmed.to_owned();
        } else {
            listed.push(trimmed.to_owned());
        }
    }
    let mut sentence = head.trim_end_matches(':').to_owned();
    if !listed.is_empty() {
        sentence = format!("{sentence}: {}", listed.join(", "));
    }
    for tip in tips {
        sentence = format!("{sentence}; {tip}");
    }
    if let Some(hint) = hint_for(&head, usage.as_deref()) {
        sentence = format!("{sentence}; {hint}");
    }
    match usage {
        Some(u) => format!("{sentence} (usage: {u})"),
        None => format!("{sentence} (see `kiln --help`)"),
    }
}

/// What a newcomer most likely meant by a word clap did not take: a profile's name given
/// as a word (`kiln run burn-in`, `kiln burn-in`), or a command to watch without the `--`
/// before it (`kiln watch python train.py`).
fn hint_for(head: &str, usage: Option<&str>) -> Option<String> {
    let word = head.split('\'').nth(1)?;
    let profile = crate::profile::BUNDLED
        .iter()
        .any(|(name, _)| *name == word);
    let command = usage.unwrap_or("");
    if profile && (head.starts_with("unrecognized subcommand") || command.starts_with("kiln run")) {
        return Some(format!("a profile runs with `kiln run --profile {word}`"));
    }
    if head.starts_with("unexpected argument")
        && command.starts_with("kiln watch")
        && !word.starts_with('-')
    {
        return Some(format!(
            "the command to watch goes after `--` (`kiln watch -- {word} ...`)"
        ));
    }
    None
}

/// `--load`: the compute load's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoadArg {
    /// Full load throughout.
    Steady,
    /// 100 ms on, 100 ms off.
    Pulsed,
    /// Load levels from 10% to 100%.
    Sweep,
}

/// `--layout`: how the VRAM test's invocations map onto memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutArg {
    /// Each invocation its own contiguous run (best on CPU devices).
    Contiguous,
    /// Neighbouring invocations on neighbouring addresses (best on GPUs).
    Coalesced,
}

/// kiln's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the Vulkan devices with identity, memory and limits.
    List(ListArgs),
    /// Test devices and keep the evidence (default: every GPU, VRAM, compute and PCIe,
    /// about a minute).
    Run(Box<RunArgs>),
    /// Plant known faults and check that every one is found exactly, and nothing else.
    Selftest(SelftestArgs),
    /// Measure throughput against the device's own copy and fill bandwidth.
    Bench(BenchArgs),
    /// Watch every device's telemetry live (a refreshing table, or JSON lines).
    Monitor(MonitorArgs),
    /// Run an application (`kiln watch -- CMD ARGS`) or attach to one (`--pid`), record
    /// its GPU memory and the card around it, and say whether a failure was the card's,
    /// the machine's or the software's (a leak, a step over the limit, fragmentation).
    Watch(Box<WatchArgs>),
    /// Rebuild the verdict and report of a recorded run from its run directory alone
    /// (also one cut short by a crash or a kill).
    Verdict(VerdictArgs),
    /// Rebuild a run's reports; with --rma, bundle them with the raw evidence for a
    /// vendor's support desk.
    Report(ReportArgs),
    /// A node check for schedulers in seconds, with no load: ECC, remaps, retired pages,
    /// new Xids, the PCIe link, the GPU count, the driver, and the last full run. The
    /// first line of stdout is one message with a stable fault code.
    Health(HealthArgs),
    /// Read logs people already have (dmesg, journalctl -k, nvidia-bug-report.log.gz, an
    /// application's output; FILEs, or standard input) and explain every GPU failure in
    /// them: what it is, whose fault, what to do. Exit code: the gravest class found.
    Explain(ExplainArgs),
    /// What changed between two runs of the same cards: new findings, rates that
    /// drifted, lifetime error counters that grew (devices matched by UUID or serial).
    Compare(CompareArgs),
    /// Floors per product and rate from a fleet's run directories (its healthy cards'
    /// median, less their spread), written as a thresholds file; with --judge, the cards
    /// across every node given that fall behind them (exit 2).
    Baseline(BaselineArgs),
    /// Print the shell completion script for bash, zsh or fish (generated from these
    /// definitions): `source <(kiln completions bash)`.
    Completions(CompletionsArgs),
    /// Print kiln's man page (roff, generated from these definitions):
    /// `kiln man > kiln.1; man -l kiln.1`.
    Man,
}

/// `kiln completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: crate::cmd::completions::Shell,
}

/// `kiln explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Log files to read (`.gz` too); none, or `-`, reads standard input.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Print `{"explained": [...]}` on stdout, one object per failure.
    #[arg(long)]
    pub json: bool,
}

/// `kiln compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The earlier run directory (a burn-in).
    pub before: PathBuf,
    /// The later run directory.
    pub after: PathBuf,
    /// A rate may move this much before it counts, in percent.
    #[arg(long, value_name = "PERCENT", default_value = "10", value_parser = parse_percent)]
    pub tolerance: f64,
    /// Print the comparison as JSON on stdout (the summary goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `kiln baseline`.
#[derive(Debug, Args)]
pub struct BaselineArgs {
    /// Run directories, or folders holding them (a shared folder of every node's runs).
    #[arg(required = true, value_name = "RUNS")]
    pub runs: Vec<PathBuf>,
    /// Write the floors here, as a thresholds file (`kiln run --thresholds FILE`).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// List the cards, across every run given, behind their product's floor (exit 2 when
    /// any).
    #[arg(long)]
    pub judge: bool,
    /// Judge the runs against the floors in this thresholds file (a baseline written
    /// before), not against floors built from the runs themselves.
    #[arg(long, value_name = "FILE")]
    pub against: Option<PathBuf>,
    /// Print the baseline as JSON on stdout (the summary goes to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `kiln health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The number of GPUs this node should have.
    #[arg(long, value_name = "N", value_parser = gpu_count)]
    pub expect_gpus: Option<usize>,
    /// Keep the last check's Xid position and counters here, so that only what is new
    /// since then counts (without it, every Xid since boot counts).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Where full runs are kept (default ./kiln-runs).
    #[arg(long, value_name = "DIR")]
    pub runs: Option<PathBuf>,
    /// The last full run must be younger than this (e.g. 7d or 168h) and a pass.
    #[arg(long, value_name = "DURATION", value_parser = max_age)]
    pub max_age: Option<Duration>,
    /// Only these GPUs, by NVML index, comma-separated (a Slurm job's SLURM_JOB_GPUS);
    /// faults of the node as a whole still count.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub gpus: Option<Vec<u32>>,
    /// Clear open faults (every fault event stays open until cleared or until a full run
    /// passes after it): a fault code such as KILN-XID-079, or `all`; needs --state, and
    /// with --gpus clears only those GPUs' faults. Who and when go into the state file.
    #[arg(long, value_name = "CODE|all")]
    pub clear: Option<String>,
    /// Print the check as JSON on stdout, and nothing else there.
    #[arg(long)]
    pub json: bool,
    /// Also write the metrics into node_exporter's textfile directory (its
    /// --collector.textfile.directory), atomically: kiln-health.prom (beside a run's kiln.prom) in DIR.
    #[arg(long, value_name = "DIR")]
    pub textfile_dir: Option<PathBuf>,
    /// Read a recorded telemetry file instead of the live sources.
    #[arg(long, value_name = "FILE", hide = true)]
    pub telemetry_replay: Option<PathBuf>,
}

/// `kiln report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Write `<run>-rma.tar`: report.html, report.json, the raw evidence and SHA256SUMS.
    #[arg(long)]
    pub rma: bool,
    /// Where to write the bundle (default: beside the run directory).
    #[arg(long, value_name = "FILE", requires = "rma")]
    pub bundle: Option<PathBuf>,
}

/// `kiln verdict`.
#[derive(Debug, Args)]
pub struct VerdictArgs {
    /// The run directory.
    pub run_dir: PathBuf,
    /// Verdict thresholds to override (JSON).
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// Print the report as JSON on stdout (the summary goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write the metrics into node_exporter's textfile directory (its
    /// --collector.textfile.directory), atomically: kiln.prom in DIR.
    #[arg(long, value_name = "DIR")]
    pub textfile_dir: Option<PathBuf>,
    /// Say every measurement, every run's lines, every phase's telemetry and every note
    /// in the summary.
    #[arg(short, long)]
    pub verbose: bool,
}

/// `kiln watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Attach to this running process and its children instead of starting a command.
    #[arg(long, value_name = "PID", conflicts_with = "command")]
    pub pid: Option<u32>,
    /// How often the application's memory and the device are read.
    #[arg(long, value_name = "DURATION", value_parser = sample_interval, default_value = "1s")]
    pub interval: Duration,
    /// A line of the application's output that starts an iteration (a regular
    /// expression, e.g. 'step \d+'); without it, iterations are found from the memory's
    /// own period.
    #[arg(long, value_name = "REGEX", value_parser = iteration_pattern)]
    pub iteration: Option<regex::Regex>,
    /// Do not load kiln's Vulkan layer into the application (no allocation trace).
    #[arg(long)]
    pub no_trace: bool,
    /// Alert when the application's memory reaches this share of the budget ("85%").
    #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
    pub alert: Option<f64>,
    /// The command to run once at the alert (`sh -c`; KILN_WATCH_PID, KILN_WATCH_BYTES,
    /// KILN_WATCH_BUDGET_BYTES and KILN_RUN_DIR in its environment).
    #[arg(long, value_name = "CMD", requires = "alert")]
    pub on_alert: Option<String>,
    /// Device, by index, UUID or PCI address; repeat for several (default: every GPU).
    #[arg(long = "device", value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Run directory (default ./kiln-runs/<UTC time>-<host>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the report as JSON on stdout at the end (the summary goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Say every note and measurement in the summary.
    #[arg(short, long)]
    pub verbose: bool,
    /// Verdict thresholds to override (JSON; each threshold is listed in docs/guide.md).
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// The application and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `kiln monitor`.
#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// Device, by index, UUID or PCI address; repeat for several (default: every GPU).
    #[arg(long = "device", value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Sampling interval.
    #[arg(long, value_name = "DURATION", value_parser = sample_interval, default_value = "1s")]
    pub interval: Duration,
    /// Stop after this long (default: until Ctrl+C).
    #[arg(long, value_name = "DURATION", value_parser = monitor_duration)]
    pub duration: Option<Duration>,
    /// Print every telemetry record as a JSON line on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `kiln list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// A Python interpreter or environment directory whose installed frameworks (PyTorch,
    /// JAX, onnxruntime-gpu, TensorFlow) are checked against each GPU, beside those on
    /// PATH; repeatable. Their files are read, never run.
    #[arg(long = "python", value_name = "PATH")]
    pub python: Vec<std::path::PathBuf>,
}

/// Options shared by every command that tests memory.
#[derive(Debug, Args, Clone)]
pub struct VramArgs {
    /// Bytes of VRAM to test per device (e.g. 512MiB, 8GiB, 2GB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with = "vram_percent")]
    pub vram_bytes: Option<u64>,
    /// Percentage of the free VRAM to test per device.
    #[arg(long, value_name = "PERCENT", value_parser = vram_percent)]
    pub vram_percent: Option<f64>,
    /// Free VRAM to leave untested (default: the larger of 256 MiB and 2% of the heap);
    /// for the default sizing only, so not with --vram-bytes or --vram-percent.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with_all = ["vram_bytes", "vram_percent"])]
    pub reserve: Option<u64>,
    /// Largest single test buffer (default: the device's limits).
    #[arg(long, value_name = "SIZE", value_parser = max_buffer, hide = true)]
    pub max_buffer: Option<u64>,
    /// Access layout: contiguous (CPU devices) or coalesced (GPUs); default by device.
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<LayoutArg>,
    /// Bound on every wait for the device (a hung device is reported after this;
    /// default 10s, or the profile's).
    #[arg(long, value_name = "DURATION", value_parser = fence_timeout)]
    pub fence_timeout: Option<Duration>,
}

/// `kiln run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The job: a bundled profile (quick, fleet, burn-in, rma) or a path to a profile
    /// file; the flags below override it. An installed kiln reads a named profile from
    /// share/kiln/profiles beside its binary (/usr/share/kiln/profiles), else its own copy.
    #[arg(long, value_name = "NAME|FILE", default_value = "quick")]
    pub profile: String,
    /// Print the plan (devices, workloads, estimated time, memory to test) and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Say every measurement, every run's lines, every phase's telemetry and every note
    /// in the summary.
    #[arg(short, long)]
    pub verbose: bool,
    /// Compare with this earlier run directory afterwards (new findings, drift, counter
    /// growth); a regression makes a passing run exit with the comparison's code.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// Wait for each GPU to be idle and cool (under 10% busy, under 50 °C; at most 10
    /// minutes) before starting and between workloads (default: the profile's).
    #[arg(long)]
    pub wait_idle: bool,
    /// The watchdog: a device with no progress for this long is abandoned as hung
    /// (default: the profile's).
    #[arg(long, value_name = "DURATION", value_parser = step_timeout)]
    pub step_timeout: Option<Duration>,
    /// Test only: open every selected device this many times, each a device of its own.
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub replicate: Option<u16>,
    /// Test only: the device (by its place in the run) whose worker stops responding.
    #[arg(long, value_name = "N", hide = true)]
    pub test_hang_device: Option<usize>,
    /// Test only: the device (by its place in the run) whose worker dies.
    #[arg(long, value_name = "N", hide = true)]
    pub test_crash_device: Option<usize>,
    /// Test only: the device (by its place in the run) whose worker busies itself with
    /// host-side work that keeps showing progress and never answers a stop.
    #[arg(long, value_name = "N", hide = true)]
    pub test_busy_device: Option<usize>,
    /// Test only: the telemetry is this recorded file, replayed tick by tick, instead of
    /// the live sources (the power target's path from the sidecar to a worker).
    #[arg(long, value_name = "FILE", hide = true)]
    pub test_telemetry_replay: Option<PathBuf>,
    /// Test only: plant a stuck bit at this word of every VRAM test.
    #[arg(long, value_name = "WORD", hide = true)]
    pub test_stuck_word: Option<u64>,
    /// Test only: plant a fault a burn-in detector finds (`decay:WORD:SECONDS`: a resident
    /// word flipped after a delay; `low-duty:DUTY`: compute and matrix results wrong
    /// below this duty; `pause`: compute results wrong away from full load; `cpu`: a wrong CPU result
    /// under the combined load).
    #[arg(long, value_name = "FAULT", hide = true)]
    pub test_fault: Vec<String>,
    /// Device to test, by index, UUID or PCI address; repeat for several (default: every GPU).
    #[arg(long = "device", value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Time budget per device (e.g. 60s, 5m, 2h; default: the profile's).
    #[arg(long, value_name = "DURATION", value_parser = run_duration)]
    pub duration: Option<Duration>,
    /// Run exactly this many passes of the algorithms.
    #[arg(long, value_name = "N", value_parser = passes)]
    pub passes: Option<u32>,
    /// Workloads, comma-separated: vram, compute, matrix, pcie, fragment, heat (default:
    /// the profile's; a workload the profile lacks runs with its defaults).
    #[arg(long, value_name = "LIST")]
    pub workloads: Option<String>,
    /// Largest PCIe transfer (from 4 KiB up in steps of 4x; default: the profile's).
    #[arg(long, value_name = "SIZE", value_parser = pcie_max_bytes)]
    pub pcie_max_bytes: Option<u64>,
    /// Compute load shape: steady, pulsed (100 ms on / 100 ms off) or sweep (10%..100%)
    /// (default: the profile's).
    #[arg(long, value_name = "SHAPE")]
    pub load: Option<LoadArg>,
    /// Hold board power at PCT% of the enforced power limit (1-100) during the compute,
    /// matrix and heat loads, by setting their duty cycle from the power telemetry
    /// (default: the profile's; none: flat out).
    #[arg(long, value_name = "PCT", value_parser = power_target)]
    pub power_target: Option<u32>,
    /// VRAM algorithms, comma-separated, `default` (all but retention) or `all`
    /// (default: the profile's).
    #[arg(long, value_name = "LIST")]
    pub algorithms: Option<String>,
    /// Error records kept per device (the error count is never capped; default 4096).
    #[arg(long, value_name = "N", value_parser = records)]
    pub records: Option<u32>,
    /// Failing words retested in place, per device (default 64, or the profile's).
    #[arg(long, value_name = "N", value_parser = retest_cap)]
    pub retest_cap: Option<u32>,
    /// Idle time of the retention algorithm (default 30s, or the profile's).
    #[arg(long, value_name = "DURATION", value_parser = retention_delay)]
    pub retention_delay: Option<Duration>,
    /// Seed of the test patterns (the same seed repeats them exactly).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Telemetry sampling interval (0 turns telemetry off; default 200ms, or the
    /// profile's).
    #[arg(long, value_name = "DURATION", value_parser = telemetry_interval)]
    pub telemetry_interval: Option<Duration>,
    /// Verdict thresholds to override (JSON; each threshold is listed in docs/guide.md).
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// Run directory (default: ./kiln-runs/<time>-<host>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write the metrics into node_exporter's textfile directory (its
    /// --collector.textfile.directory), atomically: kiln.prom in DIR.
    #[arg(long, value_name = "DIR")]
    pub textfile_dir: Option<PathBuf>,
    /// Print the report as JSON on stdout (the summary goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Memory options.
    #[command(flatten)]
    pub vram: VramArgs,
}

/// `kiln selftest`.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    /// Device to use, by index, UUID or PCI address (default: every GPU).
    #[arg(long = "device", value_name = "DEVICE")]
    pub devices: Vec<String>,
    /// Faults planted per run.
    #[arg(long, value_name = "N", default_value = "256", value_parser = faults)]
    pub faults: u32,
    /// Runs, each with fresh faults and patterns.
    #[arg(long, value_name = "N", default_value = "4", value_parser = runs)]
    pub runs: u32,
    /// Bytes tested per run.
    #[arg(long, value_name = "SIZE", value_parser = selftest_bytes, default_value = "64MiB")]
    pub vram_bytes: u64,
    /// Seed of the planted faults and patterns.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `kiln bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure: vram, compute, matrix, pcie, telemetry (what the telemetry
    /// sidecar costs on every GPU of the machine) or watch (what `kiln watch` costs the
    /// command after `--`).
    #[arg(value_parser = ["vram", "compute", "matrix", "pcie", "telemetry", "watch"])]
    pub what: String,
    /// How long to load the device (compute, default 5s; matrix, default 6s) or to sample
    /// (telemetry, default 10s).
    #[arg(long, value_name = "DURATION", value_parser = bench_duration)]
    pub duration: Option<Duration>,
    /// Device, by index, UUID or PCI address (default: the first GPU).
    #[arg(long = "device", value_name = "DEVICE")]
    pub device: Option<String>,
    /// Bytes to sweep (vram; default 1GiB).
    #[arg(long, value_name = "SIZE", value_parser = bench_bytes)]
    pub bytes: Option<u64>,
    /// Timed repetitions, reported as medians after one untimed first-touch pass (vram;
    /// default 5).
    #[arg(long, value_name = "N", value_parser = repeat)]
    pub repeat: Option<u32>,
    /// Access layout (vram; default: by device kind).
    #[arg(long, value_name = "LAYOUT")]
    pub layout: Option<LayoutArg>,
    /// Sampling interval (telemetry; default 200ms, a run's default; watch, default 1s).
    #[arg(long, value_name = "DURATION", value_parser = sample_interval)]
    pub interval: Option<Duration>,
    /// Runs each way, plain and watched (watch; default 5).
    #[arg(long, value_name = "N", value_parser = repeat)]
    pub runs: Option<u32>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// The command to time (watch), after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// A duration that must lie within `range` (the same bounds as the profile key the flag
/// overrides, and the same words).
fn bounded_duration(text: &str, range: &Bounds<Duration>) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    range.check(d, text)
}

fn run_duration(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::DURATION)
}

fn fence_timeout(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::FENCE_TIMEOUT)
}

fn step_timeout(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::STEP_TIMEOUT)
}

fn retention_delay(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::RETENTION_DELAY)
}

fn sample_interval(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::TELEMETRY_INTERVAL)
}

fn bench_duration(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::BENCH_DURATION)
}

fn monitor_duration(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::MONITOR_DURATION)
}

fn max_age(text: &str) -> Result<Duration, String> {
    bounded_duration(text, &bounds::MAX_AGE)
}

/// `0` turns telemetry off; anything else within the profile key's bounds.
fn telemetry_interval(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Ok(d);
    }
    bounds::TELEMETRY_INTERVAL
        .check(d, text)
        .map_err(|e| format!("{e} (or 0 to turn telemetry off)"))
}

fn pcie_max_bytes(text: &str) -> Result<u64, String> {
    bounds::PCIE_MAX_BYTES.check(parse_size(text)?, text)
}

fn max_buffer(text: &str) -> Result<u64, String> {
    bounds::MAX_BUFFER_BYTES.check(parse_size(text)?, text)
}

fn bench_bytes(text: &str) -> Result<u64, String> {
    bounds::BENCH_BYTES.check(parse_size(text)?, text)
}

fn selftest_bytes(text: &str) -> Result<u64, String> {
    bounds::SELFTEST_BYTES.check(parse_size(text)?, text)
}

/// A whole number within `range`.
fn bounded_count(text: &str, range: &Bounds<u64>) -> Result<u64, String> {
    let v: u64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{} is not a whole number", quote(text)))?;
    range.check(v, text)
}

fn power_target(text: &str) -> Result<u32, String> {
    bounded_count(text, &crate::power::POWER_TARGET).map(|v| v as u32)
}

fn passes(text: &str) -> Result<u32, String> {
    bounded_count(text, &bounds::PASSES).map(|v| v as u32)
}

fn records(text: &str) -> Result<u32, String> {
    bounded_count(text, &bounds::RECORDS).map(|v| v as u32)
}

fn retest_cap(text: &str) -> Result<u32, String> {
    bounded_count(text, &bounds::RETEST_CAP).map(|v| v as u32)
}

fn repeat(text: &str) -> Result<u32, String> {
    bounded_count(text, &bounds::REPEAT).map(|v| v as u32)
}

fn runs(text: &str) -> Result<u32, String> {
    bounded_count(text, &bounds::RUNS).map(|v| v as u32)
}

fn faults(text: &str) -> Result<u32, String> {
    bounded_count(text, &bounds::FAULTS).map(|v| v as u32)
}

fn gpu_count(text: &str) -> Result<usize, String> {
    bounded_count(text, &bounds::GPU_COUNT).map(|v| v as usize)
}

fn iteration_pattern(text: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(text).map_err(|e| {
        format!(
            "{} is not a regular expression: {}",
            quote(text),
            e.to_string().lines().last().unwrap_or("").trim()
        )
    })
}

fn parse_percent(text: &str) -> Result<f64, String> {
    let p: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{} is not a percentage", quote(text)))?;
    if p > 0.0 && p <= 100.0 {
        Ok(p)
    } else {
        Err(format!(
            "{} is not a percentage between 0 and 100",
            crate::text::number(p)
        ))
    }
}

/// `--vram-percent`: the range of a profile's `percent`.
fn vram_percent(text: &str) -> Result<f64, String> {
    bounds::VRAM_PERCENT.check(parse_percent(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_are_kept_whole_on_one_line() {
        let missing = "error: the following required arguments were not provided:\n  <RUN_DIR>\n\nUsage: kiln report <RUN_DIR>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_sentence(missing),
            "the following required arguments were not provided: <RUN_DIR> (usage: kiln report <RUN_DIR>)"
        );
        let typo = "error: unexpected argument '--profle' found\n\n  tip: a similar argument exists: '--profile'\n\nUsage: kiln run --profile <NAME|FILE>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_sentence(typo),
            "unexpected argument '--profle' found; did you mean '--profile'? (usage: kiln run --profile <NAME|FILE>)"
        );
        let profile = "error: unexpected argument 'burn-in' found\n\nUsage: kiln run [OPTIONS]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_sentence(profile),
            "unexpected argument 'burn-in' found; a profile runs with `kiln run --profile burn-in` (usage: kiln run [OPTIONS])"
        );
        let subcommand = "error: unrecognized subcommand 'burn-in'\n\nUsage: kiln <COMMAND>\n\nFor more information, try '--help'.\n";
        assert!(
            usage_sentence(subcommand).contains("a profile runs with `kiln run --profile burn-in`")
        );
        let watched = "error: unexpected argument 'python3' found\n\nUsage: kiln watch [OPTIONS] [-- <CMD>...]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_sentence(watched),
            "unexpected argument 'python3' found; the command to watch goes after `--` (`kiln watch -- python3 ...`) (usage: kiln watch [OPTIONS] [-- <CMD>...])"
        );
        // The near misses: a word that is no profile, and a flag of watch's, get no hint.
        let other = "error: unexpected argument 'fast' found\n\nUsage: kiln run [OPTIONS]\n\nFor more information, try '--help'.\n";
        assert!(!usage_sentence(other).contains("profile runs"));
        let flag = "error: unexpected argument '--fast' found\n\nUsage: kiln watch [OPTIONS] [-- <CMD>...]\n\nFor more information, try '--help'.\n";
        assert!(!usage_sentence(flag).contains("goes after"));
        let value = "error: invalid value '7x' for '--duration <DURATION>': unknown duration unit `x`\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_sentence(value),
            "invalid value '7x' for '--duration <DURATION>': unknown duration unit `x` (see `kiln --help`)"
        );
    }

    #[test]
    fn help_ends_with_every_exit_code() {
        let help = Cli::definition().render_help().to_string();
        for (code, meaning) in crate::exit_code::MEANINGS {
            assert!(help.contains(&format!("{code:>2}  {meaning}")), "{help}");
        }
    }

    #[test]
    fn flags_share_the_profile_keys_bounds() {
        assert!(run_duration("0").unwrap_err().contains("outside 1s..168h"));
        assert!(
            fence_timeout("0")
                .unwrap_err()
                .contains("outside 100ms..600s")
        );
        assert!(step_timeout("0").unwrap_err().contains("outside 1s..1h"));
        assert!(
            pcie_max_bytes("1")
                .unwrap_err()
                .contains("outside 4KiB..16GiB")
        );
        let e = telemetry_interval("1ms").unwrap_err();
        assert!(
            e.contains("outside 10ms..60s") && e.contains("0 to turn"),
            "{e}"
        );
        assert_eq!(telemetry_interval("0"), Ok(Duration::ZERO));
        assert!(passes("0").unwrap_err().contains("outside 1..=100000"));
        assert!(bench_bytes("1").unwrap_err().contains("outside 8MiB.."));
        assert_eq!(
            vram_percent("1e-300"),
            Err("1e-300 is not a percentage between 0 and 100 (0.1 at least)".into())
        );
        assert_eq!(vram_percent("0.5%"), Ok(0.5));
        assert_eq!(run_duration("40s"), Ok(Duration::from_secs(40)));
    }

    #[test]
    fn long_values_are_quoted_cut_short() {
        let long = "x".repeat(100_000);
        let e = parse_size(&long).unwrap_err();
        assert!(e.len() < 200, "{} characters", e.len());
        assert!(e.contains("100000 characters"), "{e}");
        assert_eq!(quote("vram"), "`vram`");
    }

    #[test]
    fn percentages_are_bounded() {
        assert_eq!(parse_percent("50%"), Ok(50.0));
        assert!(parse_percent("0").is_err());
        assert!(parse_percent("101").is_err());
    }
}
