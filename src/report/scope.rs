//! What run-level reports (JUnit, summary) say about the run as a whole,
//! beside its tasks: whether it was one shard, or a merge of several.

use crate::core::Shard;

/// The run a report covers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunScope {
    /// `ybs run --shard K/N`: this run took slice K of N.
    pub shard: Option<Shard>,
    /// `--shard auto`: the engine and the variables the shard came from.
    pub shard_source: Option<crate::core::shard::ShardSource>,
    /// `ybs report merge`: the output directories merged, in order.
    pub merged_from: Vec<String>,
    /// `ybs report merge`: the shards those directories say they hold.
    pub merged_shards: Vec<Shard>,
    /// Problems a reader must see, e.g. a shard missing from a merge.
    pub warnings: Vec<String>,
    /// `--min-pass-rate R`: under `--repeat`, a task that passed some runs
    /// passes at a rate of at least R and fails below it.
    pub min_pass_rate: Option<f64>,
    /// Where the summary links a failing check's locations: the
    /// repository's files at the commit a GitHub workflow checked out,
    /// `https://github.com/OWNER/REPO/blob/SHA/` ([`Self::source_url`]).
    pub source_url: Option<String>,
}

impl RunScope {
    /// The scope of `ybs run --shard`.
    pub fn shard(shard: Option<Shard>) -> Self {
        Self {
            shard,
            ..Self::default()
        }
    }
}

impl RunScope {
    /// `$GITHUB_SERVER_URL/$GITHUB_REPOSITORY/blob/$GITHUB_SHA/` under
    /// GitHub Actions (`GITHUB_ACTIONS=true`) when the three are
    /// well-formed; `None` elsewhere.
    pub fn source_url(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        if env("GITHUB_ACTIONS").as_deref() != Some("true") {
            return None;
        }
        let server = env("GITHUB_SERVER_URL")?;
        let repository = env("GITHUB_REPOSITORY")?;
        let sha = env("GITHUB_SHA")?;
        let server = server.trim_end_matches('/');
        let plain = |text: &str| {
            !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let repository_ok = repository
            .split_once('/')
            .is_some_and(|(owner, name)| plain(owner) && plain(name));
        let server_ok = server
            .strip_prefix("https://")
            .is_some_and(|host| plain(&host.replace(['/', ':'], "")));
        let sha_ok = (7..=64).contains(&sha.len()) && sha.chars().all(|c| c.is_ascii_hexdigit());
        (repository_ok && server_ok && sha_ok).then(|| format!("{server}/{repository}/blob/{sha}/"))
    }
}

#[cfg(test)]
mod tests {
    use super::RunScope;

    #[test]
    fn source_links_only_under_github_actions_with_sane_values() {
        let env = |actions: &'static str, server: &'static str| {
            move |name: &str| match name {
                "GITHUB_ACTIONS" => Some(actions.to_owned()),
                "GITHUB_SERVER_URL" => Some(server.to_owned()),
                "GITHUB_REPOSITORY" => Some("octo/app".to_owned()),
                "GITHUB_SHA" => Some("0123456789abcdef0123456789abcdef01234567".to_owned()),
                _ => None,
            }
        };
        assert_eq!(
            RunScope::source_url(&env("true", "https://github.com")).as_deref(),
            Some("https://github.com/octo/app/blob/0123456789abcdef0123456789abcdef01234567/")
        );
        assert_eq!(
            RunScope::source_url(&env("false", "https://github.com")),
            None
        );
        assert_eq!(
            RunScope::source_url(&env("true", "javascript:alert(1)")),
            None
        );
        assert_eq!(
            RunScope::source_url(&env("true", "https://x.test/a b")),
            None
        );
    }
}
