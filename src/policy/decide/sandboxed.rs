//! What the sandbox decides: rules to dodge, hazards that block, unknowns, opaque parts.

use super::{CompiledRule, Layer, Policy, RuleSet, ShellView};
use crate::policy::guards::SandboxMode;
use crate::policy::opaque::{self, Opaque};
use crate::policy::rule::Verdict;
use crate::policy::shell::{Hazard, HazardKind, SimpleCommand};

impl Policy {
    /// True if and only if some `deny` or `ask` rule, of any layer,
    /// names `run_shell` commands: a part the analysis cannot see through
    /// could dodge it.
    pub(crate) fn shell_rules_to_dodge(&self) -> bool {
        self.layers().any(|(_, set)| {
            set.deny
                .iter()
                .chain(&set.ask)
                .any(CompiledRule::names_shell_commands)
        })
    }

    /// True if and only if, on this side, a full wildcard lets through
    /// what the parser cannot see (substitutions, variables, control
    /// flow, nested shells, inline code, wrappers…), the sandbox bounding
    /// it: the full sandbox is in force, and no `deny` or `ask` rule on
    /// `run_shell` exists to dodge, or the side says `policy.opaque:
    /// allow` (docs/policy.md, "The sandbox decides").
    pub(crate) fn sandbox_decides(&self, layer: Layer) -> bool {
        self.settings.sandbox == SandboxMode::Full
            && (!self.shell_rules_to_dodge()
                || self.opaque_of(layer) == Verdict::Allow
                || self.exec_guard_holds())
    }

    /// True if and only if the sandbox's exec guard enforces every rule a
    /// part the parser cannot see could dodge, so that such a part may run
    /// (docs/policy.md, "The exec guard"): the full sandbox with the guard
    /// is in force; the rules to dodge are `deny` rules only (an `ask`
    /// rule approved for one call could not be told apart at exec); each
    /// names, by its first word, a program that only an `execve` runs
    /// ([`enforced_at_exec`]); and no side sets `policy.opaque` (an
    /// explicit `ask` or `deny` keeps opaque code back; `allow` lets
    /// everything through anyway).
    pub fn exec_guard_holds(&self) -> bool {
        self.exec_guard_in_force() && self.guard_gap().is_none()
    }

    /// Why the exec guard, though in force, does not hold
    /// ([`Self::exec_guard_holds`]) while rules to dodge exist: the
    /// policy reads what it can and keeps the rest back.
    pub fn exec_guard_gap(&self) -> Option<String> {
        if !self.exec_guard_in_force() {
            return None;
        }
        self.guard_gap().map(|gap| match gap {
            GuardGap::Opaque => "the exec guard does not decide: `policy.opaque` is set, and it \
                                 decides what the parser cannot see"
                .to_owned(),
            GuardGap::Ask(rule) => format!(
                "the exec guard does not decide: the ask rule `{}` cannot be asked at exec",
                rule.rule
            ),
            GuardGap::Unenforced(rule, glob) => format!(
                "the exec guard does not decide: `{}` may match a shell builtin or a command \
                 word it never sees at exec (`{glob}`); name a program first",
                rule.rule
            ),
        })
    }

    /// The full sandbox with the exec guard, and rules to dodge.
    fn exec_guard_in_force(&self) -> bool {
        self.settings.sandbox == SandboxMode::Full
            && self.settings.exec_guard
            && self.shell_rules_to_dodge()
    }

    /// What keeps the exec guard from enforcing the rules to dodge, the
    /// first found: a side's `policy.opaque`, an `ask` rule on
    /// `run_shell`, a deny glob not [`enforced_at_exec`].
    fn guard_gap(&self) -> Option<GuardGap<'_>> {
        for (_, set) in self.layers() {
            if set.opaque.is_some() {
                return Some(GuardGap::Opaque);
            }
            if let Some(rule) = set.ask.iter().find(|r| r.names_shell_commands()) {
                return Some(GuardGap::Ask(rule));
            }
        }
        self.shell_deny_rules().find_map(|(_, _, rule)| {
            rule.rule
                .commands
                .iter()
                .find(|glob| !enforced_at_exec(glob))
                .map(|glob| GuardGap::Unenforced(rule, glob))
        })
    }

    /// Every `deny` rule on `run_shell` commands, operator rules first,
    /// with its side and index.
    fn shell_deny_rules(&self) -> impl Iterator<Item = (Layer, usize, &CompiledRule)> {
        self.layers().flat_map(|(layer, set)| {
            set.deny
                .iter()
                .enumerate()
                .filter(|(_, rule)| rule.names_shell_commands())
                .map(move |(index, rule)| (layer, index, rule))
        })
    }

    /// The programs the exec guard's globs name by their first word, and
    /// their files on the shell's `PATH` ([`GuardSettings::program_path`]):
    /// the guard knows a copy or link of one by its file.
    ///
    /// [`GuardSettings::program_path`]: crate::policy::GuardSettings::program_path
    pub fn exec_deny_programs(&self) -> Vec<(String, std::path::PathBuf)> {
        let Some(path) = self.settings.program_path.as_deref() else {
            return Vec::new();
        };
        let mut programs: Vec<(String, std::path::PathBuf)> = Vec::new();
        for glob in self.exec_deny_globs() {
            if let Some(name) = opaque::glob_program(&glob)
                && !programs.iter().any(|(known, _)| known == name)
                && let Some(file) = opaque::file_on_path(name, path)
            {
                programs.push((name.to_owned(), file));
            }
        }
        programs
    }

    /// Under the exec guard, a command the parser alone would not allow
    /// whose text names a denied program (a deny glob's literal start, at
    /// the start of a word: `curl` in `python3 -c 'os.system("curl x")'`)
    /// is refused up front: the guard would refuse it at exec, and the
    /// model learns why before anything ran. `None` for every other call.
    pub(super) fn named_where_unread(&self, call: &super::CallView<'_>) -> Option<super::Decision> {
        let command = call.command?;
        if !self.exec_guard_holds() {
            return None;
        }
        let (layer, index, rule, named) =
            self.shell_deny_rules().find_map(|(layer, index, rule)| {
                rule.rule
                    .commands
                    .iter()
                    .map(|glob| literal_prefix(glob).trim())
                    .find(|start| !start.is_empty() && names(command, start))
                    .map(|start| (layer, index, rule, start))
            })?;
        let mut alone = self.clone();
        alone.settings.exec_guard = false;
        if alone.decide(call).verdict == Verdict::Allow {
            return None;
        }
        Some(super::Decision::new(
            Verdict::Deny,
            rule.listed(layer, Verdict::Deny, index),
            Some(format!(
                "`{named}` is named where the parser cannot read what runs (inline code, a \
                 here-document, a string run as code), and a deny rule refuses it; the \
                 sandbox would refuse it at exec too"
            )),
        ))
    }

    /// The command globs of every `deny` rule on `run_shell` the exec
    /// guard can enforce ([`enforced_at_exec`]), each once: what the
    /// runner gives the sandbox to refuse at `execve`.
    pub fn exec_deny_globs(&self) -> Vec<String> {
        let mut globs: Vec<String> = Vec::new();
        for (_, _, rule) in self.shell_deny_rules() {
            for glob in &rule.rule.commands {
                if enforced_at_exec(glob) && !globs.contains(glob) {
                    globs.push(glob.clone());
                }
            }
        }
        globs
    }

    /// The hazards that keep `view` from being allowed on `set`'s side:
    /// all of them, unless the sandbox decides ([`Self::sandbox_decides`]);
    /// then only those of parts no full wildcard allows, and a command
    /// that does not parse.
    pub(crate) fn blocking_hazards(
        &self,
        set: &RuleSet,
        layer: Layer,
        tool: &str,
        view: &ShellView,
    ) -> Vec<Hazard> {
        let trusted = self.sandbox_decides(layer);
        let wild = |part: &SimpleCommand| self.wildcard_allows(set, layer, tool, part);
        if !trusted && self.decides_unknowns(layer) {
            let parts = &view.parsed.parts;
            let readable = view.hazards.iter().all(crate::policy::unknowns::tolerable);
            if parts.iter().all(wild) && readable && self.unknowns_problem(view).is_none() {
                return Vec::new();
            }
            return view.hazards.clone();
        }
        view.hazards
            .iter()
            .filter(|hazard| {
                hazard.kind == HazardKind::Unparseable
                    || !trusted
                    || !match hazard.part {
                        Some(index) => view.parsed.parts.get(index).is_some_and(wild),
                        None => view.parsed.parts.iter().all(wild),
                    }
            })
            .cloned()
            .collect()
    }

    /// True if and only if, on this side, a full wildcard lets through
    /// the unknowns that cannot reach a `deny` or `ask` rule on
    /// `run_shell` ([`super::unknowns`]): the full sandbox is in force,
    /// such a rule exists, and the side's `policy.opaque` is not `allow`
    /// (which lets everything through).
    pub(crate) fn decides_unknowns(&self, layer: Layer) -> bool {
        self.settings.sandbox == SandboxMode::Full
            && self.shell_rules_to_dodge()
            && self.opaque_of(layer) != Verdict::Allow
            && !self.exec_guard_holds()
    }

    /// The command globs of every `deny` and `ask` rule on `run_shell`,
    /// with the rule's text.
    pub(crate) fn dodgeable_globs(&self) -> Vec<(&str, String)> {
        let mut globs = Vec::new();
        for (_, set) in self.layers() {
            for rule in set.deny.iter().chain(&set.ask) {
                if rule.tool_matches("run_shell") && rule.paths.is_empty() {
                    for glob in &rule.rule.commands {
                        globs.push((glob.as_str(), rule.rule.to_string()));
                    }
                }
            }
        }
        globs
    }

    /// The first part whose unknowns could reach a `deny` or `ask` rule,
    /// or name a program, or become an executing option: why.
    pub(crate) fn unknowns_problem(&self, view: &ShellView) -> Option<String> {
        let globs = self.dodgeable_globs();
        view.parsed
            .parts
            .iter()
            .find_map(|part| crate::policy::unknowns::problem(part, globs.iter().cloned()))
    }

    /// True if and only if a full wildcard of the side allows `part`: an
    /// allow rule for the tool with no glob or the glob `*`, or `default:
    /// allow`.
    pub(crate) fn wildcard_allows(
        &self,
        set: &RuleSet,
        layer: Layer,
        tool: &str,
        part: &SimpleCommand,
    ) -> bool {
        self.default_of(layer) == Verdict::Allow
            || set
                .allow
                .iter()
                .any(|rule| rule.full_wildcard(tool) && rule.allows(tool, None, Some(part)))
    }

    /// Why a full wildcard did not let the hazards through, when the
    /// sandbox would have decided otherwise: appended to the refusal.
    pub(super) fn undecided_by_sandbox(
        &self,
        layer: Layer,
        blocking: &[Hazard],
        view: &ShellView,
    ) -> String {
        if blocking.iter().any(|h| h.kind == HazardKind::Unparseable) {
            return String::new();
        }
        if self.decides_unknowns(layer) {
            return match blocking
                .iter()
                .find(|h| !crate::policy::unknowns::tolerable(h))
            {
                Some(hazard) => format!(
                    "; a deny or ask rule on run_shell exists, and the parser cannot read what \
                     {hazard} runs: run the inner command directly, or set `policy.opaque: \
                     allow` to let the sandbox bound it"
                ),
                None => self
                    .unknowns_problem(view)
                    .map(|problem| format!("; {problem}"))
                    .unwrap_or_default(),
            };
        }
        if self.settings.sandbox != SandboxMode::Full {
            format!(
                "; a wildcard lets these run only under the full sandbox ({}), and this run's \
                 sandbox is `{}`",
                SandboxMode::Full,
                self.settings.sandbox
            )
        } else if self.shell_rules_to_dodge()
            && self.opaque_of(layer) != Verdict::Allow
            && !self.exec_guard_holds()
        {
            "; a deny or ask rule on run_shell exists that they could dodge: run the inner \
             command directly, or set `policy.opaque: allow` to let the sandbox bound them"
                .to_owned()
        } else {
            String::new()
        }
    }

    /// The part's opaque word, if a `deny`/`ask` rule exists it could
    /// dodge and the side does not say `opaque: allow`.
    pub(crate) fn opaque_part(
        &self,
        layer: Layer,
        part: &SimpleCommand,
        cwd: Option<&str>,
    ) -> Option<Opaque> {
        if self.opaque_of(layer) == Verdict::Allow
            || !self.shell_rules_to_dodge()
            || self.exec_guard_holds()
        {
            return None;
        }
        opaque::find(part, &self.settings.workdir, cwd).or_else(|| self.same_file(part))
    }

    /// A bare program name that is, on `PATH`, the same file as a program
    /// a `deny` or `ask` rule names under another name (`cc` for `gcc`, a
    /// busybox applet).
    pub(super) fn same_file(&self, part: &SimpleCommand) -> Option<Opaque> {
        if self.denied_programs.is_empty() {
            return None;
        }
        let path = self.settings.program_path.as_deref()?;
        let name = part.argv.first()?;
        if self
            .denied_programs
            .iter()
            .any(|(denied, _)| denied == name)
        {
            return None;
        }
        let identity = opaque::identity_on_path(name, path)?;
        let (denied, _) = self
            .denied_programs
            .iter()
            .find(|(_, id)| *id == identity)?;
        Some(Opaque {
            kind: opaque::OpaqueKind::RenamedProgram,
            word: 0,
            text: name.clone(),
            same_as: Some(denied.clone()),
        })
    }
}

/// What keeps the exec guard from holding ([`Policy::exec_guard_gap`]).
enum GuardGap<'a> {
    Opaque,
    Ask(&'a CompiledRule),
    /// A deny rule and its glob that the guard cannot enforce.
    Unenforced(&'a CompiledRule, &'a str),
}

/// Bash's builtins and keywords (`compgen -b`, `compgen -k`): they run
/// without an `execve`, so no exec guard sees them.
const BUILTINS: &[&str] = &[
    ".",
    ":",
    "[",
    "[[",
    "]]",
    "{",
    "}",
    "!",
    "alias",
    "bg",
    "bind",
    "break",
    "builtin",
    "caller",
    "case",
    "cd",
    "command",
    "compgen",
    "complete",
    "compopt",
    "continue",
    "coproc",
    "declare",
    "dirs",
    "disown",
    "do",
    "done",
    "echo",
    "elif",
    "else",
    "enable",
    "esac",
    "eval",
    "exec",
    "exit",
    "export",
    "false",
    "fc",
    "fg",
    "fi",
    "for",
    "function",
    "getopts",
    "hash",
    "help",
    "history",
    "if",
    "in",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "select",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "then",
    "time",
    "times",
    "trap",
    "true",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "until",
    "wait",
    "while",
];

/// True if and only if every command `glob` matches starts with a
/// program that only an `execve` runs, named without a directory: the
/// glob's first word is literal up to its end or a wildcard, holds no
/// `/`, `=`, quote or `$`, and no builtin or keyword can be that word
/// (`curl*`, `git push*`, `rm -rf*`; not `*`, `echo*`, `e*`, `kill *`,
/// `/usr/bin/curl*`, `A=1 curl*`).
pub(crate) fn enforced_at_exec(glob: &str) -> bool {
    let glob = glob.trim_start();
    let literal = literal_prefix(glob);
    let (word, complete) = match literal.find(char::is_whitespace) {
        Some(end) => (&literal[..end], true),
        None => (literal, literal.len() == glob.len()),
    };
    if word.is_empty()
        || word
            .chars()
            .any(|c| matches!(c, '/' | '=' | '\'' | '"' | '$' | '`'))
    {
        return false;
    }
    !BUILTINS.iter().any(|builtin| {
        if complete {
            *builtin == word
        } else {
            builtin.starts_with(word)
        }
    })
}

/// A glob's literal start, up to its first wildcard (`git push*` → `git
/// push `).
fn literal_prefix(glob: &str) -> &str {
    let end = glob.find(['*', '?', '[', '{', '\\']).unwrap_or(glob.len());
    &glob[..end]
}

/// True if and only if `text` holds `start` at the start of a word: not
/// right after a letter, digit, `_` or `-`.
fn names(text: &str, start: &str) -> bool {
    text.match_indices(start).any(|(at, _)| {
        !text[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || matches!(c, '_' | '-'))
    })
}
