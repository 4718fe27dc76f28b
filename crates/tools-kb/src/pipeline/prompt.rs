//! What the LLM is shown: the labelled context block within the token budget, the synthesis
//! prompt, and the answer given without the LLM (the fallback).

use std::collections::BTreeMap;

use lsm_providers::Message;

use super::Pipeline;
use super::types::{ContextPackage, Source};
use crate::text::truncate_chars;

impl Pipeline {
    /// Label the sources and write the context block within the token budget.
    pub fn synthesize_context(&self, mut package: ContextPackage) -> ContextPackage {
        let budget_bytes = self.kb.config().context_token_budget.saturating_mul(3);
        let mut block = String::new();
        let mut labels = BTreeMap::new();
        for s in &package.candidates {
            let entry = format!("{}\n{}\n\n", source_header(s), s.text.trim());
            if !labels.is_empty() && block.len() + entry.len() > budget_bytes {
                break;
            }
            let entry = if entry.len() > budget_bytes {
                let cut: String = entry.chars().take(budget_bytes).collect();
                format!("{cut}\n\n")
            } else {
                entry
            };
            block.push_str(&entry);
            labels.insert(s.label.clone(), s.chunk_id.clone());
        }
        if labels.len() < package.candidates.len() {
            package.retrieval_trace.notes.push(format!(
                "context budget of {} tokens holds {} of {} sources",
                self.kb.config().context_token_budget,
                labels.len(),
                package.candidates.len()
            ));
        }
        package.context_block = block.trim_end().to_string();
        package.source_labels = labels;
        package
    }
}

/// `[S1] path (heading, chunk n)`.
pub fn source_header(s: &Source) -> String {
    if s.heading.is_empty() {
        format!("[{}] {} (chunk {})", s.label, s.path, s.chunk_index)
    } else {
        format!(
            "[{}] {} ({}, chunk {})",
            s.label, s.path, s.heading, s.chunk_index
        )
    }
}

pub(super) fn synthesis_messages(question: &str, package: &ContextPackage) -> Vec<Message> {
    let mode = &package.mode;
    let mut system = String::from(
        "You answer questions from the user's own documents. The sources are numbered [S1], \
         [S2], …; cite the sources each statement rests on with their labels, e.g. [S1] or \
         [S1][S3]. Never cite a label that is not listed.",
    );
    match mode.synthesis_style.as_str() {
        "insight" => system.push_str(
            " Connect and compare what the sources say, point out patterns, tensions and gaps.",
        ),
        _ => system.push_str(
            " Say only what the sources support; if they do not answer the question, say so.",
        ),
    }
    if mode.model_knowledge_policy.enabled {
        if mode.model_knowledge_policy.require_label {
            system.push_str(
                " You may add your own knowledge, marking each such statement with [model knowledge].",
            );
        } else {
            system.push_str(" You may add your own knowledge.");
        }
    } else {
        system.push_str(" Do not add knowledge that is not in the sources.");
    }
    if let Some(extra) = mode
        .synthesis_instructions
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        system.push(' ');
        system.push_str(extra);
    }
    let mut messages = vec![Message::system(system)];
    if let Some(start) = package.starting_prompt.as_deref().filter(|s| !s.is_empty()) {
        messages.push(Message::system(start.to_string()));
    }
    let sources = if package.context_block.is_empty() {
        "(no sources were found)".to_string()
    } else {
        package.context_block.clone()
    };
    messages.push(Message::user(format!(
        "Question: {question}\n\nSources:\n{sources}"
    )));
    messages
}

/// The answer given without the LLM: why, then the closest excerpts.
pub fn fallback_answer(package: &ContextPackage, reason: &str) -> String {
    let mut s = match reason.split(':').next().unwrap_or("") {
        "no_results" => "No source in the knowledge base matches this question.".to_string(),
        "low_relevance" => format!(
            "No source is relevant enough to answer this question (best relevance {:.2}, the \
             mode asks for {}).",
            package.relevance, package.mode.local_policy.min_relevance
        ),
        "no_llm" => "No LLM provider is configured, so no answer was written.".to_string(),
        _ => format!("The LLM could not answer ({reason})."),
    };
    if !package.candidates.is_empty() {
        s.push_str(" The closest excerpts:\n");
        for c in package.candidates.iter().take(5) {
            s.push_str(&format!(
                "\n{}\n{}\n",
                source_header(c),
                truncate_chars(c.text.trim(), 300)
            ));
        }
    }
    s.trim_end().to_string()
}
