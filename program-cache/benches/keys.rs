//! Key computation throughput vs the `sha1` crate hashing the same bytes.
//!
//! Ours: `shader_hash`, `backend_shader_hash` (the hash a `ProgramManager` keys its shaders
//! by: `shader_hash`'s fields plus the backend identity) and `program_key`, which frame their
//! fields into SHA-1 incrementally.
//! Baseline: `Sha1::digest` over the exact preimage those functions hash (built beforehand), so
//! the ratio is the cost of the framing. Goal: ours / baseline throughput >= 0.9.

use bench_support as support;

use std::hint::black_box;

use program_cache::{AttributeBinding, ShaderStage, TransformFeedbackMode};
use program_cache::{
    ProgramKeyInput, backend_shader_hash, backend_shader_hash_preimage, program_key,
    program_key_preimage, shader_hash, shader_hash_preimage,
};
use sha1::{Digest, Sha1};
use support::{Row, median_ns, report};

/// A realistic shader: a few KB of GLSL.
fn shader_source(bytes: usize) -> String {
    let mut s = String::from("#version 330 core\nuniform mat4 u_mvp;\nin vec4 a_position;\n");
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(&format!(
            "float f{i}(float x) {{ return x * {i}.0 + sin(x) * cos(x * 0.{i}); }}\n"
        ));
        i += 1;
    }
    s.push_str("void main() { gl_Position = u_mvp * a_position; }\n");
    s
}

/// A backend identity as a host names its GL backend.
const IDENTITY: &str = "ANGLE 2.1.23456 git hash: 0123456789ab";

fn main() {
    let mut rows = Vec::new();
    for size in [512usize, 4096, 32768] {
        let source = shader_source(size);
        let options = b"translator:webgl2;precision:highp";
        let preimage = shader_hash_preimage(ShaderStage::Vertex, &source, options);
        assert_eq!(
            <[u8; 20]>::from(Sha1::digest(&preimage)),
            shader_hash(ShaderStage::Vertex, &source, options).0
        );
        let ours = median_ns(31, 20.0, || {
            black_box(shader_hash(
                ShaderStage::Vertex,
                black_box(&source),
                options,
            ));
        });
        let base = median_ns(31, 20.0, || {
            black_box(Sha1::digest(black_box(&preimage)));
        });
        let mb = |ns: f64| preimage.len() as f64 / ns * 1e3; // bytes/ns -> MB/s
        rows.push(Row {
            metric: format!("shader key, {} B source", source.len()),
            unit: "MB/s",
            ours: mb(ours),
            baseline: mb(base),
            ratio_note: "ours/baseline throughput (goal >= 0.9)",
        });
        let preimage =
            backend_shader_hash_preimage(ShaderStage::Vertex, &source, options, IDENTITY);
        assert_eq!(
            <[u8; 20]>::from(Sha1::digest(&preimage)),
            backend_shader_hash(ShaderStage::Vertex, &source, options, IDENTITY).0
        );
        let ours = median_ns(31, 20.0, || {
            black_box(backend_shader_hash(
                ShaderStage::Vertex,
                black_box(&source),
                options,
                IDENTITY,
            ));
        });
        let base = median_ns(31, 20.0, || {
            black_box(Sha1::digest(black_box(&preimage)));
        });
        let mb = |ns: f64| preimage.len() as f64 / ns * 1e3;
        rows.push(Row {
            metric: format!("manager shader key, {} B source", source.len()),
            unit: "MB/s",
            ours: mb(ours),
            baseline: mb(base),
            ratio_note: "ours/baseline throughput (goal >= 0.9)",
        });
    }

    let bindings = [
        AttributeBinding {
            name: "a_texcoord".into(),
            location: 1,
        },
        AttributeBinding {
            name: "a_position".into(),
            location: 0,
        },
        AttributeBinding {
            name: "a_color".into(),
            location: 2,
        },
    ];
    let varyings = ["v_out".to_string()];
    let input = ProgramKeyInput {
        vertex: shader_hash(ShaderStage::Vertex, "vs", b""),
        fragment: shader_hash(ShaderStage::Fragment, "fs", b""),
        backend_identity: IDENTITY,
        attribute_bindings: &bindings,
        transform_feedback_varyings: &varyings,
        transform_feedback_mode: TransformFeedbackMode::Interleaved,
        other_stages: &[],
        separable: false,
    };
    let preimage = program_key_preimage(&input);
    assert_eq!(
        <[u8; 20]>::from(Sha1::digest(&preimage)),
        program_key(&input).0
    );
    let ours = median_ns(31, 20.0, || {
        black_box(program_key(black_box(&input)));
    });
    let base = median_ns(31, 20.0, || {
        black_box(Sha1::digest(black_box(&preimage)));
    });
    rows.push(Row {
        metric: format!("program key, {} B preimage", preimage.len()),
        unit: "keys/s (millions)",
        ours: 1e3 / ours,
        baseline: 1e3 / base,
        ratio_note: "ours/baseline throughput (goal >= 0.9)",
    });
    report("program_cache_keys", &rows);
}
