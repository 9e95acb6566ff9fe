//! Sync tokens: plain data naming a release of a command buffer's fence.

use std::collections::HashMap;

/// Who releases: a namespace (GPU process, renderer, ...) and a command buffer id in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClientId {
    /// Namespace.
    pub namespace: i8,
    /// Command buffer id.
    pub command_buffer_id: u64,
}

/// A release to wait for: `(namespace, command buffer id)` releasing `release_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SyncToken {
    /// Namespace of the releasing command buffer.
    pub namespace: i8,
    /// The releasing command buffer.
    pub command_buffer_id: u64,
    /// The release count to reach.
    pub release_count: u64,
    /// Whether the token was verified (flushed to the service) by its producer.
    pub verified: bool,
}

impl SyncToken {
    /// A token.
    pub fn new(namespace: i8, command_buffer_id: u64, release_count: u64) -> Self {
        SyncToken {
            namespace,
            command_buffer_id,
            release_count,
            verified: false,
        }
    }

    /// The releasing client.
    pub fn client(&self) -> ClientId {
        ClientId {
            namespace: self.namespace,
            command_buffer_id: self.command_buffer_id,
        }
    }

    /// A token with release count 0 names nothing and is always released.
    pub fn is_null(&self) -> bool {
        self.release_count == 0
    }
}

/// Keeps, per `(namespace, command buffer id)`, only the token with the highest release count
/// (waiting for it implies waiting for the lower ones). A verified token wins a tie. The result
/// is sorted.
pub fn reduce(tokens: &[SyncToken]) -> Vec<SyncToken> {
    let mut best: HashMap<ClientId, SyncToken> = HashMap::new();
    for t in tokens.iter().filter(|t| !t.is_null()) {
        best.entry(t.client())
            .and_modify(|b| {
                if (t.release_count, t.verified) > (b.release_count, b.verified) {
                    *b = *t;
                }
            })
            .or_insert(*t);
    }
    let mut out: Vec<SyncToken> = best.into_values().collect();
    out.sort();
    out
}
