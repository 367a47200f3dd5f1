//! `kiln selftest`: plant known faults through the GPU between write and verify, then
//! check that every one is reported at its exact offset with its exact bits, classified
//! as what was planted, and that nothing else is reported. It proves the detectors on
//! the user's own driver.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::AppError;
use crate::evidence::MemorySink;
use crate::gpu::{DeviceContext, DeviceInfo, Vulkan};
use crate::select::select_devices;
use crate::workload::vram::algorithm::{Algorithm, Step};
use crate::workload::vram::classify::{ErrorShape, RetestClass};
use crate::workload::vram::engine::PlantedFault;
use crate::workload::vram::{VramConfig, VramReport, VramTest};
use crate::workload::{KindTest, RunControl};

/// What `kiln selftest` was asked to do.
#[derive(Debug, Clone)]
pub struct SelftestOptions {
    /// Device selectors; empty: every GPU (or the CPU device).
    pub devices: Vec<String>,
    /// Faults per run.
    pub faults: u32,
    /// Runs.
    pub runs: u32,
    /// Bytes tested per run.
    pub bytes: u64,
    /// Seed of faults and patterns.
    pub seed: u64,
    /// Bound on every wait for the device.
    pub fence_timeout: Duration,
}

impl SelftestOptions {
    /// Refuses settings that cannot work, before any device is opened: memory too small
    /// for the faults asked for.
    pub fn check(&self) -> Result<(), AppError> {
        let per_fault = crate::limits::bounds::SELFTEST_BYTES_PER_FAULT;
        let needed = u64::from(self.faults) * per_fault;
        if self.bytes < needed {
            return Err(AppError::Usage(format!(
                "--vram-bytes {} cannot hold {} planted faults: they need at least {} ({per_fault} bytes each)",
                crate::units::format_bytes(self.bytes),
                self.faults,
                crate::units::format_bytes(needed)
            )));
        }
        Ok(())
    }
}

/// The kinds of fault the self-test plants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// One bit flipped once.
    SingleBitFlip,
    /// Two to eight bits flipped once.
    MultiBitFlip,
    /// Bits stuck at 0 or 1, re-planted after every write.
    StuckAt,
    /// The word holds a neighbouring address's value (a wrong word read).
    AddressFault,
}

/// A planted fault and what it must look like when found.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Planted {
    /// Its kind.
    pub kind: FaultKind,
    /// How it was planted.
    pub fault: PlantedFault,
}

/// One run's tally.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunCheck {
    /// Device index.
    pub device: usize,
    /// Run number.
    pub run: u32,
    /// Algorithm used.
    pub algorithm: Algorithm,
    /// Faults planted, by kind.
    pub planted: HashMap<String, u32>,
    /// Reports the test must make (a stuck fault may show in several verify steps).
    pub expected_reports: u64,
    /// Reports it made.
    pub reports: u64,
    /// Reports matching a planted fault exactly (offset, bits and classification).
    pub exact: u64,
    /// Expected reports that did not come.
    pub missed: Vec<String>,
    /// Reports no planted fault explains.
    pub extra: Vec<String>,
    /// Reports at the right place with the wrong classification.
    pub misclassified: Vec<String>,
}

impl RunCheck {
    /// True when every fault was found exactly and nothing else was reported.
    pub fn passed(&self) -> bool {
        self.missed.is_empty()
            && self.extra.is_empty()
            && self.misclassified.is_empty()
            && self.exact == self.expected_reports
    }
}

/// The self-test's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SelftestReport {
    /// Devices tested.
    pub devices: Vec<String>,
    /// Notes (a CPU device only).
    pub notes: Vec<String>,
    /// Every run.
    pub runs: Vec<RunCheck>,
    /// Faults planted in all.
    pub planted_total: u64,
    /// The matrix workload's planted faults, per device: a flipped bit and a wrong tile in
    /// each kind.
    #[serde(default)]
    pub matrix: Vec<crate::workload::matrix::MatrixSelfCheck>,
    /// True when every run passed and every matrix fault was found.
    pub passed: bool,
}

/// Runs the self-test on every selected device.
pub fn selftest(opts: &SelftestOptions) -> Result<SelftestReport, AppError> {
    opts.check()?;
    let vulkan = Vulkan::new()?;
    let (devices, notes) = select_devices(&vulkan, &opts.devices)?;
    let mut runs = Vec::new();
    let mut matrix = Vec::new();
    for info in &devices {
        let mut ctx = DeviceContext::open(&vulkan, info)?;
        ctx.set_fence_timeout(opts.fence_timeout);
        for run in 0..opts.runs {
            runs.push(one_run(&mut ctx, info, opts, run)?);
        }
        matrix.extend(crate::workload::matrix::self_check(&mut ctx, opts.seed)?);
    }
    let planted_total = runs
        .iter()
        .map(|r| r.planted.values().map(|&n| u64::from(n)).sum::<u64>())
        .sum::<u64>()
        + matrix.len() as u64;
    let passed =
        !runs.is_empty() && runs.iter().all(RunCheck::passed) && matrix.iter().all(|m| m.found);
    Ok(SelftestReport {
        devices: devices
            .iter()
            .map(|d| format!("{} {}", d.index, d.name))
            .collect(),
        notes,
        runs,
        planted_total,
        matrix,
        passed,
    })
}

fn one_run(
    ctx: &mut DeviceContext,
    info: &DeviceInfo,
    opts: &SelftestOptions,
    run: u32,
) -> Result<RunCheck, AppError> {
    use crate::units::MIB;
    let algorithm = if run.is_multiple_of(2) {
        Algorithm::OwnAddress
    } else {
        Algorithm::Random
    };
    let seed = opts.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(run);
    // Whole MiB, as the test cuts memory; the options already refused less than 4 MiB.
    let bytes = opts.bytes / MIB * MIB;
    // Several buffers, so that absolute offsets past the first buffer are checked too.
    let buffer_bytes = (bytes / 4 / MIB).max(1) * MIB;
    let steps = algorithm.steps(0, seed, Duration::ZERO);
    let first_verify = steps
        .iter()
        .find_map(Step::checks)
        .ok_or_else(|| AppError::Usage("the self-test algorithm verifies nothing".into()))?;
    let planted = plant(seed, opts.faults, bytes / 4, buffer_bytes / 4, |w| {
        first_verify.word(w)
    });
    let faults: Vec<PlantedFault> = planted.iter().map(|p| p.fault).collect();
    let mut test = VramTest {
        config: VramConfig {
            algorithms: vec![algorithm],
            bytes: Some(bytes),
            passes: Some(1),
            record_capacity: opts.faults * 4,
            retest_cap: opts.faults,
            retest_reads: 2,
            seed,
            max_buffer_bytes: Some(buffer_bytes),
            planted: faults,
            ..VramConfig::default()
        },
    };
    let mut sink = MemorySink::default();
    let report = test.run_report(ctx, &RunControl::new(None), &mut sink)?;
    if let Some(e) = &report.run.device_error {
        return Err(AppError::Gpu(crate::gpu::GpuError::Unsupported(format!(
            "the self-test run failed on the device: {e}"
        ))));
    }
    Ok(check(info.index, run, algorithm, &steps, &planted, &report))
}

/// Chooses `count` faults of mixed kinds at distinct words; stuck bits are chosen against
/// `first_pattern` so that each shows in the first verification.
fn plant(
    seed: u64,
    count: u32,
    words: u64,
    buffer_words: u64,
    first_pattern: impl Fn(u64) -> u32,
) -> Vec<Planted> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut used = HashSet::new();
    let mut out = Vec::new();
    let address_bits = 63 - buffer_words.leading_zeros();
    while out.len() < count as usize {
        let word = rng.random_range(0..words);
        if used.contains(&word) {
            continue;
        }
        let kind = match out.len() % 4 {
            0 => FaultKind::SingleBitFlip,
            1 => FaultKind::MultiBitFlip,
            2 => FaultKind::StuckAt,
            _ => FaultKind::AddressFault,
        };
        let mut fault = PlantedFault {
            word,
            and_mask: u32::MAX,
            or_mask: 0,
            xor_mask: 0,
            source: word,
            persistent: false,
        };
        match kind {
            FaultKind::SingleBitFlip => fault.xor_mask = 1 << rng.random_range(0..32),
            FaultKind::MultiBitFlip => {
                let n = rng.random_range(2..=8);
                while fault.xor_mask.count_ones() < n {
                    fault.xor_mask |= 1 << rng.random_range(0..32);
                }
            }
            FaultKind::StuckAt => {
                let value = first_pattern(word);
                for _ in 0..rng.random_range(1..=3) {
                    let bit = 1u32 << rng.random_range(0..32);
                    if value & bit == 0 {
                        fault.or_mask |= bit;
                    } else {
                        fault.and_mask &= !bit;
                    }
                }
                fault.persistent = true;
            }
            FaultKind::AddressFault => {
                let source = word ^ (1 << rng.random_range(0..address_bits.max(1)));
                if source / buffer_words != word / buffer_words
                    || source >= words
                    || used.contains(&source)
                {
                    continue;
                }
                fault.source = source;
                used.insert(source);
            }
        }
        used.insert(word);
        out.push(Planted { kind, fault });
    }
    out
}

/// What the victim word reads at each verifying step, given the algorithm's steps.
fn predicted_reports(
    steps: &[Step],
    planted: &[Planted],
) -> HashMap<(u32, u64), (u32, u32, usize)> {
    let mut out = HashMap::new();
    let mut writes_seen = 0;
    let mut last_write: Option<usize> = None;
    for (i, step) in steps.iter().enumerate() {
        if let Step::Write(_) = step {
            writes_seen += 1;
            last_write = Some(i);
            continue;
        }
        let (Some(pattern), Some(w)) = (step.checks(), last_write) else {
            continue;
        };
        for (n, p) in planted.iter().enumerate() {
            let active = p.fault.persistent || writes_seen == 1;
            if !active {
                continue;
            }
            let base = steps[w].leaves(p.fault.source).unwrap_or(0);
            let actual = p.fault.apply(base);
            let expected = pattern.word(p.fault.word);
            if actual != expected {
                out.insert((i as u32, p.fault.word), (expected, actual, n));
            }
        }
    }
    out
}

fn check(
    device: usize,
    run: u32,
    algorithm: Algorithm,
    steps: &[Step],
    planted: &[Planted],
    report: &VramReport,
) -> RunCheck {
    let mut expected = predicted_reports(steps, planted);
    let mut check = RunCheck {
        device,
        run,
        algorithm,
        planted: HashMap::new(),
        expected_reports: expected.len() as u64,
        reports: report.errors_total,
        exact: 0,
        missed: Vec::new(),
        extra: Vec::new(),
        misclassified: Vec::new(),
    };
    for p in planted {
        *check.planted.entry(format!("{:?}", p.kind)).or_default() += 1;
    }
    let retests: HashMap<u64, &crate::workload::vram::RetestResult> = report
        .retests
        .iter()
        .map(|r| (r.offset_bytes / 4, r))
        .collect();
    for r in &report.records {
        let word = r.offset_bytes / 4;
        let Some((want_expected, want_actual, n)) = expected.remove(&(r.step, word)) else {
            check.extra.push(format!(
                "offset 0x{:x} step {} expected 0x{:08x} read 0x{:08x}",
                r.offset_bytes, r.step, r.expected, r.actual
            ));
            continue;
        };
        let p = &planted[n];
        if r.expected != want_expected || r.actual != want_actual {
            check.extra.push(format!(
                "offset 0x{:x}: read 0x{:08x}, planted fault gives 0x{:08x}",
                r.offset_bytes, r.actual, want_actual
            ));
            continue;
        }
        let flips = (want_expected ^ want_actual).count_ones();
        let shape_ok = match p.kind {
            FaultKind::SingleBitFlip => r.shape == ErrorShape::SingleBit,
            FaultKind::MultiBitFlip => {
                matches!(r.shape, ErrorShape::MultiBit | ErrorShape::WholeWord)
            }
            FaultKind::StuckAt => {
                if flips == 1 {
                    r.shape == ErrorShape::SingleBit
                } else {
                    matches!(r.shape, ErrorShape::MultiBit | ErrorShape::WholeWord)
                }
            }
            FaultKind::AddressFault => {
                r.shape
                    == ErrorShape::Address {
                        source_offset_bytes: p.fault.source * 4,
                    }
            }
        };
        let retest_ok = match retests.get(&word) {
            None => false,
            Some(t) => match p.kind {
                FaultKind::StuckAt => {
                    let zero = !p.fault.and_mask;
                    let one = p.fault.or_mask;
                    let class = match (zero != 0, one != 0) {
                        (true, false) => RetestClass::StuckAt0,
                        (false, true) => RetestClass::StuckAt1,
                        _ => RetestClass::StuckMixed,
                    };
                    t.class == class && t.stuck_at_0_mask == zero && t.stuck_at_1_mask == one
                }
                _ => t.class == RetestClass::NotReproduced,
            },
        };
        if shape_ok && retest_ok {
            check.exact += 1;
        } else {
            check.misclassified.push(format!(
                "offset 0x{:x}: planted {:?}, reported {:?}, retest {:?}",
                r.offset_bytes,
                p.kind,
                r.shape,
                retests.get(&word).map(|t| t.class)
            ));
        }
    }
    if report.errors_total != report.records.len() as u64 {
        check.extra.push(format!(
            "{} wrong words counted but only {} recorded",
            report.errors_total,
            report.records.len()
        ));
    }
    for ((step, word), (e, a, n)) in expected {
        check.missed.push(format!(
            "{:?} at offset 0x{:x} step {step}: expected 0x{e:08x} read 0x{a:08x}",
            planted[n].kind,
            word * 4
        ));
    }
    check
}

/// One line per run for people.
pub fn summary(report: &SelftestReport) -> String {
    let mut out = String::new();
    for n in &report.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    for r in &report.runs {
        let planted: u32 = r.planted.values().sum();
        out.push_str(&format!(
            "GPU{} run {} {}: planted {planted}, expected reports {}, exact {}, missed {}, extra {}, misclassified {} -> {}\n",
            r.device,
            r.run,
            r.algorithm.name(),
            r.expected_reports,
            r.exact,
            r.missed.len(),
            r.extra.len(),
            r.misclassified.len(),
            if r.passed() { "ok" } else { "FAILED" }
        ));
        for line in r
            .missed
            .iter()
            .chain(&r.extra)
            .chain(&r.misclassified)
            .take(20)
        {
            out.push_str(&format!("  {line}\n"));
        }
    }
    for m in &report.matrix {
        out.push_str(&format!(
            "matrix {} ({}): {} -> {}\n",
            m.kind.name(),
            m.path.replace('_', " "),
            m.planted,
            if m.found {
                "found exactly".to_owned()
            } else {
                format!("FAILED ({})", m.detail)
            }
        ));
    }
    out.push_str(&format!(
        "selftest: {} faults planted, {}\n",
        report.planted_total,
        if report.passed {
            "every one found exactly, nothing else reported"
        } else {
            "FAILED: the detectors missed or invented faults on this device"
        }
    ));
    out
}

/// The self-test's options from its command line.
pub fn options(args: &crate::cmd::cli::SelftestArgs) -> SelftestOptions {
    SelftestOptions {
        devices: args.devices.clone(),
        faults: args.faults,
        runs: args.runs,
        bytes: args.vram_bytes,
        seed: args.seed,
        fence_timeout: crate::gpu::DEFAULT_FENCE_TIMEOUT,
    }
}

/// `kiln selftest`.
pub fn command(args: crate::cmd::cli::SelftestArgs) -> Result<i32, AppError> {
    let opts = options(&args);
    let report = selftest(&opts)?;
    let text = summary(&report);
    crate::cmd::edge::print_result(args.json, &report, &text);
    Ok(if report.passed {
        crate::exit_code::HEALTHY
    } else {
        crate::exit_code::SOFTWARE
    })
}
