//! Issue 27 and issue 21 item 4 (docs/policy.md, "Opaque programs"):
//! under `allow: run_shell(*)` and `deny: run_shell(touch*)`, every
//! spelling that would run `touch` through something the analysis cannot
//! see through — a program read from stdin or a descriptor, a copy or
//! link of the program under another name, a script or module the task
//! wrote — is refused, creates nothing, and its result names the reason.
//! A scripted model issues them through the real binary, in one run.

use serde_json::{Value, json};

use super::git::transcript;
use crate::support::Ybs;
use crate::support::cassette::{answer, calls};

const WILDCARD_WITH_DENY: &str = "prompt: do the thing\nmodel: test-model\ncommit: false\n\
     policy:\n  allow: [\"run_shell(*)\"]\n  deny: [\"run_shell(touch*)\"]\n";

/// (command, the file it would create, the reason its result must name).
fn spellings() -> Vec<(String, String, &'static str)> {
    const STDIN: &str = "stdin program";
    const RENAMED: &str = "renamed program";
    const OPAQUE: &str = "opaque program";
    const DENIED: &str = "rule `deny[0] run_shell(touch*)`";
    let mut cases: Vec<(String, String, &'static str)> = Vec::new();
    let mut add = |template: &str, reason: &'static str| {
        let n = cases.len();
        let file = format!("made{n}");
        cases.push((template.replace("FILE", &file), file, reason));
    };
    // Issue 21 item 4: programs read from stdin or a descriptor.
    add("bash /dev/stdin <<< 'touch FILE'", STDIN);
    add("sh /dev/fd/0 <<< 'touch FILE'", STDIN);
    add("bash - <<< 'touch FILE'", STDIN);
    add("sh /proc/self/fd/0 <<< 'touch FILE'", STDIN);
    add("bash /proc/1/fd/0 <<< 'touch FILE'", STDIN);
    add("bash //dev/./stdin <<< 'touch FILE'", STDIN);
    add("dash /dev/fd/3 3<<< 'touch FILE'", STDIN);
    add(
        "python3 /dev/stdin <<< 'import os; os.system(\"touch FILE\")'",
        STDIN,
    );
    add(
        "python3 /dev/fd/0 <<< 'import os; os.system(\"touch FILE\")'",
        STDIN,
    );
    add(
        "python3 -m code <<< 'import os; os.system(\"touch FILE\")'",
        STDIN,
    );
    add("perl /dev/stdin <<< 'system(\"touch FILE\")'", STDIN);
    add("perl - <<< 'system(\"touch FILE\")'", STDIN);
    add("ruby /dev/stdin <<< 'system(\"touch FILE\")'", STDIN);
    add("php /dev/stdin <<< '<?php system(\"touch FILE\");'", STDIN);
    add(
        "node /dev/stdin <<< 'require(\"child_process\").execSync(\"touch FILE\")'",
        STDIN,
    );
    add(
        "node --import /dev/stdin -e 1 <<< 'require(\"child_process\").execSync(\"touch FILE\")'",
        STDIN,
    );
    add(
        "node -r /dev/stdin app.js <<< 'require(\"child_process\").execSync(\"touch FILE\")'",
        STDIN,
    );
    add(
        "node --require=/dev/stdin app.js <<< 'require(\"child_process\").execSync(\"touch FILE\")'",
        STDIN,
    );
    add(
        "node --loader /dev/stdin app.js <<< 'require(\"child_process\").execSync(\"touch FILE\")'",
        STDIN,
    );
    add(
        "node --experimental-loader=/dev/fd/0 app.js <<< 'require(\"child_process\").execSync(\"touch FILE\")'",
        STDIN,
    );
    add("tclsh /dev/stdin <<< 'exec touch FILE'", STDIN);
    add("awk -f - <<< 'BEGIN { system(\"touch FILE\") }'", STDIN);
    add(
        "awk -f /dev/stdin <<< 'BEGIN { system(\"touch FILE\") }'",
        STDIN,
    );
    add("sed -f - seed.txt <<< '1e touch FILE'", STDIN);
    add("sed -f /dev/stdin seed.txt <<< '1e touch FILE'", STDIN);
    // Issue 27: the denied program under another name.
    add("cp /usr/bin/touch ./t && ./t FILE", RENAMED);
    add("ln -s /usr/bin/touch t2 && ./t2 FILE", RENAMED);
    add("install -m 755 /usr/bin/touch t3 && ./t3 FILE", RENAMED);
    add("ln /usr/bin/touch t4 ; ./t4 FILE", RENAMED);
    add("cp /usr/bin/touch /tmp/ybs-t5 && /tmp/ybs-t5 FILE", RENAMED);
    add(
        "mkdir -p bin && cp /usr/bin/touch bin/t6 && bin/t6 FILE",
        RENAMED,
    );
    // Issue 27: a script or module the task wrote a moment earlier.
    add("printf 'touch FILE' > s.sh; bash s.sh", OPAQUE);
    add("printf 'touch FILE' > s2.sh; sh -e s2.sh", OPAQUE);
    add(
        "printf 'import os\\nos.system(\"touch FILE\")\\n' > s.py; python3 s.py",
        OPAQUE,
    );
    add(
        "printf 'import os\\nos.system(\"touch FILE\")\\n' > evil.py; python3 -m evil",
        OPAQUE,
    );
    add(
        "printf 'BEGIN { system(\"touch FILE\") }' > p.awk; awk -f p.awk",
        OPAQUE,
    );
    add("printf 'system(\"touch FILE\");' > s.pl; perl s.pl", OPAQUE);
    add(
        "printf 'require(\"child_process\").execSync(\"touch FILE\")' > m.js; node -r ./m.js app.js",
        OPAQUE,
    );
    // Issue 34 item 4: the dynamic loader runs the program it is given.
    let loader = loader();
    add(&format!("{loader} /usr/bin/touch FILE"), DENIED);
    add(
        &format!("{loader} --library-path /usr/lib /usr/bin/touch FILE"),
        DENIED,
    );
    add(&format!("{loader} --argv0 ls /usr/bin/touch FILE"), DENIED);
    add(
        &format!("{loader} --inhibit-cache --preload '' /usr/bin/touch FILE"),
        DENIED,
    );
    // Arithmetic on a name evaluates the variable's value as an
    // expression: a value `a[$(…)]` runs its command.
    const ARITHMETIC: &str = "arithmetic";
    add("x='a[$(touch FILE)]'; echo $((x+1))", ARITHMETIC);
    add("i='b[$(touch FILE)]'; echo ${a[i]}", ARITHMETIC);
    add("x='a[$(touch FILE)]'; (( x ))", ARITHMETIC);
    add("x='a[$(touch FILE)]'; echo $[x+1]", ARITHMETIC);
    add("x='a[$(touch FILE)]'; echo ${!x}", ARITHMETIC);
    add("x='a[$(touch FILE)]'; echo \"${x:0:x}\"", ARITHMETIC);
    add("x='a[$(touch FILE)]'; [ \"$x\" -eq 1 ]", "may become code");
    // dash reads `((` as two subshells.
    add("sh -c '((touch FILE))'", DENIED);
    // Issue 34 item 4: a Makefile the task wrote runs what it says.
    add("printf 'all:\\n\\ttouch FILE\\n' > Makefile; make", OPAQUE);
    add(
        "printf 'all:\\n\\ttouch FILE\\n' > m1.mk; make -f m1.mk",
        OPAQUE,
    );
    add(
        "printf 'all:\\n\\ttouch FILE\\n' > m2.mk; make --file=m2.mk",
        OPAQUE,
    );
    add(
        "mkdir -p d3 && printf 'all:\\n\\ttouch ../FILE\\n' > d3/Makefile; make -C d3",
        OPAQUE,
    );
    cases
}

/// The dynamic loader of this machine, run as a program.
fn loader() -> &'static str {
    [
        "/lib64/ld-linux-x86-64.so.2",
        "/lib/ld-linux-aarch64.so.1",
        "/lib/ld-linux-armhf.so.3",
        "/lib/ld-linux.so.2",
    ]
    .into_iter()
    .find(|path| std::path::Path::new(path).exists())
    .expect("a glibc dynamic loader")
}

/// `ybs run t.yaml` with a scripted model that sends every spelling of
/// `cases` (turns of at most 20 calls: a turn's limit is 32); `around`
/// adds a control command and a copy of `touch` before them and runs the
/// copy after them.
fn run_spellings(ybs: &Ybs, cases: &[(String, String, &str)], around: bool) -> crate::support::Run {
    let mut turns = Vec::new();
    if around {
        turns.push(calls(&[
            ("run_shell", json!({"command": "echo ran > control.txt"})),
            ("run_shell", json!({"command": "cp /usr/bin/touch ./early"})),
        ]));
    }
    for chunk in cases.chunks(20) {
        let turn: Vec<(&str, Value)> = chunk
            .iter()
            .map(|(command, _, _)| ("run_shell", json!({"command": command})))
            .collect();
        turns.push(calls(&turn));
    }
    if around {
        turns.push(calls(&[(
            "run_shell",
            json!({"command": "./early later-made"}),
        )]));
    }
    turns.push(answer("done"));
    ybs.cassette("t.cassette.json", turns);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    run
}

fn outputs(run_dir: &Value) -> Vec<(String, String, String)> {
    run_dir["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            (
                entry["arguments"]["command"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                entry["decision"]["verdict"].as_str().unwrap().to_owned(),
                entry["result"]["output"].to_string(),
            )
        })
        .collect()
}

/// Every spelling of both issues is refused and creates nothing; the
/// result names the case and what to write. A plain command in the same
/// run still runs (so the refusals are the policy's, not a broken shell),
/// and a copy made by an earlier, allowed call is still refused later.
#[test]
fn what_the_analysis_cannot_see_through_is_refused_with_its_reason() {
    let ybs = Ybs::new().parser_alone();
    ybs.file("seed.txt", "seed\n");
    ybs.file("t.yaml", WILDCARD_WITH_DENY);
    let cases = spellings();
    let run = run_spellings(&ybs, &cases, true);
    assert_eq!(ybs.read("control.txt"), "ran\n");
    assert!(ybs.exists("early"), "the plain copy ran");
    let seen = outputs(&transcript(&run, "t"));
    assert_eq!(seen.len(), cases.len() + 3);
    for ((command, file, reason), (recorded, verdict, told)) in cases.iter().zip(&seen[2..]) {
        assert_eq!(command, recorded);
        let context = format!("{command}: {verdict}: {told}");
        assert!(!ybs.exists(file), "{context}");
        assert_ne!(verdict, "allow", "{context}");
        assert!(told.contains(reason), "{context}");
        assert!(told.contains("not run"), "{context}");
    }
    let (_, verdict, told) = seen.last().unwrap();
    assert_eq!(verdict, "ask", "{told}");
    assert!(told.contains("renamed program `./early`"), "{told}");
    assert!(told.contains("policy.opaque: allow"), "{told}");
    assert!(told.contains("run_shell(./early later-made)"), "{told}");
    assert!(!ybs.exists("later-made"));
    // Nothing of a refused chain ran: not even its harmless first part.
    for made in [
        "t", "t2", "t3", "s.sh", "s.py", "evil.py", "p.awk", "Makefile", "m1.mk", "d3",
    ] {
        assert!(!ybs.exists(made), "{made}");
    }
}

/// `policy.opaque: allow` says the operator trusts the wildcard: the
/// script the task writes runs. An allow rule that names the script or
/// program vouches for it without the setting, and with no deny or ask
/// rule on `run_shell` there is nothing to dodge.
#[test]
fn opaque_allow_and_naming_rules_restore_what_the_operator_wants() {
    let ybs = Ybs::new().parser_alone();
    ybs.file(
        "t.yaml",
        &WILDCARD_WITH_DENY.replace("  deny:", "  opaque: allow\n  deny:"),
    );
    ybs.file(
        "named.yaml",
        "prompt: do the thing\nmodel: test-model\ncommit: false\npolicy:\n  allow: [\"run_shell(printf*)\", \"run_shell(bash s.sh)\", \"run_shell(./build.sh*)\", \"run_shell(make*)\"]\n  deny: [\"run_shell(touch*)\"]\n",
    );
    ybs.file(
        "nodeny.yaml",
        "prompt: do the thing\nmodel: test-model\ncommit: false\npolicy:\n  allow: [\"run_shell(*)\"]\n",
    );
    ybs.file("build.sh", "#!/bin/sh\necho built > built.txt\n");
    ybs.file("m.mk", "all:\n\techo made > made.txt\n");
    std::fs::set_permissions(
        ybs.path().join("build.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let script = |file: &str, out: &str| {
        vec![
            calls(&[(
                "run_shell",
                json!({"command": format!("printf 'echo ran > {out}' > {file}; bash {file}")}),
            )]),
            answer("done"),
        ]
    };
    ybs.cassette("t.cassette.json", script("s.sh", "a.txt"));
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert_eq!(ybs.read("a.txt"), "ran\n");

    let mut named = script("s.sh", "b.txt");
    named.insert(1, calls(&[("run_shell", json!({"command": "./build.sh"}))]));
    named.insert(
        1,
        calls(&[("run_shell", json!({"command": "make -f m.mk"}))]),
    );
    ybs.cassette("named.cassette.json", named);
    ybs.run(["run", "named.yaml"]).expect_code(0);
    assert_eq!(ybs.read("b.txt"), "ran\n");
    assert_eq!(ybs.read("built.txt"), "built\n");
    assert_eq!(
        ybs.read("made.txt"),
        "made\n",
        "a rule naming make vouches for it"
    );

    ybs.cassette("nodeny.cassette.json", script("n.sh", "c.txt"));
    ybs.run(["run", "nodeny.yaml"]).expect_code(0);
    assert_eq!(ybs.read("c.txt"), "ran\n");
}

/// `ybs policy explain` says which case applied, in words and in
/// `--json` (which also carries every part's argv).
#[test]
fn explain_names_the_case_that_applied() {
    let ybs = Ybs::new().parser_alone();
    ybs.file("t.yaml", WILDCARD_WITH_DENY);
    for (call, case) in [
        (
            "run_shell(cp /usr/bin/touch t && ./t x)",
            "renamed program `./t`",
        ),
        ("run_shell(bash s.sh)", "opaque program `s.sh`"),
        ("run_shell(python3 -m code)", "stdin program"),
        ("run_shell(awk -f - x)", "stdin program"),
        ("run_shell(make)", "opaque program `Makefile`"),
        ("run_shell(make -f evil.mk all)", "opaque program `evil.mk`"),
        ("run_shell(make --file=evil.mk)", "opaque program `evil.mk`"),
        ("run_shell(make -C sub)", "opaque program `sub/Makefile`"),
    ] {
        let run = ybs.run(["policy", "explain", "--task", "t.yaml", call]);
        run.expect_code(0);
        let out = &run.stdout;
        assert!(out.contains(case), "{call}: {out}");
        assert!(!out.contains("verdict: allow"), "{call}: {out}");
    }
    let run = ybs.run([
        "policy",
        "explain",
        "--json",
        "--task",
        "t.yaml",
        "run_shell(ln -s /usr/bin/touch t2 && ./t2 x)",
    ]);
    run.expect_code(0);
    let explained: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(explained["decision"]["verdict"], "ask");
    assert_eq!(explained["decision"]["rule"]["kind"], "opaque");
    assert_eq!(
        explained["decision"]["parsed"],
        json!([["ln", "-s", "/usr/bin/touch", "t2"], ["./t2", "x"]])
    );
    assert_eq!(explained["parts"][1]["opaque"]["kind"], "renamed_program");
    assert_eq!(explained["parts"][1]["rule"]["kind"], "opaque");
    // The loader is a wrapper: the program it runs is a part of its own.
    let call = format!(
        "run_shell({} --library-path /usr/lib --argv0 ls /usr/bin/touch x)",
        loader()
    );
    let run = ybs.run(["policy", "explain", "--json", "--task", "t.yaml", &call]);
    run.expect_code(0);
    let explained: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(explained["decision"]["verdict"], "deny", "{explained}");
    assert_eq!(explained["decision"]["rule"]["text"], "run_shell(touch*)");
    assert_eq!(
        explained["parts"][1]["argv"],
        json!(["/usr/bin/touch", "x"])
    );
}

/// A bare name on `PATH` that is the same file as a program a deny rule
/// names (a symlink under another name, as `cc` is for `gcc`) is a
/// renamed program: refused under the wildcard, and explained so.
#[test]
fn a_denied_program_under_another_name_on_path_is_a_renamed_program() {
    let aliases = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/usr/bin/touch", aliases.path().join("tt")).unwrap();
    let path = format!(
        "{}:{}",
        aliases.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ybs = Ybs::new().parser_alone().env("PATH", &path);
    ybs.file("t.yaml", WILDCARD_WITH_DENY);
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("run_shell", json!({"command": "tt made-by-alias"})),
                ("run_shell", json!({"command": "echo ran > control.txt"})),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(ybs.read("control.txt"), "ran\n");
    assert!(!ybs.exists("made-by-alias"));
    let seen = outputs(&transcript(&run, "t"));
    let (_, verdict, told) = &seen[0];
    assert_eq!(verdict, "ask", "{told}");
    assert!(
        told.contains("renamed program `tt` (the same file as `touch`"),
        "{told}"
    );
    let run = ybs.run(["policy", "explain", "--task", "t.yaml", "run_shell(tt x)"]);
    run.expect_code(0);
    assert!(
        run.stdout.contains("same file as `touch`"),
        "{}",
        run.stdout
    );
}

/// The same spellings with the sandbox's exec guard (docs/policy.md, "The
/// exec guard"), `touch` written `tou''ch` so that no text names it: the
/// policy lets what it cannot read run, and the guard refuses `touch`
/// wherever it is started — from stdin, a copy, a link, a script, a
/// module, a Makefile, the loader. Nothing is created, and what the
/// policy allowed says why on its stderr. (Written plainly, a name in
/// code the parser cannot read is refused up front: the next test.)
#[test]
fn the_exec_guard_refuses_every_spelling_at_exec() {
    let ybs = Ybs::new();
    ybs.file("seed.txt", "seed\n");
    ybs.file("t.yaml", WILDCARD_WITH_DENY);
    let probe = ybs.run([
        "policy",
        "explain",
        "--json",
        "--task",
        "t.yaml",
        "run_shell(bash s.sh)",
    ]);
    probe.expect_code(0);
    let explained: Value = serde_json::from_str(probe.stdout.trim()).unwrap();
    assert_eq!(
        explained["sandbox"]["exec_guard_holds"], true,
        "this machine's sandbox has no exec guard: {explained}"
    );
    assert_eq!(explained["decision"]["verdict"], "allow", "{explained}");
    let cases: Vec<(String, String, &str)> = spellings()
        .into_iter()
        .map(|(command, file, reason)| (command.replace("touch", "tou''ch"), file, reason))
        .collect();
    let run = run_spellings(&ybs, &cases, true);
    assert_eq!(ybs.read("control.txt"), "ran\n");
    let seen = outputs(&transcript(&run, "t"));
    assert_eq!(seen.len(), cases.len() + 3);
    let mut at_exec = 0;
    for ((command, file, _), (recorded, verdict, told)) in cases.iter().zip(&seen[2..]) {
        assert_eq!(command, recorded);
        let context = format!("{command}: {verdict}: {told}");
        assert!(!ybs.exists(file), "{context}");
        // What the policy allowed either met the guard or failed before
        // it could run anything (`bash /proc/1/fd/0`: not readable).
        if verdict == "allow" && told.contains("ybs sandbox: refused exec of") {
            assert!(told.contains("run_shell(touch*)"), "{context}");
            at_exec += 1;
        }
    }
    assert!(
        at_exec * 2 > cases.len(),
        "the guard decided {at_exec} of {}",
        cases.len()
    );
    let (_, verdict, told) = seen.last().unwrap();
    assert_eq!(verdict, "allow", "{told}");
    assert!(told.contains("refused exec"), "{told}");
    assert!(!ybs.exists("later-made"));
}

/// Written plainly, every spelling names `touch` where the parser cannot
/// read what runs, or where it can: with the exec guard, each is refused
/// up front (the policy says which rule and why) or at exec, and none
/// creates its file.
#[test]
fn with_the_exec_guard_a_named_denied_program_is_refused_up_front() {
    let ybs = Ybs::new();
    ybs.file("seed.txt", "seed\n");
    ybs.file("t.yaml", WILDCARD_WITH_DENY);
    let cases = spellings();
    let run = run_spellings(&ybs, &cases, false);
    let seen = outputs(&transcript(&run, "t"));
    assert_eq!(seen.len(), cases.len());
    let mut up_front = 0;
    for ((command, file, _), (_, verdict, told)) in cases.iter().zip(&seen) {
        let context = format!("{command}: {verdict}: {told}");
        assert!(!ybs.exists(file), "{context}");
        if verdict == "deny" && told.contains("is named where the parser cannot read") {
            up_front += 1;
        }
    }
    assert!(up_front * 2 > cases.len(), "{up_front} of {}", cases.len());
}
