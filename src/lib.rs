//! kiln: a GPU stress and health diagnostic suite. Discover devices, load them with
//! verified workloads, keep the evidence, and say whether the card is healthy.
//!
//! Data flows one way: `gpu`, `inventory` and `select` (discovery) -> `workload` and
//! `telemetry` (run by `cmd::run`) -> `evidence` (what a run writes as it happens) ->
//! `rundir` (the run directory read whole) -> `verdict` (the events folded into each
//! device's evidence, the rules, one resolution, the result, the report built once) ->
//! `report` (report.json, summary, HTML, JUnit, metrics); the commands over all of it in
//! `cmd`. Pure data sits below it all: `exit_code`, `thresholds`, `finding`, `product`.
//! No module imports one above it, nor two modules each other at any depth
//! (`tests/it/architecture.rs`); ARCHITECTURE.md says where each concern lives, and how to
//! add a workload, a finding code, a rule, a report field, a signal and a source.

#![warn(missing_docs)]
// Unsafe code lives in `gpu` alone (the Vulkan calls), each block with its SAFETY note.
#![deny(unsafe_code)]

/// kiln's version and the commit it was built from, as `kiln --version` says them
/// (`0.1.0 (commit 0123456789ab)`; `commit unknown` for a build outside a git checkout
/// that was not given `KILN_COMMIT`, build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KILN_COMMIT"),
    ")"
);

/// The commands: the command line and what each command does with it, over the core.
pub mod cmd;
pub mod error;
pub mod evidence;
pub mod exit_code;
/// Below the workloads and the verdict, so that either can say what it found without
/// importing the other.
pub mod finding;
pub mod fsutil;
#[allow(unsafe_code)]
pub mod gpu;
pub mod inventory;
pub mod limits;
pub mod logread;
/// The OS's side of what differs between systems (processes), its FFI fenced here.
#[allow(unsafe_code)]
pub mod platform;
pub mod power;
/// Below the verdict, the benchmarks and the workloads: what each product's spec sheet promises.
pub mod product;
pub mod profile;
pub mod report;
pub mod rundir;
pub mod select;
pub mod telemetry;
pub mod text;
pub mod thresholds;
pub mod units;
pub mod verdict;
pub mod workload;
