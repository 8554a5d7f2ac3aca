//! R3: work over many projects or sources goes round-robin from a persisted cursor, a fixed
//! number per invocation, so that the first ones never starve the rest.

/// The order one invocation visits `names` in: starting after `cursor` (the last one visited by
/// the previous invocation; from the first when it is unknown or gone), at most `max` of them.
/// Returns the indices to visit, in order; the rest of `names` is what this invocation leaves
/// for later (R4: counted as truncated by the caller, with any it could not reach in time).
pub fn round_robin(names: &[String], cursor: Option<&str>, max: usize) -> Vec<usize> {
    if names.is_empty() {
        return Vec::new();
    }
    let start = cursor.and_then(|c| names.iter().position(|n| n == c)).map_or(0, |i| (i + 1) % names.len());
    (0..max.min(names.len())).map(|k| (start + k) % names.len()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("project-{i}")).collect()
    }

    #[test]
    fn r3_ten_projects_three_at_a_time_are_all_visited_in_four_invocations() {
        let all = names(10);
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::BTreeSet::new();
        let mut truncated = Vec::new();
        for _ in 0..4 {
            let picked = round_robin(&all, cursor.as_deref(), 3);
            assert_eq!(picked.len(), 3);
            truncated.push(all.len() - picked.len());
            seen.extend(picked.iter().copied());
            cursor = picked.last().map(|&i| all[i].clone());
        }
        assert_eq!(seen.len(), 10, "every project visited");
        assert_eq!(truncated, [7, 7, 7, 7], "what is left is counted each time");
        assert_eq!(round_robin(&all, Some("project-9"), 2), [0, 1], "wraps around");
    }

    #[test]
    fn r3_an_unknown_cursor_starts_from_the_first_and_max_is_capped() {
        let all = names(3);
        assert_eq!(round_robin(&all, Some("gone"), 5), [0, 1, 2]);
        assert_eq!(round_robin(&all, None, 0), Vec::<usize>::new());
        assert_eq!(round_robin(&[], Some("x"), 3), Vec::<usize>::new());
    }
}
