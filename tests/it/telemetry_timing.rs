//! The telemetry sidecar's timing against an emulated NVIDIA node whose NVML calls take
//! their real time: among the tests that run alone, so that no sibling test shares the
//! cores while it measures whether a tick's reads fit the interval (on two busy cores the fake's
//! millisecond sleeps overran, and ticks were missed that the sidecar did not cause).

use crate::common::{Node, expect_json};
use serde_json::json;

/// Alone: it measures the sidecar's own timing, so it runs last with nothing beside it
/// (`scripts/test.sh`).
mod alone {
    use super::*;

    #[test]
    fn eight_gpus_whose_calls_take_their_real_time_miss_no_tick() {
        // A millisecond a call, as a busy driver answers, and the PCIe throughput's 20 ms
        // sampling window, the process lists a few: the sidecar must keep every 200 ms tick.
        let node = Node::of_gpus(
            8,
            json!({"latency_ms": {
                "*": 1.0,
                "nvmlDeviceGetPcieThroughput": 20.0,
                "nvmlDeviceGetComputeRunningProcesses_v3": 3.0,
                "nvmlDeviceGetGraphicsRunningProcesses_v3": 3.0
            }}),
        );
        let out = node
            .kiln()
            .args(["bench", "telemetry", "--duration", "5s", "--json"])
            .output()
            .unwrap();
        let report = expect_json(&out, 0);
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(report["gpus"], 8, "{report}");
        assert_eq!(report["nvml_gpus"], 8, "{report}");
        assert_eq!(report["missed_ticks"], 0, "{report}");
        assert!(report["ticks"].as_u64().unwrap() >= 20, "{report}");
        let share = report["tick_share_max"].as_f64().unwrap();
        assert!(share < 1.0, "{report}");
        // 14 calls of a millisecond per GPU: well over a tenth of the interval for eight, and
        // the bench says so.
        let median = report["tick_share_median"].as_f64().unwrap();
        assert!((0.3..1.0).contains(&median), "{report}");
    }
}
