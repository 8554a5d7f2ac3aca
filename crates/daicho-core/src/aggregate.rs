//! M10: a noisy source collapsed into one row.
//!
//! A source configured with `aggregate` does not put its items in the ledger one by one: it
//! yields a single `refresh: true` item whose body carries the count of its open items and the
//! first few titles, and whose evidence points to the source. The title never changes, so the
//! row's key is stable and each sync overwrites its body and evidence (M6).

use crate::item::Item;

/// How many item titles the body lists.
pub const SHOWN_TITLES: usize = 5;

/// The placeholder of an aggregate's title for its count (`{count} questions to answer`).
pub const COUNT: &str = "{count}";

/// Whether `title` is `template` with a number where `{count}` is: the title a sync wrote, not
/// one a person gave the row since.
pub fn is_counted(template: &str, title: &str) -> bool {
    let Some((before, after)) = template.split_once(COUNT) else { return false };
    title
        .strip_prefix(before)
        .and_then(|rest| rest.strip_suffix(after))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The one item standing for `items` of `source` (M10): `title` (stable), the open items' count
/// and first titles in its body, `evidence` (where the source lives) as its evidence. Items a
/// source marks closed (done, dropped) are not counted.
pub fn aggregate(items: &[Item], source: &str, project: &str, title: &str, evidence: &str) -> Item {
    let open: Vec<&Item> =
        items.iter().filter(|i| !i.is_blank() && i.status.is_none_or(|s| !s.is_closed())).collect();
    let mut body = format!("{} open items in {source}", open.len());
    if !open.is_empty() {
        body.push(':');
        for item in open.iter().take(SHOWN_TITLES) {
            body.push_str("\n- ");
            body.push_str(item.title.trim());
        }
        if open.len() > SHOWN_TITLES {
            body.push_str(&format!("\n… and {} more", open.len() - SHOWN_TITLES));
        }
    }
    let counted = title.contains(COUNT);
    Item {
        title: title.replace(COUNT, &open.len().to_string()),
        key_title: counted.then(|| title.to_owned()),
        source: source.to_owned(),
        project: project.to_owned(),
        body,
        evidence: evidence.to_owned(),
        refresh: true,
        ..Item::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    fn items(n: usize) -> Vec<Item> {
        (0..n).map(|i| Item::new(&format!("question {i}"), "inbox")).collect()
    }

    #[test]
    fn m10_one_refresh_item_carries_the_count_and_the_first_titles() {
        let item = aggregate(
            &items(376),
            "inbox",
            "support",
            "Get the unanswered questions answered",
            "inbox.jsonl",
        );
        assert!(item.refresh);
        assert_eq!(item.title, "Get the unanswered questions answered");
        assert_eq!((item.source.as_str(), item.project.as_str()), ("inbox", "support"));
        assert_eq!(item.evidence, "inbox.jsonl");
        assert!(item.body.starts_with("376 open items in inbox:\n- question 0\n"), "{}", item.body);
        assert_eq!(item.body.matches("\n- ").count(), SHOWN_TITLES);
        assert!(item.body.ends_with("… and 371 more"), "{}", item.body);
    }

    /// M10: `{count}` in the title is the open count; the key is made from the text as written,
    /// so the row stays the same row as the count changes.
    #[test]
    fn m10_a_title_may_carry_the_count_and_keeps_its_key() {
        let item = aggregate(&items(376), "inbox", "", "{count} 件の質問に回答をもらう", "inbox.jsonl");
        assert_eq!(item.title, "376 件の質問に回答をもらう");
        assert_eq!(item.key_title.as_deref(), Some("{count} 件の質問に回答をもらう"));
        let plain = aggregate(&items(3), "inbox", "", "Answer them", "inbox.jsonl");
        assert_eq!((plain.title.as_str(), plain.key_title), ("Answer them", None));
        assert!(is_counted("{count} 件の質問", "120 件の質問"));
        assert!(is_counted("Answer the {count} questions", "Answer the 0 questions"));
        assert!(!is_counted("{count} 件の質問", "先方に確認する"));
        assert!(!is_counted("{count} 件の質問", " 件の質問"));
        assert!(!is_counted("Answer them", "Answer them"));
    }

    #[test]
    fn m10_closed_and_blank_items_are_not_counted() {
        let mut all = items(3);
        all[1].status = Some(Status::Done);
        all.push(Item::default());
        let item = aggregate(&all, "inbox", "", "Answer", "inbox.md");
        assert_eq!(item.body, "2 open items in inbox:\n- question 0\n- question 2");
        let none = aggregate(&[], "inbox", "", "Answer", "inbox.md");
        assert_eq!(none.body, "0 open items in inbox");
    }
}
