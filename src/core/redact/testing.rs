//! Property-test inputs for the redactor and its sinks: a credential of
//! every shape `core::secrets` knows (and a known value), placed where
//! real outputs put one. Shared by the tests of the redactor and of the
//! sinks that mask through it.

use proptest::prelude::*;
use proptest::string::string_regex;

use super::Redactor;

/// One credential: the text a program prints, the secret in it that must
/// not come out, and the value the redactor must know (for a secret it
/// knows by value, not by shape).
#[derive(Debug, Clone)]
pub(crate) struct Credential {
    pub kind: &'static str,
    pub text: String,
    pub secret: String,
    pub known: Option<String>,
}

impl Credential {
    /// A redactor that knows what it must.
    pub fn redactor(&self) -> Redactor {
        let mut redactor = Redactor::new();
        if let Some(known) = &self.known {
            redactor.add(known.clone());
        }
        redactor
    }
}

fn pattern(regex: &str) -> BoxedStrategy<String> {
    string_regex(regex)
        .unwrap_or_else(|error| panic!("{regex}: {error}"))
        .boxed()
}

/// A credential whose whole text is the secret.
fn bare(kind: &'static str, regex: &str) -> BoxedStrategy<Credential> {
    pattern(regex)
        .prop_map(move |secret| Credential {
            kind,
            text: secret.clone(),
            secret,
            known: None,
        })
        .boxed()
}

/// A credential whose secret follows a context (`name = `).
fn after(kind: &'static str, context: &'static str, regex: &str) -> BoxedStrategy<Credential> {
    pattern(regex)
        .prop_map(move |secret| Credential {
            kind,
            text: format!("{context}{secret}"),
            secret,
            known: None,
        })
        .boxed()
}

/// Every shape of `core::secrets`, with random bodies, and a known value.
pub(crate) fn credential() -> impl Strategy<Value = Credential> {
    let basic = (pattern("[a-z]{3,10}"), pattern("[A-Za-z0-9_]{8,24}")).prop_map(|(user, pass)| {
        let secret =
            crate::core::secrets::encode_base64(format!("{user}:{pass}").as_bytes(), false);
        Credential {
            kind: "basic_auth_header",
            text: format!("Authorization: Basic {secret}"),
            secret,
            known: None,
        }
    });
    let private_key = pattern("[A-Za-z0-9+/]{40,64}").prop_map(|body| Credential {
        kind: "private_key",
        text: format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----"),
        secret: body,
        known: None,
    });
    let known = pattern("[a-z]{4}-[a-z0-9]{12,24}").prop_map(|value| Credential {
        kind: "secret_value",
        text: value.clone(),
        secret: value.clone(),
        known: Some(value),
    });
    prop_oneof![
        bare("github_token", "gh[pousr]_[A-Za-z0-9]{36,48}"),
        bare("github_token", "github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}"),
        bare("aws_access_key", "(AKIA|ASIA)[A-Z0-9]{16}"),
        after(
            "aws_secret_key",
            "aws_secret_access_key = ",
            "[A-Za-z0-9/+]{40}"
        ),
        bare(
            "slack_token",
            "xox[abposr]-[0-9]{10,12}-[0-9]{10,13}-[A-Za-z0-9]{24}"
        ),
        bare("anthropic_key", "sk-ant-api03-[A-Za-z0-9_-]{80,96}"),
        bare("openai_key", "sk-proj-[A-Za-z0-9_-]{40,64}"),
        bare("openai_key", "sk-[A-Za-z0-9]{48}"),
        bare("openai_key", "sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"),
        bare("google_api_key", "AIza[0-9A-Za-z_-]{35}"),
        bare("npm_token", "npm_[A-Za-z0-9]{36}"),
        basic,
        after(
            "bearer_auth_header",
            "Authorization: Bearer ",
            "[A-Za-z]{4}[0-9]{4}[A-Za-z0-9._-]{12,40}[A-Za-z0-9]"
        ),
        private_key,
        known,
    ]
}

/// Where a credential is: positions in one output, or cut in two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    LineStart,
    AfterTab,
    AfterEquals,
    InQuotes,
    AfterAnsi,
    /// Two writes of one stream (stdout is read in chunks, then joined).
    SplitChunks,
    /// The first part on stdout, the rest on stderr.
    SplitStreams,
    /// The first part on stderr, the rest on stdout.
    SplitStreamsReversed,
}

impl Position {
    pub fn is_split(self) -> bool {
        matches!(
            self,
            Self::SplitChunks | Self::SplitStreams | Self::SplitStreamsReversed
        )
    }
}

pub(crate) fn position() -> impl Strategy<Value = Position> {
    prop_oneof![
        Just(Position::LineStart),
        Just(Position::AfterTab),
        Just(Position::AfterEquals),
        Just(Position::InQuotes),
        Just(Position::AfterAnsi),
        Just(Position::SplitChunks),
        Just(Position::SplitStreams),
        Just(Position::SplitStreamsReversed),
    ]
}

/// A program's stdout and stderr with the credential at `position`; a
/// split cuts the secret after `cut` of its bytes (`1..len`).
pub(crate) fn place(credential: &Credential, position: Position, cut: usize) -> (String, String) {
    let text = &credential.text;
    let at = text.find(&credential.secret).unwrap_or(0) + cut.clamp(1, credential.secret.len() - 1);
    let (first, second) = text.split_at(at);
    let before = "compiling 3 crates\n";
    let after = "\nfinished\n";
    match position {
        Position::LineStart => (format!("{before}{text}{after}"), String::new()),
        Position::AfterTab => (format!("{before}token:\t{text}{after}"), String::new()),
        Position::AfterEquals => (format!("{before}TOKEN={text}{after}"), String::new()),
        Position::InQuotes => (format!("{before}value: \"{text}\"{after}"), String::new()),
        Position::AfterAnsi => (
            format!("{before}\x1b[32m{text}\x1b[0m{after}"),
            "\x1b[1;31mwarning\x1b[0m\n".to_owned(),
        ),
        Position::SplitChunks => {
            let mut stdout = format!("{before}{first}");
            stdout.push_str(&format!("{second}{after}"));
            (stdout, String::new())
        }
        Position::SplitStreams => (format!("{before}{first}"), format!("{second}{after}")),
        Position::SplitStreamsReversed => (format!("{second}{after}"), format!("{before}{first}")),
    }
}

/// What must not come out: the secret, and for a split each part of it
/// long enough to say something (eight characters and more).
pub(crate) fn needles(credential: &Credential, position: Position, cut: usize) -> Vec<String> {
    let secret = &credential.secret;
    let mut needles = vec![secret.clone()];
    if position.is_split() {
        let cut = cut.clamp(1, secret.len() - 1);
        needles.extend(
            [&secret[..cut], &secret[cut..]]
                .into_iter()
                .filter(|part| part.len() >= 8)
                .map(str::to_owned),
        );
    }
    needles
}

/// Panics when a needle is in `text`.
pub(crate) fn assert_masked(needles: &[String], output: &str, text: &str) {
    for needle in needles {
        assert!(
            !text.contains(needle.as_str()),
            "`{needle}` in {output}:\n{text}"
        );
    }
}
