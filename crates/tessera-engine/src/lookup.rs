//! Prompt lookup: where the end of a sequence occurred before, and what
//! followed it there. Two kinds of occurrence are searched:
//!
//! - **exact**: the sequence's last [`MIN_MATCH`] tokens, the match measured
//!   backwards up to [`MAX_MATCH`];
//! - **resynchronized**: the tokens before the last one, where the earlier
//!   occurrence went on with a different token. The model replaced one token
//!   of what it copies (a port's digit, a renamed identifier, `file_write`
//!   where the context's call read `file_read`) and goes on copying after it,
//!   so the draft continues one token past the replaced one. It is only taken
//!   over a match of at least [`RESYNC_MATCH`] tokens, only when it matched
//!   more than any exact occurrence, and proposes at most [`RESYNC_LEN`].

/// Shortest run of tokens whose earlier occurrence proposes a draft.
const MIN_MATCH: usize = 3;
/// Longest match measured when choosing between earlier occurrences.
const MAX_MATCH: usize = 16;
/// Shortest match before a replaced token that resynchronizes a copy.
const RESYNC_MATCH: usize = 5;
/// Most tokens a resynchronized occurrence proposes: the guess that the
/// model replaced one token (rather than dropped or inserted some) is often
/// wrong, and its draft's rows are then lost; with two kept (and the step's
/// sampled token) the replaced one has left the exact lookup's last three.
const RESYNC_LEN: usize = 2;

/// What a lookup found: up to the wanted number of tokens that followed the
/// best earlier occurrence, and how many tokens that occurrence matched
/// backwards (0 when there was none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lookup<'h> {
    pub tokens: &'h [u32],
    pub matched: usize,
    /// Whether the occurrence is a resynchronized one (a one-off guess).
    pub resynced: bool,
}

impl Lookup<'_> {
    const NONE: Lookup<'static> = Lookup {
        tokens: &[],
        matched: 0,
        resynced: false,
    };
}

/// Up to `want` tokens that followed the best earlier occurrence of the end
/// of `tokens` (see [`lookup_in`]). Empty when there is none.
#[cfg(test)]
pub(crate) fn lookup_draft(tokens: &[u32], want: usize) -> &[u32] {
    lookup_in(tokens, tokens, want).tokens
}

/// Up to `want` tokens that followed the best earlier occurrence in
/// `haystack` (the sequence's own tokens, or another rendering of its
/// prompt) of the end of `history`: the exact occurrence whose match runs
/// longest backwards, the latest on a tie, unless a resynchronized one (see
/// the module docs) matched longer.
pub(crate) fn lookup_in<'h>(haystack: &'h [u32], history: &[u32], want: usize) -> Lookup<'h> {
    let len = history.len();
    if want == 0 || len < MIN_MATCH {
        return Lookup::NONE;
    }
    let exact = best_occurrence(haystack, history, None);
    let resync = match len > MIN_MATCH {
        true => best_occurrence(haystack, &history[..len - 1], Some(history[len - 1]))
            .filter(|&(matched, _)| matched >= RESYNC_MATCH),
        false => None,
    };
    let (best, resynced) = match (exact, resync) {
        (Some(exact), Some(resync)) if resync.0 <= exact.0 => (exact, false),
        (_, Some(resync)) => (resync, true),
        (Some(exact), None) => (exact, false),
        (None, None) => return Lookup::NONE,
    };
    let (matched, start) = best;
    let want = if resynced { want.min(RESYNC_LEN) } else { want };
    Lookup {
        tokens: &haystack[start..(start + want).min(haystack.len())],
        matched,
        resynced,
    }
}

/// The occurrence in `haystack` of `tail`'s last [`MIN_MATCH`] tokens whose
/// match runs longest backwards (the latest on a tie), followed by at least
/// one token: (match length, where its continuation starts). With
/// `replaced`, the occurrence must be followed by a token other than it and
/// then by at least one more; the continuation starts after that token.
fn best_occurrence(haystack: &[u32], tail: &[u32], replaced: Option<u32>) -> Option<(usize, usize)> {
    let (len, skip) = (tail.len(), usize::from(replaced.is_some()));
    if len < MIN_MATCH || haystack.len() <= MIN_MATCH + skip {
        return None;
    }
    let suffix = &tail[len - MIN_MATCH..];
    let mut best: Option<(usize, usize)> = None;
    // Occurrences end at `end` (exclusive); the continuation starts at `end + skip`.
    for end in (MIN_MATCH..haystack.len() - skip).rev() {
        if haystack[end - MIN_MATCH..end] != *suffix || replaced.is_some_and(|token| haystack[end] == token) {
            continue;
        }
        let matched = (MIN_MATCH..MAX_MATCH.min(end).min(len))
            .take_while(|&n| haystack[end - n - 1] == tail[len - n - 1])
            .count()
            + MIN_MATCH;
        if best.is_none_or(|(longest, _)| matched > longest) {
            best = Some((matched, end + skip));
            if matched >= MAX_MATCH {
                break;
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_continues_the_latest_longest_match() {
        // "1 2 3 4 5 ... 9 1 2 3 7 ... 1 2 3": both earlier "1 2 3" match three
        // tokens; the later one wins the tie.
        let tokens = [1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 1, 2, 3];
        assert_eq!(lookup_draft(&tokens, 2), &[7, 8]);
        // A longer match beats a later one: "0 1 2 3" occurs earlier only.
        let tokens = [0, 1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 0, 1, 2, 3];
        assert_eq!(lookup_draft(&tokens, 3), &[4, 5, 9]);
    }

    #[test]
    fn lookup_needs_a_match_and_stops_at_the_end() {
        assert!(lookup_draft(&[1, 2, 3], 4).is_empty(), "too short");
        assert!(lookup_draft(&[1, 2, 3, 4, 5, 6], 4).is_empty(), "no earlier occurrence");
        assert!(lookup_draft(&[1, 2, 3, 1, 2, 3], 0).is_empty(), "nothing wanted");
        // The continuation may run into the suffix itself, never past the end.
        assert_eq!(lookup_draft(&[7, 7, 7, 7, 7], 8), &[7]);
        assert_eq!(lookup_draft(&[1, 2, 3, 9, 1, 2, 3], 8), &[9, 1, 2, 3]);
    }

    #[test]
    fn a_replaced_token_resynchronizes_after_a_long_match() {
        // Earlier "1 2 3 4 5 8 6 7"; the sequence wrote "1 2 3 4 5" and then 9 where 8 was.
        let context = [1, 2, 3, 4, 5, 8, 6, 7, 0, 1, 2, 3, 4, 5, 9];
        let found = lookup_in(&context, &context, 6);
        assert_eq!(
            (found.tokens, found.matched, found.resynced),
            (&[6, 7][..], 5, true),
            "continues past the 8, two tokens at most"
        );
        // A match shorter than RESYNC_MATCH before the replaced token proposes nothing.
        let context = [2, 3, 4, 5, 8, 6, 7, 0, 2, 3, 4, 9];
        assert!(lookup_draft(&context, 2).is_empty());
        // An exact occurrence that matches longer (6 against 5) wins.
        let context = [1, 2, 3, 4, 5, 8, 6, 1, 2, 3, 4, 5, 9, 7, 0, 1, 2, 3, 4, 5, 9];
        assert_eq!(lookup_draft(&context, 1), &[7]);
        // Nothing after the replaced token: nothing to propose.
        assert!(lookup_in(&[1, 2, 3, 4, 5, 8], &[0, 1, 2, 3, 4, 5, 9], 2)
            .tokens
            .is_empty());
    }
}
