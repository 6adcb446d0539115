//! Secrets never reach an output (SECURITY S7). Every sink writes through a
//! `Redactor`, which replaces each known secret value with `[REDACTED]`.

use serde_json::Value;

/// The replacement text for a secret.
pub const MASK: &str = "[REDACTED]";

/// Values shorter than this are not treated as secrets: masking them would
/// garble ordinary text ("1", "true") and they protect nothing.
const MIN_SECRET_LEN: usize = 4;

/// A set of secret values to mask.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a secret. Short or empty values are ignored (see `MIN_SECRET_LEN`).
    pub fn add(&mut self, secret: impl Into<String>) {
        let secret = secret.into();
        let secret = secret.trim().to_owned();
        if secret.len() >= MIN_SECRET_LEN && !self.secrets.contains(&secret) {
            self.secrets.push(secret);
            // Longest first, so a secret containing another is masked whole.
            self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// Masks every secret in `text`, also in its JSON-escaped spelling.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
            let escaped = serde_json::to_string(secret).unwrap_or_default();
            let escaped = escaped.trim_matches('"');
            if escaped != secret && out.contains(escaped) {
                out = out.replace(escaped, MASK);
            }
        }
        out
    }

    /// Masks every secret in every string of a JSON value, keys included.
    pub fn redact_value(&self, value: &mut Value) {
        if self.secrets.is_empty() {
            return;
        }
        match value {
            Value::String(text) => *text = self.redact(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.redact_value(item)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.redact_value(&mut item);
                    map.insert(self.redact(&key), item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
}

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
}
