//! Budgets per source. A tool result over its budget keeps its head and tail
//! (75 % / 25 %) in context; the full text goes to a file in the workspace,
//! named in the observation, which `file_read` can page back (the file
//! system is the agent's memory).

/// The fixed cap on one tool result, in characters.
pub const RESULT_MAX_CHARS: usize = 16_000;
/// The share of the context window one tool result may take.
pub const RESULT_WINDOW_SHARE: f64 = 0.30;
/// Characters per token assumed when a token budget becomes a character one
/// (SmolLM2's BPE averages ~4 on English and code; 3 errs on the safe side).
pub const CHARS_PER_TOKEN: usize = 3;
/// The share of a capped result kept from its start.
pub const HEAD_SHARE: f64 = 0.75;

/// The character budget of one tool result in a `window`-token context:
/// 16,000 characters or 30 % of the window, whichever is smaller.
pub fn result_budget(window_tokens: usize) -> usize {
    let share = (window_tokens as f64 * RESULT_WINDOW_SHARE) as usize * CHARS_PER_TOKEN;
    share.min(RESULT_MAX_CHARS)
}

/// `text` cut to `budget` characters: the first 75 % and the last 25 % of the
/// budget, with a marker between them that names `saved_as` (where the caller
/// stores the full text). `None` when the text fits.
pub fn cap(text: &str, budget: usize, saved_as: &str) -> Option<String> {
    let total = text.chars().count();
    if total <= budget {
        return None;
    }
    let head = (budget as f64 * HEAD_SHARE) as usize;
    let tail = budget - head;
    let head_text: String = text.chars().take(head).collect();
    let tail_text: String = text.chars().skip(total - tail).collect();
    Some(format!(
        "{head_text}\n[… {} characters omitted; the whole result ({total} characters) is saved as {saved_as}: \
         page it with file_read {{\"path\":\"{saved_as}\",\"start_line\":N}} …]\n{tail_text}",
        total - head - tail
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_the_smaller_of_the_two_caps() {
        assert_eq!(result_budget(8192), 7371, "30% of 8,192 tokens × 3 chars");
        assert_eq!(result_budget(32_768), RESULT_MAX_CHARS);
        assert_eq!(result_budget(1000), 900);
    }

    #[test]
    fn cap_keeps_head_and_tail() {
        assert_eq!(cap("short", 100, "x"), None);
        assert_eq!(cap(&"a".repeat(100), 100, "x"), None, "exactly the budget fits");
        let text: String = (0..1000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let capped = cap(&text, 100, ".tessera/results/step-3-file_read.txt").unwrap();
        assert!(capped.starts_with(&text[..75]));
        assert!(!capped.starts_with(&text[..76]));
        assert!(capped.ends_with(&text[975..]));
        assert!(capped.contains("900 characters omitted"));
        assert!(capped.contains(".tessera/results/step-3-file_read.txt"));
    }

    #[test]
    fn cap_never_splits_a_character() {
        let text = "é".repeat(50);
        let capped = cap(&text, 8, "f").unwrap();
        assert!(capped.starts_with("éééééé\n"));
        assert!(capped.ends_with("\néé"));
    }
}
