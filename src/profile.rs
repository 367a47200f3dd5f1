//! Profiles: a job, not a list of flags. `profiles/*.toml` are bundled into the binary
//! (`quick`, `fleet`, `burn-in`, `rma`) and any file in the same format loads from a path.
//! An installed kiln (the .deb) also has them as files in `/usr/share/kiln/profiles`,
//! [`installed_dir`]: a name is read from there first, so that the files people read and
//! copy are the ones that run, and the built-in copy answers where there are none.
//! Validation is strict: an unknown key, a wrong type or an impossible value is one
//! sentence naming the file, the line and the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::limits::{Bounds, bounds};
use crate::thresholds::{Invalid, Overrides, Thresholds};
use crate::units::parse_duration;
use crate::workload::registry::{PlannedWorkload, WorkloadConfig, WorkloadName};
use crate::workload::{SettingError, SettingsTable};

/// The profiles built into kiln: name and text.
pub const BUNDLED: [(&str, &str); 4] = [
    ("quick", include_str!("../profiles/quick.toml")),
    ("fleet", include_str!("../profiles/fleet.toml")),
    ("burn-in", include_str!("../profiles/burn-in.toml")),
    ("rma", include_str!("../profiles/rma.toml")),
];

/// The profile `kiln run` uses when none is named.
pub const DEFAULT_PROFILE: &str = "quick";

/// What to do on a finding, to confirm it (the `rma` profile).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Confirm {
    /// Reruns of a workload that found something.
    pub repeat: u32,
    /// Failing words retested in place per VRAM run.
    pub retest_cap: u32,
}

/// A validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Bundled name, or the file's path.
    pub name: String,
    /// The file it was read from (None: the copy built into kiln).
    pub file: Option<PathBuf>,
    /// One sentence for people.
    pub description: String,
    /// Time budget per device for the workloads (None: each runs its own plan once).
    pub duration: Option<Duration>,
    /// Stop a device's remaining workloads after the first that fails.
    pub stop_on_first_failure: bool,
    /// Telemetry sampling interval, when the profile sets one.
    pub telemetry_interval: Option<Duration>,
    /// Bound on every wait for the device, when the profile sets one.
    pub fence_timeout: Option<Duration>,
    /// The watchdog: a device that reports no progress for this long is hung.
    pub step_timeout: Duration,
    /// Wait for an idle, cool GPU before starting and between workloads.
    pub wait_idle: bool,
    /// Verdict thresholds (the defaults with the profile's overrides).
    pub thresholds: Thresholds,
    /// Confirmation of findings by repetition.
    pub confirm: Option<Confirm>,
    /// The workloads, in order.
    pub workloads: Vec<PlannedWorkload>,
}

/// Why a profile could not be used: one sentence naming the file, line and key.
pub type ProfileError = crate::text::FileRefusal;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    description: Spanned<String>,
    duration: Option<Spanned<String>>,
    #[serde(default)]
    stop_on_first_failure: bool,
    telemetry_interval: Option<Spanned<String>>,
    fence_timeout: Option<Spanned<String>>,
    step_timeout: Option<Spanned<String>>,
    #[serde(default)]
    wait_idle: bool,
    thresholds: Option<Spanned<Overrides>>,
    confirm: Option<Spanned<RawConfirm>>,
    #[serde(default)]
    workload: Vec<Spanned<RawWorkload>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfirm {
    repeat: Spanned<i64>,
    retest_cap: Option<Spanned<i64>>,
}

/// One `[[workload]]` table, key by key with where each is: which keys apply depends on
/// `kind`, and each workload reads its own (serde's tagged enums would lose the lines).
type RawWorkload = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// A `[[workload]]` table as a workload reads its settings: each key it takes is marked
/// taken, and a value of the wrong type is the TOML reader's own sentence.
struct WorkloadTable<'a> {
    values: &'a RawWorkload,
    taken: Vec<String>,
}

impl WorkloadTable<'_> {
    fn get<T: serde::de::DeserializeOwned>(
        &mut self,
        key: &str,
    ) -> Result<Option<T>, SettingError> {
        self.taken.push(key.to_owned());
        let Some((_, value)) = self.values.iter().find(|(k, _)| k.get_ref() == key) else {
            return Ok(None);
        };
        T::deserialize(value.get_ref().clone())
            .map(Some)
            .map_err(|e| SettingError::new(key, e.message().trim().replace('\n', " ")))
    }

    /// Where `key`'s value is, for an error about it.
    fn offset(&self, key: &str) -> Option<usize> {
        self.values
            .iter()
            .find(|(k, _)| k.get_ref() == key)
            .map(|(_, v)| v.span().start)
    }
}

impl SettingsTable for WorkloadTable<'_> {
    fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, SettingError> {
        self.get(key)
    }
    fn text(&mut self, key: &str) -> Result<Option<String>, SettingError> {
        self.get(key)
    }
    fn integer(&mut self, key: &str) -> Result<Option<i64>, SettingError> {
        self.get(key)
    }
    fn number(&mut self, key: &str) -> Result<Option<f64>, SettingError> {
        self.get(key)
    }
}

/// Reads profile text; `file` names it in errors.
struct Reader<'a> {
    file: &'a str,
    text: &'a str,
}

impl Reader<'_> {
    // Spans are byte offsets: count bytes, so that an offset inside a multi-byte
    // character (from a damaged file) cannot panic.
    fn line_of(&self, offset: usize) -> usize {
        self.text.as_bytes()[..offset.min(self.text.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn error(&self, offset: Option<usize>, key: &str, message: impl Into<String>) -> ProfileError {
        ProfileError {
            file: self.file.to_owned(),
            line: offset.map(|o| self.line_of(o)),
            key: (!key.is_empty()).then(|| key.to_owned()),
            message: message.into(),
        }
    }

    fn at<T>(&self, value: &Spanned<T>, key: &str, message: impl Into<String>) -> ProfileError {
        self.error(Some(value.span().start), key, message)
    }

    /// The key a parse error is about: the key on the error's line (`key = ...`), or the
    /// word the span covers (an unknown key's own name).
    fn key_of(&self, span: &std::ops::Range<usize>) -> String {
        let bytes = self.text.as_bytes();
        let start = span.start.min(bytes.len());
        let line_start = bytes[..start]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let line = String::from_utf8_lossy(&bytes[line_start..]);
        let line = line.lines().next().unwrap_or("");
        match line.split_once('=') {
            Some((key, _)) => key.trim().trim_matches('"').to_owned(),
            None => String::from_utf8_lossy(&bytes[start..span.end.clamp(start, bytes.len())])
                .trim()
                .to_owned(),
        }
    }

    fn parse(&self) -> Result<RawProfile, ProfileError> {
        toml::from_str(self.text).map_err(|e| {
            let message = e.message().trim().replace('\n', " ");
            match e.span() {
                Some(span) => {
                    let key = self.key_of(&span);
                    self.error(Some(span.start), &key, message)
                }
                None => self.error(None, "", message),
            }
        })
    }

    fn duration(
        &self,
        value: &Spanned<String>,
        key: &str,
        range: &Bounds<Duration>,
    ) -> Result<Duration, ProfileError> {
        let d = parse_duration(value.get_ref()).map_err(|e| self.at(value, key, e))?;
        range
            .check(d, value.get_ref())
            .map_err(|e| self.at(value, key, e))
    }

    /// A threshold of the `[thresholds]` table (at `table_at`) that cannot be, at the line
    /// of its key.
    fn invalid_threshold(&self, table_at: usize, e: Invalid) -> ProfileError {
        let path: Vec<String> = std::iter::once("thresholds".to_owned())
            .chain(e.path.iter().cloned())
            .collect();
        let at = self.key_offset(&path).unwrap_or(table_at);
        self.error(Some(at), &crate::thresholds::dotted(&path), e.message)
    }

    /// Where the deepest of `path`'s keys that the text has is written: a value's own key
    /// where it is there, else the nearest table above it.
    fn key_offset(&self, path: &[String]) -> Option<usize> {
        use toml::de::{DeTable, DeValue};
        let doc = DeTable::parse(self.text).ok()?;
        let mut table: &DeTable = doc.get_ref();
        let mut found = None;
        for key in path {
            let Some((k, v)) = table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == key.as_str())
            else {
                break;
            };
            found = Some(k.span().start);
            match v.get_ref() {
                DeValue::Table(inner) => table = inner,
                _ => break,
            }
        }
        found
    }

    fn count(
        &self,
        value: &Spanned<i64>,
        key: &str,
        range: &Bounds<u64>,
    ) -> Result<u32, ProfileError> {
        range
            .check_count(*value.get_ref())
            .map_err(|e| self.at(value, key, e))
    }
}

/// Parses and validates profile `text`; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Profile, ProfileError> {
    let r = Reader { file, text };
    let raw = r.parse()?;
    let description = raw.description.get_ref().trim().to_owned();
    if description.is_empty() {
        return Err(r.at(&raw.description, "description", "must not be empty"));
    }
    let duration = raw
        .duration
        .as_ref()
        .map(|d| r.duration(d, "duration", &bounds::DURATION))
        .transpose()?;
    let telemetry_interval = raw
        .telemetry_interval
        .as_ref()
        .map(|d| r.duration(d, "telemetry_interval", &bounds::TELEMETRY_INTERVAL))
        .transpose()?;
    let fence_timeout = raw
        .fence_timeout
        .as_ref()
        .map(|d| r.duration(d, "fence_timeout", &bounds::FENCE_TIMEOUT))
        .transpose()?;
    let step_timeout = raw
        .step_timeout
        .as_ref()
        .map(|d| r.duration(d, "step_timeout", &bounds::STEP_TIMEOUT))
        .transpose()?
        .unwrap_or(Duration::from_secs(120));
    let thresholds = match raw.thresholds {
        Some(t) => {
            let table_at = t.span().start;
            let (laid, _) = t.into_inner().lay_over(&Thresholds::default());
            laid.validate()
                .map_err(|e| r.invalid_threshold(table_at, e))?;
            laid
        }
        None => Thresholds::default(),
    };
    let confirm = raw
        .confirm
        .as_ref()
        .map(|c| -> Result<Confirm, ProfileError> {
            let c = c.get_ref();
            Ok(Confirm {
                repeat: r.count(&c.repeat, "confirm.repeat", &bounds::CONFIRM_REPEAT)?,
                retest_cap: c
                    .retest_cap
                    .as_ref()
                    .map(|v| r.count(v, "confirm.retest_cap", &bounds::RETEST_CAP))
                    .transpose()?
                    .unwrap_or(4096),
            })
        })
        .transpose()?;
    if raw.workload.is_empty() {
        return Err(r.error(
            None,
            "workload",
            "a profile needs at least one [[workload]] table",
        ));
    }
    let workloads = raw
        .workload
        .iter()
        .map(|w| workload(&r, w))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Profile {
        name: file.to_owned(),
        file: None,
        description,
        duration,
        stop_on_first_failure: raw.stop_on_first_failure,
        telemetry_interval,
        fence_timeout,
        step_timeout,
        wait_idle: raw.wait_idle,
        thresholds,
        confirm,
        workloads,
    })
}

fn workload(r: &Reader, spanned: &Spanned<RawWorkload>) -> Result<PlannedWorkload, ProfileError> {
    let mut table = WorkloadTable {
        values: spanned.get_ref(),
        taken: vec!["kind".into(), "weight".into()],
    };
    let at =
        |table: &WorkloadTable, e: SettingError| r.error(table.offset(&e.key), &e.key, e.message);
    let kind: String = match table.get("kind") {
        Ok(Some(kind)) => kind,
        Ok(None) => return Err(r.error(None, "", "missing field `kind`")),
        Err(e) => return Err(at(&table, e)),
    };
    let name = WorkloadName::parse(&kind).map_err(|e| at(&table, SettingError::new("kind", e)))?;
    let weight = (&mut table as &mut dyn SettingsTable)
        .count("weight", &bounds::WEIGHT)
        .map_err(|e| at(&table, e))?
        .unwrap_or(name.default_weight());
    let config = WorkloadConfig::from_profile(name, &mut table).map_err(|e| at(&table, e))?;
    // A key no getter took is a mistake, not something to ignore: one set for another
    // kind says so.
    if let Some((key, _)) = spanned
        .get_ref()
        .iter()
        .find(|(k, _)| !table.taken.contains(k.get_ref()))
    {
        let key = key.get_ref().as_str();
        let others = WorkloadName::ALL
            .iter()
            .find(|w| w.profile_keys().iter().any(|k| k == key));
        let message = match others {
            Some(_) => format!("does not apply to a {} workload", name.as_str()),
            None => {
                let mut known = vec!["kind".to_owned(), "weight".to_owned()];
                for w in WorkloadName::ALL {
                    for k in w.profile_keys() {
                        if !known.contains(&k) {
                            known.push(k);
                        }
                    }
                }
                let known: Vec<&str> = known.iter().map(String::as_str).collect();
                crate::text::not_one_of(key, "a workload setting", &known, "docs/guide.md")
            }
        };
        return Err(at(&table, SettingError::new(key, message)));
    }
    Ok(PlannedWorkload { weight, config })
}

/// Where an installed kiln keeps its profiles: `share/kiln/profiles` beside the binary's
/// directory (`/usr/share/kiln/profiles` for `/usr/bin/kiln`), as the .deb lays them out;
/// None where there is no such directory (a checkout's `target/`, a bare binary, the
/// Windows zip), and the built-in profiles answer alone.
pub fn installed_dir() -> Option<PathBuf> {
    let dir = installed_dir_of(&std::env::current_exe().ok()?)?;
    dir.is_dir().then_some(dir)
}

/// Where the profiles of a kiln installed as `exe` are, whether or not they are there.
pub fn installed_dir_of(exe: &Path) -> Option<PathBuf> {
    Some(exe.parent()?.parent()?.join("share/kiln/profiles"))
}

/// Loads a profile by name (from [`installed_dir`], else bundled) or from a path
/// (anything with a `/` or ending in `.toml`).
pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
    load_from(name_or_path, installed_dir().as_deref())
}

/// [`load`] with the installed profiles in `installed` (None: none installed).
pub fn load_from(name_or_path: &str, installed: Option<&Path>) -> Result<Profile, ProfileError> {
    let by_path = name_or_path.contains('/') || name_or_path.ends_with(".toml");
    if !by_path && let Some(dir) = installed {
        let file = dir.join(format!("{name_or_path}.toml"));
        if file.is_file() {
            // Errors name the file; the run names the profile as it was asked for.
            let mut profile = read_file(&file)?;
            profile.name = name_or_path.to_owned();
            return Ok(profile);
        }
    }
    if let Some((name, text)) = BUNDLED.iter().find(|(n, _)| *n == name_or_path) {
        return parse(name, text);
    }
    if !by_path {
        return Err(ProfileError {
            file: name_or_path.to_owned(),
            line: None,
            key: None,
            message: match crate::text::did_you_mean(name_or_path, &BUNDLED.map(|(n, _)| n)) {
                Some(meant) => format!("no such profile; did you mean `{meant}`?"),
                None => format!(
                    "no such profile (bundled: {}; or a path to a .toml file)",
                    BUNDLED.map(|(n, _)| n).join(", ")
                ),
            },
        });
    }
    read_file(Path::new(name_or_path))
}

/// Reads and parses a profile file, named in errors by its path.
fn read_file(path: &Path) -> Result<Profile, ProfileError> {
    let shown = path.display().to_string();
    // A regular file only: a FIFO given as a profile would block the open, signals and
    // all, until a writer came.
    let text = crate::fsutil::read_regular_text(path).map_err(|e| ProfileError {
        file: shown.clone(),
        line: None,
        key: None,
        message: match e {
            crate::fsutil::FileError::NotAFile { what, .. } => {
                format!("is {what}, not a profile file")
            }
            crate::fsutil::FileError::Io { message, .. } => {
                format!("cannot be read ({message})")
            }
            other => format!("cannot be read ({other})"),
        },
    })?;
    let mut profile = parse(&shown, &text)?;
    profile.file = Some(path.to_owned());
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_installed_profile_is_read_from_its_file_and_the_built_in_copy_answers_without_one() {
        let dir = tempfile::tempdir().unwrap();
        let quick = BUNDLED[0]
            .1
            .replacen("description = ", "description = \"installed\" #", 1);
        std::fs::write(dir.path().join("quick.toml"), quick).unwrap();
        std::fs::write(dir.path().join("site.toml"), BUNDLED[1].1).unwrap();
        // Read from the installed directory: its text, the name as asked, the file kept.
        let p = load_from("quick", Some(dir.path())).unwrap();
        assert_eq!(
            (p.name.as_str(), p.description.as_str()),
            ("quick", "installed")
        );
        assert_eq!(
            p.file.as_deref(),
            Some(dir.path().join("quick.toml").as_path())
        );
        let site = load_from("site", Some(dir.path())).unwrap();
        assert_eq!(site.file, Some(dir.path().join("site.toml")));
        // The near misses: a bundled name the directory lacks, and no directory at all,
        // are the built-in copies; a name in neither is refused.
        let fleet = load_from("fleet", Some(dir.path())).unwrap();
        assert_eq!(
            (fleet.name.as_str(), fleet.file.as_deref()),
            ("fleet", None)
        );
        let p = load_from("quick", None).unwrap();
        assert!(p.file.is_none() && p.description != "installed");
        assert!(load_from("site", None).is_err());
    }

    #[test]
    fn a_broken_installed_profile_is_refused_naming_its_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("quick.toml"), "description = 1\n").unwrap();
        let e = load_from("quick", Some(dir.path())).unwrap_err();
        assert!(e.file.ends_with("quick.toml"), "{e}");
    }

    #[test]
    fn every_bundled_profile_parses() {
        for (name, text) in BUNDLED {
            let p = parse(name, text).unwrap_or_else(|e| panic!("{e}"));
            assert!(!p.workloads.is_empty(), "{name}");
        }
    }

    #[test]
    fn an_error_names_the_line_and_key() {
        let e = parse(
            "p.toml",
            "description = \"x\"\n\n[[workload]]\nkind = \"vram\"\npasses = 0\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(5), Some("passes")));
        assert_eq!(e.to_string(), "p.toml:5: `passes`: 0 is outside 1..=100000");
    }

    /// The refusal of a profile whose text is `head`, then a VRAM workload.
    fn refusal(head: &str) -> ProfileError {
        parse(
            "p.toml",
            &format!("description = \"x\"\n{head}\n[[workload]]\nkind = \"vram\"\n"),
        )
        .unwrap_err()
    }

    #[test]
    fn a_threshold_out_of_its_range_is_refused_with_its_line_and_key() {
        let e = refusal("[thresholds]\npcie_low_share = 0.5\nthrottle_share = 1e-300");
        assert_eq!(
            e.to_string(),
            "p.toml:4: `thresholds.throttle_share`: 1e-300 is not a share between 0 and 1 (0.001 at least)"
        );
        let e = refusal("[thresholds]\nleak_fit_r2 = nan");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("thresholds.leak_fit_r2")),
            "{e}"
        );
        assert!(
            e.to_string()
                .ends_with("NaN is not a number between 0 and 1"),
            "{e}"
        );
        let e = refusal("[thresholds]\nthermal_margin_c = inf");
        assert!(
            e.to_string().contains("inf is not a number of at least 0"),
            "{e}"
        );
        let e = refusal("[thresholds.floors]\ncompute_fp32_gops = 45000\nvram_gib_per_s = -1");
        assert_eq!(
            e.to_string(),
            "p.toml:4: `thresholds.floors.vram_gib_per_s`: -1 is not a number above 0"
        );
        let e = refusal("[thresholds.floors]\ncompute_fp64_gops = 1");
        assert_eq!(
            e.to_string(),
            "p.toml:3: `thresholds.floors.compute_fp64_gops`: `compute_fp64_gops` is not a rate kiln judges; did you mean `compute_fp16_gops`?"
        );
    }

    #[test]
    fn a_profile_s_baseline_floor_on_no_cards_is_refused_at_its_line() {
        let head = "[thresholds.baseline.\"NVIDIA H200\"]\nsource = \"site\"\ncards = 6\ndrivers = []\n\
                    [thresholds.baseline.\"NVIDIA H200\".rates.vram_gib_per_s]\n\
                    floor = 3564.0\nmedian = 3960.0\nsigma = 30.0\ncards = 0";
        let e = refusal(head);
        assert_eq!(
            e.to_string(),
            "p.toml:10: `thresholds.baseline.\"NVIDIA H200\".rates.vram_gib_per_s.cards`: 0 cards is fewer than the 4 healthy cards a floor rests on"
        );
        let fine = head.replace("cards = 0", "cards = 6");
        let p = parse(
            "p.toml",
            &format!("description = \"x\"\n{fine}\n[[workload]]\nkind = \"vram\"\n"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.thresholds.baseline["NVIDIA H200"].cards, 6);
    }

    #[test]
    fn an_unknown_key_is_one_short_sentence() {
        let e = refusal("[thresholds]\ntrottle_share = 0.1");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (Some(3), Some("trottle_share")),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "p.toml:3: `trottle_share` is not a threshold; did you mean `throttle_share`?"
        );
        let e = refusal("[thresholds]\ncolour = 1");
        assert_eq!(
            e.to_string(),
            "p.toml:3: `colour` is not a threshold (they are listed in docs/guide.md)"
        );
        let workload = |key: &str| {
            parse(
                "p.toml",
                &format!("description = \"x\"\n[[workload]]\nkind = \"vram\"\n{key} = 1\n"),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            workload("pases"),
            "p.toml:4: `pases` is not a workload setting; did you mean `passes`?"
        );
        let e = workload("colour");
        assert_eq!(
            e,
            "p.toml:4: `colour` is not a workload setting (they are listed in docs/guide.md)"
        );
    }

    #[test]
    fn a_vram_percent_too_small_to_test_anything_is_refused() {
        let e = parse(
            "p.toml",
            "description = \"x\"\n[[workload]]\nkind = \"vram\"\npercent = 1e-300\n",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.toml:4: `percent`: 1e-300 is not a percentage between 0 and 100 (0.1 at least)"
        );
    }
}
