//! Keys (docs/providers.md, docs/security.md S5, S7): which endpoint receives the
//! operator's key, and a missing key for a vendor endpoint.

use super::{Keys, assert_no_secrets, scratch, task_yaml, transcript};
use crate::support::server::{Request, Server};
use crate::support::wire;

fn answer(provider: &str) -> crate::support::server::Reply {
    match provider {
        "anthropic" => wire::anthropic_sse_answer("ok"),
        _ => wire::openai_sse_answer("ok"),
    }
}

fn base(provider: &str, server: &Server) -> String {
    match provider {
        "anthropic" => server.url.clone(),
        _ => format!("{}/v1", server.url),
    }
}

/// Any key in the request's headers or body.
fn carried_keys(request: &Request, keys: &Keys) -> Vec<String> {
    let mut text: String = request
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\n"))
        .collect();
    text.push_str(&String::from_utf8_lossy(&request.body));
    keys.all()
        .into_iter()
        .filter(|key| text.contains(*key))
        .map(str::to_owned)
        .collect()
}

#[test]
fn an_endpoint_chosen_by_the_repository_never_gets_the_key() {
    for provider in ["openai", "anthropic"] {
        // From the task file.
        let server = Server::start(vec![answer(provider)]);
        let task = format!(
            "provider: {provider}\nmodel: m\nendpoint: {}\n{}",
            base(provider, &server),
            task_yaml("")
        );
        let (ybs, keys) = scratch(&task);
        let run = ybs.run(["run", "t.yaml", "--no-commit"]);
        run.expect_code(0);
        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(carried_keys(&requests[0], &keys), Vec::<String>::new());
        assert_eq!(requests[0].header("authorization"), None);
        assert_eq!(requests[0].header("x-api-key"), None);
        assert_no_secrets(&ybs, &run, &keys);

        // From the repository's ./.ybs.json.
        let server = Server::start(vec![answer(provider)]);
        let (ybs, keys) = scratch(&task_yaml(""));
        ybs.file(
            ".ybs.json",
            &format!(
                r#"{{"llm": {{"provider": "{provider}", "model": "m", "endpoint": "{}"}}}}"#,
                base(provider, &server)
            ),
        );
        let run = ybs.run(["run", "t.yaml", "--no-commit"]);
        run.expect_code(0);
        assert_eq!(
            carried_keys(&server.requests()[0], &keys),
            Vec::<String>::new()
        );
        assert_no_secrets(&ybs, &run, &keys);
    }
}

#[test]
fn an_endpoint_chosen_by_the_operator_gets_only_its_providers_key() {
    for provider in ["openai", "anthropic"] {
        let expected = |keys: &Keys| match provider {
            "anthropic" => vec![keys.anthropic.clone()],
            _ => vec![keys.openai.clone()],
        };
        // `--endpoint`, over a task file that names another endpoint.
        let server = Server::start(vec![answer(provider)]);
        let task = format!(
            "provider: {provider}\nmodel: m\nendpoint: http://127.0.0.1:9/v1\n{}",
            task_yaml("")
        );
        let (ybs, keys) = scratch(&task);
        let endpoint = base(provider, &server);
        let run = ybs.run(["run", "t.yaml", "--no-commit", "--endpoint", &endpoint]);
        run.expect_code(0);
        assert_eq!(carried_keys(&server.requests()[0], &keys), expected(&keys));
        assert_no_secrets(&ybs, &run, &keys);

        // `--config FILE` is the operator's too.
        let server = Server::start(vec![answer(provider)]);
        let (ybs, keys) = scratch(&task_yaml(""));
        ybs.file(
            "operator.json",
            &format!(
                r#"{{"llm": {{"provider": "{provider}", "model": "m", "endpoint": "{}"}}}}"#,
                base(provider, &server)
            ),
        );
        let run = ybs.run(["run", "t.yaml", "--no-commit", "--config", "operator.json"]);
        run.expect_code(0);
        assert_eq!(carried_keys(&server.requests()[0], &keys), expected(&keys));
        assert_no_secrets(&ybs, &run, &keys);
    }
    // OPENAI_BASE_URL from the operator's environment.
    let server = Server::start(vec![answer("openai")]);
    let (ybs, keys) = scratch(&task_yaml(""));
    let ybs = ybs.env("OPENAI_BASE_URL", &format!("{}/v1", server.url));
    let run = ybs.run([
        "run",
        "t.yaml",
        "--no-commit",
        "--provider",
        "openai",
        "--model",
        "m",
    ]);
    run.expect_code(0);
    assert_eq!(
        carried_keys(&server.requests()[0], &keys),
        vec![keys.openai.clone()]
    );
    assert_no_secrets(&ybs, &run, &keys);
}

#[test]
fn a_missing_key_for_a_vendor_endpoint_is_an_auth_error_before_any_request() {
    for (provider, var, other_var) in [
        ("openai", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"),
    ] {
        // Any request to the vendor would go through this proxy, and be
        // seen here.
        let proxy = Server::start(vec![]);
        // No key for the provider (the builder scrubs them); the other
        // vendor's key is set, and not used instead.
        let other = Keys::new();
        let ybs = proxied(crate::support::Ybs::new(), &proxy).env(other_var, &other.openai);
        ybs.file("t.yaml", &task_yaml(""));
        ybs.file(".ybs.json", r#"{"agent": {"retry_attempts": 0}}"#);
        let args = [
            "run",
            "t.yaml",
            "--no-commit",
            "--provider",
            provider,
            "--model",
            "m",
        ];
        let run = ybs.run(args);
        run.expect_code(4);
        assert!(proxy.requests().is_empty(), "no request attempted");
        let transcript = transcript(&run);
        assert_eq!(transcript["status"], "error");
        assert_eq!(transcript["reason"], "auth_error");
        let message = transcript["message"].as_str().unwrap();
        assert!(message.contains(var), "{message}");
        assert!(transcript["llm_calls"].as_array().unwrap().is_empty());
        assert!(transcript["retries"].as_array().unwrap().is_empty());
        let junit = ybs.read("ybs-out/junit.xml");
        assert!(
            junit.contains("<error") && junit.contains("auth_error"),
            "{junit}"
        );
        assert!(ybs.exists("ybs-out/summary.md"));
        assert!(ybs.exists("ybs-out/t/events.jsonl"));
        assert!(run.stdout.contains(var), "{}", run.stdout);
        assert_no_secrets(&ybs, &run, &other);

        // The control: with the key set, the request does reach the proxy.
        let ybs = ybs.env(var, &other.anthropic);
        let run = ybs.run(args);
        run.expect_code(4);
        let seen = proxy.requests();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].method, "CONNECT");
        assert!(seen[0].path.starts_with("api."), "{}", seen[0].path);
        assert_no_secrets(&ybs, &run, &other);
    }
}

/// Routes ybs's HTTPS requests through `proxy`.
fn proxied(ybs: crate::support::Ybs, proxy: &Server) -> crate::support::Ybs {
    ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
        .into_iter()
        .fold(ybs, |ybs, var| ybs.env(var, &proxy.url))
        .env("NO_PROXY", "")
        .env("no_proxy", "")
}

#[test]
fn ollama_host_from_the_environment() {
    let server = Server::start(vec![wire::ollama_answer("ok")]);
    let host = server.url.trim_start_matches("http://").to_owned();
    let (ybs, keys) = scratch(&task_yaml(""));
    let ybs = ybs.env("OLLAMA_HOST", &host);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--no-commit",
        "--provider",
        "ollama",
        "--model",
        "m",
    ]);
    run.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests[0].path, "/api/chat");
    assert_eq!(carried_keys(&requests[0], &keys), Vec::<String>::new());
    assert_no_secrets(&ybs, &run, &keys);
}
