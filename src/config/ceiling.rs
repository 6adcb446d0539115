//! Operator settings are ceilings (docs/security.md S5).
//!
//! For a key that bounds trust or spend, a value from the repository
//! (`./.ybs.json`, a task file or its `defaults:`) applies only when it is
//! narrower than the operator's (flags, `YBS_*`, config files outside the
//! repository); a wider one is an error naming where it was written, the
//! key, and the operator's value. Where the operator set nothing, the
//! repository's value applies (the built-in default is not a ceiling).

use std::path::Path;
use std::time::Duration;

use crate::core::decode::yaml::Node;
use crate::core::span::Span;
use crate::task::Diagnostic;

use super::layer::ConfigLayer;

/// A value that can be narrower or wider than another: smaller is
/// narrower; for switches, `false` (off) is narrower than `true`.
pub trait Bound: Copy + PartialOrd {
    /// The value as a message shows it.
    fn show(self) -> String;
}

macro_rules! bound_by_display {
    ($($ty:ty),*) => {$(
        impl Bound for $ty {
            fn show(self) -> String {
                self.to_string()
            }
        }
    )*};
}

bound_by_display!(u32, u64, usize, f64, bool);

impl Bound for Duration {
    fn show(self) -> String {
        if self.subsec_millis() == 0 {
            format!("{}s", self.as_secs())
        } else {
            format!("{}ms", self.as_millis())
        }
    }
}

/// The operator's value of a key and where it was set.
#[derive(Debug, Clone, PartialEq)]
pub struct Ceiling<T> {
    pub value: T,
    /// `--config ops.json`, `a YBS_* variable`, `a command-line flag`.
    pub source: String,
}

/// The narrower of two values, either of which may be unset.
pub fn narrower<T: Bound>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b < a { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// The operator's layers, highest precedence first, each with how
/// messages name it.
pub struct OperatorLayers<'a> {
    pub layers: Vec<(&'a ConfigLayer, String)>,
}

impl OperatorLayers<'_> {
    /// The operator's value of a key: the first layer that sets it.
    pub fn ceiling<T>(&self, get: impl Fn(&ConfigLayer) -> Option<T>) -> Option<Ceiling<T>> {
        self.layers.iter().find_map(|(layer, source)| {
            get(layer).map(|value| Ceiling {
                value,
                source: source.clone(),
            })
        })
    }
}

/// The repository's `./.ybs.json`: its layer, its tree (for positions)
/// and how messages name it.
pub struct RepositoryConfig<'a> {
    pub layer: &'a ConfigLayer,
    pub root: &'a Node,
    pub path: &'a Path,
}

impl RepositoryConfig<'_> {
    /// Where `key` (`agent.max_iterations`) is written.
    fn span(&self, key: &str) -> Span {
        let mut node = self.root;
        for part in key.split('.') {
            match node.get(part) {
                Some(next) => node = next,
                None => break,
            }
        }
        node.span
    }
}

/// Applies one ceiling key to the merged layer: the narrower of the
/// operator's and the repository's value; a wider repository value is a
/// diagnostic.
pub fn apply<T: Bound>(
    merged: &mut ConfigLayer,
    operator: &OperatorLayers<'_>,
    repository: Option<&RepositoryConfig<'_>>,
    key: &str,
    get: impl Fn(&ConfigLayer) -> Option<T>,
    set: impl Fn(&mut ConfigLayer, Option<T>),
    diagnostics: &mut Vec<Diagnostic>,
) {
    let ceiling = operator.ceiling(&get);
    let Some(repository) = repository else {
        return;
    };
    let Some(value) = get(repository.layer) else {
        return;
    };
    if let Some(ceiling) = &ceiling
        && value > ceiling.value
    {
        diagnostics.push(wider(
            repository.path,
            repository.span(key),
            &format!("`{key}: {}` in the repository's config", value.show()),
            ceiling,
        ));
    }
    set(merged, narrower(ceiling.map(|c| c.value), Some(value)));
}

/// "`what` is wider than the operator's VALUE (set in SOURCE)".
pub fn wider<T: Bound>(path: &Path, span: Span, what: &str, ceiling: &Ceiling<T>) -> Diagnostic {
    let shown = ceiling.value.show();
    let hint = if shown == "true" || shown == "false" {
        "the repository may turn it off, never on: remove it".to_owned()
    } else {
        format!("the repository may only narrow it: use {shown} or less, or remove it")
    };
    Diagnostic::new(
        path,
        span,
        format!(
            "{what} is wider than the operator's {shown} (set by {})",
            ceiling.source
        ),
    )
    .with_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrower_takes_the_smaller_or_the_one_set() {
        assert_eq!(narrower(Some(3_u32), Some(10)), Some(3));
        assert_eq!(narrower(Some(30_u32), Some(10)), Some(10));
        assert_eq!(narrower(None, Some(10_u32)), Some(10));
        assert_eq!(narrower::<u32>(None, None), None);
        assert_eq!(narrower(Some(true), Some(false)), Some(false));
        assert_eq!(narrower(Some(false), Some(true)), Some(false));
        assert_eq!(Duration::from_secs(3).show(), "3s");
        assert_eq!(Duration::from_millis(1500).show(), "1500ms");
    }
}
