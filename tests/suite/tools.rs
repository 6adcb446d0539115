//! The built-in tools through the binary (issue 2, acceptance 5).

use serde_json::json;

use crate::support::Ybs;
use crate::support::cassette::{answer, call, calls};

#[test]
fn list_and_search_respect_gitignore_and_skip_binary_files() {
    let ybs = Ybs::new();
    ybs.git(&["init", "-q"]);
    ybs.file(".gitignore", "target/\n*.log\n");
    ybs.file("src/lib.rs", "fn needle() {}\n");
    ybs.file("target/debug/out.rs", "fn needle() {}\n");
    ybs.file("build.log", "needle\n");
    std::fs::write(ybs.path().join("blob.bin"), b"needle\0\x01\x02binary").unwrap();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { allow: [list_files, search_files] }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("list_files", json!({"pattern": "**/*"})),
                ("search_files", json!({"pattern": "needle"})),
            ]),
            answer("found it"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let listed = transcript["tool_calls"][0]["result"]["output"]
        .as_str()
        .unwrap();
    assert!(listed.contains("src/lib.rs"), "{listed}");
    assert!(!listed.contains("target/"), "ignored dir listed: {listed}");
    assert!(
        !listed.contains("build.log"),
        "ignored file listed: {listed}"
    );
    let found = transcript["tool_calls"][1]["result"]["output"]
        .as_str()
        .unwrap();
    assert!(found.contains("src/lib.rs"), "{found}");
    assert!(
        !found.contains("target/debug"),
        "ignored file searched: {found}"
    );
    assert!(
        !found.contains("build.log"),
        "ignored file searched: {found}"
    );
    assert!(!found.contains("blob.bin"), "binary file searched: {found}");
}

#[test]
fn paths_outside_the_workdir_are_refused_and_explained() {
    let ybs = Ybs::new();
    ybs.file(
        "work/t.yaml",
        "prompt: p\ncommit: false\npolicy: { default: allow }\n",
    );
    ybs.file("secret.txt", "top secret\n");
    ybs.cassette(
        "work/t.cassette.json",
        vec![
            calls(&[
                ("read_file", json!({"path": "../secret.txt"})),
                ("write_file", json!({"path": "../evil.txt", "content": "x"})),
            ]),
            answer("could not"),
        ],
    );
    let mut command = ybs.command();
    command
        .current_dir(ybs.path().join("work"))
        .args(["run", "t.yaml"]);
    let output = command.output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!ybs.exists("evil.txt"));
    let transcript = ybs.json("work/ybs-out/t/transcript.json");
    for entry in transcript["tool_calls"].as_array().unwrap() {
        assert_eq!(entry["result"]["ran"], false, "{entry}");
        let text = entry["result"]["output"].as_str().unwrap();
        assert!(text.contains("outside"), "{text}");
        assert!(!text.contains("top secret"));
    }
}

/// A path with glob characters is taken literally: the error says paths
/// are not expanded and names the files the glob matches (ten at most),
/// and a missing path names the nearest existing ones (issue 26 item 5).
#[test]
fn a_glob_or_a_missing_path_is_explained_with_the_files_that_exist() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { default: allow }\n",
    );
    ybs.file("lib/a.sh", "echo a\n");
    ybs.file("lib/b.sh", "echo b\n");
    ybs.file("lib/notes.txt", "notes\n");
    for n in 0..12 {
        ybs.file(&format!("many/f{n:02}.txt"), "x\n");
    }
    ybs.file("src/tools/utils.py", "pass\n");
    ybs.file("src/main.py", "pass\n");
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "edit_file",
                json!({"path": "lib/*.sh", "old_text": "echo", "new_text": "printf"}),
            ),
            call("read_file", json!({"path": "many/f?[0-9].txt"})),
            call("list_files", json!({"pattern": "*", "path": "lib/*"})),
            call("read_file", json!({"path": "lib/*.rs"})),
            call("read_file", json!({"path": "utils.py"})),
            call("read_file", json!({"path": "src/mian.py"})),
            call(
                "search_files",
                json!({"pattern": "x", "path": "source/tools"}),
            ),
            // A literal name with brackets (Next.js routes) is a file
            // like any other.
            call(
                "write_file",
                json!({"path": "pages/[id].tsx", "content": "x\n"}),
            ),
            call("read_file", json!({"path": "pages/[id].tsx"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let entries = transcript["tool_calls"].as_array().unwrap();
    let told = |index: usize| {
        let entry = &entries[index];
        assert_eq!(entry["result"]["ok"], false, "{entry}");
        entry["result"]["output"].as_str().unwrap().to_owned()
    };
    // Nothing was edited through the glob.
    assert_eq!(ybs.read("lib/a.sh"), "echo a\n");
    let text = told(0);
    assert!(text.contains("not expanded"), "{text}");
    assert!(
        text.contains("`lib/a.sh`") && text.contains("`lib/b.sh`"),
        "{text}"
    );
    assert!(!text.contains("notes.txt"), "{text}");
    let text = told(1);
    assert!(text.contains("not expanded"), "{text}");
    for n in 0..10 {
        assert!(text.contains(&format!("`many/f{n:02}.txt`")), "{text}");
    }
    assert!(
        !text.contains("f10.txt") && text.contains("2 more"),
        "{text}"
    );
    let text = told(2);
    assert!(text.contains("not expanded"), "{text}");
    assert!(text.contains("`lib/a.sh`"), "{text}");
    let text = told(3);
    assert!(
        text.contains("not expanded") && text.contains("no file matches"),
        "{text}"
    );
    let text = told(4);
    assert!(text.contains("`utils.py` does not exist"), "{text}");
    assert!(text.contains("`src/tools/utils.py`"), "{text}");
    let text = told(5);
    assert!(text.contains("`src/main.py`"), "{text}");
    let text = told(6);
    assert!(text.contains("`source/tools` does not exist"), "{text}");
    assert!(text.contains("`src/tools`"), "{text}");
    assert_eq!(entries[7]["result"]["ok"], true, "{}", entries[7]);
    assert_eq!(entries[8]["result"]["ok"], true, "{}", entries[8]);
    assert_eq!(ybs.read("pages/[id].tsx"), "x\n");
}
/// A pattern too large to compile (or to search with) is an error the
/// model is told, never an empty success (issue 21 item 10).
#[test]
fn a_search_pattern_too_large_is_an_error_to_the_model() {
    let ybs = Ybs::new();
    ybs.file("src/lib.rs", "fn needle() {}\n");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { allow: [search_files] }\n",
    );
    let patterns = [r"(a{1000}){1000}", r"\w{100000}"];
    let requested: Vec<(&str, serde_json::Value)> = patterns
        .iter()
        .map(|pattern| ("search_files", json!({ "pattern": pattern })))
        .collect();
    ybs.cassette(
        "t.cassette.json",
        vec![calls(&requested), answer("could not search")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    for (index, pattern) in patterns.iter().enumerate() {
        let result = &transcript["tool_calls"][index]["result"];
        let output = result["output"].as_str().unwrap();
        assert_eq!(result["ok"], false, "{pattern}: {result}");
        assert!(
            output.contains("`pattern` is too large to compile"),
            "{pattern}: {output}"
        );
        assert!(!output.contains("total_matches"), "{pattern}: {output}");
    }
}

/// A shell output past the capture cap tells the model how much there
/// was in all (issue 21 item 10).
#[test]
fn a_truncated_shell_output_says_its_whole_size() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { allow: [run_shell] }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[(
                "run_shell",
                json!({"command": "head -c 3000000 /dev/zero | tr '\\0' a; head -c 1500000 /dev/zero | tr '\\0' b >&2"}),
            )]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/t/transcript.json");
    let result = &transcript["tool_calls"][0]["result"];
    assert_eq!(result["truncated"], true, "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("\"stdout_bytes\":3000000"), "{output}");
    assert!(output.contains("\"stderr_bytes\":1500000"), "{output}");
    assert!(
        output.contains("[... truncated ") && output.contains(" characters ...]"),
        "{output}"
    );
}
