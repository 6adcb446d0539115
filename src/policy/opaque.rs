//! What the analysis cannot see through (docs/policy.md, "Opaque
//! programs"): a part whose program is a file the command line does not
//! show. Under a wildcard allow rule such a part could dodge any `deny`
//! rule on `run_shell` (`cp /usr/bin/touch ./t && ./t x` under
//! `deny: run_shell(touch*)`), so while such a rule exists it is not
//! auto-allowed: it gets `policy.opaque` (default `ask`).
//!
//! Two cases, both decided on the words alone (the file may not exist yet
//! when the call is decided: `printf 'touch x' > s.sh; bash s.sh`):
//!
//! - **renamed program**: the command word is a path (it has a `/`) that
//!   is inside the workdir, or outside the system directories (`/usr`,
//!   `/bin`, `/sbin`, `/lib*`, `/opt`, `/nix/store`, `/snap`) which no
//!   task can write. It may be a copy, a link or a hard link of any
//!   program, whatever its name.
//! - **opaque program**: a shell or interpreter given its program as a
//!   file or module (`bash s.sh`, `python3 x.py`, `python3 -m mod`, `awk
//!   -f prog.awk`, `node --import ./x.mjs app.js`): what it runs is in a
//!   file the task may have written.
//!
//! Programs read from stdin or a descriptor (`bash /dev/stdin`, `awk -f
//! -`) are not here: they are a hazard ([`super::shell::HazardKind::StdinProgram`]),
//! never auto-allowed, like code on stdin.

use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::shell::{SHELLS, SimpleCommand, basename, is_stdin_path};

/// Which case applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpaqueKind {
    /// A program run by a path that may be a copy or link of another.
    RenamedProgram,
    /// An interpreter given a script file or module.
    OpaqueProgram,
}

impl OpaqueKind {
    pub fn describe(self) -> &'static str {
        match self {
            Self::RenamedProgram => "renamed program",
            Self::OpaqueProgram => "opaque program",
        }
    }
}

/// One part the analysis cannot see through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Opaque {
    pub kind: OpaqueKind,
    /// The argv index of the word that hides the program (the command
    /// word, the script, the module).
    #[serde(skip)]
    pub word: usize,
    /// That word.
    pub text: String,
    /// A renamed program found on `PATH`: the denied program it is the
    /// same file as.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub same_as: Option<String>,
}

impl std::fmt::Display for Opaque {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.kind, &self.same_as) {
            (OpaqueKind::RenamedProgram, Some(name)) => write!(
                f,
                "renamed program `{}` (the same file as `{name}`, which a deny or ask rule names)",
                self.text
            ),
            (OpaqueKind::RenamedProgram, None) => write!(
                f,
                "renamed program `{}` (a program path outside the system directories may be a \
                 copy or link of a denied one)",
                self.text
            ),
            (OpaqueKind::OpaqueProgram, _) => write!(
                f,
                "opaque program `{}` (a script or module policy cannot read)",
                self.text
            ),
        }
    }
}

/// Directories no task can write: a program there is what its name says.
const SYSTEM_DIRS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    "/snap",
];

/// An interpreter: options whose value is the next word, options whose
/// value is code in a file or module (opaque), options whose value is
/// inline code (a hazard elsewhere: no script follows).
struct Interpreter {
    names: &'static [&'static str],
    valued: &'static [&'static str],
    module: &'static [&'static str],
    inline: &'static [&'static str],
    /// The first operand is the program file (not so for awk, whose
    /// operand is program text, read by programs.rs).
    operand: bool,
}

const INTERPRETERS: &[Interpreter] = &[
    Interpreter {
        names: &["python", "pypy"],
        valued: &["-W", "-X", "-Q"],
        module: &["-m"],
        inline: &["-c"],
        operand: true,
    },
    Interpreter {
        names: &["perl"],
        valued: &["-I"],
        module: &[],
        inline: &["-e", "-E"],
        operand: true,
    },
    Interpreter {
        names: &["ruby"],
        valued: &["-I", "-C", "-E", "--encoding"],
        module: &["-r", "--require"],
        inline: &["-e"],
        operand: true,
    },
    Interpreter {
        names: &["node", "nodejs", "bun", "tsx", "ts-node"],
        valued: &["--title", "--conditions", "-C", "--input-type"],
        module: &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
        ],
        inline: &["-e", "--eval", "-p", "--print"],
        operand: true,
    },
    Interpreter {
        names: &["php"],
        valued: &["-d", "-c", "-z"],
        module: &["-f", "--file"],
        inline: &["-r", "-R", "-B", "-E"],
        operand: true,
    },
    Interpreter {
        names: &["lua", "luajit"],
        valued: &[],
        module: &["-l"],
        inline: &["-e"],
        operand: true,
    },
    Interpreter {
        names: &[
            "Rscript", "julia", "tclsh", "wish", "expect", "guile", "sbcl",
        ],
        valued: &[],
        module: &["-L", "-l", "-f", "--load"],
        inline: &["-e", "-E", "-c", "--eval"],
        operand: true,
    },
    Interpreter {
        names: &["awk", "gawk", "mawk", "nawk"],
        valued: &["-v", "-F", "--assign", "--field-separator"],
        module: &["-f", "--file", "-E", "--exec", "-i", "--include"],
        // An awk program operand is read as text (programs.rs).
        inline: &["-e", "--source"],
        operand: false,
    },
];

/// The part's opaque word, if any. `cwd` is the call's working
/// directory (relative to `workdir`, or absolute). A program read from
/// stdin is a hazard instead, not repeated here.
pub(crate) fn find(part: &SimpleCommand, workdir: &Path, cwd: Option<&str>) -> Option<Opaque> {
    find_any(part, workdir, cwd).filter(|o| o.word == 0 || !is_stdin_path(&o.text))
}

fn find_any(part: &SimpleCommand, workdir: &Path, cwd: Option<&str>) -> Option<Opaque> {
    let program = part.argv.first()?;
    if program.contains('/') {
        let dir = match cwd {
            Some(cwd) => workdir.join(cwd),
            None => workdir.to_path_buf(),
        };
        let path = normalize(&dir.join(program));
        let system = SYSTEM_DIRS.iter().any(|root| path.starts_with(root));
        if path.starts_with(workdir) || !system {
            return Some(Opaque {
                kind: OpaqueKind::RenamedProgram,
                word: 0,
                text: program.clone(),
                same_as: None,
            });
        }
    }
    let name = basename(program);
    let family = match name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.') {
        "" => name,
        family => family,
    };
    if SHELLS.contains(&family) {
        return shell_script(part);
    }
    if matches!(name, "make" | "gmake") {
        return Some(makefile(part));
    }
    if family == "deno" {
        // `deno run FILE`, `deno test`, `deno task`: files of the workdir.
        return part.argv.get(1).map(|_| Opaque {
            kind: OpaqueKind::OpaqueProgram,
            word: 1,
            text: part.argv[1..].join(" "),
            same_as: None,
        });
    }
    let spec = INTERPRETERS.iter().find(|i| i.names.contains(&family))?;
    interpreter_script(part, spec)
}

/// `bash [options] FILE`: the first operand, unless `-c`/`-s`/`-i`.
fn shell_script(part: &SimpleCommand) -> Option<Opaque> {
    let argv = &part.argv;
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        if word == "--" {
            index += 1;
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            if matches!(long, "rcfile" | "init-file") {
                index += 1;
            }
            index += 1;
            continue;
        }
        if (word.starts_with('-') || word.starts_with('+')) && word.len() > 1 {
            if word[1..].contains(['c', 's', 'i']) {
                return None;
            }
            if word[1..].contains(['o', 'O']) {
                index += 1;
            }
            index += 1;
            continue;
        }
        break;
    }
    argv.get(index).map(|script| Opaque {
        kind: OpaqueKind::OpaqueProgram,
        word: index,
        text: script.clone(),
        same_as: None,
    })
}

/// `make`: its Makefile (the default one, `-f FILE`, `--file=FILE`,
/// `--makefile=FILE`, or the default one of `-C DIR`) may have been
/// written by the task, and its recipes run what it says, like `bash
/// FILE`. The opaque word is the command word: a rule that names `make`
/// vouches for it, a wildcard does not.
fn makefile(part: &SimpleCommand) -> Opaque {
    let argv = &part.argv;
    let mut file = None;
    let mut dir = None;
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        let next = argv.get(index + 1).cloned();
        match word.as_str() {
            "-f" | "--file" | "--makefile" => file = next,
            "-C" | "--directory" => dir = next,
            _ => {
                if let Some(value) = word
                    .strip_prefix("--file=")
                    .or_else(|| word.strip_prefix("--makefile="))
                {
                    file = Some(value.to_owned());
                } else if let Some(value) = word.strip_prefix("--directory=") {
                    dir = Some(value.to_owned());
                } else if let Some(value) = word.strip_prefix("-f").filter(|v| !v.is_empty()) {
                    file = Some(value.to_owned());
                } else if let Some(value) = word.strip_prefix("-C").filter(|v| !v.is_empty()) {
                    dir = Some(value.to_owned());
                }
            }
        }
        index += 1;
    }
    let file = file.unwrap_or_else(|| "Makefile".to_owned());
    let text = match dir {
        Some(dir) if !file.starts_with('/') => format!("{}/{file}", dir.trim_end_matches('/')),
        _ => file,
    };
    Opaque {
        kind: OpaqueKind::OpaqueProgram,
        word: 0,
        text,
        same_as: None,
    }
}

/// An interpreter's script operand or module option.
fn interpreter_script(part: &SimpleCommand, spec: &Interpreter) -> Option<Opaque> {
    let argv = &part.argv;
    let opaque = |word: usize, text: &str| {
        Some(Opaque {
            kind: OpaqueKind::OpaqueProgram,
            word,
            text: text.to_owned(),
            same_as: None,
        })
    };
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        if word == "--" {
            return argv
                .get(index + 1)
                .filter(|_| spec.operand)
                .and_then(|s| opaque(index + 1, s));
        }
        if !word.starts_with('-') || word == "-" {
            return if spec.operand {
                opaque(index, word)
            } else {
                None
            };
        }
        let (flag, value) = match word.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag, Some(value)),
            _ => (word.as_str(), None),
        };
        if spec.inline.contains(&flag) {
            return None;
        }
        if spec.module.contains(&flag) {
            return match value {
                Some(value) => opaque(index, value),
                None => argv.get(index + 1).and_then(|m| opaque(index + 1, m)),
            };
        }
        // `-mpytest`, `-Mstrict`, `-rjson`: a short module option with its value.
        if !word.starts_with("--")
            && let Some(short) = spec
                .module
                .iter()
                .find(|m| m.len() == 2 && word.starts_with(**m) && word.len() > 2)
        {
            return opaque(index, &word[short.len()..]);
        }
        if spec
            .inline
            .iter()
            .any(|i| i.len() == 2 && !word.starts_with("--") && word[1..].contains(&i[1..]))
        {
            return None;
        }
        index += if value.is_none() && spec.valued.contains(&flag) {
            2
        } else {
            1
        };
    }
    None
}

/// `a/./b/../c` → `a/c`, lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// True if and only if `rule_matches` still holds with the opaque word
/// replaced by a placeholder: the rule allows any program in that place,
/// so it does not vouch for this one.
pub(crate) fn wildcard_over(
    part: &SimpleCommand,
    opaque: &Opaque,
    rule_matches: impl Fn(&str) -> bool,
) -> bool {
    let mut other = part.clone();
    if let Some(word) = other.argv.get_mut(opaque.word) {
        *word = "\u{1}opaque\u{1}".to_owned();
    }
    rule_matches(&other.text())
}

/// A file's identity: device and inode.
pub(crate) type Identity = (u64, u64);

/// Multi-call binaries pick what to do by the name they are run as: two
/// names for one of them are two programs.
const MULTI_CALL: &[&str] = &["busybox", "toybox", "coreutils"];

/// The file `name` runs as, found on `path` (absolute entries only), by
/// identity (following symlinks); `None` for a multi-call binary.
pub(crate) fn identity_on_path(name: &str, path: &std::ffi::OsStr) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(file_on_path(name, path)?).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The file a bare program name runs on `path`, canonical; `None` for a
/// multi-call binary (busybox), whose other names are other programs.
pub(crate) fn file_on_path(name: &str, path: &std::ffi::OsStr) -> Option<PathBuf> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let file = std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|file| file.is_file())?;
    let real = std::fs::canonicalize(&file).ok()?;
    let real_name = real.file_name()?.to_str()?;
    if MULTI_CALL.contains(&real_name) {
        return None;
    }
    Some(real)
}

/// The program a command glob starts with, when it is a literal name:
/// `touch*` → `touch`, `git push*` → `git`, `*` → none.
pub(crate) fn glob_program(glob: &str) -> Option<&str> {
    let end = glob
        .find(|c: char| c.is_whitespace() || matches!(c, '*' | '?' | '[' | '{' | '\\'))
        .unwrap_or(glob.len());
    let name = &glob[..end];
    (!name.is_empty() && !name.contains('/') && !name.contains('=')).then_some(name)
}
