//! The allowed range of every setting, in one place: a profile key and the flag that
//! overrides it share one range and one message, so neither accepts what the other
//! refuses. Below the profile, the command line and the workloads, which all check
//! against it.

use std::time::Duration;

use crate::units::format_exact;

/// The allowed range of a setting. A profile key and the flag that overrides it share one
/// range and one message, so neither accepts what the other refuses.
#[derive(Debug, Clone, Copy)]
pub struct Bounds<T> {
    /// Smallest allowed value.
    pub min: T,
    /// Largest allowed value.
    pub max: T,
}

/// The value a user gave, cut to a sane length for a message.
fn cut(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= 48 {
        text.to_owned()
    } else {
        format!("{}...", text.chars().take(48).collect::<String>())
    }
}

impl Bounds<Duration> {
    /// `d` (parsed from `text`) when within the range, else why not.
    pub fn check(&self, d: Duration, text: &str) -> Result<Duration, String> {
        if d < self.min || d > self.max {
            return Err(format!(
                "{} is outside {}..{}",
                cut(text),
                show(self.min),
                show(self.max)
            ));
        }
        Ok(d)
    }
}

impl Bounds<u64> {
    /// A count as written (a signed integer: `passes = -3`) when within the range and a
    /// `u32`, else why not.
    pub fn check_count(&self, v: i64) -> Result<u32, String> {
        let out_of_range = || format!("{v} is outside {}..={}", self.min, self.max);
        let unsigned = u64::try_from(v).map_err(|_| out_of_range())?;
        self.check(unsigned, &v.to_string())
            .map_err(|_| out_of_range())
            .and_then(|v| u32::try_from(v).map_err(|_| out_of_range()))
    }

    /// `v` (parsed from `text`) when within the range, else why not.
    pub fn check(&self, v: u64, text: &str) -> Result<u64, String> {
        if v < self.min || v > self.max {
            return Err(format!(
                "{} is outside {}..={}",
                cut(text),
                self.min,
                self.max
            ));
        }
        Ok(v)
    }
}

/// The allowed range of a number that is neither a count nor a size (a share, a percentage,
/// a margin in °C), closed at both ends, with the words a refusal says it in (`a share
/// between 0 and 1`). NaN and the infinities are outside every such range.
#[derive(Debug, Clone, Copy)]
pub struct NumberBounds {
    /// Smallest allowed value.
    pub min: f64,
    /// Largest allowed value.
    pub max: f64,
    /// The range in words, after "is not".
    pub words: &'static str,
}

impl NumberBounds {
    /// `v` when within the range, else why not: `1e-300 is not a percentage between 0 and
    /// 100 (0.1 at least)`.
    pub fn check(&self, v: f64) -> Result<f64, String> {
        if (self.min..=self.max).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{} is not {}", crate::text::number(v), self.words))
        }
    }
}

/// The allowed range of a size in bytes.
#[derive(Debug, Clone, Copy)]
pub struct SizeBounds {
    /// Smallest allowed size.
    pub min_bytes: u64,
    /// Largest allowed size.
    pub max_bytes: u64,
}

impl SizeBounds {
    /// `bytes` (parsed from `text`) when within the range, else why not.
    pub fn check(&self, bytes: u64, text: &str) -> Result<u64, String> {
        if bytes < self.min_bytes || bytes > self.max_bytes {
            return Err(format!(
                "{} is outside {}..{}",
                cut(text),
                format_exact(self.min_bytes),
                format_exact(self.max_bytes)
            ));
        }
        Ok(bytes)
    }
}

/// The ranges of every setting, shared by profiles and flags.
pub mod bounds {
    use super::{Bounds, NumberBounds, SizeBounds};
    use crate::units::{GIB, KIB, MIB, TIB};
    use std::time::Duration;

    /// Bytes of tested memory each planted self-test fault needs at least, so that faults
    /// (and the words address faults read from) stay sparse enough to be told apart.
    pub const SELFTEST_BYTES_PER_FAULT: u64 = 1024;

    /// `duration`, `--duration`: the budget per device, at most a week.
    pub const DURATION: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(7 * 24 * 3600),
    };
    /// `telemetry_interval`, `--telemetry-interval` (the flag also takes 0: off).
    pub const TELEMETRY_INTERVAL: Bounds<Duration> = Bounds {
        min: Duration::from_millis(10),
        max: Duration::from_secs(60),
    };
    /// `fence_timeout`, `--fence-timeout`.
    pub const FENCE_TIMEOUT: Bounds<Duration> = Bounds {
        min: Duration::from_millis(100),
        max: Duration::from_secs(600),
    };
    /// `step_timeout`, `--step-timeout`: the watchdog.
    pub const STEP_TIMEOUT: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3600),
    };
    /// `retention_delay`, `--retention-delay`.
    pub const RETENTION_DELAY: Bounds<Duration> = Bounds {
        min: Duration::from_millis(1),
        max: Duration::from_secs(24 * 3600),
    };
    /// `interval` of the resident region's checks.
    pub const RESIDENT_INTERVAL: Bounds<Duration> = Bounds {
        min: Duration::from_millis(100),
        max: Duration::from_secs(24 * 3600),
    };
    /// `hold` and `pause` of a load with pauses.
    pub const PAUSE: Bounds<Duration> = Bounds {
        min: Duration::from_millis(100),
        max: Duration::from_secs(3600),
    };
    /// `percent` of a VRAM workload, `--vram-percent`: a tenth of a percent at least, so
    /// that a share too small to hold one buffer (`1e-300`) is refused as the number it
    /// is, not found later as a device with nothing free.
    pub const VRAM_PERCENT: NumberBounds = NumberBounds {
        min: 0.1,
        max: 100.0,
        words: "a percentage between 0 and 100 (0.1 at least)",
    };
    /// `share` of the resident region: the percentage of the memory tested it holds.
    pub const RESIDENT_SHARE: NumberBounds = NumberBounds {
        min: 1.0,
        max: 50.0,
        words: "a percentage from 1 to 50 of the memory tested",
    };
    /// `threads` of the combined load's CPU part.
    pub const CPU_THREADS: Bounds<u64> = Bounds { min: 1, max: 4096 };
    /// `kiln bench compute --duration`.
    pub const BENCH_DURATION: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3600),
    };
    /// `kiln monitor --duration`.
    pub const MONITOR_DURATION: Bounds<Duration> = Bounds {
        min: Duration::from_millis(100),
        max: Duration::from_secs(7 * 24 * 3600),
    };
    /// `kiln health --max-age`.
    pub const MAX_AGE: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3650 * 24 * 3600),
    };
    /// `passes`, `--passes`.
    pub const PASSES: Bounds<u64> = Bounds {
        min: 1,
        max: 100_000,
    };
    /// `--records`: error records kept per VRAM test.
    pub const RECORDS: Bounds<u64> = Bounds {
        min: 1,
        max: 1 << 20,
    };
    /// `confirm.retest_cap`, `--retest-cap`.
    pub const RETEST_CAP: Bounds<u64> = Bounds {
        min: 1,
        max: 1 << 20,
    };
    /// `confirm.repeat`.
    pub const CONFIRM_REPEAT: Bounds<u64> = Bounds { min: 1, max: 20 };
    /// `weight` of a workload.
    pub const WEIGHT: Bounds<u64> = Bounds { min: 1, max: 100 };
    /// `rounds` of a compute or fragment workload.
    pub const ROUNDS: Bounds<u64> = Bounds {
        min: 1,
        max: 1_000_000,
    };
    /// `on_ms`, `off_ms` of a pulsed load.
    pub const PULSE_MS: Bounds<u64> = Bounds {
        min: 1,
        max: 60_000,
    };
    /// `kiln bench --repeat`.
    pub const REPEAT: Bounds<u64> = Bounds { min: 1, max: 1000 };
    /// `kiln selftest --runs`.
    pub const RUNS: Bounds<u64> = Bounds { min: 1, max: 1000 };
    /// `kiln selftest --faults`.
    pub const FAULTS: Bounds<u64> = Bounds {
        min: 1,
        max: 16_384,
    };
    /// `kiln health --expect-gpus`.
    pub const GPU_COUNT: Bounds<u64> = Bounds { min: 1, max: 4096 };
    /// `max_bytes` of a PCIe workload, `--pcie-max-bytes`: from the smallest transfer
    /// (4 KiB) up.
    pub const PCIE_MAX_BYTES: SizeBounds = SizeBounds {
        min_bytes: 4 * KIB,
        max_bytes: 16 * GIB,
    };
    /// `--max-buffer`: test buffers are whole MiB.
    pub const MAX_BUFFER_BYTES: SizeBounds = SizeBounds {
        min_bytes: MIB,
        max_bytes: 16 * TIB,
    };
    /// `kiln bench vram --bytes`: at least eight buffers of a whole MiB (the copy moves
    /// halves); the device's memory bounds it from above.
    pub const BENCH_BYTES: SizeBounds = SizeBounds {
        min_bytes: 8 * MIB,
        max_bytes: 16 * TIB,
    };
    /// `kiln selftest --vram-bytes`: at least four buffers of a whole MiB (so offsets past
    /// the first buffer are checked); the faults and the device's memory bound it further.
    pub const SELFTEST_BYTES: SizeBounds = SizeBounds {
        min_bytes: 4 * MIB,
        max_bytes: 16 * TIB,
    };
}

/// A duration as the ranges say it (`1h`, `30s`, `100ms`).
fn show(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 1.0 {
        format!("{s}s")
    } else {
        format!("{}ms", s * 1e3)
    }
}
