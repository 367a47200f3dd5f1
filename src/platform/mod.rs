//! What differs between operating systems, one concern a module, each with one interface
//! and a side per OS: the logic above never asks which OS it runs on.

pub mod browser;
pub mod console;
pub mod files;
pub mod host;
pub mod host_power;
pub mod kernel_log;
pub mod nvidia;
pub mod pci;
pub mod perf_counters;
pub mod process;
pub mod video_memory;
pub mod vulkan;
pub mod windows_registry;
