//! A finding's evidence for people: each key said in words, each number in its unit, and
//! nothing empty. report.json keeps the evidence as its rule wrote it; this is how the page,
//! the PDF and `-v` read it.
//!
//! A key's unit comes from its name's suffix (`_bytes`, `_ms`, `_c`, `_gbps`, `_share`), the
//! convention every evidence struct follows, or from a `unit` beside it (a rate's figures);
//! its words from [`WORDS`], else from the telemetry catalogue where the key is a signal's
//! name, else from the key itself. [`unworded`] names the keys that fell through, so that a
//! test holds every key a rule writes to words of its own.

use serde_json::Value;

use crate::telemetry::signals;

/// The words for evidence keys whose names are not already plain words.
const WORDS: &[(&str, &str)] = &[
    // The VRAM test's wrong reads and what their retests showed.
    ("errors", "Wrong reads"),
    ("errors_total", "Wrong reads"),
    ("stuck", "Words with stuck bits"),
    ("marginal", "Words that fail only sometimes"),
    (
        "transfer",
        "Reads wrong while the cell held the right value",
    ),
    ("address", "Reads that returned another address's data"),
    ("first_offsets", "First offsets"),
    ("placed_in_system_bytes", "Placed in system RAM"),
    ("allocated_bytes", "Allocated"),
    ("decayed", "Words that lost their value"),
    ("checks", "Checks"),
    ("after_write_s", "After the write"),
    ("clean_checks_before", "Clean checks before"),
    ("bytes", "Size"),
    ("offset", "Offset"),
    ("offset_bytes", "Offset"),
    ("hottest", "Hottest"),
    ("temperatures", "Temperatures"),
    ("held", "Held"),
    ("seen", "Seen"),
    // Runs of a workload.
    ("found_in_runs", "Runs that found it"),
    ("runs", "Runs of the workload"),
    // A rate against its floor.
    ("rate", "Rate"),
    ("measured", "Measured"),
    ("floor", "Floor"),
    ("floor_source", "Floor from"),
    ("floor_provenance", "Floor rests on"),
    ("reference", "Healthy card's rate"),
    ("spec", "Spec sheet (as kiln's kernel issues it)"),
    ("explained_by", "Explained by"),
    ("peers", "Peers"),
    ("peer_median", "Peers' median"),
    ("share_below", "Below the peers' median"),
    ("value", "Value"),
    ("slow", "Slower than its peers"),
    ("gops_per_wall_s", "Rate"),
    // PCIe.
    ("peak_h2d_gbps", "Best host-to-device rate"),
    ("peak_d2h_gbps", "Best device-to-host rate"),
    ("reached_h2d_share", "Host-to-device share of the link"),
    ("reached_d2h_share", "Device-to-host share of the link"),
    ("pcie_low_share", "Share of samples below the link's rate"),
    ("theoretical_gbps", "Link's theoretical rate"),
    ("generation", "Generation"),
    ("generation_max", "Highest generation"),
    ("width", "Lanes"),
    ("width_max", "Most lanes"),
    ("corruption", "Corrupted transfer"),
    ("differing_bytes", "Bytes that differ"),
    ("what", "What"),
    ("allowed_per_minute", "Allowed a minute"),
    ("minutes", "Minutes"),
    // Counters and rates of errors.
    ("counter_deltas", "Growth during the phase"),
    ("per_minute", "A minute"),
    ("budget_per_minute", "Allowed a minute"),
    ("budget_per_s", "Allowed a second"),
    ("corrected_per_s", "Corrected a second"),
    ("counts", "Counts"),
    ("crc_data", "Data CRC errors"),
    ("crc_flit", "Flit CRC errors"),
    ("recovery", "Recoveries"),
    ("replay", "Replays"),
    ("link", "Link"),
    ("source", "Source"),
    ("source_problems", "Source problems"),
    ("xid_79", "Xid 79 (fallen off the bus)"),
    ("xid_92", "Xid 92 (high single-bit ECC rate)"),
    // Clocks, heat and power.
    ("throttle_share", "Share of samples throttled"),
    ("hw_slowdown", "Hardware slowdown"),
    ("hw_thermal_slowdown", "Hardware thermal slowdown"),
    ("sw_thermal_slowdown", "Software thermal slowdown"),
    ("hw_power_brake_slowdown", "Hardware power brake"),
    ("limit_c", "Limit"),
    ("thermal_margin_c", "Margin kept below the limit"),
    ("sm", "SM clock"),
    ("memory", "Memory clock"),
    ("duty", "Duty"),
    ("levels", "Load levels"),
    ("pauses", "Pauses"),
    ("idle_reached", "Idle reached"),
    ("faults", "Faults"),
    ("figures", "Figures"),
    ("lost", "Lost"),
    ("resets", "Resets"),
    ("host_power", "Host power"),
    ("cpu_checks", "CPU checks"),
    ("cpu_wrong", "Wrong CPU results"),
    ("setting", "Setting"),
    ("settings", "Settings"),
    ("other_settings", "Other settings"),
    ("words", "In words"),
    ("restore", "To restore"),
    ("shown_by", "Shown by"),
    // Wrong results.
    ("records", "Record"),
    ("mismatches", "Mismatches"),
    ("nonfinite", "Not-a-number or infinite results"),
    ("failed_checks", "Failed checks"),
    ("per_kind", "By kind"),
    ("checksum_mismatches", "Checksum mismatches"),
    ("redundant_mismatches", "Redundant-computation mismatches"),
    ("invalid_values", "Invalid values"),
    ("located", "Located"),
    ("actual", "Read"),
    ("actual_bits", "Read (bits)"),
    ("expected", "Expected"),
    ("first_invocation", "First invocation"),
    ("second_invocation", "Second invocation"),
    ("second_workgroup", "Second workgroup"),
    ("col", "Column"),
    ("at", "At"),
    // Processes, Xids, resets.
    ("other_processes", "Other processes"),
    ("arrived", "Arrived during the run"),
    ("first_seen_ms", "First seen"),
    ("rate_changes", "Rate changes"),
    ("rates", "Rates"),
    ("cost_free_share", "Free memory they took"),
    ("used_bytes", "Memory used"),
    ("raised_by", "Raised by"),
    ("kiln", "kiln's own"),
    ("seen_by", "Seen by"),
    ("worst_code", "Worst code"),
    ("codes", "Codes"),
    ("xids", "Xids"),
    ("xid", "Xid"),
    ("pid", "PID"),
    ("bus_id", "PCI bus id"),
    ("kernel_us", "Kernel time"),
    ("logged_unix_us", "Logged at (Unix time)"),
    ("before_run", "Before the run"),
    ("driver_resets", "Driver resets"),
    ("evidence", "Evidence"),
    ("t_ms", "Time into the run"),
    ("at_ms", "At"),
    ("at_s", "At"),
    ("cut_short", "Cut short"),
    ("not_run", "Not run"),
    ("running", "Running"),
    ("engine_stalled", "Engine stalled"),
    ("memory_flat", "Memory flat before it"),
    ("memory_bytes", "Memory held"),
    ("lost_at_ms", "Lost at"),
    // An application's memory.
    ("baseline_bytes", "Baseline"),
    ("baseline_first_bytes", "First baseline"),
    ("baseline_last_bytes", "Last baseline"),
    ("baseline_bytes_per_iteration", "Baseline growth"),
    ("budget_bytes", "Budget"),
    ("bytes_per_iteration", "Growth"),
    ("bytes_per_minute", "Growth"),
    ("by_time", "Judged by time"),
    ("cached_bytes", "Cached by the framework"),
    ("card_used_bytes", "Card's memory in use"),
    ("failed_at_ms", "Failed at"),
    ("ended_at_ms", "Ended at"),
    ("fit_r2", "Fit (R²)"),
    ("floor_steps_bytes", "Baseline steps"),
    ("free_bytes", "Free"),
    ("largest_free_span_bytes", "Largest free span"),
    ("leaking_allocations", "Leaking allocations"),
    ("leaking_size_class_bytes", "Leaking size"),
    ("live_allocations", "Live allocations"),
    ("max_allocations", "Most allocations"),
    ("peak_bytes", "Peak"),
    ("peak_bytes_per_iteration", "Peak growth"),
    ("request_bytes", "Request"),
    ("reserved_bytes", "Reserved by the framework"),
    ("seconds_until_budget", "Until the budget is reached"),
    ("at_failure_bytes", "Held at the failure"),
    ("before_bytes", "Held before"),
    ("refusals", "Refusal"),
    ("residuals", "Left after the round"),
    ("allocator_bytes", "Held by the allocator"),
    ("raw_allocations", "Raw allocations"),
    ("usage_bytes", "Usage"),
    ("last_error_line", "Last error line"),
    ("exit_code", "Exit code"),
    ("unseen", "Not seen"),
    ("decisive", "Decides the verdict"),
    ("said", "Said"),
    ("findings", "Findings"),
    ("failure", "Failure"),
    ("framework", "Framework"),
    ("iterations", "Iterations"),
    ("result", "Result"),
    ("processes", "Processes"),
    ("application", "The application's"),
    // The device and its driver.
    ("device_id", "Device id"),
    ("vendor_id", "Vendor id"),
    ("pci_address", "PCI address"),
    ("mig_enabled", "MIG on"),
    ("nvml_driver_version", "Driver version (NVML)"),
    ("vulkan_driver_version", "Driver version (Vulkan)"),
    ("file", "File"),
];

/// What a key's numbers are measured in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Bytes,
    /// Bytes in a span of something: `768 MiB an iteration`.
    BytesPer(&'static str),
    Milliseconds,
    Microseconds,
    Seconds,
    Celsius,
    Watts,
    Megahertz,
    Millijoules,
    GigabytesPerSecond,
    /// A share, 0 to 1, said in percent.
    Share,
    Percent,
    PerMinute,
    PerSecond,
    /// A place or a mask, said in hex.
    Hex,
    /// A unit named beside the figures (`"unit": "GB/s"`).
    Named(&'static str),
    None,
}

/// The suffixes of key names that carry a unit, longest first.
const SUFFIXES: &[(&str, Unit)] = &[
    ("_per_minute", Unit::PerMinute),
    ("_per_s", Unit::PerSecond),
    ("_bytes", Unit::Bytes),
    ("_gbps", Unit::GigabytesPerSecond),
    ("_share", Unit::Share),
    ("_mhz", Unit::Megahertz),
    ("_pct", Unit::Percent),
    ("_mj", Unit::Millijoules),
    ("_ms", Unit::Milliseconds),
    ("_us", Unit::Microseconds),
    ("_s", Unit::Seconds),
    ("_c", Unit::Celsius),
    ("_w", Unit::Watts),
];

/// The unit of `key`'s numbers: by its name, or `named` where its object names one.
fn unit_of(key: &str, named: Option<&'static str>) -> Unit {
    if ["offset", "offsets", "offset_bytes", "mask", "masks"]
        .iter()
        .any(|w| key == *w || key.ends_with(&format!("_{w}")))
    {
        return Unit::Hex;
    }
    match key {
        "bytes" => return Unit::Bytes,
        "bytes_per_iteration" | "baseline_bytes_per_iteration" | "peak_bytes_per_iteration" => {
            return Unit::BytesPer("an iteration");
        }
        "bytes_per_minute" => return Unit::BytesPer("a minute"),
        "seconds_until_budget" => return Unit::Seconds,
        "gops_per_wall_s" => return Unit::Named("Gop/s"),
        _ => {}
    }
    if key.starts_with("share_") {
        return Unit::Share;
    }
    if let Some((_, unit)) = SUFFIXES.iter().find(|(s, _)| key.ends_with(s)) {
        return *unit;
    }
    if let Some(unit) = named.filter(|_| {
        [
            "measured",
            "floor",
            "reference",
            "spec",
            "value",
            "peer_median",
        ]
        .contains(&key)
    }) {
        return Unit::Named(unit);
    }
    Unit::None
}

/// The words for `key`, and whether they are its own (not just the key respelled).
fn words_of(key: &str) -> (String, bool) {
    if let Some((_, words)) = WORDS.iter().find(|(k, _)| *k == key) {
        return ((*words).to_owned(), true);
    }
    // A plain word is itself, before any signal of that name (a process's `name` is not
    // the card's marketing name).
    if is_plain(key) {
        return (crate::text::upper_first(key), true);
    }
    if let Some(name) = signals::Name::parse(key) {
        return (family_words(name), true);
    }
    let bare = SUFFIXES
        .iter()
        .find_map(|(s, _)| key.strip_suffix(s))
        .unwrap_or(key);
    (crate::text::upper_first(&bare.replace('_', " ")), false)
}

/// A signal's words from its line in the catalogue: the line up to its first clause
/// (`Uncorrectable ECC errors since the driver loaded`).
fn signal_words(about: &str) -> String {
    let cut = about
        .find(['(', ':', ';', '.'])
        .map_or(about, |at| &about[..at]);
    let cut = cut.trim().trim_end_matches(',');
    crate::text::upper_first(cut.strip_prefix("The ").unwrap_or(cut))
}

/// A family member's words: `Fan 0`, `RAS gfx uncorrectable`.
fn family_words(name: signals::Name) -> String {
    match name {
        signals::Name::Fixed(s) => signal_words(s.about),
        signals::Name::Fan(i) => format!("Fan {i}"),
        signals::Name::EccAt { total, location } => {
            format!("{} in {location}", signal_words(total.about))
        }
        signals::Name::Ras { block, uncorrected } => format!(
            "RAS {block} {}",
            if uncorrected {
                "uncorrectable errors"
            } else {
                "corrected errors"
            }
        ),
        signals::Name::Hwmon(rest) => format!("Sensor {}", rest.replace('_', " ")),
        signals::Name::Nvlink { link, part } => format!("NVLink {link} {}", part.name()),
    }
}

/// A finding's evidence as labelled rows for people: keys in words, numbers in their
/// units, offsets and masks in hex, a list's repeats said once with their count, a
/// statistic as one row, nested objects under their parent's words, nothing empty.
pub fn evidence_rows(evidence: &Value) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    flatten(&[], None, evidence, Outer::default(), &mut rows);
    rows
}

/// The keys of `evidence` that have no words of their own (said as the key respelled).
pub fn unworded(evidence: &Value) -> Vec<String> {
    let mut keys = Vec::new();
    collect_unworded(evidence, &mut keys);
    keys.sort();
    keys.dedup();
    keys
}

fn collect_unworded(value: &Value, keys: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if !words_of(k).1 {
                    keys.push(k.clone());
                }
                collect_unworded(v, keys);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_unworded(v, keys)),
        _ => {}
    }
}

/// Keys that are plain words as they stand.
fn is_plain(key: &str) -> bool {
    [
        "phase",
        "phases",
        "process",
        "name",
        "kind",
        "check",
        "item",
        "round",
        "row",
        "tile",
        "thread",
        "workgroup",
        "input",
        "direction",
        "driver",
        "message",
        "code",
        "count",
        "uuid",
        "cause",
        "signal",
        "call",
        "min",
        "median",
        "max",
        "samples",
        "unit",
    ]
    .contains(&key)
}

/// The words of a row under `path` (the words of each parent), ending with `key`'s.
fn label(path: &[String], key: &str) -> String {
    let mut parts: Vec<String> = path.to_vec();
    parts.push(words_of(key).0);
    parts.join(" · ")
}

/// The unit an object gives its members: a unit named in it (`"unit": "GB/s"`), or its own
/// key's (the members of `throttle_share` are shares).
#[derive(Clone, Copy, Default)]
struct Outer {
    named: Option<&'static str>,
    unit: Option<Unit>,
}

impl Outer {
    /// The unit of member `key`: its own, else the one its object gives.
    fn unit_of(self, key: &str) -> Unit {
        match (unit_of(key, self.named), self.unit) {
            (Unit::None, Some(unit)) => unit,
            (unit, _) => unit,
        }
    }
}

fn flatten(
    path: &[String],
    key: Option<&str>,
    value: &Value,
    outer: Outer,
    rows: &mut Vec<(String, String)>,
) {
    match (key, value) {
        (_, Value::Null) => {}
        (Some(k), Value::Object(map)) if is_stat(map) => {
            rows.push((label(path, k), stat(map, unit_of(k, None))));
        }
        (prefix, Value::Object(map)) => {
            let mut inner = path.to_vec();
            if let Some(k) = prefix {
                inner.push(words_of(k).0);
            }
            let named = map.get("unit").and_then(Value::as_str).and_then(known_unit);
            let inner_outer = Outer {
                named: named.or(outer.named),
                unit: prefix
                    .map(|k| unit_of(k, None))
                    .filter(|u| *u != Unit::None)
                    .or(outer.unit),
            };
            for (k, v) in map {
                if k == "unit" && named.is_some() {
                    continue;
                }
                flatten(&inner, Some(k), v, inner_outer, rows);
            }
        }
        (Some(_), Value::Array(items)) if items.is_empty() => {}
        (Some(k), Value::Array(items)) if items.iter().all(|v| !v.is_object()) => {
            let unit = outer.unit_of(k);
            let said: Vec<String> = items.iter().map(|v| scalar(k, v, unit)).collect();
            rows.push((label(path, k), runs_said(&said)));
        }
        (Some(k), Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                let mut inner = path.to_vec();
                inner.push(item_title(k, i, v));
                flatten(&inner, None, v, outer, rows);
            }
        }
        (Some(_), Value::String(s)) if s.is_empty() => {}
        (Some(k), v) => {
            let unit = outer.unit_of(k);
            rows.push((label(path, k), scalar(k, v, unit)));
        }
        (None, v) => rows.push((label(path, ""), scalar("", v, Unit::None))),
    }
}

/// An item of a list of objects, titled by what it names where it names one (a rate's
/// words), else numbered: `Rates 2`.
fn item_title(key: &str, index: usize, item: &Value) -> String {
    if let Some(rate) = item
        .get("rate")
        .and_then(Value::as_str)
        .and_then(crate::product::Rate::from_name)
    {
        return rate.label().to_owned();
    }
    format!("{} {}", words_of(key).0, index + 1)
}

/// The units kiln names beside figures, as `'static` words.
fn known_unit(unit: &str) -> Option<&'static str> {
    [
        "GB/s", "GiB/s", "TFLOP/s", "TOP/s", "GFLOP/s", "GOP/s", "Gop/s",
    ]
    .into_iter()
    .find(|u| *u == unit)
}

fn is_stat(map: &serde_json::Map<String, Value>) -> bool {
    ["min", "median", "max", "samples"]
        .iter()
        .all(|k| map.contains_key(*k))
}

/// A statistic in one line: `median 83 °C (80 °C to 86 °C, 35 samples)`.
fn stat(map: &serde_json::Map<String, Value>, unit: Unit) -> String {
    let said = |k: &str| map.get(k).map_or("?".into(), |v| scalar(k, v, unit));
    let samples = map.get("samples").and_then(Value::as_u64).unwrap_or(0);
    if map.get("min") == map.get("max") {
        return format!(
            "{} ({})",
            said("median"),
            crate::text::count(samples, "sample")
        );
    }
    format!(
        "median {} ({} to {}, {})",
        said("median"),
        said("min"),
        said("max"),
        crate::text::count(samples, "sample")
    )
}

/// One value in its unit.
fn scalar(key: &str, value: &Value, unit: Unit) -> String {
    match value {
        Value::Number(n) => {
            let Some(f) = n.as_f64() else {
                return n.to_string();
            };
            number(f, n.as_u64(), unit)
        }
        Value::String(_) if key == "floor_provenance" => {
            serde_json::from_value::<crate::product::Provenance>(value.clone())
                .map_or_else(|_| value.to_string(), |p| p.words().to_owned())
        }
        Value::String(s) if key == "rate" => {
            crate::product::Rate::from_name(s).map_or_else(|| s.clone(), |r| r.label().to_owned())
        }
        Value::String(s) => s.clone(),
        Value::Bool(b) => if *b { "yes" } else { "no" }.into(),
        Value::Array(items) => runs_said(
            &items
                .iter()
                .map(|v| scalar(key, v, unit))
                .collect::<Vec<_>>(),
        ),
        other => other.to_string(),
    }
}

fn number(f: f64, whole: Option<u64>, unit: Unit) -> String {
    let plain = |x: f64| crate::units::significant(x);
    match unit {
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
        // In the unit named, unscaled: the finding's sentence says it so.
        Unit::Named(u) => format!("{} {u}", plain(f)),
        Unit::None => plain(f),
    }
}

/// A number of bytes in the unit that suits it (`768 MiB`), a negative one with its sign.
fn bytes(f: f64) -> String {
    let size = crate::units::format_bytes(f.abs().round() as u64);
    if f < 0.0 { format!("-{size}") } else { size }
}

/// Items listed once each, repeats counted: `0xfa0 (8 times), 0x1000`.
fn runs_said(items: &[String]) -> String {
    let mut said: Vec<(String, usize)> = Vec::new();
    for item in items {
        match said.iter_mut().find(|(s, _)| s == item) {
            Some((_, n)) => *n += 1,
            None => said.push((item.clone(), 1)),
        }
    }
    said.into_iter()
        .map(|(s, n)| if n > 1 { format!("{s} ({n} times)") } else { s })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::{evidence_rows, unworded};

    fn said<'a>(rows: &'a [(String, String)], label: &str) -> &'a str {
        rows.iter()
            .find(|(l, _)| l == label)
            .map(|(_, v)| v.as_str())
            .unwrap_or("absent")
    }

    #[test]
    fn evidence_reads_as_words_with_units_in_hex_with_repeats_said_once() {
        let rows = evidence_rows(&serde_json::json!({
            "first_offsets": [4000, 4000, 4000, 8192],
            "errors": 89,
            "found_in_runs": 4,
            "peak_h2d_gbps": 12.3456,
            "link": {"width": 16.0},
            "address": 0,
            "stuck": 1,
            "explained_by": [],
            "free_bytes": 3221225472u64,
            "hbm_temp_c": {"min": 80.0, "median": 83.0, "max": 86.0, "samples": 35},
            "reached_h2d_share": 0.412,
        }));
        assert_eq!(said(&rows, "First offsets"), "0xfa0 (3 times), 0x2000");
        assert_eq!(said(&rows, "Wrong reads"), "89");
        assert_eq!(said(&rows, "Runs that found it"), "4");
        assert_eq!(said(&rows, "Best host-to-device rate"), "12.3 GB/s");
        assert_eq!(said(&rows, "Link · Lanes"), "16");
        assert_eq!(
            said(&rows, "Reads that returned another address's data"),
            "0",
            "a count of address faults is a count, never a place"
        );
        assert_eq!(said(&rows, "Words with stuck bits"), "1");
        assert_eq!(said(&rows, "Explained by"), "absent", "nothing empty");
        assert_eq!(said(&rows, "Free"), "3.00 GiB");
        assert_eq!(
            said(&rows, "Memory temperature"),
            "median 83 °C (80 °C to 86 °C, 35 samples)"
        );
        assert_eq!(said(&rows, "Host-to-device share of the link"), "41.2%");
    }

    #[test]
    fn members_take_their_object_s_unit_and_small_sizes_are_bytes() {
        let rows = evidence_rows(&serde_json::json!({
            "throttle_share": {"sw_thermal_slowdown": 1.0, "hw_slowdown": 0.25},
            "levels": [{"duty": 0.1, "gops_per_wall_s": 18.5}],
            "corruption": [{"differing_bytes": 1, "bytes": 1048576}],
            "before_bytes": 0,
            "share_below": 0.2,
            "rates": [{"rate": "vram_gib_per_s", "unit": "GB/s", "floor": 3225.0,
                       "floor_provenance": "measured_share"}],
        }));
        assert_eq!(
            said(
                &rows,
                "Share of samples throttled · Software thermal slowdown"
            ),
            "100%"
        );
        assert_eq!(
            said(&rows, "Share of samples throttled · Hardware slowdown"),
            "25%"
        );
        assert_eq!(said(&rows, "Load levels 1 · Rate"), "18.5 Gop/s");
        assert_eq!(
            said(&rows, "Corrupted transfer 1 · Bytes that differ"),
            "1 byte"
        );
        assert_eq!(said(&rows, "Corrupted transfer 1 · Size"), "1 MiB");
        assert_eq!(said(&rows, "Held before"), "0 bytes");
        assert_eq!(said(&rows, "Below the peers' median"), "20%");
        assert_eq!(
            said(&rows, "VRAM streaming · Floor rests on"),
            "the spec sheet times a share measured on GPUs of several products"
        );
    }

    #[test]
    fn a_rate_is_said_by_its_words_in_the_unit_beside_it() {
        let rows = evidence_rows(&serde_json::json!({
            "phase": "vram",
            "rates": [{"rate": "vram_gib_per_s", "unit": "GB/s", "measured": 4.9,
                       "floor": 3225.0, "reference": 4300.0}],
        }));
        assert_eq!(said(&rows, "VRAM streaming · Rate"), "VRAM streaming");
        assert_eq!(said(&rows, "VRAM streaming · Floor"), "3225 GB/s");
        assert_eq!(said(&rows, "VRAM streaming · Measured"), "4.90 GB/s");
        assert!(rows.iter().all(|(l, _)| !l.contains("Unit")), "{rows:?}");
    }

    #[test]
    fn a_key_without_words_of_its_own_is_named() {
        let evidence = serde_json::json!({"errors": 1, "ecc_uncorrected_volatile": 2,
            "frobnicated_total": 3, "records": [{"row": 1, "wobble_ms": 2}]});
        assert_eq!(unworded(&evidence), ["frobnicated_total", "wobble_ms"]);
    }
}
