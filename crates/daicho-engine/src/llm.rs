//! The `llm` executor: one request to an OpenAI-compatible `/chat/completions` endpoint
//! (OpenAI, Ollama, vLLM, llama.cpp, OpenRouter, …). No automatic retry: a failed call is a
//! failed run, counted like any other (S3). Token usage from the response is recorded (S9).

use std::sync::OnceLock;
use std::time::Duration;

use daicho_core::Task;
use daicho_core::policy::with_correction;
use serde::{Deserialize, Serialize};

use crate::config::LlmConfig;
use crate::executor::{ExecOutcome, RunContext};

#[derive(Debug, Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    stream: bool,
}

#[derive(Debug, Serialize)]
struct Message<'a> {
    role: &'a str,
    content: &'a str,
}

#[derive(Debug, Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    message: ResponseMessage,
}

#[derive(Debug, Deserialize)]
struct ResponseMessage {
    content: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// Fills a prompt template with task fields: `{id}`, `{title}`, `{body}`, `{project}`,
/// `{evidence}`, `{type}`, `{assignee}`, `{result}`. Plain replacement; task text is never
/// interpreted.
pub fn render_prompt(template: &str, task: &Task) -> String {
    let fields = [
        ("{id}", task.id.to_string()),
        ("{title}", task.title.clone()),
        ("{body}", task.body.clone()),
        ("{project}", task.project.clone()),
        ("{evidence}", task.evidence.clone()),
        ("{type}", task.work_type.clone()),
        ("{assignee}", task.assignee.clone()),
        ("{result}", task.result.clone()),
    ];
    // One pass over the template, so a field's value is never itself searched for placeholders.
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'scan: while !rest.is_empty() {
        for (name, value) in &fields {
            if let Some(after) = rest.strip_prefix(name) {
                out.push_str(value);
                rest = after;
                continue 'scan;
            }
        }
        let c = rest.chars().next().expect("rest is not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        // reqwest is built without a default crypto provider: ring, installed once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder().build().unwrap_or_default()
    })
}

/// The user message a run sends: the template filled in, then the run's correction section.
pub fn user_message(config: &LlmConfig, ctx: &RunContext) -> String {
    with_correction(&render_prompt(&config.prompt, &ctx.task), ctx.correction.as_deref())
}

/// Runs an `llm` action: one chat-completions request, no retry.
pub async fn run_llm(config: &LlmConfig, ctx: &RunContext, timeout: Duration) -> ExecOutcome {
    let failure = |error: String| ExecOutcome::Failure { error, timeout: false };
    let key = match &config.api_key_env {
        Some(var) => match std::env::var(var) {
            Ok(key) if !key.trim().is_empty() => Some(key),
            _ => return failure(format!("the API key variable {var} is not set")),
        },
        None => None,
    };
    let user = user_message(config, ctx);
    let mut messages = Vec::new();
    if !config.system.trim().is_empty() {
        messages.push(Message { role: "system", content: &config.system });
    }
    messages.push(Message { role: "user", content: &user });
    let body = ChatRequest { model: &config.model, messages, max_tokens: config.max_tokens, stream: false };
    let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
    let mut request =
        client().post(&url).timeout(timeout).header("Idempotency-Key", &ctx.idempotency_key).json(&body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) if e.is_timeout() => {
            return ExecOutcome::Failure {
                error: format!("{url}: timed out after {timeout:?}"),
                timeout: true,
            };
        }
        Err(e) => return failure(format!("{url}: {e}")),
    };
    let status = response.status();
    let text = match response.text().await {
        Ok(text) => text,
        Err(e) => return failure(format!("{url}: reading the response: {e}")),
    };
    if !status.is_success() {
        let excerpt: String = text.chars().take(500).collect();
        return failure(format!("{url}: HTTP {status}: {excerpt}"));
    }
    let parsed: ChatResponse = match serde_json::from_str(&text) {
        Ok(parsed) => parsed,
        Err(e) => return failure(format!("{url}: not a chat-completions response: {e}")),
    };
    let content = parsed.choices.into_iter().next().and_then(|c| c.message.content).unwrap_or_default();
    if content.trim().is_empty() {
        return failure(format!("{url}: the response has no message content"));
    }
    let tokens = parsed.usage.map(|u| (u.prompt_tokens.unwrap_or(0), u.completion_tokens.unwrap_or(0)));
    ExecOutcome::Success { result: content, tasks: Vec::new(), tokens, push_error: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use daicho_core::TaskId;

    #[test]
    fn the_prompt_is_filled_once_without_reinterpreting_values() {
        let mut task = Task::new(TaskId::new(7), "write {body}", "s", jiff::Timestamp::UNIX_EPOCH);
        task.body = "the {title} body".into();
        let out = render_prompt("{id}: {title} / {body} {unknown}", &task);
        assert_eq!(out, "T-0007: write {body} / the {title} body {unknown}");
    }
}
