//! What the docs say of the program's public contract is what it is
//! (issue 40, mismatches 9 to 11): the exit codes, the Action's outputs,
//! the formats of `ybs schema`.

use std::path::Path;

use crate::support::Ybs;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The exit codes ybs has (src/core/exit.rs).
const EXIT_CODES: &[&str] = &["0", "1", "2", "3", "4", "130"];

/// The codes of the rows `| `N` | …` of a Markdown table.
fn table_codes(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once("` |"))
        .map(|(code, _)| code.to_owned())
        .filter(|code| code.chars().all(|c| c.is_ascii_digit()) && !code.is_empty())
        .collect()
}

#[test]
fn every_exit_code_the_docs_list_exists_and_none_is_missing() {
    for file in ["README.md", "docs/cli.md"] {
        assert_eq!(table_codes(&read(file)), EXIT_CODES, "{file}");
    }
    let ci = read("docs/ci.md");
    let row = ci
        .lines()
        .find(|line| line.starts_with("| `exit-code` |"))
        .unwrap();
    assert!(row.contains("(0, 1, 2, 3, 4 or 130)"), "{row}");
    assert!(ci.contains("the codes stay `0`, `1`, `2`, `3`,\n`4` and `130`"));
    let action = read("action.yml");
    assert!(action.contains("(0, 1, 2, 3, 4 or 130)"));
    // The Action's script maps exactly those to words.
    let script = read(".github/action/run.sh");
    let (_, cases) = script.split_once("status_of() {").unwrap();
    let (cases, _) = cases.split_once("esac").unwrap();
    let mapped: Vec<&str> = cases
        .lines()
        .filter_map(|line| line.trim().split_once(") echo"))
        .map(|(code, _)| code)
        .filter(|code| *code != "*")
        .collect();
    assert_eq!(mapped, EXIT_CODES, "run.sh");
}

#[test]
fn the_readme_and_ci_md_list_every_output_of_the_action() {
    let action = read("action.yml");
    let (_, outputs) = action.split_once("\noutputs:\n").unwrap();
    let names: Vec<&str> = outputs
        .lines()
        .take_while(|line| line.is_empty() || line.starts_with(' '))
        .filter_map(|line| line.strip_prefix("  "))
        .filter(|line| !line.starts_with(' '))
        .filter_map(|line| line.strip_suffix(':'))
        .collect();
    assert!(names.contains(&"output"), "{names:?}");
    let readme = read("README.md");
    let (_, listed) = readme.split_once("Outputs:\n").unwrap();
    let (listed, _) = listed.split_once(". Each is described").unwrap();
    let listed: Vec<&str> = listed
        .split(',')
        .map(|name| name.trim().trim_matches('`'))
        .collect();
    assert_eq!(listed, names, "README.md's Outputs");
    let ci = read("docs/ci.md");
    for name in &names {
        let row = format!("`{name}`");
        assert!(
            ci.lines()
                .any(|line| line.starts_with("| ") && line.contains(&row)),
            "docs/ci.md has no row for output `{name}`"
        );
    }
}

#[test]
fn the_docs_name_every_schema_format() {
    let ybs = Ybs::new();
    let help = ybs.run(["schema", "--help"]);
    help.expect_code(0);
    let formats: Vec<&str> = help
        .stdout
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter_map(|line| line.split_once(':').map(|(name, _)| name.trim()))
        .collect();
    assert_eq!(formats, ["transcript", "task", "events", "state"]);
    let written = format!("`ybs schema {}`", formats.join("|"));
    for file in ["docs/cli.md", "docs/outputs.md"] {
        assert!(read(file).contains(&written), "{file} lacks {written}");
    }
    for format in formats {
        assert!(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(format!("docs/schema/{format}.schema.json"))
                .is_file()
        );
    }
}
