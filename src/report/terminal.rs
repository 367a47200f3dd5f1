//! The terminal summary: one line per device, then what it rests on.

use std::fmt::Write;

use crate::telemetry::record::Reading;
use crate::telemetry::signals;
use crate::telemetry::summary::PhaseTelemetry;
use crate::verdict::{Report, Setup};
use crate::workload::Section;

/// How much of a run the summary says.
#[derive(Debug, Clone, Copy, Default)]
pub struct Style {
    /// Every measurement of every run of every workload, every phase's telemetry and
    /// every finding (`-v`); else a line per workload and the findings that judge.
    pub verbose: bool,
    /// The run's first notes that were already said at the terminal, before the bars,
    /// and are not said again.
    pub notes_said: usize,
}

/// The verdict for someone who is not a GPU engineer (a buyer who double-clicked
/// kiln.exe): what it means for their card, what to do, and where the report is. `code` is
/// the run's exit code (a baseline's comparison may have changed the report's own).
pub fn in_plain_words(report: &Report, code: i32) -> String {
    use crate::exit_code;
    let gpus: Vec<&str> = report.devices.iter().map(|d| d.name.as_str()).collect();
    // The device whose result decided the exit code, and what it rests on.
    let decided = report
        .devices
        .iter()
        .find(|d| d.result.exit_code() == code)
        .map(|d| format!("{}: {}", d.name, d.reason));
    let because = decided.map_or(String::new(), |d| format!(" ({d})"));
    let mut out = match code {
        _ if report.no_gpu_tested => "NO GPU TESTED: kiln found no graphics card it could use in this computer. \
             If one is installed, its driver may be missing or not working: install the latest driver from its maker and run kiln again.".to_owned(),
        exit_code::HEALTHY => format!(
            "PASS: {} tested and healthy: every result verified, nothing wrong found.",
            crate::text::list(&gpus)
        ),
        exit_code::HARDWARE => format!(
            "FAIL: the card itself has a fault{because}. Keep this report: it is the evidence a shop or the maker's \
             support asks for when you return the card (`kiln report --rma` bundles it)."
        ),
        exit_code::ENVIRONMENT => format!(
            "NOT THE CARD: the computer around it needs attention{because}. Check its cooling, its power cables and \
             the slot it sits in, then run kiln again."
        ),
        exit_code::SOFTWARE => format!(
            "NOT THE CARD: a software problem{because}. Install the latest driver from the card's maker, close other \
             programs that use the GPU, and run kiln again."
        ),
        _ => format!(
            "NOT JUDGED: not enough could be tested{because}. Run kiln again with nothing else running; if it says \
             this again, the report says what stood in the way."
        ),
    };
    out.push('\n');
    let page = std::path::Path::new(&report.run_dir).join("report.html");
    out.push_str(&format!("The full report: {}\n", page.display()));
    out
}

/// Renders the human summary of a run: by default a line per device, its setup, a line
/// per workload (however many runs it had), the findings that judge, what could not be
/// checked and the action; with [`Style::verbose`], everything.
pub fn summary(report: &Report, style: Style) -> String {
    let mut out = String::new();
    for note in report.notes.iter().skip(style.notes_said) {
        let _ = writeln!(out, "note: {note}");
    }
    if let Some(app) = &report.application {
        application_lines(&mut out, app);
    }
    let mut held_back = 0;
    for d in &report.devices {
        let _ = writeln!(
            out,
            "GPU{} {} [{}] {}: {}",
            d.index,
            d.name,
            d.pci_address.as_deref().unwrap_or(&d.uuid),
            d.result.word(),
            d.reason
        );
        setup_line(&mut out, &d.setup);
        if style.verbose {
            workload_lines(&mut out, d);
            let quiet = d
                .telemetry
                .iter()
                .filter(|p| !telemetry_line(&mut out, p))
                .count();
            if quiet > 0 && quiet == d.telemetry.len() {
                let _ = writeln!(out, "  telemetry: no samples in any phase");
            }
        } else {
            workload_headlines(&mut out, d);
        }
        for f in &d.findings {
            // A note is held back; an informational finding of weight (a power cap far
            // below the card's default) is said where people look.
            if !style.verbose
                && f.class == crate::finding::Class::Info
                && f.severity >= crate::finding::Severity::Note
            {
                held_back += 1;
                continue;
            }
            let _ = writeln!(
                out,
                "  finding {} ({}): {}; {}",
                f.code,
                f.rating(),
                f.summary,
                f.action
            );
        }
        let not_checked = d.not_checked();
        if !not_checked.is_empty() {
            let _ = writeln!(out, "  not checked: {}", not_checked.join("; "));
        }
        // What to do, unless a finding said above already says it.
        if let Some(action) = &d.action {
            let said = d.findings.iter().any(|f| {
                (style.verbose || f.class != crate::finding::Class::Info) && f.action == *action
            });
            if !said {
                let _ = writeln!(out, "  next: {action}");
            }
        }
        if let Some(next) = rma_steps(d, &report.run_dir) {
            let _ = writeln!(out, "  next: {next}");
        }
    }
    let _ = writeln!(
        out,
        "result: {}{}{} (exit {}), evidence in {}{}",
        report.result.word(),
        match (report.no_gpu_tested, report.application.is_some()) {
            (true, true) => ", no GPU was watched",
            (true, false) => ", no GPU was tested",
            (false, _) => "",
        },
        match (report.interrupted, report.incomplete) {
            (true, _) => ", interrupted: covers what ran before the signal",
            (false, true) => ", incomplete evidence",
            _ => "",
        },
        report.exit_code,
        report.run_dir,
        if style.verbose {
            String::new()
        } else if held_back > 0 {
            format!(
                " ({} more {} in report.json; -v says {} and every measurement)",
                held_back,
                if held_back == 1 { "note" } else { "notes" },
                if held_back == 1 { "it" } else { "them" }
            )
        } else {
            " (-v for every measurement)".into()
        }
    );
    out
}

/// A watch's application: what it was and how it ended, its memory, its trace, and the
/// cause found.
fn application_lines(out: &mut String, app: &crate::verdict::watch::ApplicationReport) {
    use crate::verdict::watch::{IterationSource, MemorySource};
    let bytes = crate::units::format_bytes;
    let what = match app.command.split_first() {
        None => "a running process".to_owned(),
        // The program by its name (its path is in report.json), its arguments whole up to
        // a line's worth.
        Some((program, args)) => {
            let name = std::path::Path::new(program)
                .file_name()
                .map_or(program.as_str(), |n| n.to_str().unwrap_or(program));
            let line = std::iter::once(name)
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            format!("`{}`", crate::text::cut(&line, 160))
        }
    };
    let pid = app.pid.map(|p| format!("pid {p}")).unwrap_or_default();
    let more = app.pids.len().saturating_sub(1);
    let children = if more > 0 {
        format!(" and {}", crate::text::count(more as u64, "child process"))
    } else {
        String::new()
    };
    let ended = match (app.ended_ms, app.exit_code, app.signal) {
        (None, ..) => "still running when the watch stopped".to_owned(),
        (Some(at), _, Some(s)) => format!("ended by signal {s} after {:.1} s", at / 1e3),
        (Some(at), Some(c), None) => format!("exited with {c} after {:.1} s", at / 1e3),
        (Some(at), None, None) => format!(
            "ended after {:.1} s (how, kiln cannot know: not its child)",
            at / 1e3
        ),
    };
    let _ = writeln!(out, "application: {what} ({pid}{children}), {ended}");
    if let Some(killed) = app.killed_words() {
        let _ = writeln!(out, "  stopped: {killed}");
    }
    let source = match app.memory_source {
        MemorySource::Driver => "the driver's per-process figure",
        MemorySource::Trace => "its allocations, traced",
        MemorySource::None => "",
    };
    if app.memory_source != MemorySource::None {
        let of = app
            .budget_bytes
            .map(|b| format!(" of {}", bytes(b)))
            .unwrap_or_default();
        let iterations = match app.iterations_from {
            IterationSource::Output => format!(
                ", {} marked by its output",
                crate::text::count(app.iterations_ms.len() as u64, "iteration")
            ),
            IterationSource::Period => format!(
                ", {} found from its memory's period",
                crate::text::count(app.iterations_ms.len() as u64, "iteration")
            ),
            IterationSource::None => ", no iterations (judged over time)".to_owned(),
        };
        let between = if app.iterations_from == IterationSource::None {
            "lowest per stretch of time"
        } else {
            "lowest between iterations"
        };
        let baseline = match (app.baselines.first(), app.baselines.last()) {
            (Some(a), Some(b)) => format!(
                ", {between} {} to {}",
                bytes(a[1] as u64),
                bytes(b[1] as u64)
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  memory ({source}): peak {}{of}{iterations}{baseline}",
            bytes(app.peak_bytes)
        );
    }
    if let Some(t) = &app.trace {
        let _ = writeln!(
            out,
            "  trace: {}, {}, {} refused{}{}",
            crate::text::count(t.allocations, "allocation"),
            t.frees_words(),
            t.refused,
            if t.out_of_memory_calls > 0 {
                format!(
                    ", {} out of memory",
                    crate::text::count(t.out_of_memory_calls, "other call")
                )
            } else {
                String::new()
            },
            if t.lost_records > 0 {
                format!(", {} records lost", t.lost_records)
            } else {
                String::new()
            }
        );
    }
    // What decided "not judged" is said by its finding below; the rest here.
    for u in app.unseen.iter().filter(|u| !u.decisive) {
        let _ = writeln!(out, "  not seen: {}", u.words());
    }
    let _ = writeln!(out, "diagnosis: {}", app.diagnosis.word());
}

/// How a card that failed for a fault of its own gets to its maker: a fault not yet
/// reproduced is confirmed first by the rma profile, which reruns every workload that
/// found one; a reproduced one is bundled for the support desk as it stands.
fn rma_steps(d: &crate::verdict::DeviceReport, run_dir: &str) -> Option<String> {
    if d.result != crate::verdict::DeviceResult::Fail {
        return None;
    }
    // A card kiln cannot load (no Vulkan driver drives it) cannot be confirmed by a rerun:
    // its counters are the evidence, and the maker's own diagnostic confirms them.
    if d.not_tested {
        return Some(format!(
            "`kiln report --rma {run_dir}` bundles what its counters showed for the maker's support desk; kiln cannot load this card to confirm it, its maker's own diagnostic can"
        ));
    }
    // Only a fault the vendor's criteria (or kiln's own evidence of wrong results) send
    // back: one the card handled, or one its platform may have caused, has its finding's
    // step, said above.
    let lead = d
        .leading_finding()
        .filter(|f| f.remedy() == crate::finding::Remedy::Rma)?;
    let reproduced = lead
        .facts
        .runs
        .is_some_and(|(found, ran)| ran > 1 && found > 1);
    Some(if reproduced {
        format!(
            "`kiln report --rma {run_dir}` bundles this run's evidence for the maker's support desk"
        )
    } else {
        format!(
            "confirm it with `kiln run --profile rma` (it reruns what found a fault), then `kiln report --rma RUN_DIR` on that run bundles the evidence for the maker's support desk (this run's directory: {run_dir})"
        )
    })
}

/// Each workload once, however many runs it had: how it ended and its first run's
/// headline.
fn workload_headlines(out: &mut String, d: &crate::verdict::DeviceReport) {
    for group in d.runs_by_workload() {
        let (w, runs) = (group[0], group.len());
        // A workload that never ran says so in its headline already.
        let status = if w.status == crate::workload::WorkloadStatus::NotRun {
            String::new()
        } else {
            format!("{}: ", w.status.word())
        };
        let _ = writeln!(
            out,
            "  {}{}{}: {status}{}",
            w.workload,
            w.together_with()
                .map(|with| format!(" (ran inside {with}, beside another load)"))
                .unwrap_or_default(),
            // The headline is the first run's; what went wrong is also counted over every
            // run, as the live line and the page count it.
            if runs > 1 {
                format!(", first of {runs} runs")
            } else {
                String::new()
            },
            w.headline
        );
        // Counted over every run as the page's tables count it: every table a workload
        // gives is of what went wrong, in its own noun.
        if runs > 1 {
            let mut faults: Vec<(&str, u64)> = Vec::new();
            for t in group
                .iter()
                .flat_map(|r| r.summary.sections())
                .filter_map(|s| match s {
                    Section::Table(t) => Some(t),
                    _ => None,
                })
            {
                match faults.iter_mut().find(|(noun, _)| *noun == t.noun) {
                    Some((_, n)) => *n += t.total,
                    None => faults.push((t.noun, t.total)),
                }
            }
            let said: Vec<String> = faults
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(noun, n)| crate::text::count(*n, noun))
                .collect();
            if !said.is_empty() {
                let _ = writeln!(out, "    {} over the {runs} runs", said.join(", "));
            }
        }
    }
}

/// Every line of every run of every workload.
fn workload_lines(out: &mut String, d: &crate::verdict::DeviceReport) {
    for w in &d.workloads {
        if let Some(with) = w.together_with() {
            let _ = writeln!(
                out,
                "  {} ran inside {with}, beside another load: its rates are not the device's alone",
                w.workload
            );
        }
        let lines: Vec<String> = w
            .summary
            .sections()
            .into_iter()
            .flat_map(|s| match s {
                Section::Lines(lines) => lines,
                _ => Vec::new(),
            })
            .collect();
        if lines.is_empty() {
            let _ = writeln!(out, "  {}: {}", w.workload, w.headline);
        }
        for line in lines {
            let _ = writeln!(out, "  {}: {line}", w.workload);
        }
    }
}

/// What preflight read of the installation: driver versions, the board, other tenants.
fn setup_line(out: &mut String, setup: &Setup) {
    if setup.identity.is_empty() {
        return;
    }
    let text = |key: signals::Signal| setup.identity_text(key);
    // A GPU only observed (no Vulkan driver drives it) has no Vulkan version to say; the
    // kernel driver names its driver where no version was read.
    let driver = text(signals::DRIVER_VERSION)
        .or_else(|| text(signals::KERNEL_DRIVER))
        .unwrap_or("unknown");
    let mut parts = vec![if setup.vulkan_driver_version.is_empty() {
        format!("driver {driver}")
    } else {
        format!("driver {driver} (Vulkan {})", setup.vulkan_driver_version)
    }];
    for (key, label) in [(signals::SERIAL, "serial"), (signals::VBIOS, "VBIOS")] {
        if let Some(v) = text(key) {
            parts.push(format!("{label} {v}"));
        }
    }
    // A list read and empty is "none"; one that could not be read says why.
    let processes = match setup.identity_of(signals::OTHER_PROCESSES) {
        Some(Reading::Unavailable { unavailable }) => {
            format!("unknown ({})", unavailable.replace('_', " "))
        }
        Some(reading) => reading.processes().map_or_else(
            || "not read".to_owned(),
            |list| crate::telemetry::process::said(&list),
        ),
        None => "not read".to_owned(),
    };
    parts.push(format!("other processes: {processes}"));
    let _ = writeln!(out, "  setup: {}", parts.join(", "));
}

/// A phase's telemetry in one line; false (and nothing written) for a phase with no
/// sample, counter change or Xid, which the caller says once for the device.
fn telemetry_line(out: &mut String, p: &PhaseTelemetry) -> bool {
    let changed = p.counter_deltas.values().any(|d| *d != 0.0);
    if p.samples == 0 && !changed && p.xids.is_empty() {
        return false;
    }
    let mut parts = vec![crate::text::count(p.samples as u64, "sample")];
    for (key, label, unit) in [
        (signals::GPU_TEMP_C.name, "temperature", "°C"),
        (signals::HBM_TEMP_C.name, "memory temperature", "°C"),
        (signals::POWER_W.name, "power", "W"),
        (signals::CLOCK_SM_MHZ.name, "SM clock", "MHz"),
    ] {
        if let Some(s) = p.gauges.get(key) {
            parts.push(format!(
                "{label} {:.0}/{:.0}/{:.0} {unit} (min/median/max)",
                s.min, s.median, s.max
            ));
        }
    }
    for (reason, share) in &p.throttle_share {
        parts.push(format!(
            "{} {:.0}% of the time",
            crate::telemetry::throttle::label_of(reason),
            share * 100.0
        ));
    }
    for (counter, delta) in p.counter_deltas.iter().filter(|(_, d)| **d != 0.0) {
        parts.push(format!("{counter} +{delta}"));
    }
    if !p.xids.is_empty() {
        let codes: Vec<String> = p
            .xids
            .iter()
            .map(|x| x.code.map_or("?".into(), |c| c.to_string()))
            .collect();
        parts.push(format!("Xid {}", codes.join(",")));
    }
    let _ = writeln!(out, "  telemetry {}: {}", p.phase, parts.join(", "));
    true
}

/// The summary with each result word coloured (ANSI): green for a pass, red for a
/// hardware fault, yellow for environment or software, bold for could not judge. For a
/// terminal that shows colour; `NO_COLOR` (any value) and `TERM=dumb` turn it off.
pub fn coloured(report: &Report, summary: &str) -> String {
    let paint = |word: &str| {
        let code = match word {
            "PASS" => "32",
            "FAIL" => "31;1",
            "ENVIRONMENT" | "SOFTWARE" => "33;1",
            _ => "1",
        };
        format!("\x1b[{code}m{word}\x1b[0m")
    };
    let mut out = summary.to_owned();
    for d in &report.devices {
        let word = d.result.word();
        let marker = format!("] {word}: ");
        out = out.replacen(&marker, &format!("] {}: ", paint(word)), 1);
    }
    let word = report.result.word();
    out.replacen(
        &format!("result: {word}"),
        &format!("result: {}", paint(word)),
        1,
    )
}

/// Whether output to a terminal should carry colour: not with `NO_COLOR` set (to anything,
/// per no-color.org) nor on a dumb terminal.
pub fn colour_wanted() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}
