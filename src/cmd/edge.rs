//! What every command shares at the edge: its one sentence and exit code for a failure,
//! stdout for its result and stderr for the rest, and the flags several commands take
//! (`--thresholds`, `--textfile-dir`).

use crate::error::AppError;

/// A failed command's one sentence: for a GPU that Vulkan cannot reach, why, per GPU.
pub fn sentence_of(e: &AppError) -> String {
    match e {
        AppError::Gpu(g) => crate::select::explain_for_gpus(g).unwrap_or_else(|| e.to_string()),
        e => e.to_string(),
    }
}

/// The line a failed command writes to stderr: `kiln: ` and its one sentence, with any
/// runaway word (a 100 kB argument echoed back by a parser) cut to a sane length, and
/// whatever system message reached it without kiln's words read as words, for every
/// command: never `(os error 2)`.
pub fn error_line(sentence: &str) -> String {
    const LONGEST: usize = 200;
    let sentence = crate::text::without_os_error_number(sentence);
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
    format!("kiln: {}\n", words.join(" "))
}

/// Writes to stdout. A reader that has gone away (`kiln list --json | head -1`) is not
/// an error of kiln's: the rest of the output is dropped and the command ends with its
/// own exit code, without a panic.
pub fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// Writes to stderr, quietly dropping what a closed stderr cannot take.
pub fn err(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Prints a run's report as [`print_result`] does, its result words coloured where the
/// summary goes to a terminal that wants colour.
pub fn print_report(json: bool, report: &crate::verdict::Report, summary: &str) {
    use std::io::IsTerminal;
    let terminal = if json {
        std::io::stderr().is_terminal()
    } else {
        std::io::stdout().is_terminal()
    };
    if terminal && crate::report::terminal::colour_wanted() {
        print_result(
            json,
            report,
            &crate::report::terminal::coloured(report, summary),
        );
    } else {
        print_result(json, report, summary);
    }
}

/// Prints a command's result: with `--json` the JSON on stdout and the summary on stderr,
/// else the summary on stdout.
pub fn print_result<T: serde::Serialize>(json: bool, value: &T, summary: &str) {
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

/// The thresholds a `--thresholds FILE` gives, or the defaults.
pub fn thresholds(
    path: &Option<std::path::PathBuf>,
) -> Result<crate::thresholds::Thresholds, AppError> {
    match path {
        Some(p) => {
            crate::thresholds::Thresholds::load(p).map_err(|e| AppError::Usage(e.to_string()))
        }
        None => Ok(Default::default()),
    }
}

/// Refuses a `--textfile-dir` that is not a directory, as a usage error.
pub fn textfile_dir_usable(dir: &std::path::Path) -> Result<(), AppError> {
    crate::report::check_textfile_dir(dir).map_err(AppError::Usage)
}

/// Copies a run's metrics into node_exporter's textfile directory; says in a line where
/// they went or why they did not (the run's own verdict stands either way).
pub fn publish_run_metrics(textfile_dir: &std::path::Path, run_dir: &std::path::Path) -> String {
    let file = crate::report::METRICS_FILE;
    let published = std::fs::read(run_dir.join(file))
        .map_err(|e| format!("{}: {e}", run_dir.join(file).display()))
        .and_then(|bytes| crate::report::publish_metrics(textfile_dir, file, &bytes));
    match published {
        Ok(path) => format!("metrics: {}\n", path.display()),
        Err(e) => format!("metrics not published: {e}\n"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_command_s_error_line_says_a_system_error_in_words() {
        // A message that reached the edge with the standard library's words and number.
        assert_eq!(
            super::error_line("cannot open /x.log: No such file or directory (os error 2)"),
            "kiln: cannot open /x.log: no such file\n"
        );
        assert_eq!(
            super::error_line("/root/k: Permission denied (os error 13)"),
            "kiln: /root/k: permission denied\n"
        );
        // The near miss: a sentence of kiln's own is left as it is.
        assert_eq!(
            super::error_line("--clear `x`: not a fault code"),
            "kiln: --clear `x`: not a fault code\n"
        );
    }
}
