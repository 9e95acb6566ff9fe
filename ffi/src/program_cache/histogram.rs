//! The program cache's histograms seen from C: the host's histogram callback
//! (`gpusvc_program_cache_histogram_callback`) and the histogram queries.

use std::ffi::{CString, c_char, c_void};
use std::sync::{Arc, OnceLock};

use program_cache::stats::names;
use program_cache::{HistogramCallback, ProgramCache};

use crate::kit::{
    FfiError, Gate, GatedFn, HostFn, Out, answer_sized_into, c_string, cstr_in, ffi_guard,
    gpusvc_result, invalid_argument,
};
use crate::program_cache::types::{gpusvc_program_cache_histogram_summary, item_at};
use crate::program_cache::{cache, gpusvc_program_cache};

/// Called once per histogram sample: the histogram's name (a static string), the value (times
/// in microseconds, sizes in bytes) and the `user_data` given at creation.
///
/// It is called on the thread that recorded the sample (one calling the cache, or a program
/// manager over it), with no cache lock held, and one call at a time: a sample recorded on
/// another thread during a call waits until that call returns. So it must not wait for another
/// thread that uses the cache. It may call gpusvc, the cache included, but a sample that such a nested call
/// records (or any call made from inside a cache's histogram or disk log callback) is kept in
/// the cache's own histograms (`gpusvc_program_cache_histogram`) and not passed to a callback.
/// It must not unwind. No call starts once `gpusvc_program_cache_free` of the cache has
/// returned, even while program managers keep the cache alive; a call in progress on another
/// thread is waited for.
pub type gpusvc_program_cache_histogram_callback =
    Option<unsafe extern "C" fn(name: *const c_char, value: f64, user_data: *mut c_void)>;

/// Histogram names as static C strings.
fn histogram_names() -> &'static [(&'static str, CString)] {
    static NAMES: OnceLock<Vec<(&'static str, CString)>> = OnceLock::new();
    NAMES.get_or_init(|| names::ALL.iter().map(|&n| (n, c_string(n))).collect())
}

/// The host's histogram callback as the cache takes it, behind a free-time gate for the cache
/// handle to close, so that no call starts once `gpusvc_program_cache_free` has returned (`None`
/// for a NULL callback). It is called from the threads that use the cache, one call at a time
/// (the gate serializes them; see `gpusvc_program_cache_histogram_callback`).
pub(crate) fn host_histogram(
    histogram: gpusvc_program_cache_histogram_callback,
    user_data: *mut c_void,
) -> Option<(HistogramCallback, Arc<Gate>)> {
    let (host, gate) = GatedFn::new(HostFn::optional(histogram, user_data)?);
    let callback = Arc::new(move |name: &str, value: f64| {
        host.call(|f, user_data| {
            let fallback;
            let c_name = match histogram_names().iter().find(|(n, _)| *n == name) {
                Some((_, c)) => c.as_c_str(),
                None => {
                    fallback = c_string(name);
                    fallback.as_c_str()
                }
            };
            // SAFETY: the host gave this callback and user_data for exactly this use and keeps
            // them valid until the cache is freed (the gate is open, so it has not been); the
            // name is a NUL-terminated string that outlives the call.
            unsafe { f(c_name.as_ptr(), value, user_data) };
        });
    }) as HistogramCallback;
    Some((callback, gate))
}

/// The name of histogram `index` (0-based) as a static string; past the last one
/// `GPUSVC_INVALID_ARGUMENT`.
///
/// # Safety
/// `out` is NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_histogram_name(
    index: usize,
    out: *mut *const c_char,
) -> gpusvc_result {
    ffi_guard(|| {
        // SAFETY: an output argument (this function's contract).
        let out = unsafe { Out::new(out, "out") }?;
        let (_, name) = item_at(histogram_names(), index, "histograms")?;
        // The string is static.
        out.write(name.as_ptr());
        Ok(())
    })
}

/// A summary of the histogram called `name` (see `gpusvc_program_cache_histogram_name`); all
/// zeros while it has no samples. An unknown name is `GPUSVC_INVALID_ARGUMENT`.
///
/// The host sets `out->struct_size`; only that many bytes are written, and `struct_size`
/// becomes the bytes written.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string; `out` is NULL or valid for reading and writing
/// `out->struct_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpusvc_program_cache_histogram(
    cache: *const gpusvc_program_cache,
    name: *const c_char,
    out: *mut gpusvc_program_cache_histogram_summary,
) -> gpusvc_result {
    // SAFETY: forwarded from this function's contract (the name is read in the closure).
    unsafe {
        answer_sized_into(
            || Ok((self::cache(cache)?, cstr_in(name, "name")?)),
            out,
            "out",
            |(cache, name)| histogram_summary(&cache, name),
        )
    }
}

fn histogram_summary(
    cache: &ProgramCache,
    name: &str,
) -> Result<gpusvc_program_cache_histogram_summary, FfiError> {
    if !names::ALL.contains(&name) {
        return Err(invalid_argument(format!("unknown histogram {name:?}")));
    }
    Ok(cache
        .stats()
        .histograms
        .get(name)
        .map(|h| gpusvc_program_cache_histogram_summary {
            struct_size: 0,
            count: h.count,
            sum: h.sum,
            min: h.min,
            max: h.max,
            mean: h.mean(),
            p50: h.quantile_upper_bound(0.5),
            p95: h.quantile_upper_bound(0.95),
        })
        .unwrap_or_default())
}
