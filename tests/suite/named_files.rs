//! What a task file names (`output.schema_file`, the cassette beside it)
//! is opened beneath its repository, through no link, never a blocked
//! path, and no error prints what it read (issue 34, item 3).

use crate::support::Ybs;

const SECRET: &str = "hunter2-not-a-real-key-8d1c";

fn git_init(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(status.success());
}

/// `validate` and `run` both refuse the task file at `schema_file`'s line,
/// with exit 2, and neither prints `SECRET`.
fn refused_by_both(ybs: &Ybs, file: &str, words: &str) {
    for command in ["validate", "run"] {
        let run = ybs.run([command, file, "--provider", "ollama", "--model", "m"]);
        run.expect_code(2);
        let all = format!("{}{}", run.stdout, run.stderr);
        assert!(
            !all.contains(SECRET),
            "{command} printed the secret:\n{all}"
        );
        assert!(
            !all.contains("hunter2"),
            "{command} printed part of it:\n{all}"
        );
        assert!(all.contains("schema_file"), "{command}:\n{all}");
        assert!(all.contains(words), "{command}: no `{words}` in:\n{all}");
        let line = run
            .stderr
            .lines()
            .find(|line| line.contains("schema_file"))
            .unwrap();
        assert!(line.contains(".yaml:4:"), "{command}: {line}");
        assert!(run.stderr.contains("hint:"), "{}", run.stderr);
    }
}

#[test]
fn a_schema_file_outside_the_repository_is_never_read() {
    let ybs = Ybs::new();
    // A JSON file outside the repository, as `~/.pgpass` would be; its
    // content is no schema, so an error that quoted it would show it.
    ybs.file("secret.json", &format!("{{\"type\": \"{SECRET}\"}}"));
    git_init(&ybs.path().join("repo"));
    let outside = ybs.path().join("secret.json");
    for (name, named) in [
        ("up.yaml", "../../secret.json".to_owned()),
        ("abs.yaml", outside.display().to_string()),
    ] {
        ybs.file(
            &format!("repo/tasks/{name}"),
            &format!("prompt: review\ncommit: false\noutput:\n  schema_file: {named}\n"),
        );
        let words = if name == "abs.yaml" {
            "absolute"
        } else {
            "leads out of"
        };
        refused_by_both(&ybs, &format!("repo/tasks/{name}"), words);
    }
}

#[test]
fn a_task_file_in_no_repository_names_files_beneath_its_own_directory() {
    let ybs = Ybs::new();
    ybs.file("secret.json", &format!("{{\"type\": \"{SECRET}\"}}"));
    ybs.file(
        "tasks/t.yaml",
        "prompt: review\ncommit: false\noutput:\n  schema_file: ../secret.json\n",
    );
    refused_by_both(&ybs, "tasks/t.yaml", "leads out of");
}

#[test]
fn a_schema_file_through_a_link_or_blocked_is_refused() {
    let ybs = Ybs::new();
    ybs.file("secret.json", &format!("{{\"type\": \"{SECRET}\"}}"));
    git_init(&ybs.path().join("repo"));
    std::os::unix::fs::symlink(
        ybs.path().join("secret.json"),
        ybs.path().join("repo/link.json"),
    )
    .unwrap();
    ybs.file(
        "repo/t.yaml",
        "prompt: review\ncommit: false\noutput:\n  schema_file: link.json\n",
    );
    refused_by_both(&ybs, "repo/t.yaml", "symbolic link");
    // A directory of links on the way is refused the same.
    std::os::unix::fs::symlink(ybs.path(), ybs.path().join("repo/up")).unwrap();
    ybs.file(
        "repo/t.yaml",
        "prompt: review\ncommit: false\noutput:\n  schema_file: up/secret.json\n",
    );
    refused_by_both(&ybs, "repo/t.yaml", "symbolic link");
    // `**/.env` is blocked by default.
    ybs.file("repo/.env", &format!("{{\"type\": \"{SECRET}\"}}"));
    ybs.file(
        "repo/t.yaml",
        "prompt: review\ncommit: false\noutput:\n  schema_file: .env\n",
    );
    refused_by_both(&ybs, "repo/t.yaml", "blocked path `**/.env`");
}

#[test]
fn an_invalid_schema_file_is_named_by_keyword_and_path_never_by_value() {
    let ybs = Ybs::new().env("FOO_API_KEY", SECRET);
    git_init(ybs.path());
    ybs.file(
        "schemas/review.json",
        &format!("{{\"type\": \"object\", \"properties\": {{\"a\": {{\"type\": \"{SECRET}\"}}}}}}"),
    );
    ybs.file(
        "tasks/t.yaml",
        "prompt: review\ncommit: false\noutput:\n  schema_file: ../schemas/review.json\n",
    );
    refused_by_both(&ybs, "tasks/t.yaml", "/properties/a/type");
    let run = ybs.run(["validate", "tasks/t.yaml"]);
    assert!(run.stderr.contains("keyword `"), "{}", run.stderr);
    // Inside the repository and valid, it loads.
    ybs.file(
        "schemas/review.json",
        "{\"type\": \"object\", \"required\": [\"verdict\"]}",
    );
    ybs.run([
        "validate",
        "tasks/t.yaml",
        "--provider",
        "ollama",
        "--model",
        "m",
    ])
    .expect_code(0);
}

#[test]
fn a_withheld_value_in_a_load_error_is_masked() {
    // The value of a `*_API_KEY` as the schema file's name: the error
    // that names the path passes the full redactor, at load time too.
    let ybs = Ybs::new().env("FOO_API_KEY", SECRET);
    ybs.file(
        "t.yaml",
        &format!("prompt: review\ncommit: false\noutput:\n  schema_file: {SECRET}.json\n"),
    );
    refused_by_both(&ybs, "t.yaml", "cannot read");
}

#[test]
fn the_cassette_beside_a_task_file_is_never_read_through_a_link() {
    let ybs = Ybs::new();
    git_init(ybs.path());
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("elsewhere.json"),
        "{\"version\": 1, \"interactions\": []}",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("elsewhere.json"),
        ybs.path().join("t.cassette.json"),
    )
    .unwrap();
    ybs.file("t.yaml", "prompt: hi\ncommit: false\n");
    let run = ybs.run(["run", "t.yaml", "--provider", "replay"]);
    assert_ne!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("symbolic link"),
        "{}{}",
        run.stdout,
        run.stderr
    );
}

#[test]
fn a_tool_path_a_task_file_names_lies_in_the_repository() {
    let ybs = Ybs::new();
    for (path, column) in [
        ("/usr/bin/curl", 14),
        ("../elsewhere/tool", 14),
        ("~/bin/tool", 14),
    ] {
        ybs.file(
            "t.yaml",
            &format!("prompt: p\ncommit: false\ntools:\n  external: [\"{path}\"]\n"),
        );
        let run = ybs.run(["validate", "t.yaml", "--provider", "ollama", "--model", "m"]);
        run.expect_code(2);
        assert!(
            run.stderr.contains(&format!(
                "t.yaml:4:{column}: `tools.external` path `{path}` is not a path in the repository"
            )),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("hint:"), "{}", run.stderr);
    }
    // A relative path inside is a path the task may name.
    ybs.file("tools/t", "#!/bin/sh\n");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools:\n  external: [\"./tools/t\"]\n",
    );
    ybs.run(["validate", "t.yaml", "--provider", "ollama", "--model", "m"])
        .expect_code(0);
}
