//! The registry of live handles: a handle that was freed, never made, or is of another kind is
//! an error code (`GPUSVC_INVALID_HANDLE`), never a dereference of freed memory.
//!
//! The program-cache handles are not pointers to Rust objects: they are registry ids (never
//! reused, so a stale handle can never alias a newer object) presented to C as opaque pointers,
//! and the library never dereferences them. Two kinds of object sit behind them:
//! * **shared** objects (`Send + Sync`, usable from any thread) live in the global registry as
//!   an `Arc`; a call clones the `Arc` under the registry lock, so a concurrent `_free` on
//!   another thread only drops the registry's reference and the call finishes on a live object;
//! * **local** objects (thread-bound: GL contexts and GL objects, host sinks) live in a
//!   per-thread map as `Rc<RefCell<_>>`; the registry records the owner thread, so use from
//!   another thread is `GPUSVC_WRONG_THREAD`, and a host callback that re-enters the library
//!   with a handle the outer call is using gets `GPUSVC_HANDLE_BUSY` instead of an aliased
//!   `&mut`. A local object may have a **view**: an `Arc` part that any thread may read (a GL
//!   context's identity strings).
//!
//! Which of the two a handle is, is a property of its [`Kind`] ([`Kind::thread_bound`]). A
//! shared handle may own free-time [`Gate`]s: `free` closes them once the handle is gone, so
//! the host callbacks they guard are never called after `_free` returns.

use std::any::Any;
use std::cell::{RefCell, RefMut};
use std::collections::{BTreeMap, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::ThreadId;

use crate::kit::error::{FfiError, gpusvc_result, null_argument};
use crate::kit::host::Gate;

/// What a handle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    GlContext,
    ProgramCache,
    ProgramCacheStore,
    CachedProgram,
    ProgramManager,
    Shader,
    LinkedProgram,
    PendingLink,
    HostSink,
    SyncManager,
    Scheduler,
    BoCache,
    Bo,
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    VcacheFitResult,
    #[cfg_attr(not(feature = "gl"), allow(dead_code))]
    RestoreAhead,
}

impl Kind {
    /// Whether objects of this kind are bound to the thread that made them (a GL context is
    /// current on one thread; GL objects and host sinks live on it): use or `_free` from another
    /// thread is `GPUSVC_WRONG_THREAD`. The other kinds are `Send + Sync`, usable from any
    /// thread.
    pub(crate) fn thread_bound(self) -> bool {
        match self {
            Kind::GlContext
            | Kind::ProgramManager
            | Kind::Shader
            | Kind::LinkedProgram
            | Kind::PendingLink
            | Kind::HostSink => true,
            Kind::ProgramCache
            | Kind::ProgramCacheStore
            | Kind::CachedProgram
            | Kind::SyncManager
            | Kind::Scheduler
            | Kind::BoCache
            | Kind::Bo
            | Kind::VcacheFitResult
            | Kind::RestoreAhead => false,
        }
    }

    fn c_name(self) -> &'static str {
        match self {
            Kind::GlContext => "gpusvc_gl_context",
            Kind::ProgramCache => "gpusvc_program_cache",
            Kind::ProgramCacheStore => "gpusvc_program_cache_store",
            Kind::CachedProgram => "gpusvc_program_cache_entry",
            Kind::ProgramManager => "gpusvc_program_manager",
            Kind::Shader => "gpusvc_program_manager_shader",
            Kind::LinkedProgram => "gpusvc_program_manager_linked_program",
            Kind::PendingLink => "gpusvc_program_manager_pending_link",
            Kind::HostSink => "gpusvc_program_manager_host_sink",
            Kind::SyncManager => "gpusvc_sync_manager",
            Kind::Scheduler => "gpusvc_scheduler",
            Kind::BoCache => "gpusvc_bo_cache",
            Kind::Bo => "gpusvc_bo",
            Kind::VcacheFitResult => "gpusvc_vcache_fit_result",
            Kind::RestoreAhead => "gpusvc_restore_ahead",
        }
    }
}

enum Slot {
    Shared {
        kind: Kind,
        value: Arc<dyn Any + Send + Sync>,
        /// Closed by `free`.
        gates: Vec<Arc<Gate>>,
    },
    Local {
        kind: Kind,
        owner: ThreadId,
        /// The part any thread may read.
        #[cfg_attr(not(feature = "gl"), allow(dead_code))]
        view: Option<Arc<dyn Any + Send + Sync>>,
    },
}

impl Slot {
    fn kind(&self) -> Kind {
        match self {
            Slot::Shared { kind, .. } | Slot::Local { kind, .. } => *kind,
        }
    }
}

struct Registry {
    /// The next id; ids are never reused.
    next: usize,
    slots: BTreeMap<usize, Slot>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next: 1,
    slots: BTreeMap::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    // Nothing panics while the lock is held; if something did, the map is still consistent.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// This thread's local objects. At thread exit the objects left (handles the host never freed)
/// are dropped on their own thread; a panic there must not abort the process.
struct LocalMap(HashMap<usize, Rc<dyn Any>>);

impl Drop for LocalMap {
    fn drop(&mut self) {
        for (_, value) in self.0.drain() {
            let _ = catch_unwind(AssertUnwindSafe(|| drop(value)));
        }
    }
}

thread_local! {
    static LOCAL: RefCell<LocalMap> = RefCell::new(LocalMap(HashMap::new()));
}

fn allocate(slot: Slot) -> usize {
    let mut reg = registry();
    let id = reg.next;
    reg.next += 1;
    reg.slots.insert(id, slot);
    id
}

/// The opaque pointer C sees for a registry id. It is never dereferenced.
pub(crate) fn to_handle<H>(id: usize) -> *mut H {
    std::ptr::without_provenance_mut(id)
}

fn invalid(id: usize, kind: Kind) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_INVALID_HANDLE,
        format!(
            "{:#x} is not a live {} (freed, or never made by gpusvc)",
            id,
            kind.c_name()
        ),
    )
}

fn wrong_kind(id: usize, found: Kind, expected: Kind) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_INVALID_HANDLE,
        format!(
            "handle {:#x} is a {}, not a {}",
            id,
            found.c_name(),
            expected.c_name()
        ),
    )
}

fn wrong_thread(kind: Kind) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_WRONG_THREAD,
        format!(
            "this {} belongs to another thread; use and free it on the thread that made it",
            kind.c_name()
        ),
    )
}

fn freed_on_wrong_thread(kind: Kind) -> FfiError {
    FfiError::new(
        gpusvc_result::GPUSVC_WRONG_THREAD,
        format!(
            "this {} belongs to another thread and was not freed here: it is leaked unless it \
             is freed on the thread that made it",
            kind.c_name()
        ),
    )
}

/// Registers a shared (any-thread) object; returns its handle.
pub(crate) fn new_shared<H, T: Any + Send + Sync>(kind: Kind, value: T) -> *mut H {
    new_shared_gated(kind, Arc::new(value), Vec::new())
}

/// Registers a shared (any-thread) object that is already in an `Arc`, with the gates of the
/// host callbacks it owns (closed by `free`); returns its handle.
pub(crate) fn new_shared_gated<H, T: Any + Send + Sync>(
    kind: Kind,
    value: Arc<T>,
    gates: Vec<Arc<Gate>>,
) -> *mut H {
    debug_assert!(!kind.thread_bound(), "{} is thread-bound", kind.c_name());
    to_handle(allocate(Slot::Shared { kind, value, gates }))
}

/// The object behind a shared handle.
pub(crate) fn shared<H, T: Any + Send + Sync>(
    handle: *const H,
    name: &str,
    kind: Kind,
) -> Result<Arc<T>, FfiError> {
    if handle.is_null() {
        return Err(null_argument(name));
    }
    let id = handle.addr();
    let value = match registry().slots.get(&id) {
        None => return Err(invalid(id, kind)),
        Some(Slot::Shared { kind: k, value, .. }) if *k == kind => value.clone(),
        Some(slot) => return Err(wrong_kind(id, slot.kind(), kind)),
    };
    value.downcast::<T>().map_err(|_| invalid(id, kind))
}

/// Registers a thread-bound object owned by the calling thread; returns its handle.
pub(crate) fn new_local<H, T: Any>(kind: Kind, value: T) -> *mut H {
    new_local_with_view(kind, value, None)
}

/// Registers a thread-bound object owned by the calling thread, with a part that any thread may
/// read (see [`view`]); returns its handle.
pub(crate) fn new_local_with_view<H, T: Any>(
    kind: Kind,
    value: T,
    view: Option<Arc<dyn Any + Send + Sync>>,
) -> *mut H {
    debug_assert!(kind.thread_bound(), "{} is not thread-bound", kind.c_name());
    let id = allocate(Slot::Local {
        kind,
        owner: std::thread::current().id(),
        view,
    });
    let value: Rc<dyn Any> = Rc::new(RefCell::new(value));
    LOCAL.with(|m| m.borrow_mut().0.insert(id, value));
    to_handle(id)
}

/// The any-thread part of a thread-bound handle (from [`new_local_with_view`]), from any thread.
#[cfg_attr(not(feature = "gl"), allow(dead_code))]
pub(crate) fn view<H, V: Any + Send + Sync>(
    handle: *const H,
    name: &str,
    kind: Kind,
) -> Result<Arc<V>, FfiError> {
    if handle.is_null() {
        return Err(null_argument(name));
    }
    let id = handle.addr();
    let view = match registry().slots.get(&id) {
        None => return Err(invalid(id, kind)),
        Some(Slot::Local { kind: k, view, .. }) if *k == kind => view.clone(),
        Some(slot) => return Err(wrong_kind(id, slot.kind(), kind)),
    };
    view.and_then(|v| v.downcast::<V>().ok())
        .ok_or_else(|| invalid(id, kind))
}

/// Checks that `id` is a live local object of `kind` owned by this thread.
fn check_local(id: usize, kind: Kind) -> Result<(), FfiError> {
    match registry().slots.get(&id) {
        None => Err(invalid(id, kind)),
        Some(Slot::Local { kind: k, owner, .. }) if *k == kind => {
            if *owner == std::thread::current().id() {
                Ok(())
            } else {
                Err(wrong_thread(kind))
            }
        }
        Some(slot) => Err(wrong_kind(id, slot.kind(), kind)),
    }
}

/// A thread-bound object, kept alive by this reference for the length of a call.
pub(crate) struct Local<T> {
    rc: Rc<RefCell<T>>,
    kind: Kind,
}

impl<T> std::fmt::Debug for Local<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local").field("kind", &self.kind).finish()
    }
}

impl<T> Local<T> {
    /// A reference that does not keep the object alive (for an object that must reach it later
    /// only while it lives).
    pub(crate) fn downgrade(&self) -> std::rc::Weak<RefCell<T>> {
        Rc::downgrade(&self.rc)
    }

    /// Borrows the object to read it; `GPUSVC_HANDLE_BUSY` when an outer call on this thread is
    /// changing it.
    pub(crate) fn borrow(&self) -> Result<std::cell::Ref<'_, T>, FfiError> {
        self.rc.try_borrow().map_err(|_| self.busy())
    }

    fn busy(&self) -> FfiError {
        FfiError::new(
            gpusvc_result::GPUSVC_HANDLE_BUSY,
            format!(
                "this {} is in use by an outer gpusvc call on this thread (a callback \
                 re-entered the library with it)",
                self.kind.c_name()
            ),
        )
    }

    /// Borrows the object; `GPUSVC_HANDLE_BUSY` when an outer call on this thread holds it.
    pub(crate) fn borrow_mut(&self) -> Result<RefMut<'_, T>, FfiError> {
        self.rc.try_borrow_mut().map_err(|_| self.busy())
    }
}

/// The object behind a thread-bound handle.
pub(crate) fn local<H, T: Any>(
    handle: *const H,
    name: &str,
    kind: Kind,
) -> Result<Local<T>, FfiError> {
    if handle.is_null() {
        return Err(null_argument(name));
    }
    let id = handle.addr();
    check_local(id, kind)?;
    let value = LOCAL
        .with(|m| m.borrow().0.get(&id).cloned())
        .ok_or_else(|| invalid(id, kind))?;
    let rc = value
        .downcast::<RefCell<T>>()
        .map_err(|_| invalid(id, kind))?;
    Ok(Local { rc, kind })
}

/// Frees a handle of `kind`. NULL is a no-op. A thread-bound handle is freed only on its own
/// thread (`GPUSVC_WRONG_THREAD` elsewhere, and it is left alone). The handle's gates are closed;
/// the object is dropped once no call that is still running (an outer call, when a callback
/// frees a handle; a call on another thread, for a shared one) uses it.
pub(crate) fn free<H>(handle: *const H, kind: Kind) -> Result<(), FfiError> {
    if handle.is_null() {
        return Ok(());
    }
    let id = handle.addr();
    let removed = {
        let mut reg = registry();
        match reg.slots.get(&id) {
            None => return Err(invalid(id, kind)),
            Some(slot) if slot.kind() != kind => {
                return Err(wrong_kind(id, slot.kind(), kind));
            }
            Some(Slot::Local { owner, .. }) if *owner != std::thread::current().id() => {
                return Err(freed_on_wrong_thread(kind));
            }
            Some(_) => reg.slots.remove(&id),
        }
    };
    // Dropped with no lock and no borrow held: drops may call host callbacks that re-enter.
    match removed {
        Some(Slot::Shared { value, gates, .. }) => {
            // The drop first (when it is the last reference, it may still report through the
            // callbacks, as the object winds down), then the gates.
            drop(value);
            for gate in gates {
                gate.close();
            }
        }
        Some(Slot::Local { .. }) => {
            let value = LOCAL.with(|m| m.borrow_mut().0.remove(&id));
            drop(value);
        }
        None => {}
    }
    Ok(())
}

/// Removes a local handle made by this thread and returns its object (for the sinks handed to
/// host callbacks, which live for one callback).
pub(crate) fn take_local<H, T: Any + Default>(handle: *const H, kind: Kind) -> T {
    let id = handle.addr();
    registry().slots.remove(&id);
    let value = LOCAL.with(|m| m.borrow_mut().0.remove(&id));
    value
        .and_then(|v| v.downcast::<RefCell<T>>().ok())
        .map(|rc| match Rc::try_unwrap(rc) {
            Ok(cell) => cell.into_inner(),
            Err(rc) => rc
                .try_borrow_mut()
                .map(|mut v| std::mem::take(&mut *v))
                .unwrap_or_default(),
        })
        .unwrap_or_else(|| {
            tracing::error!(kind = kind.c_name(), "local handle vanished");
            T::default()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Opaque;

    fn code<T>(r: Result<T, FfiError>) -> gpusvc_result {
        r.map(|_| ()).unwrap_err().code()
    }

    #[test]
    fn a_thread_bound_kind_is_used_and_freed_on_its_thread_only_but_its_view_anywhere() {
        assert!(Kind::GlContext.thread_bound() && !Kind::ProgramCache.thread_bound());
        let h: *mut Opaque =
            new_local_with_view(Kind::GlContext, 7u32, Some(Arc::new(String::from("id"))));
        let addr = h.addr();
        std::thread::spawn(move || {
            let h: *mut Opaque = to_handle(addr);
            assert_eq!(*view::<_, String>(h, "h", Kind::GlContext).unwrap(), "id");
            let wrong = gpusvc_result::GPUSVC_WRONG_THREAD;
            assert_eq!(code(local::<_, u32>(h, "h", Kind::GlContext)), wrong);
            assert_eq!(code(free(h, Kind::GlContext)), wrong);
        })
        .join()
        .unwrap();
        assert_eq!(
            *local::<_, u32>(h, "h", Kind::GlContext)
                .unwrap()
                .borrow()
                .unwrap(),
            7
        );
        free(h, Kind::GlContext).unwrap();
        let invalid = gpusvc_result::GPUSVC_INVALID_HANDLE;
        assert_eq!(code(view::<_, String>(h, "h", Kind::GlContext)), invalid);
        assert_eq!(code(free(h, Kind::GlContext)), invalid);
    }

    #[test]
    fn freeing_a_shared_handle_closes_its_gates_and_ids_are_never_reused() {
        let gate = Gate::new();
        let h: *mut Opaque = new_shared_gated(Kind::SyncManager, Arc::new(1u8), vec![gate.clone()]);
        assert_eq!(gate.call(|| ()), Some(()));
        free(h, Kind::SyncManager).unwrap();
        assert_eq!(gate.call(|| ()), None);
        let again: *mut Opaque = new_shared(Kind::SyncManager, 2u8);
        assert_ne!(again.addr(), h.addr());
        assert_eq!(
            code(shared::<_, u8>(h, "h", Kind::SyncManager)),
            gpusvc_result::GPUSVC_INVALID_HANDLE
        );
        free(again, Kind::SyncManager).unwrap();
    }
}
