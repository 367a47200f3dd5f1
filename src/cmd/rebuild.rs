//! `kiln verdict` and `kiln report`: a run's verdict and reports rebuilt from its run
//! directory alone, also for a run cut short by a crash or a kill.

use std::path::Path;

use super::cli::{ReportArgs, VerdictArgs};
use super::edge::{err, out, print_report, publish_run_metrics, textfile_dir_usable, thresholds};
use crate::error::AppError;
use crate::exit_code;
use crate::verdict::Report;

/// `kiln verdict`.
pub fn verdict(args: VerdictArgs) -> Result<i32, AppError> {
    let (report, text) = judged(&args)?;
    print_report(args.json, &report, &text);
    Ok(report.exit_code)
}

/// What `kiln verdict` does short of printing: the run judged again, its reports and any
/// metrics written, and the summary it prints (the tests judge runs through this, in
/// their own process).
pub fn judged(args: &VerdictArgs) -> Result<(Report, String), AppError> {
    check(args)?;
    let (report, mut text) = rebuilt(&args.run_dir, args.thresholds.as_deref(), args.verbose)?;
    if let Some(dir) = &args.textfile_dir {
        text.push_str(&publish_run_metrics(dir, &args.run_dir));
    }
    Ok((report, text))
}

/// What `kiln verdict` checks before it reads the run: the textfile directory, and that a
/// `--thresholds` file is one kiln can read.
pub fn check(args: &VerdictArgs) -> Result<(), AppError> {
    if let Some(dir) = &args.textfile_dir {
        textfile_dir_usable(dir)?;
    }
    thresholds(&args.thresholds).map(|_| ())
}

/// The run in `run_dir` judged again by its own thresholds (with `overlay`'s laid over
/// them, where given), its reports written beside its evidence (atomically; a directory
/// that cannot take them keeps its own, and the report says so), and the terminal summary
/// of it: what `kiln verdict` prints.
pub fn rebuilt(
    run_dir: &Path,
    overlay: Option<&Path>,
    verbose: bool,
) -> Result<(Report, String), AppError> {
    let (evidence, mut report) = judged_again(run_dir, overlay)?;
    if let Err(e) = crate::report::write_all(&evidence, &report) {
        report
            .notes
            .push(format!("the rebuilt report could not be saved: {e}"));
    }
    let text = crate::report::terminal::summary(
        &report,
        crate::report::terminal::Style {
            verbose,
            notes_said: 0,
        },
    );
    Ok((report, text))
}

/// The run in `run_dir` read once and judged again by its own thresholds (with `overlay`'s
/// laid over them), with what was read, for the reports; a directory that cannot be
/// judged is a usage error.
fn judged_again(
    run_dir: &Path,
    overlay: Option<&Path>,
) -> Result<(crate::rundir::RunEvidence, Report), AppError> {
    let usage = |e: &dyn std::fmt::Display| AppError::Usage(e.to_string());
    let evidence = crate::rundir::RunEvidence::read(run_dir).map_err(|e| usage(&e))?;
    let report = crate::verdict::judge_evidence(&evidence, overlay, None).map_err(|e| usage(&e))?;
    Ok((evidence, report))
}

/// `kiln report`.
pub fn report(args: ReportArgs) -> Result<i32, AppError> {
    let (evidence, report) = judged_again(&args.run_dir, None)?;
    crate::report::write_all(&evidence, &report).map_err(|e| {
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
        if let Err(why) = crate::report::pdf::print(&args.run_dir.join("report.html"), &pdf) {
            err(&format!("kiln: {why}\n"));
        }
        let path = crate::report::rma::bundle(&args.run_dir, args.bundle.as_deref())
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
