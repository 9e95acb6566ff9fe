//! GLSL bodies the GL tests draw with (no `#version` line: prepend the context's
//! `glsl_prelude()`: `with_prelude`), and (feature `gl`) the triangle they draw with them.

/// A vertex shader with two attributes, one uniform and one varying: `a_position` scaled by
/// `u_scale`, `a_color` passed on as `v_color`.
pub const VS: &str = "
in vec2 a_position;
in vec4 a_color;
uniform float u_scale;
out vec4 v_color;
void main() {
    v_color = a_color;
    gl_Position = vec4(a_position * u_scale, 0.0, 1.0);
}
";

/// The fragment shader for [`VS`]: `v_color` times the uniform `u_tint`.
pub const FS: &str = "
in vec4 v_color;
uniform vec4 u_tint;
out vec4 o_color;
void main() { o_color = v_color * u_tint; }
";

/// A separable vertex shader (for a program pipeline): [`VS`] with an explicit `v_color`
/// location and a redeclared `gl_PerVertex`.
pub const SEPARABLE_VS: &str = "
in vec2 a_position;
in vec4 a_color;
uniform float u_scale;
layout(location = 0) out vec4 v_color;
out gl_PerVertex { vec4 gl_Position; };
void main() {
    v_color = a_color;
    gl_Position = vec4(a_position * u_scale, 0.0, 1.0);
}
";

/// The separable fragment shader for [`SEPARABLE_VS`]: `v_color` (location 0) times `u_tint`.
pub const SEPARABLE_FS: &str = "
layout(location = 0) in vec4 v_color;
uniform vec4 u_tint;
layout(location = 0) out vec4 o_color;
void main() { o_color = v_color * u_tint; }
";

/// `body` with the context's `glsl_prelude()` (its `#version` line and precision) in front.
#[cfg(feature = "gl")]
pub fn with_prelude(ctx: &headless_gl::GlContext, body: &str) -> String {
    format!("{}{body}", ctx.info().glsl_prelude())
}

/// Draws the lower-left half-triangle of a fresh `size` x `size` target, cleared to opaque
/// black, with `program` (made from [`VS`]: `a_position` and a per-vertex red, green and blue
/// `a_color`) and `uniforms`, and returns the target's pixels (RGBA8). Panics on a GL error.
#[cfg(feature = "gl")]
pub fn draw_triangle(
    ctx: &headless_gl::GlContext,
    program: &headless_gl::Program,
    size: u32,
    uniforms: &[(&str, headless_gl::UniformValue)],
) -> Vec<u8> {
    use headless_gl::{DrawCall, VertexAttribute, glow};

    let target = ctx.offscreen_target(size, size).expect("offscreen target");
    let positions = [-1.0f32, -1.0, 1.0, -1.0, -1.0, 1.0];
    let colors = [
        1.0f32, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0,
    ];
    ctx.draw(
        &target,
        &DrawCall {
            program,
            attributes: &[
                VertexAttribute {
                    name: "a_position",
                    components: 2,
                    data: &positions,
                },
                VertexAttribute {
                    name: "a_color",
                    components: 4,
                    data: &colors,
                },
            ],
            uniforms,
            mode: glow::TRIANGLES,
            vertex_count: 3,
            clear: Some([0.0, 0.0, 0.0, 1.0]),
        },
    )
    .expect("draw");
    ctx.read_rgba8(&target).expect("read back")
}

/// Draws the lower-left half-triangle of a fresh `size` x `size` target, cleared to opaque
/// black, through a program pipeline of `vertex` and `fragment` (separable programs made from
/// [`SEPARABLE_VS`] and [`SEPARABLE_FS`]): `a_color` yellow, `u_scale` 1 (set in the vertex
/// program), `u_tint` magenta (set in the fragment program), so the triangle is red. Returns
/// the target's pixels (RGBA8), or the pipeline draw's error; panics when the target cannot be
/// made or read.
#[cfg(feature = "gl")]
pub fn draw_separable_pipeline(
    ctx: &headless_gl::GlContext,
    vertex: &headless_gl::Program,
    fragment: &headless_gl::Program,
    size: u32,
) -> Result<Vec<u8>, headless_gl::DrawError> {
    use headless_gl::{DrawCall, UniformValue, VertexAttribute, glow};

    let target = ctx.offscreen_target(size, size).expect("offscreen target");
    ctx.draw_pipeline(
        &target,
        &DrawCall {
            program: vertex,
            attributes: &[
                VertexAttribute {
                    name: "a_position",
                    components: 2,
                    data: &[-1.0, -1.0, 1.0, -1.0, -1.0, 1.0],
                },
                VertexAttribute {
                    name: "a_color",
                    components: 4,
                    data: &[1.0, 1.0, 0.0, 1.0].repeat(3),
                },
            ],
            uniforms: &[
                ("u_scale", UniformValue::Float(1.0)),
                ("u_tint", UniformValue::Vec4([1.0, 0.0, 1.0, 1.0])),
            ],
            mode: glow::TRIANGLES,
            vertex_count: 3,
            clear: Some([0.0, 0.0, 0.0, 1.0]),
        },
        &[fragment],
    )?;
    Ok(ctx.read_rgba8(&target).expect("read back"))
}
