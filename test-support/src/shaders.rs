//! GLSL bodies the GL tests draw with (no `#version` line: prepend the context's
//! `glsl_prelude()`).

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
