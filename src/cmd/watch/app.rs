//! The watched application: starting it with kiln's layer in its environment, passing its
//! output through line by line while reading iterations and failures from it, and finding
//! a program before anything starts.

use std::io::{BufRead, Write};

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Sender;

use regex::Regex;

use crate::evidence::AppFailure;

/// What a line of the application's output told the watch.
#[derive(Debug, Clone, PartialEq)]
pub enum Heard {
    /// A line matched `--iteration`.
    Iteration(String),
    /// A line says the application failed.
    Failure(AppFailure, String),
    /// A line says an error of some other kind (the last is kept as the application's own
    /// words on how it ended).
    Error(String),
}

/// Lines that say a kernel failed to launch (CUDA, HIP), which leaves the application's
/// GPU context unusable: to a watch, its device is lost. The one log reader
/// ([`crate::logread::app`]) holds every other failure word a watch hears.
const LAUNCH_FAILED: &str = r"(?i)unspecified launch failure|cudaErrorLaunchFailure|hipErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED";

/// Lines that say an error of any kind: the application's last is quoted when it fails.
const ERROR: &str = r"(?i)(error|exception)\b|\b(traceback|fatal|panicked|aborted|segmentation fault|core dumped)\b";

/// The most lines of each failure kept as evidence: a failing application can say the
/// same thing thousands of times.
const SAID_AT_MOST: usize = 8;

/// The longest line kept in the evidence, in characters.
const LINE_KEPT: usize = 300;

/// Reads the application's output for iterations and failures.
#[derive(Debug, Clone)]
pub struct Listener {
    iteration: Option<Regex>,
    launch_failed: Regex,
    error: Regex,
}

impl Listener {
    /// A listener marking an iteration at each line `iteration` matches.
    pub fn new(iteration: Option<Regex>) -> Listener {
        // The reader's patterns compiled before the application's first line comes.
        crate::logread::app::prepare();
        Listener {
            iteration,
            // Constant patterns, checked by this module's tests.
            launch_failed: Regex::new(LAUNCH_FAILED).unwrap_or_else(|_| unreachable!()),
            error: Regex::new(ERROR).unwrap_or_else(|_| unreachable!()),
        }
    }

    /// What a line says, if anything. Its failure words are read by the one log reader
    /// `kiln explain` reads applications' output with ([`crate::logread::app`], whose
    /// frameworks' words are the watch's own, [`crate::verdict::watch::words`]).
    pub fn hear(&self, line: &str) -> Option<Heard> {
        use crate::logread::{FailureKind as F, Role, app};
        use crate::verdict::watch::words;
        let kept = || crate::text::cut(line.trim_end(), LINE_KEPT);
        let failure = app::read(line)
            .filter(|(role, _)| *role == Role::Failure)
            .and_then(|(_, r)| r.failure);
        match failure {
            // An illegal address or a launch that timed out leaves the context unusable.
            Some(F::DeviceLost | F::IllegalAddress | F::GpuHang) => {
                return Some(Heard::Failure(AppFailure::DeviceLost, kept()));
            }
            Some(F::OutOfMemory) => {
                return Some(Heard::Failure(AppFailure::OutOfMemory, kept()));
            }
            // A framework's refusal of a size (wgpu's largest buffer) in its own words.
            Some(F::Validation) if words::read(line).is_some() => {
                return Some(Heard::Failure(AppFailure::OutOfMemory, kept()));
            }
            _ => {}
        }
        if self.launch_failed.is_match(line) {
            return Some(Heard::Failure(AppFailure::DeviceLost, kept()));
        }
        if self.iteration.as_ref().is_some_and(|r| r.is_match(line)) {
            return Some(Heard::Iteration(kept()));
        }
        if self.error.is_match(line) {
            return Some(Heard::Error(kept()));
        }
        None
    }
}

/// How the application is started: its command and the environment kiln adds.
pub struct Launch {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Variables added to its environment (kiln's layer, its ring).
    pub env: Vec<(String, std::ffi::OsString)>,
}

/// Starts the application with its output piped to kiln, and a thread per stream that
/// passes each line through (`show` prints it) and sends what it heard.
pub fn start(
    launch: &Launch,
    listener: &Listener,
    heard: &Sender<Heard>,
    show: impl Fn(bool, &[u8]) + Clone + Send + 'static,
) -> std::io::Result<(Child, Vec<std::thread::JoinHandle<()>>)> {
    let (program, args) = launch
        .command
        .split_first()
        .ok_or_else(|| std::io::Error::other("no command"))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &launch.env {
        command.env(k, v);
    }
    let mut child = command.spawn()?;
    let mut threads = Vec::new();
    let streams: [(bool, Option<Box<dyn std::io::Read + Send>>); 2] = [
        (
            false,
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ),
        (
            true,
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        ),
    ];
    for (is_err, stream) in streams {
        let Some(stream) = stream else { continue };
        let (listener, heard, show) = (listener.clone(), heard.clone(), show.clone());
        threads.push(
            std::thread::Builder::new()
                .name("kiln-watch-output".into())
                .spawn(move || pass_through(stream, is_err, &listener, &heard, &show))?,
        );
    }
    Ok((child, threads))
}

/// Passes a stream through line by line (bytes as they are, invalid UTF-8 and all), and
/// sends what the listener hears in each.
fn pass_through(
    stream: Box<dyn std::io::Read + Send>,
    is_err: bool,
    listener: &Listener,
    heard: &Sender<Heard>,
    show: &impl Fn(bool, &[u8]),
) {
    // Failure lines kept so far, out of memory and device lost.
    let mut counts = [0usize; 2];
    let mut reader = std::io::BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        show(is_err, &line);
        let text = String::from_utf8_lossy(&line);
        let Some(h) = listener.hear(&text) else {
            continue;
        };
        if let Heard::Failure(kind, _) = &h {
            let i = usize::from(*kind == AppFailure::DeviceLost);
            counts[i] += 1;
            if counts[i] > SAID_AT_MOST {
                continue;
            }
        }
        if heard.send(h).is_err() {
            return;
        }
    }
}

/// Writes a line of the application's output to kiln's own stream of the same kind.
pub fn echo(is_err: bool, line: &[u8]) {
    let _ = if is_err {
        std::io::stderr().lock().write_all(line)
    } else {
        std::io::stdout().lock().write_all(line)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_heard_in_the_words_of_each_runtime_and_iterations_by_the_pattern() {
        let l = Listener::new(Some(Regex::new(r"^step \d+").unwrap()));
        let oom = [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY",
            "RuntimeError: HIP out of memory.",
        ];
        for line in oom {
            assert!(
                matches!(
                    l.hear(line),
                    Some(Heard::Failure(AppFailure::OutOfMemory, _))
                ),
                "{line}"
            );
        }
        let lost = [
            "vkQueueSubmit: VK_ERROR_DEVICE_LOST",
            "DXGI_ERROR_DEVICE_REMOVED",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ];
        for line in lost {
            assert!(
                matches!(
                    l.hear(line),
                    Some(Heard::Failure(AppFailure::DeviceLost, _))
                ),
                "{line}"
            );
        }
        assert_eq!(
            l.hear("step 12 loss 0.3"),
            Some(Heard::Iteration("step 12 loss 0.3".into()))
        );
        assert_eq!(l.hear("loading model"), None);
        // A framework's refusal in its own words, and an error of another kind.
        assert!(matches!(
            l.hear("Buffer size 68719476736 is greater than the maximum buffer size (268435456)"),
            Some(Heard::Failure(AppFailure::OutOfMemory, _))
        ));
        assert_eq!(
            l.hear("ValueError: shapes (3,4) and (5,) not aligned"),
            Some(Heard::Error(
                "ValueError: shapes (3,4) and (5,) not aligned".into()
            ))
        );
        assert_eq!(l.hear("no errors found in 12 steps"), None);
        // Words only the one log reader knew, quoted in the real corpus: a CUDA launch
        // timeout (tests/fixtures/real/cuda.jsonl, from
        // forums.developer.nvidia.com/t/deciphering-an-nvrm-xid-message/2574) and PPSSPP's
        // lost Vulkan device (vulkan.jsonl, from github.com/hrydgard/ppsspp/issues/14279).
        for lost in [
            "Cuda error: rp_many_kernel in file \u{2018}\u{2019} in line 111 : the launch timed out and was terminated.",
            "(C:\\Users\\AdamN\\Documents\\Projects\\ppsspp\\Common\\GPU\\Vulkan\\VulkanRenderManager.cpp:VulkanRenderManager::Submit:1258) Critical: [false] Lost the Vulkan device in vkQueueSubmit! If this happens again, switch Graphics Backend away from Vulkan",
        ] {
            assert!(
                matches!(
                    l.hear(lost),
                    Some(Heard::Failure(AppFailure::DeviceLost, _))
                ),
                "{lost}"
            );
        }
        // The near miss: TensorFlow's allocator saying a refusal it retries is no failure
        // (the reader's own quiet words), where the watch's old list heard running out of
        // memory.
        assert!(!matches!(
            l.hear("W tensorflow/core/common_runtime/bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 1.17GiB with freed_by_count=0. The caller indicates that this is not a failure, but this may mean that there could be performance gains if more memory were available."),
            Some(Heard::Failure(..))
        ));
        assert_eq!(Listener::new(None).hear("step 1"), None);
    }
}
