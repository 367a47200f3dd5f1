//! `kiln explain [FILE...]`: the logs people already have (`dmesg`, `journalctl -k`, an
//! `nvidia-bug-report.log.gz`, an application's output) read by the one log reader
//! ([`crate::logread`]): for every GPU failure, its lines, what it is, whose fault and
//! what to do; failures of one device together, and a later Xid linked to the one it
//! names. The exit code is the gravest class's, 0 when nothing was found.

use std::io::Read;
use std::path::Path;

use serde::Serialize;

use super::cli::ExplainArgs;
use super::edge::out;
use crate::error::AppError;
use crate::logread::judge::{self, Whose};
use crate::logread::{self, Explained, Found};

/// One input read: its name for people and its failures.
struct Input {
    name: String,
    found: Vec<Found>,
}

/// The text of `path` (`-` for standard input), gunzipped where it is gzip (by its magic
/// bytes, so a `.gz` renamed still reads); bytes that are not UTF-8 are replaced, not
/// refused, as logs hold what drivers wrote.
fn text_of(path: &Path) -> Result<String, AppError> {
    let mut bytes = Vec::new();
    let shown = crate::text::printable(&path.to_string_lossy()).into_owned();
    if path == Path::new("-") {
        std::io::stdin().read_to_end(&mut bytes).map_err(|e| {
            AppError::Usage(format!(
                "cannot read standard input: {}",
                crate::text::io_words(&e)
            ))
        })?;
    } else {
        bytes =
            std::fs::read(path).map_err(|e| AppError::Usage(crate::text::io_error(path, &e)))?;
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut plain = Vec::new();
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut plain)
            .map_err(|e| AppError::Usage(format!("{shown} is not a readable gzip file: {e}")))?;
        bytes = plain;
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[derive(Serialize)]
struct Json<'a> {
    explained: &'a [Explained],
}

/// Runs `kiln explain`; returns its exit code.
pub fn command(args: ExplainArgs) -> Result<i32, AppError> {
    let paths = if args.files.is_empty() {
        vec![Path::new("-").to_path_buf()]
    } else {
        args.files
    };
    let inputs = paths
        .iter()
        .map(|p| {
            Ok(Input {
                name: if p == Path::new("-") {
                    "stdin".to_owned()
                } else {
                    // A file's name never drives the terminal it is printed on.
                    crate::text::printable(&p.to_string_lossy()).into_owned()
                },
                found: logread::read_text(&text_of(p)?),
            })
        })
        .collect::<Result<Vec<_>, AppError>>()?;
    let explained: Vec<Vec<Explained>> = inputs
        .iter()
        .map(|i| i.found.iter().map(Explained::of).collect())
        .collect();
    let code = judge::exit_code_of(explained.iter().flatten().map(|e| e.class));
    if args.json {
        let all: Vec<Explained> = explained.into_iter().flatten().collect();
        let text = serde_json::to_string_pretty(&Json { explained: &all })
            .map_err(|e| AppError::Usage(format!("cannot write JSON: {e}")))?;
        out(&format!("{text}\n"));
    } else {
        out(&summary(&inputs, &explained));
    }
    Ok(code)
}

/// The text for people: per input, each device's failures together (in the order their
/// devices first failed), then those that name no device.
fn summary(inputs: &[Input], explained: &[Vec<Explained>]) -> String {
    let total: usize = explained.iter().map(Vec::len).sum();
    if total == 0 {
        return "No GPU failure found.\n".to_owned();
    }
    let worst = explained
        .iter()
        .flatten()
        .map(|e| e.class)
        .min()
        .unwrap_or(Whose::Undecided);
    let mut text = format!(
        "{total} GPU failure{} found; the gravest is {}.\n",
        if total == 1 { "" } else { "s" },
        worst.name()
    );
    for (input, judged) in inputs.iter().zip(explained) {
        if judged.is_empty() {
            continue;
        }
        let mut devices: Vec<Option<&str>> = Vec::new();
        for e in judged {
            let d = e.pci_address.as_deref();
            if d.is_some() && !devices.contains(&d) {
                devices.push(d);
            }
        }
        devices.push(None);
        for device in devices {
            let mine: Vec<usize> = (0..judged.len())
                .filter(|i| judged[*i].pci_address.as_deref() == device)
                .collect();
            if mine.is_empty() {
                continue;
            }
            text.push_str(&format!(
                "\n{}\n",
                device.map_or("No device named:".to_owned(), |d| format!("Device {d}:"))
            ));
            for i in mine {
                text.push_str(&one(&input.name, &input.found[i], &judged[i], &input.found));
            }
        }
    }
    text
}

/// One failure: where, what, its lines, whose fault, what to do.
fn one(name: &str, found: &Found, e: &Explained, all: &[Found]) -> String {
    let mut what = Vec::new();
    if let Some(x) = e.xid {
        what.push(format!("Xid {x}"));
    }
    if let Some(d) = e.driver {
        what.push(d.name().to_owned());
    }
    if let Some(f) = e.framework {
        what.push(f.to_owned());
    }
    if let Some(f) = e.failure {
        what.push(f.name().replace('_', " "));
    }
    if let (Some(pid), process) = (e.pid, &e.process) {
        what.push(format!(
            "pid {pid}{}",
            process
                .as_ref()
                .map_or(String::new(), |p| format!(" ({p})"))
        ));
    }
    let mut text = format!(
        "  {name}:{}  {}  [{}]\n",
        found.line,
        what.join(", "),
        e.class.name()
    );
    for line in &found.lines {
        text.push_str(&format!("    | {}\n", line.trim_end()));
    }
    if let Some(earlier) = found.follows.and_then(|i| all.get(i)) {
        text.push_str(&format!(
            "    follows line {}{}\n",
            earlier.line,
            earlier
                .reading
                .xid
                .map_or(String::new(), |x| format!(" (Xid {x})"))
        ));
    }
    text.push_str(&format!(
        "    what: {}\n    do:   {}\n",
        e.meaning, e.action
    ));
    text
}
