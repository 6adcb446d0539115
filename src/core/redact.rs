//! Secrets never reach an output (docs/security.md S7). Every sink writes through a
//! `Redactor`, which replaces with `[REDACTED]` each known secret value (as
//! is, JSON-escaped, and base64-encoded) and every credential recognised by
//! its shape (`core::secrets`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::Regex;
use serde_json::Value;

pub use super::secrets::{credential_kind, find_credentials};

/// The replacement text for a secret.
pub const MASK: &str = "[REDACTED]";

/// Values shorter than this are not treated as secrets: masking them would
/// garble ordinary text ("1", "true") and they protect nothing.
const MIN_SECRET_LEN: usize = 4;

/// Base64 runs shorter than this are not masked: they would match
/// unrelated base64 text.
const MIN_BASE64_LEN: usize = 8;

/// The kind counted for a known secret value found as is.
pub const KIND_VALUE: &str = "secret_value";
/// The kind counted for a known secret value found base64-encoded.
pub const KIND_VALUE_BASE64: &str = "secret_value_base64";

/// How many secrets were masked, by kind ("github_token", "secret_value", …).
pub type Redactions = BTreeMap<String, u64>;

/// How much of each output on either side of their seam
/// `Redactor::redact_across` looks at: more than any credential but a
/// private key block is long.
const SEAM_WINDOW: usize = 16 * 1024;

/// The largest char boundary of `text` at or below `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Masks a text that comes one line at a time (the model's text as it
/// streams in). A private key block spans lines, and no one line shows it
/// whole: from a line that opens one, each line is masked whole up to
/// the line with its end marker.
#[derive(Debug, Clone, Default)]
pub struct LineMasker {
    in_key: bool,
}

impl LineMasker {
    /// `line`, masked.
    pub fn line(&mut self, redactor: &Redactor, line: &str) -> String {
        if self.in_key {
            self.in_key = !super::secrets::closes_private_key(line);
            return MASK.to_owned();
        }
        self.in_key = super::secrets::opens_private_key(line);
        redactor.redact(line)
    }

    /// Whether the last line left a private key block open.
    pub fn in_key(&self) -> bool {
        self.in_key
    }
}

/// A set of secret values to mask, plus the credential shapes.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    /// Every spelling of every secret, with the kind it counts as.
    forms: HashMap<String, &'static str>,
    /// All of `forms`, longest first, as one literal automaton.
    matcher: Compiled<AhoCorasick>,
    /// The base64 forms with a line break allowed between any two
    /// characters: `base64` wraps its output at 76 columns, so a long
    /// secret encoded by a script can come in two lines.
    wrapped: Compiled<Regex>,
}

/// A pattern compiled from the secrets when first used, not at each
/// [`Redactor::add`] (a run adds every withheld value one by one before
/// it masks anything); shared with the clones made since the last add.
/// `None` inside when there is nothing to match, or the pattern is too
/// large for one automaton.
type Compiled<T> = Arc<OnceLock<Option<T>>>;

impl Redactor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a secret. Short or empty values are ignored (see `MIN_SECRET_LEN`).
    pub fn add(&mut self, secret: impl Into<String>) {
        let secret = secret.into();
        let secret = secret.trim().to_owned();
        if secret.len() < MIN_SECRET_LEN || self.secrets.contains(&secret) {
            return;
        }
        let escaped = serde_json::to_string(&secret).unwrap_or_default();
        let escaped = escaped.trim_matches('"').to_owned();
        for form in super::secrets::base64_forms(&secret, MIN_BASE64_LEN) {
            self.forms.entry(form).or_insert(KIND_VALUE_BASE64);
        }
        self.forms.insert(escaped, KIND_VALUE);
        self.forms.insert(secret.clone(), KIND_VALUE);
        self.secrets.push(secret);
        self.matcher = Compiled::default();
        self.wrapped = Compiled::default();
    }

    /// Builds the matchers (this redactor's values and the credential
    /// shapes' literals) on a thread of their own, so that the first text
    /// masked finds them built, or waits only for the rest: a run's set-up
    /// goes on meanwhile (docs/performance.md). Masking is the same either
    /// way; a value added later builds its matcher again when first used.
    pub fn prepare_in_background(&self) {
        let redactor = self.clone();
        // Without a thread (none can be made) the first use builds them.
        let _ = std::thread::Builder::new()
            .name("ybs-redactor".to_owned())
            .spawn(move || {
                let _ = redactor.matcher();
                super::secrets::prepare();
            });
    }

    /// Every form, longest first, so a secret containing another is
    /// masked whole.
    fn sorted_forms(&self) -> Vec<&String> {
        let mut forms: Vec<&String> = self.forms.keys().collect();
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms
    }

    /// Every form as one automaton ([`Redactor::matcher`]'s field): the
    /// forms are plain strings, so a literal matcher with leftmost-first
    /// semantics over the forms longest first finds what an alternation
    /// of them would, and is built in a fraction of a regex's time (it is
    /// built before a run's first request: docs/performance.md). A
    /// contiguous NFA: quick to build for hundreds of forms, and quick
    /// enough to scan with.
    fn matcher(&self) -> Option<&AhoCorasick> {
        self.matcher
            .get_or_init(|| {
                let forms = self.sorted_forms();
                if forms.is_empty() {
                    return None;
                }
                // A set too large for one automaton falls back to plain
                // replacement (`masked_values`), never to no masking.
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostFirst)
                    .kind(Some(AhoCorasickKind::ContiguousNFA))
                    .build(forms)
                    .ok()
            })
            .as_ref()
    }

    /// The base64 forms with line breaks allowed ([`Redactor::wrapped`]'s
    /// field).
    fn wrapped(&self) -> Option<&Regex> {
        self.wrapped
            .get_or_init(|| {
                let wrapped = self
                    .sorted_forms()
                    .into_iter()
                    .filter(|form| self.forms.get(form.as_str()) == Some(&KIND_VALUE_BASE64))
                    .map(|form| {
                        form.chars()
                            .map(|c| regex::escape(&c.to_string()))
                            .collect::<Vec<_>>()
                            .join("(?:\\r?\\n)?")
                    })
                    .collect::<Vec<_>>()
                    .join("|");
                (!wrapped.is_empty())
                    .then(|| Regex::new(&wrapped).ok())
                    .flatten()
            })
            .as_ref()
    }

    /// Whether `text` may hold a base64 form split by line breaks: it
    /// does once they are taken out. Cheap next to building `wrapped`
    /// (an automaton with an optional line break between any two
    /// characters of every form), which most runs then never need.
    fn may_hold_wrapped(&self, text: &str) -> bool {
        let joined: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        self.forms
            .iter()
            .any(|(form, kind)| *kind == KIND_VALUE_BASE64 && joined.contains(form.as_str()))
    }

    /// Masks the base64 forms that a line break splits (see `wrapped`).
    fn masked_wrapped(&self, text: String, counts: &mut Redactions) -> String {
        if !text.contains('\n') || !self.may_hold_wrapped(&text) {
            return text;
        }
        let Some(wrapped) = self.wrapped() else {
            return text;
        };
        if !wrapped.is_match(&text) {
            return text;
        }
        let mut found = 0;
        let out = wrapped
            .replace_all(&text, |_: &regex::Captures<'_>| {
                found += 1;
                MASK
            })
            .into_owned();
        *counts.entry(KIND_VALUE_BASE64.to_owned()).or_default() += found;
        out
    }

    /// Masks every spelling of every known value: one pass of the
    /// alternation, or form by form, longest first, without it.
    fn masked_values(&self, text: &str, counts: &mut Redactions) -> String {
        let mut out = String::new();
        match self.matcher() {
            Some(matcher) => {
                if !matcher.is_match(text) {
                    return text.to_owned();
                }
                let mut last = 0;
                for found in matcher.find_iter(text) {
                    let kind = self
                        .forms
                        .get(&text[found.range()])
                        .copied()
                        .unwrap_or(KIND_VALUE);
                    *counts.entry(kind.to_owned()).or_default() += 1;
                    out.push_str(&text[last..found.start()]);
                    out.push_str(MASK);
                    last = found.end();
                }
                out.push_str(&text[last..]);
                out
            }
            None => {
                let mut forms: Vec<(&String, &&'static str)> = self.forms.iter().collect();
                forms.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(b.0)));
                out = text.to_owned();
                for (form, kind) in forms {
                    let found = out.matches(form.as_str()).count();
                    if found > 0 {
                        *counts.entry((*kind).to_owned()).or_default() += found as u64;
                        out = out.replace(form.as_str(), MASK);
                    }
                }
                out
            }
        }
    }

    /// Whether a known secret value spans lines (so a line-by-line view
    /// could show it in pieces no mask catches).
    pub fn has_multiline_secret(&self) -> bool {
        self.secrets.iter().any(|secret| secret.contains('\n'))
    }

    /// Whether no secret value is known (credential shapes are masked
    /// regardless).
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Masks every secret in `text`.
    pub fn redact(&self, text: &str) -> String {
        self.redact_counting(text, &mut Redactions::new())
    }

    /// Masks every secret in `text` and adds what it masked to `counts`.
    ///
    /// A text that is JSON (a tool's result is) is masked on its strings,
    /// before they are escaped (`masked_json`); the text pass then runs on
    /// what comes out, so nothing is masked less than before.
    pub fn redact_counting(&self, text: &str, counts: &mut Redactions) -> String {
        let structural = self.masked_json(text, counts);
        let text = structural.as_deref().unwrap_or(text);
        let text = self.masked_values(text, counts);
        let text = self.masked_wrapped(text, counts);
        let found = find_credentials(&text);
        if found.is_empty() {
            return text;
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for hit in found {
            *counts.entry(hit.kind.to_owned()).or_default() += 1;
            out.push_str(&text[last..hit.start]);
            out.push_str(MASK);
            last = hit.end;
        }
        out.push_str(&text[last..]);
        out
    }

    /// A JSON object or array in `text`, masked string by string and
    /// written again (pretty when it came in lines), or `None` when `text`
    /// is not JSON or nothing in it was masked (then it stays as it was,
    /// byte for byte). Masking the escaped text instead would let through
    /// a credential at the start of a line: its word boundary would see
    /// the `n` of `\n`.
    fn masked_json(&self, text: &str, counts: &mut Redactions) -> Option<String> {
        let trimmed = text.trim();
        if !(trimmed.starts_with('{') && trimmed.ends_with('}')
            || trimmed.starts_with('[') && trimmed.ends_with(']'))
        {
            return None;
        }
        let mut value: Value = serde_json::from_str(trimmed).ok()?;
        let mut found = Redactions::new();
        self.redact_value_counting(&mut value, &mut found);
        if found.is_empty() {
            return None;
        }
        let written = if trimmed.contains('\n') {
            serde_json::to_string_pretty(&value)
        } else {
            serde_json::to_string(&value)
        }
        .ok()?;
        for (kind, count) in found {
            *counts.entry(kind).or_default() += count;
        }
        let start = text.len() - text.trim_start().len();
        let end = text.trim_end().len();
        Some(format!("{}{written}{}", &text[..start], &text[end..]))
    }

    /// Masks a secret that two outputs of one program show in two parts,
    /// the first part ending one and the second beginning the other
    /// (a child's stdout and stderr, in either order). Each part becomes
    /// `[REDACTED]`; what is left of each output is masked on its own
    /// afterwards, by `redact_counting`.
    pub fn redact_across(&self, first: &mut String, second: &mut String, counts: &mut Redactions) {
        self.mask_seam(first, second, counts);
        self.mask_seam(second, first, counts);
    }

    /// Masks the secret that runs from the end of `head` into the start of
    /// `rest`, if there is one.
    fn mask_seam(&self, head: &mut String, rest: &mut String, counts: &mut Redactions) {
        if head.is_empty() || rest.is_empty() {
            return;
        }
        // Only the text near the seam can hold a secret that crosses it
        // (a private key runs longer; its block is masked to the end of
        // `head`, and `rest` up to its end marker, below).
        let from = floor_boundary(head, head.len().saturating_sub(SEAM_WINDOW));
        let to = floor_boundary(rest, SEAM_WINDOW.min(rest.len()));
        let seam = head.len() - from;
        let joined = format!("{}{}", &head[from..], &rest[..to]);
        let mut spans: Vec<(usize, usize, &'static str)> = find_credentials(&joined)
            .into_iter()
            .map(|hit| (hit.start, hit.end, hit.kind))
            .collect();
        if let Some(matcher) = self.matcher() {
            spans.extend(matcher.find_iter(&joined).map(|found| {
                let kind = self
                    .forms
                    .get(&joined[found.range()])
                    .copied()
                    .unwrap_or(KIND_VALUE);
                (found.start(), found.end(), kind)
            }));
        }
        let crossing = spans
            .iter()
            .filter(|(start, end, _)| *start < seam && *end > seam)
            .max_by_key(|(start, end, _)| (end - start, std::cmp::Reverse(*start)))
            .copied();
        let (start, end, kind) = match crossing {
            Some(span) => span,
            // A private key block that `head` opens and `rest` goes on:
            // `rest` up to its end marker is the key.
            None if super::secrets::opens_private_key(head) => {
                let end = super::secrets::private_key_end(rest).unwrap_or(rest.len());
                *counts.entry("private_key".to_owned()).or_default() += 1;
                rest.replace_range(..end, MASK);
                return;
            }
            None => return,
        };
        *counts.entry(kind.to_owned()).or_default() += 1;
        let end = (end - seam).min(rest.len());
        head.replace_range(from + start.., MASK);
        rest.replace_range(..end, MASK);
    }

    /// Masks every secret in every string of a JSON value, keys included.
    pub fn redact_value(&self, value: &mut Value) {
        self.redact_value_counting(value, &mut Redactions::new());
    }

    /// As `redact_value`, adding what it masked to `counts`.
    pub fn redact_value_counting(&self, value: &mut Value, counts: &mut Redactions) {
        match value {
            Value::String(text) => *text = self.redact_counting(text, counts),
            Value::Array(items) => items
                .iter_mut()
                .for_each(|item| self.redact_value_counting(item, counts)),
            Value::Object(map) => {
                // A program's two outputs (`run_shell`, an external tool):
                // a secret may begin in one and end in the other.
                if let Some((Value::String(mut stdout), Value::String(mut stderr))) =
                    map.get("stdout").cloned().zip(map.get("stderr").cloned())
                {
                    self.redact_across(&mut stdout, &mut stderr, counts);
                    map.insert("stdout".to_owned(), Value::String(stdout));
                    map.insert("stderr".to_owned(), Value::String(stderr));
                }
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.redact_value_counting(&mut item, counts);
                    map.insert(self.redact_counting(&key, counts), item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_every_occurrence_and_json_escaped_form() {
        let mut redactor = Redactor::new();
        redactor.add("sk-canary\"42");
        redactor.add("ab");
        assert_eq!(redactor.redact("key=sk-canary\"42 ab"), "key=[REDACTED] ab");
        let json = serde_json::to_string(&serde_json::json!({"k": "sk-canary\"42"})).unwrap();
        assert!(!redactor.redact(&json).contains("canary"));
        let mut value = serde_json::json!({"a": ["x sk-canary\"42 y"], "sk-canary\"42": 1});
        redactor.redact_value(&mut value);
        assert!(!value.to_string().contains("canary"));
    }

    #[test]
    fn masks_base64_of_known_values_wrapped_at_76_columns() {
        // An Anthropic-length key: its base64 is over 76 characters, so
        // `base64` (which wraps at 76) splits it, wherever it starts.
        let key = format!("sk-ant-api03-{}", "Zq7xK2mB9vR4tW1y".repeat(6));
        let mut redactor = Redactor::new();
        redactor.add(key.clone());
        for prefix in ["", "k", "ke", "KEY=", "ANTHROPIC_API_KEY="] {
            let encoded =
                crate::core::secrets::encode_base64(format!("{prefix}{key}\n").as_bytes(), false);
            let lines: Vec<String> = encoded
                .as_bytes()
                .chunks(76)
                .map(|chunk| String::from_utf8(chunk.to_vec()).unwrap())
                .collect();
            assert!(lines.len() > 1, "{encoded}");
            let output = format!("before\n{}\nafter", lines.join("\n"));
            let mut counts = Redactions::new();
            let masked = redactor.redact_counting(&output, &mut counts);
            assert!(masked.contains(MASK), "{prefix:?}: {masked}");
            assert!(counts.contains_key(KIND_VALUE_BASE64), "{counts:?}");
            // No run of the key's encoding long enough to decode a
            // meaningful part of it survives.
            for line in masked.lines() {
                assert!(line.len() < 40 || line == "before", "{prefix:?}: {masked}");
            }
        }
        // Unrelated wrapped base64 is left alone.
        let other = crate::core::secrets::encode_base64(&[7u8; 120], false);
        let wrapped_other = format!("{}\n{}", &other[..76], &other[76..]);
        assert_eq!(redactor.redact(&wrapped_other), wrapped_other);
    }

    #[test]
    fn masks_base64_of_known_values_at_every_offset() {
        let mut redactor = Redactor::new();
        redactor.add("canary-value-4242");
        for prefix in ["", "u", "us", "user:"] {
            for url_safe in [false, true] {
                let plain = format!("{prefix}canary-value-4242");
                let encoded = crate::core::secrets::encode_base64(plain.as_bytes(), url_safe);
                let mut counts = Redactions::new();
                let out = redactor.redact_counting(&format!("x {encoded} y"), &mut counts);
                assert!(out.contains(MASK), "{out}");
                assert!(
                    !out.contains(encoded[encoded.len() - 8..].trim_end_matches('=')),
                    "{out}"
                );
                assert_eq!(counts.get(KIND_VALUE_BASE64), Some(&1), "{out}");
            }
        }
    }

    #[test]
    fn masks_credential_shapes_and_counts_them() {
        let redactor = Redactor::new();
        let token = "ghp_aB3dE5gH7jK9mN1pQ3rS5tU7vW9xY1zA2bC4";
        let mut counts = Redactions::new();
        let out = redactor.redact_counting(&format!("a {token} b {token}"), &mut counts);
        assert_eq!(out, "a [REDACTED] b [REDACTED]");
        assert_eq!(counts.get("github_token"), Some(&2));
        let mut value = serde_json::json!({"content": format!("[http]\n\textraheader = AUTHORIZATION: basic {}\n", "eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==")});
        let mut counts = Redactions::new();
        redactor.redact_value_counting(&mut value, &mut counts);
        assert!(!value.to_string().contains("eC1hY2Nl"), "{value}");
        assert_eq!(counts.get("basic_auth_header"), Some(&1));
        assert_eq!(redactor.redact("plain text"), "plain text");
    }

    #[test]
    fn without_the_alternation_values_are_still_masked() {
        let mut redactor = Redactor::new();
        redactor.add("canary-value-4242");
        redactor.add("canary-value");
        redactor.matcher = Arc::new(OnceLock::from(None));
        let encoded = crate::core::secrets::encode_base64(b"canary-value-4242", false);
        let mut counts = Redactions::new();
        let out =
            redactor.redact_counting(&format!("a canary-value-4242 b {encoded}"), &mut counts);
        assert_eq!(out, "a [REDACTED] b [REDACTED]");
        assert_eq!(counts.get(KIND_VALUE), Some(&1));
        assert_eq!(counts.get(KIND_VALUE_BASE64), Some(&1));
    }

    /// Issue 21, item 1: every credential shape × every position × every
    /// form a sink writes: the raw output, a tool's JSON result (compact,
    /// pretty, and as `read_file` numbers its lines), that result inside
    /// an event or a message (JSON in JSON, as the transcript, the events
    /// and a cassette hold it).
    mod properties {
        use proptest::prelude::*;
        use serde_json::json;

        use super::super::testing::{assert_masked, credential, needles, place, position};
        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn no_credential_survives_in_any_form(
                credential in credential(),
                position in position(),
                cut in 1usize..200,
            ) {
                let redactor = credential.redactor();
                let (mut stdout, mut stderr) = place(&credential, position, cut);
                let needles = needles(&credential, position, cut);

                // The outputs as a sink gets them: whole, after the
                // child's chunks were joined; a split between the two
                // streams is masked across them.
                let (mut out, mut err) = (stdout.clone(), stderr.clone());
                let mut counts = Redactions::new();
                redactor.redact_across(&mut out, &mut err, &mut counts);
                let raw = format!(
                    "{}{}",
                    redactor.redact_counting(&out, &mut counts),
                    redactor.redact_counting(&err, &mut counts)
                );
                assert_masked(&needles, "the raw output", &raw);
                prop_assert!(
                    counts.contains_key(credential.kind),
                    "{} not counted: {counts:?} {raw}",
                    credential.kind
                );

                // A tool's result, as the agent masks it before the model
                // and every output see it.
                let result = json!({"exit_code": 0, "stdout": stdout, "stderr": stderr, "timed_out": false});
                let compact = redactor.redact(&result.to_string());
                assert_masked(&needles, "a compact tool result", &compact);
                let pretty = redactor.redact(&serde_json::to_string_pretty(&result).unwrap_or_default());
                assert_masked(&needles, "a pretty tool result", &pretty);
                let masked_result: Value = serde_json::from_str(&compact).unwrap_or_default();
                prop_assert_eq!(&masked_result["exit_code"], &json!(0));
                if !position.is_split() {
                    let numbered: String = stdout
                        .split('\n')
                        .enumerate()
                        .map(|(number, line)| format!("{:>3}\t{line}\n", number + 1))
                        .collect();
                    let read = json!({"path": "f.txt", "content": numbered, "total_lines": 9});
                    let read = redactor.redact(&read.to_string());
                    assert_masked(&needles, "a read_file result", &read);
                }

                // The result inside an event or message (a string of
                // JSON in JSON), masked on structure: compact
                // (events.jsonl, a request body) and pretty (the
                // transcript, a cassette, state.json).
                let mut event = json!({
                    "type": "tool.completed",
                    "output": result.to_string(),
                    "message": {"role": "tool", "content": [json!({"text": result.to_string()}).to_string()]},
                });
                redactor.redact_value(&mut event);
                assert_masked(&needles, "an event", &event.to_string());
                assert_masked(&needles, "a pretty event", &serde_json::to_string_pretty(&event).unwrap_or_default());

                // What the streams hold is left alone but for the masks.
                redactor.redact_across(&mut stdout, &mut stderr, &mut Redactions::new());
                prop_assert!(stdout.contains("finished") || stderr.contains("finished"));
            }
        }

        #[test]
        fn a_token_after_an_escape_or_a_colour_is_masked_but_not_inside_a_word() {
            let token = "ghp_Zq8Tw2Lm5Rx9Vb3Nc7Kd1Hf6Jg4Ps0Ya2Ue8X";
            for before in [
                "",
                "\\n",
                "\\t",
                "\\\\n",
                "\\\\\\\\t",
                "a\\r",
                "\\u0009",
                "\\x1b[32m",
                "\\u001b[1;32m",
                "\x1b[32m",
                "\\033[0m",
                "=",
                "\"",
            ] {
                let text = format!("{before}{token}");
                assert!(!redactor_masks_nothing(&text), "{text:?}");
            }
            // A word that runs into the token, or a colour code's tail
            // without its escape, is not a boundary.
            for before in ["x", "token", "n", "[32m"] {
                let text = format!("{before}{token}");
                assert!(redactor_masks_nothing(&text), "{text:?}");
            }
        }

        fn redactor_masks_nothing(text: &str) -> bool {
            Redactor::new().redact(text) == text
        }

        #[test]
        fn json_text_that_masks_nothing_stays_byte_for_byte() {
            let redactor = Redactor::new();
            for text in [
                "{\"b\": 1,  \"a\": [1.50, \"x\"]}",
                "  [1, 2]\n",
                "{not json}",
            ] {
                assert_eq!(redactor.redact(text), text);
            }
        }

        #[test]
        fn a_secret_split_between_stdout_and_stderr_is_masked_in_both() {
            let token = "AKIAQ3EXAMPLE7ZX2MPL";
            let mut stdout = format!("id: {}", &token[..9]);
            let mut stderr = format!("{}\nnext\n", &token[9..]);
            let mut counts = Redactions::new();
            Redactor::new().redact_across(&mut stdout, &mut stderr, &mut counts);
            assert_eq!(stdout, "id: [REDACTED]");
            assert_eq!(stderr, "[REDACTED]\nnext\n");
            assert_eq!(counts.get("aws_access_key"), Some(&1));
            // Apart, each is left alone.
            let mut first = "id: AKIA".to_owned();
            let mut second = "not a key".to_owned();
            Redactor::new().redact_across(&mut first, &mut second, &mut counts);
            assert_eq!((first.as_str(), second.as_str()), ("id: AKIA", "not a key"));
            // Long outputs: only the text near the seam is looked at, and
            // a private key longer than that is still masked in both.
            let mut stdout = format!("{}\n{}", "a ".repeat(20_000), &token[..9]);
            let mut stderr = format!("{}\n{}", &token[9..], "b ".repeat(20_000));
            Redactor::new().redact_across(&mut stdout, &mut stderr, &mut counts);
            assert!(stdout.ends_with("\n[REDACTED]") && stderr.starts_with("[REDACTED]\n"));
            let body = "MIIEowIBAAKCAQEA0Zx7\n".repeat(2_000);
            let mut stdout = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}");
            let mut stderr = format!("{body}-----END RSA PRIVATE KEY-----\nafter\n");
            let mut counts = Redactions::new();
            let redactor = Redactor::new();
            redactor.redact_across(&mut stdout, &mut stderr, &mut counts);
            let stdout = redactor.redact_counting(&stdout, &mut counts);
            assert!(
                !stdout.contains("MIIE") && !stderr.contains("MIIE"),
                "{stderr}"
            );
            assert_eq!(stderr, "[REDACTED]\nafter\n");
        }
    }
}
