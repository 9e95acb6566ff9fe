//! The C ABI exercised from Rust, through the exported `extern "C"` functions.

mod common;

use std::ffi::{CStr, c_char};
use std::ptr;

use common::*;
use gpusvc::*;

fn message(code: u32, len: usize) -> (gpusvc_result, String, usize) {
    let mut buf = vec![0x7f as c_char; len.max(1)];
    let mut out_len = usize::MAX;
    // SAFETY: `buf` holds at least `len` bytes and `out_len` is a live usize.
    let r = unsafe { gpusvc_result_message(code, buf.as_mut_ptr(), len, &mut out_len) };
    let text = if r == gpusvc_result::GPUSVC_OK {
        // SAFETY: on success the buffer holds a NUL-terminated string.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        String::new()
    };
    (r, text, out_len)
}

#[test]
fn result_codes_have_stable_numbers_and_messages() {
    let numbers: Vec<u32> = gpusvc_result::all().iter().map(|r| *r as u32).collect();
    assert_eq!(
        numbers,
        [
            0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 100, 101, 102, 103, 104, 105, 106, 200, 201, 202,
            203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219,
            220, 300, 301, 302, 303, 304, 400, 401, 500, 501, 502, 503, 504, 505, 506, 507, 508,
            509, 600, 601, 602, 603, 604, 605, 606, 607
        ]
    );
    for &code in gpusvc_result::all() {
        let (r, text, n) = message(code as u32, 256);
        assert_eq!(r, gpusvc_result::GPUSVC_OK);
        assert_eq!(text, code.message());
        assert_eq!(n, text.len());
    }
}

#[test]
fn result_message_truncates_at_a_small_buffer_and_names_unknown_codes() {
    let full = gpusvc_result::GPUSVC_PANIC.message();
    let (r, text, n) = message(gpusvc_result::GPUSVC_PANIC as u32, 8);
    assert_eq!(r, gpusvc_result::GPUSVC_OK);
    assert_eq!((text.as_str(), n), (&full[..7], 7));
    let (r, text, n) = message(gpusvc_result::GPUSVC_OK as u32, 1);
    assert_eq!((r, text.as_str(), n), (gpusvc_result::GPUSVC_OK, "", 0));

    let (r, text, _) = message(4242, 64);
    assert_eq!(r, gpusvc_result::GPUSVC_OK);
    assert_eq!(text, "unknown gpusvc_result code 4242");

    // len 0 and NULL pointers are errors and write nothing.
    let mut out_len = 77usize;
    let mut byte = 0x55 as c_char;
    // SAFETY: len 0 means nothing may be written to `byte`.
    let r = unsafe { gpusvc_result_message(0, &mut byte, 0, &mut out_len) };
    assert_eq!(
        (r, out_len, byte),
        (gpusvc_result::GPUSVC_INSUFFICIENT_SIZE, 77, 0x55)
    );
    // SAFETY: NULL pointers are part of the contract.
    let r = unsafe { gpusvc_result_message(0, ptr::null_mut(), 16, &mut out_len) };
    assert_eq!((r, out_len), (gpusvc_result::GPUSVC_NULL_ARGUMENT, 77));
    let mut buf = [0 as c_char; 16];
    // SAFETY: as above.
    let r = unsafe { gpusvc_result_message(0, buf.as_mut_ptr(), 16, ptr::null_mut()) };
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT);
}

#[test]
fn a_panic_is_caught_at_the_boundary() {
    for _ in 0..3 {
        assert_eq!(gpusvc_debug_panic(), gpusvc_result::GPUSVC_PANIC);
    }
    assert!(
        last_detail().contains("gpusvc_debug_panic was called"),
        "{}",
        last_detail()
    );
    // The library still works after panics.
    let (r, _, _) = message(0, 32);
    assert_eq!(r, gpusvc_result::GPUSVC_OK);
}

#[test]
fn version_is_the_crate_version() {
    // SAFETY: gpusvc_version returns a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(gpusvc_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn null_arguments_are_rejected_and_outputs_untouched() {
    // SAFETY: every pointer is either NULL (part of the contract) or a live local.
    unsafe {
        gpusvc_gl_context_free(ptr::null_mut());
        assert_eq!(
            gpusvc_gl_context_open(0, ptr::null_mut()),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert!(last_detail().contains("`out`"));
        let mut s: *const c_char = ptr::null();
        assert_eq!(
            gpusvc_gl_context_vendor(ptr::null(), &mut s),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert!(s.is_null());
        let mut api = 99u32;
        assert_eq!(
            gpusvc_gl_context_api(ptr::null(), &mut api),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(api, 99);
        let mut n = 5usize;
        assert_eq!(
            gpusvc_gl_context_program_binary_formats(ptr::null(), ptr::null_mut(), 0, &mut n),
            gpusvc_result::GPUSVC_NULL_ARGUMENT
        );
        assert_eq!(n, 5);
        let mut ctx: *mut gpusvc_gl_context = ptr::null_mut();
        assert_eq!(
            gpusvc_gl_context_open(7, &mut ctx),
            gpusvc_result::GPUSVC_INVALID_ARGUMENT
        );
        assert!(ctx.is_null());
        assert!(last_detail().contains("unknown gpusvc_gl_api value 7"));
    }
}

fn string(
    ctx: *const gpusvc_gl_context,
    get: unsafe extern "C" fn(*const gpusvc_gl_context, *mut *const c_char) -> gpusvc_result,
) -> String {
    let mut s = ptr::null();
    // SAFETY: `ctx` is live; `s` is a live slot.
    assert_eq!(unsafe { get(ctx, &mut s) }, gpusvc_result::GPUSVC_OK);
    // SAFETY: the context owns a NUL-terminated string.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

#[test]
fn driver_identity_through_the_c_abi() {
    let Some(ctx) = open_gl_context("driver_identity_through_the_c_abi", 0) else {
        return;
    };
    let vendor = string(ctx, gpusvc_gl_context_vendor);
    let renderer = string(ctx, gpusvc_gl_context_renderer);
    let version = string(ctx, gpusvc_gl_context_version);
    let glsl = string(ctx, gpusvc_gl_context_glsl_version);
    eprintln!("{vendor} | {renderer} | {version} | GLSL {glsl}");
    assert!(!vendor.is_empty() && !renderer.is_empty() && !version.is_empty() && !glsl.is_empty());
    // SAFETY: `ctx` is live; outputs are live locals; `formats` has room for `n` entries.
    unsafe {
        let mut n = 0usize;
        assert_eq!(
            gpusvc_gl_context_program_binary_formats(ctx, ptr::null_mut(), 0, &mut n),
            gpusvc_result::GPUSVC_OK
        );
        assert!(n >= 1);
        let mut formats = vec![0u32; n];
        let mut m = 0usize;
        if n > 1 {
            assert_eq!(
                gpusvc_gl_context_program_binary_formats(ctx, formats.as_mut_ptr(), n - 1, &mut m),
                gpusvc_result::GPUSVC_INSUFFICIENT_SIZE
            );
            assert_eq!(m, 0);
        }
        assert_eq!(
            gpusvc_gl_context_program_binary_formats(ctx, formats.as_mut_ptr(), n, &mut m),
            gpusvc_result::GPUSVC_OK
        );
        assert_eq!(m, n);
        assert!(formats.iter().all(|&f| f != 0));
        let mut api = 0u32;
        assert_eq!(
            gpusvc_gl_context_api(ctx, &mut api),
            gpusvc_result::GPUSVC_OK
        );
        assert!(
            api == gpusvc_gl_api::GPUSVC_GL_API_DESKTOP_CORE as u32
                || api == gpusvc_gl_api::GPUSVC_GL_API_GLES as u32
        );
        let mut software = false;
        assert_eq!(
            gpusvc_gl_context_is_software(ctx, &mut software),
            gpusvc_result::GPUSVC_OK
        );
        gpusvc_gl_context_free(ctx);
    }
}

#[test]
fn gles_context_through_the_c_abi() {
    let Some(ctx) = open_gl_context("gles_context_through_the_c_abi", 2) else {
        return;
    };
    let mut api = 0u32;
    // SAFETY: `ctx` is live and `api` a live local.
    unsafe {
        assert_eq!(
            gpusvc_gl_context_api(ctx, &mut api),
            gpusvc_result::GPUSVC_OK
        );
        assert_eq!(api, gpusvc_gl_api::GPUSVC_GL_API_GLES as u32);
        assert!(string(ctx, gpusvc_gl_context_version).contains("OpenGL ES"));
        gpusvc_gl_context_free(ctx);
    }
}

#[test]
fn freeing_on_another_thread_leaks_instead_of_destroying() {
    let Some(ctx) = open_gl_context("freeing_on_another_thread_leaks_instead_of_destroying", 0)
    else {
        return;
    };
    let ctx_addr = ctx as usize;
    // The identity may be read from any thread.
    let renderer = std::thread::spawn(move || {
        string(
            ctx_addr as *const gpusvc_gl_context,
            gpusvc_gl_context_renderer,
        )
    })
    .join()
    .unwrap();
    assert!(!renderer.is_empty());
    // Freeing from another thread is refused (the context is leaked, not destroyed there).
    let detail = std::thread::spawn(move || {
        // SAFETY: the pointer is a live context; free on the wrong thread must not touch it.
        unsafe { gpusvc_gl_context_free(ctx_addr as *mut gpusvc_gl_context) };
        last_detail()
    })
    .join()
    .unwrap();
    assert!(detail.contains("leaked"), "{detail}");
}

/// `call` returned `GPUSVC_NULL_ARGUMENT` with a detail naming `param`.
#[track_caller]
fn names_null(param: &str, r: gpusvc_result) {
    assert_eq!(r, gpusvc_result::GPUSVC_NULL_ARGUMENT, "{param}");
    assert_eq!(last_detail(), format!("argument `{param}` is NULL"));
}

/// Every export that copies a list or text into a caller buffer names the header's parameter
/// when the buffer (with a non-zero length) or the count/length output is NULL.
#[test]
fn list_and_text_outputs_name_their_own_parameters_when_null() {
    let mut n = 0usize;
    let mut cache = ptr::null_mut();
    // SAFETY: every pointer is NULL (the case under test) or a live local, buffers of 8 at
    // least as long as the lengths passed; every handle is made here and freed at the end.
    unsafe {
        assert_eq!(
            gpusvc_program_cache_new(&cache_config(1 << 20), None, ptr::null_mut(), &mut cache),
            OK
        );
        let mut keys = [gpusvc_program_cache_sha1::default(); 8];
        let r = gpusvc_program_cache_eviction_order(cache, ptr::null_mut(), 8, &mut n);
        names_null("keys", r);
        let r = gpusvc_program_cache_eviction_order(cache, keys.as_mut_ptr(), 8, ptr::null_mut());
        names_null("out_count", r);

        let binary = [7u8; 16];
        let shader = |b| gpusvc_program_cache_sha1 { bytes: [b; 20] };
        let no_variables = gpusvc_program_cache_shader_variables {
            attributes: ptr::null(),
            attribute_count: 0,
            uniforms: ptr::null(),
            uniform_count: 0,
        };
        let desc = gpusvc_program_cache_entry_desc {
            struct_size: size_of::<gpusvc_program_cache_entry_desc>(),
            vertex_shader: shader(1),
            fragment_shader: shader(2),
            vertex: no_variables,
            fragment: no_variables,
            binary_format: 1,
            binary: binary.as_ptr(),
            binary_len: binary.len(),
            has_page: false,
            failure: GPUSVC_PROGRAM_CACHE_FAILURE_NONE,
            failure_stage: 0,
            failure_log: ptr::null(),
            failure_log_len: 0,
            page: 0,
        };
        let key = shader(3);
        let mut report = gpusvc_program_cache_save_report::default();
        assert_eq!(
            gpusvc_program_cache_save(cache, &key, &desc, &mut report),
            OK
        );
        let mut entry = ptr::null_mut();
        assert_eq!(gpusvc_program_cache_peek(cache, &key, &mut entry), OK);
        let (mut format, mut bytes) = (0u32, [0u8; 16]);
        let r = gpusvc_program_cache_entry_binary(entry, &mut format, ptr::null_mut(), 16, &mut n);
        names_null("buf", r);
        let r = gpusvc_program_cache_entry_binary(
            entry,
            &mut format,
            bytes.as_mut_ptr(),
            16,
            ptr::null_mut(),
        );
        names_null("out_len", r);
        assert_eq!(gpusvc_program_cache_entry_free(entry), OK);

        let mut text = [0 as c_char; 8];
        let r = gpusvc_program_cache_disk_condition(cache, ptr::null_mut(), 8, &mut n);
        names_null("buf", r);
        let r = gpusvc_program_cache_disk_condition(cache, text.as_mut_ptr(), 8, ptr::null_mut());
        names_null("out_len", r);
        let mut dir = [0 as c_char; 4096];
        let r = gpusvc_program_cache_disk_config_default_dir(ptr::null_mut(), 8, &mut n);
        names_null("buf", r);
        let r =
            gpusvc_program_cache_disk_config_default_dir(dir.as_mut_ptr(), 4096, ptr::null_mut());
        names_null("out_len", r);

        names_null("buf", gpusvc_result_message(0, ptr::null_mut(), 8, &mut n));
        let r = gpusvc_result_message(0, text.as_mut_ptr(), 8, ptr::null_mut());
        names_null("out_len", r);

        let mut tokens = [gpusvc_sync_token::default(); 8];
        let r = gpusvc_sync_token_reduce(ptr::null(), 0, ptr::null_mut(), 8, &mut n);
        names_null("out", r);
        let r = gpusvc_sync_token_reduce(ptr::null(), 0, tokens.as_mut_ptr(), 8, ptr::null_mut());
        names_null("out_count", r);
        let manager = new_sync_manager();
        let sequence = written(0, |out| gpusvc_sync_sequence_create(manager, out));
        let mut orders = [0u64; 8];
        let r = gpusvc_sync_sequence_unprocessed(manager, sequence, ptr::null_mut(), 8, &mut n);
        names_null("buf", r);
        let r = gpusvc_sync_sequence_unprocessed(
            manager,
            sequence,
            orders.as_mut_ptr(),
            8,
            ptr::null_mut(),
        );
        names_null("out_count", r);
        free_sync_manager(manager);

        if let Some(ctx) = open_gl_context(
            "list_and_text_outputs_name_their_own_parameters_when_null",
            0,
        ) {
            let mut formats = [0u32; 8];
            let r = gpusvc_gl_context_program_binary_formats(ctx, ptr::null_mut(), 8, &mut n);
            names_null("formats", r);
            let r = gpusvc_gl_context_program_binary_formats(
                ctx,
                formats.as_mut_ptr(),
                8,
                ptr::null_mut(),
            );
            names_null("out_count", r);
            let mut m = ptr::null_mut();
            assert_eq!(
                gpusvc_program_manager_new_gl(ctx, cache, c"abi".as_ptr(), &mut m),
                OK
            );
            let mut s = ptr::null_mut();
            let source = "void main() {}";
            assert_eq!(
                gpusvc_program_manager_shader_new(
                    m,
                    GPUSVC_PROGRAM_CACHE_SHADER_STAGE_VERTEX,
                    source.as_ptr().cast(),
                    source.len(),
                    &mut s
                ),
                OK
            );
            let r = gpusvc_program_manager_shader_info_log(s, ptr::null_mut(), 8, &mut n);
            names_null("buf", r);
            let r =
                gpusvc_program_manager_shader_info_log(s, text.as_mut_ptr(), 8, ptr::null_mut());
            names_null("out_len", r);
            assert_eq!(gpusvc_program_manager_shader_free(s), OK);
            assert_eq!(gpusvc_program_manager_free(m), OK);
            gpusvc_gl_context_free(ctx);
        }
        assert_eq!(gpusvc_program_cache_free(cache), OK);
    }
}
