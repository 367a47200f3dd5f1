//! What each workload's runs showed: the faults their results prove by themselves, their
//! rates against the product's floors, and the PCIe probe's rates against its link; one
//! finding per workload and code, saying in how many of its runs it was found.

use crate::finding::{Evidence, Finding, FindingCode, evidence};
use crate::thresholds::Thresholds;
use crate::verdict::DeviceEvidence;
use crate::workload::WorkloadResult;

crate::evidence! {
    /// A finding's evidence with how many of its workload's runs found it.
    struct InRuns<'a> {
        #[serde(flatten)]
        evidence: &'a Evidence => flat,
        found_in_runs: usize => "Runs that found it",
        runs: usize => "Runs of the workload",
    }
}

/// The rule: every reported run's own findings and its rates.
pub fn judge(device: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let tenants = super::tenants::processes(device);
    let mut from_runs: Vec<(&str, Vec<Finding>)> = Vec::new();
    for (w, phase) in super::runs(device) {
        // What the result proves by itself (its case in JUnit holds it), then how its rates
        // compare with what healthy cards reach.
        let mut out = w.summary.judge();
        for f in &mut out {
            f.facts.workload = Some(w.workload.clone());
        }
        let mut held = Vec::new();
        super::rates::rates_of_run(device, w, phase, t, &tenants, &mut held, &mut out);
        if let WorkloadResult::Pcie(p) = &w.summary {
            super::pcie::bandwidth(p, t, &mut out);
        }
        from_runs.push((w.workload.as_str(), out));
    }
    merge_runs(from_runs)
}

/// One finding per workload and code: the first run's, with the count of runs that found
/// it when the workload ran more than once.
fn merge_runs(runs: Vec<(&str, Vec<Finding>)>) -> Vec<Finding> {
    let mut merged: Vec<(&str, Finding, usize)> = Vec::new();
    for (workload, findings) in &runs {
        let mut seen_here: Vec<FindingCode> = Vec::new();
        for f in findings {
            if seen_here.contains(&f.code) {
                // The same code twice from one run (a degraded link's width and
                // generation) stays as it is.
                merged.push((workload, f.clone(), 1));
                continue;
            }
            seen_here.push(f.code);
            match merged
                .iter_mut()
                .find(|(w, m, _)| w == workload && m.code == f.code)
            {
                Some((_, _, found)) => *found += 1,
                None => merged.push((workload, f.clone(), 1)),
            }
        }
    }
    merged
        .into_iter()
        .map(|(workload, mut f, found)| {
            let ran = runs.iter().filter(|(w, _)| *w == workload).count();
            if ran > 1 {
                f.facts.runs = Some((found, ran));
                f.summary = format!(
                    "{} (found in {found} of {ran} runs of {workload})",
                    f.summary
                );
                if f.evidence.json().is_object() {
                    f.evidence = evidence(&InRuns {
                        evidence: &f.evidence,
                        found_in_runs: found,
                        runs: ran,
                    });
                }
            }
            f
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{computed_at, said};
    use crate::finding::{Class, Confidence, Severity};
    use crate::thresholds::Thresholds;

    /// An H200's compute run at `fp32_gops`, judged with `t`.
    fn computed(fp32_gops: f64, t: &Thresholds) -> Vec<crate::finding::Finding> {
        super::judge(&computed_at(fp32_gops), t)
    }

    crate::evidence! {
        /// Where a word failed.
        struct Offset {
            offset: crate::finding::Hex<u64> => "Offset",
        }
    }

    #[test]
    fn a_workload_rerun_to_confirm_gives_one_finding_saying_in_how_many_runs() {
        let stuck = |offset: u64| {
            crate::finding::finding(
                crate::finding::FindingCode::VramStuckBit,
                Severity::Critical,
                Confidence::High,
                "bit 3 stuck".into(),
                crate::finding::evidence(&Offset {
                    offset: crate::finding::Hex(offset),
                }),
                "RMA the card",
            )
        };
        let merged = super::merge_runs(vec![
            ("vram", vec![stuck(4096)]),
            ("vram", vec![]),
            ("vram", vec![stuck(4096)]),
        ]);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].facts.runs, Some((2, 3)));
        assert_eq!(
            merged[0].evidence.json(),
            &serde_json::json!({"offset": 4096, "found_in_runs": 2, "runs": 3})
        );
        assert_eq!(
            merged[0].evidence.rows(),
            [
                ("Offset".to_owned(), "0x1000".to_owned()),
                ("Runs that found it".to_owned(), "2".to_owned()),
                ("Runs of the workload".to_owned(), "3".to_owned())
            ]
        );
        assert!(
            merged[0]
                .summary
                .ends_with("(found in 2 of 3 runs of vram)")
        );
        // The near miss: one run says nothing of runs.
        let once = super::merge_runs(vec![("vram", vec![stuck(4096)])]);
        assert_eq!(once[0].facts.runs, None);
        assert_eq!(
            once[0].evidence.json(),
            &serde_json::json!({"offset": 4096})
        );
    }

    #[test]
    fn a_floor_decides_only_as_far_as_where_it_comes_from_allows() {
        // Under the floor that rests on a share of the spec sheet no GPU measured (67
        // TFLOP/s x 0.6 x 0.75 = 30.2): a note, never a call.
        let t = Thresholds::default();
        assert_eq!(
            said(&computed(20_000.0, &t)),
            [("RATE_BELOW_SPEC_SHARE", Class::Info, Severity::Note)]
        );
        // The same rate under the site's own floor from its healthy H200s: the card, sure
        // at two thirds of the floor or less, a call short of that.
        let site = Thresholds {
            floors: [("compute_fp32_gops".to_owned(), 45_000.0)].into(),
            ..Thresholds::default()
        };
        let slow = computed(20_000.0, &site);
        assert_eq!(
            said(&slow),
            [("COMPUTE_RATE_LOW", Class::Hardware, Severity::Major)]
        );
        assert_eq!(slow[0].confidence, Confidence::High);
        assert_eq!(computed(40_000.0, &site)[0].confidence, Confidence::Medium);
        // A shortfall of more than half is said as the share reached, a smaller one as how
        // far under.
        let tiny = computed(400.0, &site);
        assert!(tiny[0].summary.contains("% of the"), "{}", tiny[0].summary);
        assert!(!tiny[0].summary.contains("% under"), "{}", tiny[0].summary);
        let short = computed(40_000.0, &site);
        assert!(short[0].summary.contains("% under"), "{}", short[0].summary);
        // The near misses: at the floor, and above the built-in one.
        assert!(computed(45_000.0, &site).is_empty());
        assert!(computed(50_000.0, &t).is_empty());
    }
}
