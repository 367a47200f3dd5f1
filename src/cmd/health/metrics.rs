//! The check as people and monitoring read it: the summary, and metrics for
//! node_exporter's textfile collector.

use std::time::SystemTime;

use super::Health;

/// Every family `kiln-health.prom` holds (alert rules are checked against these).
pub const FAMILIES: [&str; 4] = [
    "kiln_health_exit_code",
    "kiln_health_gpus",
    "kiln_health_fault",
    "kiln_health_last_check_timestamp_seconds",
];

/// The check as Prometheus metrics for node_exporter's textfile collector
/// (`kiln-health.prom`): the exit code, the GPUs found, one series per open fault (with
/// dcgm-exporter's `gpu` and `UUID` labels where the fault is one GPU's) and when it ran.
pub fn metrics(h: &Health, hostname: &str, now: SystemTime) -> String {
    use crate::report::prometheus::{counted, escape, gauge};
    let host = format!("Hostname=\"{}\"", escape(hostname));
    let mut out = String::new();
    gauge(
        &mut out,
        "kiln_health_exit_code",
        "The last kiln health check's exit code: 0 healthy, 1 hardware, 2 environment, 3 software, 4 could not check, 6 not yet tested (no full run yet).",
        &[(host.clone(), f64::from(h.exit_code))],
    );
    gauge(
        &mut out,
        "kiln_health_gpus",
        "GPUs the last kiln health check found.",
        &[(host.clone(), h.gpus as f64)],
    );
    // Two open events of one code on one GPU are one series with a count.
    let faults = counted(h.faults.iter().map(|f| {
        let mut labels = String::new();
        if let Some(g) = f.gpu {
            labels.push_str(&format!("gpu=\"{g}\","));
        }
        if let Some(u) = &f.uuid {
            labels.push_str(&format!("UUID=\"{}\",", escape(u)));
        }
        labels.push_str(&format!(
            "code=\"{}\",exit_code=\"{}\",{host}",
            escape(&f.code.to_string()),
            f.exit_code
        ));
        labels
    }));
    gauge(
        &mut out,
        "kiln_health_fault",
        "Faults of the last kiln health check by code (open faults stay until cleared).",
        &faults,
    );
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    gauge(
        &mut out,
        "kiln_health_last_check_timestamp_seconds",
        "When the last kiln health check ran, in Unix seconds.",
        &[(host, secs as f64)],
    );
    out
}

/// The check for people: the first line, then every fault, what was noted and checked.
pub fn summary(h: &Health) -> String {
    let mut out = format!("{}\n", h.line);
    for f in &h.faults {
        // A node not yet tested has no fault: its line says what it lacks.
        let label = if f.exit_code == crate::exit_code::NOT_TESTED {
            "not a fault"
        } else {
            "fault"
        };
        out.push_str(&format!("{label}: {}\n", f.line()));
    }
    if let Some(next) = &h.next {
        out.push_str(&format!("next: {next}\n"));
    }
    if let Some(cleared) = &h.cleared {
        out.push_str(&format!("{cleared}\n"));
    }
    for n in &h.noted {
        out.push_str(&format!("noted: {n}\n"));
    }
    out.push_str(&format!(
        "checked: {}; {}\n",
        crate::text::count(h.gpus as u64, "GPU"),
        h.checked.join("; ")
    ));
    for n in &h.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_health_textfile_holds_exactly_its_declared_families() {
        let h = super::super::Health {
            line: "OK".into(),
            exit_code: 0,
            gpus: 1,
            faults: Vec::new(),
            next: None,
            cleared: None,
            noted: Vec::new(),
            checked: Vec::new(),
            notes: Vec::new(),
        };
        let text = super::metrics(&h, "n1", std::time::SystemTime::now());
        let written: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split(' ').next())
            .collect();
        assert_eq!(written, super::FAMILIES);
    }
}
