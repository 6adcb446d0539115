//! Secrets by shape (issue 10, item 5; docs/security.md S7): credentials read from
//! workspace files, from `.git/config`, and the base64 of a known secret
//! are masked in every output and in what is sent to the model, and
//! counted in the transcript.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::git;
use crate::support::server::Server;
use crate::support::wire;
use crate::support::{Run, Ybs};

/// A GitHub token shape (not a real token).
const GHP: &str = "ghp_Zq8Tw2Lm5Rx9Vb3Nc7Kd1Hf6Jg4Ps0Ya2Ue8X";
/// `x-access-token:ghs_…`, base64, as actions/checkout writes it.
const EXTRAHEADER_B64: &str = "eC1hY2Nlc3MtdG9rZW46Z2hzX1FwN1J3M0xtOVR4NVZiMk5jOEtkNEhmMUpn";
/// An AWS key pair and a PEM private key (not real ones).
const AWS_ID: &str = "AKIAQ3EXAMPLE7ZX2MPL";
const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKY";
const PEM_BODY: &str = "MIIEowIBAAKCAQEA0Zx7examplebodyQ1w2e3r4t5y6u7i8o9p0";
/// A secret ybs knows from its environment (`*_TOKEN` is scrubbed).
const ENV_SECRET: &str = "deploy-canary-58f3b1e9a7";

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Every file under `root` but the inputs that hold the secrets.
fn assert_absent_from_files(root: &Path, inputs: &[&str], needles: &[&str]) {
    fn walk(root: &Path, dir: &Path, inputs: &[&str], needles: &[&str]) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if inputs.contains(&relative.as_str()) || relative.starts_with(".git/objects") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, inputs, needles);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let text = String::from_utf8_lossy(&bytes);
                for needle in needles {
                    assert!(!text.contains(needle), "{needle} found in {relative}");
                }
            }
        }
    }
    walk(root, root, inputs, needles);
}

fn assert_absent_from_run(run: &Run, needles: &[&str]) {
    for needle in needles {
        assert!(!run.stdout.contains(needle), "{needle} on stdout");
        assert!(!run.stderr.contains(needle), "{needle} on stderr");
    }
}

#[test]
fn credentials_read_by_allowed_tools_reach_no_output_and_not_the_model() {
    let ybs = Ybs::new().env("DEPLOY_TOKEN", ENV_SECRET);
    git(ybs.path(), &["init", "-q", "-b", "main"]);
    let extraheader = format!(
        "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic {EXTRAHEADER_B64}\n"
    );
    let mut git_config = std::fs::read_to_string(ybs.path().join(".git/config")).unwrap();
    git_config.push_str(&extraheader);
    ybs.file(".git/config", &git_config);
    ybs.file("config/token.txt", &format!("token: {GHP}\n"));
    ybs.file(
        "config/aws.ini",
        &format!(
            "[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n\
             -----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\n"
        ),
    );
    // The env secret, base64-encoded after a prefix (so at an offset).
    let encoded = base64(format!("user:{ENV_SECRET}").as_bytes());
    ybs.file("config/blob.txt", &format!("auth={encoded}\n"));
    ybs.file(
        "t.yaml",
        "prompt: Look at the config.\npolicy:\n  default: deny\n  allow:\n    - read_file\n",
    );
    let server = Server::start(vec![
        wire::openai_sse_call("c1", "read_file", &json!({"path": "config/token.txt"})),
        wire::openai_sse_call("c2", "read_file", &json!({"path": ".git/config"})),
        wire::openai_sse_call("c3", "read_file", &json!({"path": "config/blob.txt"})),
        wire::openai_sse_call("c4", "read_file", &json!({"path": "config/aws.ini"})),
        wire::openai_sse_answer("done"),
    ]);
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
        "--no-commit",
        "--record",
        "rec.json",
        "--junit",
        "ybs-out/junit.xml",
    ]);
    run.expect_code(0);

    // The base64 run that depends on the secret's bytes alone.
    let encoded_core = &encoded[8..encoded.len() - 4];
    let needles = [
        GHP,
        EXTRAHEADER_B64,
        ENV_SECRET,
        encoded_core,
        AWS_ID,
        AWS_SECRET,
        PEM_BODY,
    ];
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    for request in &requests {
        let body = String::from_utf8_lossy(&request.body);
        for needle in needles {
            assert!(!body.contains(needle), "{needle} sent to the model: {body}");
        }
    }
    // The model saw that something was there, masked.
    let last = String::from_utf8_lossy(&requests[4].body).into_owned();
    assert!(last.contains("token: [REDACTED]"), "{last}");
    assert!(last.contains("AUTHORIZATION: basic [REDACTED]"), "{last}");
    assert_absent_from_run(&run, &needles);
    assert_absent_from_files(
        ybs.path(),
        &[
            "config/token.txt",
            "config/blob.txt",
            "config/aws.ini",
            ".git/config",
        ],
        &needles,
    );
    assert!(ybs.exists("rec.json"));

    let transcript: Value = run.json("ybs-out/t/transcript.json");
    assert_eq!(
        transcript["redactions"]["github_token"], 1,
        "{transcript:#}"
    );
    assert_eq!(transcript["redactions"]["basic_auth_header"], 1);
    assert_eq!(transcript["redactions"]["secret_value_base64"], 1);
    assert_eq!(transcript["redactions"]["aws_access_key"], 1);
    assert_eq!(transcript["redactions"]["aws_secret_key"], 1);
    assert_eq!(transcript["redactions"]["private_key"], 1);
    let events = run.events("t");
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = types.iter().position(|t| *t == "task.redactions").unwrap();
    assert_eq!(types[at + 1], "task.finished");
    assert_eq!(types.iter().filter(|t| **t == "task.redactions").count(), 1);
}

#[test]
fn a_secret_the_model_writes_is_masked_in_the_outputs_but_lands_in_the_file() {
    // What the model puts in a tool call is masked in every output too;
    // the tool still gets the real arguments.
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: Write the key.\npolicy:\n  default: allow\n",
    );
    let key = "AKIAZ7QW3ER5TY8UI2OP";
    let server = Server::start(vec![
        wire::openai_sse_call(
            "c1",
            "write_file",
            &json!({"path": "k.txt", "content": format!("id={key}\n")}),
        ),
        wire::openai_sse_answer("done"),
    ]);
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
        "--no-commit",
    ]);
    run.expect_code(0);
    assert_eq!(ybs.read("k.txt"), format!("id={key}\n"));
    assert_absent_from_run(&run, &[key]);
    assert_absent_from_files(ybs.path(), &["k.txt"], &[key]);
    let transcript: Value = run.json("ybs-out/t/transcript.json");
    assert!(
        transcript["redactions"]["aws_access_key"].as_u64().unwrap() >= 1,
        "{transcript:#}"
    );
}

#[test]
fn a_run_without_secrets_has_empty_redactions() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: Say hi.\npolicy:\n  default: allow\n");
    let server = Server::start(vec![wire::openai_sse_answer("hi there")]);
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
        "--no-commit",
    ]);
    run.expect_code(0);
    let transcript: Value = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["redactions"], json!({}));
    let events = run.events("t");
    assert!(events.iter().all(|e| e["type"] != "task.redactions"));
}

#[test]
fn the_default_blocked_paths_cover_the_credential_files() {
    let ybs = Ybs::new();
    ybs.file("open.yaml", "prompt: p\npolicy: { default: allow }\n");
    for path in [
        "~/.git-credentials",
        "~/.netrc",
        "~/.docker/config.json",
        "~/.npmrc",
        "~/.pypirc",
        "~/.kube/config",
        "$HOME/.kube",
        "~/.config/gh/hosts.yml",
    ] {
        let call = format!("run_shell(cat {path})");
        let run = ybs.run(["policy", "explain", "--task", "open.yaml", &call]);
        run.expect_code(0);
        assert!(
            run.stdout.contains("verdict: deny") && run.stdout.contains("guard:blocked_paths"),
            "{call}:\n{}",
            run.stdout
        );
    }
    // A project's own .npmrc is not the user's.
    let run = ybs.run([
        "policy",
        "explain",
        "--task",
        "open.yaml",
        "run_shell(cat .npmrc)",
    ]);
    run.expect_code(0);
    assert!(run.stdout.contains("verdict: allow"), "{}", run.stdout);
}
