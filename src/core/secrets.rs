//! Credentials recognised by their shape, not by a known value: tokens of
//! the common vendors, AWS keys, PEM private keys, HTTP authorization
//! headers (docs/security.md S7). The redactor masks them in every output and in
//! what the model reads; git refuses to commit a file that holds one.
//!
//! Each shape needs the vendor's full prefix, length and alphabet, so
//! ordinary prose and placeholders ("ghp_xxx", "sk-...") never match.

use std::sync::{LazyLock, OnceLock};

use aho_corasick::AhoCorasick;
use regex::Regex;

/// One credential format. When the pattern has a group named `s`, only
/// that group is the secret (the text around it is context); otherwise the
/// whole match is.
struct Shape {
    kind: &'static str,
    pattern: &'static str,
    /// A further test on the secret text, for shapes a regex cannot pin down.
    accept: fn(&str) -> bool,
    /// The match must start a word (see `starts_a_word`). The patterns do
    /// not say so with a leading `\b` themselves: a regex boundary sees
    /// the `n` of an escaped `\n`, or the `m` that ends an ANSI colour
    /// code, as part of a word.
    word_start: bool,
}

fn always(_: &str) -> bool {
    true
}

/// Most specific first: `credential_kind` names the first shape that
/// matches, and `sk-ant-` must be named before the generic `sk-`.
const SHAPES: &[Shape] = &[
    Shape {
        kind: "private_key",
        // The whole block; a block cut short runs to the end of the text.
        pattern: r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\z)",
        accept: always,
        word_start: false,
    },
    Shape {
        kind: "github_token",
        pattern: r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})(?-u:\b)",
        accept: always,
        word_start: true,
    },
    Shape {
        kind: "aws_access_key",
        pattern: r"(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
        accept: always,
        word_start: true,
    },
    Shape {
        kind: "aws_secret_key",
        // The 40-character value next to its name, in ini, env, YAML or
        // JSON spelling (`aws_secret_access_key = …`, `"SecretAccessKey": "…"`).
        pattern: r#"(?i)(?:aws_?)?secret_?access_?key\\?["']?\s*[:=]\s*\\?["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)"#,
        accept: always,
        word_start: false,
    },
    Shape {
        kind: "slack_token",
        pattern: r"xox[abposr]-(?:[0-9]+-)+[A-Za-z0-9]{16,}(?-u:\b)",
        accept: always,
        word_start: true,
    },
    Shape {
        kind: "anthropic_key",
        pattern: r"sk-ant-[a-z]{3,8}[0-9]{2}-[A-Za-z0-9_-]{80,}",
        accept: always,
        word_start: true,
    },
    Shape {
        kind: "openai_key",
        // Keys carry "T3BlbkFJ" (base64 of "OpenAI"); project keys are long.
        pattern: r"sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}|sk-proj-[A-Za-z0-9_-]{40,}|sk-[A-Za-z0-9]{48}(?-u:\b)",
        accept: always,
        word_start: true,
    },
    Shape {
        kind: "google_api_key",
        pattern: r"(?P<s>AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|\z)",
        accept: always,
        word_start: true,
    },
    Shape {
        kind: "npm_token",
        pattern: r"npm_[A-Za-z0-9]{36}(?-u:\b)",
        accept: always,
        word_start: true,
    },
    Shape {
        kind: "basic_auth_header",
        // `http.<url>.extraheader = AUTHORIZATION: basic <base64>` as
        // actions/checkout leaves it in .git/config, or any such header.
        pattern: r"(?i)authorization\s*[:=]\s*basic\s+(?P<s>[A-Za-z0-9+/_-]{6,}={0,2})",
        accept: is_basic_credential,
        word_start: true,
    },
    Shape {
        kind: "bearer_auth_header",
        pattern: r"(?i)authorization\s*[:=]\s*(?:bearer|token)\s+(?P<s>[A-Za-z0-9+/._~-]{20,}={0,2})",
        accept: looks_random,
        word_start: true,
    },
];

/// Text every match of a shape holds, by shape (ASCII case ignored: a
/// superset of what each pattern needs). Most texts hold none of them,
/// and then no pattern is compiled or run at all: compiling the shapes
/// (long counted repetitions) was the largest cost before a run's first
/// request (docs/performance.md).
const LITERALS: &[(&str, &[&str])] = &[
    ("private_key", &["-----BEGIN "]),
    (
        "github_token",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    ),
    ("aws_access_key", &["AKIA", "ASIA"]),
    ("aws_secret_key", &["secret"]),
    ("slack_token", &["xox"]),
    ("anthropic_key", &["sk-ant-"]),
    ("openai_key", &["sk-"]),
    ("google_api_key", &["AIza"]),
    ("npm_token", &["npm_"]),
    ("basic_auth_header", &["authorization"]),
    ("bearer_auth_header", &["authorization"]),
];

struct Compiled {
    /// Every literal of [`LITERALS`], and the shape (its index in
    /// [`SHAPES`]) of each.
    literals: AhoCorasick,
    shape_of: Vec<usize>,
    /// Each shape on its own, compiled the first time its literal is in a
    /// text: most texts hold none, and most runs never need one.
    each: Vec<OnceLock<Regex>>,
}

#[expect(
    clippy::expect_used,
    reason = "the literals are constants, and the tests build them"
)]
static COMPILED: LazyLock<Compiled> = LazyLock::new(|| {
    let mut literals = Vec::new();
    let mut shape_of = Vec::new();
    for (kind, texts) in LITERALS {
        let index = SHAPES
            .iter()
            .position(|shape| shape.kind == *kind)
            .expect("every literal names a shape");
        for text in *texts {
            literals.push(*text);
            shape_of.push(index);
        }
    }
    Compiled {
        literals: AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&literals)
            .expect("the literals build"),
        shape_of,
        each: SHAPES.iter().map(|_| OnceLock::new()).collect(),
    }
});

/// Builds the literal matcher now instead of at the first text looked at
/// (see [`super::redact::Redactor::prepare_in_background`]).
pub fn prepare() {
    LazyLock::force(&COMPILED);
}

impl Compiled {
    /// Shape `index` alone.
    #[expect(
        clippy::expect_used,
        reason = "the patterns are constants, and the tests compile each of them"
    )]
    fn shape(&self, index: usize) -> &Regex {
        self.each[index]
            .get_or_init(|| Regex::new(SHAPES[index].pattern).expect("credential shape compiles"))
    }

    /// The shapes that may match in `text` (one of their literals is in
    /// it), in [`SHAPES`] order.
    /// Every masked text passes here: a bit per shape, no allocation.
    fn candidates(&self, text: &str) -> impl Iterator<Item = usize> {
        let mut seen: u32 = 0;
        for found in self.literals.find_overlapping_iter(text) {
            seen |= 1 << self.shape_of[found.pattern().as_usize()];
        }
        (0..SHAPES.len()).filter(move |&index| seen & (1 << index) != 0)
    }
}

#[expect(
    clippy::expect_used,
    reason = "a constant pattern, compiled by the tests too"
)]
static KEY_BEGIN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
        .expect("private key marker compiles")
});
#[expect(
    clippy::expect_used,
    reason = "a constant pattern, compiled by the tests too"
)]
static KEY_END: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
        .expect("private key marker compiles")
});

/// Whether a private key block begins in `line` and does not end there:
/// the lines after it, up to its end marker, are the key.
pub fn opens_private_key(line: &str) -> bool {
    line.contains("-----BEGIN ")
        && KEY_BEGIN
            .find_iter(line)
            .last()
            .is_some_and(|begin| !KEY_END.is_match(&line[begin.end()..]))
}

/// The byte offset just past the first private key end marker in `text`.
pub fn private_key_end(text: &str) -> Option<usize> {
    if !text.contains("-----END ") {
        return None;
    }
    KEY_END.find(text).map(|end| end.end())
}

/// Whether a private key block's end marker is in `line`.
pub fn closes_private_key(line: &str) -> bool {
    line.contains("-----END ") && KEY_END.is_match(line)
}

/// A credential found in a text: its kind and its byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub kind: &'static str,
    pub start: usize,
    pub end: usize,
}

/// The kind of the first credential shape found in `text` ("github_token",
/// "aws_access_key", "private_key", …), or `None`.
pub fn credential_kind(text: &str) -> Option<&'static str> {
    let compiled = &*COMPILED;
    compiled
        .candidates(text)
        .find(|&index| !find_in(index, compiled.shape(index), text).is_empty())
        .map(|index| SHAPES[index].kind)
}

/// Every credential in `text`, in order, overlaps resolved in favour of the
/// one that starts first (then the longer one).
pub fn find_credentials(text: &str) -> Vec<Found> {
    let compiled = &*COMPILED;
    let mut found: Vec<Found> = compiled
        .candidates(text)
        .flat_map(|index| find_in(index, compiled.shape(index), text))
        .collect();
    found.sort_by_key(|hit| (hit.start, std::cmp::Reverse(hit.end)));
    let mut kept: Vec<Found> = Vec::with_capacity(found.len());
    for hit in found {
        match kept.last() {
            Some(last) if hit.start < last.end => {}
            _ => kept.push(hit),
        }
    }
    kept
}

fn find_in(index: usize, regex: &Regex, text: &str) -> Vec<Found> {
    let shape = &SHAPES[index];
    let mut found = Vec::new();
    let mut at = 0;
    while at <= text.len() {
        let Some(captures) = regex.captures_at(text, at) else {
            break;
        };
        let (Some(whole), Some(secret)) = (
            captures.get(0),
            captures.name("s").or_else(|| captures.get(0)),
        ) else {
            break;
        };
        if shape.word_start && !starts_a_word(text, whole.start()) {
            // Not a credential here; one may start inside this match.
            at = next_char(text, whole.start());
            continue;
        }
        if (shape.accept)(secret.as_str()) {
            found.push(Found {
                kind: shape.kind,
                start: secret.start(),
                end: secret.end(),
            });
        }
        // Go on from the end of the secret, not of the match: a shape's
        // trailing context may be the character before the next one.
        at = if secret.end() > whole.start() {
            secret.end()
        } else {
            next_char(text, whole.start())
        };
    }
    found
}

/// The byte offset of the character after the one at `at`.
fn next_char(text: &str, at: usize) -> usize {
    text[at..]
        .chars()
        .next()
        .map_or(text.len() + 1, |c| at + c.len_utf8())
}

/// Whether a credential may start at byte `start` of `text`: at the start,
/// after a character that is not an ASCII word character, or right after
/// what ends a line or a colour in the text a program prints or in its
/// escaped spelling: an escape such as `\n`, `\t`, `\u0009` or `\x1b`
/// (JSON, a shell's `$'…'`, a log of a string literal), or an ANSI
/// sequence such as `ESC[32m` (raw or escaped as `\u001b[32m`). A regex
/// word boundary would see the `n` of `\n` and the `m` of `[32m` as part
/// of the token's word, and let it through.
pub(crate) fn starts_a_word(text: &str, start: usize) -> bool {
    let before = &text.as_bytes()[..start];
    match before.last() {
        None => true,
        Some(byte) if !(byte.is_ascii_alphanumeric() || *byte == b'_') => true,
        Some(_) => ends_with_escape(before) || ends_with_ansi(before),
    }
}

/// Whether a backslash comes before the character at `end`. Any run of
/// them counts, odd or even: text escaped twice (JSON in a JSON string, a
/// log of a string literal) spells a line break `\\n`.
fn escaped_at(bytes: &[u8], end: usize) -> bool {
    end > 0 && bytes[end - 1] == b'\\'
}

/// `…\n`, `…\t`, `…\u00XX`, `…\x1b`, `…\033`: an escape ends `bytes`.
fn ends_with_escape(bytes: &[u8]) -> bool {
    let n = bytes.len();
    let is_hex = |b: &u8| b.is_ascii_hexdigit();
    // One letter: \n \t \r \f \v \b \e \0.
    if n >= 2 && b"ntrfvbe0".contains(&bytes[n - 1]) && escaped_at(bytes, n - 1) {
        return true;
    }
    // \uXXXX
    if n >= 6
        && bytes[n - 5] == b'u'
        && bytes[n - 4..].iter().all(is_hex)
        && escaped_at(bytes, n - 5)
    {
        return true;
    }
    // \xXX
    if n >= 4
        && bytes[n - 3] == b'x'
        && bytes[n - 2..].iter().all(is_hex)
        && escaped_at(bytes, n - 3)
    {
        return true;
    }
    // \NNN (octal)
    n >= 4 && bytes[n - 3..].iter().all(|b| (b'0'..=b'7').contains(b)) && escaped_at(bytes, n - 3)
}

/// `…ESC[32m` (or any CSI sequence), raw or with ESC escaped: an ANSI
/// control sequence ends `bytes`.
fn ends_with_ansi(bytes: &[u8]) -> bool {
    let Some((last, rest)) = bytes.split_last() else {
        return false;
    };
    if !last.is_ascii_alphabetic() {
        return false;
    }
    let params = rest
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit() || **b == b';' || **b == b'?')
        .count();
    let rest = &rest[..rest.len() - params];
    let Some((b'[', rest)) = rest.split_last() else {
        return false;
    };
    rest.last() == Some(&0x1b) || (!rest.is_empty() && ends_with_escape(rest))
}

/// A basic-auth value is the base64 of `user:password`.
fn is_basic_credential(value: &str) -> bool {
    decode_base64(value).is_some_and(|bytes| bytes.len() >= 3 && bytes.contains(&b':'))
}

/// A bearer value is a credential when it mixes letters and digits, which
/// placeholders like `YOUR_TOKEN_HERE` do not.
fn looks_random(value: &str) -> bool {
    value.bytes().any(|b| b.is_ascii_digit()) && value.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Base64 of `bytes` in the standard or the url-safe alphabet, padded
/// with `=` (the `base64` crate, already built for the HTTP stack).
pub(crate) fn encode_base64(bytes: &[u8], url_safe: bool) -> String {
    use base64::Engine as _;
    if url_safe {
        base64::engine::general_purpose::URL_SAFE.encode(bytes)
    } else {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }
}

/// Decodes standard or url-safe base64, padded or not; stray bits in
/// the last character are accepted, as lenient decoders do.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let config = GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true);
    [base64::alphabet::STANDARD, base64::alphabet::URL_SAFE]
        .iter()
        .find_map(|alphabet| GeneralPurpose::new(alphabet, config).decode(text).ok())
}

/// The spellings of `secret` inside base64 text: the whole encoding
/// (padded and not), and for each of the three byte offsets at which the
/// secret can start, the run of characters that depend on the secret's
/// bytes alone, in both alphabets. Runs shorter than `min_len` are left
/// out: they would match unrelated base64.
pub(crate) fn base64_forms(secret: &str, min_len: usize) -> Vec<String> {
    let bytes = secret.as_bytes();
    let mut forms = Vec::new();
    for url_safe in [false, true] {
        let whole = encode_base64(bytes, url_safe);
        forms.push(whole.trim_end_matches('=').to_owned());
        forms.push(whole);
        for offset in 0..3usize {
            let mut padded = vec![0u8; offset];
            padded.extend_from_slice(bytes);
            let encoded = encode_base64(&padded, url_safe);
            // Characters 6-bit aligned: char i covers bits [6i, 6i+6).
            // It depends only on the secret when that range lies within
            // bits [8*offset, 8*(offset+len)).
            let first = (8 * offset).div_ceil(6);
            let end_bits = 8 * (offset + bytes.len());
            let last = end_bits / 6; // exclusive
            if last > first && last - first >= min_len {
                forms.push(encoded[first..last].to_owned());
            }
        }
    }
    forms.retain(|form| form.len() >= min_len);
    forms.sort();
    forms.dedup();
    forms
}

#[cfg(test)]
mod tests {
    use super::*;

    const GHP: &str = "ghp_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4";

    #[test]
    fn every_shape_has_a_literal_and_every_literal_a_shape() {
        // `Compiled::candidates` keeps a bit per shape.
        assert!(SHAPES.len() <= 32);
        for shape in SHAPES {
            assert!(
                LITERALS
                    .iter()
                    .any(|(kind, texts)| *kind == shape.kind && !texts.is_empty()),
                "{} has no literal: it would never be looked for",
                shape.kind
            );
        }
        // Building the automaton finds the shape of every literal.
        assert_eq!(
            COMPILED.shape_of.len(),
            LITERALS.iter().map(|(_, texts)| texts.len()).sum::<usize>()
        );
    }

    #[test]
    fn every_shape_compiles() {
        assert_eq!(COMPILED.each.len(), SHAPES.len());
        for index in 0..SHAPES.len() {
            COMPILED.shape(index);
        }
    }

    #[test]
    fn names_each_vendor_format() {
        let cases = [
            (GHP, "github_token"),
            ("gho_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4", "github_token"),
            ("ghs_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4", "github_token"),
            (
                "github_pat_11ABCDEFG0123456789abc_0123456789abcdefghijABCDEFGHIJ0123456789abcdefghijABCDEFGHI",
                "github_token",
            ),
            ("id AKIAIOSFODNN7EXAMPLE here", "aws_access_key"),
            (
                "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
                "aws_secret_key",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
                "private_key",
            ),
            (
                "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
                "slack_token",
            ),
            (
                "sk-ant-api03-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-abcdefghijklmnopqrstuvwxyzAB-AA",
                "anthropic_key",
            ),
            (
                "sk-proj-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV0123",
                "openai_key",
            ),
            (
                "sk-abcdefghijklmnopqrstT3BlbkFJabcdefghijklmnopqrst",
                "openai_key",
            ),
            (
                "key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q;",
                "google_api_key",
            ),
            ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_token"),
            (
                "extraheader = AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==",
                "basic_auth_header",
            ),
            (
                "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc123def456",
                "bearer_auth_header",
            ),
        ];
        for (text, kind) in cases {
            assert_eq!(credential_kind(text), Some(kind), "{text}");
        }
    }

    #[test]
    fn ordinary_text_and_placeholders_are_not_credentials() {
        for text in [
            "ghp_xxx and gho_ and github_pat_",
            "sk-... or sk-your-key-here, task-runner, risk-assessment-of-the-project",
            "AKIA is a prefix; AKIAIOSFODNN7 is too short",
            "-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----",
            "Authorization: Bearer YOUR_TOKEN_HERE",
            "Authorization: Bearer $TOKEN",
            "authorization: basic <base64>",
            "xoxb-not-a-token",
            "npm_install_all_packages_in_the_workspace",
            "the secret_access_key goes in ~/.aws/credentials",
        ] {
            assert_eq!(credential_kind(text), None, "{text}");
        }
    }

    #[test]
    fn finds_ranges_and_masks_only_the_value() {
        let text = format!(
            "token={GHP}\naws_secret_access_key=\"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\""
        );
        let found = find_credentials(&text);
        assert_eq!(found.len(), 2);
        assert_eq!(&text[found[0].start..found[0].end], GHP);
        assert_eq!(
            &text[found[1].start..found[1].end],
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
        );
    }

    #[test]
    fn a_cut_private_key_runs_to_the_end() {
        let text = "x\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk";
        let found = find_credentials(text);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].end, text.len());
    }

    #[test]
    fn base64_round_trips_and_forms_cover_every_offset() {
        assert_eq!(encode_base64(b"hello", false), "aGVsbG8=");
        assert_eq!(decode_base64("aGVsbG8").as_deref(), Some(&b"hello"[..]));
        let secret = "s3cr3t-value-with?>>>chars";
        let forms = base64_forms(secret, 8);
        for prefix in ["", "a", "ab", "abc"] {
            for url_safe in [false, true] {
                let encoded = encode_base64(format!("{prefix}{secret}!").as_bytes(), url_safe);
                assert!(
                    forms.iter().any(|form| encoded.contains(form.as_str())),
                    "{prefix:?} {url_safe}: {encoded} not covered by {forms:?}"
                );
            }
        }
    }
}
