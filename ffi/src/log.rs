//! `gpusvc_set_log_callback`: the events every gpusvc crate logs through `tracing`, forwarded
//! to a C host (which has no Rust subscriber of its own).
//!
//! The first call that sets a callback installs [`HostLog`] as the process-wide `tracing`
//! subscriber (`tracing::dispatcher::set_global_default`); from then on it stays installed and
//! forwards every event at or above the host's level to the current callback, or nothing when
//! none is set. A process whose Rust code installed a global subscriber first keeps it: the
//! call is `GPUSVC_LOG_SUBSCRIBER_TAKEN` and gpusvc's events reach that subscriber instead (a
//! Rust host reads them through `tracing` itself); a Rust subscriber installed after ours is
//! refused by `tracing` (`set_global_default` fails).
//!
//! Each callback sits behind its own free-time [`Gate`](crate::kit::Gate): once the call that
//! replaced or unset it has returned, it is never called again (that call waits for a call in
//! flight on another thread). Events raised on a thread while it is inside the log callback (or
//! inside any other gated host callback) are dropped, never recursed, and counted
//! (`gpusvc_log_dropped_events`).

use std::ffi::{CString, c_char, c_void};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};

use crate::kit::{FfiError, Gate, GatedFn, HostFn, Out, c_enum, ffi_guard, gpusvc_result};

/// The severity of a logged event, passed as `uint32_t` (to the callback, and as the least
/// severe level a host wants). Lower numbers are more severe.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum gpusvc_log_level {
    /// Something failed and was given up (a context leaked, ...).
    GPUSVC_LOG_LEVEL_ERROR = 1,
    /// Something went wrong and the library carried on (a damaged entry rejected, a folder
    /// unusable, ...).
    GPUSVC_LOG_LEVEL_WARN = 2,
    /// Something a host may want to know (a stale store removed, a binary the driver refused,
    /// tasks dropped with their stream, ...).
    GPUSVC_LOG_LEVEL_INFO = 3,
    /// Detail for debugging (an entry skipped at load, a program not cached, ...).
    GPUSVC_LOG_LEVEL_DEBUG = 4,
    /// Everything.
    GPUSVC_LOG_LEVEL_TRACE = 5,
}

c_enum!(impl gpusvc_log_level {
    GPUSVC_LOG_LEVEL_ERROR,
    GPUSVC_LOG_LEVEL_WARN,
    GPUSVC_LOG_LEVEL_INFO,
    GPUSVC_LOG_LEVEL_DEBUG,
    GPUSVC_LOG_LEVEL_TRACE,
});

impl gpusvc_log_level {
    fn of(level: &Level) -> Self {
        match *level {
            Level::ERROR => Self::GPUSVC_LOG_LEVEL_ERROR,
            Level::WARN => Self::GPUSVC_LOG_LEVEL_WARN,
            Level::INFO => Self::GPUSVC_LOG_LEVEL_INFO,
            Level::DEBUG => Self::GPUSVC_LOG_LEVEL_DEBUG,
            Level::TRACE => Self::GPUSVC_LOG_LEVEL_TRACE,
        }
    }

    fn filter(self) -> LevelFilter {
        match self {
            Self::GPUSVC_LOG_LEVEL_ERROR => LevelFilter::ERROR,
            Self::GPUSVC_LOG_LEVEL_WARN => LevelFilter::WARN,
            Self::GPUSVC_LOG_LEVEL_INFO => LevelFilter::INFO,
            Self::GPUSVC_LOG_LEVEL_DEBUG => LevelFilter::DEBUG,
            Self::GPUSVC_LOG_LEVEL_TRACE => LevelFilter::TRACE,
        }
    }
}

/// The longest message handed to the callback, in bytes, NUL excluded: a longer one is cut on
/// a character boundary and ends with "…".
pub const GPUSVC_LOG_MAX_MESSAGE: usize = 4096;

/// The host's log callback: `level` is a `gpusvc_log_level` value, `target` the part of the
/// library that logged (a stable name such as `gpusvc::scheduler`, or the Rust module path,
/// e.g. `program_cache::disk::store_dir`), `message` the event's text followed by its
/// fields as ` name=value` (at most `GPUSVC_LOG_MAX_MESSAGE` bytes). Both strings are UTF-8,
/// NUL-terminated and valid only during the call. Called on the thread that raised the event
/// (any thread, gpusvc's own included), one call at a time.
pub type gpusvc_log_fn = Option<
    unsafe extern "C" fn(
        level: u32,
        target: *const c_char,
        message: *const c_char,
        user_data: *mut c_void,
    ),
>;

type LogFn = unsafe extern "C" fn(u32, *const c_char, *const c_char, *mut c_void);

/// A callback behind its gate.
#[derive(Debug)]
struct Callback {
    f: GatedFn<LogFn>,
    gate: Arc<Gate>,
    /// The host's level for this callback: `LEVEL` and `CURRENT` are read apart, so an event
    /// let through by the previous callback's level is checked again against this one.
    level: gpusvc_log_level,
    /// Set just before `gate` is closed: a call the gate skips while this is false was skipped
    /// because its thread is inside a host callback.
    closed: AtomicBool,
}

/// The level of the current callback (0: none).
static LEVEL: AtomicU32 = AtomicU32::new(0);
/// The current callback.
static CURRENT: Mutex<Option<Arc<Callback>>> = Mutex::new(None);
/// Events dropped because they were raised inside a host callback on their thread.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Whether `HostLog` is the process-wide subscriber (set once, by the first callback).
static INSTALLED: OnceLock<bool> = OnceLock::new();

thread_local! {
    /// True while this thread is inside the log callback.
    static IN_LOG_CALL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The process-wide `tracing` subscriber that forwards events to the host's callback.
#[derive(Debug)]
struct HostLog;

impl HostLog {
    fn level() -> Option<gpusvc_log_level> {
        gpusvc_log_level::from_u32(LEVEL.load(Ordering::Acquire))
    }
}

impl Subscriber for HostLog {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        // The level changes at run time: decided per event in `enabled`.
        Interest::sometimes()
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event()
            && Self::level().is_some_and(|l| gpusvc_log_level::of(metadata.level()) <= l)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(Self::level().map_or(LevelFilter::OFF, gpusvc_log_level::filter))
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // Spans are not forwarded (`enabled` refuses them); an id is still owed.
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let Some(level) = Self::level() else { return };
        let this = gpusvc_log_level::of(event.metadata().level());
        if this > level {
            return;
        }
        if IN_LOG_CALL.with(std::cell::Cell::get) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(host) = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).clone() else {
            return;
        };
        if this > host.level {
            return;
        }
        let mut line = Line::default();
        event.record(&mut line);
        let message = line.finish();
        let target = c_text(event.metadata().target());
        let mut called = false;
        host.f.call(|f, user_data| {
            called = true;
            IN_LOG_CALL.with(|c| c.set(true));
            /// Clears the mark when the call ends, also when it unwinds.
            struct Clear;
            impl Drop for Clear {
                fn drop(&mut self) {
                    IN_LOG_CALL.with(|c| c.set(false));
                }
            }
            let _clear = Clear;
            // SAFETY: the host's callback with its own user data, on a thread the header
            // allows (any); both strings are NUL-terminated and live for the call.
            unsafe { f(this as u32, target.as_ptr(), message.as_ptr(), user_data) }
        });
        if !called && !host.closed.load(Ordering::Acquire) {
            // Skipped by the gate while it is open: this thread is inside a host callback.
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// `text` as a C string (an interior NUL, which Rust text may hold, becomes U+FFFD).
fn c_text(text: &str) -> CString {
    CString::new(text.replace('\0', "\u{fffd}")).unwrap_or_default()
}

/// One event as one bounded line: the message, then ` name=value` per field.
#[derive(Default)]
struct Line {
    text: String,
    full: bool,
}

impl Line {
    fn push(&mut self, args: std::fmt::Arguments<'_>) {
        if self.full {
            return;
        }
        let _ = self.text.write_fmt(args);
        if self.text.len() > GPUSVC_LOG_MAX_MESSAGE {
            const MORE: &str = "…";
            let mut cut = GPUSVC_LOG_MAX_MESSAGE - MORE.len();
            while !self.text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.truncate(cut);
            self.text.push_str(MORE);
            self.full = true;
        }
    }

    fn finish(self) -> CString {
        c_text(&self.text)
    }
}

impl Line {
    /// The message goes first, whatever the order of the fields.
    fn message(&mut self, args: std::fmt::Arguments<'_>) {
        let fields = std::mem::take(&mut self.text);
        self.full = false;
        self.push(args);
        self.push(format_args!("{fields}"));
    }
}

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message(format_args!("{value}"));
        } else {
            self.push(format_args!(" {}={value}", field.name()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            // The message arrives as `format_args!`, whose Debug is its Display.
            self.message(format_args!("{value:?}"));
        } else {
            self.push(format_args!(" {}={value:?}", field.name()));
        }
    }
}

/// Installs [`HostLog`] process-wide if nothing is installed yet; false when another
/// subscriber (the Rust host's) was there first.
fn install() -> bool {
    *INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(HostLog).is_ok())
}

/// Sets the host's log callback: from now on every event the library logs at `min_level` or a
/// more severe level (a `gpusvc_log_level` value: `GPUSVC_LOG_LEVEL_WARN` forwards errors and
/// warnings) is passed to `log` with `user_data`, and no less severe one, even while another
/// thread replaces a callback of another level. An invalid level is
/// `GPUSVC_INVALID_ARGUMENT` and keeps the current callback. A NULL `log` unsets the callback (`min_level`
/// is then not looked at). Replaces the callback set before, if any: once this call has
/// returned, the previous callback is never called again (a call in flight on another thread
/// is waited for; a call in flight on this thread, when `log` itself calls this, simply
/// finishes).
///
/// Events raised on a thread while it is inside the log callback or another gpusvc host
/// callback are dropped (counted by `gpusvc_log_dropped_events`), never passed recursively; so
/// the callback may call any gpusvc function, this one included.
///
/// The first call with a callback installs gpusvc's subscriber as the process-wide `tracing`
/// subscriber. In a process whose Rust code installed its own first, nothing changes and the
/// call is `GPUSVC_LOG_SUBSCRIBER_TAKEN`: the events go to that subscriber. Unsetting always
/// succeeds.
///
/// # Safety
/// `log`, when not NULL, must be safe to call from any thread with `user_data` until this
/// function has been called again (to replace or unset it) and has returned.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_set_log_callback(
    min_level: u32,
    log: gpusvc_log_fn,
    user_data: *mut c_void,
) -> gpusvc_result {
    ffi_guard(|| {
        let new = match log {
            Some(f) => {
                let level = gpusvc_log_level::decode(min_level)?;
                if !install() {
                    return Err(FfiError::new(
                        gpusvc_result::GPUSVC_LOG_SUBSCRIBER_TAKEN,
                        "a process-wide tracing subscriber was installed before gpusvc's: \
                         the library's events go to it",
                    ));
                }
                let (f, gate) = GatedFn::new(HostFn::new(f, user_data));
                let callback = Callback {
                    f,
                    gate,
                    level,
                    closed: AtomicBool::new(false),
                };
                Some((Arc::new(callback), level))
            }
            None => None,
        };
        let old = {
            let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
            let (next, level) = match new {
                Some((f, level)) => (Some(f), level as u32),
                None => (None, 0),
            };
            LEVEL.store(level, Ordering::Release);
            std::mem::replace(&mut *current, next)
        };
        // Outside the lock: closing waits for a call in flight, which may itself lock CURRENT.
        if let Some(old) = old {
            old.closed.store(true, Ordering::Release);
            old.gate.close();
        }
        // The level is part of tracing's cached interest (its global max level).
        tracing::callsite::rebuild_interest_cache();
        Ok(())
    })
}

/// How many events were dropped because they were raised on a thread that was inside the log
/// callback (or another gpusvc host callback) at the time, since the process started.
///
/// # Safety
/// `out` must be NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_log_dropped_events(out: *mut u64) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        out.write(DROPPED.load(Ordering::Relaxed));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_cut_on_a_character_boundary() {
        let mut line = Line::default();
        for _ in 0..3000 {
            line.push(format_args!("é"));
        }
        let text = line.finish().into_string().unwrap();
        assert!(text.len() <= GPUSVC_LOG_MAX_MESSAGE, "{}", text.len());
        assert!(text.ends_with('…'));
        assert!(text.len() > GPUSVC_LOG_MAX_MESSAGE - 8);
    }

    #[test]
    fn an_interior_nul_does_not_lose_the_line() {
        assert_eq!(c_text("a\0b").to_str().unwrap(), "a\u{fffd}b");
    }
}
