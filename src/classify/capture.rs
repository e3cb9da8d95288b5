//! What the JSON scanner keeps of a message: a fixed-size [`Envelope`] of the few fields that
//! classification needs, never the message itself.
//!
//! Limits (each a named constant; overflow never fails the forward):
//! - [`MAX_ID_BYTES`]: a longer id keeps its first bytes plus a hash of the rest, so ids
//!   still compare exactly in practice (64-bit FNV-1a over the decoded bytes past the cap).
//! - [`MAX_NAME_BYTES`]: method and tool names longer than this are truncated (labels are
//!   capped anyway).
//! - [`MAX_KEY_BYTES`]: object keys longer than this are never keys of interest.

/// Bytes of an id kept verbatim (decoded, for strings; the token text, for numbers).
pub const MAX_ID_BYTES: usize = 256;
/// Bytes kept of `method`, `params.name`, and `error.message`.
pub const MAX_NAME_BYTES: usize = 128;
/// Bytes kept of short tokens: `jsonrpc`, `resultType`, a protocol version, an error code.
pub const MAX_SHORT_BYTES: usize = 32;
/// Bytes kept of a W3C `traceparent` (55 in version 00; a longer one is invalid).
pub const MAX_TRACEPARENT_BYTES: usize = 64;
/// Bytes kept of a `tracestate` or a resource URI; a longer one is left out, not cut.
pub const MAX_CONTEXT_BYTES: usize = 256;
/// Longest key that can be a key of interest ("io.modelcontextprotocol/clientCapabilities").
pub const MAX_KEY_BYTES: usize = 48;

/// The JSON type of a captured value, or its absence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    #[default]
    Absent,
    Null,
    True,
    False,
    Number,
    String,
    Object,
    Array,
}

/// A captured value: its kind, and for strings (decoded) and numbers (token text) the first
/// `N` bytes, the total length and a hash of the bytes past the first `N` (the first `N` are
/// compared as they are, so only what was not kept needs hashing).
#[derive(Clone)]
pub struct Captured<const N: usize> {
    pub kind: Kind,
    buf: [u8; N],
    /// Bytes kept (≤ `N`): a `u16` packs beside `kind` and `buf`, 8 bytes less per capture
    /// than a `usize` (the envelope holds a dozen of them).
    len: u16,
    total: usize,
    hash: u64,
}

/// The classification-relevant facts of one JSON-RPC message (a top-level object, or one
/// element of a batch). Fields are "last key wins", as in serde_json and `JSON.parse`.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// The message's own JSON type: anything but `Object` is an invalid envelope.
    pub shape: Kind,
    pub jsonrpc: Captured<MAX_SHORT_BYTES>,
    pub id: Captured<MAX_ID_BYTES>,
    /// The kind of `method` (its text, only a request's, is in [`RequestFields`]).
    pub method: Kind,
    pub result: Kind,
    pub result_type: Captured<MAX_SHORT_BYTES>,
    pub is_error: Kind,
    pub content: Kind,
    /// `result.task` (2025-11-25 `CreateTaskResult`).
    pub result_task: Kind,
    /// `result.inputRequests` and `result.requestState` (2026-07-28 MRTR).
    pub input_requests: Kind,
    pub request_state: Kind,
    pub error: Kind,
    pub error_code: Captured<MAX_SHORT_BYTES>,
    pub error_message: Captured<MAX_NAME_BYTES>,
    pub params: Kind,
    /// `params.task`: a 2025-11-25 task-augmented request.
    pub params_task: Kind,
    /// `params._meta["io.modelcontextprotocol/clientCapabilities"].extensions
    /// ["io.modelcontextprotocol/tasks"]`: the client declared the Tasks extension.
    pub tasks_extension: Kind,
    /// The `result.tools[i]` entry being scanned (tools/list): handed out one at a time.
    pub tool_entry: ToolEntry,
    /// What only a request carries; kept by a request scanner only (`JsonScanner::new`).
    pub request_only: Option<Box<RequestFields>>,
}

/// The texts only requests carry. A response scanner never follows `params` and needs only
/// `method`'s kind, so it goes without these ~470 bytes: that keeps a boxed response scanner
/// under glibc's per-thread cache limit (1,032 bytes), where a larger one costs a full
/// malloc and free, per exchange.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestFields {
    pub method: Captured<MAX_NAME_BYTES>,
    /// `params.name`: the tool name of a tools/call (also prompts/get).
    pub tool_name: Captured<MAX_NAME_BYTES>,
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]` (2026-07-28), or
    /// initialize's `params.protocolVersion`.
    pub protocol_version: Captured<MAX_SHORT_BYTES>,
    /// `params.clientInfo` (initialize) or `params._meta["io.modelcontextprotocol/clientInfo"]`
    /// (2026-07-28): name and version, for the call log.
    pub client_name: Captured<MAX_SHORT_BYTES>,
    pub client_version: Captured<MAX_SHORT_BYTES>,
    /// `params._meta.traceparent` and `tracestate` (the MCP trace context convention, SEP-414).
    pub traceparent: Captured<MAX_TRACEPARENT_BYTES>,
    pub tracestate: Captured<MAX_CONTEXT_BYTES>,
    /// `params.uri` (resources/read, resources/subscribe, resources/unsubscribe).
    pub resource_uri: Captured<MAX_CONTEXT_BYTES>,
}

/// One tool of a `tools/list` result: its name and its annotations' hints
/// (2025-06-18 server/tools §ToolAnnotations).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolEntry {
    pub name: Captured<MAX_NAME_BYTES>,
    pub read_only: Kind,
    pub idempotent: Kind,
}

/// Where a value inside an envelope goes, given the keys on its path (see [`child`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    Jsonrpc,
    Id,
    Method,
    Result,
    Error,
    Params,
    ResultType,
    IsError,
    Content,
    ResultTask,
    InputRequests,
    RequestState,
    Code,
    Message,
    ToolName,
    ParamsTask,
    Meta,
    ProtocolVersion,
    ClientCapabilities,
    Extensions,
    TasksExtension,
    ClientInfo,
    ClientName,
    ClientVersion,
    Traceparent,
    Tracestate,
    ResourceUri,
    Tools,
    ToolEntry,
    ToolEntryName,
    ToolAnnotations,
    ReadOnlyHint,
    IdempotentHint,
}

/// How deep (relative to the envelope) keys are ever of interest.
pub(crate) const TRACKED_LEVELS: usize = 5;

// === impl Captured ===

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over `bytes`, continuing from `hash`.
fn fnv(mut hash: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        hash = (hash ^ u64::from(b)).wrapping_mul(FNV_PRIME);
    }
    hash
}

impl<const N: usize> Captured<N> {
    /// `len` is a `u16`.
    const FITS: () = assert!(N <= u16::MAX as usize);

    pub const fn new() -> Self {
        let () = Self::FITS;
        Self {
            kind: Kind::Absent,
            buf: [0; N],
            len: 0,
            total: 0,
            hash: FNV_OFFSET,
        }
    }

    pub(crate) fn start(&mut self, kind: Kind) {
        self.kind = kind;
        self.len = 0;
        self.total = 0;
        self.hash = FNV_OFFSET;
    }

    /// Appends `bytes`.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.push_prefix(bytes, bytes.len());
    }

    /// Appends `bytes[..len]` (`len` ≤ `bytes.len()`). Most captured values are short (`"2.0"`,
    /// an id, a result type) and sit in a chunk with more bytes after them, so a value of at
    /// most 16 bytes, with 16 bytes of `bytes` to read and 16 bytes of room, is copied as one
    /// 16-byte block rather than by a `memcpy` call of unknown length; the bytes that land past
    /// `len` are never read (`bytes()` stops at `len`), and the next push overwrites them.
    #[inline]
    pub(crate) fn push_prefix(&mut self, bytes: &[u8], len: usize) {
        let at = usize::from(self.len);
        if len <= 16
            && let (Some(dst), Some(src)) = (
                self.buf
                    .get_mut(at..)
                    .and_then(|room| room.first_chunk_mut::<16>()),
                bytes.first_chunk::<16>(),
            )
        {
            *dst = *src;
            // At most `N` (there were 16 bytes of room; FITS).
            self.len = (at + len) as u16;
            self.total += len;
            return;
        }
        let bytes = bytes.get(..len).unwrap_or(bytes);
        let take = (N - at).min(bytes.len());
        self.buf[at..at + take].copy_from_slice(&bytes[..take]);
        // At most `N` (FITS).
        self.len = (at + take) as u16;
        self.total += bytes.len();
        self.hash = fnv(self.hash, &bytes[take..]);
    }

    /// Becomes `kind` with the bytes `bytes[..len]` (the SSE framer keeps an id per event).
    pub(crate) fn set_prefix(&mut self, kind: Kind, bytes: &[u8], len: usize) {
        self.start(kind);
        self.push_prefix(bytes, len);
    }

    /// The captured bytes (the first `N` of them).
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    /// The captured text, when it is whole (not truncated). Strings are decoded and valid UTF-8.
    pub fn text(&self) -> Option<&str> {
        if self.truncated() {
            return None;
        }
        std::str::from_utf8(self.bytes()).ok()
    }

    /// The captured text, cut at the cap (lossy at a split character).
    pub fn text_lossy(&self) -> std::borrow::Cow<'_, str> {
        // Valid text is the rule: `from_utf8` checks a short one a word at a time, where
        // `from_utf8_lossy` walks it as chunks, more work for the same answer.
        match std::str::from_utf8(self.bytes()) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(self.bytes()),
        }
    }

    pub fn truncated(&self) -> bool {
        self.total > usize::from(self.len)
    }

    /// Full length of the value (decoded bytes for strings).
    pub fn total_len(&self) -> usize {
        self.total
    }

    pub fn is_string(&self, s: &str) -> bool {
        self.kind == Kind::String && !self.truncated() && self.bytes() == s.as_bytes()
    }

    /// Same kind and same bytes (whole, or by length, the kept bytes and the hash past the
    /// cap).
    pub fn same_bytes<const M: usize>(&self, other: &Captured<M>) -> bool {
        if self.kind != other.kind || self.total != other.total {
            return false;
        }
        match (self.truncated(), other.truncated()) {
            (false, false) => self.bytes() == other.bytes(),
            // Same cap, so the hashes cover the same range.
            (true, true) if N == M => self.bytes() == other.bytes() && self.hash == other.hash,
            (true, false) => {
                other.bytes().get(..N) == Some(self.bytes()) && other.hash_from(N) == self.hash
            }
            (false, true) => {
                self.bytes().get(..M) == Some(other.bytes()) && self.hash_from(M) == other.hash
            }
            // Both cut at different caps: the bytes between the caps were kept by one and
            // hashed by the other, so neither can tell. No caller compares such captures.
            (true, true) => false,
        }
    }

    /// The hash of the kept bytes from `from` on, as [`Self::push`] would have hashed them
    /// past a cap of `from` (only meaningful when nothing was cut).
    fn hash_from(&self, from: usize) -> u64 {
        fnv(FNV_OFFSET, self.bytes().get(from..).unwrap_or_default())
    }

    /// The value as an i64 when it is an integer in serde_json's sense: a number token with
    /// no fraction or exponent that fits in i64. (`-0` is not one: serde_json reads it as
    /// the float -0.0.)
    pub fn as_i64(&self) -> Option<i64> {
        if self.kind != Kind::Number || self.truncated() {
            return None;
        }
        let text = std::str::from_utf8(self.bytes()).ok()?;
        if text == "-0" || text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
            return None;
        }
        text.parse::<i64>().ok()
    }
}

/// Equal when the same value was captured: the bytes in `buf` past those kept are not
/// compared (leftovers of a block copy or of an earlier, longer value).
impl<const N: usize> PartialEq for Captured<N> {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.bytes() == other.bytes()
            && self.total == other.total
            && self.hash == other.hash
    }
}

/// The kept bytes only: those in `buf` past `len` are leftovers of a block copy
/// ([`Captured::push_prefix`]), never read.
impl<const N: usize> std::fmt::Debug for Captured<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Captured")
            .field("kind", &self.kind)
            .field("bytes", &self.text_lossy())
            .field("total", &self.total)
            .field("hash", &self.hash)
            .finish()
    }
}

impl<const N: usize> Default for Captured<N> {
    fn default() -> Self {
        Self::new()
    }
}

// === impl Envelope ===

impl Envelope {
    pub const fn new() -> Self {
        Self {
            shape: Kind::Absent,
            jsonrpc: Captured::new(),
            id: Captured::new(),
            method: Kind::Absent,
            result: Kind::Absent,
            result_type: Captured::new(),
            is_error: Kind::Absent,
            content: Kind::Absent,
            result_task: Kind::Absent,
            input_requests: Kind::Absent,
            request_state: Kind::Absent,
            error: Kind::Absent,
            error_code: Captured::new(),
            error_message: Captured::new(),
            params: Kind::Absent,
            params_task: Kind::Absent,
            tasks_extension: Kind::Absent,
            tool_entry: ToolEntry {
                name: Captured::new(),
                read_only: Kind::Absent,
                idempotent: Kind::Absent,
            },
            request_only: None,
        }
    }

    /// Back to an empty envelope. Field by field, leaving the capture buffers' old bytes in
    /// place (their lengths are zeroed): per SSE event, rewriting the ~1 KiB of buffers was
    /// the largest fixed cost.
    pub(crate) fn reset(&mut self) {
        // Destructured so that a new field cannot be forgotten here.
        let Envelope {
            shape,
            jsonrpc,
            id,
            method,
            result,
            result_type,
            is_error,
            content,
            result_task,
            input_requests,
            request_state,
            error,
            error_code,
            error_message,
            params,
            params_task,
            tasks_extension,
            tool_entry:
                ToolEntry {
                    name: tool_entry_name,
                    read_only,
                    idempotent,
                },
            request_only,
        } = self;
        for kind in [
            shape,
            method,
            result,
            is_error,
            content,
            result_task,
            input_requests,
            request_state,
            error,
            params,
            params_task,
            tasks_extension,
            read_only,
            idempotent,
        ] {
            *kind = Kind::Absent;
        }
        for short in [jsonrpc, result_type, error_code] {
            short.start(Kind::Absent);
        }
        for name in [error_message, tool_entry_name] {
            name.start(Kind::Absent);
        }
        id.start(Kind::Absent);
        if let Some(fields) = request_only {
            let RequestFields {
                method,
                tool_name,
                protocol_version,
                client_name,
                client_version,
                traceparent,
                tracestate,
                resource_uri,
            } = &mut **fields;
            for name in [method, tool_name] {
                name.start(Kind::Absent);
            }
            for short in [protocol_version, client_name, client_version] {
                short.start(Kind::Absent);
            }
            traceparent.start(Kind::Absent);
            for long in [tracestate, resource_uri] {
                long.start(Kind::Absent);
            }
        }
    }

    /// A value of this slot begins: reset what an earlier duplicate key left ("last wins").
    pub(crate) fn begin(&mut self, slot: Slot, kind: Kind) {
        match slot {
            Slot::Jsonrpc => self.jsonrpc.start(kind),
            Slot::Id => self.id.start(kind),
            Slot::Method => {
                self.method = kind;
                if let Some(fields) = &mut self.request_only {
                    fields.method.start(kind);
                }
            }
            Slot::Result => {
                self.result = kind;
                self.result_type.start(Kind::Absent);
                self.is_error = Kind::Absent;
                self.content = Kind::Absent;
                self.result_task = Kind::Absent;
                self.input_requests = Kind::Absent;
                self.request_state = Kind::Absent;
            }
            Slot::Error => {
                self.error = kind;
                self.error_code.start(Kind::Absent);
                self.error_message.start(Kind::Absent);
            }
            Slot::Params => {
                self.params = kind;
                self.params_task = Kind::Absent;
                self.tasks_extension = Kind::Absent;
                if let Some(fields) = &mut self.request_only {
                    fields.tool_name.start(Kind::Absent);
                    fields.protocol_version.start(Kind::Absent);
                    fields.client_name.start(Kind::Absent);
                    fields.client_version.start(Kind::Absent);
                    fields.traceparent.start(Kind::Absent);
                    fields.tracestate.start(Kind::Absent);
                    fields.resource_uri.start(Kind::Absent);
                }
            }
            Slot::ResultType => self.result_type.start(kind),
            Slot::IsError => self.is_error = kind,
            Slot::Content => self.content = kind,
            Slot::ResultTask => self.result_task = kind,
            Slot::InputRequests => self.input_requests = kind,
            Slot::RequestState => self.request_state = kind,
            Slot::Code => self.error_code.start(kind),
            Slot::Message => self.error_message.start(kind),
            Slot::ParamsTask => self.params_task = kind,
            Slot::TasksExtension => self.tasks_extension = kind,
            Slot::Tools => {}
            Slot::ToolEntry => {
                self.tool_entry.name.start(Kind::Absent);
                self.tool_entry.read_only = Kind::Absent;
                self.tool_entry.idempotent = Kind::Absent;
            }
            Slot::ToolEntryName => self.tool_entry.name.start(kind),
            Slot::ToolAnnotations => {
                self.tool_entry.read_only = Kind::Absent;
                self.tool_entry.idempotent = Kind::Absent;
            }
            Slot::ReadOnlyHint => self.tool_entry.read_only = kind,
            Slot::IdempotentHint => self.tool_entry.idempotent = kind,
            // Containers on the way to a field: a duplicate `_meta` drops what the first held.
            Slot::Meta => {
                self.tasks_extension = Kind::Absent;
                if let Some(fields) = &mut self.request_only {
                    fields.protocol_version.start(Kind::Absent);
                    fields.client_name.start(Kind::Absent);
                    fields.client_version.start(Kind::Absent);
                    fields.traceparent.start(Kind::Absent);
                    fields.tracestate.start(Kind::Absent);
                }
            }
            Slot::ClientCapabilities | Slot::Extensions => self.tasks_extension = Kind::Absent,
            Slot::ToolName
            | Slot::ProtocolVersion
            | Slot::ClientInfo
            | Slot::ClientName
            | Slot::ClientVersion
            | Slot::Traceparent
            | Slot::Tracestate
            | Slot::ResourceUri => {
                if let Some(fields) = &mut self.request_only {
                    fields.begin(slot, kind);
                }
            }
        }
    }

    /// Appends string bytes (decoded) or number token bytes, `bytes[..len]`, to a capturing
    /// slot (see [`Captured::push_prefix`] for why the bytes after `len` are passed too).
    pub(crate) fn push(&mut self, slot: Slot, bytes: &[u8], len: usize) {
        match slot {
            Slot::Jsonrpc => self.jsonrpc.push_prefix(bytes, len),
            Slot::Id => self.id.push_prefix(bytes, len),
            Slot::ResultType => self.result_type.push_prefix(bytes, len),
            Slot::Code => self.error_code.push_prefix(bytes, len),
            Slot::Message => self.error_message.push_prefix(bytes, len),
            Slot::ToolEntryName => self.tool_entry.name.push_prefix(bytes, len),
            Slot::Method
            | Slot::ToolName
            | Slot::ProtocolVersion
            | Slot::ClientName
            | Slot::ClientVersion
            | Slot::Traceparent
            | Slot::Tracestate
            | Slot::ResourceUri => {
                if let Some(fields) = &mut self.request_only {
                    fields.push(slot, bytes, len);
                }
            }
            _ => {}
        }
    }

    /// A message is a response when it has `result` or `error` and no `method`.
    pub fn is_response(&self) -> bool {
        self.method == Kind::Absent && (self.result != Kind::Absent || self.error != Kind::Absent)
    }
}

// === impl RequestFields ===

impl RequestFields {
    /// [`Envelope::begin`] for the request-only slots.
    fn begin(&mut self, slot: Slot, kind: Kind) {
        match slot {
            Slot::ToolName => self.tool_name.start(kind),
            Slot::ProtocolVersion => self.protocol_version.start(kind),
            Slot::ClientInfo => {
                self.client_name.start(Kind::Absent);
                self.client_version.start(Kind::Absent);
            }
            Slot::ClientName => self.client_name.start(kind),
            Slot::ClientVersion => self.client_version.start(kind),
            Slot::Traceparent => self.traceparent.start(kind),
            Slot::Tracestate => self.tracestate.start(kind),
            Slot::ResourceUri => self.resource_uri.start(kind),
            _ => {}
        }
    }

    /// [`Envelope::push`] for the request-only slots.
    fn push(&mut self, slot: Slot, bytes: &[u8], len: usize) {
        match slot {
            Slot::Method => self.method.push_prefix(bytes, len),
            Slot::ToolName => self.tool_name.push_prefix(bytes, len),
            Slot::ProtocolVersion => self.protocol_version.push_prefix(bytes, len),
            Slot::ClientName => self.client_name.push_prefix(bytes, len),
            Slot::ClientVersion => self.client_version.push_prefix(bytes, len),
            Slot::Traceparent => self.traceparent.push_prefix(bytes, len),
            Slot::Tracestate => self.tracestate.push_prefix(bytes, len),
            Slot::ResourceUri => self.resource_uri.push_prefix(bytes, len),
            _ => {}
        }
    }
}

impl Default for Envelope {
    fn default() -> Self {
        Self::new()
    }
}

impl Envelope {
    /// Whether this envelope keeps a slot's string or number text (others only record their
    /// kind). The texts only requests carry are kept by a request scanner's envelope alone: a
    /// response scanner does not even copy a notification's `method` it would throw away.
    pub(crate) fn keeps(&self, slot: Slot) -> bool {
        match slot {
            Slot::Jsonrpc
            | Slot::Id
            | Slot::ResultType
            | Slot::Code
            | Slot::Message
            | Slot::ToolEntryName => true,
            Slot::Method
            | Slot::ToolName
            | Slot::ProtocolVersion
            | Slot::ClientName
            | Slot::ClientVersion
            | Slot::Traceparent
            | Slot::Tracestate
            | Slot::ResourceUri => self.request_only.is_some(),
            _ => false,
        }
    }
}

/// The slot of a member with this key in a followed object whose own slot is `parent`
/// (`None`: the envelope itself). `None`: the member is of no interest, and nothing inside it
/// is either.
///
/// One step at a time, so that the scanner decides a value's slot when its key is read and
/// keeps one slot per open level, rather than the whole path matched again at every value.
/// The paths followed:
/// - the envelope (JSON-RPC 2.0): `jsonrpc`, `id`, `method`, `result`, `error`, `params`;
/// - `result`: `resultType`, `isError`, `content`; `task` (2025-11-25 `CreateTaskResult`);
///   `inputRequests`, `requestState` (2026-07-28 MRTR); `tools` (tools/list, every revision),
///   whose elements are [`element`]s;
/// - `error`: `code`, `message`;
/// - `params`: `name` (the tool of a tools/call), `task` (2025-11-25), `clientInfo` and
///   `protocolVersion` (initialize, ≤ 2025-11-25), `_meta`;
/// - `params.uri` (the resource methods);
/// - `params._meta`: `traceparent` and `tracestate` (SEP-414, any revision);
/// - `params._meta` (2026-07-28): `io.modelcontextprotocol/protocolVersion`,
///   `io.modelcontextprotocol/clientInfo`, and
///   `io.modelcontextprotocol/clientCapabilities.extensions["io.modelcontextprotocol/tasks"]`;
/// - a client's info, either place: `name`, `version`;
/// - a `tools` entry: `name`, `annotations.readOnlyHint`, `annotations.idempotentHint`
///   (2025-06-18 server/tools §ToolAnnotations).
pub(crate) fn child(parent: Option<Slot>, key: &[u8]) -> Option<Slot> {
    use Slot as S;
    Some(match (parent, key) {
        (None, b"jsonrpc") => S::Jsonrpc,
        (None, b"id") => S::Id,
        (None, b"method") => S::Method,
        (None, b"result") => S::Result,
        (None, b"error") => S::Error,
        (None, b"params") => S::Params,
        (Some(S::Result), b"resultType") => S::ResultType,
        (Some(S::Result), b"isError") => S::IsError,
        (Some(S::Result), b"content") => S::Content,
        (Some(S::Result), b"task") => S::ResultTask,
        (Some(S::Result), b"inputRequests") => S::InputRequests,
        (Some(S::Result), b"requestState") => S::RequestState,
        (Some(S::Result), b"tools") => S::Tools,
        (Some(S::Error), b"code") => S::Code,
        (Some(S::Error), b"message") => S::Message,
        (Some(S::Params), b"name") => S::ToolName,
        (Some(S::Params), b"task") => S::ParamsTask,
        (Some(S::Params), b"_meta") => S::Meta,
        (Some(S::Params), b"clientInfo") => S::ClientInfo,
        (Some(S::Params), b"protocolVersion") => S::ProtocolVersion,
        (Some(S::Params), b"uri") => S::ResourceUri,
        (Some(S::Meta), b"traceparent") => S::Traceparent,
        (Some(S::Meta), b"tracestate") => S::Tracestate,
        (Some(S::Meta), b"io.modelcontextprotocol/protocolVersion") => S::ProtocolVersion,
        (Some(S::Meta), b"io.modelcontextprotocol/clientInfo") => S::ClientInfo,
        (Some(S::Meta), b"io.modelcontextprotocol/clientCapabilities") => S::ClientCapabilities,
        (Some(S::ClientCapabilities), b"extensions") => S::Extensions,
        (Some(S::Extensions), b"io.modelcontextprotocol/tasks") => S::TasksExtension,
        (Some(S::ClientInfo), b"name") => S::ClientName,
        (Some(S::ClientInfo), b"version") => S::ClientVersion,
        (Some(S::ToolEntry), b"name") => S::ToolEntryName,
        (Some(S::ToolEntry), b"annotations") => S::ToolAnnotations,
        (Some(S::ToolAnnotations), b"readOnlyHint") => S::ReadOnlyHint,
        (Some(S::ToolAnnotations), b"idempotentHint") => S::IdempotentHint,
        _ => return None,
    })
}

/// The slot of each element of a followed array in this slot (only `result.tools` is one).
pub(crate) fn element(array: Slot) -> Option<Slot> {
    (array == Slot::Tools).then_some(Slot::ToolEntry)
}

/// Whether the keys of an object at this slot are worth capturing (the object leads to a slot).
pub(crate) fn keys_matter(slot: Slot) -> bool {
    matches!(
        slot,
        Slot::Result
            | Slot::Error
            | Slot::Params
            | Slot::Meta
            | Slot::ClientCapabilities
            | Slot::Extensions
            | Slot::ClientInfo
            | Slot::ToolEntry
            | Slot::ToolAnnotations
    )
}

#[cfg(test)]
mod tests;
