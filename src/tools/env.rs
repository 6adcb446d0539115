//! The scrubbed environment every subprocess gets (SPEC §5.1, SECURITY S7).
//!
//! Secrets are recognised by name; what is removed is recorded so the
//! redactor can mask the values wherever they might still surface. A few
//! variables that are not secret but hand a child a capability it should
//! not have (the SSH agent socket, the GitHub runner's command files) are
//! removed too, without being treated as secret values.

/// Variables removed by exact name (upper case), secret values.
const SECRET_NAMES: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OLLAMA_API_KEY",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
    "TOKEN",
];

/// Name suffixes (upper case) that mark a secret.
const SECRET_SUFFIXES: &[&str] = &["_API_KEY", "_APIKEY", "_TOKEN", "_PASSWD"];

/// Name fragments (upper case) that mark a secret anywhere in the name.
const SECRET_FRAGMENTS: &[&str] = &[
    "SECRET",
    "PASSWORD",
    "PRIVATE_KEY",
    "ACCESS_KEY",
    "CREDENTIAL",
];

/// Not secret values, but capabilities a child must not inherit: the SSH
/// agent (pushing with the runner's keys) and the runner's command files
/// (injecting environment or outputs into later workflow steps).
const CAPABILITY_NAMES: &[&str] = &[
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_OUTPUT",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
];

/// Set in every child so nothing waits on a human or paints escapes.
const FORCED: &[(&str, &str)] = &[
    ("CI", "1"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("GIT_PAGER", "cat"),
    ("PAGER", "cat"),
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
];

/// Environment variables for child processes, with what was removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    pub vars: Vec<(String, String)>,
    /// Names of the variables that were stripped.
    pub removed: Vec<String>,
    /// Values of the stripped variables, for the redactor.
    pub secret_values: Vec<String>,
}

impl ChildEnv {
    /// The current process environment, scrubbed. Variables whose name or
    /// value is not UTF-8 are dropped.
    pub fn scrubbed(passthrough: &[String]) -> Self {
        Self::scrubbed_from(
            std::env::vars_os().filter_map(|(name, value)| {
                Some((name.into_string().ok()?, value.into_string().ok()?))
            }),
            passthrough,
        )
    }

    /// `vars` scrubbed: secrets and capabilities removed unless named
    /// exactly in `passthrough`, then the non-interactive settings forced.
    pub fn scrubbed_from(
        vars: impl Iterator<Item = (String, String)>,
        passthrough: &[String],
    ) -> Self {
        let mut env = Self::default();
        for (name, value) in vars {
            if name.is_empty() || name.contains('=') {
                continue;
            }
            let passes = passthrough.contains(&name);
            if !passes && is_secret_name(&name) {
                if !value.is_empty() && !env.secret_values.contains(&value) {
                    env.secret_values.push(value);
                }
                env.removed.push(name);
            } else if !passes && is_capability_name(&name) {
                env.removed.push(name);
            } else {
                env.vars.push((name, value));
            }
        }
        for (name, value) in FORCED {
            env.set(name, value);
        }
        env
    }

    /// Sets `name` to `value`, replacing any earlier value.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.vars.iter_mut().find(|(existing, _)| existing == name) {
            Some((_, existing)) => value.clone_into(existing),
            None => self.vars.push((name.to_owned(), value.to_owned())),
        }
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(existing, _)| existing == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Returns true if and only if `name` looks like it holds a secret
/// (case-insensitive): `*_API_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`
/// and a few more spellings, or one of the well-known key variables.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || SECRET_SUFFIXES.iter().any(|suffix| upper.ends_with(suffix))
        || SECRET_FRAGMENTS
            .iter()
            .any(|fragment| upper.contains(fragment))
}

fn is_capability_name(name: &str) -> bool {
    CAPABILITY_NAMES
        .iter()
        .any(|capability| capability.eq_ignore_ascii_case(name))
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
    fn strips_secrets_by_pattern_and_records_values() {
        let env = env_of(
            &[
                ("PATH", "/usr/bin"),
                ("OPENAI_API_KEY", "sk-openai"),
                ("my_service_token", "tok-lower"),
                ("DB_PASSWORD_FILE", "pw-file"),
                ("AWS_SECRET_ACCESS_KEY", "aws-secret"),
                ("GITHUB_TOKEN", "ghs_x"),
                ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "oidc"),
                ("HOME", "/home/u"),
                ("TOKENIZER", "kept"),
            ],
            &[],
        );
        assert_eq!(env.get("PATH"), Some("/usr/bin"));
        assert_eq!(env.get("HOME"), Some("/home/u"));
        assert_eq!(env.get("TOKENIZER"), Some("kept"));
        for gone in [
            "OPENAI_API_KEY",
            "my_service_token",
            "DB_PASSWORD_FILE",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        ] {
            assert_eq!(env.get(gone), None, "{gone}");
            assert!(env.removed.iter().any(|name| name == gone), "{gone}");
        }
        assert!(env.secret_values.contains(&"sk-openai".to_owned()));
        assert!(env.secret_values.contains(&"tok-lower".to_owned()));
        assert!(env.secret_values.contains(&"oidc".to_owned()));
    }

    #[test]
    fn passthrough_keeps_named_secrets() {
        let env = env_of(
            &[("NPM_TOKEN", "npm-secret"), ("CARGO_TOKEN", "c")],
            &["NPM_TOKEN"],
        );
        assert_eq!(env.get("NPM_TOKEN"), Some("npm-secret"));
        assert_eq!(env.get("CARGO_TOKEN"), None);
        assert!(!env.secret_values.contains(&"npm-secret".to_owned()));
    }

    #[test]
    fn capabilities_are_removed_but_not_secret() {
        let env = env_of(
            &[
                ("SSH_AUTH_SOCK", "/tmp/agent.1"),
                ("GITHUB_ENV", "/runner/env"),
            ],
            &[],
        );
        assert_eq!(env.get("SSH_AUTH_SOCK"), None);
        assert_eq!(env.get("GITHUB_ENV"), None);
        assert!(env.secret_values.is_empty());
        assert_eq!(env.removed.len(), 2);
    }

    #[test]
    fn forces_non_interactive_settings() {
        let env = env_of(&[("TERM", "xterm-256color"), ("CI", "false")], &[]);
        assert_eq!(env.get("CI"), Some("1"));
        assert_eq!(env.get("TERM"), Some("dumb"));
        assert_eq!(env.get("GIT_TERMINAL_PROMPT"), Some("0"));
        assert_eq!(env.get("DEBIAN_FRONTEND"), Some("noninteractive"));
        assert_eq!(env.get("GIT_PAGER"), Some("cat"));
        assert_eq!(env.get("PAGER"), Some("cat"));
        assert_eq!(env.get("NO_COLOR"), Some("1"));
        assert_eq!(
            env.vars.iter().filter(|(name, _)| name == "TERM").count(),
            1
        );
    }

    #[test]
    fn scrubbed_reads_the_process_environment() {
        let env = ChildEnv::scrubbed(&[]);
        assert_eq!(env.get("CI"), Some("1"));
        assert!(env.vars.iter().all(|(name, _)| !is_secret_name(name)));
    }
}
