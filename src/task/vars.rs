//! `{{name}}` placeholders (docs/task-files.md): substituted in `prompt`, `system`,
//! `workdir` and the checks' `name` and `run`.
//!
//! Only `{{ name }}` where `name` is a variable name (letters, digits, `_`
//! and `-`, not starting with a digit or `-`; spaces inside the braces are
//! allowed) is a placeholder. Anything else between `{{` and `}}`, such as a
//! Go or Jinja template in a prompt (`{{ .Name }}`, `{{#each}}`), is left
//! as written.

use std::collections::BTreeMap;

/// True if and only if `name` can be used as a placeholder.
pub fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

/// Replaces every placeholder by its value. On failure, returns the names
/// of the unknown placeholders, in order of appearance, without repeats.
pub fn substitute(text: &str, vars: &BTreeMap<String, String>) -> Result<String, Vec<String>> {
    let mut out = String::with_capacity(text.len());
    let mut unknown: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let after_open = &rest[open + 2..];
        let Some(close) = after_open.find("}}") else {
            break;
        };
        let name = after_open[..close].trim();
        out.push_str(&rest[..open]);
        if is_var_name(name) {
            match vars.get(name) {
                Some(value) => out.push_str(value),
                None => {
                    if !unknown.iter().any(|seen| seen == name) {
                        unknown.push(name.to_owned());
                    }
                }
            }
        } else {
            out.push_str(&rest[open..open + 2 + close + 2]);
        }
        rest = &after_open[close + 2..];
    }
    out.push_str(rest);
    if unknown.is_empty() {
        Ok(out)
    } else {
        Err(unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn substitutes_with_or_without_spaces() {
        let vars = vars(&[("name", "parse_cfg"), ("dir", "src")]);
        assert_eq!(
            substitute("rename {{name}} in {{ dir }}/, {{name}} again", &vars).unwrap(),
            "rename parse_cfg in src/, parse_cfg again"
        );
    }

    #[test]
    fn leaves_non_placeholders_alone() {
        let vars = vars(&[]);
        for text in ["{{ .Name }}", "{{#each x}}", "a {{ b", "}} {{", "{{}}"] {
            assert_eq!(substitute(text, &vars).unwrap(), text);
        }
    }

    #[test]
    fn reports_unknown_names_once() {
        let vars = vars(&[("a", "1")]);
        assert_eq!(
            substitute("{{a}} {{b}} {{ c }} {{b}}", &vars),
            Err(vec!["b".to_owned(), "c".to_owned()])
        );
    }

    #[test]
    fn var_names() {
        assert!(is_var_name("snake_case-and-1"));
        assert!(is_var_name("_x"));
        assert!(!is_var_name("1x"));
        assert!(!is_var_name("a b"));
        assert!(!is_var_name(""));
    }
}
