//! `YBS_*` environment variables: above config files, below flags.
//!
//! An empty variable counts as unset (CI systems often export `FOO=` for
//! "no value"). A bad value is an error naming the variable.

use std::path::PathBuf;

use crate::core::decode::duration::parse_duration;
use crate::task::PROVIDERS;

use super::layer::ConfigLayer;
use super::settings::GitAuthor;

/// The variables ybs reads, with what each sets.
pub const VARIABLES: &[(&str, &str)] = &[
    ("YBS_CONFIG", "a config file read last, like --config"),
    ("YBS_PROVIDER", "the provider, like --provider"),
    ("YBS_MODEL", "the model, like --model"),
    ("YBS_ENDPOINT", "the provider's base URL, like --endpoint"),
    ("YBS_TEMPERATURE", "the sampling temperature"),
    ("YBS_MAX_ITERATIONS", "every task's iteration limit"),
    ("YBS_TIMEOUT", "every task's time limit, like 15m"),
    (
        "YBS_RETRY_ATTEMPTS",
        "provider retries after the first attempt",
    ),
    ("YBS_OUT", "the output directory, like --out"),
    ("YBS_CASSETTE", "the replay cassette, like --cassette"),
    (
        "YBS_GIT_AUTHOR",
        "the author of ybs commits, as `Name <email>`",
    ),
];

/// A bad `YBS_*` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError {
    pub name: String,
    pub value: String,
    pub expected: String,
    pub hint: Option<String>,
}

/// Reads the `YBS_*` variables into a layer.
pub fn env_layer(env: &dyn Fn(&str) -> Option<String>) -> Result<ConfigLayer, EnvError> {
    let get = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    let mut layer = ConfigLayer::default();
    if let Some(provider) = get("YBS_PROVIDER") {
        if !PROVIDERS.contains(&provider.as_str()) {
            let expected = format!("one of {}", PROVIDERS.join(", "));
            return Err(error("YBS_PROVIDER", &provider, &expected));
        }
        layer.llm.provider = Some(provider);
    }
    layer.llm.model = get("YBS_MODEL");
    if let Some(endpoint) = get("YBS_ENDPOINT") {
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
            return Err(error(
                "YBS_ENDPOINT",
                &endpoint,
                "a URL starting with http:// or https://",
            ));
        }
        layer.llm.endpoint = Some(endpoint);
    }
    if let Some(text) = get("YBS_TEMPERATURE") {
        let temperature = text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t >= 0.0);
        layer.llm.temperature =
            Some(temperature.ok_or_else(|| {
                error("YBS_TEMPERATURE", &text, "a number of 0 or more, like 0.2")
            })?);
    }
    if let Some(text) = get("YBS_MAX_ITERATIONS") {
        let max = text.trim().parse::<u32>().ok().filter(|n| *n > 0);
        layer.agent.max_iterations =
            Some(max.ok_or_else(|| {
                error("YBS_MAX_ITERATIONS", &text, "a whole number of 1 or more")
            })?);
    }
    if let Some(text) = get("YBS_TIMEOUT") {
        let timeout = parse_duration(&text).filter(|d| !d.is_zero());
        layer.run.timeout = Some(
            timeout.ok_or_else(|| error("YBS_TIMEOUT", &text, "a duration like 15m, 30s or 90"))?,
        );
    }
    if let Some(text) = get("YBS_RETRY_ATTEMPTS") {
        let attempts = text.trim().parse::<u32>().ok();
        layer.agent.retry_attempts = Some(
            attempts
                .ok_or_else(|| error("YBS_RETRY_ATTEMPTS", &text, "a whole number (0 or more)"))?,
        );
    }
    layer.run.out = get("YBS_OUT").map(PathBuf::from);
    layer.run.cassette = get("YBS_CASSETTE").map(PathBuf::from);
    if let Some(text) = get("YBS_GIT_AUTHOR") {
        let author = GitAuthor::parse(&text).ok_or_else(|| EnvError {
            hint: Some("for example YBS_GIT_AUTHOR=\"CI Bot <ci@example.com>\"".to_owned()),
            ..error("YBS_GIT_AUTHOR", &text, "`Name <email>`")
        })?;
        layer.git.author = Some(author);
    }
    Ok(layer)
}

/// `YBS_CONFIG`, when set.
pub fn config_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    env("YBS_CONFIG")
        .filter(|value| !value.trim().is_empty())
        .map(PathBuf::from)
}

fn error(name: &str, value: &str, expected: &str) -> EnvError {
    EnvError {
        name: name.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
        hint: Some(format!("set {name} to {expected}, or unset it")),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn reads_every_variable() {
        let env = env_of(&[
            ("YBS_PROVIDER", "openai"),
            ("YBS_MODEL", "gpt-4.1-mini"),
            ("YBS_ENDPOINT", "http://localhost:11434/v1"),
            ("YBS_TEMPERATURE", "0.2"),
            ("YBS_MAX_ITERATIONS", "7"),
            ("YBS_TIMEOUT", "1h30m"),
            ("YBS_RETRY_ATTEMPTS", "0"),
            ("YBS_OUT", "out"),
            ("YBS_CASSETTE", "c.json"),
            ("YBS_GIT_AUTHOR", "CI <ci@example.com>"),
        ]);
        let layer = env_layer(&env).unwrap();
        assert_eq!(layer.llm.provider.as_deref(), Some("openai"));
        assert_eq!(layer.llm.model.as_deref(), Some("gpt-4.1-mini"));
        assert_eq!(layer.llm.temperature, Some(0.2));
        assert_eq!(layer.agent.max_iterations, Some(7));
        assert_eq!(layer.run.timeout, Some(Duration::from_secs(5400)));
        assert_eq!(layer.agent.retry_attempts, Some(0));
        assert_eq!(layer.run.out, Some(PathBuf::from("out")));
        assert_eq!(layer.git.author.unwrap().email, "ci@example.com");
    }

    #[test]
    fn empty_is_unset_and_bad_values_name_the_variable() {
        assert_eq!(
            env_layer(&env_of(&[("YBS_MODEL", "")])).unwrap(),
            ConfigLayer::default()
        );
        let bad = env_layer(&env_of(&[("YBS_MAX_ITERATIONS", "lots")])).unwrap_err();
        assert_eq!(bad.name, "YBS_MAX_ITERATIONS");
        assert_eq!(bad.value, "lots");
        let bad = env_layer(&env_of(&[("YBS_GIT_AUTHOR", "ci@example.com")])).unwrap_err();
        assert_eq!(bad.name, "YBS_GIT_AUTHOR");
        assert!(bad.hint.is_some());
        assert_eq!(
            env_layer(&env_of(&[("YBS_PROVIDER", "opneai")]))
                .unwrap_err()
                .name,
            "YBS_PROVIDER"
        );
        assert_eq!(
            env_layer(&env_of(&[("YBS_TIMEOUT", "0")]))
                .unwrap_err()
                .name,
            "YBS_TIMEOUT"
        );
    }
}
