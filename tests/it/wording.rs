//! What people read is written for people: every scenario's terminal summary and HTML page
//! carry no Rust enum names, no `{:?}` output and no "1 rounds".

use crate::common::*;

#[test]
fn summaries_and_pages_speak_words_not_enum_names() {
    let enum_names = regex::Regex::new(
        r"\b(Fp32|Fp16|Int32|Int8|SingleBit|MultiBit|WholeWord|TransientRead|StuckAt[01]|StuckMixed|PatternSensitive|Intermittent|NotReproduced|CouldNotTest|DiscreteGpu|IntegratedGpu|VirtualGpu|SoftwareFault|NotRun|High confidence|Medium confidence|Low confidence|Some\()",
    )
    .unwrap();
    let bad_plural = regex::Regex::new(
        r"\b1 (rounds|wrong words|wrong reads|words of memory|mismatches|tiles|GPUs|memory cells|wrong results|allocations)\b",
    )
    .unwrap();
    let old_units = regex::Regex::new(r"G ops/s|g ops/s").unwrap();
    // The evidence blocks are JSON as written to disk (snake_case), not prose.
    let evidence = regex::Regex::new(r"(?s)<pre[^>]*>.*?</pre>").unwrap();
    let mut read = 0;
    for_each_rebuilt_scenario(|name, run_dir, out| {
        if !run_dir.join("report.html").is_file() {
            return;
        }
        read += 1;
        let text = stderr(out);
        let html = std::fs::read_to_string(run_dir.join("report.html")).unwrap();
        let html = evidence.replace_all(&html, "");
        for (what, body) in [("summary", text.as_str()), ("report.html", &html)] {
            for re in [&enum_names, &bad_plural, &old_units] {
                if let Some(m) = re.find(body) {
                    let from = m.start().saturating_sub(80);
                    let to = (m.end() + 80).min(body.len());
                    panic!(
                        "{name} {what}: `{}` in ...{}...",
                        m.as_str(),
                        body.get(from..to).unwrap_or(m.as_str())
                    );
                }
            }
        }
    });
    assert!(read > 50, "only {read} scenarios were read");
}
