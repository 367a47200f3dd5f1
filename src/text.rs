//! Small text helpers every layer may use: how a value a user gave appears in a message.

/// Quotes a value a user gave inside a message, cut to a sane length: a 100 kB
/// argument must not be echoed whole.
pub fn quote(text: &str) -> String {
    const SHOWN: usize = 48;
    let count = text.chars().count();
    if count <= SHOWN {
        format!("`{text}`")
    } else {
        let head: String = text.chars().take(SHOWN).collect();
        format!("`{head}...` ({count} characters)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_quoted_cut_short() {
        let long = "x".repeat(100_000);
        let q = quote(&long);
        assert!(q.len() < 80, "{} characters", q.len());
        assert!(q.contains("100000 characters"), "{q}");
        assert_eq!(quote("vram"), "`vram`");
    }
}
