//! Units: byte sizes (the binary constants, parsing as people type them, formatting for
//! people) and durations as people type them. Every layer takes its sizes from here.

use std::time::Duration;

use crate::text::quote;

/// 2^10 bytes.
pub const KIB: u64 = 1 << 10;
/// 2^20 bytes.
pub const MIB: u64 = 1 << 20;
/// 2^30 bytes.
pub const GIB: u64 = 1 << 30;
/// 2^40 bytes.
pub const TIB: u64 = 1 << 40;

/// `bytes` in GiB (2^30 bytes), for rates and sizes shown with decimals.
pub fn to_gib(bytes: u64) -> f64 {
    bytes as f64 / GIB as f64
}

/// Human size: `1.50 GiB`, `256 MiB`, and below a MiB `64 KiB`, `12 bytes`, `1 byte`
/// (never `0 MiB` for a size that is not nothing).
pub fn format_bytes(bytes: u64) -> String {
    match bytes {
        GIB.. => format!("{:.2} GiB", to_gib(bytes)),
        MIB.. => format!("{} MiB", bytes / MIB),
        KIB.. => format!("{} KiB", significant(bytes as f64 / KIB as f64)),
        1 => "1 byte".into(),
        _ => format!("{bytes} bytes"),
    }
}

/// A rate's name for people, from the name a floors file and report.json give it, for
/// every rate a workload measures: `matrix_fp16_tflops` is `fp16 matrix rate`,
/// `matrix_int8_units_tops` `int8 matrix rate on the matrix units`, `pcie_h2d_gbps` `PCIe
/// host-to-device rate`, `vram_gib_per_s` `VRAM streaming rate`. A name of no known shape
/// is said with spaces for its underscores, never as a key.
pub fn rate_words(rate: &str) -> String {
    let stem = rate_unit(rate).map_or(rate, |(stem, ..)| stem);
    let (stem, on_units) = match stem.strip_suffix("_units") {
        Some(s) => (s, " on the matrix units"),
        None => (stem, ""),
    };
    let words = match stem.split_once('_') {
        None if stem == "vram" => "VRAM streaming rate".to_owned(),
        Some(("compute", kind)) => format!("{kind} compute rate"),
        Some(("matrix", kind)) => format!("{kind} matrix rate"),
        Some(("pcie", "h2d")) => "PCIe host-to-device rate".to_owned(),
        Some(("pcie", "d2h")) => "PCIe device-to-host rate".to_owned(),
        Some(("pcie", "bidir")) => "PCIe rate both ways at once".to_owned(),
        _ => stem.replace('_', " "),
    };
    format!("{words}{on_units}")
}

/// A rate's value for people, in the unit its name ends with as a run's summary says it,
/// scaled to the value: `compute_fp32_gops` 0.62 is `620 Mop/s`, `matrix_fp32_tflops`
/// 0.0028 is `2.80 GFLOP/s`.
pub fn rate_said(rate: &str, value: f64) -> String {
    let unit = rate_unit(rate).map_or("", |(_, said, _, _)| said);
    scaled(value, unit).trim_end().to_owned()
}

/// An exact size in the largest binary unit that divides it: `4KiB`, `16GiB`, `1000B`.
pub fn format_exact(bytes: u64) -> String {
    for (unit, scale) in [("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)] {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}B")
}

/// Splits `512MiB` into its number and its unit.
fn number_and_unit(text: &str) -> (&str, &str) {
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    (number, unit.trim())
}

/// Parses `1024`, `512MiB`, `8GiB`, `2GB`, `64KiB` (binary units for *iB, decimal for *B).
/// Whole numbers are exact; a size that does not fit in 64 bits is refused, never
/// saturated.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, unit) = number_and_unit(t);
    let scale: u64 = match unit {
        "" | "B" => 1,
        "KiB" => KIB,
        "MiB" => MIB,
        "GiB" => GIB,
        "TiB" => TIB,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "unknown size unit {} (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)",
                quote(other)
            ));
        }
    };
    let not_a_size = || format!("{} is not a size (try 512MiB or 8GiB)", quote(text));
    let too_large = || format!("{} is too large (sizes stop at 16 EiB)", quote(text));
    let bytes = if number.contains('.') {
        let value: f64 = number.parse().map_err(|_| not_a_size())?;
        let bytes = value * scale as f64;
        // 2^64 is exactly representable: anything at or above it does not fit.
        if !bytes.is_finite() || bytes >= 18_446_744_073_709_551_616.0 {
            return Err(too_large());
        }
        bytes as u64
    } else {
        if number.is_empty() {
            return Err(not_a_size());
        }
        // Digits only: too many of them is too large, not "not a size".
        let value: u64 = number.parse().map_err(|_| too_large())?;
        value.checked_mul(scale).ok_or_else(too_large)?
    };
    if bytes == 0 {
        return Err(format!("{} is not a usable size", quote(text)));
    }
    Ok(bytes)
}

/// Parses `500ms`, `30s`, `5m`, `2h`, `7d`, `2w`. A bare number other than 0 is refused:
/// `--duration 600` meant as ten minutes and `--max-age 7` meant as a week read alike, and
/// taking either as seconds silently would run or judge something nobody asked for.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = number_and_unit(t);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{} is not a duration (try 90s, 5m or 2h)", quote(text)))?;
    let seconds = match unit {
        "" if value == 0.0 => 0.0,
        "" => {
            return Err(format!(
                "{} has no unit: write it with one ({number}s, {number}m, {number}h or {number}d; units ms, s, m, h, d, w)",
                quote(text)
            ));
        }
        "s" => value,
        "ms" => value / 1e3,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86_400.0,
        "w" => value * 604_800.0,
        other => {
            return Err(format!(
                "unknown duration unit {} (use ms, s, m, h, d or w)",
                quote(other)
            ));
        }
    };
    if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
        return Err(format!("{} is not a usable duration", quote(text)));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A number with at most three significant figures and no exponent: `12.3`, `0.618`,
/// `41200`; a whole number as one.
pub fn significant(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{x:.0}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 6) as usize;
    format!("{x:.decimals$}")
}

/// A large count in words, three significant figures: `4096`, `461 million`,
/// `17.6 billion`.
pub fn large(n: f64) -> String {
    for (scale, word) in [(1e12, "trillion"), (1e9, "billion"), (1e6, "million")] {
        if n.abs() >= scale {
            return format!("{} {word}", significant(n / scale));
        }
    }
    significant(n)
}

/// A value in a unit with a metric or binary prefix (`Top/s`, `GB/s`, `GiB/s`) said in the
/// prefix that suits it, three significant figures: 0.00062 Top/s is `620 Mop/s`. A unit
/// without a prefix (`words`) is left as it is.
pub fn scaled(value: f64, unit: &str) -> String {
    const DECIMAL: [(&str, f64); 6] = [
        ("", 1.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
    ];
    const BINARY: [(&str, f64); 5] = [
        ("", 1.0),
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
    ];
    let prefixed = |table: &[(&'static str, f64)]| {
        table
            .iter()
            .filter(|(p, _)| !p.is_empty())
            .find_map(|(p, f)| {
                unit.strip_prefix(p)
                    .filter(|rest| rest.len() > 1)
                    .map(|rest| (*f, rest, table.to_vec()))
            })
    };
    let Some((factor, rest, table)) = prefixed(&BINARY).or_else(|| prefixed(&DECIMAL)) else {
        return format!("{} {unit}", significant(value));
    };
    let base = value * factor;
    let (p, f) = table
        .iter()
        .rev()
        .find(|(_, f)| base.abs() >= *f)
        .copied()
        .unwrap_or(table[0]);
    format!("{} {p}{rest}", significant(base / f))
}

/// What a rate is a rate of, in base units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateBase {
    /// Bytes per second (VRAM streaming, PCIe).
    BytesPerSecond,
    /// Operations per second (compute, matrix multiplication).
    OperationsPerSecond,
}

/// The unit a workload's rate name ends with (`compute_fp32_gops`): the name without it
/// (`compute_fp32`), the unit as people read it (`Gop/s`, to give [`scaled`]), what it is a
/// rate of and the factor to that base unit; `None` for a unit kiln does not know.
pub fn rate_unit(rate: &str) -> Option<(&str, &'static str, RateBase, f64)> {
    const UNITS: [(&str, &str, RateBase, f64); 5] = [
        ("_gib_per_s", "GiB/s", RateBase::BytesPerSecond, GIB as f64),
        ("_gbps", "GB/s", RateBase::BytesPerSecond, 1e9),
        ("_gops", "Gop/s", RateBase::OperationsPerSecond, 1e9),
        ("_tflops", "TFLOP/s", RateBase::OperationsPerSecond, 1e12),
        ("_tops", "TOP/s", RateBase::OperationsPerSecond, 1e12),
    ];
    UNITS.iter().find_map(|(suffix, said, base, factor)| {
        rate.strip_suffix(suffix)
            .map(|stem| (stem, *said, *base, *factor))
    })
}

/// A duration rounded up to a value `parse_duration` reads back, in the one unit that
/// keeps it short: `95s`, `6m`, `12h`.
pub fn duration_rounded_up(d: Duration) -> String {
    let s = d.as_secs_f64().ceil() as u64;
    if s <= 120 {
        format!("{s}s")
    } else if s <= 10 * 3600 {
        format!("{}m", s.div_ceil(60))
    } else {
        format!("{}h", s.div_ceil(3600))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rate_is_named_in_words_and_said_in_its_own_unit() {
        assert_eq!(
            format!(
                "{} {}",
                rate_words("matrix_fp16_tflops"),
                rate_said("matrix_fp16_tflops", 1.4)
            ),
            "fp16 matrix rate 1.40 TFLOP/s"
        );
        assert_eq!(
            rate_words("matrix_int8_units_tops"),
            "int8 matrix rate on the matrix units"
        );
        assert_eq!(rate_words("compute_fp32_gops"), "fp32 compute rate");
        assert_eq!(rate_words("pcie_h2d_gbps"), "PCIe host-to-device rate");
        assert_eq!(rate_words("vram_gib_per_s"), "VRAM streaming rate");
        assert_eq!(rate_said("vram_gib_per_s", 3000.0), "2.93 TiB/s");
        // The near miss: a name of no known shape is still words, never a key.
        assert_eq!(rate_words("odd_rate"), "odd rate");
    }

    #[test]
    fn large_counts_are_said_in_words() {
        assert_eq!(large(4096.0), "4096");
        assert_eq!(large(461_373_440.0), "461 million");
        assert_eq!(large(1.762e10), "17.6 billion");
    }

    #[test]
    fn values_are_said_in_the_prefix_that_suits_them() {
        assert_eq!(scaled(0.00062, "Top/s"), "620 Mop/s");
        assert_eq!(scaled(0.618, "Gop/s"), "618 Mop/s");
        assert_eq!(scaled(1979.0, "Top/s"), "1.98 Pop/s");
        assert_eq!(scaled(14.71, "GiB/s"), "14.7 GiB/s");
        assert_eq!(scaled(0.5, "GiB/s"), "512 MiB/s");
        assert_eq!(scaled(94.0, "words"), "94 words");
        assert_eq!(significant(0.6184), "0.618");
        assert_eq!(significant(12.3456), "12.3");
    }

    #[test]
    fn durations_round_up_to_one_unit_that_reads_back() {
        assert_eq!(duration_rounded_up(Duration::from_millis(94_100)), "95s");
        assert_eq!(duration_rounded_up(Duration::from_secs(323)), "6m");
        assert_eq!(
            duration_rounded_up(Duration::from_secs(11 * 3600 + 1)),
            "12h"
        );
        for d in [94_100, 323_000, 39_601_000] {
            let shown = duration_rounded_up(Duration::from_millis(d));
            assert!(parse_duration(&shown).unwrap() >= Duration::from_millis(d));
        }
    }

    #[test]
    fn sizes_parse_in_both_unit_systems() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("0").is_err());
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        for too_large in [
            "18446744073709551616",
            "16777216TiB",
            "18446744073709551616.0",
            "99999999999999999999999999999999",
            "17179869184GiB",
        ] {
            let e = parse_size(too_large).unwrap_err();
            assert!(e.contains("too large"), "{too_large}: {e}");
        }
    }

    #[test]
    fn durations_parse() {
        assert_eq!(
            parse_duration("90"),
            Err("`90` has no unit: write it with one (90s, 90m, 90h or 90d; units ms, s, m, h, d, w)".into()),
            "a bare number is refused, never taken as seconds"
        );
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert!(
            parse_duration("3y")
                .unwrap_err()
                .contains("use ms, s, m, h, d or w")
        );
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3 fortnights").is_err());
    }

    #[test]
    fn sizes_format_for_people() {
        assert_eq!(format_bytes(3 << 29), "1.50 GiB");
        assert_eq!(format_bytes(256 * MIB), "256 MiB");
        // Below a MiB a size is never said as 0 MiB.
        assert_eq!(format_bytes(64 * KIB), "64 KiB");
        assert_eq!(format_bytes(12), "12 bytes");
        assert_eq!(format_bytes(1), "1 byte");
        assert_eq!(format_bytes(0), "0 bytes");
        assert_eq!(format_exact(4 * KIB), "4KiB");
        assert_eq!(format_exact(16 << 40), "16TiB");
        assert_eq!(format_exact(1000), "1000B");
    }
}
