//! Processes of the machine as kiln needs them: whether one is alive, its children, its
//! name, how it ended, asking it to stop and killing it, finding a program, and tying
//! kiln's workers to kiln so that none outlives it. Linux reads `/proc` (under a root that
//! tests point at a fixture tree) and signals with `kill(2)`; Windows takes a Toolhelp
//! snapshot of the process table, ends a process with `TerminateProcess` (it has no signal
//! to ask with, so asking and killing are one), and puts workers in a Job object that ends
//! them when kiln ends.

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

/// The shared libraries the process has loaded, by file name (`libvulkan.so.1`,
/// `nvcuda.dll`): Linux's `/proc/PID/maps`, Windows' Toolhelp module list. None where they
/// cannot be read (the process gone, no permission, another OS).
pub fn libraries(proc_root: &Path, pid: u32) -> Option<Vec<String>> {
    let mut names = os::libraries(proc_root, pid)?;
    names.sort_unstable();
    names.dedup();
    Some(names)
}

/// Asks the process to stop (SIGTERM on Linux); false when it could not be asked.
pub fn ask_to_stop(pid: u32) -> bool {
    os::terminate(pid)
}

/// Kills the process, which cannot refuse (SIGKILL on Linux, `TerminateProcess` on
/// Windows); false when it could not be killed (gone already, or not kiln's to kill).
pub fn kill(pid: u32) -> bool {
    os::kill(pid)
}

/// Ties a worker kiln started to kiln: where the OS would let it outlive a kiln that died
/// (Windows), it ends with kiln. On Linux a worker ends on its own when its pipes to kiln
/// close. False when the OS refused.
pub fn bind_to_kiln(child: &std::process::Child) -> bool {
    os::bind_to_kiln(child)
}

/// The program `name` would run: a path as given, else the first match on `PATH` (with
/// the extensions of `PATHEXT` on Windows). None when there is none that can be run.
pub fn find_program(name: &str) -> Option<std::path::PathBuf> {
    if name.contains(std::path::MAIN_SEPARATOR) || name.contains('/') {
        let p = std::path::PathBuf::from(name);
        return os::candidates(&p).into_iter().find(|c| os::runnable(c));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| os::candidates(&dir.join(name)))
        .find(|p| os::runnable(p))
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

    pub fn libraries(proc_root: &Path, pid: u32) -> Option<Vec<String>> {
        let maps = std::fs::read_to_string(proc_root.join(pid.to_string()).join("maps")).ok()?;
        Some(
            maps.lines()
                // address perms offset dev inode path
                .filter_map(|l| l.split_whitespace().nth(5))
                .filter_map(|path| path.rsplit('/').next())
                .filter(|name| name.contains(".so"))
                .map(str::to_owned)
                .collect(),
        )
    }

    pub fn name(proc_root: &Path, pid: u32) -> Option<String> {
        let name = std::fs::read_to_string(proc_root.join(pid.to_string()).join("comm")).ok()?;
        let name = name.trim();
        (!name.is_empty()).then(|| name.to_owned())
    }

    pub fn terminate(pid: u32) -> bool {
        signal(pid, libc::SIGTERM)
    }

    pub fn kill(pid: u32) -> bool {
        signal(pid, libc::SIGKILL)
    }

    /// Sends `signal` to the one process `pid`: never to a group (a pid of 0, or one that
    /// reads as negative), which kill(2) would take it for.
    fn signal(pid: u32, signal: libc::c_int) -> bool {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        if pid <= 0 {
            return false;
        }
        // SAFETY: kill(2) with a positive pid and a valid signal number touches no memory.
        unsafe { libc::kill(pid, signal) == 0 }
    }

    pub fn bind_to_kiln(_child: &std::process::Child) -> bool {
        true
    }

    pub fn candidates(path: &Path) -> Vec<std::path::PathBuf> {
        vec![path.to_path_buf()]
    }

    pub fn runnable(path: &Path) -> bool {
        use std::os::unix::fs::PermissionsExt;
        path.is_file()
            && path
                .metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
    }
}

#[cfg(windows)]
mod os {
    use std::os::windows::io::AsRawHandle;
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    use windows::Win32::Foundation::{CloseHandle, HANDLE, STILL_ACTIVE};
    use windows::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, MODULEENTRY32W, Module32FirstW, Module32NextW, PROCESSENTRY32W,
        Process32FirstW, Process32NextW, TH32CS_SNAPMODULE, TH32CS_SNAPMODULE32,
        TH32CS_SNAPPROCESS,
    };
    use windows::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject,
    };
    use windows::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_TERMINATE,
        TerminateProcess,
    };
    use windows::core::PCWSTR;

    pub fn signal_of(_status: std::process::ExitStatus) -> Option<i32> {
        None
    }

    /// A Toolhelp entry's NUL-terminated UTF-16 name as a string.
    fn wide(chars: &[u16]) -> String {
        let end = chars.iter().position(|&c| c == 0).unwrap_or(chars.len());
        String::from_utf16_lossy(&chars[..end])
    }

    /// Every process: (pid, parent pid, executable name), from a Toolhelp snapshot.
    fn table() -> Vec<(u32, u32, String)> {
        // SAFETY: a snapshot of the process table; the handle is closed below.
        let Ok(snapshot) = (unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0) }) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut entry = PROCESSENTRY32W {
            dwSize: std::mem::size_of::<PROCESSENTRY32W>() as u32,
            ..Default::default()
        };
        // SAFETY: `entry` is a PROCESSENTRY32W with its size set, as both calls require.
        let mut more = unsafe { Process32FirstW(snapshot, &mut entry) }.is_ok();
        while more {
            out.push((
                entry.th32ProcessID,
                entry.th32ParentProcessID,
                wide(&entry.szExeFile),
            ));
            // SAFETY: as above.
            more = unsafe { Process32NextW(snapshot, &mut entry) }.is_ok();
        }
        // SAFETY: the snapshot's handle, closed once.
        let _ = unsafe { CloseHandle(snapshot) };
        out
    }

    pub fn alive(_proc_root: &Path, pid: u32) -> bool {
        // SAFETY: a query-only handle to the process, closed below.
        let Ok(handle) = (unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, false, pid) })
        else {
            return false;
        };
        let mut code = 0u32;
        // SAFETY: a valid handle and out-pointer.
        let read = unsafe { GetExitCodeProcess(handle, &mut code) }.is_ok();
        // SAFETY: the handle opened above, closed once.
        let _ = unsafe { CloseHandle(handle) };
        read && code == STILL_ACTIVE.0 as u32
    }

    pub fn libraries(_proc_root: &Path, pid: u32) -> Option<Vec<String>> {
        // SAFETY: a snapshot of one process's modules; the handle is closed below.
        let snapshot =
            unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPMODULE | TH32CS_SNAPMODULE32, pid) }
                .ok()?;
        let mut out = Vec::new();
        let mut entry = MODULEENTRY32W {
            dwSize: std::mem::size_of::<MODULEENTRY32W>() as u32,
            ..Default::default()
        };
        // SAFETY: `entry` is a MODULEENTRY32W with its size set, as both calls require.
        let mut more = unsafe { Module32FirstW(snapshot, &mut entry) }.is_ok();
        while more {
            out.push(wide(&entry.szModule));
            // SAFETY: as above.
            more = unsafe { Module32NextW(snapshot, &mut entry) }.is_ok();
        }
        // SAFETY: the snapshot's handle, closed once.
        let _ = unsafe { CloseHandle(snapshot) };
        Some(out)
    }

    pub fn parents(_proc_root: &Path) -> Vec<(u32, u32)> {
        table()
            .into_iter()
            .map(|(pid, parent, _)| (pid, parent))
            .collect()
    }

    pub fn name(_proc_root: &Path, pid: u32) -> Option<String> {
        table()
            .into_iter()
            .find(|(p, _, _)| *p == pid)
            .map(|(_, _, name)| name.trim_end_matches(".exe").to_owned())
            .filter(|n| !n.is_empty())
    }

    pub fn terminate(pid: u32) -> bool {
        // SAFETY: a handle allowed to end the process, closed below.
        let Ok(handle) = (unsafe { OpenProcess(PROCESS_TERMINATE, false, pid) }) else {
            return false;
        };
        // SAFETY: a valid handle with PROCESS_TERMINATE.
        let ended = unsafe { TerminateProcess(handle, 1) }.is_ok();
        // SAFETY: the handle opened above, closed once.
        let _ = unsafe { CloseHandle(handle) };
        ended
    }

    pub fn kill(pid: u32) -> bool {
        terminate(pid)
    }

    /// The Job object kiln's workers run in: it ends them all when its last handle, kiln's,
    /// closes, which is when kiln ends however it ends. Made once; None if refused.
    fn job() -> Option<HANDLE> {
        static JOB: OnceLock<Option<isize>> = OnceLock::new();
        let raw = JOB.get_or_init(|| {
            // SAFETY: an unnamed job with default security; kept open for kiln's life.
            let job = unsafe { CreateJobObjectW(None, PCWSTR::null()) }.ok()?;
            let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
            limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
            // SAFETY: the structure and its size match the information class.
            unsafe {
                SetInformationJobObject(
                    job,
                    JobObjectExtendedLimitInformation,
                    (&raw const limits).cast(),
                    std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                )
            }
            .ok()?;
            Some(job.0 as isize)
        });
        raw.map(|h| HANDLE(h as *mut core::ffi::c_void))
    }

    pub fn bind_to_kiln(child: &std::process::Child) -> bool {
        let Some(job) = job() else {
            return false;
        };
        let process = HANDLE(child.as_raw_handle());
        // SAFETY: the job made above and the child's own process handle, both open.
        unsafe { AssignProcessToJobObject(job, process) }.is_ok()
    }

    /// The file as named, then with each of `PATHEXT`'s extensions (`.EXE`, `.BAT`, ...).
    pub fn candidates(path: &Path) -> Vec<PathBuf> {
        let mut out = vec![path.to_path_buf()];
        if path.extension().is_none() {
            let exts = std::env::var("PATHEXT").unwrap_or_else(|_| ".COM;.EXE;.BAT;.CMD".into());
            for ext in exts.split(';').filter(|e| !e.is_empty()) {
                let mut name = path.as_os_str().to_owned();
                name.push(ext.to_ascii_lowercase());
                out.push(PathBuf::from(name));
            }
        }
        out
    }

    pub fn runnable(path: &Path) -> bool {
        path.is_file()
    }
}

#[cfg(not(any(target_os = "linux", windows)))]
mod os {
    use std::path::{Path, PathBuf};

    pub fn signal_of(_status: std::process::ExitStatus) -> Option<i32> {
        None
    }

    pub fn alive(_proc_root: &Path, _pid: u32) -> bool {
        false
    }

    pub fn parents(_proc_root: &Path) -> Vec<(u32, u32)> {
        Vec::new()
    }

    pub fn libraries(_proc_root: &Path, _pid: u32) -> Option<Vec<String>> {
        None
    }

    pub fn name(_proc_root: &Path, _pid: u32) -> Option<String> {
        None
    }

    pub fn terminate(_pid: u32) -> bool {
        false
    }

    pub fn kill(_pid: u32) -> bool {
        false
    }

    pub fn bind_to_kiln(_child: &std::process::Child) -> bool {
        true
    }

    pub fn candidates(path: &Path) -> Vec<PathBuf> {
        vec![path.to_path_buf()]
    }

    pub fn runnable(path: &Path) -> bool {
        path.is_file()
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

    #[test]
    fn a_program_is_found_on_the_path_or_as_given() {
        let shell = if cfg!(windows) { "cmd" } else { "sh" };
        let found = find_program(shell).expect("the shell is on PATH");
        assert!(find_program(found.to_str().unwrap()).is_some());
        assert_eq!(find_program("kiln-no-such-program-anywhere"), None);
        assert_eq!(find_program("./no/such/file"), None);
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

    /// Waits (boundedly) until the process `pid` runs `comm`: a shell that set its traps
    /// has reached its `exec`.
    #[cfg(target_os = "linux")]
    fn wait_for_name(pid: u32, comm: &str) {
        let started = std::time::Instant::now();
        while name(&proc_root(), pid).as_deref() != Some(comm) {
            assert!(started.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_that_ignores_the_request_to_stop_is_killed_and_a_group_never_is() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' TERM; exec sleep 30"])
            .spawn()
            .unwrap();
        wait_for_name(child.id(), "sleep");
        assert!(ask_to_stop(child.id()));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(child.try_wait().unwrap(), None, "SIGTERM is ignored");
        assert!(kill(child.id()));
        let ended = ending(child.wait().unwrap());
        assert_eq!(ended.signal, Some(9));
        // No pid that kill(2) would read as a process group, or as every process.
        assert!(!kill(0));
        assert!(!kill(u32::MAX));
        assert!(!ask_to_stop(0));
    }
}
