//! The environment every subprocess gets: an allowlist (docs/tools.md,
//! docs/security.md S7).
//!
//! A child gets `PATH` (empty and relative entries dropped; entries inside
//! the workdir dropped per task, [`ChildEnv::confine_path`]), `HOME` (a
//! private empty directory per task unless the operator passes `HOME`),
//! `LANG`, `LC_*`, `TZ`, `TERM=dumb`, `CI` (`1` when unset), `TMPDIR`,
//! and the variables the operator names in `safety.env_passthrough`;
//! nothing else, except the [`NON_INTERACTIVE`] settings, which every
//! child gets whatever else is set.
//!
//! Every value withheld is handed to the redactor, so it never surfaces in
//! an output, except values that cannot be secret and would only mask
//! ordinary text: settings (`YBS_*`, `INPUT_*`, `GITHUB_*`, `RUNNER_*`,
//! `OTEL_*`, the shell's own), values shorter than 8 characters, numbers, absolute
//! paths (or a `:`-separated list of them), 40- or 64-digit hex git object
//! ids — unless the name looks secret ([`is_redactable`]).

use crate::core::Environ;

/// Variables passed through by exact name.
/// `CARGO_HOME` and `RUSTUP_HOME` locate a toolchain installed outside
/// `~` (the Rust container images), where rustup's `cargo` finds nothing.
const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "TZ",
    "TERM",
    "CI",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
];

/// Set for every child, over any passed-through or declared value: no
/// prompt for credentials (git), no interactive installer question
/// (apt/dpkg), no pager waiting for a key (git, man, systemctl…). A child
/// has no terminal; a prompt would only hang it until its timeout.
pub const NON_INTERACTIVE: &[(&str, &str)] = &[
    ("GIT_TERMINAL_PROMPT", "0"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
];

/// Environment variables for child processes, with what was withheld.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    pub vars: Vec<(String, String)>,
    /// Names of the variables that were withheld.
    pub removed: Vec<String>,
    /// Values of the withheld variables the redactor masks (see
    /// [`is_redactable`]).
    pub secret_values: Vec<String>,
}

impl ChildEnv {
    /// ybs's environment (as read at the start), filtered. Variables whose
    /// name or value is not UTF-8 are dropped.
    pub fn scrubbed(environ: &Environ, passthrough: &[String]) -> Self {
        Self::scrubbed_from(environ.utf8_vars(), passthrough)
    }

    /// `vars` filtered by the allowlist plus `passthrough`, then
    /// `TERM=dumb`, `CI` (`1` when unset or empty) and [`NON_INTERACTIVE`]
    /// set. A withheld value of a [`NON_INTERACTIVE`] name is not masked
    /// (`noninteractive` is no secret).
    pub fn scrubbed_from(
        vars: impl Iterator<Item = (String, String)>,
        passthrough: &[String],
    ) -> Self {
        let mut env = Self::default();
        for (name, value) in vars {
            if name.is_empty() || name.contains('=') {
                continue;
            }
            if passthrough.contains(&name) || is_allowed(&name) {
                let value = if name == "PATH" {
                    clean_path(&value, None)
                } else {
                    value
                };
                env.vars.push((name, value));
            } else {
                if is_redactable(&name, &value)
                    && !NON_INTERACTIVE.iter().any(|(fixed, _)| *fixed == name)
                    && !env.secret_values.contains(&value)
                {
                    env.secret_values.push(value);
                }
                env.removed.push(name);
            }
        }
        env.set("TERM", "dumb");
        if env.get("CI").is_none_or(str::is_empty) {
            env.set("CI", "1");
        }
        env.set_non_interactive();
        env
    }

    /// Sets [`NON_INTERACTIVE`] over whatever is there (the process
    /// runner calls it again after a server's declared `env`).
    pub fn set_non_interactive(&mut self) {
        for (name, value) in NON_INTERACTIVE {
            self.set(name, value);
        }
    }

    /// Drops the `PATH` entries at or under `workdir` (a program the
    /// model wrote must not shadow a system one).
    pub fn confine_path(&mut self, workdir: &std::path::Path) {
        if let Some(path) = self.get("PATH") {
            let cleaned = clean_path(path, Some(workdir));
            self.set("PATH", &cleaned);
        }
    }

    /// Sets `name` to `value`, replacing any earlier value.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.vars.iter_mut().find(|(existing, _)| existing == name) {
            Some((_, existing)) => value.clone_into(existing),
            None => self.vars.push((name.to_owned(), value.to_owned())),
        }
    }

    /// Removes `name`.
    pub fn unset(&mut self, name: &str) {
        self.vars.retain(|(existing, _)| existing != name);
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(existing, _)| existing == name)
            .map(|(_, value)| value.as_str())
    }
}

/// `name` is on the allowlist: an exact name or `LC_*`.
pub fn is_allowed(name: &str) -> bool {
    ALLOWED.contains(&name) || name.starts_with("LC_")
}

/// `PATH` without empty or relative entries, nor entries under `workdir`.
fn clean_path(path: &str, workdir: Option<&std::path::Path>) -> String {
    path.split(':')
        .filter(|entry| entry.starts_with('/'))
        .filter(|entry| {
            workdir.is_none_or(|workdir| !std::path::Path::new(entry).starts_with(workdir))
        })
        .collect::<Vec<_>>()
        .join(":")
}

/// Name fragments (upper case) that make a withheld value secret whatever
/// it looks like.
const SECRET_FRAGMENTS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "WEBHOOK",
    "DSN",
    "DATABASE",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "CERT",
    "SIGNATURE",
    // OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer ...` for a collector.
    "HEADERS",
];

/// Withheld variables whose values are settings, not secrets: ybs's own
/// (`YBS_*`, values ybs reports anyway), a CI system's action inputs and
/// run metadata (`INPUT_*`, `GITHUB_*`, `RUNNER_*`), OpenTelemetry's
/// standard variables (`OTEL_*`: endpoints, service name), and the shell's
/// bookkeeping. Masking them would garble every output (the task file's
/// path, the model's name). A name that looks secret
/// (`GITHUB_TOKEN`, `OTEL_EXPORTER_OTLP_HEADERS`) is masked all the same.
const SETTING_PREFIXES: &[&str] = &["YBS_", "INPUT_", "GITHUB_", "RUNNER_", "OTEL_"];
const SETTING_NAMES: &[&str] = &[
    "USER",
    "LOGNAME",
    "SHELL",
    "HOSTNAME",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "MAIL",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "LANGUAGE",
    "DISPLAY",
    "COLORTERM",
    "TERM_PROGRAM",
];

/// A name that marks a secret: one of [`SECRET_FRAGMENTS`] anywhere, or a
/// personal access token (`PAT`, `*_PAT`, `PAT_*`).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_FRAGMENTS
        .iter()
        .any(|fragment| upper.contains(fragment))
        || upper
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| word == "PAT")
}

/// Whether a withheld variable's value is masked in outputs. A secret
/// name ([`is_secret_name`]): any value of 4 characters or more. A setting
/// ([`SETTING_PREFIXES`], [`SETTING_NAMES`]): never. Any other: 8
/// characters or more, and not a number, an absolute path (or a `:`-list
/// of them) or a git object id (40 or 64 hex digits). Those cannot be a
/// credential and masking them would garble ordinary output.
pub fn is_redactable(name: &str, value: &str) -> bool {
    if is_secret_name(name) {
        return value.chars().count() >= 4;
    }
    if SETTING_NAMES.contains(&name)
        || SETTING_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
    {
        return false;
    }
    if value.chars().count() < 8 {
        return false;
    }
    let number = value
        .trim_start_matches(['-', '+'])
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.');
    let paths = value
        .split(':')
        .all(|part| part.starts_with('/') && !part.chars().any(char::is_whitespace));
    let object_id = matches!(value.len(), 40 | 64) && value.chars().all(|c| c.is_ascii_hexdigit());
    !(number || paths || object_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)], passthrough: &[&str]) -> ChildEnv {
        let passthrough: Vec<String> = passthrough.iter().map(|s| (*s).to_owned()).collect();
        ChildEnv::scrubbed_from(
            pairs
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
            &passthrough,
        )
    }

    #[test]
    fn only_the_allowlist_passes() {
        let env = env_of(
            &[
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
                ("LANG", "C.UTF-8"),
                ("LC_ALL", "C"),
                ("TZ", "UTC"),
                ("TMPDIR", "/var/tmp"),
                ("API_KEY", "canary-api-key-1"),
                ("DEPLOY_KEY", "canary-deploy-2"),
                ("DATABASE_URL", "postgres://u:p@db/x"),
                ("SLACK_WEBHOOK_URL", "https://hooks.example/T0"),
                ("GH_PAT", "ghp_canary_value"),
                ("TOKENIZER", "kept-before"),
                ("PAGER", "less"),
            ],
            &[],
        );
        let mut names: Vec<&str> = env.vars.iter().map(|(name, _)| name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "CI",
                "DEBIAN_FRONTEND",
                "GIT_PAGER",
                "GIT_TERMINAL_PROMPT",
                "HOME",
                "LANG",
                "LC_ALL",
                "PAGER",
                "PATH",
                "TERM",
                "TMPDIR",
                "TZ"
            ]
        );
        assert_eq!(env.get("PAGER"), Some("cat"));
        for canary in [
            "canary-api-key-1",
            "canary-deploy-2",
            "postgres://u:p@db/x",
            "https://hooks.example/T0",
            "ghp_canary_value",
            "kept-before",
        ] {
            assert!(
                env.secret_values.iter().any(|value| value == canary),
                "{canary}"
            );
        }
        assert!(env.removed.iter().any(|name| name == "GH_PAT"));
        // Short values are withheld but not masked.
        assert!(!env.secret_values.iter().any(|value| value == "less"));
    }

    #[test]
    fn passthrough_keeps_named_variables() {
        let env = env_of(
            &[
                ("NPM_TOKEN", "npm-secret-value"),
                ("CARGO_TOKEN", "c-secret-value"),
            ],
            &["NPM_TOKEN"],
        );
        assert_eq!(env.get("NPM_TOKEN"), Some("npm-secret-value"));
        assert_eq!(env.get("CARGO_TOKEN"), None);
        assert!(!env.secret_values.contains(&"npm-secret-value".to_owned()));
        assert!(env.secret_values.contains(&"c-secret-value".to_owned()));
    }

    #[test]
    fn path_loses_empty_relative_and_workdir_entries() {
        let mut env = env_of(
            &[("PATH", "/work/bin::.:bin:/usr/bin:/work:/workshop/bin")],
            &[],
        );
        assert_eq!(
            env.get("PATH"),
            Some("/work/bin:/usr/bin:/work:/workshop/bin")
        );
        env.confine_path(std::path::Path::new("/work"));
        assert_eq!(env.get("PATH"), Some("/usr/bin:/workshop/bin"));
    }

    #[test]
    fn term_is_dumb_and_ci_kept_or_set() {
        let env = env_of(&[("TERM", "xterm-256color"), ("CI", "true")], &[]);
        assert_eq!(env.get("TERM"), Some("dumb"));
        assert_eq!(env.get("CI"), Some("true"));
        let env = env_of(&[], &[]);
        assert_eq!(env.get("CI"), Some("1"));
        assert_eq!(
            env.vars.iter().filter(|(name, _)| name == "TERM").count(),
            1
        );
    }

    #[test]
    fn harmless_values_are_not_masked() {
        for value in [
            "short",
            "1234567890",
            "/home/runner/work",
            "/usr/local/bin:/usr/bin",
            "0123456789abcdef0123456789abcdef01234567",
            &"ab".repeat(32),
        ] {
            assert!(!is_redactable("SOME_VAR", value), "{value}");
        }
        for value in [
            "sk-0123456789",
            "postgres://u:p@db/x",
            "/path with space:x",
            "0123456789abcdef0123456789abcdef0123456",
        ] {
            assert!(is_redactable("SOME_VAR", value), "{value}");
        }
    }

    #[test]
    fn secret_names_are_masked_and_settings_are_not() {
        for name in [
            "API_KEY",
            "DEPLOY_KEY",
            "DATABASE_URL",
            "SLACK_WEBHOOK_URL",
            "GH_PAT",
            "GITHUB_TOKEN",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ] {
            assert!(is_redactable(name, "1234"), "{name}");
            assert!(is_redactable(name, "/a/path/value"), "{name}");
        }
        for name in [
            "YBS_MODEL",
            "INPUT_TASKS",
            "GITHUB_REPOSITORY",
            "RUNNER_TEMP",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "USER",
            "OLDPWD",
        ] {
            assert!(!is_redactable(name, "gpt-4o-mini-2024-07-18"), "{name}");
        }
        assert!(!is_redactable("PATHOLOGY", "x"));
        assert!(!is_secret_name("PATH"));
        assert!(!is_secret_name("COMPAT_MODE"));
    }

    #[test]
    fn scrubbed_filters_the_environment_read_at_the_start() {
        let environ = Environ::from_pairs([
            ("TERM", "xterm"),
            ("PATH", "/usr/bin"),
            ("SECRET_TOKEN", "abcdefgh12345678"),
        ]);
        let env = ChildEnv::scrubbed(&environ, &[]);
        assert_eq!(env.get("TERM"), Some("dumb"));
        assert_eq!(env.get("PATH"), Some("/usr/bin"));
        assert_eq!(env.removed, ["SECRET_TOKEN"]);
        assert_eq!(env.secret_values, ["abcdefgh12345678"]);
        assert!(
            env.vars.iter().all(|(name, _)| is_allowed(name)
                || NON_INTERACTIVE.iter().any(|(fixed, _)| fixed == name))
        );
    }
}
