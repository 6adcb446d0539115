//! The process environment as ybs read it once, at the start: a plain
//! value handed down to every module that needs a variable, so nothing
//! below `config` reads the process environment itself
//! (`config::process_environ` is the one reader; docs/architecture.md).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// A snapshot of environment variables, in the order they were read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environ {
    vars: Vec<(OsString, OsString)>,
}

impl Environ {
    /// The variables given (the first of a repeated name wins, as for a
    /// lookup in the process environment).
    pub fn new(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Self {
        let mut out: Vec<(OsString, OsString)> = Vec::new();
        for (name, value) in vars {
            if !out.iter().any(|(seen, _)| *seen == name) {
                out.push((name, value));
            }
        }
        Self { vars: out }
    }

    /// From UTF-8 pairs (tests and fixed environments).
    pub fn from_pairs<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self::new(
            vars.into_iter()
                .map(|(name, value)| (OsString::from(name), OsString::from(value))),
        )
    }

    /// A variable's value, as `std::env::var(name).ok()`: `None` when it is
    /// unset or not UTF-8.
    pub fn var(&self, name: &str) -> Option<String> {
        self.var_os(name)?.to_str().map(str::to_owned)
    }

    /// A variable's value, whatever its encoding.
    pub fn var_os(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value.as_os_str())
    }

    /// Every variable whose name and value are UTF-8.
    pub fn utf8_vars(&self) -> impl Iterator<Item = (String, String)> + '_ {
        self.vars.iter().filter_map(|(name, value)| {
            Some((name.to_str()?.to_owned(), value.to_str()?.to_owned()))
        })
    }

    /// The directory for temporary files, as `std::env::temp_dir` finds it
    /// on Unix: `$TMPDIR`, else `/tmp`.
    pub fn temp_dir(&self) -> PathBuf {
        self.var_os("TMPDIR")
            .filter(|dir| !dir.is_empty())
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from)
    }

    /// `$HOME`, when set.
    pub fn home(&self) -> Option<PathBuf> {
        self.var_os("HOME").map(PathBuf::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_like_the_process_environment() {
        let env = Environ::from_pairs([("A", "1"), ("B", "two"), ("A", "shadowed")]);
        assert_eq!(env.var("A").as_deref(), Some("1"));
        assert_eq!(env.var("C"), None);
        assert_eq!(env.utf8_vars().count(), 2);
        assert_eq!(env.temp_dir(), PathBuf::from("/tmp"));
        let env = Environ::from_pairs([("TMPDIR", "/var/tmp"), ("HOME", "/h")]);
        assert_eq!(env.temp_dir(), PathBuf::from("/var/tmp"));
        assert_eq!(env.home(), Some(PathBuf::from("/h")));
    }

    #[test]
    fn a_value_that_is_not_utf8_is_kept_but_not_a_string() {
        use std::os::unix::ffi::OsStringExt;
        let env = Environ::new([(OsString::from("X"), OsString::from_vec(vec![0xff]))]);
        assert!(env.var_os("X").is_some());
        assert_eq!(env.var("X"), None);
        assert_eq!(env.utf8_vars().count(), 0);
    }
}
