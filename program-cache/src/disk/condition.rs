//! Conditions the disk layer reports: to stats (the first one), to `tracing` and to the host's
//! log callback.

use std::sync::Mutex;

use super::config::LogCallback;

/// Conditions: some reported once per kind (stats + log), deletions reported every time.
pub(super) struct Conditions {
    first: Mutex<Option<String>>,
    log: Option<LogCallback>,
    reported: Mutex<Vec<&'static str>>,
}

impl Conditions {
    pub(super) fn new(log: Option<LogCallback>) -> Self {
        Conditions {
            first: Mutex::new(None),
            log,
            reported: Mutex::new(Vec::new()),
        }
    }
    pub(super) fn report(&self, kind: &'static str, text: String) {
        {
            let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
            if reported.contains(&kind) {
                return;
            }
            reported.push(kind);
        }
        tracing::warn!("{text}");
        self.first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| text.clone());
        if let Some(log) = &self.log {
            log(&text);
        }
    }
    /// Every call goes to the log (deletions of what another store or process left).
    pub(super) fn log(&self, text: &str) {
        tracing::info!("{text}");
        if let Some(log) = &self.log {
            log(text);
        }
    }
    pub(super) fn first(&self) -> Option<String> {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
