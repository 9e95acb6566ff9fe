//! Driver identity: which device, which API, which strings the driver reports.

use std::fmt;

use crate::context::ContextProfile;

/// Which GL API a context speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GlApi {
    /// Desktop OpenGL, core profile.
    DesktopCore,
    /// OpenGL ES 3.x.
    Gles,
}

impl fmt::Display for GlApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GlApi::DesktopCore => "OpenGL core",
            GlApi::Gles => "OpenGL ES",
        })
    }
}

/// A GL version as `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GlVersion {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
}

impl GlVersion {
    /// Makes a version.
    pub const fn new(major: u8, minor: u8) -> Self {
        GlVersion { major, minor }
    }
}

impl fmt::Display for GlVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The EGL device a context runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Position of the device in `eglQueryDevicesEXT`'s list.
    pub index: usize,
    /// How many devices EGL listed.
    pub device_count: usize,
    /// True when the device is a software rasterizer (`EGL_MESA_device_software`).
    pub software: bool,
    /// The DRM node (`/dev/dri/renderD128`, ...) when the driver reports one.
    pub drm_node: Option<String>,
    /// The device's EGL extensions, sorted.
    pub extensions: Vec<String>,
}

/// What the driver says about itself. Everything that changes the code a driver produces is in
/// here, so later layers (the program-binary cache) can build a compatibility stamp from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    /// The API of the context.
    pub api: GlApi,
    /// The profile the driver gave (core, compatibility, ES).
    pub profile: ContextProfile,
    /// `GL_MAJOR_VERSION`.`GL_MINOR_VERSION` of the context.
    pub version_numbers: GlVersion,
    /// `GL_VENDOR`.
    pub vendor: String,
    /// `GL_RENDERER`.
    pub renderer: String,
    /// `GL_VERSION`, which carries the driver version.
    pub version: String,
    /// `GL_SHADING_LANGUAGE_VERSION`.
    pub glsl_version: String,
    /// `GL_PROGRAM_BINARY_FORMATS`; empty when the driver offers no program binaries.
    pub program_binary_formats: Vec<u32>,
    /// The EGL device.
    pub device: DeviceInfo,
}

impl DriverInfo {
    /// The first lines a GLSL source needs on this context: `#version` and, on GLES, default
    /// precisions. Shaders written against it compile on both APIs.
    pub fn glsl_prelude(&self) -> &'static str {
        match self.api {
            GlApi::DesktopCore => "#version 330 core\n",
            GlApi::Gles => "#version 300 es\nprecision highp float;\nprecision highp int;\n",
        }
    }

    /// The kind of context: "OpenGL core profile", "OpenGL compatibility profile", "OpenGL ES".
    pub fn context_description(&self) -> String {
        match self.profile {
            ContextProfile::Es => "OpenGL ES".into(),
            p => format!("OpenGL {p}"),
        }
    }

    /// True when `format` is one of the driver's program-binary formats.
    pub fn supports_binary_format(&self, format: u32) -> bool {
        self.program_binary_formats.contains(&format)
    }
}

impl fmt::Display for DriverInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} | {} | {} | GLSL {} | {} {} | device {}/{}{}",
            self.vendor,
            self.renderer,
            self.version,
            self.glsl_version,
            self.context_description(),
            self.version_numbers,
            self.device.index,
            self.device.device_count,
            if self.device.software {
                " (software)"
            } else {
                ""
            }
        )
    }
}
