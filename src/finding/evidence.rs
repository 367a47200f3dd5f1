//! A finding's evidence, typed: each fact carries its unit in its type (bytes, seconds,
//! shares, temperatures, rates with their unit) and its words in the record that holds it
//! (the [`evidence!`](crate::evidence) declaration), so that report.json gets the numbers
//! under their keys and people get rows in words and units from the same facts, without a
//! table of key spellings anywhere.
//!
//! A rule fills a record declared with `evidence!`; [`Evidence::of`] keeps its JSON (what
//! report.json carries, unchanged) and its rows (what the page, the PDF and the text show).

use serde::{Deserialize, Serialize};

/// What a figure is measured in, for people.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// A plain number or count.
    None,
    /// Bytes, said in the unit that suits them (`768 MiB`).
    Bytes,
    /// Bytes in a span of something: `768 MiB an iteration`.
    BytesPer(&'static str),
    /// Milliseconds, said in seconds.
    Milliseconds,
    /// Microseconds, said in seconds.
    Microseconds,
    /// Seconds.
    Seconds,
    /// Degrees Celsius.
    Celsius,
    /// Watts.
    Watts,
    /// Megahertz.
    Megahertz,
    /// Millijoules, said in joules.
    Millijoules,
    /// Gigabytes (10^9) a second.
    GigabytesPerSecond,
    /// A share, 0 to 1, said in percent.
    Share,
    /// Percent, 0 to 100.
    Percent,
    /// A count a minute.
    PerMinute,
    /// A count a second.
    PerSecond,
    /// A place or a mask, said in hex.
    Hex,
    /// A unit named beside the figure (`GB/s`, `TFLOP/s`), unscaled.
    Named(&'static str),
}

impl Unit {
    /// `f` in this unit; `whole` is the figure as a whole number where it is one (a place
    /// in hex needs it).
    pub fn said(self, f: f64, whole: Option<u64>) -> String {
        let plain = crate::units::significant;
        match self {
            Unit::Hex => whole.map_or_else(|| plain(f), |u| format!("0x{u:x}")),
            Unit::Bytes => bytes(f),
            Unit::BytesPer(span) => format!("{} {span}", bytes(f)),
            Unit::Milliseconds => format!("{} s", plain(f / 1e3)),
            Unit::Microseconds => format!("{} s", plain(f / 1e6)),
            Unit::Seconds => format!("{} s", plain(f)),
            Unit::Celsius => format!("{} °C", plain(f)),
            Unit::Watts => format!("{} W", plain(f)),
            Unit::Megahertz => format!("{} MHz", plain(f)),
            Unit::Millijoules => format!("{} J", plain(f / 1e3)),
            Unit::GigabytesPerSecond => format!("{} GB/s", plain(f)),
            Unit::Share => format!("{}%", plain(100.0 * f)),
            Unit::Percent => format!("{}%", plain(f)),
            Unit::PerMinute => format!("{} a minute", plain(f)),
            Unit::PerSecond => format!("{} a second", plain(f)),
            Unit::Named(u) => format!("{} {u}", plain(f)),
            Unit::None => plain(f),
        }
    }
}

/// A number of bytes in the unit that suits it (`768 MiB`), a negative one with its sign.
fn bytes(f: f64) -> String {
    let size = crate::units::format_bytes(f.abs().round() as u64);
    if f < 0.0 { format!("-{size}") } else { size }
}

/// One row of evidence for people: its words, under its parents' (`Link · Lanes`), and its
/// value in its unit.
pub type Row = (String, String);

/// Rows being gathered: the words of the records the facts said now sit in.
#[derive(Debug, Default)]
pub struct Rows {
    path: Vec<String>,
    rows: Vec<Row>,
}

impl Rows {
    /// The label of a fact of `words` here.
    fn label(&self, words: &str) -> String {
        let mut parts: Vec<&str> = self.path.iter().map(String::as_str).collect();
        parts.push(words);
        parts.join(" · ")
    }

    /// One fact: `value` under `words`.
    pub fn row(&mut self, words: &str, value: String) {
        let label = self.label(words);
        self.rows.push((label, value));
    }

    /// What `say` says, under `words` (none: at this level, as a record flattened into its
    /// parent).
    pub fn within(&mut self, words: &str, say: impl FnOnce(&mut Rows)) {
        if words.is_empty() {
            say(self);
            return;
        }
        self.path.push(words.to_owned());
        say(self);
        self.path.pop();
    }

    /// The rows gathered.
    pub fn into_rows(self) -> Vec<Row> {
        self.rows
    }
}

/// How a fact, a record of facts or a list of them is said in rows.
pub trait Said {
    /// Says this under `words` in `rows`; `unit` is the unit a number of no unit of its
    /// own is in (its record's, or its signal's).
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        if let Some(line) = self.line(unit) {
            rows.row(words, line);
        }
    }

    /// This as one value, where it is a single fact (a list of facts joins them); None for
    /// a record, and for a fact with nothing to say (an empty word).
    fn line(&self, _unit: Unit) -> Option<String> {
        None
    }

    /// Whether this is a single fact (said in a list as one value of a line).
    fn is_fact(&self) -> bool {
        false
    }

    /// What an item of a list of these is titled by (a rate's words), where not numbered.
    fn title(&self) -> Option<String> {
        None
    }
}

/// Numbers: in the unit they are said in.
macro_rules! said_number {
    ($($t:ty => $whole:expr),* $(,)?) => {$(
        impl Said for $t {
            fn line(&self, unit: Unit) -> Option<String> {
                #[allow(clippy::redundant_closure_call)]
                let whole: Option<u64> = ($whole)(*self);
                Some(unit.said(*self as f64, whole))
            }
            fn is_fact(&self) -> bool {
                true
            }
        }
    )*};
}

said_number! {
    u64 => Some,
    u32 => |x: u32| Some(u64::from(x)),
    u8 => |x: u8| Some(u64::from(x)),
    usize => |x: usize| Some(x as u64),
    i64 => |x: i64| u64::try_from(x).ok(),
    i32 => |x: i32| u64::try_from(x).ok(),
    f64 => |_| None,
}

impl Said for bool {
    fn line(&self, _: Unit) -> Option<String> {
        Some(if *self { "yes" } else { "no" }.into())
    }
    fn is_fact(&self) -> bool {
        true
    }
}

impl Said for str {
    fn line(&self, _: Unit) -> Option<String> {
        (!self.is_empty()).then(|| self.to_owned())
    }
    fn is_fact(&self) -> bool {
        true
    }
}

impl Said for String {
    fn line(&self, unit: Unit) -> Option<String> {
        self.as_str().line(unit)
    }
    fn is_fact(&self) -> bool {
        true
    }
}

impl<T: Said + ?Sized> Said for &T {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        (**self).say(words, unit, rows);
    }
    fn line(&self, unit: Unit) -> Option<String> {
        (**self).line(unit)
    }
    fn is_fact(&self) -> bool {
        (**self).is_fact()
    }
    fn title(&self) -> Option<String> {
        (**self).title()
    }
}

impl<T: Said> Said for Option<T> {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        if let Some(v) = self {
            v.say(words, unit, rows);
        }
    }
    fn line(&self, unit: Unit) -> Option<String> {
        self.as_ref().and_then(|v| v.line(unit))
    }
    fn is_fact(&self) -> bool {
        self.as_ref().is_some_and(Said::is_fact)
    }
}

impl<T: Said> Said for [T] {
    /// A list of facts is one row, each value once with its count (`0xfa0 (8 times),
    /// 0x1000`); a list of records, a record each, titled by what it names or numbered.
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        if self.is_empty() {
            return;
        }
        if self.iter().all(Said::is_fact) {
            let lines: Vec<String> = self.iter().filter_map(|v| v.line(unit)).collect();
            if !lines.is_empty() {
                rows.row(words, counted(&lines));
            }
            return;
        }
        for (i, item) in self.iter().enumerate() {
            // A list of one needs no number (`Settings · Setting`, not `Settings 1 · ...`).
            let title = item.title().unwrap_or_else(|| match self.len() {
                1 => words.to_owned(),
                _ => format!("{words} {}", i + 1),
            });
            rows.within(&title, |rows| item.say("", unit, rows));
        }
    }
}

impl<T: Said> Said for Vec<T> {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        self.as_slice().say(words, unit, rows);
    }
}

impl<T: Said, const N: usize> Said for [T; N] {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        self.as_slice().say(words, unit, rows);
    }
    fn line(&self, unit: Unit) -> Option<String> {
        let lines: Vec<String> = self.iter().filter_map(|v| v.line(unit)).collect();
        (self.iter().all(Said::is_fact) && !lines.is_empty()).then(|| lines.join(", "))
    }
    fn is_fact(&self) -> bool {
        self.iter().all(Said::is_fact)
    }
}

impl<A: Said, B: Said, C: Said> Said for (A, B, C) {
    /// A triple of facts, said as one line of its three values.
    fn line(&self, unit: Unit) -> Option<String> {
        let parts: Vec<String> = [self.0.line(unit), self.1.line(unit), self.2.line(unit)]
            .into_iter()
            .flatten()
            .collect();
        Some(parts.join(", "))
    }
    fn is_fact(&self) -> bool {
        true
    }
}

/// Items listed once each, repeats counted: `0xfa0 (8 times), 0x1000`.
fn counted(items: &[String]) -> String {
    let mut said: Vec<(&str, usize)> = Vec::new();
    for item in items {
        match said.iter_mut().find(|(s, _)| s == item) {
            Some((_, n)) => *n += 1,
            None => said.push((item, 1)),
        }
    }
    said.into_iter()
        .map(|(s, n)| {
            if n > 1 {
                format!("{s} ({n} times)")
            } else {
                s.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A figure in a unit of its own: the type says how it reads, report.json has the number.
macro_rules! unit_type {
    ($($(#[$doc:meta])* $name:ident => $unit:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name<N = f64>(pub N);

        impl<N: Said> Said for $name<N> {
            fn line(&self, _: Unit) -> Option<String> {
                self.0.line($unit)
            }
            fn is_fact(&self) -> bool {
                true
            }
        }
    )*};
}

unit_type! {
    /// Bytes.
    Bytes => Unit::Bytes;
    /// Bytes an iteration.
    BytesPerIteration => Unit::BytesPer("an iteration");
    /// Bytes a minute.
    BytesPerMinute => Unit::BytesPer("a minute");
    /// Milliseconds (since the run started, or long).
    Millis => Unit::Milliseconds;
    /// Microseconds.
    Micros => Unit::Microseconds;
    /// Seconds.
    Seconds => Unit::Seconds;
    /// Degrees Celsius.
    Celsius => Unit::Celsius;
    /// Watts.
    Watts => Unit::Watts;
    /// Megahertz.
    Mhz => Unit::Megahertz;
    /// Millijoules.
    Millijoules => Unit::Millijoules;
    /// Gigabytes (10^9) a second.
    GBps => Unit::GigabytesPerSecond;
    /// A share, 0 to 1.
    Share => Unit::Share;
    /// Percent, 0 to 100.
    Percent => Unit::Percent;
    /// A count a minute.
    PerMinute => Unit::PerMinute;
    /// A count a second.
    PerSecond => Unit::PerSecond;
    /// A place (an offset) or a mask.
    Hex => Unit::Hex;
}

/// A figure in a unit named at run time (a rate in its product's unit: `GB/s`,
/// `TFLOP/s`): report.json has the number, people read it with its unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// The figure.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
}

impl Serialize for Figure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(s)
    }
}

impl Said for Figure {
    fn line(&self, _: Unit) -> Option<String> {
        Some(Unit::Named(self.unit).said(self.value, None))
    }
    fn is_fact(&self) -> bool {
        true
    }
}

/// Members of a record said in the unit it gives them (a record of shares).
pub struct InUnit<T>(pub T, pub Unit);

impl<T: Serialize> Serialize for InUnit<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<T: Said> Said for InUnit<T> {
    fn say(&self, words: &str, _: Unit, rows: &mut Rows) {
        self.0.say(words, self.1, rows);
    }
    fn line(&self, _: Unit) -> Option<String> {
        self.0.line(self.1)
    }
    fn is_fact(&self) -> bool {
        self.0.is_fact()
    }
}

/// How a field of an evidence record is said: under its words, flattened into its record
/// (a record of signals' readings), or not at all (a unit named beside figures that carry
/// it already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    /// Under these words.
    Said(&'static str),
    /// Its members at the record's own level.
    Flat,
    /// Not said: report.json only.
    Hidden,
}

impl Words {
    /// Says `value` so in `rows`.
    pub fn say(self, value: &dyn Said, unit: Unit, rows: &mut Rows) {
        match self {
            Words::Said(words) => value.say(words, unit, rows),
            Words::Flat => value.say("", unit, rows),
            Words::Hidden => {}
        }
    }
}

/// Declares an evidence record: a struct whose fields are each declared with their words
/// (`=> "Wrong reads"`), or `=> flat` (its members at the record's own level) or `=>
/// hidden` (in report.json only). It derives `Serialize` (report.json's keys are the
/// fields' names, its attributes are kept) and [`Said`](crate::finding::Said) (the rows).
/// A trailing `title(record) = ...;` titles the record as an item of a list by what it
/// names (a rate's words) rather than by its number.
#[macro_export]
macro_rules! evidence {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident : $fty:ty => $words:tt
            ),* $(,)?
        }
        $(title($record:ident) = $title:expr;)?
    ) => {
        $(#[$meta])*
        #[derive(serde::Serialize)]
        $vis struct $name $(<$lt>)? {
            $(
                $(#[$fmeta])*
                $fvis $field: $fty,
            )*
        }

        impl $(<$lt>)? $crate::finding::Said for $name $(<$lt>)? {
            fn say(
                &self,
                words: &str,
                unit: $crate::finding::Unit,
                rows: &mut $crate::finding::Rows,
            ) {
                rows.within(words, |rows| {
                    $(
                        $crate::evidence_words!($words).say(&self.$field, unit, rows);
                    )*
                });
            }
            $(
                fn title(&self) -> Option<String> {
                    let $record = self;
                    Some($title)
                }
            )?
        }
    };
}

/// The [`Words`] of a field of an [`evidence!`](crate::evidence) record.
#[macro_export]
macro_rules! evidence_words {
    (flat) => {
        $crate::finding::Words::Flat
    };
    (hidden) => {
        $crate::finding::Words::Hidden
    };
    ($words:literal) => {
        $crate::finding::Words::Said($words)
    };
}

/// Says an existing record (a workload's result's records, kept in report.json as they
/// are) in rows: each field with its words, and where its numbers carry no unit of their
/// own, the unit they are in (`duty => "Duty" in Unit::Share`).
#[macro_export]
macro_rules! said_record {
    ($ty:ty { $($field:ident => $words:literal $(in $unit:expr)?),* $(,)? }) => {
        impl $crate::finding::Said for $ty {
            fn say(
                &self,
                words: &str,
                unit: $crate::finding::Unit,
                rows: &mut $crate::finding::Rows,
            ) {
                let _ = unit;
                rows.within(words, |rows| {
                    $(
                        $crate::finding::Said::say(
                            &self.$field,
                            $words,
                            $crate::said_unit!(unit $(, $unit)?),
                            rows,
                        );
                    )*
                });
            }
        }
    };
}

/// The unit of a field of a [`said_record!`](crate::said_record): its own, else its
/// record's.
#[macro_export]
macro_rules! said_unit {
    ($outer:ident) => {
        $outer
    };
    ($outer:ident, $unit:expr) => {
        $unit
    };
}

/// Says a word of a fixed list (an enum of kiln's records) as report.json spells it.
#[macro_export]
macro_rules! said_by_name {
    ($($ty:ty),* $(,)?) => {$(
        impl $crate::finding::Said for $ty {
            fn line(&self, _: $crate::finding::Unit) -> Option<String> {
                serde_json::to_value(self)
                    .ok()
                    .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
            }
            fn is_fact(&self) -> bool {
                true
            }
        }
    )*};
}

/// A finding's evidence: what report.json carries under `evidence` (as the rule's record
/// serializes it) and the rows people read of it. A report read back from its file keeps
/// the first alone: the rows are the judging kiln's.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    json: serde_json::Value,
    rows: Vec<Row>,
}

impl Evidence {
    /// The evidence of a record.
    pub fn of<T: Serialize + Said + ?Sized>(record: &T) -> Evidence {
        let mut rows = Rows::default();
        record.say("", Unit::None, &mut rows);
        Evidence {
            // A record of plain fields always serializes; a failure would be said in the
            // evidence itself, never lose the finding.
            json: serde_json::to_value(record)
                .unwrap_or_else(|e| serde_json::json!({"evidence_not_serialized": e.to_string()})),
            rows: rows.into_rows(),
        }
    }

    /// As report.json carries it.
    pub fn json(&self) -> &serde_json::Value {
        &self.json
    }

    /// As people read it: each fact in words, in its unit, nothing empty.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }
}

impl PartialEq for Evidence {
    fn eq(&self, other: &Evidence) -> bool {
        self.json == other.json
    }
}

impl Serialize for Evidence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Evidence {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Evidence {
            json: serde_json::Value::deserialize(d)?,
            rows: Vec::new(),
        })
    }
}

impl Said for Evidence {
    /// Its rows again, under `words`: a merged finding's phases, a finding with how many
    /// runs found it.
    fn say(&self, words: &str, _: Unit, rows: &mut Rows) {
        rows.within(words, |rows| {
            for (label, value) in &self.rows {
                rows.row(label, value.clone());
            }
        });
    }
}

impl Said for crate::product::Provenance {
    /// Where a floor comes from, in words.
    fn line(&self, _: Unit) -> Option<String> {
        Some(self.words().to_owned())
    }
    fn is_fact(&self) -> bool {
        true
    }
}

/// A rate by its name: as report.json names it (`vram_gib_per_s`), and for people by its
/// words where it is a product's rate (`VRAM streaming`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateName<'a>(pub &'a str);

impl Serialize for RateName<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl Said for RateName<'_> {
    fn line(&self, _: Unit) -> Option<String> {
        Some(crate::units::rate_words(self.0))
    }
    fn is_fact(&self) -> bool {
        true
    }
}

/// A record titled by what it names, as an item of a list (a rate's words): the record
/// alone in report.json.
pub struct Titled<T> {
    /// Its title.
    pub title: String,
    /// The record.
    pub record: T,
}

impl<T: Serialize> Serialize for Titled<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.record.serialize(s)
    }
}

impl<T: Said> Said for Titled<T> {
    fn say(&self, words: &str, unit: Unit, rows: &mut Rows) {
        self.record.say(words, unit, rows);
    }
    fn title(&self) -> Option<String> {
        Some(self.title.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::evidence! {
        /// A link as a record of its own.
        struct Link {
            width: u32 => "Lanes",
        }
    }

    crate::evidence! {
        /// A record of every kind of fact.
        struct Everything {
            first_offsets: Vec<Hex<u64>> => "First offsets",
            errors: u64 => "Wrong reads",
            peak_h2d_gbps: GBps => "Best host-to-device rate",
            link: Link => "Link",
            explained_by: Vec<String> => "Explained by",
            free_bytes: Bytes<u64> => "Free",
            before_bytes: Bytes<u64> => "Held before",
            differing: Bytes<u64> => "Bytes that differ",
            reached: Share => "Host-to-device share of the link",
            failed_at_ms: Millis => "Failed at",
            growth: BytesPerIteration => "Growth",
            nothing: Option<u64> => "Absent",
            unit: &'static str => hidden,
            measured: Figure => "Measured",
        }
    }

    fn said<'a>(rows: &'a [Row], label: &str) -> &'a str {
        rows.iter()
            .find(|(l, _)| l == label)
            .map(|(_, v)| v.as_str())
            .unwrap_or("absent")
    }

    #[test]
    fn each_fact_reads_in_its_words_and_unit_and_report_json_keeps_its_numbers() {
        let record = Everything {
            first_offsets: [4000, 4000, 4000, 8192].map(Hex).to_vec(),
            errors: 89,
            peak_h2d_gbps: GBps(12.3456),
            link: Link { width: 16 },
            explained_by: Vec::new(),
            free_bytes: Bytes(3_221_225_472),
            before_bytes: Bytes(0),
            differing: Bytes(1),
            reached: Share(0.412),
            failed_at_ms: Millis(85_700.0),
            growth: BytesPerIteration(805_306_368.0),
            nothing: None,
            unit: "GB/s",
            measured: Figure {
                value: 4.9,
                unit: "GB/s",
            },
        };
        let e = Evidence::of(&record);
        let rows = e.rows();
        assert_eq!(said(rows, "First offsets"), "0xfa0 (3 times), 0x2000");
        assert_eq!(said(rows, "Wrong reads"), "89");
        assert_eq!(said(rows, "Best host-to-device rate"), "12.3 GB/s");
        assert_eq!(said(rows, "Link · Lanes"), "16");
        assert_eq!(said(rows, "Explained by"), "absent", "nothing empty");
        assert_eq!(said(rows, "Absent"), "absent", "nothing unknown");
        assert_eq!(said(rows, "Free"), "3.00 GiB");
        assert_eq!(said(rows, "Held before"), "0 bytes");
        assert_eq!(said(rows, "Bytes that differ"), "1 byte");
        assert_eq!(said(rows, "Host-to-device share of the link"), "41.2%");
        assert_eq!(said(rows, "Failed at"), "85.7 s");
        assert_eq!(said(rows, "Growth"), "768 MiB an iteration");
        assert_eq!(said(rows, "Measured"), "4.90 GB/s");
        assert!(rows.iter().all(|(l, _)| !l.contains("unit")), "{rows:?}");
        // In the order the record declares them.
        assert_eq!(rows[0].0, "First offsets");
        // report.json: the numbers under the fields' names, units in no key.
        assert_eq!(e.json()["free_bytes"], 3_221_225_472u64);
        assert_eq!(e.json()["failed_at_ms"], 85_700.0);
        assert_eq!(e.json()["first_offsets"][0], 4000);
        assert_eq!(e.json()["link"]["width"], 16);
        assert_eq!(e.json()["measured"], 4.9);
        assert_eq!(e.json()["unit"], "GB/s");
        assert!(e.json()["nothing"].is_null());
    }

    crate::evidence! {
        /// An item titled by what it names.
        struct Named {
            name: &'static str => "Name",
            value: Celsius => "Value",
        }
        title(n) = n.name.to_uppercase();
    }

    crate::evidence! {
        /// Items, numbered and titled, and another evidence laid in flat.
        struct Lists<'a> {
            links: Vec<Link> => "Links",
            named: Vec<Named> => "Sensors",
            #[serde(flatten)]
            within: &'a Evidence => flat,
            shares: InUnit<Vec<f64>> => "Shares",
        }
    }

    #[test]
    fn lists_of_records_are_numbered_or_titled_and_evidence_lays_in_again() {
        let inner = Evidence::of(&Link { width: 8 });
        let e = Evidence::of(&Lists {
            links: vec![Link { width: 16 }, Link { width: 4 }],
            named: vec![Named {
                name: "edge",
                value: Celsius(83.0),
            }],
            within: &inner,
            shares: InUnit(vec![1.0, 0.25], Unit::Share),
        });
        let rows = e.rows();
        assert_eq!(said(rows, "Links 1 · Lanes"), "16");
        assert_eq!(said(rows, "Links 2 · Lanes"), "4");
        // A list of one record needs no number.
        let one = Evidence::of(&Lists {
            links: vec![Link { width: 16 }],
            named: Vec::new(),
            within: &inner,
            shares: InUnit(Vec::new(), Unit::Share),
        });
        assert_eq!(said(one.rows(), "Links · Lanes"), "16");
        assert_eq!(said(rows, "EDGE · Value"), "83 °C");
        assert_eq!(
            said(rows, "Lanes"),
            "8",
            "a flattened evidence at the record's level"
        );
        assert_eq!(said(rows, "Shares"), "100%, 25%");
        assert_eq!(e.json()["width"], 8, "flattened in report.json too");
        // Read back from report.json, evidence keeps its numbers; its rows are the judging
        // kiln's.
        let back: Evidence = serde_json::from_value(e.json().clone()).unwrap();
        assert_eq!(back, e);
        assert!(back.rows().is_empty());
    }
}
