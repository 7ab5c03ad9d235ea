//! Reads a streamed chat completion (server-sent event lines, or the chunk
//! typed chunks themselves in process) into a [`ChatOutcome`]: content and tool-call deltas joined, usage from the last
//! chunk, TTFT at the first delta that carries text or a call.

use super::{ChatCall, ChatOutcome};
use crate::AgentError;
use serde::Deserialize;
use std::time::Instant;
use tessera_api::openai::response::{ChunkChoice, ToolCallDelta};
use tessera_api::openai::ChatCompletionChunk;

/// An OpenAI-shaped error body.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Deserialize)]
pub struct ErrorDetail {
    /// For a person.
    #[serde(default)]
    pub message: String,
}

/// Joins SSE lines into one outcome.
#[derive(Debug)]
pub struct Assembler {
    sent: Instant,
    outcome: ChatOutcome,
    /// Bytes of an unfinished line (a character may be split across reads).
    pending: Vec<u8>,
    first_delta: bool,
    done: bool,
}

impl Assembler {
    /// Start timing at `sent`, when the request went out.
    pub fn new(sent: Instant) -> Self {
        Self {
            sent,
            outcome: ChatOutcome::default(),
            pending: Vec::new(),
            first_delta: false,
            done: false,
        }
    }

    /// Feed raw bytes as they arrive (lines may be split across pushes).
    pub fn push_bytes(&mut self, bytes: &[u8]) -> Result<(), AgentError> {
        self.pending.extend_from_slice(bytes);
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            self.push_line(line.trim_end_matches(['\r', '\n']))?;
        }
        Ok(())
    }

    /// Feed one line of the stream.
    pub fn push_line(&mut self, line: &str) -> Result<(), AgentError> {
        let Some(data) = line.strip_prefix("data:") else {
            return Ok(()); // comments (keep-alives), event names, blank separators
        };
        let data = data.trim();
        if data == "[DONE]" {
            self.push_done();
            return Ok(());
        }
        // A server that fails mid-stream sends an error body instead of a chunk.
        if let Ok(failed) = serde_json::from_str::<ErrorBody>(data) {
            return Err(AgentError::Backend(format!(
                "the stream ended with an error: {}",
                failed.error.message
            )));
        }
        let chunk: ChatCompletionChunk = serde_json::from_str(data)
            .map_err(|error| AgentError::Backend(format!("a stream chunk is not a chat chunk ({error}): {data}")))?;
        self.push_chunk(&chunk)
    }

    /// Feed one chunk.
    pub fn push_chunk(&mut self, chunk: &ChatCompletionChunk) -> Result<(), AgentError> {
        if let Some(Some(usage)) = &chunk.usage {
            self.outcome.prompt_tokens = usage.prompt_tokens;
            self.outcome.completion_tokens = usage.completion_tokens;
            self.outcome.cached_tokens = usage.prompt_tokens_details.cached_tokens;
        }
        if let Some(choice) = chunk.choices.first() {
            self.read_choice(choice)?;
        }
        Ok(())
    }

    /// The stream's end marker (`[DONE]`) arrived.
    pub fn push_done(&mut self) {
        self.done = true;
    }

    /// The outcome, once the stream said `[DONE]`.
    pub fn finish(mut self) -> Result<ChatOutcome, AgentError> {
        if !self.pending.is_empty() {
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
            self.push_line(line.trim_end())?;
        }
        if !self.done {
            return Err(AgentError::Backend("the stream ended before [DONE]".into()));
        }
        self.outcome.total = self.sent.elapsed();
        if !self.first_delta {
            self.outcome.ttft = self.outcome.total;
        }
        Ok(self.outcome)
    }

    fn read_choice(&mut self, choice: &ChunkChoice) -> Result<(), AgentError> {
        if let Some(reason) = choice.finish_reason {
            self.outcome.finish_reason = Some(reason);
        }
        if let Some(text) = choice.delta.content.as_deref().filter(|t| !t.is_empty()) {
            self.mark_first_delta();
            self.outcome.content.push_str(text);
        }
        for call in choice.delta.tool_calls.iter().flatten() {
            self.mark_first_delta();
            self.read_call_delta(call)?;
        }
        Ok(())
    }

    fn read_call_delta(&mut self, call: &ToolCallDelta) -> Result<(), AgentError> {
        // A delta without an index continues the last call (or starts the first).
        let last = self.outcome.calls.len().saturating_sub(1);
        let index = call.index.unwrap_or(last);
        if index > self.outcome.calls.len() {
            return Err(AgentError::Backend(format!("tool call delta {index} skips a call")));
        }
        if index == self.outcome.calls.len() {
            self.outcome.calls.push(ChatCall {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            });
        }
        let target = &mut self.outcome.calls[index];
        if let Some(id) = &call.id {
            target.id = id.clone();
        }
        if let Some(name) = &call.function.name {
            target.name.push_str(name);
        }
        if let Some(arguments) = &call.function.arguments {
            target.arguments.push_str(arguments);
        }
        Ok(())
    }

    fn mark_first_delta(&mut self) {
        if !self.first_delta {
            self.first_delta = true;
            self.outcome.ttft = self.sent.elapsed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assemble(stream: &str) -> Result<ChatOutcome, AgentError> {
        let mut assembler = Assembler::new(Instant::now());
        // Split mid-line to check that lines are rejoined.
        // Split inside a line, and inside a UTF-8 character when there is one.
        let bytes = stream.as_bytes();
        let cut = bytes.iter().position(|&b| b >= 0x80).map_or(bytes.len() / 2, |i| i + 1);
        assembler.push_bytes(&bytes[..cut])?;
        assembler.push_bytes(&bytes[cut..])?;
        assembler.finish()
    }

    #[test]
    fn joins_call_deltas_and_reads_usage() {
        let stream = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            ": keep-alive\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"file_read\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"path\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"a.md\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":9,\"prompt_tokens_details\":{\"cached_tokens\":96}}}\n\n",
            "data: [DONE]\n\n",
        );
        let outcome = assemble(stream).unwrap();
        assert_eq!(
            outcome.calls,
            vec![ChatCall {
                id: "call_1".into(),
                name: "file_read".into(),
                arguments: "{\"path\":\"a.md\"}".into()
            }]
        );
        assert_eq!(outcome.content, "");
        assert_eq!(
            outcome.finish_reason,
            Some(tessera_api::openai::FinishReason::ToolCalls)
        );
        assert_eq!(
            (outcome.prompt_tokens, outcome.cached_tokens, outcome.completion_tokens),
            (100, 96, 9)
        );
    }

    #[test]
    fn content_errors_and_truncation() {
        let text = "data: {\"choices\":[{\"delta\":{\"content\":\"Hé\"}}]}\ndata: {\"choices\":[{\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\ndata: [DONE]\n";
        assert_eq!(
            assemble(text).unwrap().content,
            "Hé there",
            "a character split across reads survives"
        );
        let cut = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n";
        assert!(assemble(cut).unwrap_err().to_string().contains("before [DONE]"));
        let failed = "data: {\"error\":{\"message\":\"engine stopped\"}}\ndata: [DONE]\n";
        assert!(assemble(failed).unwrap_err().to_string().contains("engine stopped"));
        let skip = "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":2}]}}]}\n";
        assert!(assemble(skip).unwrap_err().to_string().contains("skips"));
    }
}
