//! Helpers shared by the request encoders: request bodies are serialized straight from the
//! wire-neutral [`crate::LlmRequest`] by borrowing, never through a `serde_json::Value` copy,
//! and each message's and tool's wire JSON is made once and kept ([`WireCache`]) while the
//! message lives: a call over a long history copies bytes instead of serializing it again.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::{Message, ToolDefinition};

/// Serialize a request body. Serializing borrowed strings and `Value`s into a `Vec` cannot
/// fail (no map has non-string keys), so the error arm is unreachable in practice; it yields
/// an empty body, which the server rejects with a clear error rather than a panic here.
pub(crate) fn to_bytes(body: &impl Serialize) -> Vec<u8> {
    let mut out = Vec::new();
    write(&mut out, body);
    out
}

/// Append `value`'s JSON to `out` (see [`to_bytes`] for the error arm).
pub(crate) fn write(out: &mut Vec<u8>, value: &impl Serialize) {
    if let Err(e) = serde_json::to_writer(&mut *out, value) {
        tracing::error!("a request body could not be serialized: {e}");
    }
}

/// A JSON value sent as a string holding its JSON text (OpenAI's tool-call `arguments`).
pub(crate) struct JsonString<'a>(pub &'a Value);

impl Serialize for JsonString<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string())
    }
}

/// What a provider derived from the messages and tools it was sent — each one's wire JSON
/// and its estimated tokens — kept for as long as the message or tool lives.
///
/// Entries are keyed by the address of the shared value and hold a reference to it, so the
/// address cannot be reused by another value while its entry exists: a message changed
/// after it was sent is a new `Arc` (its old entry stays until swept), never a stale hit.
/// An entry whose value nobody else holds any more (a compacted or finished history) is
/// swept once the cache has doubled since the last sweep.
#[derive(Default)]
pub(crate) struct WireCache {
    entries: HashMap<usize, Entry, BuildHasherDefault<AddressHasher>>,
    kept_at_last_sweep: usize,
}

struct Entry {
    owner: Owner,
    /// The wire JSON (one flavour per provider, so one per entry); empty until made.
    json: Option<Box<[u8]>>,
    /// The estimated tokens; `None` until counted.
    tokens: Option<u64>,
}

/// The shared value an entry holds (so its address cannot be reused while cached).
pub(crate) enum Owner {
    Message(Arc<Message>),
    Tool(Arc<ToolDefinition>),
}

impl Owner {
    fn shared_elsewhere(&self) -> bool {
        match self {
            Owner::Message(m) => Arc::strong_count(m) > 1,
            Owner::Tool(t) => Arc::strong_count(t) > 1,
        }
    }
}

/// What [`WireCache`] keeps entries for: messages and tool definitions.
pub(crate) trait Cached: Sized {
    /// The entry's hold on `shared`.
    fn owner(shared: &Arc<Self>) -> Owner;
}

impl Cached for Message {
    fn owner(shared: &Arc<Self>) -> Owner {
        Owner::Message(Arc::clone(shared))
    }
}

impl Cached for ToolDefinition {
    fn owner(shared: &Arc<Self>) -> Owner {
        Owner::Tool(Arc::clone(shared))
    }
}

/// Entries below this many are never swept (a short run never pays for a sweep).
const SWEEP_FLOOR: usize = 256;

impl WireCache {
    /// The cache behind `lock`, even if a thread panicked while holding it (every entry is
    /// complete or absent: nothing is half-written).
    pub(crate) fn lock(lock: &Mutex<WireCache>) -> MutexGuard<'_, WireCache> {
        lock.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn entry<T: Cached>(&mut self, shared: &Arc<T>) -> &mut Entry {
        let key = key(shared);
        // The length test first: a hit (most lookups) then costs one probe, not two.
        if self.entries.len() >= self.sweep_at() && !self.entries.contains_key(&key) {
            self.sweep();
        }
        self.entries.entry(key).or_insert_with(|| Entry {
            owner: T::owner(shared),
            json: None,
            tokens: None,
        })
    }

    /// The size at which a new entry first sweeps out the dead ones.
    fn sweep_at(&self) -> usize {
        SWEEP_FLOOR.max(2 * self.kept_at_last_sweep)
    }

    fn sweep(&mut self) {
        self.entries.retain(|_, e| e.owner.shared_elsewhere());
        self.kept_at_last_sweep = self.entries.len();
    }

    /// Append `shared`'s wire JSON to `out`, made by `encode` the first time. Returns
    /// whether anything was appended (a message may have no wire form, e.g. a system
    /// message sent apart from the conversation).
    pub(crate) fn json<T: Cached>(
        &mut self,
        shared: &Arc<T>,
        out: &mut Vec<u8>,
        encode: impl FnOnce(&T, &mut Vec<u8>),
    ) -> bool {
        append(self.entry(shared), out, |json| encode(shared, json))
    }

    /// `shared`'s estimated tokens, counted by `count` the first time.
    pub(crate) fn tokens<T: Cached>(
        &mut self,
        shared: &Arc<T>,
        count: impl FnOnce() -> u64,
    ) -> u64 {
        *self.entry(shared).tokens.get_or_insert_with(count)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

fn key<T>(shared: &Arc<T>) -> usize {
    Arc::as_ptr(shared) as *const () as usize
}

/// The hasher of [`WireCache`]'s keys, which are heap addresses: a multiplication spreads
/// their bits (SipHash's flooding resistance buys nothing for keys an attacker cannot
/// choose, and costs more than the rest of a cache hit).
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        // The table takes its bucket from the low bits and its tag from the top ones; a
        // product's low bits depend only on the key's low bits (zero for aligned
        // addresses), so the well-mixed high half is folded into them.
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the product's high bits depend on every bit of the key.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Append `entry`'s wire JSON to `out`, made by `encode` the first time; whether it is
/// non-empty.
fn append(entry: &mut Entry, out: &mut Vec<u8>, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
    let json = entry.json.get_or_insert_with(|| {
        let mut json = Vec::new();
        encode(&mut json);
        json.into_boxed_slice()
    });
    out.extend_from_slice(json);
    !json.is_empty()
}

/// Append `item`'s JSON to `out`, after a comma when `out` already holds an item (one
/// message's several wire items, joined for its cache entry).
pub(crate) fn push_item(out: &mut Vec<u8>, item: &impl Serialize) {
    if !out.is_empty() {
        out.push(b',');
    }
    write(out, item);
}

/// A JSON array of the items `each` appends (each call appends one item, or several joined
/// by commas, or nothing, and says whether it appended anything).
pub(crate) fn array<T>(
    out: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
    mut each: impl FnMut(T, &mut Vec<u8>) -> bool,
) {
    out.push(b'[');
    let mut any = false;
    for item in items {
        let mark = out.len();
        if any {
            out.push(b',');
        }
        if each(item, out) {
            any = true;
        } else {
            out.truncate(mark);
        }
    }
    out.push(b']');
}

/// A body made of `head` (`{` followed by fields already written, the cached arrays) and
/// the fields of `rest` (a serialized JSON object): `{head..., rest's fields}`.
pub(crate) fn join_object(mut head: Vec<u8>, rest: &[u8]) -> Vec<u8> {
    match rest {
        [b'{', b'}'] | [] => head.push(b'}'),
        [b'{', fields @ ..] => {
            if head.len() > 1 {
                head.push(b',');
            }
            head.extend_from_slice(fields);
        }
        _ => {
            tracing::error!("a request body's fields were not a JSON object");
            head.push(b'}');
        }
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(m: &Message, out: &mut Vec<u8>) {
        write(out, &m.content);
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
        assert_eq!(
            join_object(out, br#"{"model":"m"}"#),
            br#"{"messages":[1,3],"model":"m"}"#
        );
        assert_eq!(join_object(b"{".to_vec(), b"{}"), b"{}");
    }
}
