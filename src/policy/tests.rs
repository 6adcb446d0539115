//! The decision table: every row names the policy, the call
//! in the string form, the verdict and the rule that must decide it.

use std::path::PathBuf;

use super::examples::{parse_call, view};
use super::*;

fn rules(texts: &[&str]) -> Vec<Rule> {
    texts.iter().map(|t| Rule::parse(t).unwrap()).collect()
}

fn spec(allow: &[&str], deny: &[&str], ask: &[&str], default: Option<Verdict>) -> PolicySpec {
    PolicySpec {
        allow: rules(allow),
        deny: rules(deny),
        ask: rules(ask),
        default,
        ..PolicySpec::default()
    }
}

fn settings() -> GuardSettings {
    let mut settings = GuardSettings::new("/home/u/w", Some(PathBuf::from("/home/u")));
    settings.protected_paths = vec![PathBuf::from("tasks/t.yaml")];
    settings
}

fn fixture(name: &str) -> Policy {
    let (operator, task): (Option<PolicySpec>, Vec<PolicySpec>) = match name {
        "base" => (
            None,
            vec![
                spec(
                    &[
                        "read_file",
                        "list_files",
                        "edit_file(src/**)",
                        "write_file(src/*)",
                        "run_shell(cargo test*)",
                        "run_shell(cargo build*)",
                        "run_shell(git status)",
                        "run_shell(ls*)",
                        "run_shell(echo *)",
                        "run_shell(grep *)",
                        "run_shell(cat *)",
                        "run_shell(tail*)",
                    ],
                    &[
                        "run_shell(git push*)",
                        "run_shell(curl*)",
                        "run_shell(rm *)",
                    ],
                    &["run_shell(cargo publish*)"],
                    None,
                ),
                // A second layer adds rules, as a task's own `policy:` adds
                // to `defaults:`.
                spec(
                    &["run_shell(RUST_BACKTRACE=1 cargo test*)"],
                    &[],
                    &["write_file(docs/**)"],
                    None,
                ),
            ],
        ),
        "star" => (
            None,
            vec![spec(
                &["*"],
                &["run_shell(rm*)", "*(secrets/**)"],
                &[],
                None,
            )],
        ),
        "default_allow" => (
            None,
            vec![spec(&[], &["run_shell(curl*)"], &[], Some(Verdict::Allow))],
        ),
        "ceiling" => (
            Some(spec(
                &[
                    "read_file",
                    "run_shell(cargo*)",
                    "edit_file(src/**)",
                    "write_file(src/**)",
                ],
                &["run_shell(cargo publish*)"],
                &["edit_file(src/secret.rs)"],
                Some(Verdict::Ask),
            )),
            vec![spec(
                &[
                    "read_file",
                    "edit_file(**)",
                    "run_shell(cargo test*)",
                    "run_shell(make*)",
                    "write_file",
                ],
                &["run_shell(cargo bench*)"],
                &[],
                Some(Verdict::Allow),
            )],
        ),
        "inherit" => (
            Some(spec(
                &["run_shell(ls*)", "read_file"],
                &[],
                &[],
                Some(Verdict::Ask),
            )),
            vec![spec(&["read_file", "list_files"], &[], &[], None)],
        ),
        "narrow" => (
            Some(spec(&[], &[], &[], Some(Verdict::Allow))),
            vec![spec(&["read_file"], &[], &[], Some(Verdict::Deny))],
        ),
        other => panic!("no fixture {other}"),
    };
    Policy::build(operator.as_ref(), &task, settings()).unwrap()
}

/// `deny[1]`, `operator default`, `guard:blocked_paths`.
fn short(rule: &RuleRef) -> String {
    match rule {
        RuleRef::Listed {
            layer, list, index, ..
        } => {
            let prefix = if *layer == Layer::Operator {
                "operator "
            } else {
                ""
            };
            format!("{prefix}{list}[{index}]")
        }
        other => other.to_string(),
    }
}

use Verdict::{Allow, Ask, Deny};

/// (policy, call, verdict, rule)
const DECISIONS: &[(&str, &str, Verdict, &str)] = &[
    // File tools and path globs.
    ("base", "read_file(src/lib.rs)", Allow, "allow[0]"),
    ("base", "read_file", Allow, "allow[0]"),
    ("base", "edit_file(src/lib.rs)", Allow, "allow[2]"),
    ("base", "edit_file(src/a/b/c.rs)", Allow, "allow[2]"),
    ("base", "edit_file(README.md)", Deny, "default"),
    ("base", "write_file(src/a.rs)", Allow, "allow[3]"),
    ("base", "write_file(src/a/b.rs)", Deny, "default"),
    ("base", "write_file(./src/../src/a.rs)", Allow, "allow[3]"),
    ("base", "edit_file(/home/u/w/src/lib.rs)", Allow, "allow[2]"),
    ("base", "write_file(docs/guide.md)", Ask, "ask[1]"),
    ("base", "unknown_tool", Deny, "default"),
    // Guards beat every rule.
    (
        "base",
        "read_file(~/.ssh/id_rsa)",
        Deny,
        "guard:blocked_paths",
    ),
    ("base", "read_file(.env)", Deny, "guard:blocked_paths"),
    (
        "base",
        "read_file(../outside/secret)",
        Deny,
        "guard:outside_workdir",
    ),
    (
        "star",
        "write_file(.git/hooks/pre-commit)",
        Deny,
        "guard:protected_paths",
    ),
    (
        "star",
        "write_file(.github/workflows/ci.yml)",
        Deny,
        "guard:protected_paths",
    ),
    (
        "star",
        "edit_file(tasks/t.yaml)",
        Deny,
        "guard:protected_paths",
    ),
    ("star", "run_shell(sudo ls)", Deny, "guard:blocked_commands"),
    (
        "star",
        "run_shell(rm -fr /)",
        Deny,
        "guard:blocked_commands",
    ),
    (
        "base",
        "run_shell(cargo test && sudo id)",
        Deny,
        "guard:blocked_commands",
    ),
    (
        "base",
        "run_shell(cat ~/.ssh/id_rsa)",
        Deny,
        "guard:blocked_paths",
    ),
    (
        "base",
        "run_shell(cat $HOME/.aws/credentials)",
        Deny,
        "guard:blocked_paths",
    ),
    (
        "base",
        "run_shell(cat /proc/self/environ)",
        Deny,
        "guard:blocked_paths",
    ),
    (
        "base",
        "run_shell(cd .. && cat .ssh/id_rsa)",
        Deny,
        "guard:blocked_paths",
    ),
    (
        "base",
        "run_shell(echo X=1 >> $GITHUB_ENV)",
        Deny,
        "guard:protected_paths",
    ),
    (
        "base",
        "run_shell(echo x > .git/hooks/pre-commit)",
        Deny,
        "guard:protected_paths",
    ),
    // Shell: every part must be allowed; deny and ask hit any part.
    ("base", "run_shell(cargo test)", Allow, "allow[4]"),
    (
        "base",
        "run_shell(cargo test --quiet -p a/b)",
        Allow,
        "allow[4]",
    ),
    (
        "base",
        "run_shell(cargo test && cargo build)",
        Allow,
        "allow[4]",
    ),
    (
        "base",
        "run_shell(cargo test 2>&1 | tail -5)",
        Allow,
        "allow[4]",
    ),
    ("base", "run_shell(cargo test &)", Allow, "allow[4]"),
    ("base", "run_shell(cargo test && curl x)", Deny, "deny[1]"),
    (
        "base",
        "run_shell(cargo test; git push origin)",
        Deny,
        "deny[0]",
    ),
    ("base", "run_shell(cargo test || wget x)", Deny, "default"),
    ("base", "run_shell(cargo test\nwget x)", Deny, "default"),
    ("base", "run_shell(cargo test\ncurl x)", Deny, "deny[1]"),
    (
        "base",
        "run_shell(cargo test # && curl x)",
        Allow,
        "allow[4]",
    ),
    ("base", "run_shell(git status)", Allow, "allow[6]"),
    ("base", "run_shell(git status --short)", Deny, "default"),
    ("base", "run_shell(cargo publish)", Ask, "ask[0]"),
    (
        "base",
        "run_shell(cargo publish && curl x)",
        Deny,
        "deny[1]",
    ),
    // Substitutions: never allowed, and their contents meet deny rules.
    ("base", "run_shell(echo $(id))", Deny, "default"),
    ("base", "run_shell(cargo test $(curl x))", Deny, "deny[1]"),
    ("base", "run_shell(echo \"$(curl x)\")", Deny, "deny[1]"),
    ("base", "run_shell(echo `id`)", Deny, "default"),
    ("base", "run_shell(echo `curl x`)", Deny, "deny[1]"),
    ("base", "run_shell(cat <(id))", Deny, "default"),
    ("base", "run_shell(cat <(curl x))", Deny, "deny[1]"),
    ("base", "run_shell($CMD test)", Deny, "default"),
    // eval, nested shells, wrappers.
    ("base", "run_shell(eval cargo test)", Deny, "default"),
    ("base", "run_shell(eval 'curl x')", Deny, "deny[1]"),
    ("base", "run_shell(bash -c 'cargo test')", Deny, "default"),
    ("base", "run_shell(bash -c 'curl x')", Deny, "deny[1]"),
    ("base", "run_shell(sh -ec \"rm -rf x\")", Deny, "deny[2]"),
    ("base", "run_shell(echo curl x | sh)", Deny, "default"),
    ("base", "run_shell(env X=1 rm -rf x)", Deny, "deny[2]"),
    ("base", "run_shell(env X=1 cargo test)", Deny, "default"),
    ("base", "run_shell(command rm x)", Deny, "deny[2]"),
    ("base", "run_shell(timeout 5 cargo test)", Deny, "default"),
    ("base", "run_shell(nice -n 5 rm x)", Deny, "deny[2]"),
    ("base", "run_shell(xargs cargo test)", Deny, "default"),
    (
        "base",
        "run_shell(find . -name x -exec rm {} +)",
        Deny,
        "deny[2]",
    ),
    (
        "base",
        "run_shell(git -c core.pager=x status)",
        Deny,
        "default",
    ),
    (
        "base",
        "run_shell(grep --pre ./x foo . | rg --pre ./x y)",
        Deny,
        "default",
    ),
    // Spelling of the command word.
    ("base", "run_shell(\\rm x)", Deny, "deny[2]"),
    ("base", "run_shell(r'm' x)", Deny, "deny[2]"),
    ("base", "run_shell(/bin/rm x)", Deny, "deny[2]"),
    // Redirections.
    (
        "base",
        "run_shell(cargo test > out.txt 2>&1)",
        Allow,
        "allow[4]",
    ),
    (
        "base",
        "run_shell(cargo test > /dev/null)",
        Allow,
        "allow[4]",
    ),
    ("base", "run_shell(cargo test > ../x)", Deny, "default"),
    ("base", "run_shell(cargo test > /etc/x)", Deny, "default"),
    // Unparseable and control flow.
    (
        "base",
        "run_shell(cargo test 'unterminated)",
        Deny,
        "default",
    ),
    ("base", "run_shell((cargo test))", Deny, "default"),
    ("base", "run_shell({ cargo test; })", Deny, "default"),
    (
        "base",
        "run_shell(if true; then cargo test; fi)",
        Deny,
        "default",
    ),
    // Quoting that must NOT be flagged.
    ("base", "run_shell(echo '$(not run)')", Allow, "allow[8]"),
    ("base", "run_shell(grep \"a|b\" file)", Allow, "allow[9]"),
    ("base", "run_shell(grep 'a;curl x' file)", Allow, "allow[9]"),
    ("base", "run_shell(echo \"it's fine\")", Allow, "allow[8]"),
    // Assignments and globs.
    (
        "base",
        "run_shell(RUST_BACKTRACE=1 cargo test)",
        Allow,
        "allow[12]",
    ),
    (
        "base",
        "run_shell(RUST_LOG=debug cargo test)",
        Deny,
        "default",
    ),
    ("base", "run_shell(PATH=. cargo test)", Deny, "default"),
    ("base", "run_shell(ls *.rs)", Deny, "default"),
    ("base", "run_shell(ls ./*.rs)", Allow, "allow[7]"),
    // "*" as a tool.
    ("star", "read_file(x.txt)", Allow, "allow[0]"),
    ("star", "my_external_tool", Allow, "allow[0]"),
    // `make` runs a Makefile the task may have written: a wildcard does
    // not vouch for it while a deny rule on run_shell exists (issue 34).
    ("star", "run_shell(make all)", Ask, "opaque"),
    ("star", "run_shell(make $(id))", Deny, "default"),
    ("star", "run_shell(rm x)", Deny, "deny[0]"),
    ("star", "read_file(secrets/key.pem)", Deny, "deny[1]"),
    // A default of allow never waves a hazard through.
    ("default_allow", "run_shell(wget x)", Allow, "default"),
    ("default_allow", "read_file(x)", Allow, "default"),
    ("default_allow", "run_shell(echo $(id))", Ask, "default"),
    ("default_allow", "run_shell(curl x)", Deny, "deny[0]"),
    // Operator ceiling: the task narrows, never widens.
    ("ceiling", "read_file(x)", Allow, "allow[0]"),
    ("ceiling", "run_shell(cargo test)", Allow, "allow[2]"),
    ("ceiling", "run_shell(cargo build)", Allow, "default"),
    ("ceiling", "run_shell(make)", Ask, "operator default"),
    ("ceiling", "run_shell(curl x)", Ask, "operator default"),
    (
        "ceiling",
        "run_shell(cargo publish)",
        Deny,
        "operator deny[0]",
    ),
    ("ceiling", "run_shell(cargo bench)", Deny, "deny[0]"),
    ("ceiling", "edit_file(src/lib.rs)", Allow, "allow[1]"),
    (
        "ceiling",
        "edit_file(src/secret.rs)",
        Ask,
        "operator ask[0]",
    ),
    ("ceiling", "edit_file(README.md)", Ask, "operator default"),
    ("ceiling", "write_file(docs/a.md)", Ask, "operator default"),
    (
        "ceiling",
        "write_file(.git/config)",
        Deny,
        "guard:protected_paths",
    ),
    ("ceiling", "run_shell(echo $(id))", Ask, "default"),
    ("inherit", "read_file(x)", Allow, "allow[0]"),
    ("inherit", "run_shell(ls)", Ask, "default"),
    ("inherit", "list_files(src)", Ask, "operator default"),
    ("narrow", "run_shell(ls)", Deny, "default"),
    ("narrow", "read_file(x)", Allow, "allow[0]"),
];

#[test]
fn decisions() {
    assert!(DECISIONS.len() >= 60);
    let mut failures = Vec::new();
    for (name, call, verdict, rule) in DECISIONS {
        let policy = fixture(name);
        let (tool, arg) = parse_call(call).unwrap();
        let decision = policy.decide(&view(&tool, arg.as_deref()));
        if decision.verdict != *verdict || short(&decision.rule) != *rule {
            failures.push(format!(
                "{name}: {call:?} expected {verdict} by {rule}, got {} by {} ({:?})",
                decision.verdict,
                short(&decision.rule),
                decision.detail
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn decisions_carry_what_they_saw() {
    let policy = fixture("base");
    let decision = policy.decide(&CallView::shell("X=1 cargo test && echo 'a b'"));
    assert_eq!(
        decision.parsed,
        Some(vec![
            vec!["X=1".to_owned(), "cargo".to_owned(), "test".to_owned()],
            vec!["echo".to_owned(), "a b".to_owned()],
        ])
    );
    let decision = policy.decide(&CallView::path("edit_file", "./src/../src/lib.rs"));
    assert_eq!(decision.path.as_deref(), Some("src/lib.rs"));
    let json = serde_json::to_value(&decision).unwrap();
    assert_eq!(json["rule"]["kind"], "listed");
    assert_eq!(json["verdict"], "allow");
}

#[test]
fn details_tell_the_model_why() {
    let policy = fixture("base");
    let detail = |command: &str| policy.decide(&CallView::shell(command)).detail.unwrap();
    assert_eq!(
        detail("cargo test && wget x"),
        "`wget x` matches no allow rule"
    );
    assert_eq!(
        detail("echo $(id)"),
        "not auto-allowed: command substitution `$(id)`"
    );
    assert_eq!(
        detail("cargo test > ../x"),
        "not auto-allowed: redirection outside the workdir `../x`"
    );
    let ceiling = fixture("ceiling");
    let decision = ceiling.decide(&CallView::shell("make"));
    assert_eq!(
        decision.detail.as_deref(),
        Some(
            "the task allows this (allow[3] run_shell(make*)) but the operator policy does not; \
             `make` matches no allow rule"
        )
    );
    assert_eq!(
        decision.to_string(),
        "ask (operator default: the task allows this (allow[3] run_shell(make*)) but the operator \
         policy does not; `make` matches no allow rule)"
    );
}

#[test]
fn cwd_moves_the_redirection_check() {
    let policy = fixture("base");
    let call = CallView {
        cwd: Some("src"),
        ..CallView::shell("cargo test > ../out.txt")
    };
    assert_eq!(policy.decide(&call).verdict, Allow);
    let call = CallView {
        cwd: Some("/tmp"),
        ..CallView::shell("cargo test")
    };
    assert_eq!(policy.decide(&call).verdict, Deny);
}

#[test]
fn on_ask_ceiling() {
    let with = |operator: Option<OnAsk>, task: Option<OnAsk>| {
        let operator = operator.map(|on_ask| PolicySpec {
            on_ask: Some(on_ask),
            ..PolicySpec::default()
        });
        let task = PolicySpec {
            on_ask: task,
            ..PolicySpec::default()
        };
        Policy::build(operator.as_ref(), &[task], settings())
            .unwrap()
            .on_ask()
    };
    assert_eq!(with(None, None), OnAsk::Deny);
    assert_eq!(with(None, Some(OnAsk::Pause)), OnAsk::Pause);
    assert_eq!(with(Some(OnAsk::Fail), None), OnAsk::Fail);
    assert_eq!(with(Some(OnAsk::Deny), Some(OnAsk::Pause)), OnAsk::Deny);
    assert_eq!(with(Some(OnAsk::Deny), Some(OnAsk::Fail)), OnAsk::Fail);
    assert_eq!(with(Some(OnAsk::Pause), Some(OnAsk::Pause)), OnAsk::Pause);
}

#[test]
fn bad_globs_are_errors() {
    let task = spec(&["edit_file(src/[a)"], &[], &[], None);
    let error = Policy::build(None, &[task], settings()).unwrap_err();
    assert!(matches!(error, PolicyError::Glob { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("invalid glob `src/[a` in rule `edit_file(src/[a)`")
    );
}

#[test]
fn hash_is_stable_and_sensitive() {
    let a = fixture("base").hash();
    assert_eq!(a, fixture("base").hash());
    assert_eq!(a.len(), 64);
    assert_ne!(a, fixture("star").hash());
    // The machine's paths do not change it.
    let task = spec(&["read_file"], &[], &[], None);
    let here = Policy::build(None, std::slice::from_ref(&task), settings()).unwrap();
    let there = Policy::build(
        None,
        &[task],
        GuardSettings::new("/elsewhere", Some(PathBuf::from("/root"))),
    )
    .unwrap();
    assert_eq!(here.hash(), there.hash());
}

#[test]
fn summary_is_short() {
    for name in [
        "base",
        "star",
        "default_allow",
        "ceiling",
        "inherit",
        "narrow",
    ] {
        let summary = fixture(name).summary();
        assert!(
            summary.chars().count() <= 300,
            "{name}: {} chars: {summary}",
            summary.len()
        );
    }
    assert_eq!(
        fixture("default_allow").summary(),
        "Policy: denied: run_shell(curl*); anything else is allowed. Shell: every part of a chain \
         must be allowed; no $(…), eval, sh -c or writes outside the workdir."
    );
    let base = fixture("base").summary();
    assert!(
        base.starts_with("Policy: allowed: read_file, list_files, edit_file(src/**)"),
        "{base}"
    );
    assert!(base.contains(" more;"), "{base}");
    assert!(base.contains("denied: run_shell(git push*)"), "{base}");
}

#[test]
fn examples_name_the_deciding_rule() {
    let policy = fixture("base");
    let examples = Examples {
        allow: vec![
            "run_shell(cargo test && curl x)".to_owned(),
            "read_file(src/a.rs)".to_owned(),
        ],
        deny: vec![
            "run_shell(curl x)".to_owned(),
            "edit_file(README.md)".to_owned(),
            "run_shell(sudo id)".to_owned(),
        ],
        ask: vec!["run_shell(cargo publish)".to_owned(), "bad(".to_owned()],
    };
    let failures: Vec<String> = policy
        .check_examples(&examples)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        failures,
        vec![
            "example `run_shell(cargo test && curl x)` should be allow but is deny \
             (deny[1] run_shell(curl*))",
            "example `bad(` (expected ask) is not a call: \
             expected `tool(argument)` with a closing `)`",
        ]
    );
    let failure = &policy.check_examples(&examples)[0];
    assert_eq!(failure.expected, Allow);
    assert_eq!(failure.actual.as_ref().unwrap().verdict, Deny);
}

#[test]
fn examples_of_the_layers_are_kept() {
    let mut task = spec(&["read_file"], &[], &[], None);
    task.examples.allow.push("read_file(x)".to_owned());
    task.examples.deny.push("run_shell(ls)".to_owned());
    let policy = Policy::build(None, &[task], settings()).unwrap();
    assert_eq!(policy.examples().allow, vec!["read_file(x)"]);
    assert!(policy.check_examples(policy.examples()).is_empty());
}

#[test]
fn call_parsing() {
    assert_eq!(
        parse_call("read_file").unwrap(),
        ("read_file".to_owned(), None)
    );
    assert_eq!(
        parse_call(" run_shell(echo \")\" (x)) ").unwrap(),
        ("run_shell".to_owned(), Some("echo \")\" (x)".to_owned()))
    );
    for bad in ["", "(x)", "run shell(x)", "run_shell(x", "run_shell( )"] {
        assert!(parse_call(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn explain_shows_every_part() {
    let policy = fixture("base");
    let explanation = explain(&policy, "run_shell(cargo test && curl x)").unwrap();
    assert_eq!(
        explanation.to_string(),
        "run_shell(cargo test && curl x)\n  \
         verdict: deny\n  \
         rule:    deny[1] run_shell(curl*)\n  \
         sandbox: none (given)\n  \
         parts:\n    \
         allow  cargo test  allow[4] run_shell(cargo test*)\n    \
         deny   curl x      deny[1] run_shell(curl*)\n"
    );
    let explanation = explain(&policy, "run_shell(echo $(id) | tail)").unwrap();
    assert_eq!(
        explanation.to_string(),
        "run_shell(echo $(id) | tail)\n  \
         verdict: deny\n  \
         rule:    default\n  \
         why:     not auto-allowed: command substitution `$(id)`\n  \
         sandbox: none (given)\n  \
         parts:\n    \
         deny   id (via $(…))  default\n    \
         deny   echo $(id)     default\n           \
         unknowns: command substitution `$(id)` — kept back: no full wildcard \
         (`run_shell(*)`, `default: allow`) allows this part, and a narrower rule cannot \
         vouch for values it does not see\n    \
         allow  tail           allow[11] run_shell(tail*)\n  \
         hazards:\n    \
         - command substitution `$(id)`\n"
    );
    let explanation = explain(&policy, "edit_file(./src/lib.rs)").unwrap();
    assert_eq!(
        explanation.to_string(),
        "edit_file(./src/lib.rs)\n  \
         verdict: allow\n  \
         rule:    allow[2] edit_file(src/**)\n  \
         path:    src/lib.rs\n"
    );
    assert!(explain(&policy, "run_shell(").is_err());
}

#[test]
fn explain_under_a_ceiling() {
    let policy = fixture("ceiling");
    let explanation = explain(&policy, "run_shell(cargo test; make)").unwrap();
    let parts: Vec<(Verdict, String)> = explanation
        .parts
        .iter()
        .map(|p| (p.verdict, short(&p.rule)))
        .collect();
    assert_eq!(
        parts,
        vec![
            (Allow, "allow[2]".to_owned()),
            (Ask, "operator default".to_owned())
        ]
    );
    assert_eq!(explanation.decision.verdict, Ask);
}

/// A broad allowlist of everyday programs.
fn broad() -> Policy {
    let task = spec(
        &[
            "run_shell(cat *)",
            "run_shell(echo *)",
            "run_shell(ls*)",
            "run_shell(grep *)",
            "run_shell(cargo test*)",
            "run_shell(git status*)",
            "run_shell(git log*)",
            "run_shell(find *)",
            "run_shell(sed *)",
            "run_shell(awk *)",
            "run_shell(python3 *)",
            "run_shell(rg *)",
            "run_shell(tar *)",
            "run_shell(make*)",
            "run_shell(cd *)",
            "run_shell(touch *)",
            "run_shell(cp *)",
            "run_shell(ln *)",
            "run_shell(head *)",
            "run_shell(tail *)",
            "run_shell(xxd *)",
            "run_shell(git *)",
        ],
        &[],
        &[],
        None,
    );
    Policy::build(None, &[task], settings()).unwrap()
}

#[test]
/// A broad allowlist, and commands that read secrets, write control files
/// or run what the rules cannot see: none may be auto-allowed.
fn attacks_are_never_auto_allowed() {
    let policy = broad();
    let attacks = [
        "cat ~/.ssh/id_rsa",
        "cat ~/'.ssh'/id_rsa",
        "cat ~/.s\\sh/id_rsa",
        "cat /home/u/w/../.ssh/id_rsa",
        "cat ../.ssh/id_rsa",
        "cat ~u/.ssh/id_rsa",
        "cat $(echo ~)/.ssh/id_rsa",
        "cat \"$HOME\"/.ssh/id_rsa",
        "cd ~; cat .ssh/id_rsa",
        "cd ..; cat .ssh/id_rsa",
        "cd /home; cat u/.ssh/id_rsa",
        "cd $HOME && cat .ssh/id_rsa",
        "cat .env",
        "cat ./.env",
        "cat x/../.env",
        "head -c 999 .env",
        "grep -r . .e?v",
        "cat .[e]nv",
        "cat /proc/self/environ",
        "cat /proc/1/environ",
        "xxd /proc/self/environ",
        "cat /proc/self/root/home/u/.ssh/id_rsa",
        "ln -s ~/.ssh k",
        "ln -s ~ h",
        "ln -s / r",
        "cp -r ~ x",
        "tar cf x.tar ~",
        "tar cf x.tar -C ~ .ssh",
        "find / -name id_rsa",
        "find ~ -name x",
        "rg --pre ./x y",
        "rg foo *",
        "find . -exec sh {} +",
        "sed -n '1e id' f",
        "sed 'w /tmp/x' f",
        "awk 'BEGIN{system(\"id\")}'",
        "python3 -c 'import os'",
        "git -c core.pager=sh log",
        "git log --output=.git/hooks/pre-commit",
        "git config core.hooksPath x",
        "echo x > .git/hooks/pre-commit",
        "cp x .git/hooks/pre-commit",
        "touch .github/workflows/x.yml",
        "echo x >> $GITHUB_ENV",
        "echo x > ../x",
        "echo x > /tmp/x",
        "cat x > ~/.bashrc",
        "make SHELL=/bin/sh",
        "cargo test --config x",
        "PATH=. cargo test",
        "cargo test; $X",
        "echo `id`",
        "echo $(id)",
        "ls <(id)",
        "cat <<EOF\nx\nEOF",
        "(cat x)",
        "{ cat x; }",
        "cat x; eval id",
        "exec cat x",
        "cat x & sh",
        "cat x | bash",
        "cat 'x",
        "echo {a,b}",
        "echo $'\\x41'",
        "cd /tmp && ls",
        "ls ~",
        "echo ~/.ssh",
        "ls /home/*/.ssh",
        "cat /home/u/.s[s]h/id_rsa",
        "git clone --template=/tmp/t x",
        "tar xf a.tar --to-command=sh",
        "tar -xf a.tar -I sh",
        "cat x | xargs rm",
        "cargo test && find . -delete -exec rm {} ;",
        "git submodule foreach id",
        "sed -i s/a/b/ .git/config",
        "cp x .github/workflows/",
        "ln -sf x .git/hooks/pre-commit",
        "cat \\\n~/.ssh/id_rsa",
        "ca\\\nt ~/.ssh/id_rsa",
    ];
    let mut allowed = Vec::new();
    for attack in attacks {
        let d = policy.decide(&CallView::shell(attack));
        if d.verdict == Verdict::Allow {
            allowed.push(format!("{attack:?} -> {}", d.rule));
        }
    }
    assert!(allowed.is_empty(), "\n{}", allowed.join("\n"));
}

/// The same allowlist lets everyday commands through.
#[test]
fn everyday_commands_are_allowed() {
    let policy = broad();
    for command in [
        "cargo test --quiet 2>&1 | tail -20",
        "grep -rn \"fn main\" src",
        "ls -la",
        "cat Cargo.toml",
        "git status --short && git log --oneline -5",
        "find src -name '*.rs'",
        "sed -n '1,20p' src/main.rs",
        "awk '{print $1}' Cargo.lock",
        "python3 scripts/gen.py",
        "make -j2",
        "cd src && ls",
        "echo done > target/marker",
        "head -50 README.md",
        "rg -n TODO src",
        "tar czf target/x.tgz src",
        "cat .git/HEAD",
        "git log -p -- src/lib.rs | head -100",
    ] {
        let decision = policy.decide(&CallView::shell(command));
        assert_eq!(decision.verdict, Verdict::Allow, "{command:?}: {decision}");
    }
}

/// Random strings over the shell's special characters: parsing and
/// deciding never panic, and a hazard-free parse only happens for text
/// the allow rules then judge part by part.
#[test]
fn random_input_never_panics() {
    const ALPHABET: &[&str] = &[
        " ", "\n", ";", "&", "|", "<", ">", "(", ")", "$", "`", "'", "\"", "\\", "{", "}", "*",
        "?", "[", "]", "~", "=", "#", "-", "/", ".", "..", "cd", "rm", "-rf", "sudo", "env", "x",
        "bash", "-c", "find", "-exec", "$(", "${", "<<", "2>&1", ".git", ".env", "~/.ssh", "eval",
    ];
    let policy = broad();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    for _ in 0..3000 {
        let length = next() % 12;
        let command: String = (0..length)
            .map(|_| ALPHABET[next() % ALPHABET.len()])
            .collect();
        let decision = policy.decide(&CallView::shell(&command));
        let _ = explain(&policy, &format!("run_shell({command})"));
        if decision.verdict == Verdict::Allow {
            assert!(shell::parse(&command).hazards.is_empty(), "{command:?}");
        }
    }
}

#[test]
fn may_allow_says_which_tools_can_ever_run() {
    let build = |operator: Option<PolicySpec>, task: PolicySpec| {
        Policy::build(operator.as_ref(), &[task], settings()).unwrap()
    };
    let tools = |policy: &Policy| -> Vec<&str> {
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "search_files",
            "run_shell",
        ]
        .iter()
        .copied()
        .filter(|tool| policy.may_allow(tool, false))
        .collect()
    };
    // Only read_file is allowed; the default denies the rest.
    let policy = build(None, spec(&["read_file"], &[], &[], None));
    assert_eq!(tools(&policy), ["read_file"]);
    // A path or command glob leaves the tool offered.
    let policy = build(
        None,
        spec(
            &["edit_file(src/**)", "run_shell(cargo test*)"],
            &[],
            &[],
            None,
        ),
    );
    assert_eq!(tools(&policy), ["edit_file", "run_shell"]);
    // `*` allows every tool; a blanket deny takes one away, a narrow one
    // does not.
    let policy = build(
        None,
        spec(&["*"], &["run_shell", "write_file(x)"], &[], None),
    );
    assert_eq!(
        tools(&policy),
        [
            "read_file",
            "write_file",
            "edit_file",
            "list_files",
            "search_files"
        ]
    );
    // A default of allow offers everything not denied outright.
    let policy = build(None, spec(&[], &["write_file"], &[], Some(Verdict::Allow)));
    assert!(!policy.may_allow("write_file", false) && policy.may_allow("run_shell", false));
    // `ask` is denied headless (on_ask deny or fail)…
    let mut asking = spec(&["read_file"], &[], &["read_file"], Some(Verdict::Ask));
    assert!(tools(&build(None, asking.clone())).is_empty());
    asking.on_ask = Some(OnAsk::Fail);
    assert!(tools(&build(None, asking.clone())).is_empty());
    // …unless a human at a terminal may approve (`--interactive`)…
    assert!(build(None, asking.clone()).may_allow("write_file", true));
    // …and may be approved under pause.
    asking.on_ask = Some(OnAsk::Pause);
    assert_eq!(tools(&build(None, asking)).len(), 6);
    // The operator's side must allow it too.
    let operator = spec(&["read_file", "list_files"], &[], &[], None);
    let policy = build(Some(operator), spec(&["*"], &[], &[], None));
    assert_eq!(tools(&policy), ["read_file", "list_files"]);
}

/// Issue 27: what the analysis cannot see through, under a wildcard
/// allow with a deny rule on `run_shell` (docs/policy.md, "Opaque
/// programs").
#[test]
fn opaque_programs_are_not_allowed_by_a_wildcard_while_a_deny_rule_exists() {
    let build = |operator: Option<PolicySpec>, task: PolicySpec| {
        Policy::build(operator.as_ref(), &[task], settings()).unwrap()
    };
    let wildcard = || spec(&["run_shell(*)"], &["run_shell(touch*)"], &[], None);
    let policy = build(None, wildcard());
    let verdict = |policy: &Policy, command: &str| {
        let decision = policy.decide(&CallView::shell(command));
        (decision.verdict, decision.rule.to_string())
    };
    for command in [
        "./t x",
        "t2/t x",
        "/tmp/t x",
        "/home/u/w/bin/t x",
        "../w/t x",
        "bash s.sh",
        "sh -e s.sh",
        "bash -- s.sh",
        "python3 s.py",
        "python3 -m evil",
        "perl s.pl",
        "node -r ./m.js app.js",
        "node --import=./m.mjs app.js",
        "awk -f p.awk x",
        "awk --file=p.awk x",
        "printf 'touch x' > s.sh; bash s.sh",
        "ls && ./t x",
        "make",
        "make -f evil.mk",
        "make --file=evil.mk all",
        "make -C sub",
    ] {
        assert_eq!(
            verdict(&policy, command),
            (Verdict::Ask, "opaque".to_owned()),
            "{command}"
        );
    }
    for command in [
        "ls -la",
        "/usr/bin/ls -la",
        "/bin/ls",
        "awk '{print}' x",
        "python3 --version",
        "cargo test",
    ] {
        assert_eq!(verdict(&policy, command).0, Verdict::Allow, "{command}");
    }
    // The dynamic loader is a wrapper: the program it runs is a part.
    for command in [
        "/lib64/ld-linux-x86-64.so.2 /usr/bin/touch x",
        "/lib/ld-linux-aarch64.so.1 --library-path /x --argv0 ls touch x",
        "ld.so --preload '' /bin/touch x",
        "/lib/ld-musl-x86_64.so.1 touch x",
    ] {
        assert_eq!(
            verdict(&policy, command),
            (Verdict::Deny, "deny[0] run_shell(touch*)".to_owned()),
            "{command}"
        );
    }
    // Without a deny or ask rule on run_shell there is nothing to dodge;
    // a deny rule on a file tool does not count.
    let nodeny = build(None, spec(&["run_shell(*)"], &["write_file(x)"], &[], None));
    assert_eq!(verdict(&nodeny, "./t x").0, Verdict::Allow);
    // An ask rule counts.
    let asks = build(
        None,
        spec(&["run_shell(*)"], &[], &["run_shell(curl*)"], None),
    );
    assert_eq!(verdict(&asks, "bash s.sh").0, Verdict::Ask);
    // A rule naming the path vouches for it; one that is a wildcard over
    // the program's place does not.
    let named = build(
        None,
        spec(
            &[
                "run_shell(bash s.sh)",
                "run_shell(./build.sh*)",
                "run_shell(bash *)",
            ],
            &["run_shell(touch*)"],
            &[],
            None,
        ),
    );
    assert_eq!(verdict(&named, "bash s.sh").0, Verdict::Allow);
    assert_eq!(verdict(&named, "./build.sh --release").0, Verdict::Allow);
    assert_eq!(verdict(&named, "bash other.sh").0, Verdict::Ask);
    // `default: allow` is a wildcard too, whichever part is opaque.
    let default_allow = build(
        None,
        spec(&[], &["run_shell(touch*)"], &[], Some(Verdict::Allow)),
    );
    assert_eq!(verdict(&default_allow, "ls; ./t x").0, Verdict::Ask);
    assert_eq!(verdict(&default_allow, "ls").0, Verdict::Allow);
    // `opaque: allow` restores the behaviour before; `deny` refuses.
    let mut trusting = wildcard();
    trusting.opaque = Some(Verdict::Allow);
    assert_eq!(
        verdict(&build(None, trusting.clone()), "./t x").0,
        Verdict::Allow
    );
    let mut strict = wildcard();
    strict.opaque = Some(Verdict::Deny);
    assert_eq!(verdict(&build(None, strict), "./t x").0, Verdict::Deny);
    // A task's `opaque: allow` does not loosen the operator's ceiling.
    let operator = spec(&["run_shell(*)"], &["run_shell(touch*)"], &[], None);
    assert_eq!(
        verdict(&build(Some(operator), trusting), "./t x"),
        (Verdict::Ask, "operator opaque".to_owned())
    );
    // The working directory counts: a path under the workdir is opaque
    // from anywhere.
    let decision = policy.decide(&CallView {
        cwd: Some("sub"),
        ..CallView::shell("../t x")
    });
    assert_eq!(decision.verdict, Verdict::Ask);
}

/// Issue 21 item 4: a program read from stdin or a descriptor is never
/// auto-allowed, whatever the rules, like code on stdin.
#[test]
fn programs_read_from_stdin_are_hazards() {
    let policy =
        Policy::build(None, &[spec(&["run_shell(*)"], &[], &[], None)], settings()).unwrap();
    for command in [
        "bash /dev/stdin <<< 'touch x'",
        "sh /dev/fd/0 <<< 'touch x'",
        "bash - <<< 'touch x'",
        "bash /proc/self/fd/0",
        "bash /proc/42/fd/3",
        "bash //dev/./stdin",
        "bash /dev/fd/../fd/0",
        "python3 /dev/stdin",
        "python3 -- /dev/stdin",
        "python3 --",
        "python3 -m code",
        "python3 -m asyncio",
        "perl /dev/stdin",
        "ruby /dev/fd/0",
        "ruby -r /dev/stdin x.rb",
        "php /dev/stdin",
        "php -f /dev/stdin",
        "node /dev/stdin",
        "node --import /dev/stdin app.js",
        "node --import=/dev/stdin app.js",
        "node --loader /dev/fd/0 app.js",
        "node --experimental-loader=/proc/self/fd/0 app.js",
        "node -r /dev/stdin app.js",
        "node --require /dev/stdin app.js",
        "tclsh /dev/stdin",
        "awk -f - x",
        "awk -f /dev/stdin x",
        "awk -f/dev/stdin x",
        "awk --file=- x",
        "sed -f - x",
        "sed -f /dev/stdin x",
        "sed --file=/dev/stdin x",
    ] {
        let decision = policy.decide(&CallView::shell(command));
        assert_eq!(decision.verdict, Verdict::Deny, "{command}");
        let detail = decision.detail.unwrap_or_default();
        assert!(detail.contains("stdin program"), "{command}: {detail}");
    }
}

/// Found by the differential test (tests/suite/differential.rs): bash
/// reads `{v}> f` as a redirection to a descriptor it stores in `v`, not
/// as an argument `{v}`.
#[test]
fn a_named_descriptor_is_a_redirection_not_an_argument() {
    let parsed = super::shell::parse("grep {v}> f9 x");
    assert_eq!(parsed.parts[0].argv, vec!["grep", "x"]);
    assert_eq!(parsed.parts[0].redirections[0].target, "f9");
    assert!(
        parsed
            .hazards
            .iter()
            .any(|h| h.kind == super::shell::HazardKind::ChangesShell)
    );
    // Quoted, or not a name, it stays a word.
    assert_eq!(
        super::shell::parse("grep '{v}'> f").parts[0].argv,
        vec!["grep", "{v}"]
    );
    assert_eq!(
        super::shell::parse("grep {1v}> f").parts[0].argv,
        vec!["grep", "{1v}"]
    );
}

/// Issue 33: under the full sandbox, a full wildcard with nothing to
/// dodge lets every command that parses run; the guards still refuse
/// what they name literally; a deny rule, a narrower rule or a weaker
/// sandbox brings the parser back, and the refusal says why.
#[test]
fn the_full_sandbox_decides_under_a_full_wildcard_with_nothing_to_dodge() {
    let build = |task: PolicySpec, sandbox: SandboxMode| {
        let mut settings = settings();
        settings.sandbox = sandbox;
        Policy::build(None, &[task], settings).unwrap()
    };
    let verdict = |policy: &Policy, command: &str| policy.decide(&CallView::shell(command));
    let everyday = [
        "cat > notes.txt << 'EOF'\nhi\nEOF",
        "python3 -c \"print(1)\"",
        "node -e 'console.log(1)'",
        "python3 - << 'EOF'\nprint(1)\nEOF",
        "ls | xargs wc -l",
        "grep -rl x | xargs grep -n x",
        "for f in tests/*.py; do python3 \"$f\"; done",
        "while read -r f; do echo \"$f\"; done < files",
        "if [ -f pyproject.toml ]; then pip install -e .; fi",
        "cd \"$(git rev-parse --show-toplevel)\" && git status",
        "wc -l $(git ls-files '*.py')",
        "echo $PATH",
        "diff <(sort a) <(sort b)",
        "bash -c 'cargo fmt && cargo test'",
        "timeout 60 npm test",
        "env X=1 cargo test",
        "find lib/ -name '*.sh' -exec wc -l {} + > total.txt",
        "ls ~",
        "cat `ls`",
        "eval \"$(ssh-agent -s)\"",
        "printf 'touch x' > s.sh; bash s.sh",
        "make",
    ];
    for open in [
        spec(&["run_shell(*)"], &[], &[], None),
        spec(&["run_shell"], &[], &[], None),
        spec(&["*"], &["write_file(x)"], &[], None),
        spec(&[], &[], &[], Some(Verdict::Allow)),
    ] {
        let policy = build(open.clone(), SandboxMode::Full);
        for command in everyday {
            let decision = verdict(&policy, command);
            assert_eq!(decision.verdict, Verdict::Allow, "{command}: {decision}");
        }
        // What does not parse, and what a guard names, never runs.
        for (command, rule) in [
            ("echo $(date", "default"),
            ("sudo ls", "guard:blocked_commands"),
            ("cat .env", "guard:blocked_paths"),
            ("cat ~/.ssh/id_rsa", "guard:blocked_paths"),
            ("echo x > .git/config", "guard:protected_paths"),
            ("echo x >> $GITHUB_ENV", "guard:protected_paths"),
        ] {
            let decision = verdict(&policy, command);
            assert_ne!(decision.verdict, Verdict::Allow, "{command}: {decision}");
            assert_eq!(decision.rule.to_string(), rule, "{command}");
        }
        // Without the full sandbox the parser decides, and says why.
        for mode in [SandboxMode::None, SandboxMode::Reduced] {
            let policy = build(open.clone(), mode);
            let decision = verdict(&policy, "echo $PATH");
            assert_ne!(decision.verdict, Verdict::Allow, "{decision}");
            let detail = decision.detail.unwrap_or_default();
            assert!(
                detail.contains("only under the full sandbox")
                    && detail.contains(&format!("`{mode}`")),
                "{detail}"
            );
        }
    }
    // A deny rule on run_shell: unknowns are decided (issue 33 item 2).
    let denying = build(
        spec(
            &["run_shell(*)"],
            &[
                "run_shell(git push*)",
                "run_shell(curl*)",
                "run_shell(rm -rf*)",
            ],
            &[],
            None,
        ),
        SandboxMode::Full,
    );
    for command in [
        "echo $(id)",
        "ls ~",
        "ls | xargs wc -l",
        "grep -rl x | xargs grep -n x",
        "wc -l $(git ls-files '*.py')",
        "cd \"$(git rev-parse --show-toplevel)\" && git status",
        "for f in *.txt; do wc -l \"$f\"; done",
        "bash -c 'cargo fmt && cargo test'",
        "timeout 60 npm test",
        "find . -name '*.py' -exec grep -l x {} +",
        "cat > n.txt << EOF\nhi $USER\nEOF",
        "diff <(sort a) <(sort b)",
        "echo $PATH",
        // Operands that no option starts, placeholders with a known start,
        // literal arithmetic, `sh -c` code that reads alike in bash.
        "for f in a b; do sort -u \"src/$f.rs\" -o \"out/$f.rs\"; done",
        "find . -name '*.txt' -exec sed -i 's/a/b/' {} \\;",
        "find src -execdir sort {} \\;",
        "cat list.txt | xargs -I{} echo \"item {}\"",
        "ls | xargs -I % mv % ./bak/%.old",
        "git add \"src/$F.rs\" && git commit -m \"fix: $MSG\"",
        "echo $((60*60*24))",
        "echo ${x:-default} ${#x} ${x%.jpg}",
        "sh -c 'cargo fmt && cargo test'",
        "[ -z \"$VAR\" ] && echo empty",
        "[ ! -f \"$f\" ] || test \"$a\" = \"$b\"",
        "shopt -s globstar nullglob",
        "trap 'echo bye' EXIT",
        "export FOO=\"$BAR\"",
        "git config --global user.name \"Dev\"",
        "case \"$1\" in start|begin) echo s;; (stop) echo t;; *) ls; esac",
    ] {
        let decision = verdict(&denying, command);
        assert_eq!(decision.verdict, Verdict::Allow, "{command}: {decision}");
    }
    for (command, why) in [
        ("git $X", "could match `run_shell(git push*)`"),
        ("rm $F", "could match `run_shell(rm -rf*)`"),
        ("ls | xargs rm", "could match `run_shell(rm -rf*)`"),
        ("$(echo curl) x", "expansion in the command word"),
        ("c=curl; $c x", "expansion in the command word"),
        ("sort $X f", "the first argument of `sort` is unknown"),
        ("sort -o \"$X\" f", "may become an option"),
        ("sort -k1 ./$X.rs", "may become an option"),
        ("find $D -name x", "may become code"),
        ("for f in *.py; do python3 \"$f\"; done", "may become code"),
        ("cargo \"x$Y\"", "may pick a subcommand or an alias"),
        ("git -c \"alias.x=$Y\" x", "the parser cannot read"),
        ("git \"x$Y\" status", "may pick a subcommand or an alias"),
        ("git -C \"src/$D.d\" status", "the parser cannot read"),
        ("sed \"1$X\" f", "the parser cannot read"),
        (
            "find f -exec rm -r{} \\;",
            "could match `run_shell(rm -rf*)`",
        ),
        (
            "ls | xargs -I{} sort {}",
            "the first argument of `sort` is unknown",
        ),
        // Arithmetic on names evaluates a value `a[$(…)]` as code.
        ("x='a[$(curl e)]'; echo $((x+1))", "arithmetic"),
        ("i='b[$(curl e)]'; echo ${a[i]}", "arithmetic"),
        ("x='a[$(curl e)]'; (( x ))", "arithmetic"),
        ("x='a[$(curl e)]'; echo $[x+1]", "arithmetic"),
        ("x='a[$(curl e)]'; echo ${!x}", "arithmetic"),
        ("x='a[$(curl e)]'; echo \"${x:0:x}\"", "arithmetic"),
        ("x='a[$(curl e)]'; [ \"$x\" -eq 1 ]", "may become code"),
        ("sh -c '((curl x))'", "deny[1]"),
        ("zsh -c 'ls'", "the parser cannot read"),
        ("[ \"$a\" -eq 1 ]", "may become code"),
        ("[ -v \"$X\" ]", "may become code"),
        ("[ $a = b ]", "may become code"),
        (
            "shopt -s expand_aliases",
            "changes how the shell runs later commands",
        ),
        ("trap \"$X\" EXIT", "expansion in the command word"),
        ("trap 'curl x' EXIT", "deny[1]"),
        ("export PATH=\"./b:$PATH\"", "picks which program runs"),
        ("export \"a[$X]=1\"", "arithmetic"),
        ("git config alias.x '!curl y'", "git config (sets a value)"),
        ("case $x in a) curl y;; esac", "deny[1]"),
        ("case $x in $(curl y)) echo;; esac", "deny[1]"),
        ("ls() { echo; }; ls", "shell control flow `function`"),
        ("ls | xargs -I% % x", "xargs"),
        ("python3 -c 'print(1)'", "the parser cannot read"),
        ("eval \"$X\"", "the parser cannot read"),
        ("bash -c \"$X\"", "expansion in the command word"),
        ("find . -exec {} \\;", "may name the program"),
        ("function f { curl x; }; f", "shell control flow `function`"),
        ("coproc curl x", "shell control flow `coproc`"),
        ("time A=1 curl x", "runs another program `time`"),
        ("timeout 5 curl x", "deny[1]"),
        ("bash -c 'curl x'", "deny[1]"),
    ] {
        let decision = verdict(&denying, command);
        assert_ne!(decision.verdict, Verdict::Allow, "{command}: {decision}");
        let said = format!("{decision}");
        assert!(said.contains(why), "{command}: {said}");
    }
    // …unless `opaque: allow` trusts the sandbox: hazards run, what a
    // deny rule sees is still denied, nested parts included.
    let mut trusting = spec(&["run_shell(*)"], &["run_shell(git push*)"], &[], None);
    trusting.opaque = Some(Verdict::Allow);
    let trusting = build(trusting, SandboxMode::Full);
    assert_eq!(verdict(&trusting, "git $(id)").verdict, Verdict::Allow);
    assert_eq!(
        verdict(&trusting, "bash -c 'git push origin'").verdict,
        Verdict::Deny
    );
    // A narrower rule does not vouch for what it cannot see.
    let narrow = build(
        spec(&["run_shell(git *)"], &[], &[], None),
        SandboxMode::Full,
    );
    assert_ne!(verdict(&narrow, "git $X").verdict, Verdict::Allow);
    assert_eq!(verdict(&narrow, "git status").verdict, Verdict::Allow);
    // The model is told the truth.
    let open = build(spec(&["run_shell(*)"], &[], &[], None), SandboxMode::Full);
    assert!(
        open.summary().contains("any command runs"),
        "{}",
        open.summary()
    );
    assert!(!open.summary().contains("no $("));
    let strict = build(spec(&["run_shell(*)"], &[], &[], None), SandboxMode::None);
    assert!(strict.summary().contains("no $("));
    // Under deny rules what the parser reads runs too: it says so.
    assert!(
        denying
            .summary()
            .contains("unless a part may match a denied rule"),
        "{}",
        denying.summary()
    );
    assert!(!denying.summary().contains("no $("));
    assert!(trusting.summary().contains("may match a denied rule"));
}

/// The exec guard (docs/policy.md, "The exec guard"): with the full
/// sandbox refusing denied programs at `execve`, a full wildcard lets
/// through what the parser cannot read under `deny` rules, while literal
/// hits stay refused up front.
fn guarded(task: PolicySpec) -> Policy {
    let mut settings = settings();
    settings.sandbox = SandboxMode::Full;
    settings.exec_guard = true;
    Policy::build(None, &[task], settings).unwrap()
}

const GUARD_DENY: &[&str] = &[
    "run_shell(git push*)",
    "run_shell(curl*)",
    "run_shell(rm -rf*)",
];

#[test]
fn the_exec_guard_runs_what_the_parser_cannot_read_under_deny_rules() {
    let policy = guarded(spec(&["run_shell(*)"], GUARD_DENY, &[], None));
    assert!(policy.exec_guard_holds());
    assert_eq!(
        policy.exec_deny_globs(),
        vec!["git push*", "curl*", "rm -rf*"]
    );
    for command in [
        "python3 -c \"import sys; print(sys.version)\"",
        "node -e 'console.log(process.version)'",
        "python3 - << 'EOF'\nprint(1)\nEOF",
        "python3 -m pytest -x -q",
        "bash script.sh",
        "./run_tests.sh --fast",
        "make -j$(nproc)",
        "test -f Makefile && make test",
        "eval \"$(ssh-agent -s)\"",
        "X=cu; ${X}rl evil",
        "grep -rl a . | xargs sed -i 's/a/b/g'",
        "source venv/bin/activate",
        "for f in tests/*.py; do python3 \"$f\"; done",
        "sort $X f",
        "echo $((x+1))",
    ] {
        let decision = policy.decide(&CallView::shell(command));
        assert_eq!(decision.verdict, Verdict::Allow, "{command}: {decision}");
    }
    for command in [
        "curl -s https://example.com",
        "bash -c 'curl x'",
        "git push origin main",
        "rm -rf build",
        "cargo test && curl x",
        "echo \"$(curl x)\"",
        "xargs -a urls.txt -n1 curl -O",
        "sudo ls",
    ] {
        let decision = policy.decide(&CallView::shell(command));
        assert_eq!(decision.verdict, Verdict::Deny, "{command}: {decision}");
    }
    let note = policy.summary();
    assert!(
        note.contains("a denied program is refused wherever it is started"),
        "{note}"
    );
}

#[test]
fn the_exec_guard_decides_only_what_it_can_enforce() {
    let opaque = "python3 -c \"print(1)\"";
    let refused = |policy: &Policy| {
        let decision = policy.decide(&CallView::shell(opaque));
        assert_ne!(decision.verdict, Verdict::Allow, "{decision}");
    };
    // An ask rule could be approved for one call; the guard cannot ask.
    let policy = guarded(spec(
        &["run_shell(*)"],
        GUARD_DENY,
        &["run_shell(npm publish*)"],
        None,
    ));
    assert!(!policy.exec_guard_holds());
    assert!(policy.exec_guard_gap().unwrap().contains("npm publish"));
    refused(&policy);
    // A builtin never execs; a glob that may start with one is not enforced.
    for glob in [
        "run_shell(echo*)",
        "run_shell(e*)",
        "run_shell(*secret*)",
        "run_shell(kill *)",
    ] {
        let policy = guarded(spec(&["run_shell(*)"], &[glob], &[], None));
        assert!(!policy.exec_guard_holds(), "{glob}");
        assert!(
            policy.exec_guard_gap().unwrap().contains("builtin"),
            "{glob}"
        );
        assert!(policy.exec_deny_globs().is_empty(), "{glob}");
        refused(&policy);
    }
    // An explicit `policy.opaque: ask` keeps opaque code back.
    let mut explicit = spec(&["run_shell(*)"], GUARD_DENY, &[], None);
    explicit.opaque = Some(Verdict::Ask);
    let policy = guarded(explicit);
    assert!(!policy.exec_guard_holds());
    refused(&policy);
    // Without the guard, or without the full sandbox, the parser decides.
    let mut full = settings();
    full.sandbox = SandboxMode::Full;
    let policy = Policy::build(
        None,
        &[spec(&["run_shell(*)"], GUARD_DENY, &[], None)],
        full,
    )
    .unwrap();
    assert!(!policy.exec_guard_holds());
    assert!(policy.exec_guard_gap().is_none());
    refused(&policy);
    let mut reduced = settings();
    reduced.sandbox = SandboxMode::Reduced;
    reduced.exec_guard = true;
    let policy = Policy::build(
        None,
        &[spec(&["run_shell(*)"], GUARD_DENY, &[], None)],
        reduced,
    )
    .unwrap();
    assert!(!policy.exec_guard_holds());
    refused(&policy);
    // A narrower allow rule keeps deciding its unknowns (`git $X`).
    let policy = guarded(spec(&["run_shell(git *)"], GUARD_DENY, &[], None));
    let decision = policy.decide(&CallView::shell("git $X"));
    assert_ne!(decision.verdict, Verdict::Allow, "{decision}");
}

#[test]
fn which_globs_the_exec_guard_can_enforce() {
    use super::decide::enforced_at_exec;
    for glob in [
        "curl*",
        "git push*",
        "rm -rf*",
        "cu*",
        "npm publish",
        "docker run *",
    ] {
        assert!(enforced_at_exec(glob), "{glob}");
    }
    for glob in [
        "*",
        "*curl*",
        "e*",
        "echo *",
        "kill*",
        "[c]url*",
        "/usr/bin/curl*",
        "A=1 curl*",
        "",
        "test -f x",
        "'curl'*",
        "$X*",
    ] {
        assert!(!enforced_at_exec(glob), "{glob}");
    }
}

#[test]
fn under_the_exec_guard_a_denied_name_in_unread_code_is_refused_up_front() {
    let policy = guarded(spec(&["run_shell(*)"], GUARD_DENY, &[], None));
    for command in [
        "python3 -c \"import os; os.system('curl -s x')\"",
        "bash /dev/stdin <<< 'git push origin main'",
        "python3 - << 'EOF'\nimport os\nos.system('rm -rf build')\nEOF",
        "X='/usr/bin/curl x'; eval \"$X\"",
    ] {
        let decision = policy.decide(&CallView::shell(command));
        assert_eq!(decision.verdict, Verdict::Deny, "{command}: {decision}");
        assert!(
            decision
                .detail
                .as_deref()
                .unwrap_or_default()
                .contains("is named where"),
            "{command}: {decision}"
        );
    }
    // What the parser reads alone is allowed whatever it names; and a
    // name only inside a longer word is not the program.
    for command in [
        "git commit -m 'drop curl'",
        "echo curl",
        "grep -rn 'git push' docs",
        "python3 -c \"print('libcurl')\"",
        "python3 -c 'import sys; print(sys.argv)' x-curl",
    ] {
        let decision = policy.decide(&CallView::shell(command));
        assert_eq!(decision.verdict, Verdict::Allow, "{command}: {decision}");
    }
}
