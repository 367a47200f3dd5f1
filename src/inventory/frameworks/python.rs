//! The Python environments kiln reads and the frameworks installed in them: found from
//! where each interpreter lies and read from the frameworks' own files, never by running
//! Python or importing a framework.

use std::path::{Path, PathBuf};

use super::{CudaVersion, Framework, Installed, Runtime};

/// Longest file kiln reads to find a framework's version, in bytes: the files it reads are
/// a few kilobytes; anything larger is not the file it expects.
const MAX_VERSION_FILE_BYTES: u64 = 1 << 20;
/// Longest library kiln scans for PyTorch's list of architectures, in bytes
/// (`libtorch_python.so` is tens of megabytes).
const MAX_LIBRARY_BYTES: u64 = 512 << 20;
/// Longest string of architectures kiln reads from the library, in bytes.
const MAX_ARCH_LIST_BYTES: usize = 4096;

/// PyTorch's list of architectures (`torch.cuda.get_arch_list()`), read from its Python
/// library, where PyTorch's `_cuda_getArchFlags` keeps it as one string of words
/// (`sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90`): the longest string of the library made
/// of such words alone. None where the library is missing, too large, or has no such string.
fn arch_list(library: &Path) -> Option<Vec<String>> {
    use std::io::Read;
    let file = std::fs::File::open(library).ok()?;
    if file.metadata().ok()?.len() > MAX_LIBRARY_BYTES {
        return None;
    }
    let mut best: Option<Vec<String>> = None;
    let mut run: Vec<u8> = Vec::new();
    let mut overflow = false;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut chunk).ok()?;
        if n == 0 {
            consider_arch_string(&run, overflow, &mut best);
            return best;
        }
        for &b in &chunk[..n] {
            // A C string ends at NUL.
            if b == 0 {
                consider_arch_string(&run, overflow, &mut best);
                run.clear();
                overflow = false;
            } else if run.len() < MAX_ARCH_LIST_BYTES {
                run.push(b);
            } else {
                overflow = true;
            }
        }
    }
}

/// Keeps `run` in `best` where it is a longer list of architectures than `best` holds.
fn consider_arch_string(run: &[u8], overflow: bool, best: &mut Option<Vec<String>>) {
    let is_arch = |w: &str| {
        let body = w.strip_prefix("sm_").or_else(|| w.strip_prefix("compute_"));
        body.is_some_and(|b| {
            let digits = b.trim_end_matches(['a', 'f']);
            digits.len() >= 2 && digits.bytes().all(|c| c.is_ascii_digit())
        })
    };
    if overflow {
        return;
    }
    let Ok(text) = std::str::from_utf8(run) else {
        return;
    };
    let words: Vec<&str> = text.split(' ').collect();
    if words.iter().all(|w| is_arch(w))
        && words.iter().any(|w| w.starts_with("sm_"))
        && best.as_ref().is_none_or(|b| b.len() < words.len())
    {
        *best = Some(words.iter().map(|w| (*w).to_owned()).collect());
    }
}

/// One Python environment: an interpreter and the site-packages directories it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct PythonEnv {
    /// The interpreter as found (on PATH or named).
    pub interpreter: PathBuf,
    /// Its site-packages (and dist-packages) directories that exist.
    pub site_packages: Vec<PathBuf>,
}

/// Whether a file name is a Python interpreter's: `python`, `python3`, `python3.11`,
/// `python.exe`.
fn is_python_name(name: &str) -> bool {
    // Windows' interpreters: `python.exe`, `python3.exe`.
    let name = name.strip_suffix(".exe").unwrap_or(name);
    let Some(rest) = name.strip_prefix("python") else {
        return false;
    };
    rest.is_empty()
        || rest == "3"
        || rest
            .strip_prefix("3.")
            .is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
}

/// `3.11` from `python3.11`.
fn version_of_name(name: &str) -> Option<String> {
    name.strip_prefix("python")
        .filter(|v| v.contains('.'))
        .map(str::to_owned)
}

/// `key = value` lines of a `pyvenv.cfg`.
fn pyvenv_value(cfg: &str, key: &str) -> Option<String> {
    cfg.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

/// The Python environments of the interpreters on `path_var` (a PATH value) and of those
/// `named` (an interpreter, or an environment's directory), with `home` for the user's
/// site-packages; each environment once.
pub fn python_envs(
    path_var: Option<&str>,
    named: &[PathBuf],
    home: Option<&Path>,
) -> Vec<PythonEnv> {
    let mut interpreters: Vec<PathBuf> = Vec::new();
    for dir in path_var.into_iter().flat_map(std::env::split_paths) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_str().is_some_and(is_python_name))
            .map(|e| e.path())
            .collect();
        found.sort();
        interpreters.extend(found);
    }
    for n in named {
        if n.is_dir() {
            let bin = [
                "bin/python3",
                "bin/python",
                "Scripts/python.exe",
                "python.exe",
            ]
            .iter()
            .map(|b| n.join(b))
            .find(|p| p.exists());
            // An environment's directory without an interpreter is still read as one.
            interpreters.push(bin.unwrap_or_else(|| n.join("bin/python3")));
        } else {
            interpreters.push(n.clone());
        }
    }
    let mut out: Vec<PythonEnv> = Vec::new();
    for interpreter in interpreters {
        let site_packages = site_packages(&interpreter, home);
        if site_packages.is_empty() || out.iter().any(|e| e.site_packages == site_packages) {
            continue;
        }
        out.push(PythonEnv {
            interpreter,
            site_packages,
        });
    }
    out
}

/// The site-packages directories an interpreter reads, from its place on disk: a virtual
/// environment's (and its base's where `include-system-site-packages` is true), else its
/// installation prefix's, plus the user's; only those that exist.
fn site_packages(interpreter: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let name = interpreter
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let real = std::fs::canonicalize(interpreter).ok();
    let env_dir = interpreter.parent().and_then(Path::parent);
    let cfg = env_dir.and_then(|d| std::fs::read_to_string(d.join("pyvenv.cfg")).ok());
    let version = version_of_name(name)
        .or_else(|| {
            real.as_ref()
                .and_then(|r| r.file_name()?.to_str().and_then(version_of_name))
        })
        .or_else(|| {
            let v = cfg.as_deref().and_then(|c| {
                pyvenv_value(c, "version").or_else(|| pyvenv_value(c, "version_info"))
            })?;
            let mut parts = v.split('.');
            Some(format!("{}.{}", parts.next()?, parts.next()?))
        });
    let mut prefixes: Vec<PathBuf> = Vec::new();
    let mut user = true;
    if let Some(env) = env_dir {
        prefixes.push(env.to_path_buf());
    }
    if let Some(cfg) = &cfg {
        // A virtual environment reads its base's packages only when told to, and never
        // the user's.
        user = false;
        let system = pyvenv_value(cfg, "include-system-site-packages")
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        // `home` is the base's interpreter directory: `/usr/bin` (prefix `/usr`), or on
        // Windows the prefix itself (`C:\Python311`).
        if system && let Some(base) = pyvenv_value(cfg, "home") {
            let base = Path::new(&base);
            prefixes.extend(base.parent().map(Path::to_path_buf));
            prefixes.push(base.to_path_buf());
        }
    } else if let Some(real) = &real {
        prefixes.extend(real.parent().and_then(Path::parent).map(Path::to_path_buf));
        // Windows' installations keep python.exe in the prefix itself.
        if name.ends_with(".exe") {
            prefixes.extend(real.parent().map(Path::to_path_buf));
        }
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for prefix in &prefixes {
        let versions: Vec<String> = match &version {
            Some(v) => vec![format!("python{v}")],
            None => std::fs::read_dir(prefix.join("lib"))
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.starts_with("python3."))
                .collect(),
        };
        for v in &versions {
            for lib in ["lib", "lib64"] {
                for sub in ["site-packages", "dist-packages"] {
                    dirs.push(prefix.join(lib).join(v).join(sub));
                }
            }
        }
        // Debian's and Ubuntu's system packages, and Windows' layout.
        dirs.push(prefix.join("lib/python3/dist-packages"));
        dirs.push(prefix.join("Lib/site-packages"));
    }
    if user && let (Some(home), Some(v)) = (home, &version) {
        dirs.push(
            home.join(".local/lib")
                .join(format!("python{v}"))
                .join("site-packages"),
        );
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        if d.is_dir() && !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

/// A small text file, or None where it is missing, unreadable or larger than a version
/// file is.
pub(super) fn small_text(path: &Path) -> Option<String> {
    let len = std::fs::metadata(path).ok()?.len();
    if len > MAX_VERSION_FILE_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

/// The value of a Python assignment or dict entry, as far as kiln reads one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PyValue {
    /// A quoted string.
    Text(String),
    /// The literal `None`.
    Nothing,
    /// Anything else (a call, a name): not read.
    Other,
}

impl PyValue {
    fn text(self) -> Option<String> {
        match self {
            PyValue::Text(t) => Some(t),
            PyValue::Nothing | PyValue::Other => None,
        }
    }
}

/// What a Python assignment or dict entry of `key` holds, None where the key is absent.
/// `at_line_start` asks for an assignment at the start of a line (`cuda: Optional[str] =
/// '12.1'`), else the key may stand anywhere, as a dict key (`'cuda_version': '12.3'`).
fn python_value(text: &str, key: &str, at_line_start: bool) -> Option<PyValue> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for line in text.lines() {
        let mut from = 0;
        while let Some(at) = line[from..].find(key).map(|i| i + from) {
            from = at + key.len();
            let before = line[..at].chars().next_back();
            let after = line[from..].chars().next();
            let starts = if at_line_start {
                line[..at].trim().is_empty()
            } else {
                !before.is_some_and(ident)
            };
            if !starts || after.is_some_and(ident) {
                continue;
            }
            let rest = line[from..].trim_start_matches(['\'', '"']).trim_start();
            if !rest.starts_with([':', '=']) {
                continue;
            }
            // The value ends at the next entry of a dict; an annotation comes before `=`.
            let value = rest.split(',').next().unwrap_or_default();
            let value = match value.rsplit_once('=') {
                Some((_, v)) => v,
                None => &value[1..],
            }
            .trim()
            .trim_end_matches('}');
            let quoted = value
                .chars()
                .next()
                .filter(|c| *c == '\'' || *c == '"')
                .and_then(|q| {
                    let body = &value[1..];
                    body.find(q).map(|close| body[..close].to_owned())
                });
            return Some(match quoted {
                Some(t) => PyValue::Text(t),
                None if value == "None" => PyValue::Nothing,
                None => PyValue::Other,
            });
        }
    }
    None
}

/// The frameworks installed in one site-packages directory.
pub fn installed_in(site: &Path) -> Vec<Installed> {
    let mut out = Vec::new();
    let mut push = |framework, version, runtime, archs| {
        out.push(Installed {
            framework,
            version,
            runtime,
            site_packages: site.to_path_buf(),
            archs,
        });
    };
    if let Some(text) = small_text(&site.join("torch/version.py")) {
        let version = python_value(&text, "__version__", true).and_then(PyValue::text);
        let cuda = python_value(&text, "cuda", true);
        let hip = python_value(&text, "hip", true);
        let cuda_version = cuda.clone().and_then(PyValue::text);
        let runtime = match (cuda_version.as_deref().map(CudaVersion::parse), hip) {
            (Some(Some(v)), _) => Some(Runtime::Cuda(v)),
            (_, Some(PyValue::Text(h))) => Some(Runtime::Hip(h)),
            // Only `cuda = None` (and no HIP) is a CPU-only build: a value kiln cannot
            // read is no evidence of one.
            (None, None | Some(PyValue::Nothing)) if cuda == Some(PyValue::Nothing) => {
                Some(Runtime::CpuOnly)
            }
            _ => None,
        };
        if let Some(runtime) = runtime {
            let archs = if matches!(runtime, Runtime::Cuda(_)) {
                ["torch/lib/libtorch_python.so", "torch/lib/torch_python.dll"]
                    .iter()
                    .find_map(|l| arch_list(&site.join(l)))
            } else {
                None
            };
            push(Framework::Pytorch, version, runtime, archs);
        }
    }
    if let Some(text) = small_text(&site.join("tensorflow/python/platform/build_info.py"))
        && let Some(v) = python_value(&text, "cuda_version", false)
            .and_then(PyValue::text)
            .and_then(|v| CudaVersion::parse(&v))
    {
        push(Framework::Tensorflow, None, Runtime::Cuda(v), None);
    }
    if let Some(text) = small_text(&site.join("onnxruntime/capi/build_and_package_info.py"))
        && let Some(v) = python_value(&text, "cuda_version", false)
            .and_then(PyValue::text)
            .and_then(|v| CudaVersion::parse(&v))
    {
        let version = python_value(&text, "__version__", true).and_then(PyValue::text);
        push(Framework::Onnxruntime, version, Runtime::Cuda(v), None);
    }
    let mut jax: Option<(u32, String)> = None;
    let mut names: Vec<String> = std::fs::read_dir(site)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .filter(|n| n.ends_with(".dist-info"))
        .collect();
    names.sort();
    for name in names {
        let stem = name.trim_end_matches(".dist-info");
        let Some((dist, version)) = stem.split_once('-') else {
            continue;
        };
        let major = if let Some(rest) = dist.strip_prefix("jax_cuda") {
            rest.strip_suffix("_plugin")
                .or_else(|| rest.strip_suffix("_pjrt"))
                .and_then(|m| m.parse().ok())
        } else if dist == "jaxlib" {
            // Old jaxlib wheels carried CUDA in their local version: `0.4.23+cuda12.cudnn89`.
            version
                .split_once("+cuda")
                .and_then(|(_, r)| r.split('.').next()?.parse().ok())
        } else {
            None
        };
        if let Some(m) = major
            && jax.is_none()
        {
            jax = Some((m, version.to_owned()));
        }
    }
    if let Some((major, version)) = jax {
        push(
            Framework::Jax,
            Some(version),
            Runtime::CudaMajor(major),
            None,
        );
    }
    out
}

/// The frameworks installed in every environment.
pub fn installed(envs: &[PythonEnv]) -> Vec<Installed> {
    let mut out: Vec<Installed> = Vec::new();
    for site in envs.iter().flat_map(|e| &e.site_packages) {
        for i in installed_in(site) {
            if !out.contains(&i) {
                out.push(i);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn cuda(v: &str) -> Runtime {
        Runtime::Cuda(CudaVersion::parse(v).unwrap())
    }

    fn words(list: &str) -> Vec<String> {
        list.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn python_values_in_each_framework_s_form() {
        let torch_new = "__version__ = '2.3.0+cu121'\ndebug = False\ncuda: Optional[str] = '12.1'\ngit_version = 'abc'\nhip: Optional[str] = None\n";
        assert_eq!(
            python_value(torch_new, "cuda", true),
            Some(PyValue::Text("12.1".into()))
        );
        assert_eq!(python_value(torch_new, "hip", true), Some(PyValue::Nothing));
        assert_eq!(
            python_value(torch_new, "__version__", true),
            Some(PyValue::Text("2.3.0+cu121".into()))
        );
        let torch_old = "__version__ = '1.4.0'\ndebug = False\ncuda = '10.1'\ngit_version = 'x'\n";
        assert_eq!(
            python_value(torch_old, "cuda", true),
            Some(PyValue::Text("10.1".into()))
        );
        assert_eq!(python_value(torch_old, "hip", true), None);
        let tf = "build_info = {'cpu_compiler': '/usr/bin/gcc', 'cuda_compute_capabilities': ['sm_50'], 'cuda_version': '12.3', 'cudnn_version': '8', 'is_cuda_build': True}\n";
        assert_eq!(
            python_value(tf, "cuda_version", false),
            Some(PyValue::Text("12.3".into()))
        );
        let tf_cpu = "build_info = {'is_cuda_build': False, 'is_rocm_build': False}\n";
        assert_eq!(python_value(tf_cpu, "cuda_version", false), None);
        let ort = "package_name = 'onnxruntime-gpu'\n__version__ = '1.18.0'\ncuda_version = '11.8'\ncudnn_version = '8'\n";
        assert_eq!(
            python_value(ort, "cuda_version", false),
            Some(PyValue::Text("11.8".into()))
        );
    }

    /// A site-packages directory holding `files` (path, text), and empty directories `dirs`.
    fn site(files: &[(&str, &str)], dirs: &[&str]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = d.path().join(path);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        for dir in dirs {
            fs::create_dir_all(d.path().join(dir)).unwrap();
        }
        d
    }

    #[test]
    fn each_framework_s_build_is_read_from_its_files() {
        let s = site(
            &[
                (
                    "torch/version.py",
                    "__version__ = '2.7.0+cu128'\ncuda: Optional[str] = '12.8'\nhip: Optional[str] = None\n",
                ),
                (
                    "tensorflow/python/platform/build_info.py",
                    "build_info = {'cuda_version': '12.3', 'cudnn_version': '8'}\n",
                ),
                (
                    "onnxruntime/capi/build_and_package_info.py",
                    "package_name = 'onnxruntime-gpu'\n__version__ = '1.18.0'\ncuda_version = '11.8'\n",
                ),
            ],
            &[
                "jax_cuda12_plugin-0.4.30.dist-info",
                "jax-0.4.30.dist-info",
                "numpy-1.26.dist-info",
            ],
        );
        let found: Vec<(Framework, Runtime)> = installed_in(s.path())
            .into_iter()
            .map(|i| (i.framework, i.runtime))
            .collect();
        assert_eq!(
            found,
            [
                (Framework::Pytorch, cuda("12.8")),
                (Framework::Tensorflow, cuda("12.3")),
                (Framework::Onnxruntime, cuda("11.8")),
                (Framework::Jax, Runtime::CudaMajor(12)),
            ]
        );
        // A CPU-only PyTorch, a ROCm one, an old jaxlib with CUDA in its version; CPU
        // TensorFlow and onnxruntime say nothing.
        let s = site(
            &[
                (
                    "torch/version.py",
                    "__version__ = '2.7.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n",
                ),
                (
                    "tensorflow/python/platform/build_info.py",
                    "build_info = {'is_cuda_build': False}\n",
                ),
                (
                    "onnxruntime/capi/build_and_package_info.py",
                    "package_name = 'onnxruntime'\n__version__ = '1.18.0'\n",
                ),
            ],
            &["jaxlib-0.4.23+cuda11.cudnn86.dist-info"],
        );
        let found: Vec<(Framework, Runtime)> = installed_in(s.path())
            .into_iter()
            .map(|i| (i.framework, i.runtime))
            .collect();
        assert_eq!(
            found,
            [
                (Framework::Pytorch, Runtime::CpuOnly),
                (Framework::Jax, Runtime::CudaMajor(11)),
            ]
        );
        let s = site(
            &[(
                "torch/version.py",
                "cuda: Optional[str] = None\nhip: Optional[str] = '6.2.41133'\n",
            )],
            &[],
        );
        assert_eq!(
            installed_in(s.path())[0].runtime,
            Runtime::Hip("6.2.41133".into())
        );
        // A version file kiln cannot read says nothing, rather than "CPU only".
        let s = site(&[("torch/version.py", "cuda = get_cuda()\n")], &[]);
        assert!(installed_in(s.path()).is_empty());
    }

    #[test]
    fn python_environments_are_found_on_path_and_by_name_without_running_them() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // A base installation at /opt/py, and a venv made from it whose python3 links there.
        let base_bin = r.join("opt/py/bin");
        fs::create_dir_all(&base_bin).unwrap();
        fs::write(base_bin.join("python3.11"), "").unwrap();
        std::os::unix::fs::symlink(base_bin.join("python3.11"), base_bin.join("python3")).unwrap();
        // Not interpreters: never read as such.
        fs::write(base_bin.join("python3-config"), "").unwrap();
        fs::write(base_bin.join("python3.11-config"), "").unwrap();
        let base_site = r.join("opt/py/lib/python3.11/site-packages");
        fs::create_dir_all(&base_site).unwrap();
        let venv = r.join("venv");
        fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(base_bin.join("python3"), venv.join("bin/python3")).unwrap();
        fs::write(
            venv.join("pyvenv.cfg"),
            format!(
                "home = {}\ninclude-system-site-packages = false\nversion = 3.11.9\n",
                base_bin.display()
            ),
        )
        .unwrap();
        let venv_site = venv.join("lib/python3.11/site-packages");
        fs::create_dir_all(&venv_site).unwrap();
        // A user site the base reads and the venv does not.
        let home = r.join("home");
        let user_site = home.join(".local/lib/python3.11/site-packages");
        fs::create_dir_all(&user_site).unwrap();

        let path = std::env::join_paths([base_bin.clone(), r.join("missing")]).unwrap();
        let envs = python_envs(path.to_str(), std::slice::from_ref(&venv), Some(&home));
        let sites: Vec<&Vec<PathBuf>> = envs.iter().map(|e| &e.site_packages).collect();
        // python3 and python3.11 on PATH are one environment.
        assert_eq!(
            sites,
            [
                &vec![base_site.clone(), user_site.clone()],
                &vec![venv_site.clone()]
            ]
        );
        // A venv that includes the system's packages reads its base's too; one named by its
        // interpreter is the same as one named by its directory.
        fs::write(
            venv.join("pyvenv.cfg"),
            format!(
                "home = {}\ninclude-system-site-packages = true\nversion = 3.11.9\n",
                base_bin.display()
            ),
        )
        .unwrap();
        let envs = python_envs(None, &[venv.join("bin/python3")], Some(&home));
        assert_eq!(envs[0].site_packages, [venv_site, base_site]);
    }

    #[test]
    fn debian_s_and_windows_layouts_are_read_too() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        // Debian: /usr/bin/python3 -> python3.11, packages in /usr/lib/python3/dist-packages.
        let bin = r.join("usr/bin");
        fs::create_dir_all(&bin).unwrap();
        fs::write(bin.join("python3.11"), "").unwrap();
        let debian = r.join("usr/lib/python3/dist-packages");
        fs::create_dir_all(&debian).unwrap();
        let envs = python_envs(bin.to_str(), &[], None);
        assert_eq!(envs.len(), 1);
        assert_eq!(envs[0].site_packages, [debian]);
        // Windows: a venv's Scripts\python.exe beside pyvenv.cfg, its Lib\site-packages,
        // and its base's python.exe in the prefix itself.
        let base = r.join("Python311");
        fs::create_dir_all(base.join("Lib/site-packages")).unwrap();
        fs::write(base.join("python.exe"), "").unwrap();
        let venv = r.join("venv");
        fs::create_dir_all(venv.join("Scripts")).unwrap();
        fs::create_dir_all(venv.join("Lib/site-packages")).unwrap();
        fs::write(venv.join("Scripts/python.exe"), "").unwrap();
        fs::write(
            venv.join("pyvenv.cfg"),
            format!(
                "home = {}\ninclude-system-site-packages = true\nversion = 3.11.9\n",
                base.display()
            ),
        )
        .unwrap();
        let envs = python_envs(None, &[venv.join("Scripts/python.exe")], None);
        assert_eq!(
            envs[0].site_packages,
            [
                venv.join("Lib/site-packages"),
                base.join("Lib/site-packages")
            ]
        );
        let envs = python_envs(None, &[base.join("python.exe")], None);
        assert_eq!(envs[0].site_packages, [base.join("Lib/site-packages")]);
    }

    #[test]
    fn pytorch_s_architectures_are_read_from_its_library() {
        let s = site(&[], &["torch/lib"]);
        let library = s.path().join("torch/lib/libtorch_python.so");
        let mut bytes = b"\x7fELF\x02\x01\x00junk sm_80 text\x00-arch=sm_90\x00sm_80\x00".to_vec();
        bytes.extend_from_slice(b"sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90\x00");
        bytes.extend(std::iter::repeat_n(0xffu8, 3 << 20));
        bytes.extend_from_slice(b"\x00compute_90 sm_90a");
        fs::write(&library, &bytes).unwrap();
        assert_eq!(
            arch_list(&library),
            Some(words("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"))
        );
        // Near miss: a library without such a string says nothing.
        fs::write(&library, b"\x00sm_80 is not a list of architectures\x00").unwrap();
        assert_eq!(arch_list(&library), None);
        assert_eq!(arch_list(&s.path().join("missing.so")), None);
    }
}
