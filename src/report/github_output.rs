//! `$GITHUB_OUTPUT`: a run's results as step outputs (docs/progress.md).
//! A value with a line break (a path can hold one) goes in the
//! `name<<DELIMITER` form, with a delimiter the value does not contain, so
//! no value can end its block early or set another output.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

/// The outputs file text for `outputs`, in order: `name=value`, or a
/// delimited block for a value with a line break. `seed` makes the
/// delimiter hard to guess (the run id).
pub fn github_output_text(outputs: &[(&str, String)], seed: &str) -> String {
    let mut text = String::new();
    for (name, value) in outputs {
        if !value.contains(['\n', '\r']) {
            text.push_str(&format!("{name}={value}\n"));
            continue;
        }
        let mut delimiter = format!("ybs_{seed}_EOF");
        while value.contains(&delimiter) || name.contains(&delimiter) {
            delimiter.push('_');
        }
        text.push_str(&format!("{name}<<{delimiter}\n{value}\n{delimiter}\n"));
    }
    text
}

/// Appends `text` to the runner's outputs file `path`, never through a
/// symbolic link.
pub fn append_github_output(path: &Path, text: &str) -> std::io::Result<()> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|error| std::io::Error::new(error.kind(), format!("{}: {error}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_delimited_blocks_no_value_can_end() {
        let text = github_output_text(
            &[
                ("status", "passed".to_owned()),
                ("out", "a\nybs_r1_EOF\nstatus=failed".to_owned()),
            ],
            "r1",
        );
        assert_eq!(
            text,
            "status=passed\n\
             out<<ybs_r1_EOF_\na\nybs_r1_EOF\nstatus=failed\nybs_r1_EOF_\n"
        );
    }

    #[test]
    fn appends_and_refuses_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("output");
        std::fs::write(&path, "before=1\n").unwrap();
        append_github_output(&path, "x<<D\n1\nD\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "before=1\nx<<D\n1\nD\n"
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(append_github_output(&link, "y<<D\n2\nD\n").is_err());
    }
}
