//! Processes of the machine as `kiln watch` needs them: whether one is alive, its
//! children, its name, how it ended, and asking it to stop. Linux reads `/proc` (under a
//! root that tests point at a fixture tree) and signals with `kill(2)`; elsewhere only
//! what the standard library offers.

use std::path::Path;

/// What ended a process: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// Its exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

/// How a child that kiln started ended.
pub fn ending(status: std::process::ExitStatus) -> Ending {
    Ending {
        code: status.code(),
        signal: os::signal_of(status),
    }
}

/// True while the process `pid` runs (a zombie has ended).
pub fn alive(proc_root: &Path, pid: u32) -> bool {
    os::alive(proc_root, pid)
}

/// Every descendant of `root` (its children, theirs, ...), not `root` itself.
pub fn descendants(proc_root: &Path, root: u32) -> Vec<u32> {
    let parents = os::parents(proc_root);
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (child, parent) in &parents {
            if *parent == p && *child != root && !out.contains(child) {
                out.push(*child);
                frontier.push(*child);
            }
        }
    }
    out.sort_unstable();
    out
}

/// The process's name (`python3`), where the system gives it.
pub fn name(proc_root: &Path, pid: u32) -> Option<String> {
    os::name(proc_root, pid)
}

/// Asks the process to stop (SIGTERM on Linux); false when it could not be asked.
pub fn ask_to_stop(pid: u32) -> bool {
    os::terminate(pid)
}

/// The root of the process table: `/proc`, under the machine's root as kiln reads it
/// (`KILN_SYSTEM_ROOT`, a fixture tree in tests).
pub fn proc_root() -> std::path::PathBuf {
    std::env::var_os("KILN_SYSTEM_ROOT")
        .filter(|v| !v.is_empty())
        .map_or_else(|| "/".into(), std::path::PathBuf::from)
        .join("proc")
}

#[cfg(target_os = "linux")]
mod os {
    use std::path::Path;

    pub fn signal_of(status: std::process::ExitStatus) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        status.signal()
    }

    /// The state letter and parent of a process, from `/proc/PID/stat`: the fields after
    /// the command name, which is in parentheses and may itself hold spaces and `)`.
    fn stat(proc_root: &Path, pid: u32) -> Option<(char, u32)> {
        let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
        let rest = &text[text.rfind(')')? + 1..];
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let parent = fields.next()?.parse().ok()?;
        Some((state, parent))
    }

    pub fn alive(proc_root: &Path, pid: u32) -> bool {
        stat(proc_root, pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X' | 'x'))
    }

    pub fn parents(proc_root: &Path) -> Vec<(u32, u32)> {
        let Ok(entries) = std::fs::read_dir(proc_root) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|pid| stat(proc_root, pid).map(|(_, parent)| (pid, parent)))
            .collect()
    }

    pub fn name(proc_root: &Path, pid: u32) -> Option<String> {
        let name = std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm")).ok()?;
        let name = name.trim();
        (!name.is_empty()).then(|| name.to_owned())
    }

    pub fn terminate(pid: u32) -> bool {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: kill(2) with a positive pid and a valid signal number touches no memory.
        unsafe { libc::kill(pid, libc::SIGTERM) == 0 }
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    use std::path::Path;

    pub fn signal_of(_status: std::process::ExitStatus) -> Option<i32> {
        None
    }

    pub fn alive(_proc_root: &Path, _pid: u32) -> bool {
        false
    }

    pub fn parents(_proc_root: &Path) -> Vec<(u32, u32)> {
        Vec::new()
    }

    pub fn name(_proc_root: &Path, _pid: u32) -> Option<String> {
        None
    }

    pub fn terminate(_pid: u32) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lay(root: &Path, pid: u32, comm: &str, state: char, parent: u32) {
        let dir = root.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("stat"),
            format!("{pid} ({comm}) {state} {parent} 1 1 0 -1 4194560 0 0"),
        )
        .unwrap();
        std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_tree_reads_from_a_proc_root_even_with_odd_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        lay(root, 100, "python3", 'S', 1);
        lay(root, 101, "worker (1)", 'R', 100);
        lay(root, 102, "worker) x", 'S', 101);
        lay(root, 103, "other", 'S', 1);
        lay(root, 104, "gone", 'Z', 100);
        assert_eq!(descendants(root, 100), [101, 102, 104]);
        assert!(alive(root, 101));
        assert!(!alive(root, 104), "a zombie has ended");
        assert!(!alive(root, 999));
        assert_eq!(name(root, 102).as_deref(), Some("worker) x"));
        // The real table: this process is alive, and a child it starts is its descendant.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let real = proc_root();
        assert!(alive(&real, std::process::id()));
        assert!(descendants(&real, std::process::id()).contains(&child.id()));
        assert!(ask_to_stop(child.id()));
        let ended = ending(child.wait().unwrap());
        assert_eq!(
            ended,
            Ending {
                code: None,
                signal: Some(15)
            }
        );
    }
}
