//! Shell completions (bash, zsh, fish) and the man page, generated from the clap
//! definitions themselves, so that a flag added to the CLI is completed and documented
//! without anyone writing it twice.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command, ValueHint};

/// A shell kiln writes completions for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// bash (`source <(kiln completions bash)`).
    Bash,
    /// zsh (a `_kiln` file on `$fpath`).
    Zsh,
    /// fish (`kiln completions fish > ~/.config/fish/completions/kiln.fish`).
    Fish,
}

/// What completing an option's value offers.
enum Values {
    /// Nothing to offer (a number, a duration, a list).
    Free,
    /// File and directory names.
    Paths,
    /// These words (and file names too, when `paths`).
    Words { words: Vec<String>, paths: bool },
}

/// An option as the generators need it.
struct Opt {
    long: Option<String>,
    short: Option<char>,
    help: String,
    takes_value: bool,
    values: Values,
}

/// A subcommand as the generators need it.
struct Sub {
    name: String,
    about: String,
    opts: Vec<Opt>,
    /// Its positional arguments take paths (run directories).
    positional_paths: bool,
    /// The words its positional argument takes (`bash zsh fish`).
    positional_words: Vec<String>,
}

fn first_line(text: Option<&clap::builder::StyledStr>) -> String {
    text.map(|t| t.to_string())
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_owned()
}

fn values_of(arg: &Arg) -> Values {
    let words: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_owned())
        .collect();
    let paths = takes_paths(arg);
    // A profile is a bundled name or a file.
    if arg.get_id() == "profile" {
        return Values::Words {
            words: crate::profile::BUNDLED
                .iter()
                .map(|(n, _)| (*n).to_owned())
                .collect(),
            paths: true,
        };
    }
    match (words.is_empty(), paths) {
        (false, _) => Values::Words { words, paths },
        (true, true) => Values::Paths,
        (true, false) => Values::Free,
    }
}

/// Whether the argument's values are file or directory names.
fn takes_paths(arg: &Arg) -> bool {
    matches!(
        arg.get_value_hint(),
        ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath
    )
}

fn takes_value(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Set | ArgAction::Append)
}

fn subs(cli: &Command) -> Vec<Sub> {
    cli.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| {
            let mut opts: Vec<Opt> = s
                .get_arguments()
                .filter(|a| !a.is_hide_set() && !a.is_positional())
                .map(|a| Opt {
                    long: a.get_long().map(str::to_owned),
                    short: a.get_short(),
                    help: first_line(a.get_help()),
                    takes_value: takes_value(a),
                    values: values_of(a),
                })
                .collect();
            opts.push(Opt {
                long: Some("help".into()),
                short: Some('h'),
                help: "Print help".into(),
                takes_value: false,
                values: Values::Free,
            });
            Sub {
                name: s.get_name().to_owned(),
                about: first_line(s.get_about()),
                opts,
                positional_words: s
                    .get_arguments()
                    .filter(|a| a.is_positional())
                    .flat_map(|a| a.get_possible_values())
                    .map(|v| v.get_name().to_owned())
                    .collect(),
                positional_paths: s
                    .get_arguments()
                    .any(|a| a.is_positional() && takes_paths(a)),
            }
        })
        .collect()
}

/// The completion script for `shell`.
pub fn completions(cli: &Command, shell: Shell) -> String {
    let subs = subs(cli);
    match shell {
        Shell::Bash => bash(cli.get_name(), &subs),
        Shell::Zsh => zsh(cli.get_name(), &subs),
        Shell::Fish => fish(cli.get_name(), &subs),
    }
}

fn flags(o: &Opt) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(l) = &o.long {
        out.push(format!("--{l}"));
    }
    if let Some(s) = o.short {
        out.push(format!("-{s}"));
    }
    out
}

fn bash(name: &str, subs: &[Sub]) -> String {
    let names: Vec<&str> = subs.iter().map(|s| s.name.as_str()).collect();
    let mut out = format!(
        "# bash completion for {name}: source <({name} completions bash)\n_{name}() {{\n    local cur prev sub w\n    cur=\"${{COMP_WORDS[COMP_CWORD]}}\"\n    prev=\"${{COMP_WORDS[COMP_CWORD-1]}}\"\n    sub=\"\"\n    for w in \"${{COMP_WORDS[@]:1:COMP_CWORD-1}}\"; do\n        case \"$w\" in\n            {}) sub=\"$w\"; break ;;\n        esac\n    done\n    case \"$sub\" in\n        \"\")\n            COMPREPLY=($(compgen -W \"{} --help --version\" -- \"$cur\"))\n            return ;;\n",
        names.join("|"),
        names.join(" ")
    );
    for s in subs {
        let all: Vec<String> = s.opts.iter().flat_map(flags).collect();
        let _ = writeln!(out, "        {})", s.name);
        let _ = writeln!(out, "            case \"$prev\" in");
        for o in s.opts.iter().filter(|o| o.takes_value) {
            let pattern = flags(o).join("|");
            let action = match &o.values {
                Values::Free => "COMPREPLY=()".to_owned(),
                Values::Paths => "COMPREPLY=($(compgen -f -- \"$cur\"))".to_owned(),
                Values::Words { words, paths } => format!(
                    "COMPREPLY=($(compgen -W \"{}\" {}-- \"$cur\"))",
                    words.join(" "),
                    if *paths { "-f " } else { "" }
                ),
            };
            let _ = writeln!(out, "                {pattern}) {action}; return ;;");
        }
        let _ = writeln!(out, "            esac");
        let files = if s.positional_paths {
            "\n            [[ \"$cur\" != -* ]] && COMPREPLY=($(compgen -f -- \"$cur\")) && return"
                .to_owned()
        } else if !s.positional_words.is_empty() {
            format!(
                "\n            [[ \"$cur\" != -* ]] && COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")) && return",
                s.positional_words.join(" ")
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "            COMPREPLY=($(compgen -W \"{}\" -- \"$cur\")){files}\n            [[ \"$cur\" == -* ]] && COMPREPLY=($(compgen -W \"{}\" -- \"$cur\"))\n            ;;",
            all.join(" "),
            all.join(" ")
        );
    }
    let _ = write!(
        out,
        "    esac\n}}\ncomplete -o filenames -F _{name} {name}\n"
    );
    out
}

/// Text inside a zsh `_arguments` spec: brackets, colons and quotes escaped.
fn zsh_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('\'', "'\\''")
        .replace('[', "\\[")
        .replace(']', "\\]")
        .replace(':', "\\:")
}

fn zsh(name: &str, subs: &[Sub]) -> String {
    let mut out = format!(
        "#compdef {name}\n# zsh completion for {name}: save as _{name} in a directory on $fpath\n_{name}() {{\n    local line state\n    local -a commands\n    commands=(\n"
    );
    for s in subs {
        let _ = writeln!(out, "        '{}:{}'", s.name, zsh_escape(&s.about));
    }
    out.push_str(
        "    )\n    _arguments -C '(- *)--help[Print help]' '(- *)--version[Print version]' '1: :->command' '*:: :->args'\n    case $state in\n        command) _describe 'command' commands ;;\n        args)\n            case $line[1] in\n",
    );
    for s in subs {
        let _ = write!(
            out,
            "                {})\n                    _arguments",
            s.name
        );
        for o in &s.opts {
            let value = if o.takes_value {
                let action = match &o.values {
                    Values::Free => " ".to_owned(),
                    Values::Paths => "_files".to_owned(),
                    Values::Words {
                        words,
                        paths: false,
                    } => format!("({})", words.join(" ")),
                    Values::Words { words, paths: true } => {
                        format!("{{_values value {} ; _files}}", words.join(" "))
                    }
                };
                format!(":value:{action}")
            } else {
                String::new()
            };
            for flag in flags(o) {
                let _ = write!(
                    out,
                    " \\\n                        '{flag}[{}]{value}'",
                    zsh_escape(&o.help)
                );
            }
        }
        if s.positional_paths {
            out.push_str(" \\\n                        '*:path:_files'");
        } else if !s.positional_words.is_empty() {
            let _ = write!(
                out,
                " \\\n                        '1:value:({})'",
                s.positional_words.join(" ")
            );
        }
        out.push_str(" ;;\n");
    }
    let _ = write!(out, "            esac ;;\n    esac\n}}\n_{name} \"$@\"\n");
    out
}

fn fish_escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\'', "\\'")
}

fn fish(name: &str, subs: &[Sub]) -> String {
    let mut out = format!(
        "# fish completion for {name}: {name} completions fish > ~/.config/fish/completions/{name}.fish\ncomplete -c {name} -f\n"
    );
    let _ = writeln!(
        out,
        "complete -c {name} -n __fish_use_subcommand -l help -s h -d 'Print help'"
    );
    let _ = writeln!(
        out,
        "complete -c {name} -n __fish_use_subcommand -l version -s V -d 'Print version'"
    );
    for s in subs {
        let _ = writeln!(
            out,
            "complete -c {name} -n __fish_use_subcommand -a {} -d '{}'",
            s.name,
            fish_escape(&s.about)
        );
        let when = format!("'__fish_seen_subcommand_from {}'", s.name);
        for o in &s.opts {
            let mut line = format!("complete -c {name} -n {when}");
            if let Some(l) = &o.long {
                let _ = write!(line, " -l {l}");
            }
            if let Some(c) = o.short {
                let _ = write!(line, " -s {c}");
            }
            if o.takes_value {
                match &o.values {
                    Values::Free => line.push_str(" -x"),
                    Values::Paths => line.push_str(" -r -F"),
                    Values::Words { words, paths } => {
                        let _ = write!(
                            line,
                            " -r{} -a '{}'",
                            if *paths { " -F" } else { "" },
                            words.join(" ")
                        );
                    }
                }
            }
            let _ = write!(line, " -d '{}'", fish_escape(&o.help));
            let _ = writeln!(out, "{line}");
        }
        if s.positional_paths {
            let _ = writeln!(out, "complete -c {name} -n {when} -F");
        } else if !s.positional_words.is_empty() {
            let _ = writeln!(
                out,
                "complete -c {name} -n {when} -a '{}'",
                s.positional_words.join(" ")
            );
        }
    }
    out
}

/// Text for roff: backslashes, leading dots and quotes, and hyphens escaped.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|l| {
            if l.starts_with('.') || l.starts_with('\'') {
                format!("\\&{l}")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The man page (section 1, roff) of the whole CLI: every command and its options, the
/// exit codes and the files a run writes.
pub fn man_page(cli: &Command) -> String {
    let name = cli.get_name();
    let version = cli.get_version().unwrap_or_default();
    let mut out = format!(
        ".TH {} 1 \"\" \"{name} {version}\" \"User Commands\"\n.SH NAME\n{name} \\- {}\n.SH SYNOPSIS\n\\fB{name}\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n.SH DESCRIPTION\n{}\n",
        name.to_uppercase(),
        roff(&first_line(cli.get_about())),
        roff(
            "kiln proves a GPU good or bad: Vulkan workloads write and verify patterns over nearly all of VRAM, load the ALUs and matrix units with verified arithmetic, and probe PCIe; a telemetry sidecar records thermals, power, clocks, throttle reasons, ECC and remapping counters and Xids; the verdict tells a hardware fault from the environment and from software."
        )
    );
    out.push_str(".SH COMMANDS\n");
    for s in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let long = s
            .get_long_about()
            .or(s.get_about())
            .map(|t| t.to_string())
            .unwrap_or_default();
        let _ = write!(
            out,
            ".SS \"{name} {}\"\n{}\n",
            s.get_name(),
            roff(&long.replace('\n', " "))
        );
        for a in s.get_arguments().filter(|a| !a.is_hide_set()) {
            let value = a
                .get_value_names()
                .map(|v| {
                    v.iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let head = if a.is_positional() {
                format!("\\fI{}\\fR", roff(&value))
            } else {
                let mut h = Vec::new();
                if let Some(c) = a.get_short() {
                    h.push(format!("\\fB\\-{c}\\fR"));
                }
                if let Some(l) = a.get_long() {
                    h.push(format!("\\fB\\-\\-{}\\fR", roff(l)));
                }
                let mut head = h.join(", ");
                if takes_value(a) && !value.is_empty() {
                    let _ = write!(head, " \\fI{}\\fR", roff(&value));
                }
                head
            };
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|t| t.to_string())
                .unwrap_or_default();
            let mut help = help.replace('\n', " ");
            let defaults: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            if !defaults.is_empty() && takes_value(a) {
                let _ = write!(help, " [default: {}]", defaults.join(", "));
            }
            let _ = write!(out, ".TP\n{head}\n{}\n", roff(&help));
        }
    }
    out.push_str(".SH EXIT STATUS\n");
    for (code, meaning) in crate::exit_code::MEANINGS {
        let _ = write!(out, ".TP\n\\fB{code}\\fR\n{}\n", roff(meaning));
    }
    out.push_str(&format!(
        ".SH FILES\nA run directory (\\fB\\-\\-out\\fR, default \\fI./kiln\\-runs/<time>\\-<host>\\fR) holds \\fImanifest.json\\fR, \\fIevents.jsonl\\fR, \\fItelemetry.jsonl\\fR, \\fIreport.json\\fR, \\fIreport.html\\fR, \\fIjunit.xml\\fR and \\fIkiln.prom\\fR.\n.SH SEE ALSO\n\\fB{name} completions\\fR bash|zsh|fish; the README of the source tree.\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_escapes_what_roff_would_read_as_requests() {
        assert_eq!(roff("a-b"), "a\\-b");
        assert_eq!(roff(".TH"), "\\&.TH");
        assert_eq!(roff("c:\\x"), "c:\\ex");
    }

    #[test]
    fn zsh_specs_escape_brackets_colons_and_quotes() {
        assert_eq!(zsh_escape("a [b]: it's"), "a \\[b\\]\\: it'\\''s");
    }
}
