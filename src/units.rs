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

/// Human size: `1.50 GiB`, `256 MiB`.
pub fn format_bytes(bytes: u64) -> String {
    if bytes >= GIB {
        format!("{:.2} GiB", to_gib(bytes))
    } else {
        format!("{} MiB", bytes / MIB)
    }
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

/// Parses `90`, `500ms`, `30s`, `5m`, `2h` (a bare number is seconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, unit) = number_and_unit(t);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{} is not a duration (try 90s, 5m or 2h)", quote(text)))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit {} (use ms, s, m or h)",
                quote(other)
            ));
        }
    };
    if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
        return Err(format!("{} is not a usable duration", quote(text)));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3 fortnights").is_err());
    }

    #[test]
    fn sizes_format_for_people() {
        assert_eq!(format_bytes(3 << 29), "1.50 GiB");
        assert_eq!(format_bytes(256 * MIB), "256 MiB");
        assert_eq!(format_exact(4 * KIB), "4KiB");
        assert_eq!(format_exact(16 << 40), "16TiB");
        assert_eq!(format_exact(1000), "1000B");
    }
}
