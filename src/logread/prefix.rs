//! The prefixes the world prints before a log's message, taken off: the kernel's own
//! stamps (`dmesg`, `dmesg -T`, `dmesg -H`, a printk caller id), syslog and journal
//! prefixes in any locale's month names, RFC 3339 and ISO stamps, `<6>` priorities, a
//! forum's `> ` quote, and a docker-compose service's `name  | `.

use std::sync::OnceLock;

use regex::Regex;

/// A line with its prefixes taken off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripped<'a> {
    /// The message.
    pub text: &'a str,
    /// Whether a prefix said the kernel wrote it (a dmesg stamp, `kernel:`, a priority).
    pub kernel: bool,
}

/// Each prefix, and whether it says the kernel wrote the line.
fn prefixes() -> &'static [(Regex, bool)] {
    static PREFIXES: OnceLock<Vec<(Regex, bool)>> = OnceLock::new();
    PREFIXES.get_or_init(|| {
        [
            // Whitespace, a markdown quote, a backtick or quote the poster opened with.
            (r"^(?:\s+|>\s?|`|\x22)", false),
            // A syslog priority: `<6>`.
            (r"^<\d{1,3}>", true),
            // dmesg: `[ 1234.567890]`, dmesg -H: `[  +0.000004]`, `[Nov19 10:33]`.
            (r"^\[\s*\+?\d+\.\d+\]", true),
            (r"^\[\p{L}{3}\d{1,2} \d{2}:\d{2}\]", true),
            // dmesg -T: `[Fri Aug 30 11:43:09 2024]`, `[Wed Jun  8 16:34:49 2022]`.
            (
                r"^\[\p{L}{2,4}\.? \p{L}{3,4}\.? +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}\]",
                true,
            ),
            // A printk caller id: `[  T291]`, `[    C3]`.
            (r"^\[\s*[TC]\d+\]", true),
            // A bracketed ISO stamp: `[2023-08-22T01:37:23.894402442Z]:`, `[2024-01-07 00:05:45]`.
            (
                r"^\[\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]:?",
                false,
            ),
            // RFC 3339 / ISO: `2025-11-14T08:52:38.3746210Z`, `2019-12-02 16:37:59.807028:`.
            (
                r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?:?",
                false,
            ),
            (r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?", false),
            // Talos: `k3s-node3.lab: kern:    info: `.
            (r"^(?:[\w.-]+: )?kern:\s+\w+:", true),
            // syslog / journal, any locale's month: `Feb 15 17:37:45 host kernel:`,
            // `kvě 25 19:29:48 bc250 kernel:`, `Jan 02 21:35:19  kernel:`.
            (
                r"^\p{L}{3,4}\.?\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:\s+[\w.-]+)?\s+kernel:",
                true,
            ),
            // The same for another program: `Apr 17 23:09:42 athena ollama.listener[2840147]:`.
            (
                r"^\p{L}{3,4}\.?\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}\s+[\w.-]+\s+[\w./-]+(?:\[\d+\])?:",
                false,
            ),
            // A time alone before `kernel:`, and `kernel:` alone.
            (r"^\d{2}:\d{2}:\d{2}\s+kernel:", true),
            (r"^kernel:", true),
            // After an ISO stamp (`journalctl -o short-iso`): `host kernel:`.
            (r"^[\w.-]+ kernel:", true),
            // A docker-compose service: `deep-seek-1  | `.
            (r"^[A-Za-z0-9][\w.-]*\s+\|\s", false),
        ]
        .into_iter()
        // Constant patterns, each proved by this module's tests.
        .filter_map(|(p, k)| Regex::new(p).ok().map(|r| (r, k)))
        .collect()
    })
}

/// `line` without the prefixes before its message.
pub fn strip(line: &str) -> Stripped<'_> {
    let mut text = line;
    let mut kernel = false;
    // Each pass takes one prefix off; a line has a handful at most.
    for _ in 0..16 {
        let found = prefixes()
            .iter()
            .find_map(|(r, k)| r.find(text).filter(|m| m.end() > 0).map(|m| (m.end(), *k)));
        match found {
            Some((end, k)) => {
                text = &text[end..];
                kernel |= k;
            }
            None => break,
        }
    }
    Stripped { text, kernel }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_prefix_the_world_prints_comes_off() {
        let msg = "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.";
        for (prefix, kernel) in [
            ("[ 1234.567890] ", true),
            ("[Fri Aug 30 11:43:09 2024] ", true),
            ("[Wed Jun  8 16:34:49 2022] ", true),
            ("[  +0.000004] ", true),
            ("[Nov19 10:33] ", true),
            ("[   36.915889][  T291] ", true),
            ("Feb 15 17:37:45 Gipfeli kernel: [82659.755847] ", true),
            ("kvě 25 19:29:48 bc250 kernel: ", true),
            ("maj 08 19:27:35 RX-78-FPC kernel: ", true),
            ("Jan 02 21:35:19  kernel: ", true),
            ("22:39:31 kernel: ", true),
            ("<6>[    0.621695] ", true),
            ("> feb 27 16:50:31 x kernel: ", true),
            (
                "k3s-node3.lab: kern:    info: [2023-08-22T01:37:23.894402442Z]: ",
                true,
            ),
            ("2025-11-14T08:52:38.3746210Z ", false),
            ("2019-12-02 16:37:59.807028: ", false),
            ("2024-05-01T12:00:00+0200 gpu-node-7 kernel: ", true),
            ("May 01 12:00:00.123456 gpu-node-7 kernel: ", true),
            ("deep-seek-1  | ", false),
        ] {
            let line = format!("{prefix}{msg}");
            let s = strip(&line);
            assert_eq!((s.text, s.kernel), (msg, kernel), "{prefix:?}");
        }
    }

    #[test]
    fn a_message_that_begins_like_a_prefix_keeps_its_words() {
        // A table row of nvidia-smi, a TF path, an amdgpu line: nothing to take off.
        for line in [
            "| NVIDIA-SMI 384.69                 Driver Version: 384.69 |",
            "amdgpu 0000:03:00.0: amdgpu: GPU reset begin!",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ] {
            assert_eq!(strip(line).text, line);
        }
    }
}
