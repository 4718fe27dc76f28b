//! Helpers shared by the request encoders: request bodies are serialized straight from the
//! wire-neutral [`crate::LlmRequest`] by borrowing, never through a `serde_json::Value` copy,
//! and each message's and tool's wire JSON is made once and kept ([`WireCache`]) while the
//! message lives: a call over a long history copies bytes instead of serializing it again.
//! The body a call sent is kept too ([`KeptBody`]): the next call over the same history
//! appends its new messages to those bytes instead of copying the whole history again.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::{Message, ToolDefinition};

/// Serialize a request body. Serializing borrowed strings and `Value`s into a `Vec` cannot
/// fail (no map has non-string keys), so the error arm is unreachable in practice; it yields
/// an empty body, which the server rejects with a clear error rather than a panic here.
pub(crate) fn to_bytes(body: &impl Serialize) -> Vec<u8> {
    // Room for a body's usual fields besides its messages and tools (model, caps, cache
    // key) at once: the writer reserves room before each string, and from nothing each
    // reservation grew the buffer and copied what it held.
    let mut out = Vec::with_capacity(FIELDS_CAPACITY);
    write(&mut out, body);
    out
}

/// The bytes [`to_bytes`] first makes room for.
const FIELDS_CAPACITY: usize = 256;

/// Append `value`'s JSON to `out` (see [`to_bytes`] for the error arm): the bytes serde_json
/// writes, by sonic-rs, which finds the characters a string must escape 32 bytes at a time
/// (serde_json looks at each byte; escaping was the largest single cost of a body). It
/// reserves room for the worst case before writing a string (six bytes a byte, for `\u00XX`
/// escapes): a message's cached JSON is trimmed to its length ([`append`]).
pub(crate) fn write(out: &mut Vec<u8>, value: &impl Serialize) {
    if let Err(e) = sonic_rs::to_writer(&mut *out, value) {
        tracing::error!("a request body could not be serialized: {e}");
    }
}

/// A JSON value sent as a string holding its JSON text (OpenAI's tool-call `arguments`).
pub(crate) struct JsonString<'a>(pub &'a Value);

impl Serialize for JsonString<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The text `Value::to_string` gives (see [`write`]); a `Value` always serializes.
        let text = sonic_rs::to_string(self.0).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
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
    /// The running token counts of the messages last estimated.
    pub(crate) counts: KeptCounts,
    /// Where a new entry's JSON is written before it is kept at its length: the writer
    /// reserves room for six bytes a byte before each string, which made a buffer started
    /// from nothing grow and copy itself several times for every new message.
    scratch: Vec<u8>,
    /// The tools array last written, and the tools it was written for.
    tools: KeptTools,
}

/// A request's tools array as its body carries it, kept with the tools (the same `Arc`s,
/// in order) it was written for: a phase offers the same tools call after call, and the
/// array is copied whole instead of looked up and copied tool by tool.
#[derive(Default)]
struct KeptTools {
    tools: Vec<Arc<ToolDefinition>>,
    json: Vec<u8>,
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

/// What `mutex` guards, even if a thread panicked while holding it: what the provider keeps
/// there (caches, the last body) is complete or absent, never half-written.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The most room [`WireCache`]'s scratch buffer keeps between messages (what a message of
/// about 10 KB of text takes while it is written).
const SCRATCH_KEPT: usize = 64 * 1024;

/// Entries below this many are never swept (a short run never pays for a sweep).
const SWEEP_FLOOR: usize = 256;

impl WireCache {
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
        let mut scratch = std::mem::take(&mut self.scratch);
        let wrote = append(self.entry(shared), out, &mut scratch, |json| {
            encode(shared, json);
        });
        // A very long message's room is not held on to for the provider's life.
        if scratch.capacity() <= SCRATCH_KEPT {
            self.scratch = scratch;
        }
        wrote
    }

    /// Append the JSON array of `tools` to `out`: the one kept when these are the tools it
    /// was written for, else the one `write` writes (with this cache, for the tools' own
    /// entries), which is kept for the next call.
    pub(crate) fn tools_array(
        &mut self,
        tools: &[Arc<ToolDefinition>],
        out: &mut Vec<u8>,
        write: impl FnOnce(&mut WireCache, &mut Vec<u8>),
    ) {
        let kept = &self.tools.tools;
        if kept.len() != tools.len() || shared_prefix(kept, tools) != tools.len() {
            let mut json = std::mem::take(&mut self.tools.json);
            json.clear();
            write(self, &mut json);
            self.tools = KeptTools {
                tools: tools.to_vec(),
                json,
            };
        }
        out.extend_from_slice(&self.tools.json);
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

/// The key of `shared` in an address-keyed table: its heap address.
pub(crate) fn key<T>(shared: &Arc<T>) -> usize {
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

/// Append `entry`'s wire JSON to `out`, made by `encode` the first time (into `scratch`,
/// then kept at its length); whether it is non-empty.
fn append(
    entry: &mut Entry,
    out: &mut Vec<u8>,
    scratch: &mut Vec<u8>,
    encode: impl FnOnce(&mut Vec<u8>),
) -> bool {
    let json = entry.json.get_or_insert_with(|| {
        scratch.clear();
        encode(scratch);
        Box::from(scratch.as_slice())
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
        any |= append_item(out, any, |out| each(item, out));
    }
    out.push(b']');
}

/// Append one array item, after a comma when `after_item`; `each` writes it and says
/// whether it wrote anything (if not, the comma goes too). Whether an item was written.
fn append_item(
    out: &mut Vec<u8>,
    after_item: bool,
    each: impl FnOnce(&mut Vec<u8>) -> bool,
) -> bool {
    let mark = out.len();
    if after_item {
        out.push(b',');
    }
    let wrote = each(out);
    if !wrote {
        out.truncate(mark);
    }
    wrote
}

/// Close a body: `head` (`{` followed by fields already written, the cached arrays) gets
/// the fields of `rest` (a serialized JSON object): `{head..., rest's fields}`.
pub(crate) fn join_fields(head: &mut Vec<u8>, rest: &[u8]) {
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
}

/// How many leading values (messages, tools) `new` shares with `kept`: the same `Arc`s, in
/// order. A value changed since is a new `Arc`, so identity is equality here.
pub(crate) fn shared_prefix<T>(kept: &[Arc<T>], new: &[Arc<T>]) -> usize {
    kept.iter()
        .zip(new)
        .take_while(|(kept, new)| Arc::ptr_eq(kept, new))
        .count()
}

/// The running token counts of the messages a provider last estimated: the next estimate
/// over the same history adds only the new messages' counts to the sum kept for the
/// messages both share, instead of looking up every message of the history again (the
/// estimate runs at least twice per call: the context window's check and the budget's).
#[derive(Default)]
pub(crate) struct KeptCounts {
    messages: Vec<Arc<Message>>,
    /// `sums[i]`: the units of messages `0..=i`.
    sums: Vec<u64>,
}

impl KeptCounts {
    /// The units of `messages`, each new one counted by `count`.
    pub(crate) fn units(
        &mut self,
        messages: &[Arc<Message>],
        mut count: impl FnMut(&Arc<Message>) -> u64,
    ) -> u64 {
        let shared = shared_prefix(&self.messages, messages);
        self.messages.truncate(shared);
        self.sums.truncate(shared);
        let mut total = self.sums.last().copied().unwrap_or(0);
        for message in &messages[shared..] {
            total = total.saturating_add(count(message));
            self.sums.push(total);
            self.messages.push(Arc::clone(message));
        }
        total
    }
}

/// A request body being built over a history, or kept after it was sent so the next body
/// is built on it.
///
/// A conversation's next request repeats the last one's messages and adds a few: the kept
/// bytes up to the end of the messages both share (the same `Arc`s, in the same order,
/// after the same opening bytes) are used as they are, and only what follows is written.
/// Without it every call copied the whole history into a new buffer (at 200 calls, 55 KB a
/// call; at 1000, 250 KB). The bytes travel to the HTTP client without a copy ([`Bytes`])
/// and come back the same way once the client has let go of them ([`KeptBody::reclaim`]).
#[derive(Default)]
pub(crate) struct KeptBody {
    /// The body: the opening bytes, the messages' items, then whatever the caller wrote
    /// after them last time (cut off and written again at each build).
    pub(crate) bytes: Vec<u8>,
    shape: BodyShape,
}

/// What a [`KeptBody`]'s bytes are made of, kept while the bytes are away being sent.
#[derive(Default)]
pub(crate) struct BodyShape {
    /// The messages, in order (held, so an address cannot be reused by another message
    /// while it is compared).
    messages: Vec<Arc<Message>>,
    /// `ends[i]`: the body's length just after message `i`'s items, and what the array
    /// held then.
    ends: Vec<(usize, Written)>,
    /// The length of the opening bytes, up to and including the array's `[`.
    open: usize,
}

/// What a body's messages array holds so far: it decides what the next message writes
/// before its items (a comma; or the end of one turn and the start of the next).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Written {
    /// Nothing yet.
    #[default]
    Nothing,
    /// At least one item (the next one follows a comma).
    Item,
    /// A turn of this role, still open (Anthropic: a message of the same role adds its
    /// blocks to it; another role closes it and opens its own).
    Turn(&'static str),
}

impl KeptBody {
    /// A body with room for `capacity` bytes when it has to be made from nothing.
    pub(crate) fn reserve(mut self, capacity: usize) -> Self {
        if self.bytes.is_empty() {
            self.bytes.reserve(capacity);
        }
        self
    }

    /// Write the opening bytes `head` (the body up to and including the messages array's
    /// `[`) and the items `each` appends for each message (one item, several joined by
    /// commas, or nothing, saying whether it appended anything), reusing the kept bytes
    /// for the head and the leading messages this body shares with the kept one. The array
    /// is left open: the caller writes its `]` and the fields after it.
    pub(crate) fn messages(
        self,
        head: &[u8],
        messages: &[Arc<Message>],
        mut each: impl FnMut(&Arc<Message>, &mut Vec<u8>) -> bool,
    ) -> Self {
        self.messages_with(head, messages, |message, out, written| {
            if append_item(out, *written != Written::Nothing, |out| each(message, out)) {
                *written = Written::Item;
            }
        })
        .0
    }

    /// [`KeptBody::messages`] where `each` writes whatever goes before a message's items
    /// too, from what the array holds so far (which it updates). Returns what the array
    /// holds after the last message, for the caller to close it.
    pub(crate) fn messages_with(
        mut self,
        head: &[u8],
        messages: &[Arc<Message>],
        mut each: impl FnMut(&Arc<Message>, &mut Vec<u8>, &mut Written),
    ) -> (Self, Written) {
        let shape = &mut self.shape;
        let same_head = shape.open == head.len() && self.bytes.get(..shape.open) == Some(head);
        let shared = if same_head {
            shared_prefix(&shape.messages, messages)
        } else {
            self.bytes.clear();
            self.bytes.extend_from_slice(head);
            shape.open = head.len();
            0
        };
        let (end, mut written) = match shared {
            0 => (shape.open, Written::Nothing),
            n => shape.ends[n - 1],
        };
        self.bytes.truncate(end);
        shape.messages.truncate(shared);
        shape.ends.truncate(shared);
        for message in &messages[shared..] {
            each(message, &mut self.bytes, &mut written);
            shape.ends.push((self.bytes.len(), written));
            shape.messages.push(Arc::clone(message));
        }
        (self, written)
    }

    /// The bytes to send, and the shape to build the next body on once they are back.
    pub(crate) fn send(self) -> (Bytes, BodyShape) {
        (Bytes::from(self.bytes), self.shape)
    }

    /// The body back from the HTTP client, to build the next one on; `None` when something
    /// still holds the bytes (the next body is then made from nothing).
    pub(crate) fn reclaim(bytes: Bytes, shape: BodyShape) -> Option<KeptBody> {
        let bytes = Vec::from(bytes.try_into_mut().ok()?);
        Some(KeptBody { bytes, shape })
    }
}

#[cfg(test)]
mod tests;
