//! A linked program's interface as the driver reports it, through the program interface queries
//! (`glGetProgramInterfaceiv`, `glGetProgramResourceName`, `glGetProgramResourceiv`; GL 4.3,
//! GLES 3.1).

use glow::HasContext;

use crate::context::{ExtFns, GlContext, InterfaceFns};
use crate::driver::GlApi;
use crate::program::{
    BlockMember, ForeignObject, InterfaceBlock, Program, ProgramInterface, ProgramOutput,
    ReflectError, ShaderStage, StageMask, Varying, clear_errors,
};

/// The longest resource name read, in bytes (with its NUL); longer names are cut.
const MAX_NAME_BYTES: usize = 64 * 1024;
/// The most resources read from one interface, or variables from one block.
const MAX_RESOURCES: u32 = 1 << 16;

/// Each stage's `GL_REFERENCED_BY_*_SHADER` property.
fn referenced_by_prop(stage: ShaderStage) -> u32 {
    match stage {
        ShaderStage::Vertex => glow::REFERENCED_BY_VERTEX_SHADER,
        ShaderStage::Fragment => glow::REFERENCED_BY_FRAGMENT_SHADER,
        ShaderStage::Compute => glow::REFERENCED_BY_COMPUTE_SHADER,
        ShaderStage::Geometry => glow::REFERENCED_BY_GEOMETRY_SHADER,
        ShaderStage::TessControl => glow::REFERENCED_BY_TESS_CONTROL_SHADER,
        ShaderStage::TessEvaluation => glow::REFERENCED_BY_TESS_EVALUATION_SHADER,
    }
}

/// The `GL_REFERENCED_BY_*_SHADER` properties the context accepts (those of its stages), with
/// their stages.
fn referenced_by_props(ext: &ExtFns) -> Vec<(ShaderStage, u32)> {
    ShaderStage::ALL
        .into_iter()
        .filter(|&stage| ext.stages.contains(stage))
        .map(|stage| (stage, referenced_by_prop(stage)))
        .collect()
}

/// Stages a program may hold, with the `glGetProgramiv` query only a program with that stage
/// answers without `GL_INVALID_OPERATION`.
fn stage_probes(ext: &ExtFns) -> Vec<(ShaderStage, u32)> {
    ShaderStage::ALL
        .into_iter()
        .filter(|&stage| ext.stages.contains(stage))
        .filter_map(|stage| {
            let pname = match stage {
                ShaderStage::Compute => glow::COMPUTE_WORK_GROUP_SIZE,
                ShaderStage::Geometry => glow::GEOMETRY_VERTICES_OUT,
                ShaderStage::TessControl => glow::TESS_CONTROL_OUTPUT_VERTICES,
                ShaderStage::TessEvaluation => glow::TESS_GEN_MODE,
                ShaderStage::Vertex | ShaderStage::Fragment => return None,
            };
            Some((stage, pname))
        })
        .collect()
}

/// Program interface queries on one program.
struct Query<'a> {
    f: InterfaceFns,
    program: u32,
    referenced_by: &'a [(ShaderStage, u32)],
}

impl Query<'_> {
    /// `GL_ACTIVE_RESOURCES` (bounded) and `GL_MAX_NAME_LENGTH` (bounded, at least 1) of an
    /// interface.
    ///
    /// # Safety
    /// The context that owns the program is current and `interface` is a valid interface.
    unsafe fn count(&self, interface: u32) -> (u32, usize) {
        let (mut count, mut max_name) = (0i32, 0i32);
        // SAFETY: the caller's contract; each call writes one GLint.
        unsafe {
            (self.f.get_interface_iv)(self.program, interface, glow::ACTIVE_RESOURCES, &mut count);
            if interface != glow::ATOMIC_COUNTER_BUFFER {
                (self.f.get_interface_iv)(
                    self.program,
                    interface,
                    glow::MAX_NAME_LENGTH,
                    &mut max_name,
                );
            }
        }
        (
            (count.max(0) as u32).min(MAX_RESOURCES),
            (max_name.max(1) as usize).min(MAX_NAME_BYTES),
        )
    }

    /// A resource's name.
    ///
    /// # Safety
    /// As for [`Query::count`]; `index` is below the interface's count.
    unsafe fn name(&self, interface: u32, index: u32, max_name: usize) -> String {
        let mut buffer = vec![0u8; max_name];
        let mut length = 0i32;
        // SAFETY: the caller's contract; the driver writes at most `buffer.len()` bytes (the
        // size passed) and the written length to `length`.
        unsafe {
            (self.f.get_resource_name)(
                self.program,
                interface,
                index,
                buffer.len() as i32,
                &mut length,
                buffer.as_mut_ptr().cast(),
            );
        }
        let length = (length.max(0) as usize).min(buffer.len());
        buffer.truncate(length);
        String::from_utf8_lossy(&buffer).into_owned()
    }

    /// The values of single-valued properties of a resource, in order (0 for any the driver did
    /// not write).
    ///
    /// # Safety
    /// As for [`Query::name`]; every property is single-valued and valid for the interface.
    unsafe fn props(&self, interface: u32, index: u32, props: &[u32]) -> Vec<i32> {
        let mut values = vec![0i32; props.len()];
        let mut written = 0i32;
        // SAFETY: the caller's contract; the driver writes at most `values.len()` GLints.
        unsafe {
            (self.f.get_resource_iv)(
                self.program,
                interface,
                index,
                props.len() as i32,
                props.as_ptr(),
                values.len() as i32,
                &mut written,
                values.as_mut_ptr(),
            );
        }
        values
    }

    /// The stages that reference a resource.
    ///
    /// # Safety
    /// As for [`Query::name`]; the interface has `GL_REFERENCED_BY_*` properties.
    unsafe fn referenced_by(&self, interface: u32, index: u32) -> StageMask {
        let props: Vec<u32> = self.referenced_by.iter().map(|&(_, p)| p).collect();
        // SAFETY: the caller's contract; the properties are those the context accepts.
        let values = unsafe { self.props(interface, index, &props) };
        self.referenced_by
            .iter()
            .zip(values)
            .filter(|&(_, v)| v != 0)
            .fold(StageMask::default(), |mask, (&(stage, _), _)| {
                mask.with(stage)
            })
    }

    /// Fragment outputs, sorted.
    ///
    /// # Safety
    /// As for [`Query::count`].
    unsafe fn outputs(&self, with_index: bool) -> Vec<ProgramOutput> {
        // SAFETY: the caller's contract; indices stay below the count; the properties are valid
        // for GL_PROGRAM_OUTPUT (GL_LOCATION_INDEX only where the context has it).
        unsafe {
            let (count, max_name) = self.count(glow::PROGRAM_OUTPUT);
            let mut props = vec![
                glow::TYPE,
                glow::ARRAY_SIZE,
                glow::LOCATION,
                glow::REFERENCED_BY_FRAGMENT_SHADER,
            ];
            if with_index {
                props.push(glow::LOCATION_INDEX);
            }
            let mut outputs: Vec<ProgramOutput> = (0..count)
                .filter_map(|i| {
                    let v = self.props(glow::PROGRAM_OUTPUT, i, &props);
                    (v[3] != 0).then(|| ProgramOutput {
                        name: self.name(glow::PROGRAM_OUTPUT, i, max_name),
                        gl_type: v[0] as u32,
                        size: v[1],
                        location: v[2],
                        index: if with_index { v[4] } else { -1 },
                    })
                })
                .collect();
            outputs.sort();
            outputs
        }
    }

    /// Transform-feedback varyings in the driver's index order.
    ///
    /// # Safety
    /// As for [`Query::count`].
    unsafe fn varyings(&self) -> Vec<Varying> {
        // SAFETY: the caller's contract; indices stay below the count.
        unsafe {
            let interface = glow::TRANSFORM_FEEDBACK_VARYING;
            let (count, max_name) = self.count(interface);
            (0..count)
                .map(|i| {
                    let v = self.props(interface, i, &[glow::TYPE, glow::ARRAY_SIZE]);
                    Varying {
                        name: self.name(interface, i, max_name),
                        gl_type: v[0] as u32,
                        size: v[1],
                    }
                })
                .collect()
        }
    }

    /// Uniform or storage blocks with their members, sorted.
    ///
    /// # Safety
    /// As for [`Query::count`]; `block_interface` is `GL_UNIFORM_BLOCK` with `GL_UNIFORM`, or
    /// `GL_SHADER_STORAGE_BLOCK` with `GL_BUFFER_VARIABLE`.
    unsafe fn blocks(&self, block_interface: u32, member_interface: u32) -> Vec<InterfaceBlock> {
        // SAFETY: the caller's contract; block indices stay below the block count, member
        // indices are the driver's own GL_ACTIVE_VARIABLES (read into a buffer of the size
        // GL_NUM_ACTIVE_VARIABLES gave, bounded), and the properties are valid for each
        // interface.
        unsafe {
            let (count, max_name) = self.count(block_interface);
            let (_, max_member_name) = self.count(member_interface);
            let mut blocks: Vec<InterfaceBlock> = (0..count)
                .map(|i| {
                    let v = self.props(
                        block_interface,
                        i,
                        &[
                            glow::BUFFER_BINDING,
                            glow::BUFFER_DATA_SIZE,
                            glow::NUM_ACTIVE_VARIABLES,
                        ],
                    );
                    let n = (v[2].max(0) as u32).min(MAX_RESOURCES) as usize;
                    let mut indices = vec![0i32; n];
                    let mut written = 0i32;
                    if n > 0 {
                        (self.f.get_resource_iv)(
                            self.program,
                            block_interface,
                            i,
                            1,
                            &glow::ACTIVE_VARIABLES,
                            n as i32,
                            &mut written,
                            indices.as_mut_ptr(),
                        );
                    }
                    indices.truncate((written.max(0) as usize).min(n));
                    let mut members: Vec<BlockMember> = indices
                        .into_iter()
                        .map(|m| {
                            let m = m as u32;
                            let p = self.props(
                                member_interface,
                                m,
                                &[
                                    glow::TYPE,
                                    glow::ARRAY_SIZE,
                                    glow::OFFSET,
                                    glow::ARRAY_STRIDE,
                                    glow::MATRIX_STRIDE,
                                    glow::IS_ROW_MAJOR,
                                ],
                            );
                            BlockMember {
                                name: self.name(member_interface, m, max_member_name),
                                gl_type: p[0] as u32,
                                size: p[1],
                                offset: p[2],
                                array_stride: p[3],
                                matrix_stride: p[4],
                                row_major: p[5] != 0,
                            }
                        })
                        .collect();
                    members.sort();
                    InterfaceBlock {
                        name: self.name(block_interface, i, max_name),
                        binding: v[0],
                        data_size: v[1],
                        members,
                        referenced_by: self.referenced_by(block_interface, i),
                    }
                })
                .collect();
            blocks.sort();
            blocks
        }
    }

    /// Every active uniform with the stages that use it, sorted by name.
    ///
    /// # Safety
    /// As for [`Query::count`].
    unsafe fn uniform_static_use(&self) -> Vec<(String, StageMask)> {
        // SAFETY: the caller's contract; indices stay below the count.
        unsafe {
            let (count, max_name) = self.count(glow::UNIFORM);
            let mut uses: Vec<(String, StageMask)> = (0..count)
                .map(|i| {
                    (
                        self.name(glow::UNIFORM, i, max_name),
                        self.referenced_by(glow::UNIFORM, i),
                    )
                })
                .collect();
            uses.sort();
            uses
        }
    }
}

fn check(gl: &glow::Context, what: &'static str) -> Result<(), ReflectError> {
    // SAFETY: glGetError on the current context.
    match unsafe { gl.get_error() } {
        glow::NO_ERROR => Ok(()),
        code => Err(ReflectError::Gl { code, what }),
    }
}

/// The stages of a linked program that has no record of them (one loaded from a binary); see
/// [`GlContext::load_program_binary`] for the rules.
pub(crate) fn infer_stages(ext: &ExtFns, gl: &glow::Context, raw: glow::Program) -> StageMask {
    let both = ShaderStage::Vertex.bit().with(ShaderStage::Fragment);
    let Some(get_program_iv) = ext.get_program_iv else {
        return both;
    };
    let program = raw.0.get();
    let mut probed = StageMask::default();
    let mut referenced = StageMask::default();
    // The stages that use the first stage's inputs and the last stage's outputs.
    let (mut first, mut last) = (StageMask::default(), StageMask::default());
    // SAFETY: the context is current and owns the linked program; each probe writes at most
    // three GLints (GL_COMPUTE_WORK_GROUP_SIZE) into a buffer of three; a probe of a stage the
    // program lacks raises GL_INVALID_OPERATION, which is read and cleared here; the interface
    // queries are bounded as in `Query`.
    let separable = unsafe {
        clear_errors(gl);
        for (stage, pname) in stage_probes(ext) {
            let mut values = [0i32; 3];
            get_program_iv(program, pname, values.as_mut_ptr());
            if gl.get_error() == glow::NO_ERROR {
                probed = probed.with(stage);
            }
        }
        clear_errors(gl);
        if probed.contains(ShaderStage::Compute) {
            return ShaderStage::Compute.bit();
        }
        if let Some(f) = ext.interface {
            let referenced_by = referenced_by_props(ext);
            let query = Query {
                f,
                program,
                referenced_by: &referenced_by,
            };
            for interface in [
                glow::PROGRAM_INPUT,
                glow::PROGRAM_OUTPUT,
                glow::UNIFORM,
                glow::UNIFORM_BLOCK,
                glow::SHADER_STORAGE_BLOCK,
                glow::BUFFER_VARIABLE,
                glow::ATOMIC_COUNTER_BUFFER,
            ] {
                let (count, _) = query.count(interface);
                for i in 0..count {
                    let mask = query.referenced_by(interface, i);
                    referenced.0 |= mask.0;
                    match interface {
                        glow::PROGRAM_INPUT => first.0 |= mask.0,
                        glow::PROGRAM_OUTPUT => last.0 |= mask.0,
                        _ => {}
                    }
                }
            }
            clear_errors(gl);
        }
        let separable = ext.pipelines.is_some()
            && gl.get_program_parameter_i32(raw, glow::PROGRAM_SEPARABLE) != 0;
        clear_errors(gl);
        separable
    };
    let mut stages = StageMask(probed.0 | referenced.0);
    if separable {
        return stages;
    }
    if ext.api == GlApi::Gles {
        // GLES links a non-separable program only with both.
        return StageMask(stages.0 | both.0);
    }
    // Desktop: the vertex stage is there unless the first stage's inputs belong to the
    // fragment stage; the fragment stage unless the last stage's outputs belong to a
    // pre-rasterization stage.
    if !first.contains(ShaderStage::Fragment) {
        stages = stages.with(ShaderStage::Vertex);
    }
    let pre_rasterization = [
        ShaderStage::Vertex,
        ShaderStage::TessEvaluation,
        ShaderStage::Geometry,
    ];
    if !pre_rasterization.iter().any(|&s| last.contains(s)) {
        stages = stages.with(ShaderStage::Fragment);
    }
    stages
}

impl GlContext {
    /// What the driver reports about a linked program beyond attributes and uniforms
    /// ([`ProgramInterface`]): fragment outputs (location and `GL_LOCATION_INDEX`),
    /// transform-feedback varyings (in the driver's index order, the order
    /// `glGetTransformFeedbackVarying` answers), uniform and shader storage blocks (binding,
    /// data size, members with type, array size, offset, strides and row-majorness, and the
    /// stages that use them), the stages that use each uniform, the compute work-group size and
    /// `GL_PROGRAM_SEPARABLE`. Lists other than the varyings are sorted by name. `stages` is
    /// [`Program::stages`].
    ///
    /// A context without program interface queries (below GL 4.3 / GLES 3.1) leaves outputs,
    /// blocks and static use empty and reads the varyings with `glGetTransformFeedbackVarying`.
    pub fn program_interface(&self, program: &Program) -> Result<ProgramInterface, ReflectError> {
        if !self.owns(&program.inner) {
            return Err(ForeignObject.into());
        }
        let gl = self.inner.gl()?;
        let ext = self.inner.ext;
        let raw = program.raw;
        let stages = program.stages();
        // SAFETY: the context is current and owns the program, which is linked (checked first);
        // the compute work-group size is read only from a program with a compute stage, into a
        // buffer of the three GLints the query writes; the interface queries are the driver's
        // (loaded because the context has them) and `Query` keeps every read bounded.
        unsafe {
            if !gl.get_program_link_status(raw) {
                return Err(ReflectError::NotLinked);
            }
            clear_errors(gl);
            let separable = ext.pipelines.is_some()
                && gl.get_program_parameter_i32(raw, glow::PROGRAM_SEPARABLE) != 0;
            let compute_work_group_size = match ext.get_program_iv {
                Some(get) if stages.contains(ShaderStage::Compute) => {
                    let mut size = [0i32; 3];
                    get(
                        raw.0.get(),
                        glow::COMPUTE_WORK_GROUP_SIZE,
                        size.as_mut_ptr(),
                    );
                    Some(size.map(|v| v.max(0) as u32))
                }
                _ => None,
            };
            check(gl, "program parameters")?;
            let mut interface = ProgramInterface {
                stages,
                separable,
                compute_work_group_size,
                ..ProgramInterface::default()
            };
            match ext.interface {
                Some(f) => {
                    let referenced_by = referenced_by_props(&ext);
                    let query = Query {
                        f,
                        program: raw.0.get(),
                        referenced_by: &referenced_by,
                    };
                    interface.outputs = query.outputs(ext.location_index);
                    check(gl, "fragment outputs")?;
                    interface.varyings = query.varyings();
                    check(gl, "transform-feedback varyings")?;
                    interface.uniform_blocks = query.blocks(glow::UNIFORM_BLOCK, glow::UNIFORM);
                    check(gl, "uniform blocks")?;
                    interface.storage_blocks =
                        query.blocks(glow::SHADER_STORAGE_BLOCK, glow::BUFFER_VARIABLE);
                    check(gl, "shader storage blocks")?;
                    interface.uniform_static_use = query.uniform_static_use();
                    check(gl, "uniform static use")?;
                }
                None => {
                    let count = gl
                        .get_program_parameter_i32(raw, glow::TRANSFORM_FEEDBACK_VARYINGS)
                        .max(0) as u32;
                    interface.varyings = (0..count.min(MAX_RESOURCES))
                        .filter_map(|i| gl.get_transform_feedback_varying(raw, i))
                        .map(|v| Varying {
                            name: v.name,
                            gl_type: v.tftype,
                            size: v.size,
                        })
                        .collect();
                    check(gl, "transform-feedback varyings")?;
                }
            }
            Ok(interface)
        }
    }
}
