//! kiln's integration tests, one binary (`cargo test --test it`), a module per area. They
//! run kiln on the machine's real Vulkan driver (lavapipe in CI) and check it against the
//! real tools fleets use; what is pure (the verdict, argument parsing, the Xid catalogue,
//! what people read) is tested in-process, and the binary is started where the process is
//! what is tested: exit codes, signals, workers, files, Wine.
//!
//! Three markers in a test's path choose where it runs (`scripts/test.sh`):
//! - `::timed::` a test that holds a load for a time (a burn-in's phases, a profile's
//!   budget): run after the others, one at a time, beside the tests of the emulated cards;
//! - `::alone::` a test that measures kiln's own timing (the sidecar's ticks): run last,
//!   with nothing beside it;
//! - `::card::` a test whose outcome depends on the device (its memory model, BAR,
//!   vendor, NVML): run again on every emulated discrete card; `::card::units::` also on
//!   a device with matrix units.

mod common;

mod architecture;
mod baseline;
mod burn_in;
mod cli;
mod compare;
mod compute;
mod contrib;
mod discrete;
mod discrete_layer;
mod docs;
mod edges;
mod error_counters;
mod explain;
mod fleet_outputs;
mod fragment;
mod gpu_errors;
mod health;
mod html_report;
mod interruptions;
mod matrix;
mod nvidia_node;
mod orchestration;
mod packaging;
mod pcie;
mod power_target;
mod profiles;
mod real_corpus;
mod scenarios;
mod snapshots;
mod telemetry_replay;
mod telemetry_timing;
mod tools;
mod validation;
mod verdict;
mod verdict_rules;
mod vram_detectors;
mod watch;
mod wine;
mod wording;
mod xid_catalogue;
