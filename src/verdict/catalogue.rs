//! The table of findings the docs give (docs/findings.md): every code of the finding
//! catalogue with its class, the `kiln health` fault it becomes, the Xids that give it
//! (from the Xid catalogue) and its meaning. Written from the catalogues, and held to them
//! by a test, so the page cannot drift from what kiln gives.

use crate::finding::{FindingCode, HealthFault};

/// The table, in Markdown.
pub fn findings_table() -> String {
    let mut out = String::from(
        "| Code | Class | Next step | `kiln health` | Xids | Meaning |\n|---|---|---|---|---|---|\n",
    );
    for &code in FindingCode::ALL {
        let info = code.info();
        let health = match info.health {
            HealthFault::NotJudged => "-".to_owned(),
            HealthFault::Fault { code, sticky } => {
                format!("`{code}`{}", if sticky { " (until cleared)" } else { "" })
            }
            HealthFault::Xid => "`KILN-XID-nnn` (until cleared)".to_owned(),
        };
        let xids: Vec<u32> = super::xid::CATALOGUE
            .iter()
            .filter(|x| x.finding == code)
            .map(|x| x.code)
            .collect();
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} |\n",
            code.name(),
            info.class.word(),
            info.remedy().word(),
            health,
            if xids.is_empty() {
                "-".to_owned()
            } else {
                ranges(&xids)
            },
            info.meaning
        ));
    }
    out
}

/// Sorted numbers with runs of three or more as ranges: `74, 121, 144-150`.
fn ranges(sorted: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            parts.push(format!("{}-{}", sorted[i], sorted[j]));
        } else {
            parts.extend(sorted[i..=j].iter().map(u32::to_string));
        }
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_three_or_more_are_ranges() {
        assert_eq!(
            ranges(&[74, 121, 136, 144, 145, 146, 150, 151]),
            "74, 121, 136, 144-146, 150, 151"
        );
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn every_xid_finding_has_its_xids_and_no_other_code_has_any() {
        let table = findings_table();
        for &code in FindingCode::ALL {
            let row = table
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", code.name())))
                .unwrap();
            let xids = row.split(" | ").nth(4).unwrap();
            // XID_OTHER_PROCESS is made from XID_APPLICATION's rows, not its own.
            let from_rows =
                code.info().health == HealthFault::Xid && code != FindingCode::XidOtherProcess;
            assert_eq!(xids != "-", from_rows, "{row}");
        }
    }
}
