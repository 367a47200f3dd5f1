//! Records a real run directory with one planted fault, for the verdict scenario corpus in
//! `tests/scenarios/`: `cargo run --example plant_run -- <fault> <out-dir>`.
//!
//! Faults: `none`, `vram-stuck`, `vram-flip`, `vram-coupling`, `vram-many`, `compute-lane`,
//! `matrix-element`,
//! `pcie-byte`, `fragment`, `leak`. The run is small (16 MiB of VRAM, one pass of the
//! own-address algorithm, PCIe up to 1 MiB) so that it records in seconds on a CPU device.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kiln::cmd::run::RunOptions;
use kiln::workload::compute::ComputeConfig;
use kiln::workload::fragment::FragmentConfig;
use kiln::workload::matrix::{MatrixConfig, PlantedFault as MatrixPlant};
use kiln::workload::pcie::PcieConfig;
use kiln::workload::registry::{PlannedWorkload, WorkloadConfig, WorkloadName};
use kiln::workload::vram::VramConfig;
use kiln::workload::vram::algorithm::Algorithm;
use kiln::workload::vram::engine::PlantedFault;

const FAULTS: &str = "none, vram-stuck, vram-flip, vram-coupling, vram-many, compute-lane, matrix-element, pcie-byte, fragment, leak";

fn stuck(word: u64) -> PlantedFault {
    PlantedFault::stuck_bits(word)
}

fn main() -> ExitCode {
    kiln::cmd::run::main_if_worker();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [fault, out] = args.as_slice() else {
        eprintln!("usage: plant_run <fault> <out-dir> (faults: {FAULTS})");
        return ExitCode::from(64);
    };
    let mut vram = VramConfig {
        algorithms: vec![Algorithm::OwnAddress],
        bytes: Some(16 << 20),
        passes: Some(1),
        ..Default::default()
    };
    let mut compute = ComputeConfig {
        rounds: Some(1),
        ..Default::default()
    };
    let mut pcie = PcieConfig {
        max_bytes: 1 << 20,
        ..Default::default()
    };
    let mut fragment = FragmentConfig {
        rounds: Some(1),
        ..Default::default()
    };
    // One round of each kind on 256-square matrices; the fault is one element's low bit.
    let matrix = MatrixConfig {
        size: Some(256),
        rounds: Some(3),
        plant: (fault == "matrix-element").then_some(MatrixPlant {
            row: 77,
            col: 201,
            rows: 1,
            cols: 1,
            xor: 1,
        }),
        ..Default::default()
    };
    let mut workloads = vec![
        WorkloadName::Vram,
        WorkloadName::Compute,
        WorkloadName::Pcie,
    ];
    match fault.as_str() {
        "none" => {}
        "vram-stuck" => vram.planted = vec![stuck(1000)],
        "vram-flip" => {
            vram.planted = vec![PlantedFault {
                xor_mask: 1 << 5,
                and_mask: u32::MAX,
                or_mask: 0,
                persistent: false,
                ..stuck(1000)
            }]
        }
        "vram-coupling" => {
            // The victim takes its value from an aggressor word: a coupling fault.
            vram.planted = vec![PlantedFault {
                and_mask: u32::MAX,
                or_mask: 0,
                source: 5000,
                ..stuck(1000)
            }]
        }
        "vram-many" => vram.planted = (0..64).map(|i| stuck(4096 * i + 17)).collect(),
        "compute-lane" => compute.inject = Some((7, 1)),
        "matrix-element" => workloads = vec![WorkloadName::Matrix],
        "pcie-byte" => pcie.inject_offset = Some(4099),
        "fragment" => {
            fragment.plant_fragmentation = true;
            workloads = vec![WorkloadName::Fragment];
        }
        "leak" => {
            fragment.plant_leak = true;
            workloads = vec![WorkloadName::Fragment];
        }
        other => {
            eprintln!("unknown fault `{other}` (faults: {FAULTS})");
            return ExitCode::from(64);
        }
    }
    let plan = workloads
        .into_iter()
        .map(|name| PlannedWorkload {
            weight: 1,
            config: match name {
                WorkloadName::Vram => WorkloadConfig::Vram(vram.clone()),
                WorkloadName::Compute => WorkloadConfig::Compute(compute.clone()),
                WorkloadName::Pcie => WorkloadConfig::Pcie(pcie.clone()),
                WorkloadName::Fragment => WorkloadConfig::Fragment(fragment.clone()),
                WorkloadName::Matrix => WorkloadConfig::Matrix(matrix.clone()),
                other => WorkloadConfig::default_of(other),
            },
        })
        .collect();
    let opts = RunOptions {
        profile: format!("plant_run {fault}"),
        profile_file: None,
        // The CPU device is the device under test: the scenarios are recordings of it.
        devices: vec!["cpu".into()],
        duration: None,
        profile_duration: None,
        plan,
        stop_on_first_failure: false,
        confirm: None,
        wait_idle: false,
        out: Some(PathBuf::from(out)),
        fence_timeout: kiln::gpu::DEFAULT_FENCE_TIMEOUT,
        progress: false,
        telemetry_interval: Some(Duration::from_millis(200)),
        thresholds: Default::default(),
        step_timeout: Duration::from_secs(60),
        test_hooks: Default::default(),
    };
    match kiln::cmd::run::run(&opts) {
        Ok(report) => {
            println!(
                "{}",
                kiln::report::terminal::summary(&report, kiln::report::terminal::Style::default())
            );
            ExitCode::from(report.exit_code as u8)
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(70)
        }
    }
}
