//! kiln's commands, each a consumer of the core beside this folder: the command line
//! (`cli`), what each command does with its arguments (`run`, `watch`, `health`, `bench`,
//! `list`, `monitor`, `compare`, `explain`, `selftest`, `completions`, and `rebuild` for `kiln
//! verdict` and `kiln report`), and the edge every one of them shares: one sentence and
//! its exit code for a failure, stdout for results, stderr for the rest.
//!
//! The binary is [`main`] and nothing else, so that the tests reach every command's
//! parsing and checking in-process ([`parse`]) and start the binary only where the process
//! is what they test.

pub mod baseline;
pub mod bench;
pub mod cli;
pub mod compare;
pub mod completions;
mod double_click;
pub mod edge;
pub mod explain;
pub mod health;
pub mod list;
pub mod monitor;
pub mod rebuild;
pub mod run;
pub mod selftest;
pub mod watch;

use crate::error::AppError;
use crate::exit_code;
use cli::{Cli, Command};
use edge::{err, error_line, out, sentence_of};

/// The whole of the `kiln` binary: a worker runs its device's job; kiln started with no
/// arguments from Explorer runs the quick check for a person; anything else is parsed and
/// dispatched. Returns the exit code.
pub fn main() -> i32 {
    // The kernel log is read by the one log reader wherever kiln reads it.
    crate::logread::install_kernel_reader();
    run::main_if_worker();
    // Test only: KILN_TEST_DOUBLE_CLICKED takes the double-click's path from a script,
    // whose console is never kiln's own.
    if std::env::args_os().len() == 1
        && (crate::platform::console::opened_for_kiln()
            || std::env::var_os("KILN_TEST_DOUBLE_CLICKED").is_some())
    {
        return double_click::double_clicked();
    }
    let command = match parse(std::env::args_os()) {
        Ok(command) => command,
        Err(Refusal::Shown(e)) => {
            let _ = e.print();
            return exit_code::HEALTHY;
        }
        Err(Refusal::Usage(sentence)) => {
            err(&error_line(&sentence));
            return exit_code::USAGE;
        }
    };
    match dispatch(command) {
        Ok(code) => code,
        Err(e) => {
            err(&error_line(&sentence_of(&e)));
            e.exit_code()
        }
    }
}

/// Why arguments did not parse to a command.
#[derive(Debug)]
pub enum Refusal {
    /// `--help` or `--version`: clap's text is the answer, and the exit code 0.
    Shown(clap::Error),
    /// Bad arguments: the one sentence (exit 64).
    Usage(String),
}

/// The command these arguments (the program's name first) ask for, or why not, as the
/// binary parses them.
pub fn parse<I, T>(args: I) -> Result<Command, Refusal>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::error::ErrorKind;
    Cli::from_args(args).map(|c| c.command).map_err(|e| {
        if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
            Refusal::Shown(e)
        } else {
            // Whole, and with any value it echoes cut to a sane length (by error_line).
            Refusal::Usage(cli::usage_sentence(&e.render().to_string()))
        }
    })
}

/// What `command` checks before it starts anything, without starting it: each command's
/// own first step (the command calls the same function; for `kiln run`, what `--dry-run`
/// checks: the profile with the flags over it, and the devices and sizes they select), so
/// that every usage error can be found in-process. A check that needs the device open (a
/// benchmark's size against the memory free on it) is made when the command runs.
pub fn check(command: &Command) -> Result<(), AppError> {
    match command {
        Command::Run(args) => run::prepare(args).and_then(|opts| run::dry_run(&opts).map(drop)),
        Command::Bench(args) => bench::check_flags(args),
        Command::Selftest(args) => selftest::options(args).check(),
        Command::Watch(args) => watch::check(args).map(drop),
        Command::Verdict(args) => rebuild::check(args).map(drop),
        Command::Health(args) => health::check_args(args),
        Command::List(_)
        | Command::Monitor(_)
        | Command::Report(_)
        | Command::Compare(_)
        | Command::Explain(_)
        | Command::Baseline(_)
        | Command::Completions(_)
        | Command::Man => Ok(()),
    }
}

fn dispatch(command: Command) -> Result<i32, AppError> {
    match command {
        Command::List(args) => list::command(args),
        Command::Run(args) => run::command(*args),
        Command::Selftest(args) => selftest::command(args),
        Command::Bench(args) => bench::command(args),
        Command::Monitor(args) => monitor::command(args),
        Command::Watch(args) => watch::command(*args),
        Command::Verdict(args) => rebuild::verdict(args),
        Command::Report(args) => rebuild::report(args),
        Command::Health(args) => health::command(args),
        Command::Compare(args) => compare::command(args),
        Command::Explain(args) => explain::command(args),
        Command::Baseline(args) => baseline::command(args),
        Command::Completions(args) => {
            out(&completions::completions(&Cli::definition(), args.shell));
            Ok(exit_code::HEALTHY)
        }
        Command::Man => {
            out(&completions::man_page(&Cli::definition()));
            Ok(exit_code::HEALTHY)
        }
    }
}
