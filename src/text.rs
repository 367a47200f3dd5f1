//! Small text helpers every layer may use: how a value a user gave appears in a message.

/// Quotes a value a user gave inside a message, cut to a sane length: a 100 kB
/// argument must not be echoed whole.
pub fn quote(text: &str) -> String {
    const SHOWN: usize = 48;
    let count = text.chars().count();
    if count <= SHOWN {
        format!("`{}`", printable(text))
    } else {
        let head: String = text.chars().take(SHOWN).collect();
        format!("`{}...` ({count} characters)", printable(&head))
    }
}

/// `text` with every character that could act rather than show escaped: control
/// characters (`\n` as `\\n`, an escape as `\\u{1b}`), the line and paragraph separators,
/// and the bidirectional overrides that reorder what a terminal shows. A name read from
/// evidence (a host, a GPU, a process, a serial, a message) goes through it before it is
/// printed, so that it can never start a line of its own that a script would take for
/// kiln's, nor drive the terminal.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let acts = |c: char| {
        c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if acts(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The longest a refusal's own words may run: a list of every known key belongs in the
/// docs, not in an error line.
const LONGEST_REFUSAL: usize = 300;

/// Why a file a user gave (a profile, a thresholds file) was refused: one sentence naming
/// the file, the line and the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.sentence())]
pub struct FileRefusal {
    /// The file (or a bundled profile's name).
    pub file: String,
    /// 1-based line, when the problem has one.
    pub line: Option<usize>,
    /// The key at fault (`baseline."NVIDIA H200".rates.vram_gib_per_s.cards`), when
    /// there is one.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl FileRefusal {
    fn sentence(&self) -> String {
        let mut s = self.file.clone();
        if let Some(line) = self.line {
            s.push_str(&format!(":{line}"));
        }
        // A message that names its key already (`\`x\` is given twice`) is not given it
        // twice.
        if let Some(key) = &self.key
            && !self.message.contains(&format!("`{key}`"))
        {
            s.push_str(&format!(": `{key}`"));
        }
        format!("{s}: {}", cut(&self.message, LONGEST_REFUSAL))
    }
}

/// A count and its noun, the plural right: `1 round`, `2 rounds`, `3 mismatches`.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else if noun.ends_with("ch")
        || noun.ends_with("sh")
        || noun.ends_with('s')
        || noun.ends_with('x')
    {
        format!("{n} {noun}es")
    } else {
        format!("{n} {noun}s")
    }
}

/// The known name a user most likely meant by `given`, as clap suggests flags: the
/// closest by Jaro-Winkler similarity, if close enough to be a typo.
pub fn did_you_mean<'a>(given: &str, known: &[&'a str]) -> Option<&'a str> {
    const CLOSE: f64 = 0.8;
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(given, k), *k))
        .filter(|(similarity, _)| *similarity > CLOSE)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// One sentence for a name kiln does not know: the one it most likely meant, else every
/// name it knows (`known`, then `also`: names that stand for several).
pub fn unknown(what: &str, given: &str, known: &[&str], also: &[&str]) -> String {
    match did_you_mean(given, known) {
        Some(meant) => format!("unknown {what} {}; did you mean `{meant}`?", quote(given)),
        None => format!(
            "unknown {what} {} (known: {})",
            quote(given),
            known
                .iter()
                .chain(also)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The most names a refusal lists: a longer list is in the docs, and the sentence says
/// where.
const LISTED: usize = 8;

/// One sentence for a name that is not one of `known`: `given` is not `what`, and the name
/// most likely meant, else the names where they are few, else where they are listed
/// (`listed_in`), so that the sentence stays one short line however many names there are.
pub fn not_one_of(given: &str, what: &str, known: &[&str], listed_in: &str) -> String {
    match did_you_mean(given, known) {
        Some(meant) => format!("{} is not {what}; did you mean `{meant}`?", quote(given)),
        None if known.len() <= LISTED => {
            format!(
                "{} is not {what} (one of {})",
                quote(given),
                known.join(", ")
            )
        }
        None => format!(
            "{} is not {what} (they are listed in {listed_in})",
            quote(given)
        ),
    }
}

/// A number as a message shows it: as written where that is short (`0.75`, `45000`), in
/// exponent form where it is not (`1e-300`, `1e300`), since Rust writes every digit of a
/// float and a tiny one would fill the line.
pub fn number(v: f64) -> String {
    if v == 0.0 || !v.is_finite() || (1e-4..1e12).contains(&v.abs()) {
        v.to_string()
    } else {
        format!("{v:e}")
    }
}

/// `text` cut to at most `max_chars` characters, the cut marked with an ellipsis.
pub fn cut(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Items joined as people list them: `a`, `a and b`, `a, b and c`.
pub fn list<S: AsRef<str>>(items: &[S]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_owned(),
        [head @ .., last] => format!(
            "{} and {}",
            head.iter()
                .map(AsRef::as_ref)
                .collect::<Vec<_>>()
                .join(", "),
            last.as_ref()
        ),
    }
}

/// `text` with its first letter upper case (`Wrong reads`).
pub fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// What the system said of a failed file operation, in words: `no such file`,
/// `permission denied`, never the number of the OS's error (`(os error 2)`), which tells a
/// reader nothing. A kind without words of kiln's keeps the system's own, its number cut.
pub fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let words = match e.kind() {
        K::NotFound => "no such file",
        K::PermissionDenied => "permission denied",
        K::AlreadyExists => "already exists",
        K::IsADirectory => "a directory, not a file",
        K::NotADirectory => "a part of the path is not a directory",
        K::StorageFull => "no space left on the device",
        K::ReadOnlyFilesystem => "a read-only file system",
        K::DirectoryNotEmpty => "the directory is not empty",
        _ => return without_os_error_number(&e.to_string()),
    };
    words.to_owned()
}

/// The one sentence for a failed file operation on `path`: `no such file: /x/y`.
pub fn io_error(path: &std::path::Path, e: &std::io::Error) -> String {
    // A path is a name a user or a directory gave: it never drives the terminal.
    format!("{}: {}", io_words(e), printable(&path.to_string_lossy()))
}

/// `text` with every ` (os error N)` the standard library appends cut, and its commonest
/// messages in kiln's words: the last sweep at the edge, for a system message that reached
/// a sentence without [`io_words`].
pub fn without_os_error_number(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (os error ") {
        let after = &rest[at + " (os error ".len()..];
        let digits = after.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(')') {
            out.push_str(&rest[..at]);
            rest = &after[digits + 1..];
        } else {
            out.push_str(&rest[..at + 1]);
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out.replace("No such file or directory", "no such file")
        .replace("Permission denied", "permission denied")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_file_error_reads_as_words_with_no_os_error_number() {
        let missing = std::io::Error::from_raw_os_error(2);
        assert_eq!(
            super::io_error(std::path::Path::new("/x/y"), &missing),
            "no such file: /x/y"
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(super::io_words(&denied), "permission denied");
        // The edge's sweep: the number cut, the words kept; a near miss (no number, or
        // not the standard library's form) is left as it is.
        assert_eq!(
            super::without_os_error_number("/sys/x: No such file or directory (os error 2)"),
            "/sys/x: no such file"
        );
        assert_eq!(
            super::without_os_error_number("a note (os error code unknown)"),
            "a note (os error code unknown)"
        );
    }

    #[test]
    fn a_typo_suggests_the_name_meant_and_nothing_else_does() {
        let known = ["quick", "fleet", "burn-in", "rma"];
        assert_eq!(did_you_mean("quik", &known), Some("quick"));
        assert_eq!(did_you_mean("burnin", &known), Some("burn-in"));
        assert_eq!(did_you_mean("fleat", &known), Some("fleet"));
        assert_eq!(did_you_mean("memtest", &known), None);
    }

    use super::*;

    #[test]
    fn lists_read_as_people_write_them() {
        assert_eq!(list::<&str>(&[]), "");
        assert_eq!(list(&["vram"]), "vram");
        assert_eq!(list(&["vram", "compute"]), "vram and compute");
        assert_eq!(list(&["vram", "compute", "pcie"]), "vram, compute and pcie");
    }

    #[test]
    fn counts_take_the_plural_they_need() {
        assert_eq!(count(1u32, "round"), "1 round");
        assert_eq!(count(0u32, "round"), "0 rounds");
        assert_eq!(count(3u64, "mismatch"), "3 mismatches");
        assert_eq!(count(1u64, "wrong word"), "1 wrong word");
        assert_eq!(count(2u64, "wrong word"), "2 wrong words");
    }

    #[test]
    fn numbers_stay_short_however_small_or_large() {
        assert_eq!(number(0.75), "0.75");
        assert_eq!(number(45000.0), "45000");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(-1.0), "-1");
        assert_eq!(number(1e-300), "1e-300");
        assert_eq!(number(1e300), "1e300");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "inf");
    }

    #[test]
    fn an_unknown_name_gets_the_one_meant_or_a_short_list_or_where_they_are() {
        let few = ["vram", "compute", "pcie"];
        assert_eq!(
            not_one_of("compte", "a workload", &few, "docs"),
            "`compte` is not a workload; did you mean `compute`?"
        );
        assert_eq!(
            not_one_of("heat", "a workload", &few, "docs"),
            "`heat` is not a workload (one of vram, compute, pcie)"
        );
        let many: Vec<String> = (0..40).map(|i| format!("name_{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let said = not_one_of("zzz", "a name", &many, "docs/guide.md");
        assert_eq!(
            said,
            "`zzz` is not a name (they are listed in docs/guide.md)"
        );
    }

    #[test]
    fn long_values_are_quoted_cut_short() {
        let long = "x".repeat(100_000);
        let q = quote(&long);
        assert!(q.len() < 80, "{} characters", q.len());
        assert!(q.contains("100000 characters"), "{q}");
        assert_eq!(quote("vram"), "`vram`");
    }
}
