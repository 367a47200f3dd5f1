//! kiln started from Explorer with no arguments (a buyer double-clicking kiln.exe): the
//! quick check of every GPU, the verdict in plain words, where the report is, and a
//! window that stays open until Enter (or `o` and Enter, to see the report first).

use super::cli::{Cli, Command};
use super::edge::{err, error_line, out, print_report, sentence_of};
use crate::error::AppError;

/// Runs the quick check for a person at a window of its own; returns the exit code.
pub(super) fn double_clicked() -> i32 {
    out(
        "kiln checks every GPU in this computer, about a minute each. Close games and other GPU programs meanwhile.\n\n",
    );
    let run = || -> Result<(crate::verdict::Report, i32), AppError> {
        super::run::catch_signals();
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
        let opts = super::run::prepare(&args)?;
        let (report, text, code) = super::run::tested(&args, &opts)?;
        print_report(false, &report, &text);
        Ok((report, code))
    };
    let (code, page) = match run() {
        Ok((report, code)) => {
            out(&format!(
                "\n{}",
                crate::report::terminal::in_plain_words(&report, code)
            ));
            let page = std::path::Path::new(&report.run_dir).join("report.html");
            (code, page.is_file().then_some(page))
        }
        Err(e) => {
            err(&error_line(&sentence_of(&e)));
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
        && let Err(e) = crate::platform::browser::open(&page)
    {
        err(&error_line(&format!(
            "the report could not be opened ({e}): it is {}",
            page.display()
        )));
        let _ = std::io::stdin().read_line(&mut answer);
    }
    code
}
