use super::*;

fn encode(m: &Message, out: &mut Vec<u8>) {
    write(out, &m.content);
}

proptest::proptest! {
    /// Bodies are written by sonic-rs: the bytes must be serde_json's, escapes, numbers
    /// and all, or a provider's cache and the journal's record of a body would disagree
    /// with what serde_json-based code writes for the same value.
    #[test]
    fn bodies_are_the_bytes_serde_json_writes(
        value in crate::test_values::any_json(),
        text in proptest::prelude::any::<String>(),
        x in proptest::prelude::any::<f64>(),
    ) {
        let mut out = Vec::new();
        write(&mut out, &value);
        proptest::prop_assert_eq!(&out, &serde_json::to_vec(&value).unwrap());
        let message = Message::user(text);
        let mut out = Vec::new();
        write(&mut out, &message);
        proptest::prop_assert_eq!(&out, &serde_json::to_vec(&message).unwrap());
        let mut out = Vec::new();
        write(&mut out, &x);
        proptest::prop_assert_eq!(&out, &serde_json::to_vec(&x).unwrap());
        // Tool-call arguments travel as their JSON text.
        let mut out = Vec::new();
        write(&mut out, &JsonString(&value));
        proptest::prop_assert_eq!(&out, &serde_json::to_vec(&value.to_string()).unwrap());
    }
}

#[test]
fn aligned_addresses_spread_over_the_low_bits() {
    // Heap addresses are 16-byte aligned; the table's bucket comes from the hash's low
    // bits. Without folding the high half in, 1024 such keys would share 64 buckets.
    let buckets: std::collections::HashSet<u64> = (0..1024u64)
        .map(|i| {
            let mut h = AddressHasher::default();
            h.write_usize((0x5555_0000_1230 + 16 * i) as usize);
            h.finish() & 1023
        })
        .collect();
    assert!(buckets.len() > 500, "{} distinct buckets", buckets.len());
}

#[test]
fn a_message_is_serialized_once_and_a_changed_one_again() {
    let mut cache = WireCache::default();
    let m = Arc::new(Message::user("hello"));
    let mut calls = 0;
    for _ in 0..3 {
        let mut out = Vec::new();
        cache.json(&m, &mut out, |m, o| {
            calls += 1;
            encode(m, o);
        });
        assert_eq!(out, b"\"hello\"");
    }
    assert_eq!(calls, 1, "made once, then copied");
    // A changed message is a new Arc: a new entry, never the old bytes.
    let mut changed = Arc::clone(&m);
    Arc::make_mut(&mut changed).content = "bye".into();
    let mut out = Vec::new();
    cache.json(&changed, &mut out, encode);
    assert_eq!(out, b"\"bye\"");
}

#[test]
fn new_entries_are_written_in_one_scratch_buffer_of_bounded_room() {
    // Each new entry is written in the same buffer, cleared in between, and kept at its
    // length; the buffer keeps its room for the next one unless a very long message
    // made it large.
    let mut cache = WireCache::default();
    let long = "x".repeat(20_000);
    for (text, kept_room) in [("hello", true), ("hi", true), (long.as_str(), false)] {
        let m = Arc::new(Message::user(text));
        let mut out = b"[".to_vec();
        cache.json(&m, &mut out, encode);
        assert_eq!(out, format!("[\"{text}\"").as_bytes());
        assert_eq!(cache.scratch.capacity() > 0, kept_room, "{}", text.len());
        assert!(cache.scratch.capacity() <= SCRATCH_KEPT);
    }
}

#[test]
fn entries_of_dropped_messages_are_swept() {
    let mut cache = WireCache::default();
    let kept: Vec<Arc<Message>> = (0..10)
        .map(|i| Arc::new(Message::user(format!("k{i}"))))
        .collect();
    for m in &kept {
        cache.json(m, &mut Vec::new(), encode);
    }
    for i in 0..(2 * SWEEP_FLOOR) {
        // Sent once, then dropped by its history.
        let m = Arc::new(Message::user(format!("d{i}")));
        cache.json(&m, &mut Vec::new(), encode);
    }
    assert!(
        cache.len() <= SWEEP_FLOOR + 10,
        "{} entries kept",
        cache.len()
    );
    for m in &kept {
        let mut out = Vec::new();
        cache.json(m, &mut out, |_, _| {
            panic!("a live message is serialized again")
        });
        assert!(!out.is_empty());
    }
}

#[test]
fn arrays_skip_items_without_a_wire_form_and_bodies_join() {
    let mut out = b"{\"messages\":".to_vec();
    array(&mut out, [1, 2, 3, 4], |i, o| {
        if i % 2 == 0 {
            return false;
        }
        o.extend_from_slice(i.to_string().as_bytes());
        true
    });
    join_fields(&mut out, br#"{"model":"m"}"#);
    assert_eq!(out, br#"{"messages":[1,3],"model":"m"}"#);
    let mut empty = b"{".to_vec();
    join_fields(&mut empty, b"{}");
    assert_eq!(empty, b"{}");
}

/// The body [`KeptBody::messages`] writes from nothing: the reference.
fn fresh(messages: &[Arc<Message>]) -> Vec<u8> {
    let mut out = b"{\"m\":".to_vec();
    array(&mut out, messages, item);
    out
}

/// Messages whose content is "-" have no wire form.
fn item(m: &Arc<Message>, out: &mut Vec<u8>) -> bool {
    if m.content == "-" {
        return false;
    }
    write(out, &m.content);
    true
}

fn build(kept: KeptBody, head: &[u8], messages: &[Arc<Message>]) -> KeptBody {
    let mut kept = kept.messages(head, messages, item);
    kept.bytes.push(b']');
    kept
}

proptest::proptest! {
    /// Whatever happens to the history between two calls (messages added, one replaced,
    /// the tail cut, the whole replaced, items without a wire form), a body built on
    /// the kept one is byte for byte the body made from nothing.
    #[test]
    fn a_body_built_on_the_kept_one_is_the_body_made_from_nothing(
        steps in proptest::collection::vec((0u8..5, 0usize..40, 0u8..4), 1..30)
    ) {
        let mut history: Vec<Arc<Message>> = Vec::new();
        let mut kept = KeptBody::default();
        for (n, (op, at, text)) in steps.into_iter().enumerate() {
            let new = || {
                let content = if text == 0 { "-".to_string() } else { format!("m{n}") };
                Arc::new(Message::user(content))
            };
            match op {
                0 | 1 => history.push(new()),
                2 if !history.is_empty() => {
                    let i = at % history.len();
                    history[i] = new();
                }
                3 => history.truncate(at % (history.len() + 1)),
                _ => history = (0..at % 5).map(|_| new()).collect(),
            }
            kept = build(kept, b"{\"m\":[", &history);
            let expected = fresh(&history);
            proptest::prop_assert_eq!(
                String::from_utf8_lossy(&kept.bytes),
                String::from_utf8_lossy(&expected)
            );
            let (bytes, shape) = kept.send();
            kept = KeptBody::reclaim(bytes, shape).unwrap_or_default();
        }
    }
}

#[test]
fn kept_counts_add_only_the_new_messages_and_follow_an_edited_history() {
    let mut history: Vec<Arc<Message>> = (1..=4)
        .map(|i| Arc::new(Message::user("x".repeat(i))))
        .collect();
    let mut kept = KeptCounts::default();
    let mut counted = 0;
    let mut units = |kept: &mut KeptCounts, h: &[Arc<Message>]| {
        kept.units(h, |m| {
            counted += 1;
            m.content.len() as u64
        })
    };
    assert_eq!(units(&mut kept, &history), 10);
    assert_eq!(units(&mut kept, &history), 10);
    history.push(Arc::new(Message::user("yyyyy")));
    assert_eq!(units(&mut kept, &history), 15);
    // An edit in the middle: counted again from there on.
    history[1] = Arc::new(Message::user("zzzzzzz"));
    assert_eq!(units(&mut kept, &history), 20);
    history.truncate(2);
    assert_eq!(units(&mut kept, &history), 8);
    assert_eq!(units(&mut kept, &[]), 0);
    assert_eq!(counted, 4 + 1 + 4, "each message counted once per change");
}

#[test]
fn a_kept_body_travels_as_bytes_and_comes_back_without_a_copy() {
    let history: Vec<Arc<Message>> = (0..50)
        .map(|i| Arc::new(Message::user(format!("message {i}"))))
        .collect();
    let kept = build(
        KeptBody::default().reserve(4096),
        b"{\"m\":[",
        &history[..40],
    );
    let (bytes, shape) = kept.send();
    let address = bytes.as_ptr();
    // Held elsewhere (a request still in flight): not reclaimed.
    let held = bytes.clone();
    assert!(KeptBody::reclaim(bytes, BodyShape::default()).is_none());
    let kept = KeptBody::reclaim(held, shape).expect("the only holder");
    assert_eq!(kept.bytes.as_ptr(), address, "the same buffer, not a copy");
    // The next body appends to it in place: the first 40 messages are not written again.
    let mut written = 0;
    let kept = kept.messages(b"{\"m\":[", &history, |m, o| {
        written += 1;
        item(m, o)
    });
    assert_eq!(written, 10);
    assert_eq!(kept.bytes.as_ptr(), address);
    let mut expected = fresh(&history);
    expected.pop(); // `]`: the caller closes the array
    assert_eq!(kept.bytes, expected);
    // Another head (another body kind or model field first): made from nothing.
    let mut written = 0;
    let kept = kept.messages(b"{\"n\":[", &history, |m, o| {
        written += 1;
        item(m, o)
    });
    assert_eq!(written, 50);
    assert!(kept.bytes.starts_with(b"{\"n\":[\"message 0\","));
}
